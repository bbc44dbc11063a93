// rlflow/model/cuda/gpt_layers.cuh: the device building blocks of the built-in GPT's CUDA
// engines (nvcc only): the error-check macro RLFLOW_CUDA_CHECK, a grow-only device buffer,
// row-major cuBLAS wrappers, and own kernels for the embedding, LayerNorm (keeping mean / rstd),
// RMSNorm (keeping rstd), RoPE, bias rows, GELU, SwiGLU, and the one attention of the CUDA engines
// (attend_one_at: one block per query, keys found through callables; attend_one over a strided
// run is what the training forward's attention_probs_kernel and the static rollout's
// kv_attention_kernel call, paged_attention_kernel reads KV blocks through a block table), over
// either family's q|k|v rows (layers::QKVLayout: GPT-2's head-major rows or the Llama family's
// grouped-query rows). The KV caches: a slab per row (kv_store_kernel) or engine::BlockPool's
// blocks (paged_kv_store_kernel).
// Same math as the CPU layer functions (model/layers.hpp), which are the reference.
// Defines rlflow::kernels::cuda::model::layers. Does not own a model (engine/cuda/ does).
// Letters: N rows, C width, NH query heads, NKV key/value heads, hs head width, S cache slots,
// V vocabulary, F the MLP width, bs a KV block's positions.
#pragma once
#if !defined(__CUDACC__)
#error "rlflow/model/cuda/gpt_layers.cuh needs nvcc; build this translation unit as a .cu file"
#endif
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cub/block/block_reduce.cuh>  // cub::BlockReduce
#include <cuda/functional>             // ::cuda::maximum
#include <algorithm>                   // std::min, std::max
#include <cstddef>
#include <cstdint>
#include <utility>                     // std::exchange
#include <vector>

#include <rlflow/core/config.hpp>  // RLFLOW_KERNEL
#include <rlflow/core/device_memory.hpp>  // device_memory_counter, device_memory_fix, gib
#include <rlflow/core/error.hpp>   // error, msg
#include <rlflow/model/layers.hpp>  // QKVLayout, RowSet (host and device), rope_tables
#include <rlflow/model/param_layout.hpp>  // GPTConfig, rope_inv_freq

namespace rlflow::kernels::cuda::model::layers {

//! Throws rlflow::error naming the failed call, the place and the CUDA error.
inline void check(cudaError_t e, char const* what, char const* file, int line) {
  if (e != cudaSuccess)
    throw ::rlflow::error(msg("rlflow (cuda model): ", what, " failed at ", file, ":", line, ": ", cudaGetErrorName(e), " (",
                              cudaGetErrorString(e), ")"));
}
//! Throws rlflow::error naming the failed cuBLAS call and its status.
inline void check(cublasStatus_t s, char const* what, char const* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw ::rlflow::error(msg("rlflow (cuda model): ", what, " failed at ", file, ":", line, " with cuBLAS status ", int(s)));
}

}  // namespace rlflow::kernels::cuda::model::layers

#ifndef RLFLOW_MODEL_KERNEL
//! A kernel defined in a header that several translation units of one program include: internal
//! linkage (static) so each unit keeps its own copy and the link sees no duplicate symbols.
#define RLFLOW_MODEL_KERNEL static __global__
#endif

#ifndef RLFLOW_CUDA_CHECK
//! Evaluates a CUDA runtime or cuBLAS call and throws rlflow::error when it fails.
#define RLFLOW_CUDA_CHECK(expr) ::rlflow::kernels::cuda::model::layers::check((expr), #expr, __FILE__, __LINE__)
#endif

namespace rlflow::kernels::cuda::model::layers {

using ::rlflow::model::layers::QKVLayout;
using ::rlflow::model::layers::RowSet;

constexpr int block = 256;
using reduce_f = cub::BlockReduce<float, block>;

//! A grow-only device allocation (cudaMalloc / cudaFree, so release() really returns memory).
//! ensure() reallocates only for a larger size; the old contents are not kept. Callers make
//! sure no kernel still uses the old block (the engines synchronise their stream per call).
class device_buffer {
 public:
  device_buffer() = default;
  device_buffer(device_buffer const&) = delete;
  device_buffer& operator=(device_buffer const&) = delete;
  ~device_buffer() { release(); }
  template <class T>
  T* ensure(std::size_t count) {
    std::size_t const bytes = std::max<std::size_t>(count * sizeof(T), 16);
    if (bytes > bytes_) {
      release();
      RLFLOW_CUDA_CHECK(cudaGetDevice(&device_));
      cudaError_t const e = cudaMalloc(&p_, bytes);
      if (e != cudaSuccess) {
        p_ = nullptr;
        cudaGetLastError();  // clear the sticky-free allocation error so the caller can recover
        std::size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        throw ::rlflow::error(msg("rlflow (cuda): allocating a device buffer of ", bytes, " bytes (",
                                  double(bytes) / ::rlflow::gib, " GiB) on device ", device_, " failed: ", cudaGetErrorName(e),
                                  " (", double(free_b) / ::rlflow::gib, " GiB free of ", double(total_b) / ::rlflow::gib,
                                  " GiB); ", ::rlflow::device_memory_fix));
      }
      bytes_ = bytes;
      auto& c = ::rlflow::device_memory_counter(device_);
      c.reserve(std::int64_t(bytes));
      c.use(std::int64_t(bytes));
    }
    return static_cast<T*>(p_);
  }
  template <class T>
  T* get() const { return static_cast<T*>(p_); }
  void release() noexcept {
    if (p_) {
      cudaFree(p_);
      auto& c = ::rlflow::device_memory_counter(device_);
      c.unuse(std::int64_t(bytes_));
      c.unreserve(std::int64_t(bytes_));
    }
    p_ = nullptr;
    bytes_ = 0;
  }
  std::size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
  int device_ = 0;
};

//! The Llama family's RoPE cos / sin tables on the device: the CPU engines' tables
//! (layers::rope_tables of model::rope_inv_freq, rounded to float on the host), so a rotation
//! equals the CPU's to rounding (the device contracts it into FMAs). Grown on demand to the
//! positions asked for; the callers synchronise their stream between calls (growing frees the
//! old block).
class rope_device_tables {
 public:
  //! Makes rows [0, positions) available (uploads on growth; synchronises 'st' then).
  void ensure(::rlflow::model::GPTConfig const& cfg, int positions, cudaStream_t st) {
    if (positions <= rows_) return;
    if (inv_.empty()) inv_ = ::rlflow::model::rope_inv_freq(cfg);
    ::rlflow::model::layers::rope_tables(cos_, sin_, inv_, positions);
    half_ = inv_.size();
    std::size_t const n = std::size_t(positions) * half_;
    float* d = buf_.ensure<float>(2 * n);
    RLFLOW_CUDA_CHECK(cudaMemcpyAsync(d, cos_.data(), n * sizeof(float), cudaMemcpyHostToDevice, st));
    RLFLOW_CUDA_CHECK(cudaMemcpyAsync(d + n, sin_.data(), n * sizeof(float), cudaMemcpyHostToDevice, st));
    RLFLOW_CUDA_CHECK(cudaStreamSynchronize(st));
    rows_ = positions;
  }
  float const* cos() const { return buf_.get<float>(); }
  float const* sin() const { return buf_.get<float>() + std::size_t(rows_) * half_; }
  void release() noexcept {
    buf_.release();
    rows_ = 0;
  }
  std::size_t bytes() const { return buf_.bytes(); }

 private:
  device_buffer buf_;
  std::vector<double> inv_;
  std::vector<float> cos_, sin_;
  std::size_t half_ = 0;
  int rows_ = 0;
};

//! The most keys attend_one_at's callers take: 48 KiB of shared memory (the default limit of a
//! block) hold the scores as floats, less 256 bytes for the kernels' static shared memory (64 at
//! most). Bounds S of the static cache (kv_attention_kernel), the training span
//! (attention_probs_kernel) and a paged sequence's length (paged_attention_kernel: pos + 1).
constexpr int max_attention_keys = (48 * 1024 - 256) / int(sizeof(float));

//! Grid size for a grid-stride loop over n elements.
inline unsigned grid_for(std::int64_t n, int threads = 256) {
  return unsigned(std::max<std::int64_t>(1, std::min<std::int64_t>((n + threads - 1) / threads, 8192)));
}

// ---------------------------------------------------------------------------------------------
// row-major matrix products through column-major cuBLAS (a row-major X is X^T column-major)

//! out (M, N) = beta out + inp (M, K) W^T, W (N, K) ('nt': qkv, fc, LM head).
inline void gemm_nt(cublasHandle_t h, float* out, float const* inp, float const* w, int M, int K, int N, float beta) {
  float const one = 1.0f;
  RLFLOW_CUDA_CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, w, K, inp, K, &beta, out, N));
}
//! out (M, N) = beta out + inp (M, K) W, W (K, N) ('nn': attn proj, mlp proj).
inline void gemm_nn(cublasHandle_t h, float* out, float const* inp, float const* w, int M, int K, int N, float beta) {
  float const one = 1.0f;
  RLFLOW_CUDA_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, w, N, inp, K, &beta, out, N));
}

// ---------------------------------------------------------------------------------------------
// kernels

//! out (N, C) = wte[ids[n]] + wpe[pos[n]], or wte[ids[n]] when wpe is null (the Llama family:
//! rotary positions); one block per row.
RLFLOW_MODEL_KERNEL void encoder_kernel(float* out, std::int32_t const* ids, std::int32_t const* pos, float const* wte,
                                  float const* wpe, int C) {
  std::size_t const n = blockIdx.x;
  for (int c = threadIdx.x; c < C; c += blockDim.x)
    out[n * C + c] = wpe ? wte[std::size_t(ids[n]) * C + c] + wpe[std::size_t(pos[n]) * C + c] : wte[std::size_t(ids[n]) * C + c];
}

//! out (N, C) = (x - mean) * rstd * w + b (eps 1e-5, two passes as the CPU); one block of
//! 'block' threads per row; mean / rstd (N) stored when not null.
RLFLOW_MODEL_KERNEL void layernorm_kernel(float* out, float* mean, float* rstd, float const* inp, float const* w,
                                    float const* b, int C) {
  __shared__ typename reduce_f::TempStorage tmp;
  __shared__ float s_mean, s_rstd;
  std::size_t const row = blockIdx.x;
  float const* x = inp + row * C;
  float s = 0.0f;
  for (int c = threadIdx.x; c < C; c += block) s += x[c];
  float const tot = reduce_f(tmp).Sum(s);
  if (threadIdx.x == 0) s_mean = tot / float(C);
  __syncthreads();
  float const m = s_mean;
  float v = 0.0f;
  for (int c = threadIdx.x; c < C; c += block) v += (x[c] - m) * (x[c] - m);
  float const vt = reduce_f(tmp).Sum(v);  // the barrier above separates the two uses of tmp
  if (threadIdx.x == 0) s_rstd = 1.0f / sqrtf(vt / float(C) + 1e-5f);
  __syncthreads();
  float const r = s_rstd;
  for (int c = threadIdx.x; c < C; c += block) out[row * C + c] = (x[c] - m) * r * w[c] + b[c];
  if (threadIdx.x == 0) {
    if (mean) mean[row] = m;
    if (rstd) rstd[row] = r;
  }
}

//! RMSNorm (the CUDA twin of model::layers::rmsnorm_forward): row r of rs at inp + rs.at(r), out
//! = w * (x * rstd), rstd = 1 / sqrt(mean(x^2) + eps) stored per row when not null; one block per
//! row. out may be inp (each element is read and written by the same thread, after the sum).
RLFLOW_MODEL_KERNEL void rmsnorm_kernel(float* out, float* rstd, float const* inp, float const* w, RowSet rs, float eps) {
  __shared__ typename reduce_f::TempStorage tmp;
  __shared__ float s_rstd;
  std::int64_t const r = blockIdx.x;
  std::size_t const at = rs.at(r);
  float const* x = inp + at;
  float ss = 0.0f;
  for (int c = threadIdx.x; c < rs.n; c += block) ss += x[c] * x[c];
  float const tot = reduce_f(tmp).Sum(ss);
  if (threadIdx.x == 0) s_rstd = 1.0f / sqrtf(tot / float(rs.n) + eps);
  __syncthreads();
  float const s = s_rstd;
  for (int c = threadIdx.x; c < rs.n; c += block) out[at + c] = w[c] * (x[c] * s);
  if (threadIdx.x == 0 && rstd) rstd[r] = s;
}

//! Rotary embedding in place (the twin of model::layers::rope_apply): 'heads' heads of hs floats
//! per token, token n's at x + n stride, rotated by position pos[n]'s angles from the (positions,
//! hs / 2) cos / sin tables (the CPU's tables, copied): (a, b) = (x_i, x_{i + hs/2}) -> (a c - b s,
//! b c + a s); inverse rotates by the negative angle (the backward). One thread per pair.
RLFLOW_MODEL_KERNEL void rope_kernel(float* x, std::int32_t const* pos, std::int64_t N, int heads, int hs, std::size_t stride,
                                     float const* cosv, float const* sinv, bool inverse) {
  int const h2 = hs / 2;
  std::int64_t const total = N * heads * h2;
  for (std::int64_t t = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; t < total; t += std::int64_t(gridDim.x) * blockDim.x) {
    int const i = int(t % h2);
    std::int64_t const nh = t / h2;
    int const h = int(nh % heads);
    std::int64_t const n = nh / heads;
    float* v = x + std::size_t(n) * stride + std::size_t(h) * hs;
    std::size_t const tab = std::size_t(pos[n]) * h2 + i;
    float const c = cosv[tab], sn = inverse ? -sinv[tab] : sinv[tab];
    float const a = v[i], b = v[i + h2];
    v[i] = a * c - b * sn;
    v[i + h2] = b * c + a * sn;
  }
}

//! SwiGLU (the twin of model::layers::swiglu_forward): h (N, F) = silu(gate) * up from gu rows
//! [gate (F) | up (F)], silu(x) = x / (1 + e^-x).
RLFLOW_MODEL_KERNEL void swiglu_kernel(float* h, float const* gu, std::int64_t N, int F) {
  std::int64_t const total = N * F;
  for (std::int64_t t = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; t < total; t += std::int64_t(gridDim.x) * blockDim.x) {
    std::int64_t const n = t / F;
    int const f = int(t % F);
    float const g = gu[std::size_t(n) * 2 * F + f];
    h[t] = g / (1.0f + expf(-g)) * gu[std::size_t(n) * 2 * F + F + f];
  }
}

//! out (total = M N) = b[i % N] (b null: 0), or out += b when accumulate.
RLFLOW_MODEL_KERNEL void bias_rows_kernel(float* out, float const* b, std::int64_t total, int N, bool accumulate) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < total; i += std::int64_t(gridDim.x) * blockDim.x) {
    float const bv = b ? b[i % N] : 0.0f;
    out[i] = accumulate ? out[i] + bv : bv;
  }
}

//! out (n) = gelu(inp) (tanh approximation; out may alias inp).
RLFLOW_MODEL_KERNEL void gelu_kernel(float* out, float const* inp, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n; i += std::int64_t(gridDim.x) * blockDim.x) {
    float const x = inp[i];
    out[i] = 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
  }
}

//! Writes the keys and values of qkv rows (nr * n, L.row()) into the cache (B, NKV, S, hs) for
//! rows rows[i] at slots [s0, s0 + n); one block per (token, key/value head).
RLFLOW_MODEL_KERNEL void kv_store_kernel(float* kc, float* vc, float const* qkv, std::int32_t const* rows, int n, int s0, int S,
                                   QKVLayout L) {
  int const hs = L.hd, NKV = L.NKV;
  int const g = int(blockIdx.x % unsigned(NKV));
  std::size_t const tok = blockIdx.x / unsigned(NKV);
  int const i = int(tok / std::size_t(n)), k = int(tok % std::size_t(n));
  float const* row = qkv + tok * L.row();
  float const* ks = row + L.k(g * L.group());
  float const* vs = row + L.v(g * L.group());
  std::size_t const dst = ((std::size_t(rows[i]) * NKV + g) * S + std::size_t(s0 + k)) * hs;
  for (int d = threadIdx.x; d < hs; d += blockDim.x) {
    kc[dst + d] = ks[d];
    vc[dst + d] = vs[d];
  }
}

//! The attention scale 1 / sqrt(hs) of every CUDA attention kernel.
//! The CPU's expression, not rsqrtf: sqrtf and '/' round exactly (nvcc's defaults), so the bits equal the CPU's.
__host__ __device__ inline float attention_scale(int hs) { return 1.0f / sqrtf(float(hs)); }

//! One query against n_keys keys, by every thread of a block of 'block' threads (the CUDA twin of
//! model::layers::attend_one): scores q.k_j * scale over the keys j with is_valid(j), softmax
//! over them, y (hs) = sum_j p_j v_j, key j at key_at(j) and value j at value_at(j) (hs floats
//! each); a query with no valid key gets y = 0. probs, when not null, gets p_j for j < n_keys and
//! 0 up to probs_width. Scores in dynamic shared memory (n_keys floats). The one attention of the
//! CUDA engines: the callables say where the keys sit (a contiguous run: attend_one; KV blocks:
//! paged_attention_kernel), the arithmetic and its order are the same for every cache.
template <class KeyAt, class ValueAt, class IsValid>
__device__ inline void attend_one_at(float* y, float* probs, int probs_width, float const* q, KeyAt key_at, ValueAt value_at,
                                     IsValid is_valid, int n_keys, int hs, float scale) {
  extern __shared__ float sc[];
  __shared__ typename reduce_f::TempStorage tmp;
  __shared__ float s_max, s_sum;
  float m = -INFINITY;
  for (int j = threadIdx.x; j < n_keys; j += block) {
    float s = -INFINITY;
    if (is_valid(j)) {
      float const* kj = key_at(j);
      s = 0.0f;
      for (int d = 0; d < hs; ++d) s += q[d] * kj[d];
      s *= scale;
    }
    sc[j] = s;
    m = fmaxf(m, s);
  }
  float const mt = reduce_f(tmp).Reduce(m, ::cuda::maximum<>{});
  if (threadIdx.x == 0) s_max = mt;
  __syncthreads();
  float const mx = s_max;
  float e = 0.0f;
  for (int j = threadIdx.x; j < n_keys; j += block) {
    float const p = (mx == -INFINITY || sc[j] == -INFINITY) ? 0.0f : expf(sc[j] - mx);
    sc[j] = p;
    e += p;
  }
  float const et = reduce_f(tmp).Sum(e);
  if (threadIdx.x == 0) s_sum = et;
  __syncthreads();  // also publishes every sc[j] for the loops below
  float const inv = s_sum > 0.0f ? 1.0f / s_sum : 0.0f;
  if (probs)
    for (int j = threadIdx.x; j < probs_width; j += block) probs[j] = j < n_keys ? sc[j] * inv : 0.0f;
  for (int d = threadIdx.x; d < hs; d += block) {
    float acc = 0.0f;
    for (int j = 0; j < n_keys; ++j) acc += sc[j] * value_at(j)[d];
    y[d] = acc * inv;
  }
}

//! attend_one_at over keys in one strided run: key j at k + j k_stride, value j at v + j v_stride,
//! valid when valid[j] is set. The training forward (attention_probs_kernel) and the static
//! rollout (kv_attention_kernel) call it.
__device__ inline void attend_one(float* y, float* probs, int probs_width, float const* q, float const* k, std::size_t k_stride,
                                  float const* v, std::size_t v_stride, std::uint8_t const* valid, int n_keys, int hs, float scale) {
  attend_one_at(
      y, probs, probs_width, q, [k, k_stride](int j) { return k + std::size_t(j) * k_stride; },
      [v, v_stride](int j) { return v + std::size_t(j) * v_stride; }, [valid](int j) { return valid[j] != 0; }, n_keys, hs, scale);
}

//! Attention of the queries in qkv rows (nr * n, L.row()) against the cache (B, NKV, S, hs):
//! token (i, k) of row rows[i] sits at slot s0 + k and sees slots [0, s0 + k] whose valid (B, S)
//! flag is set (attend_one); query head h reads key/value head h / L.group(). y (nr * n, NH hs).
//! One block per (token, query head); dynamic shared memory: S floats.
RLFLOW_MODEL_KERNEL void kv_attention_kernel(float* y, float const* qkv, float const* kc, float const* vc,
                                       std::uint8_t const* valid, std::int32_t const* rows, int n, int s0, int S, QKVLayout L) {
  int const hs = L.hd, NH = L.NH;
  int const h = int(blockIdx.x % unsigned(NH));
  std::size_t const tok = blockIdx.x / unsigned(NH);
  int const i = int(tok / std::size_t(n)), k = int(tok % std::size_t(n));
  int const r = rows[i];
  std::size_t const base = (std::size_t(r) * L.NKV + h / L.group()) * S * std::size_t(hs);
  attend_one(y + (tok * NH + h) * std::size_t(hs), nullptr, 0, qkv + tok * L.row() + L.q(h), kc + base, std::size_t(hs),
             vc + base, std::size_t(hs), valid + std::size_t(r) * S, s0 + k + 1, hs, attention_scale(hs));
}

// ---------------------------------------------------------------------------------------------
// the paged KV cache (engine::BlockPool's layout on the device)
//
// The pool is one array of blocks of floats_per_block = L 2 NKV bs hs floats: block b holds, for
// every layer l, the keys (k = 0) then the values (k = 1) of bs consecutive positions of one
// sequence, (L, 2, NKV, bs, hs), so element (b, l, k, g, slot s, d) sits at
// b floats_per_block + ((l 2 + k) NKV + g) bs hs + s hs + d (BlockPool::kv(b, l, k, g) + s hs + d).
// A flat batch of N tokens of several sequences: token i is at position pos[i] of sequence
// w = seq_of[i], whose block table is tables[table_off[w] ..): position p lives in block
// tables[table_off[w] + p / bs], slot p % bs. Tables may share blocks (a cached common prefix).

//! Where the (bs, hs) keys (k = 0) or values (k = 1) of layer 'layer', key/value head g start
//! inside a block (BlockPool::kv's offset within block b).
__host__ __device__ inline std::size_t paged_head_offset(int layer, int k, int g, int NKV, int bs, int hs) {
  return ((std::size_t(layer) * 2 + k) * NKV + g) * std::size_t(bs) * hs;
}
//! Where position p's slot starts in the pool, less paged_head_offset: block table[p / bs], slot
//! p % bs.
__device__ inline std::size_t paged_slot_offset(std::int32_t const* table, int p, int bs, int hs, std::size_t floats_per_block) {
  return std::size_t(table[p / bs]) * floats_per_block + std::size_t(p % bs) * hs;
}

//! Writes the keys and values of N tokens' qkv rows (N, L.row()) into their slots of the pool, for
//! layer 'layer': token i's key / value head g (row qkv + i L.row(), at L.k(g L.group()) and
//! L.v(g L.group()), as kv_store_kernel) goes to slot pos[i] % bs of block
//! tables[table_off[seq_of[i]] + pos[i] / bs]. One block per (token, key/value head): grid N NKV.
//! The CUDA twin of the store lambda of engine::PagedEngine::forward.
RLFLOW_MODEL_KERNEL void paged_kv_store_kernel(float* pool, float const* qkv, std::int32_t const* pos, std::int32_t const* seq_of,
                                               std::int32_t const* tables, std::int32_t const* table_off, int layer, int bs,
                                               std::size_t floats_per_block, QKVLayout L) {
  int const hs = L.hd, NKV = L.NKV;
  int const g = int(blockIdx.x % unsigned(NKV));
  std::size_t const i = blockIdx.x / unsigned(NKV);
  std::int32_t const* table = tables + table_off[seq_of[i]];
  float const* row = qkv + i * L.row();
  float const* ks = row + L.k(g * L.group());
  float const* vs = row + L.v(g * L.group());
  std::size_t const at = paged_slot_offset(table, pos[i], bs, hs, floats_per_block);
  float* kd = pool + at + paged_head_offset(layer, 0, g, NKV, bs, hs);
  float* vd = pool + at + paged_head_offset(layer, 1, g, NKV, bs, hs);
  for (int d = threadIdx.x; d < hs; d += blockDim.x) {
    kd[d] = ks[d];
    vd[d] = vs[d];
  }
}

//! Attention of N tokens' queries (qkv rows (N, L.row())) against the pool, layer 'layer': token
//! i at position pos[i] of sequence seq_of[i] sees that sequence's positions [0, pos[i]] (all
//! valid: a sequence has no padding; n_keys = pos[i] + 1), read through its block table
//! (attend_one_at); query head h reads key/value head h / L.group(). y (N, NH hs). One block of
//! 'block' threads per (token, query head): grid N NH. Dynamic shared memory: the scores, pos[i]
//! + 1 floats, so callers pass max_i (pos[i] + 1) floats, which must not exceed
//! max_attention_keys (the longest sequence is bounded by it, as the static cache's S).
//! The keys of this call's own tokens must be in the pool first (paged_kv_store_kernel on the same
//! stream). The CUDA twin of engine::detail::attend_paged (same scale, keys in position order).
RLFLOW_MODEL_KERNEL void paged_attention_kernel(float* y, float const* qkv, float const* pool, std::int32_t const* pos,
                                                std::int32_t const* seq_of, std::int32_t const* tables,
                                                std::int32_t const* table_off, int layer, int bs, std::size_t floats_per_block,
                                                QKVLayout L) {
  int const hs = L.hd, NH = L.NH, NKV = L.NKV;
  int const h = int(blockIdx.x % unsigned(NH));
  std::size_t const i = blockIdx.x / unsigned(NH);
  int const g = h / L.group();
  std::int32_t const* table = tables + table_off[seq_of[i]];
  float const* kbase = pool + paged_head_offset(layer, 0, g, NKV, bs, hs);
  float const* vbase = pool + paged_head_offset(layer, 1, g, NKV, bs, hs);
  auto key_at = [=](int j) { return kbase + paged_slot_offset(table, j, bs, hs, floats_per_block); };
  auto value_at = [=](int j) { return vbase + paged_slot_offset(table, j, bs, hs, floats_per_block); };
  attend_one_at(y + (i * NH + h) * std::size_t(hs), nullptr, 0, qkv + i * L.row() + L.q(h), key_at, value_at,
                [](int) { return true; }, pos[i] + 1, hs, attention_scale(hs));
}

//! dst row r = src row idx[r] (C floats each: the training head's rows of the trunk's output, the
//! paged rollout's sampling rows); one block per row.
RLFLOW_MODEL_KERNEL void gather_rows_kernel(float* dst, float const* src, std::int32_t const* idx, int C) {
  float const* s = src + std::size_t(idx[blockIdx.x]) * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) dst[std::size_t(blockIdx.x) * C + c] = s[c];
}

//! dst (nr, C) = src row i * n + n - 1 (the last slot of each running sequence).
RLFLOW_MODEL_KERNEL void gather_last_kernel(float* dst, float const* src, int n, int C) {
  std::size_t const i = blockIdx.x;
  float const* s = src + (i * n + std::size_t(n - 1)) * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) dst[i * C + c] = s[c];
}

}  // namespace rlflow::kernels::cuda::model::layers
