# Precompiled headers for rlflow's own test and example programs (option RLFLOW_PCH, ON).
#
# Every such program includes most of rlflow: parsing <rlflow/rlflow.hpp> is about half of a
# translation unit's compile time when the program's own code is small. The header is parsed once
# per kind of program, by a donor target, and each program reuses the donor's precompiled header
# (CMake's REUSE_FROM): 'test' (the in-process tests: rlflow, the compiled part, Catch2) and
# 'program' (the examples and the MPI tests: rlflow, the compiled part and, when found, the MPI
# backend). A donor is compiled with the definitions and options of the programs that use it,
# RLFLOW_TESTS_OPT included: a program compiled at another optimisation level must not reuse it
# (GCC 12's IPA passes crash on an -O3 translation unit that reuses an -O1 precompiled header).
# A compiler that finds the precompiled header unusable for a program (-Winvalid-pch warns)
# parses the headers itself, so the result never depends on the option. ccache caches such
# compiles when its sloppiness allows it (RLFLOW_CCACHE sets pch_defines and time_macros).
#
#   rlflow_use_pch(<target> test|program)
option(RLFLOW_PCH "Precompile rlflow's headers once for the project's own tests and examples" ON)

function(rlflow_pch_donor kind)
  set(donor rlflow_pch_${kind})
  if(TARGET ${donor})
    return()
  endif()
  set(empty ${PROJECT_BINARY_DIR}/rlflow_pch/${kind}.cpp)
  if(NOT EXISTS ${empty})
    file(WRITE ${empty} "// the donor of the '${kind}' precompiled header (cmake/RlflowPch.cmake)\n")
  endif()
  add_library(${donor} OBJECT EXCLUDE_FROM_ALL ${empty})
  target_link_libraries(${donor} PRIVATE rlflow::rlflow)
  rlflow_link_compiled_part(${donor})
  rlflow_test_opt(${donor})
  if(kind STREQUAL "test")
    target_link_libraries(${donor} PRIVATE Catch2::Catch2WithMain)
    target_precompile_headers(${donor} PRIVATE <rlflow/rlflow.hpp> <catch2/catch.hpp>)
  elseif(kind STREQUAL "program")
    if(TARGET rlflow_mpi)
      target_link_libraries(${donor} PRIVATE rlflow::mpi)
    endif()
    target_precompile_headers(${donor} PRIVATE <rlflow/rlflow.hpp>)
  else()
    message(FATAL_ERROR "rlflow_use_pch(... ${kind}): the kinds are 'test' and 'program'")
  endif()
endfunction()

function(rlflow_use_pch target kind)
  if(NOT RLFLOW_PCH)
    return()
  endif()
  rlflow_pch_donor(${kind})
  target_precompile_headers(${target} REUSE_FROM rlflow_pch_${kind})
endfunction()
