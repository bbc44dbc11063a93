// rlflow/kernels/value_loss.hpp: the critic's clipped value loss with vf_clipfrac and the
// analytic gradient d(vf_loss)/d(vpreds) (verl: core_algos.compute_value_loss and the critic
// wrapper in verl/workers/utils/losses.py). Defines compute_value_loss.
#pragma once
#include <cstdint>
#include <span>

#include <rlflow/kernels/agg_loss.hpp>  // detail::agg_row_coef
#include <rlflow/kernels/detail/checks.hpp>
#include <rlflow/kernels/detail/exec.hpp>
#include <rlflow/kernels/math.hpp>      // value_token
#include <rlflow/kernels/options.hpp>

namespace rlflow::kernels {

//! v_clip = clip_by_value(v, v_old - eps, v_old + eps); per token max((v - R)^2, (v_clip - R)^2);
//! vf_loss = 0.5 agg_loss(., m, mode, info); vf_clipfrac = mmean([(v_clip-R)^2 > (v-R)^2]);
//! vpred_mean = mmean(v). grad (optional) receives d vf_loss / d vpreds (torch tie rules).
//! verl: compute_value_loss (cliprange_value default 0.5)
//! vpreds, values (old), returns, response_mask, grad: (B, T)
template <class Policy, class Mask>
ValueLossResult compute_value_loss(Policy const& policy, Dims d, std::span<float const> vpreds, std::span<float const> values,
                                   std::span<float const> returns, std::span<Mask const> response_mask, double cliprange_value,
                                   AggMode agg, AggInfo const& info = {}, Grad grad = {}) {
  detail::check_policy<Policy>();
  detail::check_mask<Mask>();
  const char* fn = "compute_value_loss";
  detail::expect_token_spans(fn, d,
                             {{"vpreds", vpreds.size()}, {"values", values.size()}, {"returns", returns.size()},
                              {"response_mask", response_mask.size()}});
  if (!grad.out.empty()) detail::expect_size(fn, "grad.out", grad.out.size(), d.numel(), "B*T");
  auto ex = detail::make_exec(policy);
  Mask const* m = response_mask.data();
  float const* v = vpreds.data();
  float const* vo = values.data();
  float const* r = returns.data();
  detail::check_finite_tokens(ex, fn, "vpreds", d, v, m);
  detail::check_finite_tokens(ex, fn, "values", d, vo, m);
  detail::check_finite_tokens(ex, fn, "returns", d, r, m);
  auto coef = detail::agg_row_coef(ex, fn, d, m, agg, info);
  double const* c = coef.data();
  detail::grad_sink const gout(grad);
  std::int64_t const T = d.cols;
  math::value_token const f{cliprange_value};
  auto const s = ex.reduce(d.numel(), math::dvec<4>::zero(), [=] RLFLOW_HD(std::int64_t k) -> math::dvec<4> {
    if (!detail::on(m[k])) {
      gout.clear(k);
      return math::dvec<4>::zero();
    }
    double const ci = c[k / T];
    auto const q = f(v[k], vo[k], r[k]);
    gout.put(k, gout.scale * 0.5 * ci * q.dloss);
    return math::dvec<4>{{ci * q.loss, q.clipped, static_cast<double>(v[k]), 1.0}};
  });
  double const den = math::mask_den(s.v[3]);
  return ValueLossResult{0.5 * s.v[0], s.v[1] / den, s.v[2] / den};
}

}  // namespace rlflow::kernels
