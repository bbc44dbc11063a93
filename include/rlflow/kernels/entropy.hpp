// rlflow/kernels/entropy.hpp: categorical entropy from logits and its gradient
// (verl: verl_F.entropy_from_logits). One fused online log-sum-exp pass per row keeps three
// doubles of state; nothing of size V is materialised. Defines entropy_from_logits and
// entropy_from_logits_backward, and compute_entropy_loss (the aggregated entropy).
#pragma once
#include <cmath>
#include <cstdint>
#include <span>

#include <rlflow/kernels/detail/checks.hpp>
#include <rlflow/kernels/detail/exec.hpp>
#include <rlflow/kernels/agg_loss.hpp>  // agg_loss (compute_entropy_loss)
#include <rlflow/kernels/math.hpp>      // lse_state

// Letters: N rows of logits (B*T token positions), V vocabulary.

namespace rlflow::kernels {
namespace detail {

//! Rejects NaN / +inf logits and rows that are entirely -inf; returns the per-row lse states.
template <class Ex>
typename Ex::template buffer<math::lse_state> logit_states(Ex const& ex, const char* fn, std::int64_t rows, std::int64_t vocab,
                                                           float const* z) {
  std::int64_t const bad = ex.min_index(rows * vocab, [=] RLFLOW_HD(std::int64_t i) -> std::int64_t {
    float const v = z[i];
    return (v != -INFINITY && !math::finite(v)) ? i : math::first_index::none;
  });
  if (bad != math::first_index::none)
    throw value_error(msg("rlflow::kernels::", fn, ": logit ", ex.load(z, bad), " at row ", bad / vocab, ", vocab index ",
                          bad % vocab, "; logits must be finite (-inf is allowed for banned tokens) - check the model output"));
  auto st = ex.template alloc<math::lse_state>(rows);
  math::lse_state* sp = st.data();
  ex.row_reduce(rows, vocab, math::lse_state{},
                [=] RLFLOW_HD(std::int64_t i, std::int64_t v) -> math::lse_state { return math::lse_state::of(z[i * vocab + v]); },
                [=] RLFLOW_HD(std::int64_t i, math::lse_state s) { sp[i] = s; });
  std::int64_t const empty = ex.min_index(rows, [=] RLFLOW_HD(std::int64_t i) -> std::int64_t {
    return sp[i].s == 0 ? i : math::first_index::none;
  });
  if (empty != math::first_index::none)
    throw value_error(msg("rlflow::kernels::", fn, ": every logit of row ", empty, " is -inf (or V = 0), so softmax is "
                          "undefined; check the logit mask"));
  return st;
}

}  // namespace detail

//! H[n] = logsumexp(z[n]) - sum_v softmax(z[n])_v z[n,v]. -inf logits contribute 0.
//! verl: verl_F.entropy_from_logits        logits: (N, V) -> entropy: (N)
template <class Policy>
void entropy_from_logits(Policy const& policy, std::int64_t rows, std::int64_t vocab, std::span<float const> logits,
                         std::span<float> entropy) {
  detail::check_policy<Policy>();
  const char* fn = "entropy_from_logits";
  detail::expect_dims(fn, Dims{rows, vocab});
  detail::expect_size(fn, "logits", logits.size(), rows * vocab, "N*V");
  detail::expect_size(fn, "entropy", entropy.size(), rows, "N");
  if (rows == 0) return;
  auto ex = detail::make_exec(policy);
  auto st = detail::logit_states(ex, fn, rows, vocab, logits.data());
  math::lse_state const* sp = st.data();
  float* h = entropy.data();
  ex.for_each(rows, [=] RLFLOW_HD(std::int64_t i) { h[i] = static_cast<float>(sp[i].entropy()); });
}

//! grad_logits[n,v] = grad_entropy[n] * dH/dz = grad_entropy[n] * (-p_v (z_v - sum_u p_u z_u)),
//! written or (accumulate) added. Recomputes the row statistics; no (N, V) temporary.
//! logits, grad_logits: (N, V); grad_entropy: (N)
template <class Policy>
void entropy_from_logits_backward(Policy const& policy, std::int64_t rows, std::int64_t vocab, std::span<float const> logits,
                                  std::span<float const> grad_entropy, std::span<float> grad_logits, bool accumulate = false) {
  detail::check_policy<Policy>();
  const char* fn = "entropy_from_logits_backward";
  detail::expect_dims(fn, Dims{rows, vocab});
  detail::expect_size(fn, "logits", logits.size(), rows * vocab, "N*V");
  detail::expect_size(fn, "grad_entropy", grad_entropy.size(), rows, "N");
  detail::expect_size(fn, "grad_logits", grad_logits.size(), rows * vocab, "N*V");
  if (rows == 0) return;
  auto ex = detail::make_exec(policy);
  float const* z = logits.data();
  auto st = detail::logit_states(ex, fn, rows, vocab, z);
  math::lse_state const* sp = st.data();
  float const* ge = grad_entropy.data();
  float* gz = grad_logits.data();
  ex.for_each_2d(rows, vocab, [=] RLFLOW_HD(std::int64_t i, std::int64_t, std::int64_t k) {
    double const zv = z[k];
    double g = 0.0;
    if (zv != -INFINITY) {
      double const p = exp(zv - sp[i].lse());
      g = static_cast<double>(ge[i]) * (-p * (zv - sp[i].mean_logit()));
    }
    gz[k] = accumulate ? gz[k] + static_cast<float>(g) : static_cast<float>(g);
  });
}

//! Entropy loss of (B, T) response positions: agg_loss(entropy_from_logits(logits), mask, mode)
//! (verl passes no global batch info here; 'info' is for callers that want it). The actor's
//! entropy bonus, loss -= entropy_coeff * this, is applied in roles::ActorRolloutRef::update_actor.
//! verl: core_algos.compute_entropy_loss       logits: (B, T, V); response_mask: (B, T)
template <class Policy, class Mask>
double compute_entropy_loss(Policy const& policy, Dims d, std::int64_t vocab, std::span<float const> logits,
                            std::span<Mask const> response_mask, AggMode loss_agg_mode = AggMode::token_mean,
                            AggInfo const& info = {}) {
  detail::check_policy<Policy>();
  detail::check_mask<Mask>();
  const char* fn = "compute_entropy_loss";
  detail::expect_dims(fn, d);
  detail::expect_size(fn, "logits", logits.size(), d.numel() * vocab, "B*T*V");
  detail::expect_size(fn, "response_mask", response_mask.size(), d.numel(), "B*T");
  auto ex = detail::make_exec(policy);
  auto h = ex.template alloc<float>(d.numel());
  std::span<float> hs(h.data(), static_cast<std::size_t>(d.numel()));
  entropy_from_logits(policy, d.numel(), vocab, logits, hs);
  return agg_loss(policy, d, std::span<float const>(hs), response_mask, loss_agg_mode, info);
}

}  // namespace rlflow::kernels
