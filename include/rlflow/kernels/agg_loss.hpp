// rlflow/kernels/agg_loss.hpp: loss aggregation (verl: core_algos.agg_loss) and its gradient.
// Every mode is linear in the per-token loss: agg = sum_{i,t} m[i,t] * c_i * L[i,t] with a
// per-row coefficient c_i; agg_loss_weights writes w = m * c (= d agg / d L). Defines
// agg_loss, agg_loss_weights. Does not compute any per-token loss.
#pragma once
#include <cstdint>
#include <span>

#include <rlflow/kernels/detail/checks.hpp>
#include <rlflow/kernels/detail/exec.hpp>
#include <rlflow/kernels/options.hpp>  // AggMode, AggInfo, Dims

namespace rlflow::kernels {
namespace detail {

//! Per-row aggregation coefficients c_i (B doubles on the backend) for mode/info.
//! Counts: N_tok = sum m (or info.batch_num_tokens), N_seq = #rows with a valid token (or
//! info.global_batch_size); dp_size > 1 without the global count is a config_error (verl raises);
//! a zero denominator is a value_error (verl would return NaN).
template <class Ex, class M>
typename Ex::template buffer<double> agg_row_coef(Ex const& ex, const char* fn, Dims d, M const* mask, AggMode mode,
                                                  AggInfo const& info) {
  if (info.dp_size < 1)
    throw config_error(msg("rlflow::kernels::", fn, ": AggInfo::dp_size = ", info.dp_size, " must be >= 1"));
  auto len = ex.template alloc<double>(d.rows);
  double* lp = len.data();
  std::int64_t const T = d.cols;
  ex.row_reduce(d.rows, T, 0.0, [=] RLFLOW_HD(std::int64_t i, std::int64_t t) -> double { return detail::on(mask[i * T + t]) ? 1.0 : 0.0; },
                [=] RLFLOW_HD(std::int64_t i, double s) { lp[i] = s; });
  auto const tot = ex.reduce(d.rows, math::dvec<2>::zero(), [=] RLFLOW_HD(std::int64_t i) -> math::dvec<2> {
    return math::dvec<2>{{lp[i], lp[i] > 0 ? 1.0 : 0.0}};
  });
  double const n_tok = tot.v[0], n_seq = tot.v[1];
  double const dp = info.dp_size;
  double scale = 1.0;      // c_i = scale, or scale / (L_i + 1e-8) for seq-mean-token-mean (float32 denominator: math::mask_den)
  bool per_len = false;
  auto const need = [&](std::optional<double> const& g, double local, const char* key, const char* what) {
    if (!g && info.dp_size > 1)
      throw config_error(msg("rlflow::kernels::", fn, ": loss_agg_mode '", agg_mode_name(mode), "' with dp_size = ", info.dp_size,
                             " needs the global ", what, "; set AggInfo::", key, " (verl raises ValueError too)"));
    double const v = g ? *g : local;
    if (!(v > 0))
      throw value_error(msg("rlflow::kernels::", fn, ": loss_agg_mode '", agg_mode_name(mode), "' divides by ", what, " = ", v,
                            " (B = ", d.rows, ", T = ", d.cols, "); the micro-batch has no valid token - pass AggInfo::", key,
                            " from the mini-batch or skip the micro-batch (verl would return NaN)"));
    return v;
  };
  switch (mode) {
    case AggMode::token_mean: scale = dp / need(info.batch_num_tokens, n_tok, "batch_num_tokens", "token count"); break;
    case AggMode::token_sum: scale = dp; break;
    case AggMode::seq_mean_token_sum:
    case AggMode::seq_mean_token_sum_norm:
      scale = dp / need(info.global_batch_size, n_seq, "global_batch_size", "sequence count");
      if (mode == AggMode::seq_mean_token_sum_norm) {
        double const norm = info.loss_scale_factor ? *info.loss_scale_factor : static_cast<double>(d.cols);
        if (!(norm > 0))
          throw value_error(msg("rlflow::kernels::", fn, ": seq-mean-token-sum-norm divides by loss_scale_factor = ", norm,
                                "; set AggInfo::loss_scale_factor > 0"));
        scale /= norm;
      }
      break;
    case AggMode::seq_mean_token_mean:
      scale = dp / need(info.global_batch_size, n_seq, "global_batch_size", "sequence count");
      per_len = true;
      break;
  }
  ex.for_each(d.rows, [=] RLFLOW_HD(std::int64_t i) { lp[i] = per_len ? scale / math::mask_den(lp[i]) : scale; });
  return len;
}

}  // namespace detail

//! Aggregates a per-token loss to a scalar.       verl: core_algos.agg_loss
//! loss_mat, response_mask: (B, T). token-mean: sum(L m)/N_tok*dp; token-sum: sum(L m)*dp;
//! seq-mean-token-sum: sum_i sum_t(L m)/N_seq*dp; -norm: that / (loss_scale_factor or T);
//! seq-mean-token-mean: sum_i [sum_t(L m)/(L_i + 1e-8)]/N_seq*dp.
template <class Policy, class Mask>
double agg_loss(Policy const& policy, Dims d, std::span<float const> loss_mat, std::span<Mask const> response_mask,
                AggMode mode, AggInfo const& info = {}) {
  detail::check_policy<Policy>();
  detail::check_mask<Mask>();
  detail::expect_token_spans("agg_loss", d, {{"loss_mat", loss_mat.size()}, {"response_mask", response_mask.size()}});
  auto ex = detail::make_exec(policy);
  Mask const* m = response_mask.data();
  float const* L = loss_mat.data();
  detail::check_finite_tokens(ex, "agg_loss", "loss_mat", d, L, m);
  auto coef = detail::agg_row_coef(ex, "agg_loss", d, m, mode, info);
  double const* c = coef.data();
  std::int64_t const T = d.cols;
  return ex.reduce(d.numel(), 0.0, [=] RLFLOW_HD(std::int64_t k) -> double {
    return detail::on(m[k]) ? c[k / T] * static_cast<double>(L[k]) : 0.0;
  });
}

//! w[i,t] = d agg_loss / d loss_mat[i,t] = m[i,t] * c_i (0 at masked positions).
//! response_mask, weights: (B, T)
template <class Policy, class Mask>
void agg_loss_weights(Policy const& policy, Dims d, std::span<Mask const> response_mask, AggMode mode, AggInfo const& info,
                      std::span<float> weights) {
  detail::check_policy<Policy>();
  detail::check_mask<Mask>();
  detail::expect_token_spans("agg_loss_weights", d,
                             {{"response_mask", response_mask.size()}, {"weights", weights.size()}});
  auto ex = detail::make_exec(policy);
  Mask const* m = response_mask.data();
  auto coef = detail::agg_row_coef(ex, "agg_loss_weights", d, m, mode, info);
  double const* c = coef.data();
  float* w = weights.data();
  ex.for_each_2d(d.rows, d.cols, [=] RLFLOW_HD(std::int64_t i, std::int64_t, std::int64_t k) {
    w[k] = detail::on(m[k]) ? static_cast<float>(c[i]) : 0.0f;
  });
}

}  // namespace rlflow::kernels
