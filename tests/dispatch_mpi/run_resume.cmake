# tests/dispatch_mpi/run_resume.cmake: a checkpoint written by the MPI job resumes (a) in process
# to exactly the weights of an uninterrupted 4-step in-process run, and (b) under mpiexec on fewer
# ranks (1 worker instead of 2) to completion. -DMPIEXEC=... -DEXE=... -DDIR=<scratch dir>
file(REMOVE_RECURSE ${DIR})
file(MAKE_DIRECTORY ${DIR})
function(run label)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e TIMEOUT 300)
  message("${label}: exit ${rc}\n${o}${e}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${label} failed")
  endif()
endfunction()
run("uninterrupted, in process" ${EXE} ${DIR}/straight.bin trainer.default_local_dir=${DIR}/straight)
run("2 steps on 3 processes, checkpoint" ${MPIEXEC} --oversubscribe -np 3 ${EXE} ${DIR}/half.bin
    trainer.total_training_steps=2 trainer.save_freq=2 trainer.default_local_dir=${DIR}/ckpt)
file(COPY ${DIR}/ckpt DESTINATION ${DIR}/copy)
run("resume in process to 4 steps" ${EXE} ${DIR}/resumed.bin trainer.resume_mode=auto trainer.default_local_dir=${DIR}/ckpt)
# it really resumed: the resumed run logged steps 3 and 4 only
file(READ ${DIR}/resumed.bin.metrics.jsonl r)
if(r MATCHES "\"step\":1," OR NOT r MATCHES "\"step\":3,")
  message(FATAL_ERROR "the in-process run did not resume from step 2: ${r}")
endif()
file(SHA256 ${DIR}/straight.bin h1)
file(SHA256 ${DIR}/resumed.bin h2)
if(NOT h1 STREQUAL h2)
  message(FATAL_ERROR "resumed weights differ from the uninterrupted run: ${h1} vs ${h2}")
endif()
run("resume on 2 processes (1 worker)" ${MPIEXEC} --oversubscribe -np 2 ${EXE} ${DIR}/fewer.bin
    trainer.resume_mode=auto trainer.n_gpus_per_node=1 trainer.default_local_dir=${DIR}/copy/ckpt)
file(READ ${DIR}/fewer.bin.metrics.jsonl m)
if(NOT m MATCHES "\"step\":4," OR m MATCHES "\"step\":1,")
  message(FATAL_ERROR "the resumed run on fewer ranks did not reach step 4: ${m}")
endif()
message("ok: resumed in process to identical weights; resumed on fewer ranks to step 4")
