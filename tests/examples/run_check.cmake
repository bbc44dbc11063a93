# Runs EXE with ARGS (arguments separated by '|') and checks what a user would see:
#   EXPECT_RC  the exit code
#   MATCH      a regex the combined stdout+stderr must match
#   NOT_MATCH  a regex it must not match
#   MIN_SCORE  the number after 'final critic/score/mean' must be at least this
string(REPLACE "|" ";" ARGS "${ARGS}")
execute_process(COMMAND ${EXE} ${ARGS} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                TIMEOUT 540)
set(all "${out}${err}")
if(NOT rc STREQUAL "${EXPECT_RC}")
  message(FATAL_ERROR "'${EXE} ${ARGS}' exited with ${rc}, expected ${EXPECT_RC}; output:\n${all}")
endif()
if(DEFINED MATCH AND NOT all MATCHES "${MATCH}")
  message(FATAL_ERROR "output of '${EXE} ${ARGS}' does not match '${MATCH}':\n${all}")
endif()
if(DEFINED NOT_MATCH AND all MATCHES "${NOT_MATCH}")
  message(FATAL_ERROR "output of '${EXE} ${ARGS}' matches '${NOT_MATCH}':\n${all}")
endif()
if(DEFINED MIN_SCORE)
  if(NOT out MATCHES "final critic/score/mean ([0-9.]+)")
    message(FATAL_ERROR "no final score in the output:\n${all}")
  endif()
  set(score ${CMAKE_MATCH_1})
  if(score LESS MIN_SCORE)
    message(FATAL_ERROR "final critic/score/mean ${score} < ${MIN_SCORE}: the program did not learn the task")
  endif()
  message(STATUS "final critic/score/mean ${score} (>= ${MIN_SCORE})")
endif()
