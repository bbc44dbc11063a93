// rlflow/engine/optimizer.hpp: AdamW over one flat parameter buffer, gradient-norm clipping and the
// learning-rate schedules verl's actor uses (constant and cosine, both with linear warmup).
// Defines LRSchedule, OptimizerConfig, lr_at and AdamW. Does not compute gradients.
// verl: torch.optim.AdamW + clip_grad_norm_ + get_{constant,cosine}_schedule_with_warmup.
#pragma once
#include <cmath>    // std::sqrt, std::cos, std::isfinite
#include <cstdint>
#include <span>
#include <utility>  // std::move
#include <vector>

#include <rlflow/core/error.hpp>         // config_error, shape_error
#include <rlflow/core/tensor.hpp>        // Tensor: the moment buffers
#include <rlflow/model/layers.hpp>  // RLFLOW_MODEL_OMP_FOR_IF

namespace rlflow::engine {

enum class LRSchedule : int { constant = 0, warmup_cosine = 1 };

//! AdamW hyper-parameters (defaults: torch's, with verl's clip of 1.0).
struct OptimizerConfig {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.01f;     //!< decoupled; applied to matrices only (ParamTensor::decay)
  float max_grad_norm = 1.0f;     //!< clip the global L2 norm to this; <= 0 disables clipping
  LRSchedule schedule = LRSchedule::constant;
  int warmup_steps = 0;           //!< linear warmup from 0 (both schedules)
  int total_steps = 0;            //!< cosine: steps until min_lr_ratio * lr (required > warmup_steps)
  float min_lr_ratio = 0.0f;      //!< cosine floor as a fraction of lr

  void validate() const {
    auto bad = [](char const* what, double v, char const* fix) {
      throw config_error(msg("rlflow::engine::OptimizerConfig: ", what, " = ", v, " is invalid; ", fix));
    };
    if (!(lr >= 0.0f) || !std::isfinite(lr)) bad("lr", lr, "use a finite learning rate >= 0");
    if (!(beta1 >= 0.0f && beta1 < 1.0f)) bad("beta1", beta1, "use 0 <= beta1 < 1");
    if (!(beta2 >= 0.0f && beta2 < 1.0f)) bad("beta2", beta2, "use 0 <= beta2 < 1");
    if (!(eps > 0.0f)) bad("eps", eps, "use eps > 0");
    if (!(weight_decay >= 0.0f)) bad("weight_decay", weight_decay, "use weight_decay >= 0");
    if (warmup_steps < 0) bad("warmup_steps", warmup_steps, "use warmup_steps >= 0");
    if (!(min_lr_ratio >= 0.0f && min_lr_ratio <= 1.0f)) bad("min_lr_ratio", min_lr_ratio, "use 0 <= min_lr_ratio <= 1");
    if (schedule == LRSchedule::warmup_cosine && total_steps <= warmup_steps)
      throw config_error(msg("rlflow::engine::OptimizerConfig: the cosine schedule needs total_steps (", total_steps,
                             ") > warmup_steps (", warmup_steps, "); set total_steps to the number of optimizer steps"));
  }
};

//! Learning rate after 'step' optimizer steps (HF / verl schedulers):
//! warmup: lr * step / warmup; constant: lr; cosine: lr * (m + (1 - m) * 0.5 (1 + cos(pi p))),
//! p = (step - warmup) / (total - warmup) clamped to [0, 1], m = min_lr_ratio.
inline float lr_at(OptimizerConfig const& c, std::int64_t step) {
  if (step < c.warmup_steps) return c.lr * static_cast<float>(step) / static_cast<float>(c.warmup_steps);
  if (c.schedule == LRSchedule::constant) return c.lr;
  double p = double(step - c.warmup_steps) / double(c.total_steps - c.warmup_steps);
  p = p < 0.0 ? 0.0 : (p > 1.0 ? 1.0 : p);
  double const m = c.min_lr_ratio;
  return static_cast<float>(c.lr * (m + (1.0 - m) * 0.5 * (1.0 + std::cos(3.14159265358979323846 * p))));
}

//! AdamW on a flat buffer. The moments m, v and the step counter are the whole state
//! (saved by engine/checkpoint.hpp). decay_mask (one byte per float) selects weight decay. The
//! moments are allocated (zero) on first use, so an engine that never trains (the reference
//! policy) holds none.
class AdamW {
 public:
  AdamW(OptimizerConfig const& cfg, std::size_t n, std::vector<std::uint8_t> decay_mask)
      : cfg_(cfg), decay_(std::move(decay_mask)) {
    cfg_.validate();
    if (decay_.size() != n)
      throw shape_error(msg("rlflow::engine::AdamW: decay mask has ", decay_.size(), " entries for ", n, " parameters"));
  }

  //! Global L2 norm of grads in double, summed serially (the result never depends on threads).
  static double grad_norm(std::span<float const> grads) {
    double s = 0.0;
    for (float g : grads) s += double(g) * double(g);
    return std::sqrt(s);
  }

  //! Clips grads to max_grad_norm, then one AdamW update; returns the pre-clip norm. A non-finite
  //! norm skips the update (verl does the same) but still advances the step and the schedule.
  float step(std::span<float> params, std::span<float> grads) { return step(params, grads, grad_norm(grads)); }
  //! As step(params, grads), clipping by a norm computed by the caller (tensor parallelism: the
  //! full model's norm, which one rank's shard cannot compute alone).
  float step(std::span<float> params, std::span<float> grads, double norm) {
    if (params.size() != size() || grads.size() != size())
      throw shape_error(msg("rlflow::engine::AdamW::step: params (", params.size(), ") and grads (", grads.size(),
                            ") must both hold ", size(), " floats"));
    float const lr = lr_at(cfg_, step_);
    ++step_;
    if (!std::isfinite(norm)) return static_cast<float>(norm);
    float clip = 1.0f;
    if (cfg_.max_grad_norm > 0.0f && norm > cfg_.max_grad_norm) clip = float(cfg_.max_grad_norm / (norm + 1e-6));
    float const b1 = cfg_.beta1, b2 = cfg_.beta2, eps = cfg_.eps, wd = cfg_.weight_decay;
    float const bc1 = 1.0f - static_cast<float>(std::pow(double(b1), double(step_)));
    float const bc2 = 1.0f - static_cast<float>(std::pow(double(b2), double(step_)));
    float* m = moments().first.data<float>();
    float* v = moments().second.data<float>();
    float* p = params.data();
    float const* g = grads.data();
    std::uint8_t const* dm = decay_.data();
    std::int64_t const n = static_cast<std::int64_t>(size());
    RLFLOW_MODEL_OMP_FOR_IF(n > rlflow::model::layers::parallel_threshold)
    for (std::int64_t i = 0; i < n; ++i) {
      float const gi = g[i] * clip;
      m[i] = b1 * m[i] + (1.0f - b1) * gi;
      v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
      float const mhat = m[i] / bc1, vhat = v[i] / bc2;
      if (dm[i]) p[i] -= lr * wd * p[i];
      p[i] -= lr * mhat / (std::sqrt(vhat) + eps);
    }
    return static_cast<float>(norm);
  }

  std::size_t size() const { return decay_.size(); }
  std::int64_t steps_taken() const { return step_; }
  void set_steps_taken(std::int64_t s) { step_ = s; }
  //! Learning rate the next step() will use.
  float lr() const { return lr_at(cfg_, step_); }
  OptimizerConfig const& config() const { return cfg_; }
  std::span<float> m() { return moments().first.span<float>(); }
  std::span<float> v() { return moments().second.span<float>(); }
  std::span<float const> m() const { return moments().first.span<float const>(); }
  std::span<float const> v() const { return moments().second.span<float const>(); }

 private:
  std::pair<Tensor&, Tensor&> moments() const {
    if (!m_.defined()) {
      m_ = Tensor::zeros(DType::float32, Shape{static_cast<std::int64_t>(size())});
      v_ = Tensor::zeros(DType::float32, Shape{static_cast<std::int64_t>(size())});
    }
    return {m_, v_};
  }
  OptimizerConfig cfg_;
  std::vector<std::uint8_t> decay_;
  mutable Tensor m_, v_;  // allocated by moments() on first use
  std::int64_t step_ = 0;
};

}  // namespace rlflow::engine
