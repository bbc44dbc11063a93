// rlflow/kernels/math.hpp: per-element and per-reduction math shared by the CPU loops and the
// CUDA kernels (RLFLOW_HOST_DEVICE functors; g++ compiles them for the CPU tests, nvcc for the
// device). Defines the torch tie rules for max/min/clamp gradients, Welford/Chan group statistics,
// the online log-sum-exp state, KL estimators, and the per-token policy / value losses with their
// derivatives. Does not loop, allocate or validate: see detail/exec.hpp and the public headers.
#pragma once
#include <cmath>
#include <cstdint>

#include <rlflow/core/config.hpp>             // RLFLOW_HOST_DEVICE
#include <rlflow/kernels/options.hpp>    // KLKind

namespace rlflow::kernels::math {

// ---------------------------------------------------------------------------------------------
// Small value types with '+' so reductions (std loops, thrust, cub) can sum them.

//! N doubles summed element-wise: several sums in one pass.
template <int N>
struct dvec {
  double v[N];
  RLFLOW_HD dvec operator+(dvec const& o) const {
    dvec r;
    for (int k = 0; k < N; ++k) r.v[k] = v[k] + o.v[k];
    return r;
  }
  RLFLOW_HD static dvec zero() {
    dvec r;
    for (int k = 0; k < N; ++k) r.v[k] = 0.0;
    return r;
  }
};

//! Index of the first element satisfying a predicate: the reduction is min; 'none' is INT64_MAX.
struct first_index {
  static constexpr std::int64_t none = INT64_MAX;
  RLFLOW_HD std::int64_t operator()(std::int64_t a, std::int64_t b) const { return a < b ? a : b; }
};

RLFLOW_HD inline bool finite(double x) { return x - x == 0.0; }  // false for NaN and +-inf

RLFLOW_HD inline double clampd(double x, double lo, double hi) { return x < lo ? lo : (x > hi ? hi : x); }

//! verl's masked-mean denominator mask.sum() + 1e-8 as torch evaluates it: the mask is an integer
//! or bool tensor, so its sum is an integer tensor and adding the Python float promotes to float32.
//! The 1e-8 therefore vanishes for every count >= 1 (a constant batch has an exact mean and an
//! exact zero variance) and only keeps a fully masked batch from dividing by zero.
RLFLOW_HD inline double mask_den(double count) {
  return count >= 1.0 ? static_cast<double>(static_cast<float>(count)) : static_cast<double>(1e-8f);
}

// ---------------------------------------------------------------------------------------------
// torch autograd tie rules (derivatives.yaml): maximum/minimum split the gradient in half on
// ties; clamp passes the gradient where lo <= x <= hi.

//! d max(a,b)/da (torch.maximum).
RLFLOW_HD inline double dmax_da(double a, double b) { return a > b ? 1.0 : (a == b ? 0.5 : 0.0); }
//! d min(a,b)/da (torch.minimum / torch.min(a, b)).
RLFLOW_HD inline double dmin_da(double a, double b) { return a < b ? 1.0 : (a == b ? 0.5 : 0.0); }
//! d clamp(x, lo, hi)/dx.
RLFLOW_HD inline double dclamp(double x, double lo, double hi) { return (x >= lo && x <= hi) ? 1.0 : 0.0; }

// ---------------------------------------------------------------------------------------------
// Group statistics: Welford counts/means/M2 merged with Chan et al.'s pairwise rule, which is
// stable (no sum-of-squares cancellation) and associative enough for segmented reductions.

struct welford {
  double n = 0, mean = 0, m2 = 0;
  RLFLOW_HD static welford of(double x) { return welford{1.0, x, 0.0}; }
};

struct welford_merge {
  RLFLOW_HD welford operator()(welford const& a, welford const& b) const {
    if (a.n == 0) return b;
    if (b.n == 0) return a;
    double const n = a.n + b.n;
    double const d = b.mean - a.mean;
    double const wb = b.n / n;  // one division per merge (the per-row hot loop of group statistics)
    return welford{n, a.mean + d * wb, a.m2 + b.m2 + d * d * (a.n * wb)};
  }
};

//! A group's finalised statistics for the broadcast: a = (s - center) / scale.
struct alignas(16) center_scale {
  double center = 0, scale = 1;
};

//! welford_merge(a, welford::of(x)) without its branches, bit for bit the same result (also for
//! a.n == 0: the mean becomes x and m2 stays 0): the per-row step of the CPU group statistics,
//! where the "first row of its group" branch of the merge is unpredictable under shuffled ids.
struct welford_push {
  RLFLOW_HD welford operator()(welford const& a, double x) const {
    double const n = a.n + 1.0;
    double const d = x - a.mean;
    double const wb = 1.0 / n;
    return welford{n, a.mean + d * wb, a.m2 + d * d * (a.n * wb)};
  }
};

//! The two largest values of a group with the row of the largest (lowest row index on ties).
struct top2 {
  double v1 = -INFINITY, v2 = -INFINITY;
  std::int64_t i1 = first_index::none;
  std::int64_t n = 0;
  RLFLOW_HD static top2 of(double x, std::int64_t row) { return top2{x, -INFINITY, row, 1}; }
};

struct top2_merge {
  RLFLOW_HD top2 operator()(top2 const& a, top2 const& b) const {
    if (a.n == 0) return b;
    if (b.n == 0) return a;
    bool const a_first = a.v1 > b.v1 || (a.v1 == b.v1 && a.i1 < b.i1);
    top2 const& hi = a_first ? a : b;
    top2 const& lo = a_first ? b : a;
    top2 r;
    r.v1 = hi.v1;
    r.i1 = hi.i1;
    r.v2 = hi.v2 > lo.v1 ? hi.v2 : lo.v1;
    r.n = a.n + b.n;
    return r;
  }
};

// ---------------------------------------------------------------------------------------------
// Online log-sum-exp with the softmax-weighted logit sum: state (max, sum e^(z-max),
// sum e^(z-max) * z). Entropy H = max + log s - w / s; merging is exact up to rounding.

struct lse_state {
  double m = -INFINITY, s = 0, w = 0;
  RLFLOW_HD static lse_state of(double z) {
    if (z == -INFINITY) return lse_state{};
    return lse_state{z, 1.0, z};
  }
  RLFLOW_HD double lse() const { return m + log(s); }
  RLFLOW_HD double mean_logit() const { return w / s; }  //!< sum_v softmax_v * z_v
  RLFLOW_HD double entropy() const { return lse() - mean_logit(); }
};

struct lse_merge {
  RLFLOW_HD lse_state operator()(lse_state const& a, lse_state const& b) const {
    if (a.s == 0) return b;
    if (b.s == 0) return a;
    double const m = a.m > b.m ? a.m : b.m;
    double const ea = exp(a.m - m), eb = exp(b.m - m);
    return lse_state{m, a.s * ea + b.s * eb, a.w * ea + b.w * eb};
  }
};

//! '+' is the merge, so lse states reduce like sums.
RLFLOW_HD inline lse_state operator+(lse_state const& a, lse_state const& b) { return lse_merge{}(a, b); }

// ---------------------------------------------------------------------------------------------
// KL estimators (verl: kl_penalty / kl_penalty_forward). x = logprob, r = ref_logprob.

struct kl_value_grad {
  double value, grad;  //!< estimator value and its derivative with respect to x
};

RLFLOW_HD inline kl_value_grad kl_eval(KLKind kind, bool straight_through, double x, double r) {
  double const d = x - r;
  kl_value_grad out{0.0, 0.0};
  switch (kind) {
    case KLKind::k1: out = {d, 1.0}; break;
    case KLKind::abs: out = {fabs(d), d > 0 ? 1.0 : (d < 0 ? -1.0 : 0.0)}; break;
    case KLKind::k2: out = {0.5 * d * d, d}; break;
    case KLKind::k3: {
      double const kraw = r - x;
      double const k = clampd(kraw, -20.0, 20.0);
      double const e = exp(k);
      double const v = e - k - 1.0;
      out.value = clampd(v, -10.0, 10.0);
      out.grad = dclamp(v, -10.0, 10.0) * (e - 1.0) * (-dclamp(kraw, -20.0, 20.0));
      break;
    }
  }
  if (straight_through) out.grad = d;  // gradient of 0.5 d^2
  return out;
}

// ---------------------------------------------------------------------------------------------
// Per-token policy losses: loss value, d loss / d log_prob, and metric indicator values.

struct token_loss {
  double loss = 0, dloss = 0;  //!< per-token loss and its derivative with respect to log_prob
  double clip = 0;             //!< indicator for pg_clipfrac
  double clip_lower = 0;       //!< indicator for pg_clipfrac_lower
  double kl = 0;               //!< per-token term of ppo_kl
};

//! verl: compute_policy_loss_vanilla (PPO clip with clip_ratio_low/high and dual clip c).
struct vanilla_token {
  double lo, hi, c;
  RLFLOW_HD token_loss operator()(double x, double old, double adv) const {
    token_loss t;
    double const draw = x - old;
    double const d = clampd(draw, -20.0, 20.0);
    double const r = exp(d);
    double const dr = r * dclamp(draw, -20.0, 20.0);
    double const l1 = -adv * r, dl1 = -adv * dr;
    double const rc = clampd(r, 1.0 - lo, 1.0 + hi);
    double const l2 = -adv * rc, dl2 = -adv * dr * dclamp(r, 1.0 - lo, 1.0 + hi);
    double const ga = dmax_da(l1, l2);
    double const lc = l1 > l2 ? l1 : l2;
    double const dlc = ga * dl1 + (1.0 - ga) * dl2;
    double const l3 = -adv * c;
    if (adv < 0) {
      t.loss = l3 < lc ? l3 : lc;
      t.dloss = dmin_da(lc, l3) * dlc;
    } else {
      t.loss = lc;
      t.dloss = dlc;
    }
    t.clip = l2 > l1 ? 1.0 : 0.0;
    t.clip_lower = (lc > l3 && adv < 0) ? 1.0 : 0.0;
    t.kl = -d;
    return t;
  }
};

//! verl: compute_policy_loss_gspo, given the row's stop-gradient log sequence ratio 'lseq'.
struct gspo_token {
  double lo, hi;
  RLFLOW_HD token_loss operator()(double x, double old, double adv, double lseq) const {
    token_loss t;
    double const lr = lseq < 10.0 ? lseq : 10.0;  // clamp(max=10) of sg(l) + x - sg(x)
    double const r = exp(lr);
    double const dr = lseq <= 10.0 ? r : 0.0;
    double const l1 = -adv * r, dl1 = -adv * dr;
    double const rc = clampd(r, 1.0 - lo, 1.0 + hi);
    double const l2 = -adv * rc, dl2 = -adv * dr * dclamp(r, 1.0 - lo, 1.0 + hi);
    double const ga = dmax_da(l1, l2);
    t.loss = l1 > l2 ? l1 : l2;
    t.dloss = ga * dl1 + (1.0 - ga) * dl2;
    t.clip = l2 > l1 ? 1.0 : 0.0;
    t.kl = -(x - old);
    return t;
  }
};

//! verl: compute_policy_loss_sapo (soft gate sigmoid(tau (r - 1)) * 4 / tau).
struct sapo_token {
  double tau_pos, tau_neg;
  RLFLOW_HD token_loss operator()(double x, double old, double adv) const {
    token_loss t;
    double const draw = x - old;
    double const d = clampd(draw, -20.0, 20.0);
    double const r = exp(d);
    double const dr = r * dclamp(draw, -20.0, 20.0);
    double const tau = adv > 0 ? tau_pos : tau_neg;
    double const s = 1.0 / (1.0 + exp(-tau * (r - 1.0)));
    t.loss = -(s * (4.0 / tau)) * adv;
    t.dloss = -adv * 4.0 * s * (1.0 - s) * dr;
    t.kl = -d;
    return t;
  }
};

//! verl: compute_policy_loss_gpg (-log_prob * A).
struct gpg_token {
  RLFLOW_HD token_loss operator()(double x, double, double adv) const {
    token_loss t;
    t.loss = -x * adv;
    t.dloss = -adv;
    return t;
  }
};

//! verl: compute_policy_loss_cispo (-sg(clip(ratio)) * A * log_prob).
struct cispo_token {
  double lo, hi;
  RLFLOW_HD token_loss operator()(double x, double old, double adv) const {
    token_loss t;
    double const d = clampd(x - old, -20.0, 20.0);
    double const r = exp(d);
    double const rc = clampd(r, 1.0 - lo, 1.0 + hi);
    t.loss = -rc * adv * x;
    t.dloss = -rc * adv;
    t.clip = r != rc ? 1.0 : 0.0;
    t.kl = -d;
    return t;
  }
};

//! verl: compute_policy_loss_dppo_tv / compute_policy_loss_dppo_kl (DPPO-Binary): clip_ratio_low/high
//! are divergence thresholds; a token is 'valid' unless the move from old to new probability exceeds
//! them in the advantage's direction (TV: p - p_old; KL: the binary KL between Bernoulli(p_old) and
//! Bernoulli(p)). Loss -A sg(min(r, c)) x valid with r = e^clamp(x - old, +-20), c = clip_ratio_c.
//! 'clip' = 1 - valid (pg_clipfrac), 'clip_lower' = [r > c] valid (pg_clipfrac_lower).
struct dppo_token {
  double lo, hi, c;
  bool kl;  //!< false: dppo_tv, true: dppo_kl
  RLFLOW_HD token_loss operator()(double x, double old, double adv) const {
    token_loss t;
    double const d = clampd(x - old, -20.0, 20.0);
    double const r = exp(d);
    double const rt = r < c ? r : c;  // torch.clamp(ratio, max=c), detached
    double const p = exp(x), po = exp(old);
    bool valid;
    if (kl) {
      double const bkl = po * (old - x) + (1.0 - po) * log((1.0 - po + 1e-8) / (1.0 - p + 1e-8));
      valid = adv > 0 ? (bkl <= hi || p <= po) : (bkl <= lo || p >= po);
    } else {
      valid = adv > 0 ? (p - po <= hi) : (p - po >= -lo);
    }
    double const v = valid ? 1.0 : 0.0;
    t.loss = -adv * rt * x * v;
    t.dloss = -adv * rt * v;
    t.clip = 1.0 - v;
    t.clip_lower = (r > c ? 1.0 : 0.0) * v;
    t.kl = -d;
    return t;
  }
};

//! verl: compute_policy_loss_reinforce (-A x; IS weights, if any, multiply outside). 'old' is the
//! rollout log-prob: ppo_kl = mmean(rollout - x).
struct reinforce_token {
  RLFLOW_HD token_loss operator()(double x, double old, double adv) const {
    token_loss t;
    t.loss = -adv * x;
    t.dloss = -adv;
    t.kl = old - x;
    return t;
  }
};

//! verl: compute_policy_loss_dro (-(log_prob * A - beta/2 (log_prob - old)^2)).
struct dro_token {
  double beta;
  RLFLOW_HD token_loss operator()(double x, double old, double adv) const {
    token_loss t;
    double const d = x - old;
    t.loss = -(x * adv - 0.5 * beta * d * d);
    t.dloss = -adv + beta * d;
    t.kl = -d;
    return t;
  }
};

//! verl: compute_policy_loss_clip_cov, before the covariance correction: max(-A r, -A clip(r)) with
//! the unclamped ratio; 'clip' marks tokens already clipped (not eligible for the correction).
struct clip_cov_token {
  double lo, hi;
  RLFLOW_HD token_loss operator()(double x, double old, double adv) const {
    token_loss t;
    double const d = x - old;
    double const r = exp(d);
    double const l1 = -adv * r, dl1 = -adv * r;
    double const rc = clampd(r, 1.0 - lo, 1.0 + hi);
    double const l2 = -adv * rc, dl2 = -adv * r * dclamp(r, 1.0 - lo, 1.0 + hi);
    double const ga = dmax_da(l1, l2);
    t.loss = l1 > l2 ? l1 : l2;
    t.dloss = ga * dl1 + (1.0 - ga) * dl2;
    t.clip = l2 > l1 ? 1.0 : 0.0;
    t.kl = -d;
    return t;
  }
};

//! verl: compute_policy_loss_kl_cov: -A r, plus coef |log r| on the selected tokens.
struct kl_cov_token {
  double coef;
  RLFLOW_HD token_loss operator()(double x, double old, double adv, bool selected) const {
    token_loss t;
    double const d = x - old;
    double const r = exp(d);
    t.loss = -adv * r;
    t.dloss = -adv * r;
    if (selected) {
      t.loss += coef * fabs(d);
      t.dloss += coef * (d > 0 ? 1.0 : (d < 0 ? -1.0 : 0.0));
    }
    t.kl = fabs(d);
    return t;
  }
};

//! verl: compute_policy_loss_geo_mean per token: the sign-clipped log ratio and its derivative.
struct geo_mean_token {
  double lo, hi;
  struct out {
    double dstar, ddstar, clipped, kl;
  };
  RLFLOW_HD out operator()(double x, double old, double adv) const {
    double const d = x - old;
    double const dc = clampd(d, -lo, hi);
    double const sg = adv > 0 ? 1.0 : (adv < 0 ? -1.0 : 0.0);
    double const a = sg * d, b = sg * dc;
    double const ga = dmin_da(a, b);
    double const mn = a < b ? a : b;
    out o;
    o.dstar = sg * mn;
    o.ddstar = sg * sg * (ga + (1.0 - ga) * dclamp(d, -lo, hi));
    o.clipped = d != dc ? 1.0 : 0.0;
    o.kl = -d;
    return o;
  }
};

// ---------------------------------------------------------------------------------------------
// Clipped value loss (verl: compute_value_loss; clip_by_value = max(min(v, hi), lo)).

struct value_token {
  double eps;
  struct out {
    double loss, dloss, clipped;  //!< max((v-R)^2, (v_clip-R)^2), its d/dv, [(v_clip-R)^2 > (v-R)^2]
  };
  RLFLOW_HD out operator()(double v, double old, double ret) const {
    double const lo = old - eps, hi = old + eps;
    double const y1 = v < hi ? v : hi;
    double const g1 = dmin_da(v, hi);
    double const vc = y1 > lo ? y1 : lo;
    double const dvc = g1 * dmax_da(y1, lo);
    double const l1 = (v - ret) * (v - ret), l2 = (vc - ret) * (vc - ret);
    double const ga = dmax_da(l1, l2);
    out o;
    o.loss = l1 > l2 ? l1 : l2;
    o.dloss = ga * 2.0 * (v - ret) + (1.0 - ga) * 2.0 * (vc - ret) * dvc;
    o.clipped = l2 > l1 ? 1.0 : 0.0;
    return o;
  }
};

}  // namespace rlflow::kernels::math
