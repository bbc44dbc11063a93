# tests/dispatch_mpi/run_same_weights.cmake: one trainer program run in process and under
# mpiexec -np NP must write byte-identical weights, each run printing what shows it used the
# expected backend (and engine, placement): every regex of LOCAL_EXPECT in the in-process output,
# every regex of MPI_EXPECT in the MPI one (';'-separated lists).
# -DMPIEXEC=... -DEXE=... -DDIR=<scratch dir> -DNP=<processes> -DLOCAL_EXPECT=... -DMPI_EXPECT=...
# [-DARGS=<key=value overrides for both runs, ';'-separated>]
file(REMOVE_RECURSE ${DIR})
file(MAKE_DIRECTORY ${DIR})
execute_process(COMMAND ${EXE} ${DIR}/local.bin trainer.default_local_dir=${DIR}/local ${ARGS}
                RESULT_VARIABLE rc1 OUTPUT_VARIABLE o1 ERROR_VARIABLE e1 TIMEOUT 300)
message("in process: exit ${rc1}\n${o1}${e1}")
execute_process(COMMAND ${MPIEXEC} --oversubscribe -np ${NP} ${EXE} ${DIR}/mpi.bin trainer.default_local_dir=${DIR}/mpi ${ARGS}
                RESULT_VARIABLE rc2 OUTPUT_VARIABLE o2 ERROR_VARIABLE e2 TIMEOUT 300)
message("mpiexec -np ${NP}: exit ${rc2}\n${o2}${e2}")
if(NOT rc1 EQUAL 0 OR NOT rc2 EQUAL 0)
  message(FATAL_ERROR "a run failed")
endif()
foreach(re IN LISTS LOCAL_EXPECT)
  if(NOT o1 MATCHES "${re}")
    message(FATAL_ERROR "the in-process run did not print '${re}' (backend, engine or placement)")
  endif()
endforeach()
foreach(re IN LISTS MPI_EXPECT)
  if(NOT o2 MATCHES "${re}")
    message(FATAL_ERROR "the MPI run did not print '${re}' (backend, engine or placement)")
  endif()
endforeach()
file(SHA256 ${DIR}/local.bin h1)
file(SHA256 ${DIR}/mpi.bin h2)
file(SIZE ${DIR}/local.bin s1)
if(NOT h1 STREQUAL h2 OR s1 EQUAL 0)
  message(FATAL_ERROR "the weights differ: in process ${h1}, MPI ${h2} (${s1} bytes)")
endif()
message("identical weights (${s1} bytes, sha256 ${h1})")
