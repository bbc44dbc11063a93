// rlflow/engine/cuda/paged_engine.cuh: the paged, continuously batched rollout engine of the
// built-in GPT (GPT-2 and the Llama family) on one GPU (nvcc only), the device twin of
// engine/paged_engine.hpp: PagedCore's scheduler (engine/paged_core.hpp: requests, prefix sharing
// and caching, chunked prefill, preemption) over a block pool in device memory sized from
// gpu_memory_utilization, the decoder stack of engine/cuda/rollout_layers.cuh writing keys and
// values into their blocks (paged_kv_store_kernel) and attending through the block tables
// (paged_attention_kernel), the LM head on the sampling rows only, and each request's draws
// sampled on the device from those rows (model/cuda/sampling.cuh: each draw with its request's
// filters, seed and counter; the same tokens as the CPU engine's sample_token for the same
// logits), so only tokens and log-probs come to the host (the logits too while a logits observer
// is set). Weights from a host flat buffer or device-to-device from the colocated actor; sleep /
// wake free and take back the pool and the activations (cudaFree). TP 1 and the replicated head.
// vLLM: LLMEngine with the GPU model runner and PagedAttention; nano-vllm: model_runner.py.
#pragma once
#if !defined(__CUDACC__)
#error "rlflow/engine/cuda/paged_engine.cuh needs nvcc; build this translation unit as a .cu file"
#endif
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <rlflow/core/error.hpp>               // config_error, shape_error, value_error
#include <rlflow/engine/block_pool.hpp>        // BlockPool
#include <rlflow/engine/cuda/rollout_layers.cuh>  // the decoder stack and the LM head on the device
#include <rlflow/engine/paged_core.hpp>        // PagedCore, PagedEngineConfig, RequestParams, ...
#include <rlflow/model/cuda/gpt_layers.cuh>    // paged kernels, device_buffer, RLFLOW_CUDA_CHECK
#include <rlflow/model/cuda/sampling.cuh>      // Sampler, DrawSpec
#include <rlflow/model/gpt.hpp>                // GPTConfig, ParamLayout, init_params

namespace rlflow::engine::cuda {

//! The paged rollout engine on the current CUDA device: engine::PagedEngine's API and tokens
//! (add_request / step / abort, generate of prompts or of a left-padded batch, metrics), with the
//! weights, the block pool and the activations on the device. The pool holds
//! PagedEngineConfig::kv_cache_bytes, or by default what gpu_memory_utilization of the device
//! leaves after the memory already in use (vLLM's rule: this engine's weights, a colocated
//! actor), at most what max_num_seqs sequences of planned_seq_len positions need; it is allocated on the first step
//! and freed by sleep(). Not thread-safe: one thread drives it, on the device it was built on.
//! verl: vLLMRollout (generate_sequences, sleep / wake_up, update_weights).
class PagedEngine : public engine::PagedCore<PagedEngine> {
  using Core = engine::PagedCore<PagedEngine>;
  friend Core;

 public:
  static constexpr char const* who = "rlflow::engine::cuda::PagedEngine";

  PagedEngine(model::GPTConfig const& cfg, PagedEngineConfig const& pc = {}, double gpu_memory_utilization = 0.5)
      : Core(cfg, pc), lay_(cfg_), weights_(lay_.size(), who) {
    if (!(gpu_memory_utilization > 0.0 && gpu_memory_utilization <= 1.0))
      throw config_error(msg(who, ": gpu_memory_utilization = ", gpu_memory_utilization,
                             " must be in (0, 1] (the fraction of device memory for weights and KV cache; verl's default 0.5)"));
    init_device(gpu_memory_utilization);
  }
  ~PagedEngine() {
    abort_all();
    cudaStreamSynchronize(es_.stream);  // before the buffers go
  }

  model::ParamLayout const& layout() const { return lay_; }
  cudaStream_t stream() const { return es_.stream; }
  //! The device copy of the flat weights (ParamLayout order).
  float const* device_weights() const { return weights_.get(); }
  //! The engine itself: the trainer's roles read its metrics through it, as through CpuRollout.
  PagedEngine* paged() { return this; }
  PagedEngine const* paged() const { return this; }

  //! Copies a host flat parameter buffer (ParamLayout order) to the device weights and drops the
  //! prefix cache (its keys and values are the old weights'). verl: update_weights.
  void load_weights(std::span<float const> flat) {
    weights_.load(flat, es_.stream);
    if (pool_) mutable_pool().reset_cache();
  }
  //! Copies 'count' device floats (ParamLayout order, e.g. the colocated actor's parameters on the
  //! same device) into the weights, after 'producer' (the stream that wrote them) is idle, and drops
  //! the prefix cache. verl: update_weights with the naive checkpoint engine.
  void load_weights_device(float const* src, std::size_t count, cudaStream_t producer) {
    weights_.load_device(src, count, producer, es_.stream);
    mutable_pool().reset_cache();
  }
  //! Copies the device weights back to the host (tests, checkpoints).
  std::vector<float> weights() const { return weights_.to_host(es_.stream); }

  //! Frees the block pool's storage, the activations and the RoPE tables (cudaFree: the memory
  //! goes back to the driver); needs an idle engine; the weights stay. The next step() takes them
  //! again. verl: sleep / wake_up.
  void sleep() {
    if (has_unfinished()) throw value_error(msg(who, "::sleep: ", num_unfinished(), " requests are in flight; abort or finish them first"));
    RLFLOW_CUDA_CHECK(cudaStreamSynchronize(es_.stream));
    for (auto* b : buffers()) b->release();
    sampler_.release();
    rope_.release();
    rope_rows_ = 0;
    mutable_pool().reset_cache();  // the cached blocks' keys and values are gone
    sleeping_ = true;
  }
  void wake() { sleeping_ = false; }
  bool is_sleeping() const { return sleeping_; }
  //! Whether the block pool's storage is allocated (from the first step until sleep()).
  bool has_kv_storage() const { return kv_.bytes() > 0; }
  //! Device bytes held by the block pool, the activations, the sampler's scratch and the RoPE
  //! tables (weights excluded).
  std::size_t memory_bytes() const {
    std::size_t n = rope_.bytes() + sampler_.memory_bytes();
    for (auto* b : const_cast<PagedEngine*>(this)->buffers()) n += b->bytes();
    return n;
  }

  int vocab_begin() const { return 0; }
  int vocab_end() const { return cfg_.vocab_size; }

 private:
  using device_buffer = kernels::cuda::model::layers::device_buffer;
  std::vector<device_buffer*> buffers() { return {&kv_, &x_, &ln_, &qkv_, &atty_, &fch_, &act_, &lnf_, &logits_, &ints_}; }

  // ---- PagedCore's hooks ----
  void check_ready(char const*) const {}
  void check_abortable() const {}
  void check_positions(std::string const& id, int total) const {
    if (total > kernels::cuda::model::layers::max_attention_keys)
      throw shape_error(msg(who, "::add_request: request '", id, "': ", total, " positions exceed the attention kernel's ",
                            kernels::cuda::model::layers::max_attention_keys,
                            " (48 KiB of shared scores per query); shorten the prompt or max_tokens"));
  }
  void copy_block(int from, int to) {  // ordered before the step's kernels on the same stream
    float* kv = kv_storage();
    std::size_t const n = pool().shape().floats_per_block();
    RLFLOW_CUDA_CHECK(cudaMemcpyAsync(kv + std::size_t(to) * n, kv + std::size_t(from) * n, n * sizeof(float),
                                      cudaMemcpyDeviceToDevice, es_.stream));
  }
  // every draw of the step on the device: a draw reads row (d.row - rows_base_) / V of the step's logits
  void sample_draws() {
    int const n = int(draws_.size()), V = cfg_.vocab_size;
    specs_.resize(std::size_t(n));
    for (int i = 0; i < n; ++i) {
      Draw const& d = draws_[std::size_t(i)];
      RequestParams const& p = d.s->req->p;
      specs_[std::size_t(i)] = kernels::cuda::model::DrawSpec{(d.row - rows_base_) / V, p.seed_of(d.s->k), draw_counter(d),
                                                              p.temperature, p.top_p, p.min_p, p.top_k, sampled_vocab(p)};
    }
    draw_tok_.resize(std::size_t(n));
    draw_lp_.resize(std::size_t(n));
    sampler_.sample_draws(logits_.get<float>(), rows_, V, specs_.data(), n, draw_tok_.data(), draw_lp_.data(), es_.stream);
    for (int i = 0; i < n; ++i) {
      draws_[std::size_t(i)].tok = draw_tok_[std::size_t(i)];
      draws_[std::size_t(i)].logprob = draw_lp_[std::size_t(i)];
    }
  }

  // the weights from the model's seed and the block pool's size (the constructor's work after the handles)
  void init_device(double gpu_memory_utilization) {
    std::vector<float> init(lay_.size());
    model::init_params(cfg_, init);
    load_weights(init);
    BlockPool::Shape const s{cfg_.n_layer, cfg_.kv_heads(), cfg_.head_dim(), pc_.block_size};
    std::size_t const need = full_budget_bytes(s);
    std::size_t budget = need;
    if (pc_.kv_cache_bytes == 0) {
      std::size_t free_b = 0, total_b = 0;
      RLFLOW_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
      double const allowed = gpu_memory_utilization * double(total_b), in_use = double(total_b - free_b);
      budget = allowed > in_use ? std::min(need, std::size_t(allowed - in_use)) : 0;
      if (budget < s.bytes_per_block())
        throw config_error(msg(who, ": gpu_memory_utilization = ", gpu_memory_utilization, " allows ", allowed / ::rlflow::gib,
                               " GiB of the device's ", double(total_b) / ::rlflow::gib, " GiB and ", in_use / ::rlflow::gib,
                               " GiB are in use already, which leaves no KV block of ", s.bytes_per_block(),
                               " bytes; raise actor_rollout_ref.rollout.gpu_memory_utilization or set kv_cache_bytes"));
    }
    init_pool(s, budget);
  }

  float* kv_storage() { return kv_.ensure<float>(std::size_t(pool().num_blocks()) * pool().shape().floats_per_block()); }

  // One forward of every scheduled position (PagedEngine::forward's twin): the flat batch of N
  // tokens, their positions, sequences and the block tables go to the device in one copy; the
  // decoder stack stores each layer's keys and values into the blocks and attends through the
  // tables; the final norm and the LM head run on the sampling rows (each a work item's last
  // position). Returns their logits (rows.size(), V), or null when no row samples: the device
  // rows, which PagedCore only passes back to sample_draws(), or a host copy while a logits
  // observer reads them.
  float* forward(std::vector<Work> const& work, std::vector<Seq*> const& rows) {
    // every step ends synchronised, but one that threw may have left kernels queued, and growing
    // a buffer below frees its old memory
    RLFLOW_CUDA_CHECK(cudaStreamSynchronize(es_.stream));
    namespace K = kernels::cuda::model::layers;
    int const C = cfg_.n_embd, V = cfg_.vocab_size;
    std::size_t N = 0, T = 0;
    int max_keys = 0;
    for (auto const& w : work) {
      N += std::size_t(w.count);
      T += std::size_t(w.s->table.size());
      max_keys = std::max(max_keys, w.start + w.count);
    }
    int const nw = int(work.size()), nr = int(rows.size());
    // host ints: tok N | pos N | seq N | table_off nw | tables T | sampling rows nr
    host_ints_.resize(3 * N + std::size_t(nw) + T + std::size_t(nr));
    std::int32_t* tok = host_ints_.data();
    std::int32_t* pos = tok + N;
    std::int32_t* seq = pos + N;
    std::int32_t* toff = seq + N;
    std::int32_t* tbl = toff + nw;
    std::int32_t* last = tbl + T;
    std::size_t t = 0, o = 0;
    int ri = 0;
    for (int wi = 0; wi < nw; ++wi) {
      Work const& w = work[std::size_t(wi)];
      for (int k = 0; k < w.count; ++k, ++t) {
        tok[t] = w.s->tokens[std::size_t(w.start + k)];
        pos[t] = w.start + k;
        seq[t] = wi;
      }
      toff[wi] = std::int32_t(o);
      for (int b : w.s->table.ids()) tbl[o++] = b;
      if (ri < nr && rows[std::size_t(ri)] == w.s) last[ri++] = std::int32_t(t - 1);
    }
    float* kv = kv_storage();
    if (cfg_.llama_family() && max_keys > rope_rows_) {  // positions stay below max_keys; the tables grow geometrically
      rope_rows_ = std::min(cfg_.max_seq_len, std::max(max_keys, 2 * rope_rows_));
      rope_.ensure(cfg_, rope_rows_, es_.stream);
    }
    std::int32_t* d = ints_.ensure<std::int32_t>(host_ints_.size());
    RLFLOW_CUDA_CHECK(cudaMemcpyAsync(d, host_ints_.data(), host_ints_.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice, es_.stream));
    std::int32_t const* d_tok = d;
    std::int32_t const* d_pos = d + N;
    std::int32_t const* d_seq = d + 2 * N;
    std::int32_t const* d_toff = d + 3 * N;
    std::int32_t const* d_tbl = d_toff + nw;
    std::int32_t const* d_last = d_tbl + T;
    bool const llama = cfg_.llama_family();
    int const QKV = llama ? cfg_.qkv_dim() : 3 * C, Q = cfg_.attn_dim(), F = llama ? cfg_.ff_dim() : 4 * C;
    float* fch = fch_.ensure<float>(N * std::size_t(llama ? 2 * F : F));
    detail::RolloutLayerBuffers const buf{x_.ensure<float>(N * C), ln_.ensure<float>(N * C), qkv_.ensure<float>(N * QKV),
                                          atty_.ensure<float>(N * Q), fch, llama ? act_.ensure<float>(N * F) : fch};
    int const bs = pc_.block_size;
    std::size_t const fpb = pool().shape().floats_per_block();
    int const NH = cfg_.n_head, NKV = cfg_.kv_heads();
    cudaStream_t const st = es_.stream;
    auto store = [&](int l, float const* qkv, K::QKVLayout const& L) {
      K::paged_kv_store_kernel<<<unsigned(N * NKV), 64, 0, st>>>(kv, qkv, d_pos, d_seq, d_tbl, d_toff, l, bs, fpb, L);
    };
    auto attend = [&](int l, float* atty, float const* qkv, K::QKVLayout const& L) {
      K::paged_attention_kernel<<<unsigned(N * NH), K::block, std::size_t(max_keys) * sizeof(float), st>>>(
          atty, qkv, kv, d_pos, d_seq, d_tbl, d_toff, l, bs, fpb, L);
    };
    detail::rollout_layers(cfg_, lay_, weights_.get(), es_.blas, st, d_tok, d_pos, N, buf, rope_, store, attend);
    RLFLOW_CUDA_CHECK(cudaGetLastError());
    if (nr == 0) {
      RLFLOW_CUDA_CHECK(cudaStreamSynchronize(st));
      return nullptr;
    }
    // the sampling rows' final residuals, the final norm and the LM head
    K::gather_rows_kernel<<<unsigned(nr), 128, 0, st>>>(buf.ln, buf.x, d_last, C);
    float* lg = logits_.ensure<float>(std::size_t(nr) * V);
    detail::rollout_head(cfg_, lay_, weights_.get(), es_.blas, st, lg, lnf_.ensure<float>(std::size_t(nr) * C), buf.ln, nr, V);
    RLFLOW_CUDA_CHECK(cudaGetLastError());
    rows_ = nr;
    if (!observing()) {  // sample_draws() reads them on the device, after the head on the same stream
      rows_base_ = lg;
      return lg;
    }
    host_logits_.resize(std::size_t(nr) * V);
    RLFLOW_CUDA_CHECK(cudaMemcpyAsync(host_logits_.data(), lg, host_logits_.size() * sizeof(float), cudaMemcpyDeviceToHost, st));
    RLFLOW_CUDA_CHECK(cudaStreamSynchronize(st));
    rows_base_ = host_logits_.data();
    return host_logits_.data();
  }

  model::ParamLayout lay_;
  detail::EngineStream es_;
  detail::DeviceWeights weights_;
  device_buffer kv_, x_, ln_, qkv_, atty_, fch_, act_, lnf_, logits_, ints_;
  kernels::cuda::model::Sampler sampler_;
  kernels::cuda::model::layers::rope_device_tables rope_;  //!< the Llama family's RoPE tables (rope_rows_ positions)
  int rope_rows_ = 0;
  bool sleeping_ = false;
  std::vector<std::int32_t> host_ints_;
  std::vector<float> host_logits_;
  float const* rows_base_ = nullptr;  //!< what forward() returned: the draws' rows are offsets from it
  int rows_ = 0;                       //!< and how many rows it holds
  std::vector<kernels::cuda::model::DrawSpec> specs_;
  std::vector<std::int32_t> draw_tok_;
  std::vector<float> draw_lp_;
};

}  // namespace rlflow::engine::cuda
