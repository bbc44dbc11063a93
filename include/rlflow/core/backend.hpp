// rlflow/core/backend.hpp: execution-policy system tags in the Thrust style.
// Defines cpu::tag / cpu::par, cuda::tag / cuda::par (with .on(stream)), execution_policy,
// system_of_t. Does not launch anything; kernels pick their implementation from the tag.
#pragma once
#include <type_traits>

namespace rlflow {

namespace cpu {
struct tag {};
//! The CPU execution policy: plain loops (and OpenMP where enabled).
struct par_t { using system = tag; };
inline constexpr par_t par{};
}  // namespace cpu

namespace cuda {
struct tag {};
//! The CUDA execution policy; 'stream' is a cudaStream_t stored as void* so host code needs no CUDA headers.
struct par_t {
  using system = tag;
  void* stream = nullptr;
  constexpr par_t on(void* s) const { return par_t{s}; }
};
inline constexpr par_t par{};
}  // namespace cuda

template <class P>
concept execution_policy = requires { typename P::system; } &&
    (std::is_same_v<typename P::system, cpu::tag> || std::is_same_v<typename P::system, cuda::tag>);

template <class P>
using system_of_t = typename std::remove_cvref_t<P>::system;

//! Where a tensor's storage lives.
enum class Device : int { cpu = 0, cuda = 1 };

inline const char* device_name(Device d) { return d == Device::cpu ? "cpu" : "cuda"; }

}  // namespace rlflow
