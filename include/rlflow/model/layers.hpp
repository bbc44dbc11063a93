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
#include <atomic>       // load-aware switch
#include <bit>          // std::bit_cast
#include <chrono>       // team_threads' refresh
#include <cmath>        // std::exp, std::log, std::tanh, std::sqrt
#include <cstddef>
#include <cstdint>
#include <cstdlib>      // std::getenv, std::atoi, getloadavg
#include <cstring>      // std::memcpy, std::memset
#include <span>
#include <thread>       // std::thread::hardware_concurrency
#include <vector>       // per-thread scratch

#include <rlflow/core/config.hpp>  // RLFLOW_HD (QKVLayout is shared with the CUDA kernels)

#if defined(_OPENMP)
#include <omp.h>  // omp_get_max_threads, omp_in_parallel
#define RLFLOW_MODEL_PRAGMA(x) _Pragma(#x)
//! An OpenMP 'parallel for' over independent outputs, taken only when 'cond' holds. The team is
//! layers::team_threads(): the worker's threads, fewer while other processes keep the cores busy
//! (a fork on a busy machine waits for descheduled threads at every join). Static schedule: a
//! dynamic one calls into libgomp for every iteration even on one thread (measured: 5% of the
//! one-thread forward).
#define RLFLOW_MODEL_OMP_FOR_IF(cond) \
  RLFLOW_MODEL_PRAGMA(omp parallel for schedule(static) if (cond) num_threads(::rlflow::model::layers::team_threads()))
#else
#define RLFLOW_MODEL_OMP_FOR_IF(cond)
#endif

//! Runtime dispatch for the hot loops: GCC on x86-64 compiles each marked function three times,
//! for the x86-64-v4 ISA level (AVX-512: GELU measured 1.45x faster than with AVX2, same bits),
//! the x86-64-v3 level (AVX2 + FMA) and the baseline (SSE2), and picks one at load time
//! by the CPU's features (an ifunc), so one binary runs everywhere and uses the wide units where
//! they exist. (Not "arch=haswell": GCC 12's dispatcher tests the CPU *model* for arch=<cpu>, so
//! an AMD EPYC got the baseline clone; ISA levels are tested by feature.)
//! Off under clang, nvcc and the sanitizers (ifunc resolvers run before their runtimes), or with
//! -DRLFLOW_NO_TARGET_CLONES. The marked functions hold whole loops (OpenMP bodies call them),
//! since an OpenMP region's outlined body would not inherit a clone's target.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) && !defined(RLFLOW_NO_TARGET_CLONES)
#define RLFLOW_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define RLFLOW_SIMD_CLONES
#endif

namespace rlflow::model::layers {

//! Work (in floats touched) below which a loop stays on one thread: a fork and join of an OpenMP
//! team costs a few microseconds, about the time of 2^16 floats of simple work on one core, so
//! smaller loops run on the calling thread. Loops whose elements cost more (an exp per element)
//! weigh their count up (see the callers). Results never depend on the thread count: the loops
//! split independent outputs, and every sum keeps its order.
inline constexpr std::int64_t parallel_threshold = std::int64_t{1} << 16;
//! How much more an element costs than a float of simple work when the loop takes an exp per
//! element (the log-softmax head, sampling): such loops fork at parallel_threshold / exp_weight.
inline constexpr std::int64_t exp_weight = 16;

namespace detail {
//! Load-aware team sizes (team_threads): on unless the environment sets RLFLOW_LOAD_AWARE=0;
//! set_load_aware() changes it (tests that force a team).
inline std::atomic<bool>& load_aware() {
  static std::atomic<bool> on{[] {
    char const* e = std::getenv("RLFLOW_LOAD_AWARE");
    return !(e && e[0] == '0' && e[1] == '\0');
  }()};
  return on;
}
}  // namespace detail

//! On (the default; RLFLOW_LOAD_AWARE=0 in the environment turns it off): team_threads() lowers
//! the team while other processes keep the cores busy. Off: every parallel loop gets the worker's
//! full team (benchmarks on a dedicated machine, tests that must exercise the split).
inline void set_load_aware(bool on) { detail::load_aware().store(on, std::memory_order_relaxed); }

//! Threads for a parallel loop of the calling worker (1 without OpenMP or inside a parallel
//! region, where the layer functions run serially): its OpenMP team (omp_get_max_threads), less
//! the cores other processes keep busy. That is estimated from the 1-minute load average less
//! this team, read at most every 0.25 s per thread: on a shared 2-core VM at load 6 a 2-thread
//! team ran the GRPO step 3x slower than one thread (every join waited for a descheduled thread),
//! and on an idle machine the full team runs. Results never depend on it (independent outputs).
inline int team_threads() {
#if defined(_OPENMP)
  if (omp_in_parallel()) return 1;
  int const want = omp_get_max_threads();
  if (want <= 1 || !detail::load_aware().load(std::memory_order_relaxed)) return want;
  thread_local std::int64_t next_ns = 0;
  thread_local int cached = 1;
  std::int64_t const now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::steady_clock::now().time_since_epoch()).count();
  if (now >= next_ns) {
    next_ns = now + 250'000'000;
    static int const cores = std::max(1, int(std::thread::hardware_concurrency()));
    double la[1] = {0.0};
    double const others = getloadavg(la, 1) == 1 ? std::max(0.0, la[0] - want) : 0.0;
    cached = std::clamp(int(double(cores) - others + 0.5), 1, want);
  }
  return cached;
#else
  return 1;
#endif
}

//! The threads a worker of a pool of 'workers' per node uses by default: OMP_NUM_THREADS when set
//! (the user's choice), else the machine's cores shared evenly (at least 1).
inline int default_worker_threads(int workers) {
  if (char const* e = std::getenv("OMP_NUM_THREADS"); e && std::atoi(e) > 0) return std::atoi(e);
  unsigned const hw = std::thread::hardware_concurrency();
  return std::max(1, int(hw == 0 ? 1u : hw) / std::max(1, workers));
}

//! Gives the calling (worker) thread an OpenMP team of 'threads' for the layer functions and
//! leaves OpenBLAS on one thread (process-wide), so the engine's products are split by that team
//! (sgemm below) and a single thread pool runs everything. Without OpenMP, a no-op.
inline void set_worker_threads(int threads) {
#if defined(_OPENMP)
  omp_set_num_threads(std::max(1, threads));
  openblas_set_num_threads(1);
#else
  (void)threads;
#endif
}

//! FLOPs (2 M N K) from which a product is split across the team: about 100 us of one core's
//! sgemm, well above the cost of the fork.
inline constexpr std::int64_t gemm_split_flops = std::int64_t{1} << 23;

//! The most blocks a split product is cut into (sgemm below): fixed, never taken from the team
//! size, so the blocks (and so the bits of the result) are the same for every thread count.
inline constexpr int gemm_split_blocks = 8;

//! Row-major C (M, N) = alpha op(A) op(B) + beta C, as cblas_sgemm, split across the calling
//! worker's OpenMP team when the product is large enough: row blocks of C (or column blocks when
//! M is small), each a single-threaded OpenBLAS call, so one thread pool (OpenMP) runs the whole
//! engine and OpenBLAS's own pool stays idle (run with OPENBLAS_NUM_THREADS=1: two pools spinning
//! on two cores made every stage slower; docs/model.md). The blocks depend on the shape only, not
//! on the team size (one thread runs them in turn), because OpenBLAS picks its kernel by shape:
//! on AVX-512 CPUs its small-matrix kernels sum in another order, so a block can differ in the
//! last bits from the same rows of one unsplit call. The result therefore does not depend on the
//! thread count, on any CPU; it equals one cblas_sgemm call within float rounding (bit for bit
//! where OpenBLAS has no shape-dependent kernels, e.g. its Haswell kernels).
inline void sgemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, float const* A, int lda,
                  float const* B, int ldb, float beta, float* C, int ldc) {
  if (2 * std::int64_t{M} * N * K < gemm_split_flops || openblas_get_num_threads() > 1) {
    cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  // every row block packs the whole of op(B) (K x N) and every column block the whole of op(A)
  // (M x K): cut the larger side, so the smaller operand is the one packed again (a decode-sized
  // batch against a wide weight is cut by columns)
  bool const by_rows = M >= N;
  int const extent = by_rows ? M : N;
  int const chunks = std::min(extent / 16 > 0 ? extent / 16 : 1, gemm_split_blocks);  // blocks of >= 16 rows / columns
  RLFLOW_MODEL_OMP_FOR_IF(team_threads() > 1)
  for (int c = 0; c < chunks; ++c) {
    int const a0 = int(std::int64_t{extent} * c / chunks), a1 = int(std::int64_t{extent} * (c + 1) / chunks);
    if (a1 <= a0) continue;
    if (by_rows) {
      float const* Ab = ta == CblasNoTrans ? A + std::size_t(a0) * lda : A + a0;
      cblas_sgemm(CblasRowMajor, ta, tb, a1 - a0, N, K, alpha, Ab, lda, B, ldb, beta, C + std::size_t(a0) * ldc, ldc);
    } else {
      float const* Bb = tb == CblasNoTrans ? B + a0 : B + std::size_t(a0) * ldb;
      cblas_sgemm(CblasRowMajor, ta, tb, M, a1 - a0, K, alpha, A, lda, Bb, ldb, beta, C + a0, ldc);
    }
  }
}

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

//! The token part of a vocabulary-parallel embedding (Megatron's VocabParallelEmbedding): out[n]
//! = wte_rows[ids[n] - v0] when ids[n] is in [v0, v1), zeros otherwise ('wte_rows' holds rows
//! [v0, v1)). Summed over the TP group it is wte[ids[n]] exactly (one nonzero term per element);
//! then add_positions completes encoder_forward's output, bit for bit.
inline void embedding_slice_forward(float* out, std::int32_t const* ids, float const* wte_rows, int v0, int v1, int N, int C) {
  RLFLOW_MODEL_OMP_FOR_IF(std::int64_t{N} * C > parallel_threshold)
  for (int n = 0; n < N; ++n) {
    float* o = out + std::size_t(n) * C;
    if (ids[n] >= v0 && ids[n] < v1) std::memcpy(o, wte_rows + std::size_t(ids[n] - v0) * C, sizeof(float) * std::size_t(C));
    else std::memset(o, 0, sizeof(float) * std::size_t(C));
  }
}
//! out[n] += wpe[pos[n]].
inline void add_positions(float* out, std::int32_t const* pos, float const* wpe, int N, int C) {
  RLFLOW_MODEL_OMP_FOR_IF(std::int64_t{N} * C > parallel_threshold)
  for (int n = 0; n < N; ++n) {
    float* o = out + std::size_t(n) * C;
    float const* pe = wpe + std::size_t(pos[n]) * C;
    for (int c = 0; c < C; ++c) o[c] += pe[c];
  }
}

//! dwte[ids[n]] += dout[n], dwpe[pos[n]] += dout[n]; serial, so the summation order is fixed.
//! Vocabulary-parallel ([v0, v1) given): 'dwte' holds rows [v0, v1) only and tokens outside them
//! add nothing to it (their owner adds them), in the same order.
inline void encoder_backward(float* dwte, float* dwpe, float const* dout, std::int32_t const* ids,
                             std::int32_t const* pos, int N, int C, int v0 = 0, int v1 = INT32_MAX) {
  for (int n = 0; n < N; ++n) {
    float const* d = dout + std::size_t(n) * C;
    float* pe = dwpe + std::size_t(pos[n]) * C;
    if (ids[n] < v0 || ids[n] >= v1) {
      for (int c = 0; c < C; ++c) pe[c] += d[c];
      continue;
    }
    float* te = dwte + std::size_t(ids[n] - v0) * C;
    for (int c = 0; c < C; ++c) {
      te[c] += d[c];
      pe[c] += d[c];
    }
  }
}

// ---------------------------------------------------------------------------------------------
// layernorm (eps 1e-5, as GPT-2)

namespace detail {

//! Sum with 8 fixed partial sums (vectorises without -ffast-math; the same bits on every call).
inline float sum8(float const* a, int n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int d = 0;
  for (; d + 8 <= n; d += 8)
    for (int k = 0; k < 8; ++k) acc[k] += a[d + k];
  for (; d < n; ++d) acc[0] += a[d];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

//! Rows [n0, n1) of layernorm_forward; the row sums use 8 partial sums (vector lanes).
RLFLOW_SIMD_CLONES inline void layernorm_forward_rows(float* out, float* mean, float* rstd, float const* inp,
                                                      float const* w, float const* b, int n0, int n1, int C) {
  for (int n = n0; n < n1; ++n) {
    float const* x = inp + std::size_t(n) * C;
    float const m = sum8(x, C) / static_cast<float>(C);
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int c = 0;
    for (; c + 8 <= C; c += 8)
      for (int k = 0; k < 8; ++k) acc[k] += (x[c + k] - m) * (x[c + k] - m);
    for (; c < C; ++c) acc[0] += (x[c] - m) * (x[c] - m);
    float const v = (((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]))) / static_cast<float>(C);
    float const s = 1.0f / std::sqrt(v + 1e-5f);
    float* o = out + std::size_t(n) * C;
    for (int i = 0; i < C; ++i) o[i] = (x[i] - m) * s * w[i] + b[i];
    if (mean) mean[n] = m;
    if (rstd) rstd[n] = s;
  }
}

//! Rows [n0, n1) of layernorm_backward's input gradient; with params, also dw, db (row order).
RLFLOW_SIMD_CLONES inline void layernorm_backward_rows(float* dinp, float* dw, float* db, float const* dout,
                                                       float const* inp, float const* w, float const* mean,
                                                       float const* rstd, int n0, int n1, int C, bool params) {
  for (int n = n0; n < n1; ++n) {
    float const* d = dout + std::size_t(n) * C;
    float const* x = inp + std::size_t(n) * C;
    float const m = mean[n], s = rstd[n];
    float a1[8] = {0, 0, 0, 0, 0, 0, 0, 0}, a2[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int c = 0;
    for (; c + 8 <= C; c += 8)
      for (int k = 0; k < 8; ++k) {
        float const dnorm = w[c + k] * d[c + k];
        a1[k] += dnorm;
        a2[k] += dnorm * ((x[c + k] - m) * s);
      }
    for (; c < C; ++c) {
      float const dnorm = w[c] * d[c];
      a1[0] += dnorm;
      a2[0] += dnorm * ((x[c] - m) * s);
    }
    float const dnorm_mean = (((a1[0] + a1[4]) + (a1[1] + a1[5])) + ((a1[2] + a1[6]) + (a1[3] + a1[7]))) / static_cast<float>(C);
    float const dnorm_norm_mean =
        (((a2[0] + a2[4]) + (a2[1] + a2[5])) + ((a2[2] + a2[6]) + (a2[3] + a2[7]))) / static_cast<float>(C);
    float* di = dinp + std::size_t(n) * C;
    if (params) {
      for (int i = 0; i < C; ++i) {
        float const norm = (x[i] - m) * s;
        di[i] += (w[i] * d[i] - dnorm_mean - norm * dnorm_norm_mean) * s;
        db[i] += d[i];
        dw[i] += norm * d[i];
      }
    } else {
      for (int i = 0; i < C; ++i) {
        float const norm = (x[i] - m) * s;
        di[i] += (w[i] * d[i] - dnorm_mean - norm * dnorm_norm_mean) * s;
      }
    }
  }
}

}  // namespace detail

//! out (N, C) = (x - mean) * rstd * w + b; mean / rstd (N) are stored when not null.
inline void layernorm_forward(float* out, float* mean, float* rstd, float const* inp, float const* w, float const* b,
                              int N, int C) {
  if (std::int64_t{N} * C <= parallel_threshold) {
    detail::layernorm_forward_rows(out, mean, rstd, inp, w, b, 0, N, C);
    return;
  }
  RLFLOW_MODEL_OMP_FOR_IF(true)
  for (int n = 0; n < N; n += 16) detail::layernorm_forward_rows(out, mean, rstd, inp, w, b, n, std::min(N, n + 16), C);
}

//! dinp (N, C) += d/dx; dw, db (C) += parameter gradients, summed over rows in row order (fixed).
//! On one thread the parameter gradients are taken in the same pass over the rows; when the rows
//! are split across threads they take a second, serial pass (same order, same bits).
inline void layernorm_backward(float* dinp, float* dw, float* db, float const* dout, float const* inp, float const* w,
                               float const* mean, float const* rstd, int N, int C) {
  bool const params = dw && db;  // null: frozen weights (LoRA), the input gradient only
  if (std::int64_t{N} * C <= parallel_threshold) {
    detail::layernorm_backward_rows(dinp, dw, db, dout, inp, w, mean, rstd, 0, N, C, params);
    return;
  }
  RLFLOW_MODEL_OMP_FOR_IF(true)
  for (int n = 0; n < N; n += 16)
    detail::layernorm_backward_rows(dinp, dw, db, dout, inp, w, mean, rstd, n, std::min(N, n + 16), C, false);
  if (!params) return;
  RLFLOW_MODEL_OMP_FOR_IF(C > 32)
  for (int c0 = 0; c0 < C; c0 += 32) {  // by blocks of columns: each column in row order (same bits)
    int const c1 = std::min(C, c0 + 32);
    for (int n = 0; n < N; ++n) {
      float const* d = dout + std::size_t(n) * C;
      float const* x = inp + std::size_t(n) * C;
      float const m = mean[n], s = rstd[n];
      for (int c = c0; c < c1; ++c) {
        db[c] += d[c];
        dw[c] += (x[c] - m) * s * d[c];
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// linear layers. Two storage orders, chosen for tensor parallelism:
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
//! db (N) += the column sums of dout (M, N), rows in order; split across the team by blocks of
//! 64 columns (each column is summed by one thread, in row order: the same bits on any count).
inline void add_column_sums(float* db, float const* dout, int M, int N) {
  RLFLOW_MODEL_OMP_FOR_IF(std::int64_t{M} * N > parallel_threshold && N > 64)
  for (int n0 = 0; n0 < N; n0 += 64) {
    int const n1 = std::min(N, n0 + 64);
    for (int m = 0; m < M; ++m) {
      float const* d = dout + std::size_t(m) * N;
      for (int n = n0; n < n1; ++n) db[n] += d[n];
    }
  }
}
}  // namespace detail

//! out (M, N) = inp (M, K) W^T + b, W (N, K); with accumulate, out += (the residual connection).
inline void linear_nt_forward(float* out, float const* inp, float const* w, float const* b, int M, int K, int N,
                              bool accumulate = false) {
  detail::set_rows(out, b, M, N, accumulate);
  sgemm(CblasNoTrans, CblasTrans, M, N, K, 1.0f, inp, K, w, K, 1.0f, out, N);
}
//! dinp (M, K) = dout W; dw (N, K) += dout^T inp; db (N) += column sums (each skipped when null:
//! a frozen weight, e.g. under LoRA).
inline void linear_nt_backward(float* dinp, float* dw, float* db, float const* dout, float const* inp, float const* w,
                               int M, int K, int N) {
  if (dinp) sgemm(CblasNoTrans, CblasNoTrans, M, K, N, 1.0f, dout, N, w, K, 0.0f, dinp, K);
  if (dw) sgemm(CblasTrans, CblasNoTrans, N, K, M, 1.0f, dout, N, inp, K, 1.0f, dw, K);
  if (db) detail::add_column_sums(db, dout, M, N);
}
//! out (M, N) = inp (M, K) W + b, W (K, N); with accumulate, out +=.
inline void linear_nn_forward(float* out, float const* inp, float const* w, float const* b, int M, int K, int N,
                              bool accumulate = false) {
  detail::set_rows(out, b, M, N, accumulate);
  sgemm(CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, inp, K, w, N, 1.0f, out, N);
}
//! out (M, N) = res (M, N) + b + inp (M, K) W: the residual connection without a separate copy
//! of res into out (one pass writes res + b, then sgemm accumulates; the same bits as copying
//! res and calling linear_nn_forward with accumulate). out must not overlap res.
inline void linear_nn_forward_residual(float* out, float const* res, float const* inp, float const* w, float const* b,
                                       int M, int K, int N) {
  RLFLOW_MODEL_OMP_FOR_IF(std::int64_t{M} * N > parallel_threshold)
  for (int m = 0; m < M; ++m) {
    float* o = out + std::size_t(m) * N;
    float const* r = res + std::size_t(m) * N;
    if (b)
      for (int n = 0; n < N; ++n) o[n] = r[n] + b[n];
    else
      std::memcpy(o, r, sizeof(float) * std::size_t(N));
  }
  sgemm(CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, inp, K, w, N, 1.0f, out, N);
}
//! dinp (M, K) = dout W^T; dw (K, N) += inp^T dout; db (N) += column sums (each skipped when null).
inline void linear_nn_backward(float* dinp, float* dw, float* db, float const* dout, float const* inp, float const* w,
                               int M, int K, int N) {
  if (dinp) sgemm(CblasNoTrans, CblasTrans, M, K, N, 1.0f, dout, N, w, N, 0.0f, dinp, K);
  if (dw) sgemm(CblasTrans, CblasNoTrans, K, N, M, 1.0f, inp, K, dout, N, 1.0f, dw, N);
  if (db) detail::add_column_sums(db, dout, M, N);
}

// ---------------------------------------------------------------------------------------------
// GELU, tanh approximation (GPT-2)

inline constexpr float gelu_scale = 0.7978845608028654f;  // sqrt(2 / pi)

//! e^a for a in [-87.3, 0] (the callers clamp |x| in the integer domain, so the loops vectorise),
//! vectorisable (no libm call): Cephes' expf, range reduction by ln 2 and a degree-6 polynomial,
//! about 2 ulp. Shared by tanh_approx and exp_nonpos.
inline float cephes_exp_nonpos(float a) {
  float const y = a * 1.44269504088896341f;                                  // log2(e) * a
  float const n = -static_cast<float>(static_cast<std::int32_t>(0.5f - y));  // round(y) for y <= 0
  float const r = a - n * 0.693359375f - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float const er = p * r * r + r + 1.0f;
  return er * std::bit_cast<float>((static_cast<std::int32_t>(n) + 127) << 23);
}

//! tanh in float without a libm call, so GELU loops vectorise (std::tanh is a scalar call and
//! cost more than the layer's matrix products). tanh(x) = sign(x) (1 - e) / (1 + e), e = exp(-2|x|)
//! by cephes_exp_nonpos: absolute error below 2e-7 everywhere.
inline float tanh_approx(float x) {
  std::uint32_t const xb = std::bit_cast<std::uint32_t>(x);
  std::uint32_t ab = xb & 0x7fffffffu;                          // |x|, clamped below in the integer
  ab = ab < 0x41200000u ? ab : 0x41200000u;                     // domain (no FP compare: vectorises) to 10,
  float const e = cephes_exp_nonpos(-2.0f * std::bit_cast<float>(ab));  // where tanh is 1 to float precision
  float const t = (1.0f - e) / (1.0f + e);
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(t) | (xb & 0x80000000u));
}

namespace detail {
RLFLOW_SIMD_CLONES inline void gelu_forward_span(float* out, float const* inp, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    float const x = inp[i];
    out[i] = 0.5f * x * (1.0f + tanh_approx(gelu_scale * (x + 0.044715f * x * x * x)));
  }
}
RLFLOW_SIMD_CLONES inline void gelu_backward_span(float* dinp, float const* inp, float const* dout, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    float const x = inp[i];
    float const cube = 0.044715f * x * x * x;
    float const t = tanh_approx(gelu_scale * (x + cube));
    float const sech2 = 1.0f - t * t;
    float const local = 0.5f * (1.0f + t) + x * 0.5f * sech2 * gelu_scale * (1.0f + 3.0f * 0.044715f * x * x);
    dinp[i] = local * dout[i];
  }
}
inline constexpr std::int64_t gelu_grain = std::int64_t{1} << 14;  //!< elements per parallel chunk
}  // namespace detail

//! out (n) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
inline void gelu_forward(float* out, float const* inp, std::int64_t n) {
  if (n <= parallel_threshold) {
    detail::gelu_forward_span(out, inp, n);
    return;
  }
  RLFLOW_MODEL_OMP_FOR_IF(true)
  for (std::int64_t i = 0; i < n; i += detail::gelu_grain)
    detail::gelu_forward_span(out + i, inp + i, std::min(detail::gelu_grain, n - i));
}
//! dinp (n) = gelu'(inp) * dout; dinp may alias dout.
inline void gelu_backward(float* dinp, float const* inp, float const* dout, std::int64_t n) {
  if (n <= parallel_threshold) {
    detail::gelu_backward_span(dinp, inp, dout, n);
    return;
  }
  RLFLOW_MODEL_OMP_FOR_IF(true)
  for (std::int64_t i = 0; i < n; i += detail::gelu_grain)
    detail::gelu_backward_span(dinp + i, inp + i, dout + i, std::min(detail::gelu_grain, n - i));
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

//! exp(x) for x <= 0, vectorisable (cephes_exp_nonpos); |x| is clamped to 87 in the integer
//! domain, so very negative x (and -inf) give exp(-87) ~ 1.6e-38 rather than 0. Uses -|x|.
inline float exp_nonpos(float x) {
  std::uint32_t ab = std::bit_cast<std::uint32_t>(x) & 0x7fffffffu;
  ab = ab < 0x42ae0000u ? ab : 0x42ae0000u;  // 87.0f
  return cephes_exp_nonpos(-std::bit_cast<float>(ab));
}

namespace detail {

//! In place over s[0, n): the softmax over valid keys (fv[j] = 1) of s, 0 for invalid keys; all 0
//! when no key is valid. bias[j] = 0 for valid keys, -inf otherwise. Branch-free loops of 8 lanes.
RLFLOW_SIMD_CLONES inline void masked_softmax(float* s, float const* fv, float const* bias, int n) {
  float mx[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
  int j = 0;
  for (; j + 8 <= n; j += 8)
    for (int k = 0; k < 8; ++k) {
      float const v = s[j + k] + bias[j + k];
      mx[k] = mx[k] > v ? mx[k] : v;
    }
  for (; j < n; ++j) {
    float const v = s[j] + bias[j];
    mx[0] = mx[0] > v ? mx[0] : v;
  }
  float m = mx[0];
  for (int k = 1; k < 8; ++k) m = m > mx[k] ? m : mx[k];
  if (m == -INFINITY) {  // no valid key (a left pad before the prompt starts)
    std::memset(s, 0, sizeof(float) * std::size_t(n));
    return;
  }
  for (int i = 0; i < n; ++i) s[i] = fv[i] * exp_nonpos(s[i] - m);  // s - m <= 0 for valid keys
  float const inv = 1.0f / sum8(s, n);
  for (int i = 0; i < n; ++i) s[i] *= inv;
}

//! In place over the (T, T) causal rows: g = p (g - sum_j p_j g_j) scale, 0 past the diagonal.
RLFLOW_SIMD_CLONES inline void softmax_backward_rows(float* dP, float const* P, int T, float scale) {
  for (int t = 0; t < T; ++t) {
    float const* p = P + std::size_t(t) * T;
    float* g = dP + std::size_t(t) * T;
    int const n = t + 1;  // p is 0 past the diagonal
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int j = 0;
    for (; j + 8 <= n; j += 8)
      for (int k = 0; k < 8; ++k) acc[k] += p[j + k] * g[j + k];
    for (; j < n; ++j) acc[0] += p[j] * g[j];
    float const pdp = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (int i = 0; i < n; ++i) g[i] = p[i] * (g[i] - pdp) * scale;
    std::memset(g + n, 0, sizeof(float) * std::size_t(T - n));
  }
}

//! Per-thread scratch of at least n floats, kept between calls (no allocation in steady state).
inline float* thread_scratch(std::size_t n) {
  thread_local std::vector<float> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

}  // namespace detail

//! One query against n_keys keys: probs[j] = softmax over valid keys of q.k_j * scale (0 for
//! invalid ones); y = sum_j probs[j] v_j. A query with no valid key gets y = 0. The KV-cache
//! prefill and decode call this; the training forward computes the same with sgemm per head.
RLFLOW_SIMD_CLONES inline void attend_one(float* y, float* probs, float const* q, float const* k, std::size_t k_stride, float const* v,
                       std::size_t v_stride, std::uint8_t const* valid, int n_keys, int hs, float scale) {
  float* fv = detail::thread_scratch(2 * std::size_t(n_keys));
  float* bias = fv + n_keys;
  for (int j = 0; j < n_keys; ++j) {
    fv[j] = valid[j] ? 1.0f : 0.0f;
    bias[j] = valid[j] ? 0.0f : -INFINITY;
  }
  for (int j = 0; j < n_keys; ++j) probs[j] = valid[j] ? dot(q, k + std::size_t(j) * k_stride, hs) * scale : 0.0f;
  detail::masked_softmax(probs, fv, bias, n_keys);
  for (int d = 0; d < hs; ++d) y[d] = 0.0f;
  int j = 0;
  for (; j + 4 <= n_keys; j += 4) {  // four keys per pass over y
    float const p0 = probs[j], p1 = probs[j + 1], p2 = probs[j + 2], p3 = probs[j + 3];
    float const* v0 = v + std::size_t(j) * v_stride;
    float const* v1 = v0 + v_stride;
    float const* v2 = v1 + v_stride;
    float const* v3 = v2 + v_stride;
    for (int d = 0; d < hs; ++d) y[d] += (p0 * v0[d] + p1 * v1[d]) + (p2 * v2[d] + p3 * v3[d]);
  }
  for (; j < n_keys; ++j) {
    float const p = probs[j];
    float const* vj = v + std::size_t(j) * v_stride;
    for (int d = 0; d < hs; ++d) y[d] += p * vj[d];
  }
}

//! Where a token's query, key and value of each head sit in its qkv row. GPT-2 (head-major):
//! head h holds [q_h | k_h | v_h] at 3 hd h. Grouped (the Llama family, transformers' q_proj |
//! k_proj | v_proj): all query heads, then the NKV key heads, then the value heads; query head h
//! reads key/value head h / (NH / NKV) (grouped-query attention; NKV = NH is plain multi-head).
//! The CUDA kernels (model/cuda/) index qkv rows through the same struct.
struct QKVLayout {
  int NH = 1, NKV = 1, hd = 1;
  bool head_major = true;
  static RLFLOW_HD QKVLayout gpt2(int C, int NH) { return {NH, NH, C / NH, true}; }
  static RLFLOW_HD QKVLayout grouped(int NH, int NKV, int hd) { return {NH, NKV, hd, false}; }
  RLFLOW_HD std::size_t row() const { return std::size_t(NH + 2 * NKV) * std::size_t(hd); }
  RLFLOW_HD int group() const { return NH / NKV; }
  RLFLOW_HD std::size_t q(int h) const { return head_major ? 3 * std::size_t(hd) * h : std::size_t(hd) * h; }
  RLFLOW_HD std::size_t k(int h) const {
    return head_major ? 3 * std::size_t(hd) * h + hd : std::size_t(NH + h / group()) * std::size_t(hd);
  }
  RLFLOW_HD std::size_t v(int h) const {
    return head_major ? 3 * std::size_t(hd) * h + 2 * std::size_t(hd) : std::size_t(NH + NKV + h / group()) * std::size_t(hd);
  }
};

//! Masked causal self-attention over (B, T): y (B*T, NH hd) with heads at [h hd, (h+1) hd);
//! probs (B, NH, T, T) kept for the backward; valid (B, T) marks real (non-pad) tokens.
//! Per (b, h): S = scale Q K^T and Y = P V are sgemm calls (the causal upper triangle is
//! computed and then zeroed: BLAS on the full square beats scalar loops on the triangle);
//! the masked softmax runs a row at a time on vector lanes.
inline void attention_forward(float* y, float* probs, float const* qkv, std::uint8_t const* valid, int B, int T, QKVLayout L) {
  int const hs = L.hd, NH = L.NH;
  float const scale = 1.0f / std::sqrt(static_cast<float>(hs));
  std::size_t const row3 = L.row(), C = std::size_t(NH) * hs;
  RLFLOW_MODEL_OMP_FOR_IF(std::int64_t{B} * NH * T * T * hs > parallel_threshold)
  for (int bh = 0; bh < B * NH; ++bh) {
    int const b = bh / NH, h = bh % NH;
    float const* base = qkv + std::size_t(b) * T * row3;
    float* S = probs + std::size_t(bh) * T * T;
    float* fv = detail::thread_scratch(2 * std::size_t(T));
    float* bias = fv + T;
    std::uint8_t const* vb = valid + std::size_t(b) * T;
    for (int j = 0; j < T; ++j) {
      fv[j] = vb[j] ? 1.0f : 0.0f;
      bias[j] = vb[j] ? 0.0f : -INFINITY;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, base + L.q(h), int(row3), base + L.k(h), int(row3), 0.0f,
                S, T);
    for (int t = 0; t < T; ++t) {
      float* p = S + std::size_t(t) * T;
      detail::masked_softmax(p, fv, bias, t + 1);
      std::memset(p + t + 1, 0, sizeof(float) * std::size_t(T - t - 1));
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, S, T, base + L.v(h), int(row3), 0.0f,
                y + std::size_t(b) * T * C + std::size_t(h) * hs, int(C));
  }
}
//! GPT-2's head-major attention over qkv (B*T, 3C).
inline void attention_forward(float* y, float* probs, float const* qkv, std::uint8_t const* valid, int B, int T, int C, int NH) {
  attention_forward(y, probs, qkv, valid, B, T, QKVLayout::gpt2(C, NH));
}

//! dqkv (B*T, row) = gradient of attention_forward given dy (B*T, NH hd). Parallel over (b, key/value
//! head) only: each pair owns its slice of dqkv (the query heads of a group add into their shared
//! dK, dV in head order), so no two threads add into the same float. Per (b, h), with sgemm:
//! dP = dY V^T, dV (+)= P^T dY, dS = P (dP - rowsum(P dP)) scale, dQ = dS K, dK (+)= dS^T Q.
inline void attention_backward(float* dqkv, float const* dy, float const* qkv, float const* probs, int B, int T, QKVLayout L) {
  int const hs = L.hd, NH = L.NH, NKV = L.NKV, G = L.group();
  float const scale = 1.0f / std::sqrt(static_cast<float>(hs));
  std::size_t const row3 = L.row(), C = std::size_t(NH) * hs;
  int const ld3 = int(row3);
  RLFLOW_MODEL_OMP_FOR_IF(std::int64_t{B} * NH * T * T * hs > parallel_threshold)
  for (int bg = 0; bg < B * NKV; ++bg) {
    int const b = bg / NKV, g = bg % NKV;
    float const* base = qkv + std::size_t(b) * T * row3;
    float* dbase = dqkv + std::size_t(b) * T * row3;
    float* dP = detail::thread_scratch(std::size_t(T) * T);
    for (int h = g * G; h < (g + 1) * G; ++h) {
      float const beta = h == g * G ? 0.0f : 1.0f;  // the group's first head writes dK, dV; the others add
      float const* P = probs + (std::size_t(b) * NH + h) * T * T;
      float const* dY = dy + std::size_t(b) * T * C + std::size_t(h) * hs;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, dY, int(C), base + L.v(h), ld3, 0.0f, dP, T);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, P, T, dY, int(C), beta, dbase + L.v(h), ld3);
      detail::softmax_backward_rows(dP, P, T, scale);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, dP, T, base + L.k(h), ld3, 0.0f, dbase + L.q(h), ld3);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, dP, T, base + L.q(h), ld3, beta, dbase + L.k(h), ld3);
    }
  }
}
//! GPT-2's head-major attention backward; 'scratch' is unused (kept for the callers).
inline void attention_backward(float* dqkv, float const* dy, float const* qkv, float const* probs, int B, int T, int C, int NH,
                               [[maybe_unused]] float* scratch /* (B*NH, T) */) {
  attention_backward(dqkv, dy, qkv, probs, B, T, QKVLayout::gpt2(C, NH));
}

//! Packed (variable-length) sequences: nseq sequences laid end to end, sequence s at rows
//! [cu[s], cu[s + 1]) of qkv (cu: nseq + 1 offsets, cu[0] = 0). probs_offset(cu, s, NH) is where
//! sequence s's (NH, n_s, n_s) probabilities start: NH sum_{r < s} n_r^2 floats.
//! flash-attn: flash_attn_varlen_func's cu_seqlens.
inline std::size_t varlen_probs_floats(std::int32_t const* cu, int nseq, int NH) {
  std::size_t s = 0;
  for (int i = 0; i < nseq; ++i) s += std::size_t(cu[i + 1] - cu[i]) * std::size_t(cu[i + 1] - cu[i]);
  return s * std::size_t(NH);
}

//! Causal self-attention bounded per packed sequence: every token attends to the tokens of its own
//! sequence up to itself (no padding, no mask). y (N, NH hd), probs at the offsets of
//! varlen_probs_floats (off: nseq + 1 prefix offsets in floats). Per (sequence, head) the same
//! sgemm + masked softmax as attention_forward with T = n_s and every key valid.
inline void attention_forward_varlen(float* y, float* probs, float const* qkv, std::int32_t const* cu, std::size_t const* off,
                                     int nseq, QKVLayout L) {
  int const hs = L.hd, NH = L.NH;
  float const scale = 1.0f / std::sqrt(static_cast<float>(hs));
  std::size_t const row3 = L.row(), C = std::size_t(NH) * hs;
  [[maybe_unused]] std::int64_t const work = std::int64_t(off[nseq]) * hs;
  RLFLOW_MODEL_OMP_FOR_IF(work > parallel_threshold)
  for (int sh = 0; sh < nseq * NH; ++sh) {
    int const s = sh / NH, h = sh % NH, T = cu[s + 1] - cu[s];
    if (T == 0) continue;
    float const* base = qkv + std::size_t(cu[s]) * row3;
    float* S = probs + off[s] + std::size_t(h) * T * T;
    float* fv = detail::thread_scratch(2 * std::size_t(T));
    float* bias = fv + T;
    for (int j = 0; j < T; ++j) fv[j] = 1.0f, bias[j] = 0.0f;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, base + L.q(h), int(row3), base + L.k(h), int(row3), 0.0f,
                S, T);
    for (int t = 0; t < T; ++t) {
      float* p = S + std::size_t(t) * T;
      detail::masked_softmax(p, fv, bias, t + 1);
      std::memset(p + t + 1, 0, sizeof(float) * std::size_t(T - t - 1));
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, S, T, base + L.v(h), int(row3), 0.0f,
                y + std::size_t(cu[s]) * C + std::size_t(h) * hs, int(C));
  }
}

//! The gradient of attention_forward_varlen: dqkv (N, row) given dy (N, NH hd); parallel over
//! (sequence, key/value head) as attention_backward.
inline void attention_backward_varlen(float* dqkv, float const* dy, float const* qkv, float const* probs, std::int32_t const* cu,
                                      std::size_t const* off, int nseq, QKVLayout L) {
  int const hs = L.hd, NH = L.NH, NKV = L.NKV, G = L.group();
  float const scale = 1.0f / std::sqrt(static_cast<float>(hs));
  std::size_t const row3 = L.row(), C = std::size_t(NH) * hs;
  int const ld3 = int(row3);
  [[maybe_unused]] std::int64_t const work = std::int64_t(off[nseq]) * hs;
  RLFLOW_MODEL_OMP_FOR_IF(work > parallel_threshold)
  for (int sg = 0; sg < nseq * NKV; ++sg) {
    int const s = sg / NKV, g = sg % NKV, T = cu[s + 1] - cu[s];
    if (T == 0) continue;
    float const* base = qkv + std::size_t(cu[s]) * row3;
    float* dbase = dqkv + std::size_t(cu[s]) * row3;
    float* dP = detail::thread_scratch(std::size_t(T) * T);
    for (int h = g * G; h < (g + 1) * G; ++h) {
      float const beta = h == g * G ? 0.0f : 1.0f;
      float const* P = probs + off[s] + std::size_t(h) * T * T;
      float const* dY = dy + std::size_t(cu[s]) * C + std::size_t(h) * hs;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, dY, int(C), base + L.v(h), ld3, 0.0f, dP, T);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, P, T, dY, int(C), beta, dbase + L.v(h), ld3);
      detail::softmax_backward_rows(dP, P, T, scale);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, dP, T, base + L.k(h), ld3, 0.0f, dbase + L.q(h), ld3);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, dP, T, base + L.q(h), ld3, beta, dbase + L.k(h), ld3);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// the Llama family's layers: RMSNorm, rotary position embedding, SwiGLU.
// transformers: LlamaRMSNorm, apply_rotary_pos_emb (rotate_half), LlamaMLP with act_fn = silu.

//! RMSNorm over 'rows' rows of n floats: row r at inp + (r / per) stride + (r % per) n (per rows
//! share a stride: per = 1 for the residual stream, the heads of a token for q/k norms).
//! out = w * x * rstd, rstd = 1 / sqrt(mean(x^2) + eps) stored per row; in float32, as
//! transformers computes it (hidden_states.to(float32)).
struct RowSet {
  std::int64_t rows = 0;
  int n = 0, per = 1;
  std::size_t stride = 0;
  RLFLOW_HD std::size_t at(std::int64_t r) const { return std::size_t(r / per) * stride + std::size_t(r % per) * std::size_t(n); }
};
inline void rmsnorm_forward(float* out, float* rstd, float const* inp, float const* w, RowSet rs, float eps) {
  RLFLOW_MODEL_OMP_FOR_IF(rs.rows * rs.n > parallel_threshold)
  for (std::int64_t r = 0; r < rs.rows; ++r) {
    float const* x = inp + rs.at(r);
    float* o = out + rs.at(r);
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int i = 0;
    for (; i + 8 <= rs.n; i += 8)
      for (int k = 0; k < 8; ++k) acc[k] += x[i + k] * x[i + k];
    for (; i < rs.n; ++i) acc[0] += x[i] * x[i];
    float const ss = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    float const s = 1.0f / std::sqrt(ss / float(rs.n) + eps);
    if (rstd) rstd[r] = s;
    for (int j = 0; j < rs.n; ++j) o[j] = w[j] * (x[j] * s);
  }
}
//! Backward of rmsnorm_forward: dinp += (accumulate) or = d(out)/d(inp) dout, dw += sum over rows
//! of dout x rstd (rows in order: the same bits on any thread count). Without accumulate dinp
//! may be dout itself (each row is read whole before it is written).
inline void rmsnorm_backward(float* dinp, float* dw, float const* dout, float const* inp, float const* w, float const* rstd, RowSet rs,
                             bool accumulate = true) {
  for (std::int64_t r = 0; dw && r < rs.rows; ++r) {  // dw first (null: frozen): dout may be overwritten below
    float const* x = inp + rs.at(r);
    float const* d = dout + rs.at(r);
    float const s = rstd[r];
    for (int j = 0; j < rs.n; ++j) dw[j] += d[j] * x[j] * s;
  }
  RLFLOW_MODEL_OMP_FOR_IF(rs.rows * rs.n > parallel_threshold)
  for (std::int64_t r = 0; r < rs.rows; ++r) {
    float const* x = inp + rs.at(r);
    float const* d = dout + rs.at(r);
    float* dx = dinp + rs.at(r);
    float const s = rstd[r];
    float dot_ = 0.0f;
    for (int j = 0; j < rs.n; ++j) dot_ += d[j] * w[j] * x[j];
    float const k = s * s * s * dot_ / float(rs.n);
    if (accumulate)
      for (int j = 0; j < rs.n; ++j) dx[j] += d[j] * w[j] * s - x[j] * k;
    else
      for (int j = 0; j < rs.n; ++j) dx[j] = d[j] * w[j] * s - x[j] * k;
  }
}

//! cos / sin of position p's angles p f_i (i < hd / 2), from the inverse frequencies in double,
//! rounded to float: rows [0, P) of two (P, hd / 2) tables.
inline void rope_tables(std::vector<float>& cosv, std::vector<float>& sinv, std::span<double const> inv_freq, int P) {
  std::size_t const h = inv_freq.size();
  std::size_t const have = h ? cosv.size() / h : 0;
  if (have >= std::size_t(P)) return;
  cosv.resize(std::size_t(P) * h);
  sinv.resize(std::size_t(P) * h);
  for (std::size_t p = have; p < std::size_t(P); ++p)
    for (std::size_t i = 0; i < h; ++i) {
      double const a = double(p) * inv_freq[i];
      cosv[p * h + i] = float(std::cos(a));
      sinv[p * h + i] = float(std::sin(a));
    }
}

//! Rotary embedding in place on 'heads' heads of hd floats per token, token n's heads at x + n
//! stride (contiguous), at position pos[n]: the half-split convention (rotate_half): for i < hd/2,
//! (a, b) = (x_i, x_{i + hd/2}) -> (a c - b s, b c + a s). inverse: the transpose (rotation by
//! the negative angle), which is the backward of the forward rotation.
inline void rope_apply(float* x, std::int32_t const* pos, std::int64_t N, int heads, int hd, std::size_t stride, float const* cosv,
                       float const* sinv, bool inverse) {
  int const h2 = hd / 2;
  RLFLOW_MODEL_OMP_FOR_IF(N * heads * hd > parallel_threshold)
  for (std::int64_t n = 0; n < N; ++n) {
    float const* c = cosv + std::size_t(pos[n]) * h2;
    float const* s = sinv + std::size_t(pos[n]) * h2;
    for (int h = 0; h < heads; ++h) {
      float* v = x + std::size_t(n) * stride + std::size_t(h) * hd;
      for (int i = 0; i < h2; ++i) {
        float const a = v[i], b = v[i + h2], sn = inverse ? -s[i] : s[i];
        v[i] = a * c[i] - b * sn;
        v[i + h2] = b * c[i] + a * sn;
      }
    }
  }
}

//! SwiGLU: h (N, F) = silu(gate) * up, gu rows [gate (F) | up (F)]; silu(x) = x / (1 + e^-x).
inline void swiglu_forward(float* h, float const* gu, std::int64_t N, int F) {
  RLFLOW_MODEL_OMP_FOR_IF(N * F * 4 > parallel_threshold)
  for (std::int64_t n = 0; n < N; ++n) {
    float const* g = gu + std::size_t(n) * 2 * F;
    float* o = h + std::size_t(n) * F;
    for (int f = 0; f < F; ++f) o[f] = g[f] / (1.0f + std::exp(-g[f])) * g[F + f];
  }
}
//! dgu (N, 2F) from dh (N, F): d gate = dh up silu'(gate), d up = dh silu(gate), with
//! silu'(x) = s (1 + x (1 - s)), s = sigmoid(x).
inline void swiglu_backward(float* dgu, float const* gu, float const* dh, std::int64_t N, int F) {
  RLFLOW_MODEL_OMP_FOR_IF(N * F * 4 > parallel_threshold)
  for (std::int64_t n = 0; n < N; ++n) {
    float const* g = gu + std::size_t(n) * 2 * F;
    float const* d = dh + std::size_t(n) * F;
    float* o = dgu + std::size_t(n) * 2 * F;
    for (int f = 0; f < F; ++f) {
      float const x = g[f], u = g[F + f], sg = 1.0f / (1.0f + std::exp(-x));
      o[f] = d[f] * u * sg * (1.0f + x * (1.0f - sg));
      o[F + f] = d[f] * x * sg;
    }
  }
}

//! out (N, C) = wte[ids[n]] (no position table: the Llama family's positions are rotary).
inline void embedding_forward(float* out, std::int32_t const* ids, float const* wte, int N, int C) {
  for (int n = 0; n < N; ++n) std::memcpy(out + std::size_t(n) * C, wte + std::size_t(ids[n]) * C, sizeof(float) * std::size_t(C));
}
//! dwte[ids[n]] += dout[n]; serial, so the summation order is fixed. Vocabulary-parallel
//! ([v0, v1) given): 'dwte' holds rows [v0, v1) only and other tokens add nothing to it.
inline void embedding_backward(float* dwte, float const* dout, std::int32_t const* ids, int N, int C, int v0 = 0,
                               int v1 = 0x7fffffff) {
  for (int n = 0; n < N; ++n) {
    if (ids[n] < v0 || ids[n] >= v1) continue;
    float* d = dwte + std::size_t(ids[n] - v0) * C;
    float const* g = dout + std::size_t(n) * C;
    for (int c = 0; c < C; ++c) d[c] += g[c];
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
