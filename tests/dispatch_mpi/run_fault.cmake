# tests/dispatch_mpi/run_fault.cmake: runs test_mpi_fault under mpiexec and checks the failure is
# reported within BOUND seconds, names the dead rank, and leaves no process of the job running.
# -DMPIEXEC=... -DEXE=... -DHOW=kill|stop|throw -DEXTRA="--enable-recovery" -DEXPECT=<regex> -DBOUND=<s>
# [-DALLOW_ZERO=1]
separate_arguments(extra UNIX_COMMAND "${EXTRA}")
string(TIMESTAMP t0 "%s")
execute_process(COMMAND ${MPIEXEC} --oversubscribe ${extra} -np 3 ${EXE} ${HOW}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
string(TIMESTAMP t1 "%s")
math(EXPR took "${t1} - ${t0}")
message("exit: ${rc}, ${took} s\n--- stdout\n${out}\n--- stderr\n${err}")
# (Open MPI 4.1's mpiexec --enable-recovery exits 0 even after MPI_Abort: ALLOW_ZERO)
if(rc EQUAL 0 AND NOT ALLOW_ZERO)
  message(FATAL_ERROR "the job exited 0: the failure was not reported")
endif()
if(took GREATER BOUND)
  message(FATAL_ERROR "the failure took ${took} s to surface (bound ${BOUND} s)")
endif()
if(NOT "${out}${err}" MATCHES "${EXPECT}")
  message(FATAL_ERROR "the output does not match '${EXPECT}'")
endif()
execute_process(COMMAND sleep 1)
# the job's processes have command lines starting with the executable's path
execute_process(COMMAND pgrep -f "^${EXE}" OUTPUT_VARIABLE left RESULT_VARIABLE prc)
if(prc EQUAL 0)
  message(FATAL_ERROR "processes of the job are still running (pids: ${left})")
endif()
message("ok: reported in ${took} s, no process left")
