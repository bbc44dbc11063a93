// rlflow/core/config.hpp: version, feature macros and the host/device annotation.
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

// Non-template functions under RLFLOW_SEPARATE_COMPILATION (Asio's pattern). A header declares
// such a function (or a class's member) and defines it in an impl/*.ipp file that it includes at
// its end when RLFLOW_DEFINE_BODIES is 1; each definition is marked RLFLOW_DECL.
// - Header-only (the default): RLFLOW_DECL is `inline` and every .ipp is included, so nothing
//   changes for a program that does not opt in.
// - A program's translation units with the macro: RLFLOW_DEFINE_BODIES is 0, so they see the
//   declarations only and call the compiled part's definitions (no body to parse or optimise).
// - The compiled part (RLFLOW_COMPILED_PART, rlflow/impl/src.hpp): RLFLOW_DECL is empty, so each
//   function is defined once there, with external linkage.
#if defined(RLFLOW_SEPARATE_COMPILATION)
#define RLFLOW_DECL
#else
#define RLFLOW_DECL inline
#endif
#if !defined(RLFLOW_SEPARATE_COMPILATION) || defined(RLFLOW_COMPILED_PART)
#define RLFLOW_DEFINE_BODIES 1
#else
#define RLFLOW_DEFINE_BODIES 0
#endif

namespace rlflow {
inline constexpr int version_major = RLFLOW_VERSION_MAJOR;
inline constexpr int version_minor = RLFLOW_VERSION_MINOR;
inline constexpr int version_patch = RLFLOW_VERSION_PATCH;
}  // namespace rlflow
