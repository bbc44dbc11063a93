// rlflow/kernels/detail/checks.hpp: compile-time checks shared by the public kernel entry points
// (one static_assert per requirement, style E1). Not public API.
#pragma once
#include <rlflow/core/backend.hpp>               // execution_policy
#include <rlflow/kernels/detail/exec.hpp>   // is_mask_type

namespace rlflow::kernels::detail {

template <class Policy>
constexpr void check_policy() {
  static_assert(execution_policy<Policy>,
                "rlflow::kernels (policy, ...): 'policy' must be rlflow::cpu::par or rlflow::cuda::par.on(stream)");
}

template <class Mask>
constexpr void check_mask() {
  static_assert(is_mask_type<Mask>,
                "rlflow::kernels (..., response_mask, ...): the mask element type must be float, bool or std::uint8_t "
                "(or std::int32_t); convert the mask first");
}

}  // namespace rlflow::kernels::detail
