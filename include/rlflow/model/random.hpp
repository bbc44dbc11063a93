// rlflow/model/random.hpp: the counter-based Philox4x32-10 generator (Salmon et al., SC'11).
// Defines philox4x32, uniform01 and normal01, all RLFLOW_HOST_DEVICE so CPU and CUDA draw the
// same numbers. A draw is a pure function of (key, counter): no state, no dependence on what
// else is being drawn, which is what makes a sequence's samples independent of the batch.
#pragma once
#include <cmath>    // std::log, std::sqrt, std::cos
#include <cstdint>

#include <rlflow/core/config.hpp>  // RLFLOW_HOST_DEVICE

namespace rlflow::model {

//! Four 32-bit words of Philox output.
struct philox_out {
  std::uint32_t x[4];
};

//! Philox4x32-10: 10 rounds of the counter-based bijection keyed by a 64-bit key.
//! The counter is (lo, hi) = two 64-bit words, so (seed, step, lane) addressing never wraps.
RLFLOW_HOST_DEVICE inline philox_out philox4x32(std::uint64_t key, std::uint64_t counter_lo, std::uint64_t counter_hi = 0) {
  std::uint32_t c0 = static_cast<std::uint32_t>(counter_lo), c1 = static_cast<std::uint32_t>(counter_lo >> 32);
  std::uint32_t c2 = static_cast<std::uint32_t>(counter_hi), c3 = static_cast<std::uint32_t>(counter_hi >> 32);
  std::uint32_t k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
  for (int r = 0; r < 10; ++r) {
    std::uint64_t const p0 = static_cast<std::uint64_t>(0xD2511F53u) * c0;
    std::uint64_t const p1 = static_cast<std::uint64_t>(0xCD9E8D57u) * c2;
    std::uint32_t const hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
    std::uint32_t const hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return philox_out{{c0, c1, c2, c3}};
}

//! A double in [0, 1) with 53 random bits, from words 0 and 1 of a Philox draw.
RLFLOW_HOST_DEVICE inline double uniform01(philox_out const& r) {
  std::uint64_t const u53 = (static_cast<std::uint64_t>(r.x[0]) << 21) ^ (r.x[1] >> 11);
  return static_cast<double>(u53) * (1.0 / 9007199254740992.0);
}

//! A standard normal (Box-Muller) from one Philox draw (all four words).
RLFLOW_HOST_DEVICE inline double normal01(philox_out const& r) {
  std::uint64_t const a = (static_cast<std::uint64_t>(r.x[0]) << 21) ^ (r.x[1] >> 11);
  std::uint64_t const b = (static_cast<std::uint64_t>(r.x[2]) << 21) ^ (r.x[3] >> 11);
  double const u1 = (static_cast<double>(a) + 1.0) * (1.0 / 9007199254740992.0);  // (0, 1]: log is finite
  double const u2 = static_cast<double>(b) * (1.0 / 9007199254740992.0);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586476925 * u2);
}

}  // namespace rlflow::model
