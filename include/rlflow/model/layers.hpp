// rlflow/model/layers.hpp: the CPU layer functions of the built-in GPT (llm.c's train_gpt2.c,
// rewritten for masks, head-major QKV, and a KV cache). Defines encoder, layernorm, linear
// (BLAS sgemm), GELU, masked causal attention and the fused log-softmax / entropy head, each with
// its backward. Convention (as llm.c): parameter gradients accumulate (+=); activation gradients
// are overwritten (=) except layernorm's dinp, which accumulates into the residual gradient.
// OpenMP loops only split independent outputs, so results never depend on the thread count.
// Shapes: N rows (tokens), C width, V vocabulary, NH heads, hs = C / NH, T positions.
#pragma once
#include <cblas.h>      // cblas_sgemm (OpenBLAS)
#include <algorithm>    // std::max, std::min
#include <bit>          // std::bit_cast
#include <cmath>        // std::exp, std::log, std::tanh, std::sqrt
#include <cstddef>
#include <cstdint>
#include <cstring>      // std::memcpy, std::memset

#if defined(_OPENMP)
#define RLFLOW_MODEL_PRAGMA(x) _Pragma(#x)
//! An OpenMP 'parallel for' over independent outputs, taken only when 'cond' holds.
#define RLFLOW_MODEL_OMP_FOR_IF(cond) RLFLOW_MODEL_PRAGMA(omp parallel for schedule(static) if (cond))
#else
#define RLFLOW_MODEL_OMP_FOR_IF(cond)
#endif

namespace rlflow::model::layers {

//! Work (in floats touched) below which a loop stays on one thread. A fork costs about 3 us on an
//! idle 2-core machine but milliseconds when the other core is busy (measured: the demo-sized
//! train step ran 10x slower with 2 OpenMP threads on a loaded VM), so only large loops fork.
inline constexpr std::int64_t parallel_threshold = std::int64_t{1} << 21;

// ---------------------------------------------------------------------------------------------
// encoder: x = wte[token] + wpe[position]

//! out (N, C) = wte[ids[n]] + wpe[pos[n]].
inline void encoder_forward(float* out, std::int32_t const* ids, std::int32_t const* pos, float const* wte,
                            float const* wpe, int N, int C) {
  RLFLOW_MODEL_OMP_FOR_IF(std::int64_t{N} * C > parallel_threshold)
  for (int n = 0; n < N; ++n) {
    float* o = out + std::size_t(n) * C;
    float const* te = wte + std::size_t(ids[n]) * C;
    float const* pe = wpe + std::size_t(pos[n]) * C;
    for (int c = 0; c < C; ++c) o[c] = te[c] + pe[c];
  }
}

//! dwte[ids[n]] += dout[n], dwpe[pos[n]] += dout[n]; serial, so the summation order is fixed.
inline void encoder_backward(float* dwte, float* dwpe, float const* dout, std::int32_t const* ids,
                             std::int32_t const* pos, int N, int C) {
  for (int n = 0; n < N; ++n) {
    float const* d = dout + std::size_t(n) * C;
    float* te = dwte + std::size_t(ids[n]) * C;
    float* pe = dwpe + std::size_t(pos[n]) * C;
    for (int c = 0; c < C; ++c) {
      te[c] += d[c];
      pe[c] += d[c];
    }
  }
}

// ---------------------------------------------------------------------------------------------
// layernorm (eps 1e-5, as GPT-2)

//! out (N, C) = (x - mean) * rstd * w + b; mean / rstd (N) are stored when not null.
inline void layernorm_forward(float* out, float* mean, float* rstd, float const* inp, float const* w, float const* b,
                              int N, int C) {
  RLFLOW_MODEL_OMP_FOR_IF(std::int64_t{N} * C > parallel_threshold)
  for (int n = 0; n < N; ++n) {
    float const* x = inp + std::size_t(n) * C;
    float m = 0.0f;
    for (int c = 0; c < C; ++c) m += x[c];
    m /= static_cast<float>(C);
    float v = 0.0f;
    for (int c = 0; c < C; ++c) {
      float const d = x[c] - m;
      v += d * d;
    }
    v /= static_cast<float>(C);
    float const s = 1.0f / std::sqrt(v + 1e-5f);
    float* o = out + std::size_t(n) * C;
    for (int c = 0; c < C; ++c) o[c] = (x[c] - m) * s * w[c] + b[c];
    if (mean) mean[n] = m;
    if (rstd) rstd[n] = s;
  }
}

//! dinp (N, C) += d/dx; dw, db (C) += parameter gradients (a second, serial pass: fixed order).
inline void layernorm_backward(float* dinp, float* dw, float* db, float const* dout, float const* inp, float const* w,
                               float const* mean, float const* rstd, int N, int C) {
  RLFLOW_MODEL_OMP_FOR_IF(std::int64_t{N} * C > parallel_threshold)
  for (int n = 0; n < N; ++n) {
    float const* d = dout + std::size_t(n) * C;
    float const* x = inp + std::size_t(n) * C;
    float const m = mean[n], s = rstd[n];
    float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
    for (int c = 0; c < C; ++c) {
      float const norm = (x[c] - m) * s;
      float const dnorm = w[c] * d[c];
      dnorm_mean += dnorm;
      dnorm_norm_mean += dnorm * norm;
    }
    dnorm_mean /= static_cast<float>(C);
    dnorm_norm_mean /= static_cast<float>(C);
    float* di = dinp + std::size_t(n) * C;
    for (int c = 0; c < C; ++c) {
      float const norm = (x[c] - m) * s;
      float const dnorm = w[c] * d[c];
      di[c] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
    }
  }
  for (int n = 0; n < N; ++n) {
    float const* d = dout + std::size_t(n) * C;
    float const* x = inp + std::size_t(n) * C;
    float const m = mean[n], s = rstd[n];
    for (int c = 0; c < C; ++c) {
      db[c] += d[c];
      dw[c] += (x[c] - m) * s * d[c];
    }
  }
}

// ---------------------------------------------------------------------------------------------
// linear layers. Two storage orders, chosen for tensor parallelism (milestone 2):
//   'nt' (column-parallel: qkv, fc):     W is (N_out, K_in), out = x W^T + b; a rank's shard is rows
//   'nn' (row-parallel:   attn proj, fc proj): W is (K_in, N_out), out = x W + b; a rank's shard is rows

namespace detail {
inline void set_rows(float* out, float const* b, int M, int N, bool accumulate) {
  if (accumulate && !b) return;
  RLFLOW_MODEL_OMP_FOR_IF(std::int64_t{M} * N > parallel_threshold)
  for (int m = 0; m < M; ++m) {
    float* o = out + std::size_t(m) * N;
    if (accumulate)
      for (int n = 0; n < N; ++n) o[n] += b[n];
    else if (b)
      std::memcpy(o, b, sizeof(float) * std::size_t(N));
    else
      std::memset(o, 0, sizeof(float) * std::size_t(N));
  }
}
inline void add_column_sums(float* db, float const* dout, int M, int N) {
  for (int m = 0; m < M; ++m) {
    float const* d = dout + std::size_t(m) * N;
    for (int n = 0; n < N; ++n) db[n] += d[n];
  }
}
}  // namespace detail

//! out (M, N) = inp (M, K) W^T + b, W (N, K); with accumulate, out += (the residual connection).
inline void linear_nt_forward(float* out, float const* inp, float const* w, float const* b, int M, int K, int N,
                              bool accumulate = false) {
  detail::set_rows(out, b, M, N, accumulate);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, inp, K, w, K, 1.0f, out, N);
}
//! dinp (M, K) = dout W (skipped when null); dw (N, K) += dout^T inp; db (N) += column sums.
inline void linear_nt_backward(float* dinp, float* dw, float* db, float const* dout, float const* inp, float const* w,
                               int M, int K, int N) {
  if (dinp) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, K, N, 1.0f, dout, N, w, K, 0.0f, dinp, K);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, K, M, 1.0f, dout, N, inp, K, 1.0f, dw, K);
  if (db) detail::add_column_sums(db, dout, M, N);
}
//! out (M, N) = inp (M, K) W + b, W (K, N); with accumulate, out +=.
inline void linear_nn_forward(float* out, float const* inp, float const* w, float const* b, int M, int K, int N,
                              bool accumulate = false) {
  detail::set_rows(out, b, M, N, accumulate);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, inp, K, w, N, 1.0f, out, N);
}
//! dinp (M, K) = dout W^T; dw (K, N) += inp^T dout; db (N) += column sums.
inline void linear_nn_backward(float* dinp, float* dw, float* db, float const* dout, float const* inp, float const* w,
                               int M, int K, int N) {
  if (dinp) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, K, N, 1.0f, dout, N, w, N, 0.0f, dinp, K);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, N, M, 1.0f, inp, K, dout, N, 1.0f, dw, N);
  if (db) detail::add_column_sums(db, dout, M, N);
}

// ---------------------------------------------------------------------------------------------
// GELU, tanh approximation (GPT-2)

inline constexpr float gelu_scale = 0.7978845608028654f;  // sqrt(2 / pi)

//! tanh in float without a libm call, so GELU loops vectorise (std::tanh is a scalar call and
//! cost more than the layer's matrix products). tanh(x) = sign(x) (1 - e) / (1 + e), e = exp(-2|x|),
//! exp by Cephes' expf (range reduction by ln 2, degree-6 polynomial): about 2 ulp, absolute
//! error below 2e-7 everywhere.
inline float tanh_approx(float x) {
  std::uint32_t const xb = std::bit_cast<std::uint32_t>(x);
  std::uint32_t ab = xb & 0x7fffffffu;                          // |x|, clamped below in the integer
  ab = ab < 0x41200000u ? ab : 0x41200000u;                     // domain (no FP compare: vectorises) to 10,
  float const a = -2.0f * std::bit_cast<float>(ab);             // where tanh is 1 to float precision
  float const y = a * 1.44269504088896341f;                     // log2(e) * a, in [-28.9, 0]
  float const n = -static_cast<float>(static_cast<std::int32_t>(0.5f - y));  // round(y) for y <= 0
  float const r = a - n * 0.693359375f - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float const er = p * r * r + r + 1.0f;
  float const e = er * std::bit_cast<float>((static_cast<std::int32_t>(n) + 127) << 23);
  float const t = (1.0f - e) / (1.0f + e);
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(t) | (xb & 0x80000000u));
}

//! out (n) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
inline void gelu_forward(float* out, float const* inp, std::int64_t n) {
  RLFLOW_MODEL_OMP_FOR_IF(n > parallel_threshold)
  for (std::int64_t i = 0; i < n; ++i) {
    float const x = inp[i];
    out[i] = 0.5f * x * (1.0f + tanh_approx(gelu_scale * (x + 0.044715f * x * x * x)));
  }
}
//! dinp (n) = gelu'(inp) * dout; dinp may alias dout.
inline void gelu_backward(float* dinp, float const* inp, float const* dout, std::int64_t n) {
  RLFLOW_MODEL_OMP_FOR_IF(n > parallel_threshold)
  for (std::int64_t i = 0; i < n; ++i) {
    float const x = inp[i];
    float const cube = 0.044715f * x * x * x;
    float const t = tanh_approx(gelu_scale * (x + cube));
    float const sech2 = 1.0f - t * t;
    float const local = 0.5f * (1.0f + t) + x * 0.5f * sech2 * gelu_scale * (1.0f + 3.0f * 0.044715f * x * x);
    dinp[i] = local * dout[i];
  }
}

// ---------------------------------------------------------------------------------------------
// attention. QKV rows are head-major: for each token, head h holds [q_h | k_h | v_h] (3 hs floats)
// at offset 3 hs h, so a tensor-parallel rank's heads are one contiguous block of W's rows.

//! Dot product with 8 fixed partial sums: vectorises without -ffast-math and, being a fixed
//! order, gives the same bits on every call (training forward, KV-cache decode, any thread count).
inline float dot(float const* a, float const* b, int n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int d = 0;
  for (; d + 8 <= n; d += 8)
    for (int k = 0; k < 8; ++k) acc[k] += a[d + k] * b[d + k];
  for (; d < n; ++d) acc[0] += a[d] * b[d];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

//! One query against n_keys keys: probs[j] = softmax over valid keys of q.k_j * scale (0 for
//! invalid ones); y = sum_j probs[j] v_j. A query with no valid key gets y = 0. This is the one
//! routine both the training forward and the KV-cache decode call, so they agree bit for bit.
inline void attend_one(float* y, float* probs, float const* q, float const* k, std::size_t k_stride, float const* v,
                       std::size_t v_stride, std::uint8_t const* valid, int n_keys, int hs, float scale) {
  float maxv = -INFINITY;
  for (int j = 0; j < n_keys; ++j) {
    if (!valid[j]) { probs[j] = 0.0f; continue; }
    float const s = dot(q, k + std::size_t(j) * k_stride, hs) * scale;
    probs[j] = s;
    maxv = std::max(maxv, s);
  }
  for (int d = 0; d < hs; ++d) y[d] = 0.0f;
  if (maxv == -INFINITY) return;  // no valid key (a left pad before the prompt starts)
  float sum = 0.0f;
  for (int j = 0; j < n_keys; ++j) {
    if (!valid[j]) continue;
    float const e = std::exp(probs[j] - maxv);
    probs[j] = e;
    sum += e;
  }
  float const inv = 1.0f / sum;
  for (int j = 0; j < n_keys; ++j) {
    if (!valid[j]) continue;
    float const p = probs[j] * inv;
    probs[j] = p;
    float const* vj = v + std::size_t(j) * v_stride;
    for (int d = 0; d < hs; ++d) y[d] += p * vj[d];
  }
}

//! Masked causal self-attention over (B, T): y (B*T, C) with heads at [h hs, (h+1) hs);
//! probs (B, NH, T, T) kept for the backward; valid (B, T) marks real (non-pad) tokens.
inline void attention_forward(float* y, float* probs, float const* qkv, std::uint8_t const* valid, int B, int T, int C,
                              int NH) {
  int const hs = C / NH;
  float const scale = 1.0f / std::sqrt(static_cast<float>(hs));
  std::size_t const row3 = 3 * std::size_t(C);
  RLFLOW_MODEL_OMP_FOR_IF(std::int64_t{B} * NH * T * T * hs > parallel_threshold)
  for (int bh = 0; bh < B * NH; ++bh) {
    int const b = bh / NH, h = bh % NH;
    float const* base = qkv + std::size_t(b) * T * row3 + std::size_t(h) * 3 * hs;
    for (int t = 0; t < T; ++t) {
      float* p = probs + (std::size_t(bh) * T + t) * T;
      attend_one(y + (std::size_t(b) * T + t) * C + std::size_t(h) * hs, p, base + std::size_t(t) * row3,
                 base + hs, row3, base + 2 * hs, row3, valid + std::size_t(b) * T, t + 1, hs, scale);
      for (int j = t + 1; j < T; ++j) p[j] = 0.0f;
    }
  }
}

//! dqkv (B*T, 3C) = gradient of attention_forward given dy (B*T, C). Parallel over (b, h) only:
//! each pair owns its slice of dqkv, so no two threads add into the same float.
inline void attention_backward(float* dqkv, float const* dy, float const* qkv, float const* probs, int B, int T, int C,
                               int NH, float* scratch /* (B*NH, T) */) {
  int const hs = C / NH;
  float const scale = 1.0f / std::sqrt(static_cast<float>(hs));
  std::size_t const row3 = 3 * std::size_t(C);
  std::memset(dqkv, 0, sizeof(float) * std::size_t(B) * T * row3);
  RLFLOW_MODEL_OMP_FOR_IF(std::int64_t{B} * NH * T * T * hs > parallel_threshold)
  for (int bh = 0; bh < B * NH; ++bh) {
    int const b = bh / NH, h = bh % NH;
    float const* base = qkv + std::size_t(b) * T * row3 + std::size_t(h) * 3 * hs;
    float* dbase = dqkv + std::size_t(b) * T * row3 + std::size_t(h) * 3 * hs;
    float* dp = scratch + std::size_t(bh) * T;
    for (int t = 0; t < T; ++t) {
      float const* p = probs + (std::size_t(bh) * T + t) * T;
      float const* dyt = dy + (std::size_t(b) * T + t) * C + std::size_t(h) * hs;
      float const* q = base + std::size_t(t) * row3;
      float* dq = dbase + std::size_t(t) * row3;
      // dp_j = dy . v_j ; dv_j += p_j dy ; then the softmax backward ds_j = p_j (dp_j - sum p dp)
      float pdp = 0.0f;
      for (int j = 0; j <= t; ++j) {
        if (p[j] == 0.0f) { dp[j] = 0.0f; continue; }
        float const* vj = base + std::size_t(j) * row3 + 2 * hs;
        float* dvj = dbase + std::size_t(j) * row3 + 2 * hs;
        float const s = dot(dyt, vj, hs);
        for (int d = 0; d < hs; ++d) dvj[d] += p[j] * dyt[d];
        dp[j] = s;
        pdp += p[j] * s;
      }
      for (int j = 0; j <= t; ++j) {
        if (p[j] == 0.0f) continue;
        float const ds = p[j] * (dp[j] - pdp) * scale;
        float const* kj = base + std::size_t(j) * row3 + hs;
        float* dkj = dbase + std::size_t(j) * row3 + hs;
        for (int d = 0; d < hs; ++d) {
          dq[d] += ds * kj[d];
          dkj[d] += ds * q[d];
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// fused log-softmax head: log-prob of a target token and the entropy, from one row of logits.
// verl: the actor's logprobs_from_logits + entropy_from_logits (logits divided by temperature).

struct logprob_row {
  float log_prob;  //!< z[target] - logsumexp(z), z = logits / temperature
  float entropy;   //!< -sum p log p
  float lse;       //!< logsumexp(z), kept for the backward
};

//! One row: z = logits * inv_temperature; accumulates in double so the rollout and the training
//! engine, which both call this, agree to rounding of the logits alone.
inline logprob_row logprob_forward_row(float const* logits, int V, int target, float inv_temperature) {
  double m = -INFINITY;
  for (int v = 0; v < V; ++v) m = std::max(m, double(logits[v]) * inv_temperature);
  double s = 0.0, sz = 0.0;
  for (int v = 0; v < V; ++v) {
    double const z = double(logits[v]) * inv_temperature;
    double const e = std::exp(z - m);
    s += e;
    sz += e * z;
  }
  double const lse = m + std::log(s);
  double const ez = sz / s;  // E_p[z]
  return {float(double(logits[target]) * inv_temperature - lse), float(lse - ez), float(lse)};
}

//! dlogits (V) = gradient of (dlogp * log_prob + dent * entropy) w.r.t. the logits:
//! d log p_t / dz_k = [k = t] - p_k ;  dH / dz_k = -p_k (log p_k + H) ; then times 1/temperature.
inline void logprob_backward_row(float* dlogits, float const* logits, int V, int target, float inv_temperature,
                                 logprob_row const& fwd, float dlogp, float dent) {
  for (int v = 0; v < V; ++v) {
    double const logp = double(logits[v]) * inv_temperature - fwd.lse;
    double const p = std::exp(logp);
    double g = -dlogp * p - dent * p * (logp + fwd.entropy);
    if (v == target) g += dlogp;
    dlogits[v] = float(g * inv_temperature);
  }
}

//! One row's sum of squared probabilities, sum_v softmax(z)_v^2 with z = logits * inv_temperature,
//! from the row's log-sum-exp (logprob_row::lse): sum_v exp(2 (z_v - lse)), accumulated in double.
//! verl: vocab_parallel_sum_pi_squared / calculate_sum_pi_squared (the optimal token baseline's input).
inline float sum_pi_squared_row(float const* logits, int V, float inv_temperature, float lse) {
  double s = 0.0;
  for (int v = 0; v < V; ++v) s += std::exp(2.0 * (double(logits[v]) * inv_temperature - double(lse)));
  return float(s);
}

}  // namespace rlflow::model::layers
