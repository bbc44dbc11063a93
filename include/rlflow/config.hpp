// rlflow/config.hpp: version, feature macros and the host/device annotation.
// Defines RLFLOW_HOST_DEVICE (alias RLFLOW_HD), RLFLOW_HAS_CUDA, the library version.
// Includes nothing heavy; every other header may include it first.
#pragma once

#define RLFLOW_VERSION_MAJOR 0
#define RLFLOW_VERSION_MINOR 1
#define RLFLOW_VERSION_PATCH 0

#if defined(__CUDACC__)
#define RLFLOW_HOST_DEVICE __host__ __device__
#define RLFLOW_HAS_CUDA 1
#else
#define RLFLOW_HOST_DEVICE
#ifndef RLFLOW_HAS_CUDA
#define RLFLOW_HAS_CUDA 0
#endif
#endif
#define RLFLOW_HD RLFLOW_HOST_DEVICE

#if defined(__CUDACC__)
#define RLFLOW_KERNEL __global__ __attribute__((visibility("hidden")))
#endif

// RLFLOW_SEPARATE_COMPILATION (docs/development.md, "Compile time"): the common instantiations
// come from the compiled part (rlflow/impl/src.hpp). RLFLOW_SC_NOINLINE marks the heavy worker
// methods of those instantiations, so that a caller does not inline (and so compile) their bodies
// and what they reach; without the macro it is empty and nothing changes.
#if defined(RLFLOW_SEPARATE_COMPILATION)
#define RLFLOW_SC_NOINLINE [[gnu::noinline]]
#else
#define RLFLOW_SC_NOINLINE
#endif

namespace rlflow {
inline constexpr int version_major = RLFLOW_VERSION_MAJOR;
inline constexpr int version_minor = RLFLOW_VERSION_MINOR;
inline constexpr int version_patch = RLFLOW_VERSION_PATCH;
}  // namespace rlflow
