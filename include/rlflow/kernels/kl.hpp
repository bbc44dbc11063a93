// rlflow/kernels/kl.hpp: KL estimators and where verl uses them (verl: core_algos.kl_penalty,
// FixedKLController / AdaptiveKLController, ray_trainer.apply_kl_penalty, and the actor's
// kl_loss term). Defines kl_penalty (+ d/d log_prob), kl_loss (aggregated, with gradient),
// apply_kl_penalty, FixedKLController, AdaptiveKLController.
#pragma once
#include <algorithm>
#include <cstdint>
#include <span>

#include <rlflow/kernels/agg_loss.hpp>  // detail::agg_row_coef
#include <rlflow/kernels/detail/checks.hpp>
#include <rlflow/kernels/detail/exec.hpp>
#include <rlflow/kernels/math.hpp>      // kl_eval
#include <rlflow/kernels/options.hpp>   // KLPenalty

namespace rlflow::kernels {

// ---------------------------------------------------------------------------------------------
// Controllers

//! value = kl_coef; update is a no-op.            verl: FixedKLController
struct FixedKLController {
  double value = 0.001;
  void update(double /*current_kl*/, std::int64_t /*n_steps*/) {}
};

//! Ziegler et al.: e = clip(current_kl / target - 1, -0.2, 0.2); value *= 1 + e n_steps / horizon.
//! verl: AdaptiveKLController (get_kl_controller asserts horizon > 0)
struct AdaptiveKLController {
  double value = 0.001, target = 0.1, horizon = 10000;
  AdaptiveKLController(double init_kl_coef, double target_kl, double horizon_) : value(init_kl_coef), target(target_kl), horizon(horizon_) {
    if (!(horizon > 0))
      throw config_error(msg("rlflow::kernels::AdaptiveKLController: horizon = ", horizon,
                             " must be > 0 (algorithm.kl_ctrl.horizon; default 10000)"));
    if (!(target > 0))
      throw config_error(msg("rlflow::kernels::AdaptiveKLController: target_kl = ", target, " must be > 0 (default 0.1)"));
  }
  void update(double current_kl, std::int64_t n_steps) {
    double const e = std::clamp(current_kl / target - 1.0, -0.2, 0.2);
    value *= 1.0 + e * static_cast<double>(n_steps) / horizon;
  }
};

// ---------------------------------------------------------------------------------------------

//! Per-token KL estimate of log_prob against ref_log_prob, d = x - ref:
//! kl|k1: d; abs: |d|; mse|k2: d^2/2; low_var_kl|k3: clamp(e^k - k - 1, -10, 10), k = clamp(-d, -20, 20).
//! grad (optional) = d kl / d log_prob (k2's d for the '+' variants). Every position is computed
//! (no mask).                                     verl: core_algos.kl_penalty
//! log_prob, ref_log_prob, out, grad: (N) (any shape, flattened)
template <class Policy>
void kl_penalty(Policy const& policy, KLPenalty kind, std::span<float const> log_prob, std::span<float const> ref_log_prob,
                std::span<float> out, std::span<float> grad = {}) {
  detail::check_policy<Policy>();
  const char* fn = "kl_penalty";
  auto const n = static_cast<std::int64_t>(log_prob.size());
  detail::expect_size(fn, "ref_log_prob", ref_log_prob.size(), n, "log_prob.size()");
  detail::expect_size(fn, "out", out.size(), n, "log_prob.size()");
  if (!grad.empty()) detail::expect_size(fn, "grad", grad.size(), n, "log_prob.size()");
  auto ex = detail::make_exec(policy);
  float const* x = log_prob.data();
  float const* r = ref_log_prob.data();
  float* o = out.data();
  float* g = grad.empty() ? nullptr : grad.data();
  KLKind const k = kind.kind;
  bool const st = kind.straight_through;
  ex.for_each(n, [=] RLFLOW_HD(std::int64_t i) {
    auto const q = math::kl_eval(k, st, x[i], r[i]);
    o[i] = static_cast<float>(q.value);
    if (g) g[i] = static_cast<float>(q.grad);
  });
}

//! The actor's KL loss term: agg_loss(kl_penalty(log_prob, ref_log_prob, kind), m, mode, info)
//! and its gradient with respect to log_prob. The actor adds kl_loss_coef * this (pass
//! grad.scale = kl_loss_coef, grad.accumulate = true to add into the policy-loss gradient).
//! NaN/inf at a valid token raises value_error.   verl: workers/utils/losses.py (use_kl_loss)
template <class Policy, class Mask>
double kl_loss(Policy const& policy, Dims d, KLPenalty kind, std::span<float const> log_prob, std::span<float const> ref_log_prob,
               std::span<Mask const> response_mask, AggMode agg, AggInfo const& info = {}, Grad grad = {}) {
  detail::check_policy<Policy>();
  detail::check_mask<Mask>();
  const char* fn = "kl_loss";
  detail::expect_token_spans(fn, d,
                             {{"log_prob", log_prob.size()}, {"ref_log_prob", ref_log_prob.size()},
                              {"response_mask", response_mask.size()}});
  if (!grad.out.empty()) detail::expect_size(fn, "grad.out", grad.out.size(), d.numel(), "B*T");
  auto ex = detail::make_exec(policy);
  Mask const* m = response_mask.data();
  float const* x = log_prob.data();
  float const* r = ref_log_prob.data();
  detail::check_finite_tokens(ex, fn, "log_prob", d, x, m);
  detail::check_finite_tokens(ex, fn, "ref_log_prob", d, r, m);
  auto coef = detail::agg_row_coef(ex, fn, d, m, agg, info);
  double const* c = coef.data();
  detail::grad_sink const gout(grad);
  std::int64_t const T = d.cols;
  KLKind const k = kind.kind;
  bool const st = kind.straight_through;
  return ex.reduce(d.numel(), 0.0, [=] RLFLOW_HD(std::int64_t i) -> double {
    if (!detail::on(m[i])) {
      gout.clear(i);
      return 0.0;
    }
    double const ci = c[i / T];
    auto const q = math::kl_eval(k, st, x[i], r[i]);
    gout.put(i, gout.scale * ci * q.grad);
    return ci * q.value;
  });
}

struct KLPenaltyResult {
  double current_kl = 0;  //!< actor/reward_kl_penalty: mean over rows of the per-row masked mean
  double beta = 0;        //!< actor/reward_kl_penalty_coeff: the coefficient used (before the update)
};

//! KL in the reward: kld = kl_penalty(old_log_probs, ref_log_prob) m; token_level_rewards =
//! token_level_scores - beta kld with beta = ctrl.value read BEFORE ctrl.update(current_kl, B).
//! Masked positions get kld = 0 (never NaN from padding).  verl: ray_trainer.apply_kl_penalty
//! token_level_scores, old_log_probs, ref_log_prob, response_mask, token_level_rewards: (B, T)
template <class Policy, class Mask, class Controller>
KLPenaltyResult apply_kl_penalty(Policy const& policy, Dims d, std::span<float const> token_level_scores,
                                 std::span<float const> old_log_probs, std::span<float const> ref_log_prob,
                                 std::span<Mask const> response_mask, KLPenalty kind, Controller& ctrl,
                                 std::span<float> token_level_rewards) {
  detail::check_policy<Policy>();
  detail::check_mask<Mask>();
  const char* fn = "apply_kl_penalty";
  detail::expect_token_spans(fn, d,
                             {{"token_level_scores", token_level_scores.size()},
                              {"old_log_probs", old_log_probs.size()}, {"ref_log_prob", ref_log_prob.size()},
                              {"response_mask", response_mask.size()},
                              {"token_level_rewards", token_level_rewards.size()}});
  auto ex = detail::make_exec(policy);
  Mask const* m = response_mask.data();
  float const* s = token_level_scores.data();
  float const* x = old_log_probs.data();
  float const* r = ref_log_prob.data();
  detail::check_finite_tokens(ex, fn, "old_log_probs", d, x, m);
  detail::check_finite_tokens(ex, fn, "ref_log_prob", d, r, m);
  float* out = token_level_rewards.data();
  double const beta = ctrl.value;
  KLKind const k = kind.kind;
  bool const st = kind.straight_through;
  std::int64_t const T = d.cols;
  auto rowmean = ex.template alloc<double>(d.rows);
  double* rm = rowmean.data();
  ex.row_reduce(
      d.rows, T, math::dvec<2>::zero(),
      [=] RLFLOW_HD(std::int64_t i, std::int64_t t) -> math::dvec<2> {
        std::int64_t const j = i * T + t;
        bool const v = detail::on(m[j]);
        double const kld = v ? static_cast<float>(math::kl_eval(k, st, x[j], r[j]).value) : 0.0;
        out[j] = static_cast<float>(static_cast<double>(s[j]) - beta * kld);
        return math::dvec<2>{{kld, v ? 1.0 : 0.0}};
      },
      [=] RLFLOW_HD(std::int64_t i, math::dvec<2> q) { rm[i] = q.v[0] / math::mask_den(q.v[1]); });
  double const tot = ex.reduce(d.rows, 0.0, [=] RLFLOW_HD(std::int64_t i) -> double { return rm[i]; });
  KLPenaltyResult res;
  res.beta = beta;
  res.current_kl = d.rows ? tot / static_cast<double>(d.rows) : 0.0;
  ctrl.update(res.current_kl, d.rows);
  return res;
}

}  // namespace rlflow::kernels
