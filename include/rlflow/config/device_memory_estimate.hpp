// rlflow/config/device_memory_estimate.hpp: the per-worker device memory estimate of a colocated CUDA
// trainer (actor + reference training engines and the paged rollout engine with its block pool, all on
// one device) and the checks that reject a configuration before any work: too few devices for one
// worker per device, or an estimate above the device's free memory. Host-only (g++ and nvcc);
// the CUDA side (trainer_cuda.cuh) passes the device's numbers in, so all of it is tested on the CPU.
// Letters: P parameters, Bw rows per worker, S = prompt + response slots, C, NH, L, V.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>

#include <rlflow/core/device_memory.hpp>   // gib, device_memory_fix
#include <rlflow/core/error.hpp>           // config_error, msg
#include <rlflow/model/param_layout.hpp>  // GPTConfig, ParamLayout, ActivationLayout
#include <rlflow/config/trainer_config.hpp>  // TrainerConfig

namespace rlflow {

//! The device bytes one worker of a colocated CUDA trainer holds at its peak, by part.
struct DeviceMemoryEstimate {
  std::int64_t actor_state = 0;     //!< actor training engine: params, grads, AdamW m and v, decay mask
  std::int64_t ref_state = 0;       //!< reference training engine (the CUDA engine keeps the same four buffers)
  std::int64_t rollout_weights = 0; //!< rollout engine's copy of the weights
  std::int64_t kv_cache = 0;        //!< the paged rollout's block pool (see estimate_device_memory)
  std::int64_t rollout_activations = 0;  //!< one engine step's activations (max_num_batched_tokens rows), logits, indices
  std::int64_t train_activations = 0;    //!< kept activations + head + backward scratch (actor and reference)
  std::int64_t rows_per_worker = 0;      //!< Bw
  std::int64_t slots = 0;                //!< S
  std::int64_t total() const {
    return actor_state + ref_state + rollout_weights + kv_cache + rollout_activations + train_activations;
  }
  //! "weights+optimizer X GiB, KV cache Y GiB (...), activations Z GiB" for messages.
  std::string breakdown() const {
    auto g = [](std::int64_t b) { return msg(static_cast<double>(b) / gib); };
    return msg("actor + reference engines ", g(actor_state + ref_state), " GiB, rollout weights ", g(rollout_weights),
               " GiB, KV cache ", g(kv_cache), " GiB (", rows_per_worker, " rows x ", slots,
               " slots), rollout activations ", g(rollout_activations), " GiB, training activations ",
               g(train_activations), " GiB");
  }
};

namespace detail {
//! The most candidate keys the CUDA sampler sorts at once (model/cuda/sampling.cuh's
//! Sampler::default_max_sort_keys; a CUDA test checks the two agree).
inline constexpr std::int64_t sampler_sort_keys = std::int64_t{1} << 24;

//! Device bytes of the CUDA sampler's scratch for 'draws' draws of 'V' ids: per draw its spec
//! (56 bytes), token and log-prob; with a top-k or top-p filter also its segment offsets (8
//! bytes), the sort keys (in, out and CUB's alternate buffer, 8 bytes each) of at most
//! sampler_sort_keys ids (or one draw's V) and 1 KiB for CUB's alignment.
inline std::int64_t sampler_bytes(std::int64_t draws, std::int64_t V, bool filtered) {
  if (!filtered) return draws * 64;
  std::int64_t const keys = std::min(draws * V, std::max(sampler_sort_keys, V));
  return draws * 72 + 3 * 8 * keys + 1024;
}

//! Floats per token row of the CUDA engines' per-layer work buffers beyond the residual stream's
//! two (N, C) buffers: q|k|v, the attention output, the MLP's first product (GPT-2's fc, the Llama
//! family's gate|up) and the Llama family's SwiGLU output (GPT-2's GELU runs in place).
inline std::int64_t layer_scratch_width(model::GPTConfig const& m) {
  bool const llama = m.llama_family();
  std::int64_t const C = m.n_embd, F = m.ff_dim();
  return (llama ? std::int64_t(m.qkv_dim()) : 3 * C) + m.attn_dim() + (llama ? 3 * F : 4 * C);
}

//! Floats of the CUDA training engine's buffers after a forward + backward of (B, T) with R
//! response columns (engine/cuda/training_engine.cuh: acts, head_in, lnf, lnf_stats, logits,
//! head_out, dhead, grad_ws, ints and valid flags counted as floats). 'checkpointed': the kept
//! activations of activation checkpointing (model.enable_gradient_checkpointing, CPU engines):
//! each layer's input and one layer's activations (ActivationLayout, checkpointed). The Llama
//! family adds its RoPE tables (T positions of hd / 2 cosines and sines).
inline std::int64_t train_activation_floats(model::GPTConfig const& m, std::int64_t B, std::int64_t T, std::int64_t R,
                                            bool backward, bool checkpointed = false) {
  std::int64_t const C = m.n_embd, V = m.vocab_size, NH = m.n_head;
  std::int64_t const N = B * T, BR = B * R;
  std::int64_t f =
      static_cast<std::int64_t>(model::ActivationLayout(m, static_cast<int>(B), static_cast<int>(T), checkpointed).size());
  f += 2 * BR * C + 2 * BR + BR * V + 4 * BR;  // head_in, lnf, lnf_stats, logits, head_out
  // ints (ids, positions, targets, head rows, slots, cu, seq), probability offsets (B + 1, 64-bit),
  // valid flags (N bytes, counted as floats), the packed (B, R) output columns
  f += 4 * N + 3 * BR + 3 * (B + 1) + 3 * BR;
  if (m.llama_family()) f += T * m.head_dim();  // RoPE tables
  // dhead, the host dlogp's device copy; grad_ws: dlogits, two (N, C), the layer scratch, attention
  // scores' gradient, dlnf; the loss columns
  if (backward) f += 4 * BR + BR * V + N * (2 * C + layer_scratch_width(m)) + B * NH * T * T + BR * C + 7 * BR;
  return f;
}
}  // namespace detail

//! The bytes of the paged rollout engine's block pool for 'cfg' and the policy model 'm', as the
//! engines size it (engine::PagedCore::init_pool, roles::paged_engine_config):
//! actor_rollout_ref.rollout.kv_cache_bytes, or by default what max_num_seqs sequences of prompt +
//! response positions (at most m.max_seq_len) need, at most 'cap' (the engine's default budget: a
//! quarter of the available host memory on the CPU, what gpu_memory_utilization leaves on a
//! device); whole blocks of block_size positions.
inline std::int64_t paged_pool_bytes(TrainerConfig const& cfg, model::GPTConfig const& m,
                                     std::int64_t cap = std::numeric_limits<std::int64_t>::max()) {
  auto const& rc = cfg.actor_rollout_ref.rollout;
  std::int64_t const bs = std::max<std::int64_t>(1, rc.block_size);
  std::int64_t const block = std::int64_t(m.n_layer) * 2 * m.kv_heads() * bs * m.head_dim() * std::int64_t(sizeof(float));
  std::int64_t const len = std::min<std::int64_t>(cfg.data.max_prompt_length + cfg.data.max_response_length, m.max_seq_len);
  std::int64_t bytes = rc.kv_cache_bytes;
  if (bytes <= 0) bytes = std::min(((len + bs - 1) / bs + 1) * std::max<std::int64_t>(1, rc.max_num_seqs) * block, std::max<std::int64_t>(cap, 0));
  return bytes / block * block;
}

//! The peak device bytes of one worker (one device) of the colocated CUDA trainer for 'cfg' (as
//! prepared by the Trainer) and the policy model 'm'. The block pool: with 'kv_cap' >= 0 (a
//! device's default budget), the pool the rollout commits there (paged_pool_bytes); without it
//! (the planner, the host check), the blocks the worker's rows can hold at once, at most the pool
//! (the host pool's untouched pages are never mapped). Conservative: the training engines keep
//! their activation buffers across the rollout, so the rollout's pool and the training buffers are
//! counted together even when rollout.free_cache_engine frees the pool during training.
//! The critic (when there is one) runs on the CPU engine and takes no device memory.
inline DeviceMemoryEstimate estimate_device_memory(TrainerConfig const& cfg, model::GPTConfig const& m, std::int64_t kv_cap = -1) {
  DeviceMemoryEstimate e;
  std::int64_t const workers = std::max<std::int64_t>(1, cfg.trainer.nnodes * cfg.trainer.n_gpus_per_node);
  std::int64_t const n = cfg.actor_rollout_ref.rollout.n;
  std::int64_t const rows = (cfg.data.train_batch_size * n + workers - 1) / workers;
  std::int64_t const Pn = cfg.data.max_prompt_length, R = cfg.data.max_response_length, S = Pn + R;
  std::int64_t const P = model::ParamLayout(m).count();
  std::int64_t const C = m.n_embd, V = m.vocab_size;
  constexpr std::int64_t f = sizeof(float);
  e.rows_per_worker = rows;
  e.slots = S;
  e.actor_state = 4 * P * f + P;  // params, grads, m, v (float) + decay mask (byte)
  e.ref_state = e.actor_state;
  e.rollout_weights = P * f;
  if (kv_cap >= 0) {
    e.kv_cache = paged_pool_bytes(cfg, m, kv_cap);
  } else {  // each row's blocks at full length (a group shares its prompt's: an upper bound)
    std::int64_t const bs = std::max<std::int64_t>(1, cfg.actor_rollout_ref.rollout.block_size);
    std::int64_t const block = std::int64_t(m.n_layer) * 2 * m.kv_heads() * bs * m.head_dim() * f;
    e.kv_cache = std::min(paged_pool_bytes(cfg, m), rows * ((S + bs - 1) / bs + 1) * block);
  }
  // one step of the paged engine: Nt tokens (at most max_num_batched_tokens, at most every
  // position of the worker's rows) through x, ln (Nt C) and the layer scratch (qkv, atty, fc,
  // SwiGLU's output); the sampling rows' (at most max_num_seqs, at most rows) residual, norm and
  // logits; RoPE tables (S hd); the step's indices (tokens, positions, sequences, block tables);
  // the sampler's scratch.
  auto const& rc = cfg.actor_rollout_ref.rollout;
  std::int64_t const Nt = std::min(std::max<std::int64_t>(1, rc.max_num_batched_tokens), rows * S);
  std::int64_t const nr = std::min(std::max<std::int64_t>(1, rc.max_num_seqs), rows);
  std::int64_t const rope = m.llama_family() ? S * m.head_dim() : 0;
  std::int64_t const blocks_per_row = (S + std::max<std::int64_t>(1, rc.block_size) - 1) / std::max<std::int64_t>(1, rc.block_size);
  // the sampler's scratch for the step's draws (a group's n first tokens count as n of max_num_seqs)
  auto const filters = [V](std::int64_t top_k, double top_p) { return (top_k > 0 && top_k < V) || top_p < 1.0; };
  bool const filtered = filters(rc.top_k, rc.top_p) || filters(rc.val_kwargs.top_k, rc.val_kwargs.top_p);
  e.rollout_activations = (Nt * (2 * C + detail::layer_scratch_width(m)) + nr * (C + V) + rope) * f +
                          (3 * Nt + nr * (2 + blocks_per_row)) * 4 + detail::sampler_bytes(nr, V, filtered);
  // actor: its buffers only grow, so the forward's at the larger of the log-prob and the PPO
  // micro-batch plus the backward's own at the PPO micro-batch; reference: its log-prob
  // micro-batch; both with the checkpointed layout when it is on.
  auto const& a = cfg.actor_rollout_ref;
  bool const ckpt = a.model.enable_gradient_checkpointing;
  std::int64_t const mini = std::max<std::int64_t>(1, a.actor.ppo_mini_batch_size * n / workers);
  std::int64_t const micro = a.actor.ppo_micro_batch_size_per_gpu.value_or(mini);
  std::int64_t const lp_micro = std::min(rows, a.rollout.log_prob_micro_batch_size_per_gpu.value_or(rows));
  std::int64_t const ref_micro = std::min(rows, a.ref.log_prob_micro_batch_size_per_gpu.value_or(rows));
  std::int64_t const actor_f = detail::train_activation_floats(m, std::max(micro, lp_micro), S, R, false, ckpt) +
                               detail::train_activation_floats(m, micro, S, R, true, ckpt) -
                               detail::train_activation_floats(m, micro, S, R, false, ckpt);
  std::int64_t const ref_f = detail::train_activation_floats(m, ref_micro, S, R, false, ckpt);
  e.train_activations = (actor_f + ref_f) * f;
  return e;
}

//! Throws config_error (before any work) for a key the CUDA training engine does not do:
//! actor_rollout_ref.model.enable_gradient_checkpointing (it keeps every layer's activations).
inline void check_cuda_training_keys(TrainerConfig const& cfg) {
  if (cfg.actor_rollout_ref.model.enable_gradient_checkpointing)
    throw config_error("rlflow::Trainer<..., Backend<cuda::tag>>: actor_rollout_ref.model.enable_gradient_checkpointing=true "
                       "needs the CPU engines (the CUDA training engine keeps every layer's activations); set it to false, "
                       "or train with rlflow::Backend<rlflow::cpu::tag>");
}

//! Throws config_error (before any work) when a CUDA trainer wants more workers than there are
//! devices: one worker per device, in one process (nnodes = 1).
inline void check_device_count(TrainerConfig const& cfg, int devices) {
  std::int64_t const workers = cfg.trainer.nnodes * cfg.trainer.n_gpus_per_node;
  if (cfg.trainer.nnodes != 1)
    throw config_error(msg("rlflow::Trainer<..., Backend<cuda::tag>>: trainer.nnodes=", cfg.trainer.nnodes,
                           " but the in-process CUDA trainer runs on one node; set trainer.nnodes=1"));
  if (devices < 1)
    throw config_error("rlflow::Trainer<..., Backend<cuda::tag>>: no CUDA device is visible (cudaGetDeviceCount found "
                       "none); run on a GPU machine or use rlflow::Backend<rlflow::cpu::tag>");
  if (workers > devices)
    throw config_error(msg("rlflow::Trainer<..., Backend<cuda::tag>>: trainer.n_gpus_per_node=", cfg.trainer.n_gpus_per_node,
                           " workers (one per device) but only ", devices, " CUDA device", devices == 1 ? " is" : "s are",
                           " visible; set trainer.n_gpus_per_node=", devices, " or less"));
}

//! MemAvailable of /proc/meminfo in bytes (what the kernel can hand this process without swapping),
//! or -1 where it cannot be read.
inline std::int64_t host_memory_available() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (!f) return -1;
  char line[256];
  std::int64_t kb = -1;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "MemAvailable: %lld kB", reinterpret_cast<long long*>(&kb)) == 1) break;
  std::fclose(f);
  return kb < 0 ? -1 : kb * 1024;
}

//! Throws config_error (before the weights are read) when the CPU trainer's workers of this
//! process (n_gpus_per_node of them, each with the per-worker footprint of
//! estimate_device_memory: actor and reference engines, the rollout's weights, the blocks its rows
//! can hold and activations) need more than 'available' bytes of host memory, naming the numbers
//! and the fix.
//! The CPU engines allocate gradients and AdamW moments on first use, so the reference counts its
//! weights and decay mask only. 'available' < 0 (unknown) skips the check.
inline void check_host_memory(TrainerConfig const& cfg, model::GPTConfig const& m, std::int64_t available, std::string const& what) {
  if (available < 0) return;
  DeviceMemoryEstimate e = estimate_device_memory(cfg, m);
  e.ref_state = model::ParamLayout(m).count() * std::int64_t(sizeof(float) + 1);
  std::int64_t const workers = std::max<std::int64_t>(1, cfg.trainer.n_gpus_per_node);
  std::int64_t const need = workers * e.total();
  if (need <= available) return;
  throw config_error(msg("rlflow::Trainer: ", what, " (", model::ParamLayout(m).count(), " parameters) needs an estimated ",
                         static_cast<double>(need) / gib, " GiB of host memory for ", workers, " worker", workers == 1 ? "" : "s",
                         " (each: ", e.breakdown(), ") but ", static_cast<double>(available) / gib,
                         " GiB are available; lower trainer.n_gpus_per_node, data.train_batch_size, the micro-batch sizes or "
                         "data.max_prompt_length / max_response_length, or use a smaller model"));
}

//! Throws config_error (before any work) when the estimate exceeds the free memory of the device
//! ('free_bytes' of 'total_bytes', as cudaMemGetInfo reports them), naming the numbers and the fix.
inline void check_device_memory(DeviceMemoryEstimate const& e, int device, std::int64_t free_bytes, std::int64_t total_bytes) {
  if (e.total() <= free_bytes) return;
  throw config_error(msg("rlflow::Trainer<..., Backend<cuda::tag>>: one worker needs an estimated ",
                         static_cast<double>(e.total()) / gib, " GiB of device memory (", e.breakdown(), ") but device ",
                         device, " has ", static_cast<double>(free_bytes) / gib, " GiB free of ",
                         static_cast<double>(total_bytes) / gib, " GiB; ", device_memory_fix));
}

}  // namespace rlflow
