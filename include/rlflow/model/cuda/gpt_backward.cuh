// rlflow/model/cuda/gpt_backward.cuh: the training-path kernels of the built-in GPT on CUDA
// (nvcc only): the attention forward that keeps its probabilities, the fused log-softmax head
// (log-prob, entropy, lse) and its backward, LayerNorm / RMSNorm / GELU / SwiGLU / attention /
// embedding backward (RoPE's is its inverse rotation, layers::rope_kernel), bias column sums, the
// cuBLAS products of the linear backward, the gradient norm and AdamW. Attention over either
// family's q|k|v rows (layers::QKVLayout).
// Same math as model/layers.hpp and engine/optimizer.hpp (the references). Parameter gradients
// accumulate (+=); LayerNorm's dinp accumulates into the residual gradient, as on the CPU.
// Reductions over rows are per-column loops (fixed order) except the embedding backward
// (atomicAdd: token ids repeat). Defines rlflow::kernels::cuda::model::train.
#pragma once
#if !defined(__CUDACC__)
#error "rlflow/model/cuda/gpt_backward.cuh needs nvcc; build this translation unit as a .cu file"
#endif
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cub/block/block_reduce.cuh>
#include <cuda/functional>  // ::cuda::maximum
#include <cstdint>

#include <rlflow/core/config.hpp>
#include <rlflow/model/cuda/gpt_layers.cuh>  // block, reduce_f, RLFLOW_CUDA_CHECK

namespace rlflow::kernels::cuda::model::train {

using layers::block;
using layers::QKVLayout;
using layers::reduce_f;
using layers::RowSet;
using reduce_d = cub::BlockReduce<double, block>;

// ---------------------------------------------------------------------------------------------
// linear backward (row-major, see layers::gemm_nt / gemm_nn)

//! 'nt' (W (N, K)): dinp (M, K) = dout (M, N) W (skipped when null); dw (N, K) += dout^T inp.
inline void linear_nt_backward(cublasHandle_t h, float* dinp, float* dw, float const* dout, float const* inp,
                               float const* w, int M, int K, int N) {
  float const one = 1.0f, zero = 0.0f;
  if (dinp) RLFLOW_CUDA_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, K, M, N, &one, w, K, dout, N, &zero, dinp, K));
  RLFLOW_CUDA_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, K, N, M, &one, inp, K, dout, N, &one, dw, K));
}
//! 'nn' (W (K, N)): dinp (M, K) = dout (M, N) W^T; dw (K, N) += inp^T dout.
inline void linear_nn_backward(cublasHandle_t h, float* dinp, float* dw, float const* dout, float const* inp,
                               float const* w, int M, int K, int N) {
  float const one = 1.0f, zero = 0.0f;
  RLFLOW_CUDA_CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, K, M, N, &one, w, N, dout, N, &zero, dinp, K));
  RLFLOW_CUDA_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, N, K, M, &one, dout, N, inp, K, &one, dw, N));
}

//! db (N) += column sums of dout (M, N); one thread per column, rows in order.
RLFLOW_MODEL_KERNEL void column_sums_kernel(float* db, float const* dout, int M, int N) {
  int const c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= N) return;
  float s = 0.0f;
  for (int m = 0; m < M; ++m) s += dout[std::size_t(m) * N + c];
  db[c] += s;
}

// ---------------------------------------------------------------------------------------------
// forward pieces the backward needs

//! Where the training forward's sequences sit among its N token rows: sequence s holds tokens
//! [cu[s], cu[s + 1]) (padded rows: s = b, T tokens each, some invalid; packed sequences
//! (use_remove_padding): the real tokens only, all valid), seq[i] is token i's sequence, its
//! attention probabilities (NH, n_s, n_s) start at off[s] floats, and valid[i] says whether token i
//! may be attended to. Padded rows give the (B, NH, T, T) layout (off[b] = b NH T T).
struct Segments {
  std::int32_t const* cu;
  std::int32_t const* seq;
  std::uint64_t const* off;
  std::uint8_t const* valid;
};

//! Masked causal attention of qkv rows (N, L.row()) within each sequence, keeping probs (0 for
//! keys after the query and invalid ones) (layers::attend_one); y (N, NH hs). One block per
//! (token, head); dynamic shared memory: the longest sequence's floats.
RLFLOW_MODEL_KERNEL void attention_probs_kernel(float* y, float* probs, float const* qkv, Segments sg, QKVLayout L) {
  int const NH = L.NH, hs = L.hd;
  int const h = int(blockIdx.x % unsigned(NH));
  std::size_t const i = blockIdx.x / unsigned(NH);
  int const s = sg.seq[i], c0 = sg.cu[s], n = sg.cu[s + 1] - c0, t = int(i) - c0;
  std::size_t const row = L.row(), C = std::size_t(NH) * hs;
  float const* base = qkv + std::size_t(c0) * row;
  layers::attend_one(y + i * C + std::size_t(h) * hs, probs + sg.off[s] + (std::size_t(h) * n + t) * n, n,
                     base + std::size_t(t) * row + L.q(h), base + L.k(h), row, base + L.v(h), row, sg.valid + c0, t + 1, hs,
                     layers::attention_scale(hs));
}

//! dst row idx[r] = src row r (H, C) (distinct indices; the other rows are left alone).
RLFLOW_MODEL_KERNEL void scatter_rows_kernel(float* dst, float const* src, std::int32_t const* idx, int C) {
  float* d = dst + std::size_t(idx[blockIdx.x]) * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) d[c] = src[std::size_t(blockIdx.x) * C + c];
}
//! dst[idx[k]] = src[k], k < n (the scored positions' values into a zeroed (B, R) column).
RLFLOW_MODEL_KERNEL void scatter_values_kernel(float* dst, float const* src, std::int32_t const* idx, int n) {
  for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) dst[idx[k]] = src[k];
}
//! dst[k] = src[idx[k]], k < n (a (B, R) column's values at the scored positions).
RLFLOW_MODEL_KERNEL void gather_values_kernel(float* dst, float const* src, std::int32_t const* idx, int n) {
  for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) dst[k] = src[idx[k]];
}

//! One block per row: z = logits * inv_t; log_prob = z[target] - lse, entropy = lse - E_p[z]
//! (double, as layers::logprob_forward_row); lse and entropy kept for the backward.
RLFLOW_MODEL_KERNEL void logprob_head_kernel(float* logp, float* ent, float* lse_out, float const* logits,
                                       std::int32_t const* targets, int V, float inv_t) {
  __shared__ typename reduce_d::TempStorage tmp;
  __shared__ double s_max;
  std::size_t const row = blockIdx.x;
  float const* z = logits + row * V;
  double m = -INFINITY;
  for (int v = threadIdx.x; v < V; v += block) m = fmax(m, double(z[v]) * inv_t);
  double const mt = reduce_d(tmp).Reduce(m, ::cuda::maximum<>{});
  if (threadIdx.x == 0) s_max = mt;
  __syncthreads();
  double const mx = s_max;
  double s = 0.0, sz = 0.0;
  for (int v = threadIdx.x; v < V; v += block) {
    double const zz = double(z[v]) * inv_t;
    double const e = exp(zz - mx);
    s += e;
    sz += e * zz;
  }
  double const st = reduce_d(tmp).Sum(s);
  __syncthreads();
  double const szt = reduce_d(tmp).Sum(sz);
  if (threadIdx.x == 0) {
    double const lse = mx + log(st);
    double const H = lse - szt / st;
    logp[row] = float(double(z[targets[row]]) * inv_t - lse);
    ent[row] = float(H);
    lse_out[row] = float(lse);
  }
}

//! One block per row: sum_v exp(2 (z_v - lse)), z = logits * inv_t, from logprob_head_kernel's lse
//! (double, as layers::sum_pi_squared_row). verl: calculate_sum_pi_squared.
RLFLOW_MODEL_KERNEL void sum_pi_squared_kernel(float* out, float const* logits, float const* lse, int V, float inv_t) {
  __shared__ typename reduce_d::TempStorage tmp;
  std::size_t const row = blockIdx.x;
  float const* z = logits + row * V;
  double const L = lse[row];
  double s = 0.0;
  for (int v = threadIdx.x; v < V; v += block) s += exp(2.0 * (double(z[v]) * inv_t - L));
  double const st = reduce_d(tmp).Sum(s);
  if (threadIdx.x == 0) out[row] = float(st);
}

//! dlogits (rows, V) of dlogp * log_prob + dent * entropy (dent may be null), as
//! layers::logprob_backward_row; one block per row.
RLFLOW_MODEL_KERNEL void logprob_head_backward_kernel(float* dlogits, float const* logits, std::int32_t const* targets,
                                                float const* lse, float const* ent, float const* dlogp,
                                                float const* dent, int V, float inv_t) {
  std::size_t const row = blockIdx.x;
  double const L = lse[row], H = ent[row], dl = dlogp[row], de = dent ? dent[row] : 0.0;
  int const tg = targets[row];
  for (int v = threadIdx.x; v < V; v += blockDim.x) {
    double const lp = double(logits[row * V + v]) * inv_t - L;
    double const p = exp(lp);
    double g = -dl * p - de * p * (lp + H);
    if (v == tg) g += dl;
    dlogits[row * V + v] = float(g * inv_t);
  }
}

// ---------------------------------------------------------------------------------------------
// backward kernels

//! dinp (N, C) += LayerNorm input gradient; one block per row.
RLFLOW_MODEL_KERNEL void layernorm_backward_kernel(float* dinp, float const* dout, float const* inp, float const* w,
                                             float const* mean, float const* rstd, int C) {
  __shared__ typename reduce_f::TempStorage tmp;
  __shared__ float s_a, s_b;
  std::size_t const n = blockIdx.x;
  float const* d = dout + n * C;
  float const* x = inp + n * C;
  float const m = mean[n], s = rstd[n];
  float a = 0.0f, bb = 0.0f;
  for (int c = threadIdx.x; c < C; c += block) {
    float const dn = w[c] * d[c];
    a += dn;
    bb += dn * (x[c] - m) * s;
  }
  float const at = reduce_f(tmp).Sum(a);
  __syncthreads();
  float const bt = reduce_f(tmp).Sum(bb);
  if (threadIdx.x == 0) {
    s_a = at / float(C);
    s_b = bt / float(C);
  }
  __syncthreads();
  float const dm = s_a, dnm = s_b;
  for (int c = threadIdx.x; c < C; c += block) {
    float const norm = (x[c] - m) * s;
    dinp[n * C + c] += (w[c] * d[c] - dm - norm * dnm) * s;
  }
}
//! dw, db (C) += LayerNorm parameter gradients; one thread per column, rows in order.
RLFLOW_MODEL_KERNEL void layernorm_param_backward_kernel(float* dw, float* db, float const* dout, float const* inp,
                                                   float const* mean, float const* rstd, int N, int C) {
  int const c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float sw = 0.0f, sb = 0.0f;
  for (int n = 0; n < N; ++n) {
    float const d = dout[std::size_t(n) * C + c];
    sb += d;
    sw += (inp[std::size_t(n) * C + c] - mean[n]) * rstd[n] * d;
  }
  dw[c] += sw;
  db[c] += sb;
}

//! dinp (n) = gelu'(inp) dout (tanh form; dinp may alias dout).
RLFLOW_MODEL_KERNEL void gelu_backward_kernel(float* dinp, float const* inp, float const* dout, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n; i += std::int64_t(gridDim.x) * blockDim.x) {
    float const x = inp[i];
    float const k = 0.7978845608028654f;
    float const t = tanhf(k * (x + 0.044715f * x * x * x));
    float const local = 0.5f * (1.0f + t) + x * 0.5f * (1.0f - t * t) * k * (1.0f + 3.0f * 0.044715f * x * x);
    dinp[i] = local * dout[i];
  }
}

//! Attention backward, part 1: one block per (token, head), token i at t of its sequence:
//! ds[t, j] = p_tj (dy_t . v_j - sum_j' p dp) * scale into dsc (probs' layout), and dq_t = sum_j
//! ds_tj k_j. Scratch: the longest sequence's floats of shared memory.
RLFLOW_MODEL_KERNEL void attention_backward_q_kernel(float* dqkv, float* dsc, float const* dy, float const* qkv,
                                               float const* probs, Segments sg, QKVLayout L) {
  extern __shared__ float sd[];
  __shared__ typename reduce_f::TempStorage tmp;
  __shared__ float s_pdp;
  int const NH = L.NH, hs = L.hd;
  int const h = int(blockIdx.x % unsigned(NH));
  std::size_t const i = blockIdx.x / unsigned(NH);
  int const s = sg.seq[i], c0 = sg.cu[s], n = sg.cu[s + 1] - c0, t = int(i) - c0;
  float const scale = layers::attention_scale(hs);
  std::size_t const row3 = L.row(), C = std::size_t(NH) * hs;
  float const* base = qkv + std::size_t(c0) * row3;
  std::size_t const prow = sg.off[s] + (std::size_t(h) * n + t) * n;
  float const* p = probs + prow;
  float const* dyt = dy + i * C + std::size_t(h) * hs;
  float acc = 0.0f;
  for (int j = threadIdx.x; j <= t; j += block) {
    float dp = 0.0f;
    if (p[j] != 0.0f) {
      float const* vj = base + std::size_t(j) * row3 + L.v(h);
      for (int d = 0; d < hs; ++d) dp += dyt[d] * vj[d];
    }
    sd[j] = dp;
    acc += p[j] * dp;
  }
  float const tot = reduce_f(tmp).Sum(acc);
  if (threadIdx.x == 0) s_pdp = tot;
  __syncthreads();
  float const pdp = s_pdp;
  float* dsr = dsc + prow;
  for (int j = threadIdx.x; j < n; j += block) {
    float const ds = j <= t ? p[j] * (sd[j] - pdp) * scale : 0.0f;
    if (j <= t) sd[j] = ds;
    dsr[j] = ds;
  }
  __syncthreads();
  float* dq = dqkv + i * row3 + L.q(h);
  float const* kb = base + L.k(h);
  for (int d = threadIdx.x; d < hs; d += block) {
    float a = 0.0f;
    for (int j = 0; j <= t; ++j) a += sd[j] * kb[std::size_t(j) * row3 + d];
    dq[d] = a;
  }
}
//! Attention backward, part 2: one block per (token, key/value head g), token at j of its
//! sequence: dk_j = sum over the group's query heads h (in order) of sum_{t >= j} ds^h_tj q^h_t,
//! dv_j = the same of p^h_tj dy^h_t (GPT-2: one head per group).
RLFLOW_MODEL_KERNEL void attention_backward_kv_kernel(float* dqkv, float const* dsc, float const* dy, float const* qkv,
                                                float const* probs, Segments sg, QKVLayout L) {
  int const NKV = L.NKV, hs = L.hd, G = L.group();
  int const g = int(blockIdx.x % unsigned(NKV));
  std::size_t const i = blockIdx.x / unsigned(NKV);
  int const s = sg.seq[i], c0 = sg.cu[s], n = sg.cu[s + 1] - c0, j = int(i) - c0;
  std::size_t const row3 = L.row(), C = std::size_t(L.NH) * hs;
  float const* base = qkv + std::size_t(c0) * row3;
  float* drow = dqkv + i * row3;
  float* dk = drow + L.k(g * G);
  float* dv = drow + L.v(g * G);
  for (int d = threadIdx.x; d < hs; d += blockDim.x) {
    float ak = 0.0f, av = 0.0f;
    for (int h = g * G; h < (g + 1) * G; ++h) {
      std::size_t const ph = sg.off[s] + std::size_t(h) * n * n;
      for (int t = j; t < n; ++t) {
        std::size_t const at = ph + std::size_t(t) * n + j;
        ak += dsc[at] * base[std::size_t(t) * row3 + L.q(h) + d];
        av += probs[at] * dy[(std::size_t(c0) + t) * C + std::size_t(h) * hs + d];
      }
    }
    dk[d] = ak;
    dv[d] = av;
  }
}

//! dwte[ids[n]] += g[n], dwpe[pos[n]] += g[n] (atomicAdd: ids and positions repeat); dwpe null:
//! the token embedding only (the Llama family).
RLFLOW_MODEL_KERNEL void encoder_backward_kernel(float* dwte, float* dwpe, float const* g, std::int32_t const* ids,
                                           std::int32_t const* pos, int C) {
  std::size_t const n = blockIdx.x;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    float const d = g[n * C + c];
    atomicAdd(dwte + std::size_t(ids[n]) * C + c, d);
    if (dwpe) atomicAdd(dwpe + std::size_t(pos[n]) * C + c, d);
  }
}

//! RMSNorm input gradient (the twin of model::layers::rmsnorm_backward): per row r of rs, with s
//! = rstd[r], k = s^3 sum_j d_j w_j x_j / n: dinp = d w s - x k, added (accumulate) or written.
//! One block per row; without accumulate dinp may be dout (each element is read and written by
//! the same thread, after the row's sum). Run rmsnorm_param_backward_kernel first when dinp is dout.
RLFLOW_MODEL_KERNEL void rmsnorm_backward_kernel(float* dinp, float const* dout, float const* inp, float const* w, float const* rstd,
                                           RowSet rs, bool accumulate) {
  __shared__ typename reduce_f::TempStorage tmp;
  __shared__ float s_k;
  std::int64_t const r = blockIdx.x;
  std::size_t const at = rs.at(r);
  float const* x = inp + at;
  float const* d = dout + at;
  float const s = rstd[r];
  float dot = 0.0f;
  for (int c = threadIdx.x; c < rs.n; c += block) dot += d[c] * w[c] * x[c];
  float const tot = reduce_f(tmp).Sum(dot);
  if (threadIdx.x == 0) s_k = s * s * s * tot / float(rs.n);
  __syncthreads();
  float const k = s_k;
  for (int c = threadIdx.x; c < rs.n; c += block) {
    float const v = d[c] * w[c] * s - x[c] * k;
    dinp[at + c] = accumulate ? dinp[at + c] + v : v;
  }
}
//! dw (rs.n) += sum over the rows of dout x rstd; one thread per column, rows in order.
RLFLOW_MODEL_KERNEL void rmsnorm_param_backward_kernel(float* dw, float const* dout, float const* inp, float const* rstd, RowSet rs) {
  int const c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= rs.n) return;
  float sw = 0.0f;
  for (std::int64_t r = 0; r < rs.rows; ++r) {
    std::size_t const at = rs.at(r) + std::size_t(c);
    sw += dout[at] * inp[at] * rstd[r];
  }
  dw[c] += sw;
}

//! SwiGLU backward (the twin of model::layers::swiglu_backward): dgu (N, 2F) from dh (N, F):
//! d gate = dh up silu'(gate), d up = dh silu(gate), silu'(x) = s (1 + x (1 - s)), s = sigmoid(x).
RLFLOW_MODEL_KERNEL void swiglu_backward_kernel(float* dgu, float const* gu, float const* dh, std::int64_t N, int F) {
  std::int64_t const total = N * F;
  for (std::int64_t t = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; t < total; t += std::int64_t(gridDim.x) * blockDim.x) {
    std::int64_t const n = t / F;
    int const f = int(t % F);
    std::size_t const at = std::size_t(n) * 2 * F + f;
    float const x = gu[at], u = gu[at + F], sg = 1.0f / (1.0f + expf(-x)), d = dh[t];
    dgu[at] = d * u * sg * (1.0f + x * (1.0f - sg));
    dgu[at + F] = d * x * sg;
  }
}

// ---------------------------------------------------------------------------------------------
// optimizer

//! partial[block] = sum of g^2 over a grid-stride slice, in double (host adds the partials in order).
RLFLOW_MODEL_KERNEL void sumsq_kernel(double* partial, float const* g, std::int64_t n) {
  __shared__ typename reduce_d::TempStorage tmp;
  double s = 0.0;
  for (std::int64_t i = blockIdx.x * std::int64_t(block) + threadIdx.x; i < n; i += std::int64_t(gridDim.x) * block)
    s += double(g[i]) * double(g[i]);
  double const t = reduce_d(tmp).Sum(s);
  if (threadIdx.x == 0) partial[blockIdx.x] = t;
}

//! One AdamW step as engine::AdamW::step (clip folded into the gradient, decoupled decay on masked entries).
RLFLOW_MODEL_KERNEL void adamw_kernel(float* p, float* m, float* v, float const* g, std::uint8_t const* decay, std::int64_t n,
                                float clip, float lr, float b1, float b2, float eps, float wd, float bc1, float bc2) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n; i += std::int64_t(gridDim.x) * blockDim.x) {
    float const gi = g[i] * clip;
    float const mi = b1 * m[i] + (1.0f - b1) * gi;
    float const vi = b2 * v[i] + (1.0f - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    float const mhat = mi / bc1, vhat = vi / bc2;
    float pi = p[i];
    if (decay[i]) pi -= lr * wd * pi;
    pi -= lr * mhat / (sqrtf(vhat) + eps);
    p[i] = pi;
  }
}

}  // namespace rlflow::kernels::cuda::model::train
