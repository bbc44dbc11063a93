// rlflow/engine/cuda/rollout_engine.cuh: the rollout engine of the built-in GPT on one GPU (nvcc
// only), the device twin of engine/rollout_engine.hpp: prefill of left-padded prompts into a KV
// cache (L, 2, B, NKV, S, hs), one decode step per token for the rows still running, per-row stop
// at EOS, sampling with model/cuda/sampling.cuh (the same Philox draws and candidate order as the
// CPU sampler, so tokens match the CPU engine for the same seeds and weights) over the first
// SamplingParams::vocab_limit ids, the rollout's log-probs, sleep / wake (cudaFree of the cache and
// activations), load_weights from a host flat buffer. Both families, as the CPU engine's decoder
// stack (engine/rollout_layers.hpp; its device twin engine/cuda/rollout_layers.cuh runs the layers
// here, this engine passing it the KV-slab store and attend kernels): GPT-2, and the Llama family
// (RMSNorm, q/k norm and RoPE before the keys enter the cache, grouped-query attention reading
// NKV cached heads, SwiGLU, tied or untied head). cuBLAS for the matrix products, own kernels
// (model/cuda/gpt_layers.cuh) for the rest. Token bookkeeping (positions, masks, EOS) stays on
// the host, as in the CPU engine.
// Letters: B sequences, P prompt width, R = max_new_tokens, S = P + R, C, NH, NKV, hs, F, V, L.
#pragma once
#if !defined(__CUDACC__)
#error "rlflow/engine/cuda/rollout_engine.cuh needs nvcc; build this translation unit as a .cu file"
#endif
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <algorithm>  // std::max
#include <cstdint>
#include <span>
#include <vector>

#include <rlflow/core/error.hpp>                    // shape_error, dtype_error, value_error, config_error
#include <rlflow/core/tensor.hpp>                   // Tensor in and out (host)
#include <rlflow/model/gpt.hpp>                // GPTConfig, ParamLayout, init_params
#include <rlflow/engine/sampling.hpp>          // SamplingParams
#include <rlflow/engine/rollout_engine.hpp>    // RolloutResult
#include <rlflow/engine/cuda/rollout_layers.cuh>  // detail::rollout_layers, rollout_head
#include <rlflow/model/cuda/gpt_layers.cuh> // kernels, gemm wrappers, device_buffer, RLFLOW_CUDA_CHECK
#include <rlflow/model/cuda/sampling.cuh>   // Sampler

namespace rlflow::engine::cuda {

//! Generation engine for the built-in GPT on the current CUDA device. Same API and contracts as
//! engine::RolloutEngine (host Tensors in and out); weights, cache and activations live on the
//! device. verl: vLLMRollout.generate_sequences, sleep / wake_up, update_weights.
class RolloutEngine {
 public:
  explicit RolloutEngine(model::GPTConfig const& cfg) : cfg_(cfg), lay_(cfg), head_v_(cfg.vocab_size) {
    std::vector<float> init(lay_.size());
    model::init_params(cfg_, init);
    load_weights(init);
  }
  RolloutEngine(RolloutEngine const&) = delete;
  RolloutEngine& operator=(RolloutEngine const&) = delete;
  ~RolloutEngine() { cudaStreamSynchronize(es_.stream); }  // before the buffers go

  model::GPTConfig const& config() const { return cfg_; }
  model::ParamLayout const& layout() const { return lay_; }
  cudaStream_t stream() const { return es_.stream; }
  //! The device copy of the flat weights (ParamLayout order).
  float const* device_weights() const { return weights_.get(); }

  //! Copies a host flat parameter buffer (ParamLayout order) to the device weights.
  void load_weights(std::span<float const> flat) { weights_.load(flat, es_.stream); }
  //! Copies 'count' device floats (ParamLayout order, e.g. the colocated actor's parameters on the
  //! same device) into the weights, after 'producer' (the stream that wrote them) is idle. verl:
  //! update_weights with the naive checkpoint engine (same device, no host round trip).
  void load_weights_device(float const* src, std::size_t count, cudaStream_t producer) {
    weights_.load_device(src, count, producer, es_.stream);
  }
  //! Copies the device weights back to the host (tests, checkpoints).
  std::vector<float> weights() const { return weights_.to_host(es_.stream); }

  //! Frees the KV cache, the activations and the sampler's scratch (cudaFree: the memory goes back
  //! to the driver); the weights stay.
  void sleep() {
    RLFLOW_CUDA_CHECK(cudaStreamSynchronize(es_.stream));
    for (auto* b : buffers()) b->release();
    sampler_.release();
    rope_.release();
    sleeping_ = true;
    book_.B = book_.S = book_.filled = 0;
  }
  //! Allows generation again; buffers are re-acquired lazily by the next prefill.
  void wake() { sleeping_ = false; }
  bool is_sleeping() const { return sleeping_; }
  //! Device bytes held by the cache, activations and sampler scratch (weights excluded).
  std::size_t memory_bytes() const {
    std::size_t n = sampler_.memory_bytes() + rope_.bytes();
    for (auto* b : const_cast<RolloutEngine*>(this)->buffers()) n += b->bytes();
    return n;
  }
  //! false: recompute the whole sequence for every new token (tests); tokens are the same.
  void set_use_kv_cache(bool on) { use_cache_ = on; }

  //! As engine::RolloutEngine::generate: R = sp.max_new_tokens tokens per left-padded prompt row,
  //! row b's draws from seeds[b] only. Outputs are host tensors.
  RolloutResult generate(Tensor const& prompt_ids, Tensor const& prompt_mask, SamplingParams const& sp,
                         std::span<std::uint64_t const> seeds) {
    sp.validate(cfg_.vocab_size);
    int const R = sp.max_new_tokens;
    int const Vs = sp.vocab_limit > 0 ? sp.vocab_limit : cfg_.vocab_size;  // the ids sampled and scored
    if (prompt_ids.rank() == 2 && seeds.size() != std::size_t(prompt_ids.dim(0)))
      throw shape_error(msg("rlflow::engine::cuda::RolloutEngine::generate: ", seeds.size(), " seeds for ", prompt_ids.dim(0),
                            " prompts; pass one seed per row"));
    head_v_ = Vs;
    prefill_device(prompt_ids, prompt_mask, R);
    RolloutResult out = book_.empty_result(R, sp.pad_id);
    auto* resp = out.responses.data<std::int32_t>();
    auto* rmask = out.response_mask.data<std::int32_t>();
    auto* lp = out.log_probs.data<float>();
    std::vector<std::uint64_t> row_seeds;
    std::vector<float> row_lp;
    auto& active = book_.active;
    auto& next = book_.next;
    for (int j = 0; j < R; ++j) {
      int const n = static_cast<int>(active.size());
      row_seeds.resize(std::size_t(n));
      next.resize(std::size_t(n));
      row_lp.resize(std::size_t(n));
      for (int i = 0; i < n; ++i) row_seeds[std::size_t(i)] = seeds[std::size_t(active[std::size_t(i)])];
      sampler_.sample(logits_.get<float>(), n, Vs, sp.temperature, sp.top_k, sp.top_p, row_seeds.data(),
                      std::uint64_t(j), next.data(), row_lp.data(), es_.stream);
      for (int i = 0; i < n; ++i) {
        std::size_t const at = std::size_t(active[std::size_t(i)]) * R + j;
        resp[at] = next[std::size_t(i)];
        rmask[at] = 1;
        lp[at] = row_lp[std::size_t(i)];
      }
      if (j == R - 1) break;
      if (book_.drop_finished(sp.eos_id) == 0) break;  // drop the rows that just emitted EOS
      step_rows(next);
    }
    return out;
  }

  // ---- low-level API (tests, custom decoding loops) ----------------------------------------

  //! Resets the cache and runs the prompts (B, P); returns host logits (B, V) predicting the first
  //! new token (a view valid until the next call). Reserves room for max_new_tokens positions.
  std::span<float const> prefill(Tensor const& prompt_ids, Tensor const& prompt_mask, int max_new_tokens) {
    head_v_ = cfg_.vocab_size;
    prefill_device(prompt_ids, prompt_mask, max_new_tokens);
    return host_logits();
  }
  //! Appends one token per row (B) and returns the next host logits (B, V).
  std::span<float const> decode(std::span<std::int32_t const> tokens) {
    book_.check_decode(who, tokens.size());
    book_.run_all_rows();
    head_v_ = cfg_.vocab_size;
    step_rows(tokens);
    return host_logits();
  }

 private:
  std::vector<kernels::cuda::model::layers::device_buffer*> buffers() {
    return {&kv_, &x_, &ln_, &qkv_, &atty_, &fch_, &act_, &lnf_, &logits_, &ints_, &valid_};
  }

  std::span<float const> host_logits() {
    std::size_t const n = book_.active.size() * std::size_t(head_v_);
    host_logits_.resize(n);
    RLFLOW_CUDA_CHECK(cudaMemcpyAsync(host_logits_.data(), logits_.get<float>(), n * sizeof(float), cudaMemcpyDeviceToHost, es_.stream));
    RLFLOW_CUDA_CHECK(cudaStreamSynchronize(es_.stream));
    return {host_logits_.data(), n};
  }

  void prefill_device(Tensor const& prompt_ids, Tensor const& prompt_mask, int max_new_tokens) {
    if (sleeping_) throw value_error("rlflow::engine::cuda::RolloutEngine: the engine is asleep; call wake() before generating");
    engine::detail::DecodeBook::check_prompts(who, prompt_ids, prompt_mask, max_new_tokens, cfg_);
    int const P = static_cast<int>(prompt_ids.dim(1));
    if (P + max_new_tokens > kernels::cuda::model::layers::max_attention_keys)
      throw config_error(msg(who, "::prefill: P + max_new_tokens = ", P + max_new_tokens,
                             " slots exceed the attention kernel's ",
                             kernels::cuda::model::layers::max_attention_keys, " (48 KiB of shared scores); shorten the sequences"));
    book_.reset(prompt_ids, prompt_mask, max_new_tokens);
    int const B = book_.B, S = book_.S;
    std::size_t const hs = std::size_t(cfg_.head_dim());
    kv_.ensure<float>(std::size_t(cfg_.n_layer) * 2 * B * std::size_t(cfg_.kv_heads()) * S * hs);
    if (cfg_.llama_family()) rope_.ensure(cfg_, S, es_.stream);  // positions stay below S
    std::uint8_t* dv = valid_.ensure<std::uint8_t>(std::size_t(B) * S);
    RLFLOW_CUDA_CHECK(cudaMemcpyAsync(dv, book_.seq_valid.data(), book_.seq_valid.size(), cudaMemcpyHostToDevice, es_.stream));
    run(0, P);
    book_.filled = P;
  }

  void step_rows(std::span<std::int32_t const> tokens) {
    book_.append(who, tokens, cfg_.vocab_size);
    // refresh the device copy of the flags (B * S bytes; the stream orders it before the kernels,
    // and a pageable-source copy has read the host bytes when it returns)
    RLFLOW_CUDA_CHECK(cudaMemcpyAsync(valid_.get<std::uint8_t>(), book_.seq_valid.data(), book_.seq_valid.size(),
                                      cudaMemcpyHostToDevice, es_.stream));
    if (use_cache_) {
      run(book_.filled - 1, 1);
    } else {
      book_.forget_positions();
      run(0, book_.filled);
    }
  }

  // Forward of slots [s0, s0 + n) of the running rows (detail::rollout_layers), writing their keys
  // and values into the cache (kv_store_kernel) and attending over its slots (kv_attention_kernel);
  // logits_ (|active|, head_v_) get the last slot's next-token logits (detail::rollout_head: the
  // LM head's first head_v_ rows). Leaves the stream busy.
  void run(int s0, int n) {
    namespace K = kernels::cuda::model::layers;
    bool const llama = cfg_.llama_family();
    int const C = cfg_.n_embd, NH = cfg_.n_head, NKV = cfg_.kv_heads(), hs = cfg_.head_dim();
    int const QKV = llama ? cfg_.qkv_dim() : 3 * C, Q = cfg_.attn_dim(), F = llama ? cfg_.ff_dim() : 4 * C;
    int const nr = static_cast<int>(book_.active.size()), S = book_.S;
    std::size_t const N = std::size_t(nr) * n;
    // host: tokens, positions (max(cumsum(mask) - 1, 0), as the CPU engine), running rows
    host_ints_.resize(2 * N + std::size_t(nr));
    std::int32_t* tok = host_ints_.data();
    std::int32_t* pos = tok + N;
    std::int32_t* rows = pos + N;
    for (int i = 0; i < nr; ++i) rows[i] = book_.active[std::size_t(i)];
    book_.gather(s0, n, tok, pos);
    // the previous call synchronised the stream, so growing a buffer cannot free memory in use
    std::int32_t* d_ints = ints_.ensure<std::int32_t>(host_ints_.size());
    RLFLOW_CUDA_CHECK(cudaMemcpyAsync(d_ints, host_ints_.data(), host_ints_.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice, es_.stream));
    std::int32_t const* d_tok = d_ints;
    std::int32_t const* d_pos = d_ints + N;
    std::int32_t const* d_rows = d_ints + 2 * N;
    float* fch = fch_.ensure<float>(N * (llama ? 2 * F : F));
    float* act = llama ? act_.ensure<float>(N * F) : fch;  // GPT-2's GELU runs in place
    detail::RolloutLayerBuffers const buf{x_.ensure<float>(N * C), ln_.ensure<float>(N * C), qkv_.ensure<float>(N * QKV),
                                          atty_.ensure<float>(N * Q), fch, act};
    float* last = lnf_.ensure<float>(std::size_t(nr) * C);
    float* lg = logits_.ensure<float>(std::size_t(nr) * head_v_);
    float* kv = kv_.get<float>();
    std::uint8_t const* dvalid = valid_.get<std::uint8_t>();
    std::size_t const layer_stride = 2 * std::size_t(book_.B) * NKV * std::size_t(S) * hs;
    float const* W = weights_.get();
    cudaStream_t const st = es_.stream;
    // layer l's keys (B, NKV, S, hs), then its values
    auto store = [&](int l, float const* qkv, K::QKVLayout const& L) {
      float* kc = kv + std::size_t(l) * layer_stride;
      K::kv_store_kernel<<<unsigned(N * NKV), 64, 0, st>>>(kc, kc + layer_stride / 2, qkv, d_rows, n, s0, S, L);
    };
    auto attend = [&](int l, float* atty, float const* qkv, K::QKVLayout const& L) {
      float const* kc = kv + std::size_t(l) * layer_stride;
      K::kv_attention_kernel<<<unsigned(N * NH), K::block, std::size_t(S) * sizeof(float), st>>>(atty, qkv, kc, kc + layer_stride / 2,
                                                                                                  dvalid, d_rows, n, s0, S, L);
    };
    detail::rollout_layers(cfg_, lay_, W, es_.blas, st, d_tok, d_pos, N, buf, rope_, store, attend);
    // the final norm and the LM head (tied: wte) on the last slot of each running row only
    K::gather_last_kernel<<<unsigned(nr), 128, 0, st>>>(buf.ln, buf.x, n, C);
    detail::rollout_head(cfg_, lay_, W, es_.blas, st, lg, last, buf.ln, nr, head_v_);
    RLFLOW_CUDA_CHECK(cudaGetLastError());
  }

  model::GPTConfig cfg_;
  model::ParamLayout lay_;
  detail::EngineStream es_;
  detail::DeviceWeights weights_{lay_.size(), who};
  kernels::cuda::model::layers::device_buffer kv_, x_, ln_, qkv_, atty_, fch_, act_, lnf_, logits_, ints_, valid_;
  kernels::cuda::model::layers::rope_device_tables rope_;  //!< the Llama family's RoPE tables (S positions)
  kernels::cuda::model::Sampler sampler_;
  static constexpr char const* who = "rlflow::engine::cuda::RolloutEngine";
  engine::detail::DecodeBook book_;
  bool sleeping_ = false, use_cache_ = true;
  int head_v_;  //!< LM-head rows computed: the whole vocabulary, or generate()'s vocab_limit
  std::vector<std::int32_t> host_ints_;
  std::vector<float> host_logits_;
};

}  // namespace rlflow::engine::cuda
