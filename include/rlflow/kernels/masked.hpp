// rlflow/kernels/masked.hpp: masked reductions over (B, T) response-token matrices.
// Defines masked_sum, masked_mean, masked_var (unbiased, raising as verl does) and masked_whiten,
// on cpu::par and cuda::par. Positions where the mask is 0 never contribute (NaN there cannot
// leak). Also along one axis (per row / per column).
#pragma once
#include <cmath>
#include <cstdint>
#include <span>

#include <rlflow/kernels/detail/checks.hpp>  // check_policy, check_mask
#include <rlflow/kernels/detail/exec.hpp>    // exec, make_exec, expect_size
#include <rlflow/kernels/math.hpp>           // mask_den
#include <rlflow/kernels/options.hpp>        // Dims

namespace rlflow::kernels {

struct MaskedMoments {
  double sum = 0;    //!< sum of x over valid positions
  double count = 0;  //!< number of valid positions
  double mean = 0;   //!< sum / math::mask_den(count)  (verl's masked_mean: float32 count + 1e-8)
  double var = 0;    //!< masked variance (unbiased unless asked otherwise)
};

namespace detail {

template <class Ex, class M>
math::dvec<2> masked_sum_count(Ex const& ex, std::int64_t n, float const* x, M const* m) {
  return ex.reduce(n, math::dvec<2>::zero(), [=] RLFLOW_HD(std::int64_t i) -> math::dvec<2> {
    bool const v = detail::on(m[i]);
    return math::dvec<2>{{v ? static_cast<double>(x[i]) : 0.0, v ? 1.0 : 0.0}};
  });
}

//! verl: verl_F.masked_var. Two passes in double (mean, then centred squares).
template <class Ex, class M>
MaskedMoments masked_moments(Ex const& ex, const char* fn, Dims d, float const* x, M const* m, bool unbiased) {
  std::int64_t const n = d.numel();
  auto const sc = masked_sum_count(ex, n, x, m);
  MaskedMoments r;
  r.sum = sc.v[0];
  r.count = sc.v[1];
  r.mean = r.sum / math::mask_den(r.count);
  double const mean = r.mean;
  double const ss = ex.reduce(n, 0.0, [=] RLFLOW_HD(std::int64_t i) -> double {
    if (!detail::on(m[i])) return 0.0;
    double const c = static_cast<double>(x[i]) - mean;
    return c * c;
  });
  r.var = ss / math::mask_den(r.count);
  if (unbiased) {
    if (r.count == 0)
      throw value_error(msg("rlflow::kernels::", fn, ": the response mask of the (B = ", d.rows, ", T = ", d.cols,
                            ") batch has no valid token, so the unbiased variance is undefined (verl raises too); "
                            "drop the batch or unmask at least two tokens"));
    if (r.count == 1)
      throw value_error(msg("rlflow::kernels::", fn, ": the response mask of the (B = ", d.rows, ", T = ", d.cols,
                            ") batch has exactly one valid token, so the unbiased variance divides by zero (verl raises "
                            "too); whiten over a larger batch"));
    r.var *= r.count / (r.count - 1.0);
  }
  return r;
}

//! out = (x - mean) * rsqrt(var + 1e-8) (+ mean unless shift_mean) at every position.
template <class Ex>
void whiten_apply(Ex const& ex, std::int64_t n, float const* x, float* out, double mean, double var, bool shift_mean) {
  double const rs = 1.0 / std::sqrt(var + 1e-8);
  double const add = shift_mean ? 0.0 : mean;
  ex.for_each(n, [=] RLFLOW_HD(std::int64_t i) { out[i] = static_cast<float>((static_cast<double>(x[i]) - mean) * rs + add); });
}

}  // namespace detail

//! Sum of x over valid positions.                 verl: verl_F.masked_sum (axis=None)
//! x, response_mask: (B, T)
template <class Policy, class Mask>
double masked_sum(Policy const& policy, Dims d, std::span<float const> x, std::span<Mask const> response_mask) {
  detail::check_policy<Policy>();
  detail::check_mask<Mask>();
  detail::expect_dims("masked_sum", d);
  detail::expect_size("masked_sum", "x", x.size(), d.numel(), "B*T");
  detail::expect_size("masked_sum", "response_mask", response_mask.size(), d.numel(), "B*T");
  auto ex = detail::make_exec(policy);
  return detail::masked_sum_count(ex, d.numel(), x.data(), response_mask.data()).v[0];
}

//! sum(x * m) / (sum(m) + 1e-8), the denominator in float32 as verl's integer masks give it (so
//! exactly sum(m) for any valid token: math::mask_den).  verl: verl_F.masked_mean (axis=None)
template <class Policy, class Mask>
double masked_mean(Policy const& policy, Dims d, std::span<float const> x, std::span<Mask const> response_mask) {
  detail::check_policy<Policy>();
  detail::check_mask<Mask>();
  detail::expect_dims("masked_mean", d);
  detail::expect_size("masked_mean", "x", x.size(), d.numel(), "B*T");
  detail::expect_size("masked_mean", "response_mask", response_mask.size(), d.numel(), "B*T");
  auto ex = detail::make_exec(policy);
  auto const sc = detail::masked_sum_count(ex, d.numel(), x.data(), response_mask.data());
  return sc.v[0] / math::mask_den(sc.v[1]);
}

//! mmean((x - mmean(x))^2) * N / (N - 1) when unbiased; throws value_error for N = 0 or 1
//! (unbiased only), as verl does.                  verl: verl_F.masked_var
template <class Policy, class Mask>
double masked_var(Policy const& policy, Dims d, std::span<float const> x, std::span<Mask const> response_mask,
                  bool unbiased = true) {
  detail::check_policy<Policy>();
  detail::check_mask<Mask>();
  detail::expect_dims("masked_var", d);
  detail::expect_size("masked_var", "x", x.size(), d.numel(), "B*T");
  detail::expect_size("masked_var", "response_mask", response_mask.size(), d.numel(), "B*T");
  auto ex = detail::make_exec(policy);
  return detail::masked_moments(ex, "masked_var", d, x.data(), response_mask.data(), unbiased).var;
}

//! out = (x - mu) * (var + 1e-8)^(-1/2) at every position (masked ones included, as verl), with the
//! unbiased masked mean/variance; mu is added back when !shift_mean. 'out' may be 'x' (in place).
//! Throws value_error for fewer than two valid tokens.  verl: verl_F.masked_whiten
template <class Policy, class Mask>
MaskedMoments masked_whiten(Policy const& policy, Dims d, std::span<float const> x, std::span<Mask const> response_mask,
                            std::span<float> out, bool shift_mean = true) {
  detail::check_policy<Policy>();
  detail::check_mask<Mask>();
  detail::expect_dims("masked_whiten", d);
  detail::expect_size("masked_whiten", "x", x.size(), d.numel(), "B*T");
  detail::expect_size("masked_whiten", "response_mask", response_mask.size(), d.numel(), "B*T");
  detail::expect_size("masked_whiten", "out", out.size(), d.numel(), "B*T");
  auto ex = detail::make_exec(policy);
  auto const mom = detail::masked_moments(ex, "masked_whiten", d, x.data(), response_mask.data(), true);
  detail::whiten_apply(ex, d.numel(), x.data(), out.data(), mom.mean, mom.var, shift_mean);
  return mom;
}

// ---------------------------------------------------------------------------------------------
// Along one axis (verl's axis argument): axis 1 or -1 reduces each row over its T tokens (B
// values), axis 0 each column over the B rows (T values).

namespace detail {
template <class Policy, class Mask>
void masked_axis(Policy const& policy, const char* fn, Dims d, std::span<float const> x, std::span<Mask const> response_mask,
                 int axis, std::span<float> out, bool mean) {
  check_policy<Policy>();
  check_mask<Mask>();
  expect_dims(fn, d);
  expect_size(fn, "x", x.size(), d.numel(), "B*T");
  expect_size(fn, "response_mask", response_mask.size(), d.numel(), "B*T");
  if (axis != 0 && axis != 1 && axis != -1)
    throw shape_error(msg("rlflow::kernels::", fn, ": axis = ", axis, " for a (B, T) matrix; use 1 or -1 (per row) or 0 (per column)"));
  bool const rows = axis != 0;
  expect_size(fn, "out", out.size(), rows ? d.rows : d.cols, rows ? "B" : "T");
  auto ex = make_exec(policy);
  float const* xp = x.data();
  Mask const* m = response_mask.data();
  float* o = out.data();
  std::int64_t const B = d.rows, T = d.cols;
  if (rows) {
    ex.row_reduce(
        B, T, math::dvec<2>::zero(),
        [=] RLFLOW_HD(std::int64_t i, std::int64_t t) -> math::dvec<2> {
          std::int64_t const k = i * T + t;
          return detail::on(m[k]) ? math::dvec<2>{{static_cast<double>(xp[k]), 1.0}} : math::dvec<2>::zero();
        },
        [=] RLFLOW_HD(std::int64_t i, math::dvec<2> s) { o[i] = static_cast<float>(mean ? s.v[0] / math::mask_den(s.v[1]) : s.v[0]); });
  } else {
    ex.for_each(T, [=] RLFLOW_HD(std::int64_t t) {
      double sum = 0.0, cnt = 0.0;
      for (std::int64_t i = 0; i < B; ++i) {
        std::int64_t const k = i * T + t;
        if (detail::on(m[k])) sum += static_cast<double>(xp[k]), cnt += 1.0;
      }
      o[t] = static_cast<float>(mean ? sum / math::mask_den(cnt) : sum);
    });
  }
}
}  // namespace detail

//! Per-row (axis 1 / -1: out has B entries) or per-column (axis 0: T entries) sums of x over
//! valid positions; NaN at masked positions cannot leak.       verl: verl_F.masked_sum(x, m, axis)
template <class Policy, class Mask>
void masked_sum(Policy const& policy, Dims d, std::span<float const> x, std::span<Mask const> response_mask, int axis,
                std::span<float> out) {
  detail::masked_axis(policy, "masked_sum", d, x, response_mask, axis, out, false);
}

//! Per-row / per-column masked means sum / (count + 1e-8) with verl's float32 count (an empty row
//! gives 0).                                                   verl: verl_F.masked_mean(x, m, axis)
template <class Policy, class Mask>
void masked_mean(Policy const& policy, Dims d, std::span<float const> x, std::span<Mask const> response_mask, int axis,
                 std::span<float> out) {
  detail::masked_axis(policy, "masked_mean", d, x, response_mask, axis, out, true);
}

}  // namespace rlflow::kernels
