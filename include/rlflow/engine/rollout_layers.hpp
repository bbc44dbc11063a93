// rlflow/engine/rollout_layers.hpp: the rollout engines' decoder stack, shared by RolloutEngine
// (a KV slab per row) and PagedEngine (KV blocks): only where keys and values are kept differs.
//
// vLLM counterpart: the model's forward (vllm/model_executor/models/llama.py, gpt2.py) with the
// attention backend choosing the cache layout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include <rlflow/comm/communicator.hpp>      // comm::Communicator (the TP group's all-reduce)
#include <rlflow/model/gpt.hpp>              // GPTConfig, ParamLayout
#include <rlflow/model/layers.hpp>           // the CPU layer functions
#include <rlflow/model/stable_products.hpp>  // the batch-invariant products
#include <rlflow/model/tensor_parallel.hpp>  // ShardLayout

namespace rlflow::engine::detail {

//! Work buffers of one forward of N token rows: x (N, C) the residual stream, ln (N, C), qkv
//! (N, (NH + 2 NKV) hs), atty (N, Cl), fch (N, F, or 2F for SwiGLU's gate|up), act (N, F; fch for
//! GPT-2, whose GELU runs in place), part (N, C; only at TP > 1).
struct RolloutLayerBuffers {
  float* x;
  float* ln;
  float* qkv;
  float* atty;
  float* fch;
  float* act;
  float* part;
};

//! Whether a product of M rows against K x N weights runs the batch-invariant kernels
//! (model/stable_products.hpp): for weights larger than a core's cache, which they read once for
//! all rows where BLAS packs them per call, when one_row (each row on its own) or at decode-sized M.
//! Smaller weights stay in cache, where BLAS (one call per row when one_row) is as fast or faster.
inline bool stable_rows(bool one_row, int M, int K, int N) {
  return model::stable::available() && std::int64_t{K} * N >= model::stable::decode_min_weights &&
         (one_row || M <= model::stable::decode_rows);
}

//! out (M, Nout) = inp (M, K) w^T (+ b). one_row: a row's bits must not depend on the rows beside
//! it (batch invariance): the stable kernels where the CPU has them, else one BLAS call per row
//! (BLAS rounds a row differently with the number of rows beside it).
inline void products_nt(bool one_row, float* out, float const* inp, float const* w, float const* b, int M, int K, int Nout) {
  if (stable_rows(one_row, M, K, Nout)) return model::stable::nt(out, inp, w, b, M, K, Nout);
  if (!one_row) return model::layers::linear_nt_forward(out, inp, w, b, M, K, Nout);
  for (int m = 0; m < M; ++m) model::layers::linear_nt_forward(out + std::size_t(m) * Nout, inp + std::size_t(m) * K, w, b, 1, K, Nout);
}
//! out (M, Nout) (+)= inp (M, K) w (+ b), as products_nt.
inline void products_nn(bool one_row, float* out, float const* inp, float const* w, float const* b, int M, int K, int Nout, bool acc) {
  if (stable_rows(one_row, M, K, Nout)) return model::stable::nn(out, inp, w, b, M, K, Nout, acc);
  if (!one_row) return model::layers::linear_nn_forward(out, inp, w, b, M, K, Nout, acc);
  for (int m = 0; m < M; ++m)
    model::layers::linear_nn_forward(out + std::size_t(m) * Nout, inp + std::size_t(m) * K, w, b, 1, K, Nout, acc);
}

//! The input norm of a block (or the final norm): RMSNorm for the Llama family (b unused),
//! LayerNorm for GPT-2. at(off) gives the weights of the tensor at shard offset off.
template <class Weights>
void rollout_norm(model::GPTConfig const& cfg, Weights const& at, float* out, float const* in, std::size_t w, std::size_t b, int M) {
  int const C = cfg.n_embd;
  if (cfg.llama_family()) model::layers::rmsnorm_forward(out, nullptr, in, at(w), model::layers::RowSet{M, C, 1, std::size_t(C)}, cfg.rms_norm_eps);
  else model::layers::layernorm_forward(out, nullptr, nullptr, in, at(w), at(b), M, C);
}

//! The embedded rows x (N, C) of tokens tok at positions pos (GPT-2 adds wpe; the Llama family
//! has RoPE instead). A tied model under the vocabulary-parallel head holds wte's rows
//! [vocab_begin, vocab_end) only: each rank writes its tokens' rows (zeros elsewhere) and the TP
//! group sums them, so every rank gets the whole rows, bit for bit.
template <class Weights>
void rollout_embed(model::GPTConfig const& cfg, model::ShardLayout const& shard, comm::Communicator* comm, Weights const& at,
                   std::int32_t const* tok, std::int32_t const* pos, std::size_t N, float* x) {
  int const C = cfg.n_embd;
  if (shard.split_embedding()) {
    model::layers::embedding_slice_forward(x, tok, at(shard.wte), shard.vocab_begin(), shard.vocab_end(), int(N), C);
    comm->allreduce_sum(std::span<float>(x, N * C));
    if (!cfg.llama_family()) model::layers::add_positions(x, pos, at(shard.wpe), int(N), C);
  } else if (cfg.llama_family()) {
    model::layers::embedding_forward(x, tok, at(shard.wte), int(N), C);
  } else {
    model::layers::encoder_forward(x, tok, pos, at(shard.wte), at(shard.wpe), int(N), C);
  }
}

//! The L decoder layers over N token rows at positions pos: x (in buf) holds the embedded rows on
//! entry and the last layer's output on return. After each layer's q|k|v projection (and, for
//! the Llama family, q/k norm and RoPE at the rows' positions, so a cached key keeps its rotation)
//! store(l, qkv, ql) writes the rows' keys and values into the cache, then attend(l, atty, qkv, ql)
//! fills atty from it. Tensor parallel: this rank's heads and MLP columns; the two row-parallel
//! products are summed over the TP group (comm) and x stays replicated. one_row: every product sums
//! each row on its own (products_nt), so a row's numbers do not depend on the rows batched with it.
template <class Weights, class Store, class Attend>
void rollout_layers(model::GPTConfig const& cfg, model::ShardLayout const& shard, comm::Communicator* comm, Weights const& at,
                    std::int32_t const* pos, std::size_t N, RolloutLayerBuffers const& buf, float const* rope_cos,
                    float const* rope_sin, bool one_row, Store&& store, Attend&& attend) {
  bool const llama = cfg.llama_family();
  int const C = cfg.n_embd, NH = shard.local_heads(), hs = cfg.head_dim();
  int const Cl = shard.local_embd(), F = shard.local_ff(), NKV = shard.local_kv_heads();
  int const QKV = (NH + 2 * NKV) * hs;  // floats of a token's q|k|v row (3 Cl for GPT-2)
  float const eps = cfg.rms_norm_eps;
  model::layers::QKVLayout const ql = llama ? model::layers::QKVLayout::grouped(NH, NKV, hs) : model::layers::QKVLayout::gpt2(Cl, NH);
  bool const tp = shard.shard().size > 1;
  float* const x = buf.x;
  auto opt = [&](std::size_t off) -> float const* { return off == model::ParamLayout::none ? nullptr : at(off); };
  // x (N, C) += bias + (the sum over the TP group of) inp (N, K) w (K, C): a row-parallel product
  auto row_parallel = [&](float const* inp, float const* w, float const* b, int K) {
    if (!tp) {
      products_nn(one_row, x, inp, w, b, int(N), K, C, true);
      return;
    }
    products_nn(one_row, buf.part, inp, w, nullptr, int(N), K, C, false);
    comm->allreduce_sum(std::span<float>(buf.part, N * C));
    for (std::size_t i = 0; i < N; ++i)
      for (int c = 0; c < C; ++c) x[i * C + c] = (x[i * C + c] + (b ? b[c] : 0.0f)) + buf.part[i * C + c];
  };
  for (int l = 0; l < cfg.n_layer; ++l) {
    auto const& P = shard.layers[std::size_t(l)];
    rollout_norm(cfg, at, buf.ln, x, P.ln1_w, P.ln1_b, int(N));
    products_nt(one_row, buf.qkv, buf.ln, at(P.qkv_w), opt(P.qkv_b), int(N), C, QKV);
    if (llama) {
      float* const qkv = buf.qkv;
      int const Q = NH * hs;
      if (cfg.qk_norm) {
        model::layers::rmsnorm_forward(qkv, nullptr, qkv, at(P.q_norm), model::layers::RowSet{std::int64_t(N) * NH, hs, NH, std::size_t(QKV)}, eps);
        model::layers::rmsnorm_forward(qkv + Q, nullptr, qkv + Q, at(P.k_norm),
                                       model::layers::RowSet{std::int64_t(N) * NKV, hs, NKV, std::size_t(QKV)}, eps);
      }
      model::layers::rope_apply(qkv, pos, std::int64_t(N), NH, hs, std::size_t(QKV), rope_cos, rope_sin, false);
      model::layers::rope_apply(qkv + Q, pos, std::int64_t(N), NKV, hs, std::size_t(QKV), rope_cos, rope_sin, false);
    }
    store(l, static_cast<float const*>(buf.qkv), ql);
    attend(l, buf.atty, static_cast<float const*>(buf.qkv), ql);
    row_parallel(buf.atty, at(P.proj_w), opt(P.proj_b), Cl);
    rollout_norm(cfg, at, buf.ln, x, P.ln2_w, P.ln2_b, int(N));
    if (llama) {
      products_nt(one_row, buf.fch, buf.ln, at(P.fc_w), opt(P.fc_b), int(N), C, 2 * F);
      model::layers::swiglu_forward(buf.act, buf.fch, std::int64_t(N), F);
    } else {
      products_nt(one_row, buf.fch, buf.ln, at(P.fc_w), at(P.fc_b), int(N), C, F);
      model::layers::gelu_forward(buf.fch, buf.fch, std::int64_t(N) * F);
    }
    row_parallel(buf.act, at(P.fcproj_w), opt(P.fcproj_b), F);
  }
}

}  // namespace rlflow::engine::detail
