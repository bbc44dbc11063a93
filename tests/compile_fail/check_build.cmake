# Runs one compile-fail case: builds TARGET in BINARY_DIR and checks that the build fails, that
# its output matches EXPECT (the '// build error: <regex>' line), that it matches none of the
# '// no build error: <regex>' lines of SOURCE, and, with a '// error count: N' line, that the
# compiler printed exactly N lines with ': error: ' (one mistake, one message).
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BINARY_DIR} --target ${TARGET}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(rc EQUAL 0)
  message(FATAL_ERROR "${TARGET} built, but it must fail with: ${EXPECT}")
endif()
if(NOT out MATCHES "${EXPECT}")
  message(FATAL_ERROR "${TARGET}: the build output does not match '${EXPECT}':\n${out}")
endif()
file(STRINGS ${SOURCE} forbidden REGEX "// no build error: ")
foreach(line IN LISTS forbidden)
  string(REGEX REPLACE ".*// no build error: *" "" re "${line}")
  if(out MATCHES "${re}")
    message(FATAL_ERROR "${TARGET}: the build output also matches '${re}', which this case forbids:\n${out}")
  endif()
endforeach()
file(STRINGS ${SOURCE} count_line REGEX "// error count: [0-9]+")
if(count_line)
  string(REGEX REPLACE ".*// error count: *([0-9]+).*" "\\1" want "${count_line}")
  string(REGEX MATCHALL ": error: " errors "${out}")
  list(LENGTH errors got)
  if(NOT got EQUAL want)
    message(FATAL_ERROR "${TARGET}: the compiler printed ${got} errors, this case allows ${want}:\n${out}")
  endif()
endif()
message(STATUS "${TARGET}: failed to build as expected (${EXPECT})")
