// rlflow/kernels/advantage.hpp: advantage estimators with verl's names and semantics
// (verl: core_algos.ADV_ESTIMATOR_REGISTRY): GAE, GRPO (and Dr.GRPO), GDPO, GRPO pass@k, RLOO and
// rloo_vectorized, REINFORCE++, REINFORCE++-baseline, ReMax, OPO, GPG, the optimal token baseline
// and its multi-turn (TIR) variant; plus sequence_scores. The uid grouping (group_index) is in
// rlflow/kernels/group_index.hpp, included here.
// Rows of one group may sit anywhere in the batch and groups may differ in size. Each writes
// advantages (B, T) and optionally returns (B, T). The batch-level dispatch by name lives in
// rlflow/algorithm/advantage_step.hpp.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <map>
#include <span>
#include <type_traits>
#include <string>
#include <string_view>
#include <functional>
#include <utility>
#include <vector>

#include <rlflow/kernels/detail/checks.hpp>
#include <rlflow/kernels/detail/exec.hpp>
#include <rlflow/kernels/group_index.hpp>  // group_index, detail::hashed_group_ids (rows grouped by uid)
#include <rlflow/kernels/masked.hpp>   // detail::masked_moments, whiten_apply
#include <rlflow/kernels/math.hpp>     // welford, top2
#include <rlflow/kernels/options.hpp>  // Dims

// Letters: B rows (prompts x samples, in any order), T padded response tokens.

namespace rlflow::kernels {

//! GRPO-family options. verl's trainer never forwards epsilon (it stays 1e-6); pass@k reads the
//! std flag from the algorithm config - pass algorithm.norm_adv_by_std_in_grpo here.
struct GRPOOptions {
  double epsilon = 1e-6;
  bool norm_adv_by_std_in_grpo = true;  //!< false = Dr.GRPO (no std division)
};

namespace detail {

template <class Ex>
using welford_buffer = typename Ex::template buffer<math::welford>;

//! Per-group Welford moments of the scores (group ids in [0, groups); groups defaults to B).
template <class Ex>
welford_buffer<Ex> group_moments(Ex const& ex, std::int64_t rows, std::int64_t const* group, float const* s,
                                 std::int64_t groups = -1) {
  if (groups < 0) groups = rows;
  auto st = ex.template alloc<math::welford>(groups);
  if constexpr (std::is_same_v<Ex, exec<cpu::tag>>) {
    // rows are folded in one at a time, in row order: the branch-free push is the same merge
    ex.group_reduce(rows, group, groups, math::welford{}, [=](std::int64_t i) -> double { return s[i]; }, math::welford_push{},
                    st.data());
  } else {
    ex.group_reduce(rows, group, groups, math::welford{},
                    [=] RLFLOW_HD(std::int64_t i) -> math::welford { return math::welford::of(s[i]); },
                    math::welford_merge{}, st.data());
  }
  return st;
}

//! adv[i,t] = m ? a[i] : 0 (and the same into ret when given): the score-to-token broadcast.
template <class Ex, class M>
void broadcast_rows(Ex const& ex, Dims d, float const* a, M const* m, float* adv, float* ret) {
  ex.broadcast_rows(d.rows, d.cols, a, m, adv, ret);
}

//! The broadcast with the row value computed by value(i) (RLFLOW_HD). touch(i) is the address
//! value(i) reads at random (prefetched on the CPU, where the two passes are fused); other
//! backends fill a scratch array of row values and broadcast it.
template <class Ex, class M, class F, class Touch>
void broadcast_rows_by(Ex const& ex, Dims d, F value, Touch touch, M const* m, float* adv, float* ret) {
  if constexpr (std::is_same_v<Ex, exec<cpu::tag>>) {
    ex.broadcast_rows_fn(d.rows, d.cols, value, touch, m, adv, ret);
  } else {
    auto a = ex.template alloc<float>(d.rows);
    float* ap = a.data();
    ex.for_each(d.rows, [=] RLFLOW_HD(std::int64_t i) { ap[i] = value(i); });
    ex.broadcast_rows(d.rows, d.cols, ap, m, adv, ret);
  }
}

//! True when every row has its own group (ids a permutation of 0..rows-1): then each group is
//! a group of one and needs no statistics table. CPU only; 'groups' is the largest id + 1 from
//! the check pass, so the test runs only when groups == rows, with a bitmap of rows bits.
template <class Ex>
bool all_singleton_groups(Ex const&, std::int64_t rows, std::int64_t const* group, std::int64_t groups) {
  if constexpr (std::is_same_v<Ex, exec<cpu::tag>>) {
    if (groups != rows || rows == 0) return false;
    std::vector<std::uint64_t> seen(static_cast<std::size_t>((rows + 63) / 64), 0);
    for (std::int64_t i = 0; i < rows; ++i) {
      auto const id = static_cast<std::uint64_t>(group[i]);
      std::uint64_t const bit = std::uint64_t{1} << (id & 63u);
      std::uint64_t& word = seen[static_cast<std::size_t>(id >> 6)];
      if (word & bit) return false;
      word |= bit;
    }
    return true;
  } else {
    return false;
  }
}

//! Shared checks of the outcome (per-row score) estimators. Returns the group-table size the
//! rows need: largest id + 1 on the CPU (found by the same pass that checks the ids), B elsewhere.
template <class Ex, class M>
std::int64_t outcome_checks(Ex const& ex, const char* fn, Dims d, std::span<float const> scores, std::span<M const> mask,
                    std::span<std::int64_t const> group, bool need_group, std::span<float> adv, std::span<float> ret) {
  expect_dims(fn, d);
  expect_size(fn, "scores", scores.size(), d.rows, "B");
  expect_size(fn, "response_mask", mask.size(), d.numel(), "B*T");
  if (need_group) expect_size(fn, "index", group.size(), d.rows, "B");
  expect_size(fn, "advantages", adv.size(), d.numel(), "B*T");
  if (!ret.empty()) expect_size(fn, "returns", ret.size(), d.numel(), "B*T");
  if constexpr (std::is_same_v<Ex, exec<cpu::tag>>) {
    if (need_group) return check_rows_and_groups(ex, fn, "scores", d.rows, scores.data(), group.data());
  }
  check_finite_rows(ex, fn, "scores", d.rows, scores.data());
  if (need_group) check_groups(ex, fn, d.rows, group.data());
  return d.rows;
}

inline float* opt_ptr(std::span<float> s) { return s.empty() ? nullptr : s.data(); }

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Scores

namespace detail {

//! One row's score on the CPU: four double partial sums (one serial chain of dependent adds was
//! the cost of the whole GRPO step from verl's inputs), rounded once to float.
inline float row_score(float const* x, std::int64_t T) {
  double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
  std::int64_t t = 0;
  for (; t + 4 <= T; t += 4) {
    a0 += static_cast<double>(x[t]);
    a1 += static_cast<double>(x[t + 1]);
    a2 += static_cast<double>(x[t + 2]);
    a3 += static_cast<double>(x[t + 3]);
  }
  for (; t < T; ++t) a0 += static_cast<double>(x[t]);
  return static_cast<float>((a0 + a1) + (a2 + a3));
}

}  // namespace detail

//! s_i = sum_t r[i,t] over every position (unmasked, like verl's token_level_rewards.sum(-1)).
//! token_level_rewards: (B, T) -> scores: (B)
template <class Policy>
void sequence_scores(Policy const& policy, Dims d, std::span<float const> token_level_rewards, std::span<float> scores) {
  detail::check_policy<Policy>();
  detail::expect_dims("sequence_scores", d);
  detail::expect_size("sequence_scores", "token_level_rewards", token_level_rewards.size(), d.numel(), "B*T");
  detail::expect_size("sequence_scores", "scores", scores.size(), d.rows, "B");
  auto ex = detail::make_exec(policy);
  float const* r = token_level_rewards.data();
  float* s = scores.data();
  std::int64_t const T = d.cols;
  if constexpr (std::is_same_v<std::remove_cvref_t<decltype(ex)>, detail::exec<cpu::tag>>) {
    // CPU: four double partial sums per row (one serial chain of dependent adds was the cost of
    // the whole GRPO step from verl's inputs); still accumulated in double.
    ex.for_each(d.rows, [=](std::int64_t i) { s[i] = detail::row_score(r + i * T, T); });
    return;
  }
  ex.row_reduce(d.rows, T, 0.0, [=] RLFLOW_HD(std::int64_t i, std::int64_t t) -> double { return r[i * T + t]; },
                [=] RLFLOW_HD(std::int64_t i, double v) { s[i] = static_cast<float>(v); });
}

// ---------------------------------------------------------------------------------------------
// Outcome estimators over groups

//! GRPO: a_i = (s_i - mean_g) / (std_g + eps) with the unbiased group std, or s_i - mean_g
//! (Dr.GRPO); a group of one uses mean 0, std 1. A = returns = a_i * m.
//! verl: compute_grpo_outcome_advantage ("grpo"; "grpo_vectorized" is the same function)
//! scores: (B); response_mask: (B, T); index: (B) dense group ids; advantages, returns: (B, T)
template <class Policy, class Mask>
void grpo_outcome_advantage(Policy const& policy, Dims d, std::span<float const> scores,
                            std::span<Mask const> response_mask, std::span<std::int64_t const> index,
                            std::span<float> advantages, std::span<float> returns = {}, GRPOOptions opt = {}) {
  detail::check_policy<Policy>();
  detail::check_mask<Mask>();
  auto ex = detail::make_exec(policy);
  std::int64_t const groups =
      detail::outcome_checks(ex, "grpo_outcome_advantage", d, scores, response_mask, index, true, advantages, returns);
  float const* s = scores.data();
  std::int64_t const* g = index.data();
  double const eps = opt.epsilon;
  bool const norm = opt.norm_adv_by_std_in_grpo;
  if (detail::all_singleton_groups(ex, d.rows, g, groups)) {
    // Every group is a group of one (n = 1): verl's rule gives mean 0 and std 1, so the
    // advantage is the score itself (divided by 1 + eps); no group table is needed.
    double const div = 1.0 + eps;
    detail::broadcast_rows_by(
        ex, d, [=] RLFLOW_HD(std::int64_t i) -> float { return static_cast<float>(norm ? static_cast<double>(s[i]) / div : static_cast<double>(s[i])); },
        [=] RLFLOW_HD(std::int64_t i) -> void const* { return s + i; }, response_mask.data(), advantages.data(),
        detail::opt_ptr(returns));
    return;
  }
  auto st = detail::group_moments(ex, d.rows, g, s, groups);
  math::welford const* w = st.data();
  // Once per group: the mean to subtract and the divisor std + eps (the same doubles the per-row
  // formula used, so results are unchanged), packed 16 bytes a group so the broadcast's random
  // read of a group touches one cache line.
  auto cs = ex.template alloc<math::center_scale>(groups);
  math::center_scale* c = cs.data();
  ex.for_each(groups, [=] RLFLOW_HD(std::int64_t j) {
    math::welford const q = w[j];
    c[j] = math::center_scale{q.n > 1 ? q.mean : 0.0, (q.n > 1 ? sqrt(q.m2 / (q.n - 1.0)) : 1.0) + eps};
  });
  detail::broadcast_rows_by(
      ex, d,
      [=] RLFLOW_HD(std::int64_t i) -> float {
        math::center_scale const q = c[g[i]];
        double const x = static_cast<double>(s[i]) - q.center;
        return static_cast<float>(norm ? x / q.scale : x);
      },
      [=] RLFLOW_HD(std::int64_t i) -> void const* { return c + g[i]; }, response_mask.data(), advantages.data(),
      detail::opt_ptr(returns));
}

//! Pass@k: only each group's top scorer gets r_max - r_second (divided by std_g + eps when
//! norm_adv_by_std_in_grpo); everything else 0. Groups of one raise value_error (as verl).
//! Ties for the top go to the lowest row (verl: unspecified; the advantage is then 0 anyway).
//! verl: compute_grpo_passk_outcome_advantage ("grpo_passk")
template <class Policy, class Mask>
void grpo_passk_outcome_advantage(Policy const& policy, Dims d, std::span<float const> scores,
                                  std::span<Mask const> response_mask, std::span<std::int64_t const> index,
                                  std::span<float> advantages, std::span<float> returns = {}, GRPOOptions opt = {}) {
  detail::check_policy<Policy>();
  detail::check_mask<Mask>();
  auto ex = detail::make_exec(policy);
  const char* fn = "grpo_passk_outcome_advantage";
  detail::outcome_checks(ex, fn, d, scores, response_mask, index, true, advantages, returns);
  float const* s = scores.data();
  std::int64_t const* g = index.data();
  auto st = detail::group_moments(ex, d.rows, g, s);
  auto top = ex.template alloc<math::top2>(d.rows);
  ex.group_reduce(d.rows, g, d.rows, math::top2{}, [=] RLFLOW_HD(std::int64_t i) -> math::top2 { return math::top2::of(s[i], i); },
                  math::top2_merge{}, top.data());
  math::welford const* w = st.data();
  math::top2 const* tp = top.data();
  std::int64_t const lone = ex.min_index(d.rows, [=] RLFLOW_HD(std::int64_t i) -> std::int64_t {
    return w[g[i]].n < 2 ? i : math::first_index::none;
  });
  if (lone != math::first_index::none)
    throw value_error(msg("rlflow::kernels::", fn, ": group ", ex.load(g, lone), " (row ", lone,
                          ") has 1 sample; pass@k needs at least 2 samples per group (verl raises too) - set rollout.n >= 2"));
  auto a = ex.template alloc<float>(d.rows);
  float* ap = a.data();
  double const eps = opt.epsilon;
  bool const norm = opt.norm_adv_by_std_in_grpo;
  ex.for_each(d.rows, [=] RLFLOW_HD(std::int64_t i) {
    math::top2 const t = tp[g[i]];
    double v = 0.0;
    if (t.i1 == i) {
      v = t.v1 - t.v2;
      if (norm) {
        math::welford const q = w[g[i]];
        v /= sqrt(q.m2 / (q.n - 1.0)) + eps;
      }
    }
    ap[i] = static_cast<float>(v);
  });
  detail::broadcast_rows(ex, d, ap, response_mask.data(), advantages.data(), detail::opt_ptr(returns));
}

namespace detail {
//! The outcome estimators whose row value is a function of the row's score and its group's
//! moments: checks, group statistics, per-row value f(q, s_i) (RLFLOW_HD), broadcast.
template <class Policy, class Mask, class F>
void outcome_from_group_moments(Policy const& policy, const char* fn, Dims d, std::span<float const> scores,
                                std::span<Mask const> response_mask, std::span<std::int64_t const> index,
                                std::span<float> advantages, std::span<float> returns, F f) {
  check_policy<Policy>();
  check_mask<Mask>();
  auto ex = make_exec(policy);
  std::int64_t const groups = outcome_checks(ex, fn, d, scores, response_mask, index, true, advantages, returns);
  float const* s = scores.data();
  std::int64_t const* g = index.data();
  auto st = group_moments(ex, d.rows, g, s, groups);
  math::welford const* w = st.data();
  broadcast_rows_by(
      ex, d, [=] RLFLOW_HD(std::int64_t i) -> float { return static_cast<float>(f(w[g[i]], static_cast<double>(s[i]))); },
      [=] RLFLOW_HD(std::int64_t i) -> void const* { return w + g[i]; }, response_mask.data(), advantages.data(),
      opt_ptr(returns));
}

//! RLOO's row value: s - mean of the others = (s - mean_g) n/(n-1); a group of one keeps
//! 'lone' (verl's loop: s; the vectorized variant: 0).
struct rloo_value {
  bool lone_is_zero = false;
  RLFLOW_HD double operator()(math::welford const& q, double s) const {
    if (q.n > 1) return (s - q.mean) * (q.n / (q.n - 1.0));
    return lone_is_zero ? 0.0 : s;
  }
};
}  // namespace detail

//! RLOO: a_i = n/(n-1) s_i - n/(n-1) mean_g = s_i - mean of the others; a group of one keeps
//! a_i = s_i.                                     verl: compute_rloo_outcome_advantage ("rloo")
template <class Policy, class Mask>
void rloo_outcome_advantage(Policy const& policy, Dims d, std::span<float const> scores, std::span<Mask const> response_mask,
                            std::span<std::int64_t const> index, std::span<float> advantages, std::span<float> returns = {}) {
  detail::outcome_from_group_moments(policy, "rloo_outcome_advantage", d, scores, response_mask, index, advantages, returns,
                                     detail::rloo_value{false});
}

//! Vectorized RLOO: a_i = (c s_i - S_g) / max(c - 1, 1) * [c > 1]. Differs from rloo for groups
//! of one: 0 instead of s_i.                     verl: compute_rloo_vectorized_outcome_advantage
template <class Policy, class Mask>
void rloo_vectorized_outcome_advantage(Policy const& policy, Dims d, std::span<float const> scores,
                                       std::span<Mask const> response_mask, std::span<std::int64_t const> index,
                                       std::span<float> advantages, std::span<float> returns = {}) {
  detail::outcome_from_group_moments(policy, "rloo_vectorized_outcome_advantage", d, scores, response_mask, index, advantages,
                                     returns, detail::rloo_value{true});
}

//! REINFORCE++-baseline: a_i = s_i - mean_g (a group of one: mean 0), tiled and masked, then
//! A = masked_whiten(a m, m) m over the whole batch; returns = A. Throws for fewer than two
//! valid tokens in the batch.   verl: compute_reinforce_plus_plus_baseline_outcome_advantage
template <class Policy, class Mask>
void reinforce_plus_plus_baseline_outcome_advantage(Policy const& policy, Dims d, std::span<float const> scores,
                                                    std::span<Mask const> response_mask, std::span<std::int64_t const> index,
                                                    std::span<float> advantages, std::span<float> returns = {}) {
  detail::check_policy<Policy>();
  detail::check_mask<Mask>();
  auto ex = detail::make_exec(policy);
  const char* fn = "reinforce_plus_plus_baseline_outcome_advantage";
  detail::outcome_checks(ex, fn, d, scores, response_mask, index, true, advantages, returns);
  float const* s = scores.data();
  std::int64_t const* g = index.data();
  Mask const* m = response_mask.data();
  auto st = detail::group_moments(ex, d.rows, g, s);
  math::welford const* w = st.data();
  auto a = ex.template alloc<float>(d.rows);
  float* ap = a.data();
  ex.for_each(d.rows, [=] RLFLOW_HD(std::int64_t i) {
    math::welford const q = w[g[i]];
    ap[i] = static_cast<float>(static_cast<double>(s[i]) - (q.n > 1 ? q.mean : 0.0));
  });
  float* adv = advantages.data();
  detail::broadcast_rows(ex, d, ap, m, adv, static_cast<float*>(nullptr));
  auto const mom = detail::masked_moments(ex, fn, d, adv, m, true);
  double const mean = mom.mean, rs = 1.0 / std::sqrt(mom.var + 1e-8);
  float* ret = detail::opt_ptr(returns);
  ex.for_each(d.numel(), [=] RLFLOW_HD(std::int64_t k) {
    float const v = detail::on(m[k]) ? static_cast<float>((static_cast<double>(adv[k]) - mean) * rs) : 0.0f;
    adv[k] = v;
    if (ret) ret[k] = v;
  });
}

//! OPO: length-weighted baseline b_g = sum_j L_j s_j / sum_j L_j (L_j = valid tokens of row j;
//! a group of one: b = 0); A = returns = (s_i - b_g) m. A group of >= 2 fully masked rows raises
//! value_error (verl would produce NaN).          verl: compute_opo_outcome_advantage ("opo")
template <class Policy, class Mask>
void opo_outcome_advantage(Policy const& policy, Dims d, std::span<float const> scores, std::span<Mask const> response_mask,
                           std::span<std::int64_t const> index, std::span<float> advantages, std::span<float> returns = {}) {
  detail::check_policy<Policy>();
  detail::check_mask<Mask>();
  auto ex = detail::make_exec(policy);
  const char* fn = "opo_outcome_advantage";
  detail::outcome_checks(ex, fn, d, scores, response_mask, index, true, advantages, returns);
  float const* s = scores.data();
  std::int64_t const* g = index.data();
  Mask const* m = response_mask.data();
  std::int64_t const T = d.cols;
  auto len = ex.template alloc<double>(d.rows);
  double* lp = len.data();
  ex.row_reduce(d.rows, T, 0.0, [=] RLFLOW_HD(std::int64_t i, std::int64_t t) -> double { return detail::on(m[i * T + t]) ? 1.0 : 0.0; },
                [=] RLFLOW_HD(std::int64_t i, double v) { lp[i] = v; });
  using V = math::dvec<3>;
  auto st = ex.template alloc<V>(d.rows);
  ex.group_reduce(d.rows, g, d.rows, V::zero(),
                  [=] RLFLOW_HD(std::int64_t i) -> V { return V{{lp[i] * static_cast<double>(s[i]), lp[i], 1.0}}; },
                  [] RLFLOW_HD(V const& x, V const& y) -> V { return x + y; }, st.data());
  V const* sp = st.data();
  std::int64_t const bad = ex.min_index(d.rows, [=] RLFLOW_HD(std::int64_t i) -> std::int64_t {
    V const q = sp[g[i]];
    return (q.v[2] > 1 && q.v[1] == 0) ? i : math::first_index::none;
  });
  if (bad != math::first_index::none)
    throw value_error(msg("rlflow::kernels::", fn, ": every row of group ", ex.load(g, bad), " (e.g. row ", bad,
                          ") is fully masked, so the length-weighted baseline is 0/0 (verl yields NaN); drop the group"));
  auto a = ex.template alloc<float>(d.rows);
  float* ap = a.data();
  ex.for_each(d.rows, [=] RLFLOW_HD(std::int64_t i) {
    V const q = sp[g[i]];
    double const b = q.v[2] > 1 ? q.v[0] / q.v[1] : 0.0;
    ap[i] = static_cast<float>(static_cast<double>(s[i]) - b);
  });
  detail::broadcast_rows(ex, d, ap, m, advantages.data(), detail::opt_ptr(returns));
}

//! GPG: alpha = B / max(#{i: s_i != 0}, 1) over the whole batch; a_i = alpha (s_i - mean_g) / f_norm
//! (a group of one: mean 0). A = returns = a_i m.  verl: compute_gpg_outcome_advantage ("gpg")
template <class Policy, class Mask>
void gpg_outcome_advantage(Policy const& policy, Dims d, std::span<float const> scores, std::span<Mask const> response_mask,
                           std::span<std::int64_t const> index, std::span<float> advantages, std::span<float> returns = {},
                           double f_norm = 1.0) {
  detail::check_policy<Policy>();
  detail::check_mask<Mask>();
  auto ex = detail::make_exec(policy);
  detail::outcome_checks(ex, "gpg_outcome_advantage", d, scores, response_mask, index, true, advantages, returns);
  float const* s = scores.data();
  std::int64_t const* g = index.data();
  auto st = detail::group_moments(ex, d.rows, g, s);
  math::welford const* w = st.data();
  double const nz = ex.reduce(d.rows, 0.0, [=] RLFLOW_HD(std::int64_t i) -> double { return s[i] != 0.0f ? 1.0 : 0.0; });
  double const alpha = static_cast<double>(d.rows) / (nz > 1 ? nz : 1.0);
  auto a = ex.template alloc<float>(d.rows);
  float* ap = a.data();
  ex.for_each(d.rows, [=] RLFLOW_HD(std::int64_t i) {
    math::welford const q = w[g[i]];
    ap[i] = static_cast<float>(alpha * (static_cast<double>(s[i]) - (q.n > 1 ? q.mean : 0.0)) / f_norm);
  });
  detail::broadcast_rows(ex, d, ap, response_mask.data(), advantages.data(), detail::opt_ptr(returns));
}

// ---------------------------------------------------------------------------------------------
// Token-level estimators (per-row backward scans)

//! GAE: backward scan with carries nextV, last (both 0 at the end; left unchanged at masked
//! positions): delta = r + gamma nextV - V; last = delta + gamma lam last. A_raw[t] = last,
//! returns = A_raw + V everywhere; advantages = masked_whiten(A_raw, m) over the whole batch and
//! NOT re-masked (padding holds whitened values, as verl).  verl: compute_gae_advantage_return
//! token_level_rewards, values, response_mask, advantages, returns: (B, T)
template <class Policy, class Mask>
void gae_advantage_return(Policy const& policy, Dims d, std::span<float const> token_level_rewards,
                          std::span<float const> values, std::span<Mask const> response_mask, double gamma, double lam,
                          std::span<float> advantages, std::span<float> returns) {
  detail::check_policy<Policy>();
  detail::check_mask<Mask>();
  const char* fn = "gae_advantage_return";
  detail::expect_token_spans(fn, d,
                             {{"token_level_rewards", token_level_rewards.size()}, {"values", values.size()},
                              {"response_mask", response_mask.size()}, {"advantages", advantages.size()},
                              {"returns", returns.size()}});
  auto ex = detail::make_exec(policy);
  Mask const* m = response_mask.data();
  float const* r = token_level_rewards.data();
  float const* v = values.data();
  detail::check_finite_tokens(ex, fn, "token_level_rewards", d, r, m);
  detail::check_finite_tokens(ex, fn, "values", d, v, m);
  float* adv = advantages.data();
  float* ret = returns.data();
  std::int64_t const T = d.cols;
  ex.for_each(d.rows, [=] RLFLOW_HD(std::int64_t i) {
    double next_v = 0.0, last = 0.0;
    for (std::int64_t t = T - 1; t >= 0; --t) {
      std::int64_t const k = i * T + t;
      double const delta = static_cast<double>(r[k]) + gamma * next_v - static_cast<double>(v[k]);
      double const cand = delta + gamma * lam * last;
      if (detail::on(m[k])) {
        next_v = v[k];
        last = cand;
      }
      float const a = static_cast<float>(last);
      adv[k] = a;
      ret[k] = static_cast<float>(static_cast<double>(a) + static_cast<double>(v[k]));
    }
  });
  auto const mom = detail::masked_moments(ex, fn, d, adv, m, true);
  detail::whiten_apply(ex, d.numel(), adv, adv, mom.mean, mom.var, true);
}

//! REINFORCE++: backward scan run = 0; new = r + gamma run; returns_t = new m_t; run = m_t ? new
//! : run (masked tokens carry the running return). advantages = masked_whiten(returns, m) m;
//! returns are the un-whitened ones.   verl: compute_reinforce_plus_plus_outcome_advantage
template <class Policy, class Mask>
void reinforce_plus_plus_outcome_advantage(Policy const& policy, Dims d, std::span<float const> token_level_rewards,
                                           std::span<Mask const> response_mask, double gamma, std::span<float> advantages,
                                           std::span<float> returns) {
  detail::check_policy<Policy>();
  detail::check_mask<Mask>();
  const char* fn = "reinforce_plus_plus_outcome_advantage";
  detail::expect_token_spans(fn, d,
                             {{"token_level_rewards", token_level_rewards.size()},
                              {"response_mask", response_mask.size()}, {"advantages", advantages.size()},
                              {"returns", returns.size()}});
  auto ex = detail::make_exec(policy);
  Mask const* m = response_mask.data();
  float const* r = token_level_rewards.data();
  detail::check_finite_tokens(ex, fn, "token_level_rewards", d, r, m);
  float* adv = advantages.data();
  float* ret = returns.data();
  std::int64_t const T = d.cols;
  ex.for_each(d.rows, [=] RLFLOW_HD(std::int64_t i) {
    double run = 0.0;
    for (std::int64_t t = T - 1; t >= 0; --t) {
      std::int64_t const k = i * T + t;
      double const nw = static_cast<double>(r[k]) + gamma * run;
      bool const v = detail::on(m[k]);
      ret[k] = v ? static_cast<float>(nw) : 0.0f;
      if (v) run = nw;
    }
  });
  auto const mom = detail::masked_moments(ex, fn, d, ret, m, true);
  double const mean = mom.mean, rs = 1.0 / std::sqrt(mom.var + 1e-8);
  ex.for_each(d.numel(), [=] RLFLOW_HD(std::int64_t k) {
    adv[k] = detail::on(m[k]) ? static_cast<float>((static_cast<double>(ret[k]) - mean) * rs) : 0.0f;
  });
}

//! ReMax: returns_t = sum_{t' >= t} r_t' m_t' (reverse cumulative sum); A = returns - b_i m with
//! b_i the greedy rollout's score.     verl: compute_remax_outcome_advantage ("remax")
//! token_level_rewards: (B, T); reward_baselines: (B); advantages, returns: (B, T)
template <class Policy, class Mask>
void remax_outcome_advantage(Policy const& policy, Dims d, std::span<float const> token_level_rewards,
                             std::span<float const> reward_baselines, std::span<Mask const> response_mask,
                             std::span<float> advantages, std::span<float> returns) {
  detail::check_policy<Policy>();
  detail::check_mask<Mask>();
  const char* fn = "remax_outcome_advantage";
  detail::expect_dims(fn, d);
  detail::expect_size(fn, "token_level_rewards", token_level_rewards.size(), d.numel(), "B*T");
  detail::expect_size(fn, "reward_baselines", reward_baselines.size(), d.rows, "B");
  detail::expect_size(fn, "response_mask", response_mask.size(), d.numel(), "B*T");
  detail::expect_size(fn, "advantages", advantages.size(), d.numel(), "B*T");
  detail::expect_size(fn, "returns", returns.size(), d.numel(), "B*T");
  auto ex = detail::make_exec(policy);
  Mask const* m = response_mask.data();
  float const* r = token_level_rewards.data();
  float const* b = reward_baselines.data();
  detail::check_finite_tokens(ex, fn, "token_level_rewards", d, r, m);
  detail::check_finite_rows(ex, fn, "reward_baselines", d.rows, b);
  float* adv = advantages.data();
  float* ret = returns.data();
  std::int64_t const T = d.cols;
  ex.for_each(d.rows, [=] RLFLOW_HD(std::int64_t i) {
    double acc = 0.0;
    for (std::int64_t t = T - 1; t >= 0; --t) {
      std::int64_t const k = i * T + t;
      bool const v = detail::on(m[k]);
      if (v) acc += static_cast<double>(r[k]);
      ret[k] = static_cast<float>(acc);
      adv[k] = static_cast<float>(acc - (v ? static_cast<double>(b[i]) : 0.0));
    }
  });
}

// ---------------------------------------------------------------------------------------------
// GDPO (reward-decoupled GRPO)

//! GDPO: GRPO (same epsilon and std flag) on each reward dimension k separately, A_sum = sum_k w_k A_k
//! (float32 products and sums, as verl), then A = returns = masked_whiten(A_sum, m) m over the batch.
//! With one dimension (the trainer's fallback when no gdpo_reward_keys are configured: the row scores
//! of token_level_rewards) it is the whitened GRPO advantage. Throws for fewer than two valid tokens.
//! verl: compute_gdpo_outcome_advantage ("gdpo")
//! dimension_scores: (K, B) backend memory, dimension k's row i at k*B + i; weights: (K) host values
//! (empty: all 1 = gdpo_reward_weights unset); response_mask, advantages, returns: (B, T); index: (B)
template <class Policy, class Mask>
void gdpo_outcome_advantage(Policy const& policy, Dims d, std::int64_t num_dims, std::span<float const> dimension_scores,
                            std::span<double const> weights, std::span<Mask const> response_mask,
                            std::span<std::int64_t const> index, std::span<float> advantages, std::span<float> returns = {},
                            GRPOOptions opt = {}) {
  detail::check_policy<Policy>();
  detail::check_mask<Mask>();
  const char* fn = "gdpo_outcome_advantage";
  detail::expect_dims(fn, d);
  if (num_dims < 1)
    throw config_error(msg("rlflow::kernels::", fn, ": GDPO needs at least one reward dimension, got ", num_dims,
                           "; set algorithm.gdpo_reward_keys (verl asserts it is non-empty)"));
  detail::expect_size(fn, "dimension_scores", dimension_scores.size(), num_dims * d.rows, "K*B");
  if (!weights.empty() && static_cast<std::int64_t>(weights.size()) != num_dims)
    throw config_error(msg("rlflow::kernels::", fn, ": ", weights.size(), " gdpo_reward_weights for ", num_dims,
                           " reward dimensions; give one weight per gdpo_reward_keys entry"));
  detail::expect_size(fn, "response_mask", response_mask.size(), d.numel(), "B*T");
  detail::expect_size(fn, "advantages", advantages.size(), d.numel(), "B*T");
  if (!returns.empty()) detail::expect_size(fn, "returns", returns.size(), d.numel(), "B*T");
  auto ex = detail::make_exec(policy);
  std::int64_t const n = d.numel();
  auto tmp = ex.template alloc<float>(n);
  float* tp = tmp.data();
  float* acc = advantages.data();
  for (std::int64_t k = 0; k < num_dims; ++k) {
    grpo_outcome_advantage(policy, d, dimension_scores.subspan(static_cast<std::size_t>(k * d.rows), static_cast<std::size_t>(d.rows)),
                           response_mask, index, std::span<float>(tp, static_cast<std::size_t>(n)), std::span<float>{}, opt);
    float const wk = static_cast<float>(weights.empty() ? 1.0 : weights[static_cast<std::size_t>(k)]);
    bool const first = k == 0;
    ex.for_each(n, [=] RLFLOW_HD(std::int64_t q) {
      float const v = wk * tp[q];
      acc[q] = first ? v : acc[q] + v;
    });
  }
  Mask const* m = response_mask.data();
  auto const mom = detail::masked_moments(ex, fn, d, acc, m, true);
  double const mean = mom.mean, rs = 1.0 / std::sqrt(mom.var + 1e-8);
  float* ret = detail::opt_ptr(returns);
  ex.for_each(n, [=] RLFLOW_HD(std::int64_t q) {
    float const v = detail::on(m[q]) ? static_cast<float>((static_cast<double>(acc[q]) - mean) * rs) : 0.0f;
    acc[q] = v;
    if (ret) ret[q] = v;
  });
}

// ---------------------------------------------------------------------------------------------
// Optimal token baseline (OTB) and its multi-turn (TIR) variant

//! verl's keyword defaults of the two OTB estimators.
struct OTBOptions {
  bool handle_zero_tail = true;  //!< zero the longest row's baseline past the second-longest length
  double epsilon = 1e-8;         //!< added to the baseline's denominator
};

namespace detail {

//! OTB core. G = reverse cumsum of r m (the returns), W = cumsum of w m with w = 1 - 2 e^old +
//! sum_pi^2 (times isw^2). Per group of N > 1 and column c: B_c = sum_i G W m / (sum_i W m + eps),
//! with c the token index (otb) or the token's rank among the row's valid tokens (tir: multi-turn
//! rows compacted). Empty rows count as members in otb and are left out in tir (verl).
template <class Ex, class M>
void otb_impl(Ex const& ex, const char* fn, Dims d, bool tir, std::span<float const> token_level_rewards,
              std::span<M const> response_mask, std::span<std::int64_t const> index, std::span<float const> old_log_probs,
              std::span<float const> sum_pi_squared, std::span<float const> rollout_is_weights, std::span<float> advantages,
              std::span<float> returns, OTBOptions opt) {
  expect_dims(fn, d);
  expect_token_spans(fn, d,
                     {{"token_level_rewards", token_level_rewards.size()}, {"response_mask", response_mask.size()},
                      {"old_log_probs", old_log_probs.size()}, {"sum_pi_squared", sum_pi_squared.size()},
                      {"advantages", advantages.size()}, {"returns", returns.size()}});
  expect_size(fn, "index", index.size(), d.rows, "B");
  if (!rollout_is_weights.empty()) expect_size(fn, "rollout_is_weights", rollout_is_weights.size(), d.numel(), "B*T");
  M const* m = response_mask.data();
  float const* r = token_level_rewards.data();
  float const* lp = old_log_probs.data();
  float const* sp = sum_pi_squared.data();
  float const* isw = rollout_is_weights.empty() ? nullptr : rollout_is_weights.data();
  std::int64_t const* g = index.data();
  check_finite_tokens(ex, fn, "token_level_rewards", d, r, m);
  check_finite_tokens(ex, fn, "old_log_probs", d, lp, m);
  check_finite_tokens(ex, fn, "sum_pi_squared", d, sp, m);
  check_finite_tokens(ex, fn, "rollout_is_weights", d, isw, m);
  check_groups(ex, fn, d.rows, g);
  std::int64_t const B = d.rows, T = d.cols, n = d.numel();
  if (n == 0) return;
  float* ret = returns.data();
  float* adv = advantages.data();
  auto wbuf = ex.template alloc<double>(n);
  auto col = ex.template alloc<std::int64_t>(n);  // tir: compact column -> token index (first len entries of a row)
  auto pos = ex.template alloc<std::int64_t>(n);  // the column of each valid token
  auto len = ex.template alloc<double>(B);
  double* W = wbuf.data();
  std::int64_t* cp = col.data();
  std::int64_t* pp = pos.data();
  double* lenp = len.data();
  ex.for_each(B, [=] RLFLOW_HD(std::int64_t i) {
    double run = 0.0, cw = 0.0;
    std::int64_t j = 0;
    for (std::int64_t t = T - 1; t >= 0; --t) {
      std::int64_t const k = i * T + t;
      if (detail::on(m[k])) run += static_cast<double>(r[k]);
      ret[k] = static_cast<float>(run);
    }
    for (std::int64_t t = 0; t < T; ++t) {
      std::int64_t const k = i * T + t;
      if (detail::on(m[k])) {
        double w = 1.0 - 2.0 * exp(static_cast<double>(lp[k])) + static_cast<double>(sp[k]);
        if (isw) w *= static_cast<double>(isw[k]) * static_cast<double>(isw[k]);
        cw += w;
        cp[i * T + j] = t;
        pp[k] = tir ? j : t;
        ++j;
      }
      W[k] = cw;
    }
    lenp[i] = static_cast<double>(j);
  });
  // Group membership, size and the two longest rows (top2: lowest row on ties).
  auto top = ex.template alloc<math::top2>(B);
  ex.group_reduce(B, g, B, math::top2{},
                  [=] RLFLOW_HD(std::int64_t i) -> math::top2 {
                    return (tir && lenp[i] == 0) ? math::top2{} : math::top2::of(lenp[i], i);
                  },
                  math::top2_merge{}, top.data());
  math::top2 const* tp = top.data();
  // Column sums per group: one thread per column owns that column of every group (no races).
  auto num = ex.template alloc<double>(n);
  auto den = ex.template alloc<double>(n);
  double* np = num.data();
  double* dp = den.data();
  ex.for_each(n, [=] RLFLOW_HD(std::int64_t q) { np[q] = 0.0, dp[q] = 0.0; });
  ex.for_each(T, [=] RLFLOW_HD(std::int64_t c) {
    for (std::int64_t i = 0; i < B; ++i) {
      std::int64_t k;
      if (tir) {
        if (static_cast<double>(c) >= lenp[i]) continue;
        k = i * T + cp[i * T + c];
      } else {
        k = i * T + c;
        if (!detail::on(m[k])) continue;
      }
      std::int64_t const q = g[i] * T + c;
      np[q] += static_cast<double>(ret[k]) * W[k];
      dp[q] += W[k];
    }
  });
  double const eps = opt.epsilon;
  bool const zero_tail = opt.handle_zero_tail;
  ex.for_each_2d(B, T, [=] RLFLOW_HD(std::int64_t i, std::int64_t, std::int64_t k) {
    if (!detail::on(m[k])) {
      adv[k] = 0.0f;
      return;
    }
    math::top2 const q = tp[g[i]];
    double b = 0.0;
    if (q.n > 1) {
      std::int64_t const c = pp[k];
      b = np[g[i] * T + c] / (dp[g[i] * T + c] + eps);
      if (zero_tail && q.i1 == i && q.v1 > q.v2 && static_cast<double>(c) >= q.v2) b = 0.0;
    }
    adv[k] = static_cast<float>(static_cast<double>(ret[k]) - static_cast<double>(static_cast<float>(b)));
  });
}

}  // namespace detail

//! Optimal Token Baseline: A = (G - B) m with the per-token, per-group baseline
//! B_t = sum_i G_it W_it m_it / (sum_i W_it m_it + eps); W = cumsum(w m), w = 1 - 2 e^old_log_prob +
//! sum_pi_squared (times rollout_is_weights^2 when given); returns = G (reverse cumsum of r m).
//! Groups of one: B = 0. handle_zero_tail: if one row of a group is strictly the longest, its
//! baseline from column 'second-longest length' on is 0.
//! verl: compute_optimal_token_baseline_advantage ("optimal_token_baseline")
//! token_level_rewards, response_mask, old_log_probs, sum_pi_squared, rollout_is_weights (optional),
//! advantages, returns: (B, T); index: (B) dense group ids
template <class Policy, class Mask>
void optimal_token_baseline_advantage(Policy const& policy, Dims d, std::span<float const> token_level_rewards,
                                      std::span<Mask const> response_mask, std::span<std::int64_t const> index,
                                      std::span<float const> old_log_probs, std::span<float const> sum_pi_squared,
                                      std::span<float const> rollout_is_weights, std::span<float> advantages,
                                      std::span<float> returns, OTBOptions opt = {}) {
  detail::check_policy<Policy>();
  detail::check_mask<Mask>();
  detail::otb_impl(detail::make_exec(policy), "optimal_token_baseline_advantage", d, false, token_level_rewards, response_mask,
                   index, old_log_probs, sum_pi_squared, rollout_is_weights, advantages, returns, opt);
}

//! The multi-turn OTB: as optimal_token_baseline_advantage after squeezing each row to its valid
//! tokens (tool/observation tokens inside a response drop out), so column c is a row's c-th valid
//! token; rows without a valid token are in no group and get A = 0.
//! verl: compute_multi_turn_optimal_token_baseline_advantage ("tir_optimal_token_baseline")
template <class Policy, class Mask>
void tir_optimal_token_baseline_advantage(Policy const& policy, Dims d, std::span<float const> token_level_rewards,
                                          std::span<Mask const> response_mask, std::span<std::int64_t const> index,
                                          std::span<float const> old_log_probs, std::span<float const> sum_pi_squared,
                                          std::span<float const> rollout_is_weights, std::span<float> advantages,
                                          std::span<float> returns, OTBOptions opt = {}) {
  detail::check_policy<Policy>();
  detail::check_mask<Mask>();
  detail::otb_impl(detail::make_exec(policy), "tir_optimal_token_baseline_advantage", d, true, token_level_rewards, response_mask,
                   index, old_log_probs, sum_pi_squared, rollout_is_weights, advantages, returns, opt);
}

}  // namespace rlflow::kernels
