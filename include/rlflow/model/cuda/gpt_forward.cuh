// rlflow/kernels/model/gpt_forward.cuh: the built-in GPT's forward on CUDA (nvcc only): cuBLAS
// for the matrix products and own kernels for the encoder, LayerNorm, GELU, masked causal
// attention and the fused log-softmax / log-prob / entropy head (CUB block reductions).
// Same flat parameter layout and the same math as the CPU engine (model/layers.hpp), which is
// its reference. Defines rlflow::kernels::cuda::model::GPTForward. Does not do the backward or
// the KV-cache decode yet (the CPU engines do; see docs/model.md, "CUDA status").
#pragma once
#if !defined(__CUDACC__)
#error "rlflow/kernels/model/gpt_forward.cuh needs nvcc; build this translation unit as a .cu file"
#endif
#include <cublas_v2.h>          // cublasSgemm
#include <cuda_runtime.h>
#include <cub/block/block_reduce.cuh>  // cub::BlockReduce
#include <cuda/functional>         // ::cuda::maximum
#include <cstdint>
#include <span>
#include <vector>

#include <rlflow/core/config.hpp>     // RLFLOW_KERNEL
#include <rlflow/core/error.hpp>      // error, shape_error
#include <rlflow/model/gpt.hpp>  // GPTConfig, ParamLayout

namespace rlflow::kernels::cuda::model {

namespace detail {
inline void check(cudaError_t e, char const* what) {
  if (e != cudaSuccess) throw ::rlflow::error(msg("rlflow GPTForward: ", what, " failed: ", cudaGetErrorString(e)));
}
inline void check(cublasStatus_t s, char const* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw ::rlflow::error(msg("rlflow GPTForward: ", what, " failed with cuBLAS status ", int(s)));
}
constexpr int block = 256;
using reduce_t = cub::BlockReduce<float, block>;

// out (N, C) = wte[ids] + wpe[pos]
RLFLOW_KERNEL void encoder_kernel(float* out, std::int32_t const* ids, std::int32_t const* pos, float const* wte,
                                  float const* wpe, int C) {
  int const n = blockIdx.x;
  for (int c = threadIdx.x; c < C; c += blockDim.x)
    out[std::size_t(n) * C + c] = wte[std::size_t(ids[n]) * C + c] + wpe[std::size_t(pos[n]) * C + c];
}

// one block per row: out = (x - mean) * rstd * w + b
RLFLOW_KERNEL void layernorm_kernel(float* out, float const* inp, float const* w, float const* b, int C) {
  __shared__ typename reduce_t::TempStorage tmp;
  __shared__ float s_mean, s_rstd;
  float const* x = inp + std::size_t(blockIdx.x) * C;
  float s = 0.0f;
  for (int c = threadIdx.x; c < C; c += block) s += x[c];
  float const tot = reduce_t(tmp).Sum(s);
  if (threadIdx.x == 0) s_mean = tot / C;
  __syncthreads();
  float v = 0.0f;
  for (int c = threadIdx.x; c < C; c += block) v += (x[c] - s_mean) * (x[c] - s_mean);
  float const vt = reduce_t(tmp).Sum(v);
  if (threadIdx.x == 0) s_rstd = rsqrtf(vt / C + 1e-5f);
  __syncthreads();
  for (int c = threadIdx.x; c < C; c += block) out[std::size_t(blockIdx.x) * C + c] = (x[c] - s_mean) * s_rstd * w[c] + b[c];
}

// out (M, N) = b (broadcast rows), or out += b when accumulate
RLFLOW_KERNEL void bias_rows_kernel(float* out, float const* b, std::int64_t total, int N, bool accumulate) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < total; i += std::int64_t(gridDim.x) * blockDim.x) {
    float const bv = b ? b[i % N] : 0.0f;
    out[i] = accumulate ? out[i] + bv : bv;
  }
}

RLFLOW_KERNEL void gelu_kernel(float* x, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n; i += std::int64_t(gridDim.x) * blockDim.x) {
    float const v = x[i];
    x[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
  }
}

// one block per (b, h, t) query; scores in dynamic shared memory (T floats)
RLFLOW_KERNEL void attention_kernel(float* y, float const* qkv, std::uint8_t const* valid, int T, int C, int NH) {
  extern __shared__ float sc[];
  __shared__ typename reduce_t::TempStorage tmp;
  __shared__ float s_max, s_sum;
  int const t = blockIdx.x % T, bh = blockIdx.x / T, h = bh % NH, b = bh / NH;
  int const hs = C / NH;
  float const scale = rsqrtf(float(hs));
  std::size_t const row3 = 3 * std::size_t(C);
  float const* base = qkv + std::size_t(b) * T * row3 + std::size_t(h) * 3 * hs;
  float const* q = base + std::size_t(t) * row3;
  float m = -INFINITY;
  for (int j = threadIdx.x; j <= t; j += block) {
    float s = -INFINITY;
    if (valid[std::size_t(b) * T + j]) {
      float const* k = base + std::size_t(j) * row3 + hs;
      s = 0.0f;
      for (int d = 0; d < hs; ++d) s += q[d] * k[d];
      s *= scale;
    }
    sc[j] = s;
    m = fmaxf(m, s);
  }
  float const mt = reduce_t(tmp).Reduce(m, ::cuda::maximum<>{});
  if (threadIdx.x == 0) s_max = mt;
  __syncthreads();
  float e = 0.0f;
  for (int j = threadIdx.x; j <= t; j += block) {
    float const p = s_max == -INFINITY || sc[j] == -INFINITY ? 0.0f : __expf(sc[j] - s_max);
    sc[j] = p;
    e += p;
  }
  float const et = reduce_t(tmp).Sum(e);
  if (threadIdx.x == 0) s_sum = et;
  __syncthreads();
  float const inv = s_sum > 0.0f ? 1.0f / s_sum : 0.0f;
  for (int d = threadIdx.x; d < hs; d += block) {
    float acc = 0.0f;
    for (int j = 0; j <= t; ++j) acc += sc[j] * base[std::size_t(j) * row3 + 2 * hs + d];
    y[(std::size_t(b) * T + t) * C + std::size_t(h) * hs + d] = acc * inv;
  }
}

// one block per row: log softmax(logits / temp)[target] and the entropy (verl logprobs_from_logits)
RLFLOW_KERNEL void logprob_kernel(float* logp, float* ent, float const* logits, std::int32_t const* targets, int V, float inv_t) {
  __shared__ typename reduce_t::TempStorage tmp;
  __shared__ float s_max, s_sum;
  float const* z = logits + std::size_t(blockIdx.x) * V;
  float m = -INFINITY;
  for (int v = threadIdx.x; v < V; v += block) m = fmaxf(m, z[v] * inv_t);
  float const mt = reduce_t(tmp).Reduce(m, ::cuda::maximum<>{});
  if (threadIdx.x == 0) s_max = mt;
  __syncthreads();
  float s = 0.0f, sz = 0.0f;
  for (int v = threadIdx.x; v < V; v += block) {
    float const e = __expf(z[v] * inv_t - s_max);
    s += e;
    sz += e * z[v] * inv_t;
  }
  float const st = reduce_t(tmp).Sum(s);
  if (threadIdx.x == 0) s_sum = st;
  __syncthreads();
  float const szt = reduce_t(tmp).Sum(sz);
  if (threadIdx.x == 0) {
    float const lse = s_max + logf(s_sum);
    logp[blockIdx.x] = z[targets[blockIdx.x]] * inv_t - lse;
    ent[blockIdx.x] = lse - szt / s_sum;
  }
}
}  // namespace detail

//! The GPT forward on one GPU: load_weights() once, then logits() / log_probs() on host batches.
class GPTForward {
 public:
  explicit GPTForward(::rlflow::model::GPTConfig const& cfg) : cfg_(cfg), lay_(cfg) {
    detail::check(cublasCreate(&blas_), "cublasCreate");
    detail::check(cudaMalloc(&params_, lay_.size() * sizeof(float)), "cudaMalloc(params)");
  }
  GPTForward(GPTForward const&) = delete;
  GPTForward& operator=(GPTForward const&) = delete;
  ~GPTForward() {
    cudaFree(params_);
    cudaFree(ws_);
    cublasDestroy(blas_);
  }

  //! Copies the flat parameter buffer (ParamLayout order) to the device.
  void load_weights(std::span<float const> flat) {
    if (flat.size() != lay_.size())
      throw shape_error(msg("rlflow GPTForward::load_weights: ", flat.size(), " floats for ", lay_.size(), " parameters"));
    detail::check(cudaMemcpy(params_, flat.data(), flat.size_bytes(), cudaMemcpyHostToDevice), "cudaMemcpy(weights)");
  }

  //! Logits (B, T, V) at every position, copied to host 'out'.
  void logits(std::int32_t const* ids, std::int32_t const* mask, int B, int T, float* out) {
    float* lg = run(ids, mask, B, T);
    detail::check(cudaMemcpy(out, lg, std::size_t(B) * T * cfg_.vocab_size * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy(logits)");
  }

  //! log_probs / entropy (B, R) as TrainingEngine::compute_log_prob (host outputs).
  void log_probs(std::int32_t const* ids, std::int32_t const* mask, int B, int T, int R, float temperature, float* logp, float* ent) {
    float* lg = run(ids, mask, B, T);
    int const V = cfg_.vocab_size;
    std::vector<std::int32_t> tg(std::size_t(B) * R);
    for (int b = 0; b < B; ++b)
      for (int j = 0; j < R; ++j) tg[std::size_t(b) * R + j] = ids[std::size_t(b) * T + T - R + j];
    // gather the head rows' logits: (B, R, V) from positions T-R-1 .. T-2
    float* head = scratch_head_;
    for (int b = 0; b < B; ++b)
      detail::check(cudaMemcpy(head + std::size_t(b) * R * V, lg + (std::size_t(b) * T + T - R - 1) * V, std::size_t(R) * V * sizeof(float),
                               cudaMemcpyDeviceToDevice), "cudaMemcpy(head)");
    detail::check(cudaMemcpy(d_targets_, tg.data(), tg.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice), "cudaMemcpy(targets)");
    detail::logprob_kernel<<<B * R, detail::block>>>(d_lp_, d_ent_, head, d_targets_, V, 1.0f / temperature);
    detail::check(cudaGetLastError(), "logprob_kernel");
    detail::check(cudaMemcpy(logp, d_lp_, std::size_t(B) * R * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy(log_probs)");
    detail::check(cudaMemcpy(ent, d_ent_, std::size_t(B) * R * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy(entropy)");
  }

 private:
  // row-major out (M, N) = inp (M, K) W^T, W (N, K)  ->  column-major out^T = W^T(op T) inp^T
  void gemm_nt(float* out, float const* inp, float const* w, int M, int K, int N) {
    float const one = 1.0f;
    detail::check(cublasSgemm(blas_, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, w, K, inp, K, &one, out, N), "cublasSgemm(nt)");
  }
  // row-major out (M, N) += inp (M, K) W, W (K, N)
  void gemm_nn(float* out, float const* inp, float const* w, int M, int K, int N) {
    float const one = 1.0f;
    detail::check(cublasSgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, w, N, inp, K, &one, out, N), "cublasSgemm(nn)");
  }
  void bias(float* out, float const* b, std::int64_t M, int N, bool acc) {
    std::int64_t const total = M * N;
    int const grid = int(std::min<std::int64_t>((total + 255) / 256, 4096));
    detail::bias_rows_kernel<<<grid, 256>>>(out, b, total, N, acc);
  }

  float* run(std::int32_t const* ids, std::int32_t const* mask, int B, int T) {
    if (T > cfg_.max_seq_len) throw shape_error(msg("rlflow GPTForward: T = ", T, " exceeds max_seq_len = ", cfg_.max_seq_len));
    int const C = cfg_.n_embd, V = cfg_.vocab_size, NH = cfg_.n_head;
    std::size_t const N = std::size_t(B) * T;
    std::vector<std::int32_t> pos(N);
    std::vector<std::uint8_t> valid(N);
    ::rlflow::model::detail::positions_from_mask(pos.data(), valid.data(), mask, B, T);
    // workspace: x, ln, qkv, atty, fch, logits, head, lp, ent + ids, pos, valid, targets
    std::size_t const floats = N * C * 3 + N * 3 * C + N * 4 * C + N * V * 2 + 2 * N;
    std::size_t const bytes = floats * sizeof(float) + N * (3 * sizeof(std::int32_t) + 1) + 256;
    if (bytes > ws_bytes_) {
      cudaFree(ws_);
      detail::check(cudaMalloc(&ws_, bytes), "cudaMalloc(workspace)");
      ws_bytes_ = bytes;
    }
    float* f = static_cast<float*>(ws_);
    float* x = f; f += N * C;
    float* ln = f; f += N * C;
    float* qkv = f; f += N * 3 * C;
    float* atty = f; f += N * C;
    float* fch = f; f += N * 4 * C;
    float* lg = f; f += N * V;
    scratch_head_ = f; f += N * V;
    d_lp_ = f; f += N;
    d_ent_ = f; f += N;
    auto* i32 = reinterpret_cast<std::int32_t*>(f);
    std::int32_t* d_ids = i32;
    std::int32_t* d_pos = i32 + N;
    d_targets_ = i32 + 2 * N;
    auto* d_valid = reinterpret_cast<std::uint8_t*>(i32 + 3 * N);
    detail::check(cudaMemcpy(d_ids, ids, N * 4, cudaMemcpyHostToDevice), "cudaMemcpy(ids)");
    detail::check(cudaMemcpy(d_pos, pos.data(), N * 4, cudaMemcpyHostToDevice), "cudaMemcpy(pos)");
    detail::check(cudaMemcpy(d_valid, valid.data(), N, cudaMemcpyHostToDevice), "cudaMemcpy(valid)");
    float const* P = params_;
    detail::encoder_kernel<<<unsigned(N), 128>>>(x, d_ids, d_pos, P + lay_.wte, P + lay_.wpe, C);
    for (auto const& W : lay_.layers) {
      detail::layernorm_kernel<<<unsigned(N), detail::block>>>(ln, x, P + W.ln1_w, P + W.ln1_b, C);
      bias(qkv, P + W.qkv_b, std::int64_t(N), 3 * C, false);
      gemm_nt(qkv, ln, P + W.qkv_w, int(N), C, 3 * C);
      detail::attention_kernel<<<unsigned(N * NH), detail::block, T * sizeof(float)>>>(atty, qkv, d_valid, T, C, NH);
      bias(x, P + W.proj_b, std::int64_t(N), C, true);
      gemm_nn(x, atty, P + W.proj_w, int(N), C, C);
      detail::layernorm_kernel<<<unsigned(N), detail::block>>>(ln, x, P + W.ln2_w, P + W.ln2_b, C);
      bias(fch, P + W.fc_b, std::int64_t(N), 4 * C, false);
      gemm_nt(fch, ln, P + W.fc_w, int(N), C, 4 * C);
      detail::gelu_kernel<<<4096, 256>>>(fch, std::int64_t(N) * 4 * C);
      bias(x, P + W.fcproj_b, std::int64_t(N), C, true);
      gemm_nn(x, fch, P + W.fcproj_w, int(N), 4 * C, C);
    }
    detail::layernorm_kernel<<<unsigned(N), detail::block>>>(ln, x, P + lay_.lnf_w, P + lay_.lnf_b, C);
    bias(lg, nullptr, std::int64_t(N), V, false);
    gemm_nt(lg, ln, P + lay_.wte, int(N), C, V);
    detail::check(cudaGetLastError(), "forward kernels");
    return lg;
  }

  ::rlflow::model::GPTConfig cfg_;
  ::rlflow::model::ParamLayout lay_;
  cublasHandle_t blas_ = nullptr;
  float* params_ = nullptr;
  void* ws_ = nullptr;
  std::size_t ws_bytes_ = 0;
  float *scratch_head_ = nullptr, *d_lp_ = nullptr, *d_ent_ = nullptr;
  std::int32_t* d_targets_ = nullptr;
};

}  // namespace rlflow::kernels::cuda::model
