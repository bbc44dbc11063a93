// rlflow/engine/cuda/rollout_layers.cuh: the CUDA rollout engines' decoder stack (nvcc only), the
// device twin of engine/rollout_layers.hpp: the embedding, the L decoder layers and the final norm
// + LM head over a flat batch of token rows, shared by cuda::RolloutEngine (a KV slab per row)
// and a paged engine (KV blocks, model/cuda/gpt_layers.cuh's paged kernels): only where keys and
// values are kept differs, so each engine passes a store and an attend function over its cache.
// Every launch goes on one stream; nothing here synchronises it. Also DeviceWeights, the engines'
// device copy of the weights, and EngineStream, their stream and cuBLAS handle.
// Letters: N token rows, M head rows, C, NH, NKV, hs, F, L as in model/cuda/gpt_layers.cuh.
//
// vLLM counterpart: the model's forward (vllm/model_executor/models/llama.py, gpt2.py) with the
// attention backend choosing the cache layout.
#pragma once
#if !defined(__CUDACC__)
#error "rlflow/engine/cuda/rollout_layers.cuh needs nvcc; build this translation unit as a .cu file"
#endif
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <rlflow/core/error.hpp>  // shape_error, msg
#include <rlflow/model/gpt.hpp>              // GPTConfig, ParamLayout
#include <rlflow/model/cuda/gpt_layers.cuh>  // kernels, gemm wrappers, rope_device_tables, QKVLayout

namespace rlflow::engine::cuda::detail {

//! An engine's non-blocking stream and the cuBLAS handle bound to it; released (after the stream's
//! work) by its destructor, so also when the engine's constructor throws later.
struct EngineStream {
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  EngineStream() {
    RLFLOW_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    try {
      RLFLOW_CUDA_CHECK(cublasCreate(&blas));
      RLFLOW_CUDA_CHECK(cublasSetStream(blas, stream));
    } catch (...) {  // no destructor runs for a constructor that throws
      release();
      throw;
    }
  }
  EngineStream(EngineStream const&) = delete;
  EngineStream& operator=(EngineStream const&) = delete;
  ~EngineStream() { release(); }
  void release() noexcept {
    if (stream) cudaStreamSynchronize(stream);
    if (blas) cublasDestroy(blas);
    if (stream) cudaStreamDestroy(stream);
    blas = nullptr;
    stream = nullptr;
  }
};

//! A rollout engine's device copy of the flat weights (ParamLayout order, 'count' floats), loaded
//! from the host or device to device from the colocated actor, read back for tests and
//! checkpoints; 'who' names the engine in errors. verl: update_weights.
class DeviceWeights {
 public:
  DeviceWeights(std::size_t count, char const* who) : n_(count), who_(who) {}
  float const* get() const { return buf_.get<float>(); }
  //! Copies a host flat buffer; 'st' is idle on return.
  void load(std::span<float const> flat, cudaStream_t st) {
    check(flat.size(), "load_weights");
    RLFLOW_CUDA_CHECK(cudaMemcpyAsync(buf_.ensure<float>(n_), flat.data(), flat.size_bytes(), cudaMemcpyHostToDevice, st));
    RLFLOW_CUDA_CHECK(cudaStreamSynchronize(st));
  }
  //! Copies 'count' device floats after 'producer' (the stream that wrote them) is idle; 'st' is
  //! idle on return. The naive checkpoint engine: same device, no host round trip.
  void load_device(float const* src, std::size_t count, cudaStream_t producer, cudaStream_t st) {
    check(count, "load_weights_device");
    RLFLOW_CUDA_CHECK(cudaStreamSynchronize(producer));
    RLFLOW_CUDA_CHECK(cudaMemcpyAsync(buf_.ensure<float>(n_), src, count * sizeof(float), cudaMemcpyDeviceToDevice, st));
    RLFLOW_CUDA_CHECK(cudaStreamSynchronize(st));
  }
  std::vector<float> to_host(cudaStream_t st) const {
    std::vector<float> out(n_);
    RLFLOW_CUDA_CHECK(cudaMemcpyAsync(out.data(), buf_.get<float>(), n_ * sizeof(float), cudaMemcpyDeviceToHost, st));
    RLFLOW_CUDA_CHECK(cudaStreamSynchronize(st));
    return out;
  }

 private:
  void check(std::size_t count, char const* what) const {
    if (count != n_)
      throw shape_error(msg(who_, "::", what, ": ", count, " floats for a model of ", n_,
                            " parameters; the trainer and the rollout must share one GPTConfig"));
  }
  kernels::cuda::model::layers::device_buffer buf_;
  std::size_t n_;
  char const* who_;
};

//! Device work buffers of one forward of N token rows: x (N, C) the residual stream, ln (N, C),
//! qkv (N, (NH + 2 NKV) hs), atty (N, NH hs), fch (N, F, or 2F for SwiGLU's gate|up), act (N, F;
//! fch for GPT-2, whose GELU runs in place).
struct RolloutLayerBuffers {
  float* x;
  float* ln;
  float* qkv;
  float* atty;
  float* fch;
  float* act;
};

//! The input norm of a block (or the final norm) over M rows of C floats: RMSNorm for the Llama
//! family (b unused), LayerNorm for GPT-2. w, b: offsets into the flat weights W.
inline void rollout_norm(model::GPTConfig const& cfg, float const* W, cudaStream_t st, float* out, float const* in, std::size_t w,
                         std::size_t b, int M) {
  namespace K = kernels::cuda::model::layers;
  int const C = cfg.n_embd;
  if (cfg.llama_family())
    K::rmsnorm_kernel<<<unsigned(M), K::block, 0, st>>>(out, nullptr, in, W + w, K::RowSet{M, C, 1, std::size_t(C)}, cfg.rms_norm_eps);
  else K::layernorm_kernel<<<unsigned(M), K::block, 0, st>>>(out, nullptr, nullptr, in, W + w, W + b, C);
}

//! The embedded rows x (N, C) of tokens d_tok at positions d_pos (device arrays): wte + wpe for
//! GPT-2, wte alone for the Llama family (RoPE instead).
inline void rollout_embed(model::GPTConfig const& cfg, model::ParamLayout const& lay, float const* W, cudaStream_t st,
                          std::int32_t const* d_tok, std::int32_t const* d_pos, std::size_t N, float* x) {
  namespace K = kernels::cuda::model::layers;
  K::encoder_kernel<<<unsigned(N), 128, 0, st>>>(x, d_tok, d_pos, W + lay.wte, cfg.llama_family() ? nullptr : W + lay.wpe, cfg.n_embd);
}

//! The embedding and the L decoder layers over N token rows d_tok at positions d_pos (device
//! arrays): buf.x holds the last layer's output (N, C) on return. After each layer's q|k|v
//! projection (and, for the Llama family, q/k norm and RoPE at the rows' positions from 'rope',
//! which must hold every position asked for, so a cached key keeps its rotation) store(l, qkv, L)
//! writes the rows' keys and values into the cache, then attend(l, atty, qkv, L) fills atty
//! (N, NH hs) from it (L the layers::QKVLayout of the rows). W: the device's flat weights
//! (ParamLayout order); cuBLAS handle 'blas' must run on 'st'.
template <class Store, class Attend>
void rollout_layers(model::GPTConfig const& cfg, model::ParamLayout const& lay, float const* W, cublasHandle_t blas, cudaStream_t st,
                    std::int32_t const* d_tok, std::int32_t const* d_pos, std::size_t N, RolloutLayerBuffers const& buf,
                    kernels::cuda::model::layers::rope_device_tables const& rope, Store&& store, Attend&& attend) {
  namespace K = kernels::cuda::model::layers;
  bool const llama = cfg.llama_family();
  int const C = cfg.n_embd, NH = cfg.n_head, NKV = cfg.kv_heads(), hs = cfg.head_dim();
  int const QKV = llama ? cfg.qkv_dim() : 3 * C, Q = cfg.attn_dim(), F = llama ? cfg.ff_dim() : 4 * C;
  float const eps = cfg.rms_norm_eps;
  K::QKVLayout const L = llama ? K::QKVLayout::grouped(NH, NKV, hs) : K::QKVLayout::gpt2(C, NH);
  float* const x = buf.x;
  auto opt = [&](std::size_t off) -> float const* { return off == model::ParamLayout::none ? nullptr : W + off; };
  // out (N, m) = [b +] inp (N, k) w^T
  auto linear_nt = [&](float* out, float const* inp, std::size_t w, std::size_t b, int k, int m) {
    float const* bias = opt(b);
    if (bias) K::bias_rows_kernel<<<K::grid_for(std::int64_t(N) * m), 256, 0, st>>>(out, bias, std::int64_t(N) * m, m, false);
    K::gemm_nt(blas, out, inp, W + w, int(N), k, m, bias ? 1.0f : 0.0f);
  };
  // x (N, C) += [b +] inp (N, k) w (the residual connection)
  auto residual_nn = [&](float const* inp, std::size_t w, std::size_t b, int k) {
    if (float const* bias = opt(b))
      K::bias_rows_kernel<<<K::grid_for(std::int64_t(N) * C), 256, 0, st>>>(x, bias, std::int64_t(N) * C, C, true);
    K::gemm_nn(blas, x, inp, W + w, int(N), k, C, 1.0f);
  };
  rollout_embed(cfg, lay, W, st, d_tok, d_pos, N, x);
  for (int l = 0; l < cfg.n_layer; ++l) {
    auto const& P = lay.layers[std::size_t(l)];
    rollout_norm(cfg, W, st, buf.ln, x, P.ln1_w, P.ln1_b, int(N));
    linear_nt(buf.qkv, buf.ln, P.qkv_w, P.qkv_b, C, QKV);
    if (llama) {  // q/k norm and RoPE at the rows' positions before the keys enter the cache
      float* const qkv = buf.qkv;
      if (cfg.qk_norm) {
        K::rmsnorm_kernel<<<unsigned(N * NH), K::block, 0, st>>>(qkv, nullptr, qkv, W + P.q_norm,
                                                                K::RowSet{std::int64_t(N) * NH, hs, NH, std::size_t(QKV)}, eps);
        K::rmsnorm_kernel<<<unsigned(N * NKV), K::block, 0, st>>>(qkv + Q, nullptr, qkv + Q, W + P.k_norm,
                                                                 K::RowSet{std::int64_t(N) * NKV, hs, NKV, std::size_t(QKV)}, eps);
      }
      K::rope_kernel<<<K::grid_for(std::int64_t(N) * NH * (hs / 2)), 256, 0, st>>>(qkv, d_pos, std::int64_t(N), NH, hs,
                                                                                  std::size_t(QKV), rope.cos(), rope.sin(), false);
      K::rope_kernel<<<K::grid_for(std::int64_t(N) * NKV * (hs / 2)), 256, 0, st>>>(qkv + Q, d_pos, std::int64_t(N), NKV, hs,
                                                                                   std::size_t(QKV), rope.cos(), rope.sin(), false);
    }
    store(l, static_cast<float const*>(buf.qkv), L);
    attend(l, buf.atty, static_cast<float const*>(buf.qkv), L);
    residual_nn(buf.atty, P.proj_w, P.proj_b, Q);
    rollout_norm(cfg, W, st, buf.ln, x, P.ln2_w, P.ln2_b, int(N));
    if (llama) {
      linear_nt(buf.fch, buf.ln, P.fc_w, P.fc_b, C, 2 * F);
      K::swiglu_kernel<<<K::grid_for(std::int64_t(N) * F), 256, 0, st>>>(buf.act, buf.fch, std::int64_t(N), F);
    } else {
      linear_nt(buf.fch, buf.ln, P.fc_w, P.fc_b, C, F);
      K::gelu_kernel<<<K::grid_for(std::int64_t(N) * F), 256, 0, st>>>(buf.fch, buf.fch, std::int64_t(N) * F);
    }
    residual_nn(buf.act, P.fcproj_w, P.fcproj_b, F);
  }
}

//! The final norm and the LM head over M rows: normed (M, C) = norm(in (M, C)), logits (M, head_v)
//! = normed times the LM head's first head_v rows (tied: wte). head_v: the whole vocabulary, or
//! a sampler's vocab_limit.
inline void rollout_head(model::GPTConfig const& cfg, model::ParamLayout const& lay, float const* W, cublasHandle_t blas,
                         cudaStream_t st, float* logits, float* normed, float const* in, int M, int head_v) {
  rollout_norm(cfg, W, st, normed, in, lay.lnf_w, lay.lnf_b, M);
  kernels::cuda::model::layers::gemm_nt(blas, logits, normed, W + lay.lm_head, M, cfg.n_embd, head_v, 0.0f);
}

}  // namespace rlflow::engine::cuda::detail
