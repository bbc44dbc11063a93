# tests/dispatch_mpi/run_async.cmake: the separate_async trainer (K = 0) in process and under
# mpiexec -np 5 (driver + 2 trainer + 2 rollout processes) must write byte-identical weights,
# the MPI run through the 'mpi' checkpoint engine with its rollout pool on world ranks 3-4.
# -DMPIEXEC=... -DEXE=... -DDIR=<scratch dir>
file(REMOVE_RECURSE ${DIR})
file(MAKE_DIRECTORY ${DIR})
execute_process(COMMAND ${EXE} ${DIR}/local.bin trainer.default_local_dir=${DIR}/local
                RESULT_VARIABLE rc1 OUTPUT_VARIABLE o1 ERROR_VARIABLE e1 TIMEOUT 300)
message("in process: exit ${rc1}\n${o1}${e1}")
execute_process(COMMAND ${MPIEXEC} --oversubscribe -np 5 ${EXE} ${DIR}/mpi.bin trainer.default_local_dir=${DIR}/mpi
                RESULT_VARIABLE rc2 OUTPUT_VARIABLE o2 ERROR_VARIABLE e2 TIMEOUT 300)
message("mpiexec -np 5: exit ${rc2}\n${o2}${e2}")
if(NOT rc1 EQUAL 0 OR NOT rc2 EQUAL 0)
  message(FATAL_ERROR "a run failed")
endif()
if(NOT o1 MATCHES "checkpoint engine: in_process" OR NOT o2 MATCHES "checkpoint engine: mpi"
   OR NOT o2 MATCHES "rollout pool on world ranks 3")
  message(FATAL_ERROR "the runs did not use the expected backends, engines or placement")
endif()
file(SHA256 ${DIR}/local.bin h1)
file(SHA256 ${DIR}/mpi.bin h2)
file(SIZE ${DIR}/local.bin s1)
if(NOT h1 STREQUAL h2 OR s1 EQUAL 0)
  message(FATAL_ERROR "the weights differ: in process ${h1}, MPI ${h2} (${s1} bytes)")
endif()
message("identical weights (${s1} bytes, sha256 ${h1})")
