// rlflow/kernels/policy_loss.hpp: the actor's policy losses with verl's metrics and the
// analytic gradient d(loss)/d(log_prob) (verl: core_algos.POLICY_LOSS_REGISTRY): vanilla PPO
// clip + dual clip, GSPO, SAPO, GPG, clip_cov, kl_cov, geo_mean (GMPO), CISPO, DRO, DPPO (TV, KL),
// bypass_mode (rollout correction + PPO clip or REINFORCE). Defines compute_policy_loss and
// compute_policy_loss_reinforce.
#pragma once
#include <cmath>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>

#include <rlflow/kernels/agg_loss.hpp>  // detail::agg_row_coef
#include <rlflow/kernels/detail/checks.hpp>
#include <rlflow/kernels/detail/exec.hpp>
#include <rlflow/kernels/math.hpp>      // per-token loss functors
#include <rlflow/kernels/options.hpp>   // PolicyLossConfig, PolicyLossResult, Grad
#include <rlflow/kernels/rollout_corr.hpp>  // bypass_mode

// Letters: B rows, T response tokens. x = log_prob, o = old_log_prob, A = advantages.

namespace rlflow::kernels {
namespace detail {

//! Adapts a (x, old, A) token functor to (i, k).
template <class F>
struct tok_xoa {
  F f;
  float const *x, *o, *a;
  RLFLOW_HD math::token_loss operator()(std::int64_t, std::int64_t k) const { return f(x[k], o[k], a[k]); }
};

//! GSPO: the row's log sequence ratio is an extra argument.
struct tok_gspo {
  math::gspo_token f;
  float const *x, *o, *a;
  double const* lseq;
  RLFLOW_HD math::token_loss operator()(std::int64_t i, std::int64_t k) const { return f(x[k], o[k], a[k], lseq[i]); }
};

//! clip_cov: selected tokens get corr = 0 (loss and gradient zeroed); 'clip' reports corr == 0.
struct tok_clip_cov {
  math::clip_cov_token f;
  float const *x, *o, *a;
  std::uint8_t const* sel;
  RLFLOW_HD math::token_loss operator()(std::int64_t, std::int64_t k) const {
    math::token_loss t = f(x[k], o[k], a[k]);
    t.clip = sel[k] ? 1.0 : 0.0;
    if (sel[k]) t.loss = 0.0, t.dloss = 0.0;
    return t;
  }
};

struct tok_kl_cov {
  math::kl_cov_token f;
  float const *x, *o, *a;
  std::uint8_t const* sel;
  RLFLOW_HD math::token_loss operator()(std::int64_t, std::int64_t k) const { return f(x[k], o[k], a[k], sel[k] != 0); }
};

//! One fused pass: sum of coef_i * w * loss, metric sums, valid count; writes the gradient.
template <class Ex, class M, class Tok>
math::dvec<5> policy_token_pass(Ex const& ex, Dims d, M const* m, float const* isw, double const* coef, Tok tok, Grad grad) {
  std::int64_t const T = d.cols;
  grad_sink const gout(grad);
  return ex.reduce(d.numel(), math::dvec<5>::zero(), [=] RLFLOW_HD(std::int64_t k) -> math::dvec<5> {
    if (!detail::on(m[k])) {
      gout.clear(k);
      return math::dvec<5>::zero();
    }
    std::int64_t const i = k / T;
    math::token_loss const t = tok(i, k);
    double const w = isw ? static_cast<double>(isw[k]) : 1.0;
    double const c = coef[i];
    gout.put(k, gout.scale * c * w * t.dloss);
    return math::dvec<5>{{c * w * t.loss, t.clip, t.clip_lower, t.kl, 1.0}};
  });
}

inline PolicyLossResult finish(math::dvec<5> const& s, bool clip, bool kl, bool lower) {
  PolicyLossResult r;
  r.loss = s.v[0];
  double const den = math::mask_den(s.v[4]);
  r.metrics.has_pg_clipfrac = clip;
  r.metrics.has_ppo_kl = kl;
  r.metrics.has_pg_clipfrac_lower = lower;
  if (clip) r.metrics.pg_clipfrac = s.v[1] / den;
  if (lower) r.metrics.pg_clipfrac_lower = s.v[2] / den;
  if (kl) r.metrics.ppo_kl = s.v[3] / den;
  return r;
}

//! Selection of up to k valid tokens with the largest covariance (A - mean A)(x - mean x) among
//! candidates; returns a (B*T) 0/1 buffer. Deterministic: largest first, ties by lower index.
template <class Ex, class M>
typename Ex::template buffer<std::uint8_t> cov_select(Ex const& ex, Dims d, M const* m, float const* x, float const* a,
                                                      double mean_a, double mean_x, std::uint8_t const* excluded, double lb,
                                                      double ub, bool bounded, std::int64_t k) {
  std::int64_t const n = d.numel();
  auto sel = ex.template alloc<std::uint8_t>(n);
  std::uint8_t* sp = sel.data();
  ex.for_each(n, [=] RLFLOW_HD(std::int64_t i) { sp[i] = 0; });
  auto idx = ex.template alloc<std::int64_t>(0);
  std::int64_t const got = ex.top_k(
      n,
      [=] RLFLOW_HD(std::int64_t i) -> double {
        return (static_cast<double>(a[i]) - mean_a) * (static_cast<double>(x[i]) - mean_x);
      },
      [=] RLFLOW_HD(std::int64_t i) -> bool {
        if (!detail::on(m[i]) || (excluded && excluded[i])) return false;
        if (!bounded) return true;
        double const c = (static_cast<double>(a[i]) - mean_a) * (static_cast<double>(x[i]) - mean_x);
        return c > lb && c < ub;
      },
      k, idx);
  std::int64_t const* ip = idx.data();
  ex.for_each(got, [=] RLFLOW_HD(std::int64_t j) { sp[ip[j]] = 1; });
  return sel;
}

}  // namespace detail

//! REINFORCE loss -A x (times rollout_is_weights when given), aggregated with 'agg' (verl's default
//! here is seq-mean-token-sum); metric ppo_kl = mmean(rollout_log_prob - log_prob). No clipping.
//! verl: compute_policy_loss_reinforce          all spans: (B, T)
template <class Policy, class Mask>
PolicyLossResult compute_policy_loss_reinforce(Policy const& policy, Dims d, std::span<float const> rollout_log_prob,
                                               std::span<float const> log_prob, std::span<float const> advantages,
                                               std::span<Mask const> response_mask, AggMode agg = AggMode::seq_mean_token_sum,
                                               AggInfo const& info = {}, Grad grad = {},
                                               std::span<float const> rollout_is_weights = {}) {
  detail::check_policy<Policy>();
  detail::check_mask<Mask>();
  const char* fn = "compute_policy_loss_reinforce";
  detail::expect_token_spans(fn, d,
                             {{"rollout_log_prob", rollout_log_prob.size()}, {"log_prob", log_prob.size()},
                              {"advantages", advantages.size()}, {"response_mask", response_mask.size()}});
  if (!grad.out.empty()) detail::expect_size(fn, "grad.out", grad.out.size(), d.numel(), "B*T");
  if (!rollout_is_weights.empty()) detail::expect_size(fn, "rollout_is_weights", rollout_is_weights.size(), d.numel(), "B*T");
  auto ex = detail::make_exec(policy);
  Mask const* m = response_mask.data();
  float const* x = log_prob.data();
  float const* o = rollout_log_prob.data();
  float const* a = advantages.data();
  float const* w = rollout_is_weights.empty() ? nullptr : rollout_is_weights.data();
  detail::check_finite_tokens(ex, fn, "log_prob", d, x, m);
  detail::check_finite_tokens(ex, fn, "rollout_log_prob", d, o, m);
  detail::check_finite_tokens(ex, fn, "advantages", d, a, m);
  detail::check_finite_tokens(ex, fn, "rollout_is_weights", d, w, m);
  auto coef = detail::agg_row_coef(ex, fn, d, m, agg, info);
  detail::tok_xoa<math::reinforce_token> tok{{}, x, o, a};
  return detail::finish(detail::policy_token_pass(ex, d, m, w, coef.data(), tok, grad), false, true, false);
}

template <class Policy, class Mask>
PolicyLossResult compute_policy_loss(Policy const& policy, Dims d, PolicyLossConfig const& cfg,
                                     std::span<float const> old_log_prob, std::span<float const> log_prob,
                                     std::span<float const> advantages, std::span<Mask const> response_mask, AggMode agg,
                                     AggInfo const& info = {}, Grad grad = {}, std::span<float const> rollout_is_weights = {});

namespace detail {
//! verl: compute_policy_loss_bypass_mode. old_log_prob is the rollout's; IS weights and the rejection
//! mask come from rollout_corr.hpp (training = the current log_prob) into scratch buffers of the
//! policy's backend; then vanilla PPO on the rejected mask without IS weights (loss_type ppo_clip) or
//! REINFORCE with them (reinforce). Any backend (cuda::par keeps everything on the device).
template <class Policy, class Mask>
PolicyLossResult bypass_mode_loss(Policy const& policy, Dims d, PolicyLossConfig const& cfg, std::span<float const> old_log_prob,
                                  std::span<float const> log_prob, std::span<float const> advantages,
                                  std::span<Mask const> response_mask, AggMode agg, AggInfo const& info, Grad grad) {
  auto const& rc = cfg.rollout_correction;
  if (rc.loss_type != "ppo_clip" && rc.loss_type != "reinforce")
    throw config_error(msg("rlflow::kernels::compute_policy_loss: rollout_correction.loss_type='", rc.loss_type,
                           "'; use ppo_clip or reinforce (verl raises ValueError)"));
  auto ex = make_exec(policy);
  std::int64_t const n = d.numel();
  auto wbuf = ex.template alloc<float>(rc.rollout_is ? n : 0);
  auto mbuf = ex.template alloc<float>(n);
  std::span<float> const w(wbuf.data(), static_cast<std::size_t>(wbuf.size()));
  std::span<float> const mk(mbuf.data(), static_cast<std::size_t>(mbuf.size()));
  auto metrics = compute_rollout_correction_and_rejection_mask(policy, d, log_prob, old_log_prob, response_mask, rc, w, mk);
  std::span<float const> const mask(mk);
  PolicyLossResult r;
  if (rc.loss_type == "reinforce") {
    r = compute_policy_loss_reinforce(policy, d, old_log_prob, log_prob, advantages, mask, agg, info, grad,
                                      std::span<float const>(w));
  } else {
    PolicyLossConfig v = cfg;
    v.mode = PolicyLossMode::vanilla;
    r = compute_policy_loss(policy, d, v, old_log_prob, log_prob, advantages, mask, agg, info, grad);
  }
  r.extra_metrics = std::move(metrics);
  return r;
}
}  // namespace detail

//! Policy loss, metrics and d(loss)/d(log_prob) for cfg.mode.  verl: get_policy_loss_fn(mode)
//! old_log_prob, log_prob, advantages, response_mask, rollout_is_weights (optional), grad: (B, T)
//! Per mode (Delta = x - o, r = e^clamp(Delta, +-20) unless noted, eps_lo/hi = clip ratios):
//!  vanilla  max(-A r, -A clip(r, 1-lo, 1+hi)), and min(that, -A c) where A < 0
//!  gspo     r_i = e^min(mean_t Delta, 10) per row; max(-A r_i, -A clip(r_i)); agg forced to seq-mean-token-mean
//!  sapo     -A sigmoid(tau (r - 1)) 4 / tau, tau = A > 0 ? tau_pos : tau_neg; agg forced to seq-mean-token-mean
//!  gpg      -x A (no metrics)
//!  clip_cov max(-A e^Delta, -A clip(e^Delta)) * corr; corr = 0 on up to max(floor(ratio N), 1) unclipped
//!           tokens with lb < cov < ub - the LARGEST cov first (verl picks them at random)
//!  kl_cov   -A e^Delta, plus ppo_kl_coef |Delta| on the max(1, floor(N ratio)) largest-cov tokens
//!  geo_mean mean over rows of -mean_t(A) exp(mean_t sign-clipped Delta) (ignores agg mode and AggInfo)
//!  cispo    -sg(clip(r)) A x
//!  dro      -(x A - beta/2 Delta^2)
//!  dppo_tv  -A sg(min(r, c)) x valid; valid: A > 0 ? e^x - e^o <= hi : e^x - e^o >= -lo (c = clip_ratio_c)
//!  dppo_kl  as dppo_tv with valid: A > 0 ? (bkl <= hi or e^x <= e^o) : (bkl <= lo or e^x >= e^o), bkl the
//!           binary KL p_o (o - x) + (1 - p_o) log((1 - p_o + 1e-8) / (1 - p + 1e-8))
//!  bypass_mode  old_log_prob = the rollout's: rollout correction (IS weights, rejection mask, metrics
//!           in extra_metrics) then vanilla on the rejected mask (loss_type ppo_clip, no IS weights) or
//!           compute_policy_loss_reinforce with the IS weights (reinforce); any backend
//! NaN/inf in any input at a valid token raises value_error naming the row and token.
template <class Policy, class Mask>
PolicyLossResult compute_policy_loss(Policy const& policy, Dims d, PolicyLossConfig const& cfg,
                                     std::span<float const> old_log_prob, std::span<float const> log_prob,
                                     std::span<float const> advantages, std::span<Mask const> response_mask, AggMode agg,
                                     AggInfo const& info, Grad grad, std::span<float const> rollout_is_weights) {
  detail::check_policy<Policy>();
  detail::check_mask<Mask>();
  const char* fn = "compute_policy_loss";
  detail::expect_token_spans(fn, d,
                             {{"old_log_prob", old_log_prob.size()}, {"log_prob", log_prob.size()},
                              {"advantages", advantages.size()}, {"response_mask", response_mask.size()}});
  if (!grad.out.empty()) detail::expect_size(fn, "grad.out", grad.out.size(), d.numel(), "B*T");
  if (!rollout_is_weights.empty()) detail::expect_size(fn, "rollout_is_weights", rollout_is_weights.size(), d.numel(), "B*T");
  double const lo = cfg.low(), hi = cfg.high();
  auto ex = detail::make_exec(policy);
  Mask const* m = response_mask.data();
  float const* x = log_prob.data();
  float const* o = old_log_prob.data();
  float const* a = advantages.data();
  float const* w = rollout_is_weights.empty() ? nullptr : rollout_is_weights.data();
  detail::check_finite_tokens(ex, fn, "log_prob", d, x, m);
  detail::check_finite_tokens(ex, fn, "old_log_prob", d, o, m);
  detail::check_finite_tokens(ex, fn, "advantages", d, a, m);
  detail::check_finite_tokens(ex, fn, "rollout_is_weights", d, w, m);
  std::int64_t const T = d.cols;

  switch (cfg.mode) {
    case PolicyLossMode::vanilla: {
      if (!(cfg.clip_ratio_c > 1.0))
        throw config_error(msg("rlflow::kernels::", fn, ": clip_ratio_c = ", cfg.clip_ratio_c,
                               " must be > 1 for dual-clip PPO (verl asserts); the default is 3.0"));
      auto coef = detail::agg_row_coef(ex, fn, d, m, agg, info);
      detail::tok_xoa<math::vanilla_token> tok{{lo, hi, cfg.clip_ratio_c}, x, o, a};
      return detail::finish(detail::policy_token_pass(ex, d, m, w, coef.data(), tok, grad), true, true, true);
    }
    case PolicyLossMode::gspo: {
      auto coef = detail::agg_row_coef(ex, fn, d, m, AggMode::seq_mean_token_mean, info);
      auto lseq = ex.template alloc<double>(d.rows);
      double* lp = lseq.data();
      ex.row_reduce(
          d.rows, T, math::dvec<2>::zero(),
          [=] RLFLOW_HD(std::int64_t i, std::int64_t t) -> math::dvec<2> {
            std::int64_t const k = i * T + t;
            return detail::on(m[k]) ? math::dvec<2>{{static_cast<double>(x[k]) - static_cast<double>(o[k]), 1.0}} : math::dvec<2>::zero();
          },
          [=] RLFLOW_HD(std::int64_t i, math::dvec<2> s) { lp[i] = s.v[0] / (s.v[1] > 1.0 ? s.v[1] : 1.0); });
      detail::tok_gspo tok{{lo, hi}, x, o, a, lp};
      auto r = detail::finish(detail::policy_token_pass(ex, d, m, w, coef.data(), tok, grad), true, true, true);
      r.metrics.pg_clipfrac_lower = 0.0;
      return r;
    }
    case PolicyLossMode::sapo: {
      auto coef = detail::agg_row_coef(ex, fn, d, m, AggMode::seq_mean_token_mean, info);
      detail::tok_xoa<math::sapo_token> tok{{cfg.tau_pos, cfg.tau_neg}, x, o, a};
      auto r = detail::finish(detail::policy_token_pass(ex, d, m, w, coef.data(), tok, grad), true, true, true);
      r.metrics.pg_clipfrac = r.metrics.pg_clipfrac_lower = 0.0;
      return r;
    }
    case PolicyLossMode::gpg: {
      auto coef = detail::agg_row_coef(ex, fn, d, m, agg, info);
      detail::tok_xoa<math::gpg_token> tok{{}, x, o, a};
      return detail::finish(detail::policy_token_pass(ex, d, m, w, coef.data(), tok, grad), false, false, false);
    }
    case PolicyLossMode::cispo: {
      auto coef = detail::agg_row_coef(ex, fn, d, m, agg, info);
      detail::tok_xoa<math::cispo_token> tok{{lo, hi}, x, o, a};
      auto r = detail::finish(detail::policy_token_pass(ex, d, m, w, coef.data(), tok, grad), true, true, true);
      r.metrics.pg_clipfrac_lower = 0.0;
      return r;
    }
    case PolicyLossMode::dppo_tv:
    case PolicyLossMode::dppo_kl: {
      auto coef = detail::agg_row_coef(ex, fn, d, m, agg, info);
      detail::tok_xoa<math::dppo_token> tok{{lo, hi, cfg.clip_ratio_c, cfg.mode == PolicyLossMode::dppo_kl}, x, o, a};
      return detail::finish(detail::policy_token_pass(ex, d, m, w, coef.data(), tok, grad), true, true, true);
    }
    case PolicyLossMode::bypass_mode:
      return detail::bypass_mode_loss(policy, d, cfg, old_log_prob, log_prob, advantages, response_mask, agg, info, grad);
    case PolicyLossMode::dro: {
      if (!(cfg.dro_beta > 0))
        throw config_error(msg("rlflow::kernels::", fn, ": dro_beta = ", cfg.dro_beta, " must be > 0 (verl raises ValueError)"));
      auto coef = detail::agg_row_coef(ex, fn, d, m, agg, info);
      detail::tok_xoa<math::dro_token> tok{{cfg.dro_beta}, x, o, a};
      return detail::finish(detail::policy_token_pass(ex, d, m, w, coef.data(), tok, grad), false, true, false);
    }
    case PolicyLossMode::clip_cov: {
      if (!(cfg.clip_cov_ratio > 0))
        throw config_error(msg("rlflow::kernels::", fn, ": clip_cov_ratio = ", cfg.clip_cov_ratio, " must be > 0 (verl asserts)"));
      auto coef = detail::agg_row_coef(ex, fn, d, m, agg, info);
      std::int64_t const n = d.numel();
      auto const s = ex.reduce(n, math::dvec<3>::zero(), [=] RLFLOW_HD(std::int64_t k) -> math::dvec<3> {
        return detail::on(m[k]) ? math::dvec<3>{{static_cast<double>(a[k]), static_cast<double>(x[k]), 1.0}} : math::dvec<3>::zero();
      });
      double const mean_a = s.v[0] / math::mask_den(s.v[2]), mean_x = s.v[1] / math::mask_den(s.v[2]);
      auto clipped = ex.template alloc<std::uint8_t>(n);
      std::uint8_t* cp = clipped.data();
      math::clip_cov_token const f{lo, hi};
      ex.for_each(n, [=] RLFLOW_HD(std::int64_t k) { cp[k] = detail::on(m[k]) && f(x[k], o[k], a[k]).clip > 0 ? 1 : 0; });
      double const kk = std::floor(cfg.clip_cov_ratio * s.v[2]);
      std::int64_t const k = kk > 1 ? static_cast<std::int64_t>(kk) : 1;
      auto sel = detail::cov_select(ex, d, m, x, a, mean_a, mean_x, cp, cfg.clip_cov_lb, cfg.clip_cov_ub, true, k);
      detail::tok_clip_cov tok{f, x, o, a, sel.data()};
      return detail::finish(detail::policy_token_pass(ex, d, m, w, coef.data(), tok, grad), true, true, false);
    }
    case PolicyLossMode::kl_cov: {
      if (!(cfg.kl_cov_ratio > 0))
        throw config_error(msg("rlflow::kernels::", fn, ": kl_cov_ratio = ", cfg.kl_cov_ratio, " must be > 0 (verl asserts)"));
      auto coef = detail::agg_row_coef(ex, fn, d, m, agg, info);
      std::int64_t const n = d.numel();
      auto const s = ex.reduce(n, math::dvec<3>::zero(), [=] RLFLOW_HD(std::int64_t k) -> math::dvec<3> {
        return detail::on(m[k]) ? math::dvec<3>{{static_cast<double>(a[k]), static_cast<double>(x[k]), 1.0}} : math::dvec<3>::zero();
      });
      double const cnt = s.v[2];
      double const mean_a = cnt > 0 ? s.v[0] / cnt : 0.0, mean_x = cnt > 0 ? s.v[1] / cnt : 0.0;
      double const kk = std::floor(cnt * cfg.kl_cov_ratio);
      std::int64_t const k = cnt > 0 ? (kk > 1 ? static_cast<std::int64_t>(kk) : 1) : 0;
      auto sel = detail::cov_select(ex, d, m, x, a, mean_a, mean_x, static_cast<std::uint8_t const*>(nullptr), 0.0, 0.0, false, k);
      detail::tok_kl_cov tok{{cfg.ppo_kl_coef}, x, o, a, sel.data()};
      return detail::finish(detail::policy_token_pass(ex, d, m, w, coef.data(), tok, grad), false, true, false);
    }
    case PolicyLossMode::geo_mean: {
      if (d.rows == 0)
        throw value_error(msg("rlflow::kernels::", fn, ": geo_mean averages over rows and the batch has none (verl would "
                              "return NaN); skip the empty micro-batch"));
      // Per row: S = sum Delta* m, SA = sum A m, L = sum m, SW = sum log(w + 1e-10) m.
      using V4 = math::dvec<4>;
      auto rowv = ex.template alloc<V4>(d.rows);
      V4* rp = rowv.data();
      math::geo_mean_token const f{lo, hi};
      ex.row_reduce(
          d.rows, T, V4::zero(),
          [=] RLFLOW_HD(std::int64_t i, std::int64_t t) -> V4 {
            std::int64_t const k = i * T + t;
            if (!detail::on(m[k])) return V4::zero();
            double const lw = w ? log(static_cast<double>(w[k]) + 1e-10) : 0.0;
            return V4{{f(x[k], o[k], a[k]).dstar, static_cast<double>(a[k]), 1.0, lw}};
          },
          [=] RLFLOW_HD(std::int64_t i, V4 s) {
            double const l = math::mask_den(s.v[2]);
            double const ratio = exp(s.v[0] / l), abar = s.v[1] / l, isw = exp(s.v[3] / l);
            rp[i] = V4{{-abar * ratio * isw, ratio, abar * isw, l}};  // loss_i, ratio_i, Abar_i * seq_is_i, L_i + 1e-8
          });
      double const inv_b = 1.0 / static_cast<double>(d.rows);
      double const loss = ex.reduce(d.rows, 0.0, [=] RLFLOW_HD(std::int64_t i) -> double { return rp[i].v[0]; }) * inv_b;
      detail::grad_sink const gout(grad);
      auto const s = ex.reduce(d.numel(), math::dvec<4>::zero(), [=] RLFLOW_HD(std::int64_t k) -> math::dvec<4> {
        if (!detail::on(m[k])) {
          gout.clear(k);
          return math::dvec<4>::zero();
        }
        std::int64_t const i = k / T;
        auto const q = f(x[k], o[k], a[k]);
        gout.put(k, gout.scale * inv_b * (-rp[i].v[2]) * rp[i].v[1] / rp[i].v[3] * q.ddstar);
        double const av = a[k];
        return math::dvec<4>{{q.clipped * (av > 0 ? 1.0 : 0.0), q.clipped * (av < 0 ? 1.0 : 0.0), q.kl, 1.0}};
      });
      PolicyLossResult r;
      r.loss = loss;
      double const den = math::mask_den(s.v[3]);
      r.metrics = PolicyLossMetrics{s.v[0] / den, s.v[2] / den, s.v[1] / den, true, true, true};
      return r;
    }
  }
  throw config_error(msg("rlflow::kernels::", fn, ": unknown PolicyLossMode ", static_cast<int>(cfg.mode)));
}

}  // namespace rlflow::kernels
