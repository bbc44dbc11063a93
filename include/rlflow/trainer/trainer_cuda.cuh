// rlflow/trainer/trainer_cuda.cuh: the CUDA backend of the built-in trainer roles (nvcc only). Include it
// (instead of, or after, rlflow/rlflow.hpp) in a .cu file to use Trainer<..., Backend<cuda::tag>>:
// it defines roles::engines<cuda::tag>, which puts the actor's training engine, the rollout engine
// (the paged engine: block pool from gpu_memory_utilization, sleep / wake) and the frozen reference of each worker on that worker's device (one
// worker per device, device = local rank; each engine has its own stream and cuBLAS handle), moves
// the actor's weights into the rollout device-to-device, averages gradients across workers through
// the host, runs the actor's losses with the cuda::par kernels on device columns (staged through
// pinned host memory), writes checkpoints in the CPU engine's format, reports the device memory counters and
// rejects, before any work, a configuration with too few devices or a memory estimate above a
// device's free memory. The critic (roles::ValueCritic) stays on the CPU engine.
#pragma once
#if !defined(__CUDACC__)
#error "rlflow/trainer/trainer_cuda.cuh needs nvcc; build this translation unit as a .cu file"
#endif
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include <rlflow/core/device_memory.hpp>            // device_memory_counter
#include <rlflow/config/device_memory_estimate.hpp>   // estimate_device_memory, check_device_count, check_device_memory
#include <rlflow/engine/checkpoint.hpp>        // save_checkpoint, load_checkpoint (CPU format)
#include <rlflow/engine/cuda/paged_engine.cuh>
#include <rlflow/engine/cuda/training_engine.cuh>
#include <rlflow/roles/actor_rollout_ref.hpp>  // engines, BasicActorRolloutRef
#include <rlflow/trainer/trainer.hpp>

namespace rlflow::roles {

namespace detail {
//! x[k] *= s over n device floats.
RLFLOW_MODEL_KERNEL void scale_kernel(float* x, std::int64_t n, float s) {
  for (std::int64_t k = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < n; k += std::int64_t(blockDim.x) * gridDim.x)
    x[k] *= s;
}

//! A grow-only pinned host buffer of floats (cudaMallocHost): the staging of host columns.
class PinnedFloats {
 public:
  PinnedFloats() = default;
  PinnedFloats(PinnedFloats const&) = delete;
  PinnedFloats& operator=(PinnedFloats const&) = delete;
  ~PinnedFloats() {
    if (p_) cudaFreeHost(p_);
  }
  float* ensure(std::size_t n) {
    if (n > n_) {
      if (p_) cudaFreeHost(p_);
      p_ = nullptr;
      n_ = 0;
      RLFLOW_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&p_), n * sizeof(float)));
      n_ = n;
    }
    return p_;
  }

 private:
  float* p_ = nullptr;
  std::size_t n_ = 0;
};
}  // namespace detail

template <>
struct engines<::rlflow::cuda::tag> {
  using training = engine::cuda::TrainingEngine;
  using rollout = engine::cuda::PagedEngine;
  //! The paged rollout engine from actor_rollout_ref.rollout.* (block_size, max_num_seqs,
  //! max_num_batched_tokens, enable_chunked_prefill, enable_prefix_caching, kv_cache_bytes,
  //! gpu_memory_utilization) on the worker's device (no tensor-parallel shard on the GPU yet: TP<1> only).
  static rollout make_rollout(RoleSetup const& s, model::TPRank) {
    auto const& rc = s.cfg.actor_rollout_ref.rollout;
    return rollout(s.policy_model, paged_engine_config(s.cfg), rc.gpu_memory_utilization);
  }
  //! Sets the training engine's weights from a full flat host copy (weights from model.path).
  static void set_weights(training& t, std::vector<float> const& w) { t.load_weights(w); }
  static std::size_t full_size(training const& t) { return t.layout().size(); }

  //! Binds the worker's thread to device local_rank (the engines are built and called on it).
  struct device_binding {
    explicit device_binding(WorkerContext const& ctx) : device(ctx.local_rank) { RLFLOW_CUDA_CHECK(cudaSetDevice(device)); }
    int device;
  };

  //! The actor's loss kernels run on cuda::par on the engine's stream over device columns.
  static constexpr bool device_losses = true;

  //! One micro-batch of update_actor on the device: forward (log-probs and entropy stay on the
  //! device), old_log_probs / advantages / mask / ref_log_prob / rollout_is_weights staged into device columns
  //! through a pinned host buffer, compute_policy_loss / agg_loss / kl_loss on
  //! cuda::par.on(stream) writing d loss / d log_prob on the device, backward_device (no host
  //! round trip of the gradients). Same math and order as the CPU branch in update_actor.
  static void actor_micro_step(training& eng, DataProto const& mc, kernels::Dims d, kernels::PolicyLossConfig const& pcfg,
                               kernels::AggMode agg, kernels::AggInfo const& info, float temperature, bool use_entropy,
                               double entropy_coeff, bool use_kl, kernels::KLPenalty kl_kind, double kl_coef, MetricLists& m,
                               double& pg_loss, double& entropy_loss, double& kl_value) {
    int const R = static_cast<int>(d.cols);
    std::size_t const BR = static_cast<std::size_t>(d.rows) * static_cast<std::size_t>(d.cols);
    eng.forward(mc.tensor("input_ids"), mc.tensor("attention_mask"), R, temperature, use_entropy);
    cudaStream_t const st = eng.stream();
    auto const par = ::rlflow::cuda::par.on(st);
    // device columns: old, adv, mask, ref | dlogp, dent ; host staging (pinned): old, adv, mask, ref
    thread_local kernels::cuda::model::layers::device_buffer cols;
    thread_local detail::PinnedFloats host;
    bool const is_w = mc.has_tensor("rollout_is_weights");  // rollout correction (IS weights)
    float* dev = cols.ensure<float>(7 * BR);
    float* h = host.ensure(5 * BR);
    auto put = [&](Tensor const& t, std::size_t slot) {
      auto sp = t.span<float>();
      std::copy(sp.begin(), sp.end(), h + slot * BR);
    };
    put(mc.tensor("old_log_probs"), 0);
    put(mc.tensor("advantages"), 1);
    auto rm = mc.tensor("response_mask").span<std::int32_t>();
    for (std::size_t k = 0; k < BR; ++k) h[2 * BR + k] = rm[k] ? 1.0f : 0.0f;
    if (use_kl) put(mc.tensor("ref_log_prob"), 3);
    if (is_w) put(mc.tensor("rollout_is_weights"), 4);
    RLFLOW_CUDA_CHECK(cudaMemcpyAsync(dev, h, 5 * BR * sizeof(float), cudaMemcpyHostToDevice, st));
    float* dlogp = dev + 5 * BR;
    float* dent = dev + 6 * BR;
    RLFLOW_CUDA_CHECK(cudaMemsetAsync(dlogp, 0, BR * sizeof(float), st));
    auto cspan = [&](float const* p) { return std::span<float const>(p, BR); };
    std::span<float const> const mask = cspan(dev + 2 * BR);
    std::span<float const> const logp = cspan(eng.device_log_probs());
    auto res = kernels::compute_policy_loss(par, d, pcfg, cspan(dev), logp, cspan(dev + BR), mask, agg, info,
                                            kernels::Grad{std::span<float>(dlogp, BR), 1.0, false},
                                            is_w ? cspan(dev + 4 * BR) : std::span<float const>{});
    pg_loss += res.loss;
    for (auto const& [key, value] : res.extra_metrics) m[key].push_back(value);  // bypass_mode: rollout_corr/*
    if (res.metrics.has_pg_clipfrac) m["actor/pg_clipfrac"].push_back(res.metrics.pg_clipfrac);
    if (res.metrics.has_ppo_kl) m["actor/ppo_kl"].push_back(res.metrics.ppo_kl);
    if (res.metrics.has_pg_clipfrac_lower) m["actor/pg_clipfrac_lower"].push_back(res.metrics.pg_clipfrac_lower);
    if (use_entropy) {
      // loss -= entropy_coeff * agg(H): d/dH = -entropy_coeff * agg weights
      entropy_loss += kernels::agg_loss(par, d, cspan(eng.device_entropy()), mask, agg, info);
      kernels::agg_loss_weights(par, d, mask, agg, info, std::span<float>(dent, BR));
      detail::scale_kernel<<<kernels::cuda::model::layers::grid_for(std::int64_t(BR)), 256, 0, st>>>(dent, std::int64_t(BR),
                                                                                             float(-entropy_coeff));
      RLFLOW_CUDA_CHECK(cudaGetLastError());
    }
    if (use_kl)
      kl_value += kernels::kl_loss(par, d, kl_kind, logp, cspan(dev + 3 * BR), mask, agg, info,
                                   kernels::Grad{std::span<float>(dlogp, BR), kl_coef, true});
    RLFLOW_CUDA_CHECK(cudaStreamSynchronize(st));
    eng.backward_device(dlogp, use_entropy ? dent : nullptr);
  }

  static void load_rollout(rollout& r, training& t) { r.load_weights_device(t.device_params(), t.layout().size(), t.stream()); }

  //! DP average through the host (download, communicator all-reduce, upload); one worker: nothing.
  static void allreduce_grads(WorkerContext const& ctx, training& t) {
    if (ctx.world_size == 1) return;
    std::vector<float> g = t.grads();
    detail::allreduce_mean(ctx, std::span<float>(g));
    t.set_grads(g);
  }

  static std::vector<float> weights(training const& t) { return t.params(); }

  //! The CPU engine's checkpoint format (params, AdamW moments, step), staged through a host engine.
  static void save(std::string const& path, training const& t) {
    engine::TrainingEngine host(t.config());
    auto const p = t.params(), m = t.exp_avg(), v = t.exp_avg_sq();
    std::copy(p.begin(), p.end(), host.params().begin());
    std::copy(m.begin(), m.end(), host.optimizer().m().begin());
    std::copy(v.begin(), v.end(), host.optimizer().v().begin());
    host.optimizer().set_steps_taken(t.step());
    engine::save_checkpoint(path, host);
  }
  static void load(std::string const& path, training& t) {
    engine::TrainingEngine host(t.config());
    engine::load_checkpoint(path, host);  // checks everything before 't' changes
    t.load_weights(host.params());
    auto const m = host.optimizer().m(), v = host.optimizer().v();
    t.set_optimizer_state(std::span<float const>(m.data(), m.size()), std::span<float const>(v.data(), v.size()), host.step());
  }

  //! {allocated, peak allocated, reserved, peak reserved} bytes of the calling thread's device.
  static std::vector<std::int64_t> memory_stats(bool reset_peak) {
    int d = 0;
    RLFLOW_CUDA_CHECK(cudaGetDevice(&d));
    auto& c = device_memory_counter(d);
    DeviceMemoryStats const s = c.stats();
    if (reset_peak) c.reset_peak();
    return {s.allocated, s.peak_allocated, s.reserved, s.peak_reserved};
  }

  //! One worker per visible device and the estimate (its block pool as the rollout will size it
  //! there) against each device's free memory (the driver thread's current device is restored).
  static void check_devices(TrainerConfig const& cfg, model::GPTConfig const& policy) {
    check_cuda_training_keys(cfg);
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();
      n = 0;
    }
    check_device_count(cfg, n);
    DeviceMemoryEstimate const whole = estimate_device_memory(cfg, policy);
    int prev = 0;
    RLFLOW_CUDA_CHECK(cudaGetDevice(&prev));
    for (int d = 0; d < static_cast<int>(cfg.world_size()); ++d) {
      std::size_t free_b = 0, total_b = 0;
      RLFLOW_CUDA_CHECK(cudaSetDevice(d));
      RLFLOW_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
      // the rollout's default pool: what gpu_memory_utilization leaves once the engines' weights are in
      double const allowed = cfg.actor_rollout_ref.rollout.gpu_memory_utilization * double(total_b);
      double const in_use = double(total_b - free_b) + double(whole.actor_state + whole.ref_state + whole.rollout_weights);
      DeviceMemoryEstimate const e = estimate_device_memory(cfg, policy, static_cast<std::int64_t>(std::max(0.0, allowed - in_use)));
      check_device_memory(e, d, static_cast<std::int64_t>(free_b), static_cast<std::int64_t>(total_b));
    }
    RLFLOW_CUDA_CHECK(cudaSetDevice(prev));
  }
};

//! The hybrid role on the device.
using CudaActorRolloutRef = BasicActorRolloutRef<::rlflow::cuda::tag>;

}  // namespace rlflow::roles
