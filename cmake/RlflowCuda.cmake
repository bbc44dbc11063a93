# RLFLOW_CUDA_COMPILE_CHECK (make test where no GPU answers): the CUDA tests only prove that the
# CUDA code compiles; the CUDA examples and benchmarks, which only run on a GPU, are left out.
option(RLFLOW_CUDA_COMPILE_CHECK "Build the CUDA tests as compile checks only; skip the CUDA examples and benchmarks" OFF)
# CUDA detection (toolchain.md §6): CUDA is on when nvcc is found; arch 90 by default.
set(RLFLOW_HAS_NVCC OFF)
if(RLFLOW_ENABLE_CUDA)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    enable_language(CUDA)
    if(CMAKE_VERSION VERSION_LESS 3.26 AND CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.0)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")   # CMake 3.25 lacks CUDA20 for nvcc
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
      list(APPEND CMAKE_CUDA_COMPILE_FEATURES cuda_std_20)
      set(CMAKE_CUDA20_COMPILE_FEATURES cuda_std_20)
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    find_package(CCCL CONFIG HINTS "${CUDAToolkit_LIBRARY_DIR}/cmake")
    set(RLFLOW_HAS_NVCC ON)
    if(RLFLOW_CUDA_COMPILE_CHECK)
      # Nothing runs these programs, so nothing is optimised: the host code (nvcc without -O) and
      # the device code (cicc -O0: its front end reports the same errors, at ~0.6 of -O3's time);
      # with a virtual architecture only PTX is made.
      set(CMAKE_CUDA_FLAGS_RELEASE "-DNDEBUG -Xcicc -O0")
      message(STATUS "rlflow: CUDA compile check: the CUDA tests are built unoptimised (${CMAKE_CUDA_ARCHITECTURES}), the CUDA examples and benchmarks are not built")
    endif()
    message(STATUS "rlflow: CUDA ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES}")
  else()
    message(STATUS "rlflow: nvcc not found; CUDA translation units are skipped")
  endif()
endif()

# rlflow_cuda_sources(<target> <sources...>): adds CUDA sources with the common flags.
function(rlflow_cuda_target target)
  set_target_properties(${target} PROPERTIES CUDA_STANDARD 20 CUDA_STANDARD_REQUIRED ON)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr --extended-lambda>)
  target_link_libraries(${target} PRIVATE CUDA::cudart)
  if(TARGET CCCL::CCCL)
    target_link_libraries(${target} PRIVATE CCCL::CCCL)
  endif()
endfunction()
