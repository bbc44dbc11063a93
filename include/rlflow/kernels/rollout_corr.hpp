// rlflow/kernels/rollout_corr.hpp: rollout correction (verl: trainer/ppo/rollout_corr_helper.py):
// importance-sampling weights pi_train / pi_rollout (token or sequence level, truncated: TIS, or
// zeroed outside [lower, upper]: IcePop, optionally batch-normalised to mean 1), rejection sampling
// by divergence (token_k1..3, seq_sum_k1..3, seq_mean_k1..3, seq_max_k2..3) and the off-policy
// diagnostics (KL, k3 KL, perplexities, chi^2), all metrics under verl's "rollout_corr/" names.
// Defines compute_rollout_correction_and_rejection_mask on any backend: written once over the
// detail::exec primitives (row reductions, masked sums with min/max, element-wise passes) with the
// per-token math in host-device lambdas, accumulating in double; cuda::par keeps the data on the
// device (the CUDA actor's bypass mode), cpu::par runs the same code as loops. Option parsing and
// the final metric arithmetic stay on the host. Does not compute any loss.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <rlflow/core/backend.hpp>                // cpu::par_t
#include <rlflow/core/error.hpp>                  // config_error, value_error
#include <rlflow/kernels/detail/checks.hpp>  // check_mask
#include <rlflow/kernels/detail/exec.hpp>    // expect_token_spans, check_finite_tokens
#include <rlflow/kernels/math.hpp>           // mask_den
#include <rlflow/kernels/options.hpp>        // Dims, RolloutCorrectionOptions

namespace rlflow::kernels {

//! IS weights (empty when rollout_is is off), the response mask with rejected tokens zeroed, and
//! the metrics ("rollout_corr/<name>", verl's names).
struct RolloutCorrectionResult {
  std::vector<float> rollout_is_weights;  //!< (B, T), 0 at masked positions; empty: IS disabled
  std::vector<float> response_mask;       //!< (B, T) 0/1: the input mask times the rejection mask
  std::vector<std::pair<std::string, double>> metrics;
};

namespace detail::rc {

inline constexpr double safety_bound = 20.0;  // verl: SAFETY_BOUND

inline double parse_number(const char* fn, std::string const& key, std::string const& s) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (...) {
    used = 0;
  }
  if (used == 0 || used != s.size())
    throw config_error(msg("rlflow::kernels::", fn, ": ", key, " '", s, "' is not a number; use e.g. 2.0 or 0.5_2.0"));
  return v;
}

inline std::string trim(std::string s) {
  auto const b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return {};
  auto const e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

//! verl: _parse_rollout_is_threshold -> (upper, lower or nullopt).
inline std::pair<double, std::optional<double>> parse_is_threshold(const char* fn, std::string const& spec0) {
  std::string const spec = trim(spec0);
  if (spec.empty()) throw config_error(msg("rlflow::kernels::", fn, ": rollout_is_threshold must not be empty; use e.g. 2.0"));
  double upper = 0;
  std::optional<double> lower;
  auto const us = spec.find('_');
  if (us != std::string::npos) {
    lower = parse_number(fn, "rollout_is_threshold", spec.substr(0, us));
    upper = parse_number(fn, "rollout_is_threshold", spec.substr(us + 1));
  } else {
    upper = parse_number(fn, "rollout_is_threshold", spec);
  }
  if (!(upper > 0)) throw config_error(msg("rlflow::kernels::", fn, ": rollout_is_threshold upper bound must be positive, got ", upper));
  if (lower) {
    if (!(*lower > 0)) throw config_error(msg("rlflow::kernels::", fn, ": rollout_is_threshold lower bound must be positive, got ", *lower));
    if (*lower > upper)
      throw config_error(msg("rlflow::kernels::", fn, ": rollout_is_threshold lower bound ", *lower, " exceeds the upper bound ", upper,
                             "; write lower_upper"));
  }
  return {upper, lower};
}

struct rs_option {
  std::string name;
  double upper = 0;
  std::optional<double> lower;  //!< k1 options only
};

inline bool supported_rs(std::string const& o) {
  for (const char* n : {"token_k1", "token_k2", "token_k3", "seq_sum_k1", "seq_sum_k2", "seq_sum_k3", "seq_mean_k1", "seq_mean_k2",
                        "seq_mean_k3", "seq_max_k2", "seq_max_k3"})
    if (o == n) return true;
  return false;
}

//! verl: the option list of compute_rollout_rejection_mask plus _parse_rollout_rs_thresholds.
inline std::vector<rs_option> parse_rs(const char* fn, std::string const& rs, std::optional<std::string> const& thr) {
  std::vector<std::string> names;
  std::size_t p = 0;
  while (p <= rs.size()) {
    auto const c = rs.find(',', p);
    std::string const o = trim(rs.substr(p, c == std::string::npos ? std::string::npos : c - p));
    if (!o.empty()) {
      if (!supported_rs(o))
        throw config_error(msg("rlflow::kernels::", fn, ": invalid rollout_rs option '", o,
                               "'; use token_k1|token_k2|token_k3|seq_sum_k1..k3|seq_mean_k1..k3|seq_max_k2|seq_max_k3"));
      if (std::find(names.begin(), names.end(), o) == names.end()) names.push_back(o);
    }
    if (c == std::string::npos) break;
    p = c + 1;
  }
  if (names.empty()) throw config_error(msg("rlflow::kernels::", fn, ": rollout_rs '", rs, "' names no option; e.g. token_k1"));
  if (!thr) throw config_error(msg("rlflow::kernels::", fn, ": rollout_rs=", rs, " needs rollout_rs_threshold (verl raises too); set it"));
  std::vector<std::string> specs;
  p = 0;
  while (p <= thr->size()) {
    auto const c = thr->find(',', p);
    std::string const o = trim(thr->substr(p, c == std::string::npos ? std::string::npos : c - p));
    if (!o.empty()) specs.push_back(o);
    if (c == std::string::npos) break;
    p = c + 1;
  }
  if (specs.empty()) throw config_error(msg("rlflow::kernels::", fn, ": rollout_rs_threshold must contain at least one threshold"));
  if (specs.size() != 1 && specs.size() != names.size())
    throw config_error(msg("rlflow::kernels::", fn, ": rollout_rs_threshold has ", specs.size(), " entries for ", names.size(),
                           " rollout_rs options; give one shared threshold or exactly one per option"));
  std::vector<rs_option> out;
  for (std::size_t k = 0; k < names.size(); ++k) {
    std::string const& spec = specs.size() == 1 ? specs[0] : specs[k];
    rs_option o;
    o.name = names[k];
    bool const k1 = o.name.back() == '1';
    auto const us = spec.find('_');
    if (k1) {
      o.upper = parse_number(fn, "rollout_rs_threshold", us == std::string::npos ? spec : spec.substr(us + 1));
      o.lower = us == std::string::npos ? 1.0 / o.upper : parse_number(fn, "rollout_rs_threshold", spec.substr(0, us));
      if (!(*o.lower > 0) || !(o.upper > 0))
        throw config_error(msg("rlflow::kernels::", fn, ": thresholds for rollout_rs option '", o.name, "' must be positive, got ", spec));
      if (*o.lower > o.upper)
        throw config_error(msg("rlflow::kernels::", fn, ": thresholds for rollout_rs option '", o.name, "' must be lower <= upper, got ", spec));
    } else {
      if (us != std::string::npos)
        throw config_error(msg("rlflow::kernels::", fn, ": rollout_rs_threshold for option '", o.name,
                               "' must be a single upper bound without '_', got '", spec, "'"));
      o.upper = parse_number(fn, "rollout_rs_threshold", spec);
      if (!(o.upper > 0))
        throw config_error(msg("rlflow::kernels::", fn, ": threshold for rollout_rs option '", o.name, "' must be positive, got ", spec));
    }
    out.push_back(o);
  }
  return out;
}

inline constexpr double inf = std::numeric_limits<double>::infinity();

//! N sums plus two (min, max) pairs in one reduction: '+' adds the sums and merges the ranges, so
//! exec::reduce / row_reduce (plain loops, Thrust, CUB) compute masked statistics in one pass.
template <int N>
struct acc {
  double s[N];
  double lo[2], hi[2];
  RLFLOW_HD static acc zero() {
    acc r;
    for (int q = 0; q < N; ++q) r.s[q] = 0.0;
    for (int q = 0; q < 2; ++q) r.lo[q] = inf, r.hi[q] = -inf;
    return r;
  }
  RLFLOW_HD acc operator+(acc const& o) const {
    acc r;
    for (int q = 0; q < N; ++q) r.s[q] = s[q] + o.s[q];
    for (int q = 0; q < 2; ++q) r.lo[q] = o.lo[q] < lo[q] ? o.lo[q] : lo[q], r.hi[q] = o.hi[q] > hi[q] ? o.hi[q] : hi[q];
    return r;
  }
  RLFLOW_HD void range(int q, double x) { lo[q] = x < lo[q] ? x : lo[q], hi[q] = x > hi[q] ? x : hi[q]; }
};

//! The per-token divergence statistic of rejection sampling on the clamped log-ratio l = log
//! pi_train - log pi_rollout: k1 = -l, k2 = l^2 / 2, k3 = e^l - 1 - l.
RLFLOW_HD inline double rs_stat(int kind, double l) { return kind == 1 ? -l : (kind == 2 ? 0.5 * l * l : exp(l) - 1.0 - l); }

//! IS weight of one token from its raw ratio r: zeroed outside [lower, upper] (IcePop, has_lower)
//! or truncated at upper (TIS, torch.clamp(max=upper)).
RLFLOW_HD inline double is_weight(double r, double upper, bool has_lower, double lower) {
  return has_lower ? ((r >= lower && r <= upper) ? r : 0.0) : (upper < r ? upper : r);
}

//! Sample mean and unbiased std of the values v(j) of the rows j < B with pick(j) (torch.std).
template <class Ex, class V, class P>
std::pair<double, double> mean_std(Ex const& ex, std::int64_t B, V v, P pick, double count) {
  if (count == 0) return {std::numeric_limits<double>::quiet_NaN(), 0.0};
  double const mu = ex.reduce(B, 0.0, [=] RLFLOW_HD(std::int64_t j) -> double { return pick(j) ? v(j) : 0.0; }) / count;
  if (count < 2) return {mu, 0.0};
  double const ss = ex.reduce(B, 0.0, [=] RLFLOW_HD(std::int64_t j) -> double {
    double const e = v(j) - mu;
    return pick(j) ? e * e : 0.0;
  });
  return {mu, sqrt(ss / (count - 1.0))};
}

//! Per-row accumulators of the first pass: valid tokens, sum(log_prob - rollout_log_prob),
//! sum(log_prob), sum(rollout_log_prob).
using row4 = math::dvec<4>;

//! The whole correction on any backend (exec primitives; every per-token or per-row formula is a
//! host-device lambda, so cpu::par runs the same code as cuda::par). Writes the IS weights (B*T, when
//! opt.rollout_is is set) and the corrected 0/1 mask; returns the metrics in verl's order.
template <class Ex, class Mask>
std::vector<std::pair<std::string, double>> correct(Ex const& ex, const char* fn, Dims d, float const* lp, float const* rp,
                                                    Mask const* m, RolloutCorrectionOptions const& opt, float* w_out,
                                                    float* mask_out) {
  std::int64_t const B = d.rows, T = d.cols, n = d.numel();
  // options first: a malformed one is an error before any work
  bool const is_on = opt.rollout_is.has_value();
  bool seq = false, has_lower = false;
  double upper = 0, lower = 0;
  if (is_on) {
    std::string const& level = *opt.rollout_is;
    if (level != "token" && level != "sequence")
      throw config_error(msg("rlflow::kernels::", fn, ": rollout_is='", level, "'; use token, sequence or null (off)"));
    auto const [u, l] = parse_is_threshold(fn, opt.rollout_is_threshold);
    seq = level == "sequence", upper = u, has_lower = l.has_value(), lower = l.value_or(0.0);
  }
  std::vector<rs_option> const rs = opt.rollout_rs ? parse_rs(fn, *opt.rollout_rs, opt.rollout_rs_threshold) : std::vector<rs_option>{};

  auto rows = ex.template alloc<row4>(B);
  row4* rw = rows.data();
  ex.row_reduce(
      B, T, row4::zero(),
      [=] RLFLOW_HD(std::int64_t i, std::int64_t t) -> row4 {
        std::int64_t const k = i * T + t;
        if (!detail::on(m[k])) return row4::zero();
        double const x = lp[k], y = rp[k];
        return row4{{1.0, x - y, x, y}};
      },
      [=] RLFLOW_HD(std::int64_t i, row4 s) { rw[i] = s; });
  double const count = ex.reduce(B, 0.0, [=] RLFLOW_HD(std::int64_t i) -> double { return rw[i].v[0]; });
  if (count == 0)
    throw value_error(msg("rlflow::kernels::", fn, ": the response mask of the (B = ", B, ", T = ", T,
                          ") batch has no valid token (verl raises too); skip the batch"));
  double const den = math::mask_den(count), Bd = static_cast<double>(B);
  double const valid_rows = ex.reduce(B, 0.0, [=] RLFLOW_HD(std::int64_t i) -> double { return rw[i].v[0] > 0 ? 1.0 : 0.0; });
  std::vector<std::pair<std::string, double>> out;
  auto put = [&](std::string const& k, double val) { out.emplace_back("rollout_corr/" + k, val); };

  // ---- IS weights (verl: compute_rollout_correction_weights + compute_is_metrics)
  if (is_on) {
    auto wbuf = ex.template alloc<double>(n);
    auto rawbuf = ex.template alloc<double>(n);
    double* w = wbuf.data();
    double* raw = rawbuf.data();
    ex.for_each(n, [=] RLFLOW_HD(std::int64_t k) {
      std::int64_t const i = k / T;
      bool const v = detail::on(m[k]);
      double const l = v ? static_cast<double>(lp[k]) - static_cast<double>(rp[k]) : 0.0;
      double const e = exp(math::clampd(seq ? rw[i].v[1] : l, -safety_bound, safety_bound));
      double const r = v ? e : 0.0;
      raw[k] = r;
      w[k] = is_weight(r, upper, has_lower, lower);
    });
    double const thr_lo = has_lower ? lower : 1.0 / upper;
    double const log_up = log(upper), log_lo = log(thr_lo);
    // token sums: W, raw > upper, raw < thr_lo, out of [lower, upper], clamp(W, 0, upper) and its
    // square; range 0: W
    auto const ts = ex.reduce(n, acc<6>::zero(), [=] RLFLOW_HD(std::int64_t k) -> acc<6> {
      acc<6> a = acc<6>::zero();
      if (!detail::on(m[k])) return a;
      double const W = w[k], r = raw[k], Wc = math::clampd(W, 0.0, upper);
      a.s[0] = W, a.s[1] = r > upper ? 1.0 : 0.0, a.s[2] = r < thr_lo ? 1.0 : 0.0;
      a.s[3] = (r < lower || r > upper) ? 1.0 : 0.0, a.s[4] = Wc, a.s[5] = Wc * Wc;
      a.range(0, W);
      return a;
    });
    double const w_mean = ts.s[0] / den;
    if (seq) {
      // over all rows (verl's sequence-level max/min use every row's log-ratio sum)
      auto const ss = ex.reduce(B, acc<2>::zero(), [=] RLFLOW_HD(std::int64_t i) -> acc<2> {
        acc<2> a = acc<2>::zero();
        double const s = rw[i].v[1];
        a.s[0] = s > log_up ? 1.0 : 0.0, a.s[1] = s < log_lo ? 1.0 : 0.0;
        a.range(0, s);
        return a;
      });
      put("rollout_is_max", exp(std::min(ss.hi[0], safety_bound)));
      put("rollout_is_min", exp(ss.lo[0]));
      put("rollout_is_mean", w_mean);
      put("rollout_is_ratio_fraction_high", ss.s[0] / Bd);
      put("rollout_is_ratio_fraction_low", ss.s[1] / Bd);
    } else {
      put("rollout_is_mean", w_mean);
      put("rollout_is_ratio_fraction_high", ts.s[1] / den);
      put("rollout_is_ratio_fraction_low", ts.s[2] / den);
      put("rollout_is_max", ts.hi[0]);
      put("rollout_is_min", ts.lo[0]);
    }
    double const mc = ts.s[4] / den;
    if (count > 1) {
      double const var = ts.s[5] / den - mc * mc;
      put("rollout_is_std", std::sqrt(std::max(var, 0.0)));
    } else {
      put("rollout_is_std", 0.0);
    }
    double const ess = ex.reduce(n, 0.0, [=] RLFLOW_HD(std::int64_t k) -> double {
      if (!detail::on(m[k])) return 0.0;
      double const q = math::clampd(w[k], 0.0, upper) / (mc + 1e-8);
      return q * q;
    });
    put("rollout_is_eff_sample_size", 1.0 / (ess / den));
    // per row: mean weight (sm) and mean raw ratio (rsm)
    auto rowsm = ex.template alloc<math::dvec<2>>(B);
    math::dvec<2>* sm = rowsm.data();
    ex.row_reduce(
        B, T, math::dvec<2>::zero(),
        [=] RLFLOW_HD(std::int64_t i, std::int64_t t) -> math::dvec<2> {
          std::int64_t const k = i * T + t;
          return detail::on(m[k]) ? math::dvec<2>{{w[k], raw[k]}} : math::dvec<2>::zero();
        },
        [=] RLFLOW_HD(std::int64_t i, math::dvec<2> s) {
          double const l = math::mask_den(rw[i].v[0]);
          sm[i] = math::dvec<2>{{s.v[0] / l, s.v[1] / l}};
        });
    // over rows: rsm > upper, rsm < thr_lo, sm of rows with a valid token; range 0: sm, range 1: |sm - 1|
    auto const rs2 = ex.reduce(B, acc<3>::zero(), [=] RLFLOW_HD(std::int64_t i) -> acc<3> {
      acc<3> a = acc<3>::zero();
      a.s[0] = sm[i].v[1] > upper ? 1.0 : 0.0, a.s[1] = sm[i].v[1] < thr_lo ? 1.0 : 0.0;
      a.s[2] = rw[i].v[0] > 0 ? sm[i].v[0] : 0.0;
      a.range(0, sm[i].v[0]);
      a.range(1, fabs(sm[i].v[0] - 1.0));
      return a;
    });
    auto const [sm_mean, sm_std] = mean_std(
        ex, B, [=] RLFLOW_HD(std::int64_t i) { return sm[i].v[0]; }, [=] RLFLOW_HD(std::int64_t) { return true; }, Bd);
    put("rollout_is_seq_mean", sm_mean);
    put("rollout_is_seq_std", sm_std);
    put("rollout_is_seq_max", B > 0 ? rs2.hi[0] : -inf);
    put("rollout_is_seq_min", B > 0 ? rs2.lo[0] : inf);
    put("rollout_is_seq_max_deviation", B > 0 ? rs2.hi[1] : -inf);
    put("rollout_is_seq_fraction_high", rs2.s[0] / Bd);
    put("rollout_is_seq_fraction_low", rs2.s[1] / Bd);
    if (has_lower) put("rollout_is_oob_ratio", ts.s[3] / den);
    if (opt.rollout_is_batch_normalize) {
      double const wm = seq ? rs2.s[2] / std::max(valid_rows, 1e-8) : w_mean;
      if (wm > 1e-8) {
        ex.for_each(n, [=] RLFLOW_HD(std::int64_t k) { w[k] /= wm; });
        put("rollout_is_batch_norm_factor", wm);
      } else {
        put("rollout_is_batch_norm_factor", 1.0);
      }
    }
    ex.for_each(n, [=] RLFLOW_HD(std::int64_t k) { w_out[k] = static_cast<float>(w[k]); });
  }

  // ---- rejection sampling (verl: compute_rollout_rejection_mask + compute_rs_metrics)
  auto combbuf = ex.template alloc<std::uint8_t>(n);
  std::uint8_t* comb = combbuf.data();
  ex.for_each(n, [=] RLFLOW_HD(std::int64_t k) { comb[k] = 1; });
  if (!rs.empty()) {
    auto keepbuf = ex.template alloc<std::uint8_t>(n);
    auto rvbuf = ex.template alloc<math::dvec<2>>(B);  // per row: the row's value, rejected valid tokens
    std::uint8_t* keep = keepbuf.data();
    math::dvec<2>* rv = rvbuf.data();
    for (auto const& o : rs) {
      bool const k1 = o.name.back() == '1';
      int const kind = o.name.back() - '0';
      double const up = k1 ? std::log(o.upper) : o.upper;
      double const lo = k1 ? std::log(*o.lower) : 0.0;
      bool const token_level = o.name.rfind("token_", 0) == 0;
      int const agg = token_level ? 0 : (o.name.rfind("seq_sum", 0) == 0 ? 1 : (o.name.rfind("seq_mean", 0) == 0 ? 2 : 3));
      // K(k) = the statistic at a valid token (0 elsewhere); the row's value: its sum (seq_sum), its
      // mean (seq_mean, and token-level options for the sequence metrics), or its max (seq_max, 0
      // for a row without valid tokens)
      ex.row_reduce(
          B, T, acc<1>::zero(),
          [=] RLFLOW_HD(std::int64_t i, std::int64_t t) -> acc<1> {
            std::int64_t const k = i * T + t;
            acc<1> a = acc<1>::zero();
            if (!detail::on(m[k])) return a;
            double const s = rs_stat(kind, math::clampd(static_cast<double>(lp[k]) - static_cast<double>(rp[k]), -safety_bound, safety_bound));
            a.s[0] = s;
            a.range(0, s);
            return a;
          },
          [=] RLFLOW_HD(std::int64_t i, acc<1> s) {
            double const len = rw[i].v[0];
            double const v = agg == 1 ? s.s[0] : (agg == 3 ? (s.hi[0] == -inf ? 0.0 : s.hi[0]) : s.s[0] / math::mask_den(len));
            rv[i] = math::dvec<2>{{v, 0.0}};
          });
      // keep: token level on the token's statistic (a masked position's too: it is masked anyway),
      // sequence level on the row's value
      ex.for_each(n, [=] RLFLOW_HD(std::int64_t k) {
        double const s = token_level ? rs_stat(kind, math::clampd(static_cast<double>(lp[k]) - static_cast<double>(rp[k]),
                                                                  -safety_bound, safety_bound))
                                     : rv[k / T].v[0];
        bool const kp = k1 ? (s >= lo && s <= up) : s <= up;
        keep[k] = kp ? 1 : 0;
        if (!kp) comb[k] = 0;
      });
      ex.row_reduce(
          B, T, 0.0,
          [=] RLFLOW_HD(std::int64_t i, std::int64_t t) -> double {
            std::int64_t const k = i * T + t;
            return detail::on(m[k]) && !keep[k] ? 1.0 : 0.0;
          },
          [=] RLFLOW_HD(std::int64_t i, double r) { rv[i].v[1] = r; });
      // token sums of S (the token's statistic or its row's value): S, S > up, S < lo, clamp(S),
      // clamp(S)^2, rejected; range 0: S
      auto const ts = ex.reduce(n, acc<6>::zero(), [=] RLFLOW_HD(std::int64_t k) -> acc<6> {
        acc<6> a = acc<6>::zero();
        if (!detail::on(m[k])) return a;
        double const S = token_level ? rs_stat(kind, math::clampd(static_cast<double>(lp[k]) - static_cast<double>(rp[k]),
                                                                  -safety_bound, safety_bound))
                                     : rv[k / T].v[0];
        double const C = math::clampd(S, k1 ? lo : 0.0, up);  // torch.clamp(min, max)
        a.s[0] = S, a.s[1] = S > up ? 1.0 : 0.0, a.s[2] = S < lo ? 1.0 : 0.0, a.s[3] = C, a.s[4] = C * C;
        a.s[5] = keep[k] ? 0.0 : 1.0;
        a.range(0, S);
        return a;
      });
      // over rows with a valid token (the sequence values sv): sv > up, sv < lo, rejected rows;
      // range 0: sv, range 1: |sv|
      auto const sr = ex.reduce(B, acc<3>::zero(), [=] RLFLOW_HD(std::int64_t i) -> acc<3> {
        acc<3> a = acc<3>::zero();
        if (!(rw[i].v[0] > 0)) return a;
        double const s = rv[i].v[0];
        a.s[0] = s > up ? 1.0 : 0.0, a.s[1] = s < lo ? 1.0 : 0.0, a.s[2] = rv[i].v[1] > 0 ? 1.0 : 0.0;
        a.range(0, s);
        a.range(1, fabs(s));
        return a;
      });
      double const nv = valid_rows;
      std::string const pre = "rollout_rs_" + o.name;
      put(pre + "_mean", ts.s[0] / den);
      if (!token_level && nv > 0) {
        put(pre + "_max", sr.hi[0]);
        put(pre + "_min", sr.lo[0]);
        put(pre + "_fraction_high", sr.s[0] / nv);
        put(pre + "_fraction_low", k1 ? sr.s[1] / nv : 0.0);
      } else {
        put(pre + "_max", ts.hi[0]);
        put(pre + "_min", ts.lo[0]);
        put(pre + "_fraction_high", ts.s[1] / den);
        put(pre + "_fraction_low", k1 ? ts.s[2] / den : 0.0);
      }
      if (count > 1) {
        double const mc = ts.s[3] / den;
        double const var = ts.s[4] / den - mc * mc;
        put(pre + "_std", std::sqrt(std::max(var, 0.0)));
      } else {
        put(pre + "_std", 0.0);
      }
      if (nv > 0) {
        auto const [mu, sd] = mean_std(
            ex, B, [=] RLFLOW_HD(std::int64_t i) { return rv[i].v[0]; }, [=] RLFLOW_HD(std::int64_t i) { return rw[i].v[0] > 0; }, nv);
        put(pre + "_seq_mean", mu);
        put(pre + "_seq_std", sd);
        put(pre + "_seq_max", sr.hi[0]);
        put(pre + "_seq_min", sr.lo[0]);
        put(pre + "_seq_max_deviation", std::max(0.0, sr.hi[1]));
        put(pre + "_seq_fraction_high", sr.s[0] / nv);
        if (k1) put(pre + "_seq_fraction_low", sr.s[1] / nv);
      } else {
        for (const char* s : {"_seq_mean", "_seq_std", "_seq_max", "_seq_min", "_seq_max_deviation", "_seq_fraction_high",
                              "_seq_fraction_low"})
          put(pre + s, 0.0);
      }
      put(pre + "_masked_fraction", ts.s[5] / den);
      put(pre + "_seq_masked_fraction", nv > 0 ? sr.s[2] / nv : 0.0);
    }
    // all options together: rejected valid tokens, rows with one
    ex.row_reduce(
        B, T, 0.0,
        [=] RLFLOW_HD(std::int64_t i, std::int64_t t) -> double {
          std::int64_t const k = i * T + t;
          return detail::on(m[k]) && !comb[k] ? 1.0 : 0.0;
        },
        [=] RLFLOW_HD(std::int64_t i, double r) { rv[i].v[1] = r; });
    auto const all = ex.reduce(B, math::dvec<2>::zero(), [=] RLFLOW_HD(std::int64_t i) -> math::dvec<2> {
      return math::dvec<2>{{rv[i].v[1], rv[i].v[1] > 0 ? 1.0 : 0.0}};
    });
    put("rollout_rs_masked_fraction", all.v[0] / den);
    put("rollout_rs_seq_masked_fraction", all.v[1] / Bd);
  }
  ex.for_each(n, [=] RLFLOW_HD(std::int64_t k) { mask_out[k] = detail::on(m[k]) && comb[k] ? 1.0f : 0.0f; });

  // ---- off-policy diagnostics (verl: compute_offpolicy_metrics)
  // per row a = mean log_prob, b = mean rollout_log_prob, df = b - a: e^-a, -a, e^-b, -b, df, |df|,
  // e^df, e^(2 clamp(sum log-ratio)); range 0: df
  auto const ro = ex.reduce(B, acc<8>::zero(), [=] RLFLOW_HD(std::int64_t i) -> acc<8> {
    acc<8> r = acc<8>::zero();
    double const l = math::mask_den(rw[i].v[0]);
    double const a = rw[i].v[2] / l, b = rw[i].v[3] / l, df = b - a;
    r.s[0] = exp(-a), r.s[1] = -a, r.s[2] = exp(-b), r.s[3] = -b, r.s[4] = df, r.s[5] = fabs(df), r.s[6] = exp(df);
    r.s[7] = exp(2.0 * math::clampd(rw[i].v[1], -safety_bound, safety_bound));
    r.range(0, df);
    return r;
  });
  // tokens: rollout_log_prob - log_prob, k3 e^l - l - 1, clamped ratio squared
  auto const to = ex.reduce(n, math::dvec<3>::zero(), [=] RLFLOW_HD(std::int64_t k) -> math::dvec<3> {
    if (!detail::on(m[k])) return math::dvec<3>::zero();
    double const x = lp[k], y = rp[k], l = x - y, r = exp(math::clampd(l, -safety_bound, safety_bound));
    return math::dvec<3>{{y - x, exp(l) - l - 1.0, r * r}};
  });
  put("training_ppl", ro.s[0] / Bd);
  put("training_log_ppl", ro.s[1] / Bd);
  put("kl", to.v[0] / den);
  put("k3_kl", to.v[1] / den);
  put("rollout_ppl", ro.s[2] / Bd);
  put("rollout_log_ppl", ro.s[3] / Bd);
  put("log_ppl_diff", ro.s[4] / Bd);
  put("log_ppl_abs_diff", ro.s[5] / Bd);
  put("log_ppl_diff_max", ro.hi[0]);
  put("log_ppl_diff_min", ro.lo[0]);
  put("ppl_ratio", ro.s[6] / Bd);
  put("chi2_token", to.v[2] / den - 1.0);
  put("chi2_seq", ro.s[7] / Bd - 1.0);
  return out;
}

template <class Ex, class Mask>
void check_inputs(Ex const& ex, const char* fn, Dims d, std::span<float const> log_prob, std::span<float const> rollout_log_prob,
                  std::span<Mask const> response_mask) {
  detail::expect_dims(fn, d);
  detail::expect_token_spans(fn, d,
                             {{"log_prob", log_prob.size()}, {"rollout_log_prob", rollout_log_prob.size()},
                              {"response_mask", response_mask.size()}});
  detail::check_finite_tokens(ex, fn, "log_prob", d, log_prob.data(), response_mask.data());
  detail::check_finite_tokens(ex, fn, "rollout_log_prob", d, rollout_log_prob.data(), response_mask.data());
}

}  // namespace detail::rc

//! IS weights, rejection mask and off-policy metrics of the training policy ('log_prob', verl's
//! old_log_prob argument) against the rollout policy ('rollout_log_prob'), as verl's
//! compute_rollout_correction_and_rejection_mask with the options of 'opt' (rollout_is,
//! rollout_is_threshold, rollout_is_batch_normalize, rollout_rs, rollout_rs_threshold), on any
//! backend: the outputs go to the caller's buffers (device memory for cuda::par), the metrics
//! ("rollout_corr/<name>", verl's names) come back. rollout_is_weights_out must hold B*T floats when
//! opt.rollout_is is set (it is not touched otherwise); response_mask_out (B*T) receives the input
//! mask times the rejection mask as 0/1.
//! Raises value_error for a mask without a valid token and for NaN/inf log-probs at valid tokens,
//! config_error for malformed options (verl: ValueError), before any output is written.
//! log_prob, rollout_log_prob, response_mask: (B, T)
template <class Policy, class Mask>
std::vector<std::pair<std::string, double>> compute_rollout_correction_and_rejection_mask(
    Policy const& policy, Dims d, std::span<float const> log_prob, std::span<float const> rollout_log_prob,
    std::span<Mask const> response_mask, RolloutCorrectionOptions const& opt, std::span<float> rollout_is_weights_out,
    std::span<float> response_mask_out) {
  detail::check_policy<Policy>();
  detail::check_mask<Mask>();
  const char* fn = "compute_rollout_correction_and_rejection_mask";
  auto ex = detail::make_exec(policy);
  detail::rc::check_inputs(ex, fn, d, log_prob, rollout_log_prob, response_mask);
  detail::expect_size(fn, "response_mask_out", response_mask_out.size(), d.numel(), "B*T");
  if (opt.rollout_is) detail::expect_size(fn, "rollout_is_weights_out", rollout_is_weights_out.size(), d.numel(), "B*T");
  return detail::rc::correct(ex, fn, d, log_prob.data(), rollout_log_prob.data(), response_mask.data(), opt,
                             rollout_is_weights_out.data(), response_mask_out.data());
}

//! The same on the host, returning the weights (empty when rollout_is is off) and the mask as vectors.
template <class Mask>
RolloutCorrectionResult compute_rollout_correction_and_rejection_mask(cpu::par_t, Dims d, std::span<float const> log_prob,
                                                                      std::span<float const> rollout_log_prob,
                                                                      std::span<Mask const> response_mask,
                                                                      RolloutCorrectionOptions const& opt) {
  detail::check_mask<Mask>();
  const char* fn = "compute_rollout_correction_and_rejection_mask";
  auto ex = detail::make_exec(cpu::par);
  detail::rc::check_inputs(ex, fn, d, log_prob, rollout_log_prob, response_mask);
  RolloutCorrectionResult res;
  std::size_t const n = static_cast<std::size_t>(d.numel());
  if (opt.rollout_is) res.rollout_is_weights.resize(n);
  res.response_mask.resize(n);
  res.metrics = detail::rc::correct(ex, fn, d, log_prob.data(), rollout_log_prob.data(), response_mask.data(), opt,
                                    res.rollout_is_weights.data(), res.response_mask.data());
  return res;
}

}  // namespace rlflow::kernels
