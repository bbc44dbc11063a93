// rlflow/kernels/rollout_corr.hpp: rollout correction (verl: trainer/ppo/rollout_corr_helper.py):
// importance-sampling weights pi_train / pi_rollout (token or sequence level, truncated: TIS, or
// zeroed outside [lower, upper]: IcePop, optionally batch-normalised to mean 1), rejection sampling
// by divergence (token_k1..3, seq_sum_k1..3, seq_mean_k1..3, seq_max_k2..3) and the off-policy
// diagnostics (KL, k3 KL, perplexities, chi^2), all metrics under verl's "rollout_corr/" names.
// Defines compute_rollout_correction_and_rejection_mask. Runs on cpu::par only (plain host loops in
// double; the driver and the CPU actor call it with host data). Does not compute any loss.
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

#include <rlflow/backend.hpp>                // cpu::par_t
#include <rlflow/error.hpp>                  // config_error, value_error
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

//! Plain-loop masked statistics over (B, T) host data with verl's float32 denominators.
struct view {
  std::int64_t B, T;
  std::vector<char> m;  // valid tokens
  std::vector<double> len;
  double count = 0;
  bool on(std::int64_t k) const { return m[static_cast<std::size_t>(k)] != 0; }
  template <class F>
  double mmean(F f) const {
    double s = 0;
    for (std::int64_t k = 0; k < B * T; ++k)
      if (on(k)) s += f(k);
    return s / math::mask_den(count);
  }
  template <class F>
  double row_sum(std::int64_t i, F f) const {
    double s = 0;
    for (std::int64_t t = 0; t < T; ++t)
      if (on(i * T + t)) s += f(i * T + t);
    return s;
  }
  template <class F>
  double row_mean(std::int64_t i, F f) const {
    return row_sum(i, f) / math::mask_den(len[static_cast<std::size_t>(i)]);
  }
};

inline double vmean(std::vector<double> const& v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}
inline double vstd(std::vector<double> const& v) {  // torch.std: unbiased
  if (v.size() < 2) return 0.0;
  double const mu = vmean(v);
  double ss = 0;
  for (double x : v) ss += (x - mu) * (x - mu);
  return std::sqrt(ss / static_cast<double>(v.size() - 1));
}
inline double vmax(std::vector<double> const& v) { return v.empty() ? -INFINITY : *std::max_element(v.begin(), v.end()); }
inline double vmin(std::vector<double> const& v) { return v.empty() ? INFINITY : *std::min_element(v.begin(), v.end()); }

}  // namespace detail::rc

//! IS weights, rejection mask and off-policy metrics of the training policy ('log_prob', verl's
//! old_log_prob argument) against the rollout policy ('rollout_log_prob'), as verl's
//! compute_rollout_correction_and_rejection_mask with the options of 'opt' (rollout_is,
//! rollout_is_threshold, rollout_is_batch_normalize, rollout_rs, rollout_rs_threshold).
//! Raises value_error for a mask without a valid token and for NaN/inf log-probs at valid tokens,
//! config_error for malformed options (verl: ValueError).
//! log_prob, rollout_log_prob, response_mask: (B, T)
template <class Mask>
RolloutCorrectionResult compute_rollout_correction_and_rejection_mask(cpu::par_t, Dims d, std::span<float const> log_prob,
                                                                      std::span<float const> rollout_log_prob,
                                                                      std::span<Mask const> response_mask,
                                                                      RolloutCorrectionOptions const& opt) {
  detail::check_mask<Mask>();
  const char* fn = "compute_rollout_correction_and_rejection_mask";
  detail::expect_dims(fn, d);
  detail::expect_token_spans(fn, d,
                             {{"log_prob", log_prob.size()}, {"rollout_log_prob", rollout_log_prob.size()},
                              {"response_mask", response_mask.size()}});
  auto ex = detail::make_exec(cpu::par);
  detail::check_finite_tokens(ex, fn, "log_prob", d, log_prob.data(), response_mask.data());
  detail::check_finite_tokens(ex, fn, "rollout_log_prob", d, rollout_log_prob.data(), response_mask.data());
  std::int64_t const B = d.rows, T = d.cols, n = d.numel();
  using detail::rc::safety_bound;
  detail::rc::view v{B, T, std::vector<char>(static_cast<std::size_t>(n)), std::vector<double>(static_cast<std::size_t>(B), 0.0)};
  for (std::int64_t k = 0; k < n; ++k) {
    bool const on = detail::on(response_mask[static_cast<std::size_t>(k)]);
    v.m[static_cast<std::size_t>(k)] = on;
    if (on) v.len[static_cast<std::size_t>(k / T)] += 1, v.count += 1;
  }
  if (v.count == 0)
    throw value_error(msg("rlflow::kernels::", fn, ": the response mask of the (B = ", B, ", T = ", T,
                          ") batch has no valid token (verl raises too); skip the batch"));
  auto lr = [&](std::int64_t k) {
    return static_cast<double>(log_prob[static_cast<std::size_t>(k)]) - static_cast<double>(rollout_log_prob[static_cast<std::size_t>(k)]);
  };
  auto clampb = [](double x) { return math::clampd(x, -safety_bound, safety_bound); };
  RolloutCorrectionResult res;
  auto put = [&](std::string const& k, double val) { res.metrics.emplace_back("rollout_corr/" + k, val); };

  // ---- IS weights (verl: compute_rollout_correction_weights + compute_is_metrics)
  if (opt.rollout_is) {
    std::string const& level = *opt.rollout_is;
    if (level != "token" && level != "sequence")
      throw config_error(msg("rlflow::kernels::", fn, ": rollout_is='", level, "'; use token, sequence or null (off)"));
    auto const [upper, lower] = detail::rc::parse_is_threshold(fn, opt.rollout_is_threshold);
    bool const seq = level == "sequence";
    std::vector<double> lsum(static_cast<std::size_t>(B), 0.0), raw(static_cast<std::size_t>(n), 0.0);
    std::vector<double> w(static_cast<std::size_t>(n), 0.0);
    for (std::int64_t i = 0; i < B; ++i) {
      lsum[static_cast<std::size_t>(i)] = v.row_sum(i, lr);
      for (std::int64_t t = 0; t < T; ++t) {
        std::int64_t const k = i * T + t;
        double const e = std::exp(clampb(seq ? lsum[static_cast<std::size_t>(i)] : (v.on(k) ? lr(k) : 0.0)));
        double const r = v.on(k) ? e : 0.0;
        raw[static_cast<std::size_t>(k)] = r;
        w[static_cast<std::size_t>(k)] = lower ? ((r >= *lower && r <= upper) ? r : 0.0) : std::min(r, upper);
      }
    }
    double const thr_lo = lower ? *lower : 1.0 / upper;
    double const log_up = std::log(upper), log_lo = std::log(thr_lo);
    auto W = [&](std::int64_t k) { return w[static_cast<std::size_t>(k)]; };
    if (seq) {
      put("rollout_is_max", std::exp(std::min(detail::rc::vmax(lsum), safety_bound)));
      put("rollout_is_min", std::exp(detail::rc::vmin(lsum)));
      put("rollout_is_mean", v.mmean(W));
      double hi = 0, lo = 0;
      for (double s : lsum) hi += s > log_up, lo += s < log_lo;
      put("rollout_is_ratio_fraction_high", hi / static_cast<double>(B));
      put("rollout_is_ratio_fraction_low", lo / static_cast<double>(B));
    } else {
      put("rollout_is_mean", v.mmean(W));
      put("rollout_is_ratio_fraction_high", v.mmean([&](std::int64_t k) { return raw[static_cast<std::size_t>(k)] > upper ? 1.0 : 0.0; }));
      put("rollout_is_ratio_fraction_low", v.mmean([&](std::int64_t k) { return raw[static_cast<std::size_t>(k)] < thr_lo ? 1.0 : 0.0; }));
      double mx = -INFINITY, mn = INFINITY;
      for (std::int64_t k = 0; k < n; ++k)
        if (v.on(k)) mx = std::max(mx, W(k)), mn = std::min(mn, W(k));
      put("rollout_is_max", mx);
      put("rollout_is_min", mn);
    }
    auto Wc = [&](std::int64_t k) { return math::clampd(W(k), 0.0, upper); };
    double const mc = v.mmean(Wc);
    if (v.count > 1) {
      double const var = v.mmean([&](std::int64_t k) { return Wc(k) * Wc(k); }) - mc * mc;
      put("rollout_is_std", std::sqrt(std::max(var, 0.0)));
    } else {
      put("rollout_is_std", 0.0);
    }
    put("rollout_is_eff_sample_size", 1.0 / v.mmean([&](std::int64_t k) {
      double const q = Wc(k) / (mc + 1e-8);
      return q * q;
    }));
    std::vector<double> sm(static_cast<std::size_t>(B)), rsm(static_cast<std::size_t>(B)), dev(static_cast<std::size_t>(B));
    for (std::int64_t i = 0; i < B; ++i) {
      sm[static_cast<std::size_t>(i)] = v.row_mean(i, W);
      rsm[static_cast<std::size_t>(i)] = v.row_mean(i, [&](std::int64_t k) { return raw[static_cast<std::size_t>(k)]; });
      dev[static_cast<std::size_t>(i)] = std::fabs(sm[static_cast<std::size_t>(i)] - 1.0);
    }
    put("rollout_is_seq_mean", detail::rc::vmean(sm));
    put("rollout_is_seq_std", detail::rc::vstd(sm));
    put("rollout_is_seq_max", detail::rc::vmax(sm));
    put("rollout_is_seq_min", detail::rc::vmin(sm));
    put("rollout_is_seq_max_deviation", detail::rc::vmax(dev));
    double fh = 0, fl = 0;
    for (double s : rsm) fh += s > upper, fl += s < thr_lo;
    put("rollout_is_seq_fraction_high", fh / static_cast<double>(B));
    put("rollout_is_seq_fraction_low", fl / static_cast<double>(B));
    if (lower)
      put("rollout_is_oob_ratio", v.mmean([&](std::int64_t k) {
        double const r = raw[static_cast<std::size_t>(k)];
        return (r < *lower || r > upper) ? 1.0 : 0.0;
      }));
    if (opt.rollout_is_batch_normalize) {
      double wm = 0;
      if (!seq) {
        wm = v.mmean(W);
      } else {
        double num = 0, cnt = 0;
        for (std::int64_t i = 0; i < B; ++i)
          if (v.len[static_cast<std::size_t>(i)] > 0) num += sm[static_cast<std::size_t>(i)], cnt += 1;
        wm = num / std::max(cnt, 1e-8);
      }
      if (wm > 1e-8) {
        for (auto& x : w) x /= wm;
        put("rollout_is_batch_norm_factor", wm);
      } else {
        put("rollout_is_batch_norm_factor", 1.0);
      }
    }
    res.rollout_is_weights.assign(w.begin(), w.end());
  }

  // ---- rejection sampling (verl: compute_rollout_rejection_mask + compute_rs_metrics)
  std::vector<double> combined(static_cast<std::size_t>(n), 1.0);
  if (opt.rollout_rs && B > 0) {
    auto const options = detail::rc::parse_rs(fn, *opt.rollout_rs, opt.rollout_rs_threshold);
    std::vector<double> kv(static_cast<std::size_t>(n));
    for (auto const& o : options) {
      bool const k1 = o.name.back() == '1';
      int const kind = o.name.back() - '0';
      auto stat_of = [&](std::int64_t k) {
        double const l = clampb(lr(k));
        return kind == 1 ? -l : (kind == 2 ? 0.5 * l * l : std::exp(l) - 1.0 - l);
      };
      for (std::int64_t k = 0; k < n; ++k) kv[static_cast<std::size_t>(k)] = v.on(k) ? stat_of(k) : 0.0;
      auto K = [&](std::int64_t k) { return kv[static_cast<std::size_t>(k)]; };
      double const up = k1 ? std::log(o.upper) : o.upper;
      double const lo = k1 ? std::log(*o.lower) : 0.0;
      auto keep_val = [&](double s) { return k1 ? (s >= lo && s <= up) : s <= up; };
      bool const token_level = o.name.rfind("token_", 0) == 0;
      std::vector<double> seqv(static_cast<std::size_t>(B), 0.0);
      std::vector<char> keep(static_cast<std::size_t>(n), 0);
      for (std::int64_t i = 0; i < B; ++i) {
        if (!token_level) {
          double s = 0;
          if (o.name.rfind("seq_sum", 0) == 0) s = v.row_sum(i, K);
          else if (o.name.rfind("seq_mean", 0) == 0) s = v.row_mean(i, K);
          else {  // seq_max: 0 for a row without valid tokens
            double mx = -INFINITY;
            for (std::int64_t t = 0; t < T; ++t)
              if (v.on(i * T + t)) mx = std::max(mx, K(i * T + t));
            s = mx == -INFINITY ? 0.0 : mx;
          }
          seqv[static_cast<std::size_t>(i)] = s;
        }
        for (std::int64_t t = 0; t < T; ++t) {
          std::int64_t const k = i * T + t;
          // token level: the statistic of a masked position is that of its log-ratio (kept or not, it
          // is multiplied by the mask afterwards)
          double const s = token_level ? stat_of(k) : seqv[static_cast<std::size_t>(i)];
          keep[static_cast<std::size_t>(k)] = keep_val(s);
        }
      }
      // metrics (compute_rs_metrics): the per-token statistic is the token's, or its row's
      auto S = [&](std::int64_t k) { return token_level ? K(k) : seqv[static_cast<std::size_t>(k / T)]; };
      std::string const pre = "rollout_rs_" + o.name;
      std::vector<double> sv;  // sequence values of rows with a valid token
      for (std::int64_t i = 0; i < B; ++i)
        if (v.len[static_cast<std::size_t>(i)] > 0) sv.push_back(token_level ? v.row_mean(i, K) : seqv[static_cast<std::size_t>(i)]);
      put(pre + "_mean", v.mmean(S));
      bool const seq_level = !token_level && !sv.empty();
      if (seq_level) {
        put(pre + "_max", detail::rc::vmax(sv));
        put(pre + "_min", detail::rc::vmin(sv));
        double fh = 0, fl = 0;
        for (double s : sv) fh += s > up, fl += s < lo;
        put(pre + "_fraction_high", fh / static_cast<double>(sv.size()));
        put(pre + "_fraction_low", k1 ? fl / static_cast<double>(sv.size()) : 0.0);
      } else {
        double mx = -INFINITY, mn = INFINITY;
        for (std::int64_t k = 0; k < n; ++k)
          if (v.on(k)) mx = std::max(mx, S(k)), mn = std::min(mn, S(k));
        put(pre + "_max", mx);
        put(pre + "_min", mn);
        put(pre + "_fraction_high", v.mmean([&](std::int64_t k) { return S(k) > up ? 1.0 : 0.0; }));
        put(pre + "_fraction_low", k1 ? v.mmean([&](std::int64_t k) { return S(k) < lo ? 1.0 : 0.0; }) : 0.0);
      }
      if (v.count > 1) {
        double const cmin = k1 ? lo : 0.0;
        auto C = [&](std::int64_t k) { return std::min(std::max(S(k), cmin), up); };  // torch.clamp(min, max)
        double const mc = v.mmean(C);
        double const var = v.mmean([&](std::int64_t k) { return C(k) * C(k); }) - mc * mc;
        put(pre + "_std", std::sqrt(std::max(var, 0.0)));
      } else {
        put(pre + "_std", 0.0);
      }
      if (!sv.empty()) {
        double dev = 0, fh = 0, fl = 0;
        for (double s : sv) dev = std::max(dev, std::fabs(s)), fh += s > up, fl += s < lo;
        put(pre + "_seq_mean", detail::rc::vmean(sv));
        put(pre + "_seq_std", detail::rc::vstd(sv));
        put(pre + "_seq_max", detail::rc::vmax(sv));
        put(pre + "_seq_min", detail::rc::vmin(sv));
        put(pre + "_seq_max_deviation", dev);
        put(pre + "_seq_fraction_high", fh / static_cast<double>(sv.size()));
        if (k1) put(pre + "_seq_fraction_low", fl / static_cast<double>(sv.size()));
      } else {
        for (const char* s : {"_seq_mean", "_seq_std", "_seq_max", "_seq_min", "_seq_max_deviation", "_seq_fraction_high",
                              "_seq_fraction_low"})
          put(pre + s, 0.0);
      }
      double seq_rej = 0, seq_valid = 0;
      for (std::int64_t i = 0; i < B; ++i) {
        bool all_kept = true;
        for (std::int64_t t = 0; t < T; ++t)
          if (v.on(i * T + t) && !keep[static_cast<std::size_t>(i * T + t)]) all_kept = false;
        if (v.len[static_cast<std::size_t>(i)] > 0) seq_valid += 1, seq_rej += all_kept ? 0.0 : 1.0;
      }
      for (std::int64_t k = 0; k < n; ++k) combined[static_cast<std::size_t>(k)] *= keep[static_cast<std::size_t>(k)] ? 1.0 : 0.0;
      put(pre + "_masked_fraction", v.mmean([&](std::int64_t k) { return keep[static_cast<std::size_t>(k)] ? 0.0 : 1.0; }));
      put(pre + "_seq_masked_fraction", seq_valid > 0 ? seq_rej / seq_valid : 0.0);
    }
    put("rollout_rs_masked_fraction", v.mmean([&](std::int64_t k) { return 1.0 - combined[static_cast<std::size_t>(k)]; }));
    double has = 0;
    for (std::int64_t i = 0; i < B; ++i) {
      bool any = false;
      for (std::int64_t t = 0; t < T; ++t)
        if (v.on(i * T + t) && !(combined[static_cast<std::size_t>(i * T + t)] > 0.5)) any = true;
      has += any;
    }
    put("rollout_rs_seq_masked_fraction", has / static_cast<double>(B));
  }
  res.response_mask.resize(static_cast<std::size_t>(n));
  for (std::int64_t k = 0; k < n; ++k)
    res.response_mask[static_cast<std::size_t>(k)] = v.on(k) && combined[static_cast<std::size_t>(k)] != 0.0 ? 1.0f : 0.0f;

  // ---- off-policy diagnostics (verl: compute_offpolicy_metrics)
  auto LP = [&](std::int64_t k) { return static_cast<double>(log_prob[static_cast<std::size_t>(k)]); };
  auto RP = [&](std::int64_t k) { return static_cast<double>(rollout_log_prob[static_cast<std::size_t>(k)]); };
  std::vector<double> mt(static_cast<std::size_t>(B)), mr(static_cast<std::size_t>(B));
  double ppl_t = 0, lppl_t = 0, ppl_r = 0, lppl_r = 0, diff = 0, adiff = 0, ratio = 0, chi_seq = 0;
  double dmax = -INFINITY, dmin = INFINITY;
  for (std::int64_t i = 0; i < B; ++i) {
    double const a = v.row_mean(i, LP), b = v.row_mean(i, RP), df = b - a;
    ppl_t += std::exp(-a), lppl_t += -a, ppl_r += std::exp(-b), lppl_r += -b;
    diff += df, adiff += std::fabs(df), ratio += std::exp(df);
    dmax = std::max(dmax, df), dmin = std::min(dmin, df);
    chi_seq += std::exp(2.0 * clampb(v.row_sum(i, lr)));
  }
  double const Bd = static_cast<double>(B);
  put("training_ppl", ppl_t / Bd);
  put("training_log_ppl", lppl_t / Bd);
  put("kl", v.mmean([&](std::int64_t k) { return RP(k) - LP(k); }));
  put("k3_kl", v.mmean([&](std::int64_t k) { return std::exp(lr(k)) - lr(k) - 1.0; }));
  put("rollout_ppl", ppl_r / Bd);
  put("rollout_log_ppl", lppl_r / Bd);
  put("log_ppl_diff", diff / Bd);
  put("log_ppl_abs_diff", adiff / Bd);
  put("log_ppl_diff_max", dmax);
  put("log_ppl_diff_min", dmin);
  put("ppl_ratio", ratio / Bd);
  put("chi2_token", v.mmean([&](std::int64_t k) {
    double const r = std::exp(clampb(lr(k)));
    return r * r;
  }) - 1.0);
  put("chi2_seq", chi_seq / Bd - 1.0);
  return res;
}

}  // namespace rlflow::kernels
