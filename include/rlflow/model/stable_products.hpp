// rlflow/model/stable_products.hpp: batch-invariant matrix products for decoding.
//
//   nt: out (M, N) = prior + inp (M, K) W^T, W (N, K)    (q|k|v, gate|up, the LM head)
//   nn: out (M, N) = prior + inp (M, K) W,   W (K, N)    (o_proj, down / c_proj)
//
// Every output element is summed in one fixed order that depends on K only, so a row's bits never
// depend on the rows computed beside it, on how the work is tiled or on the thread count (BLAS
// picks kernels and blockings by shape: the same row rounds differently at another M). The
// weights stream from memory once per call for all rows, where BLAS packs the whole weight matrix
// on every call: at a decode step's few rows that packing is most of the time, and these kernels
// run at the memory's speed instead (benchmarks/engine/bench_llama.cpp: BM_StableProduct).
//
// The order (reference_nt / reference_nn spell it out in plain C++; the kernels equal them bit for
// bit):
//   nt: 16 lane sums from +0, lane l a fused multiply-add chain over k = l, l + 16, l + 32, ...;
//       then the tree s[l] += s[l + 8] (l < 8), s[l] += s[l + 4] (l < 4), s[l] += s[l + 2]
//       (l < 2), sum = s[0] + s[1];
//   nn: one fused multiply-add chain over k = 0, 1, ..., K - 1 from +0;
//   then out = prior + sum, prior = b[n] (0 without b), or out + b[n] (out without b) with
//   accumulate (the residual connection).
//
// The kernels use AVX-512F (x86-64 with GCC or Clang, chosen at run time by the CPU's features);
// available() is false elsewhere, and callers use BLAS. llama.cpp's ggml_vec_dot / mul_mat for F32
// play the same part; vLLM's batch-invariant mode (VLLM_BATCH_INVARIANT) fixes the reduction
// order of its GPU kernels the same way.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>  // std::fma
#include <cstddef>
#include <cstdint>
#include <cstdlib>  // std::getenv
#include <vector>

#include <rlflow/model/layers.hpp>  // RLFLOW_MODEL_OMP_FOR_IF, team_threads, gemm_split_flops

#if defined(__x86_64__) && defined(__GNUC__)
#define RLFLOW_STABLE_PRODUCTS_AVX512 1
#include <immintrin.h>
#else
#define RLFLOW_STABLE_PRODUCTS_AVX512 0
#endif

namespace rlflow::model::stable {

//! The lanes of the nt order's partial sums (one AVX-512 register of floats).
inline constexpr int lanes = 16;

namespace detail {

//! The prior of element (m, n): b[n], out[m, n] + b[n] when accumulating, or 0 / out[m, n]
//! without a bias.
inline float prior(float const* out_mn, float const* b, int n, bool accumulate) {
  if (accumulate) return b ? *out_mn + b[n] : *out_mn;
  return b ? b[n] : 0.0f;
}

//! The nt order's tree over 16 lane sums.
inline float lane_tree(float* s) {
  for (int h = lanes / 2; h >= 1; h /= 2)
    for (int l = 0; l < h; ++l) s[l] += s[l + h];
  return s[0];
}

inline std::atomic<int>& enabled_flag() {
  static std::atomic<int> flag{-1};  // -1: not yet decided (the CPU's features)
  return flag;
}

}  // namespace detail

//! The nt order in plain C++ (the definition the kernels equal bit for bit; the tests' oracle).
inline void reference_nt(float* out, float const* inp, float const* w, float const* b, int M, int K, int N, bool accumulate = false) {
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      float s[lanes] = {};
      float const* x = inp + std::size_t(m) * K;
      float const* wr = w + std::size_t(n) * K;
      for (int k = 0; k < K; ++k) s[k % lanes] = std::fma(x[k], wr[k], s[k % lanes]);
      float* o = out + std::size_t(m) * N + n;
      *o = detail::prior(o, b, n, accumulate) + detail::lane_tree(s);
    }
}

//! The nn order in plain C++.
inline void reference_nn(float* out, float const* inp, float const* w, float const* b, int M, int K, int N, bool accumulate = false) {
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      float s = 0.0f;
      for (int k = 0; k < K; ++k) s = std::fma(inp[std::size_t(m) * K + k], w[std::size_t(k) * N + n], s);
      float* o = out + std::size_t(m) * N + n;
      *o = detail::prior(o, b, n, accumulate) + s;
    }
}

#if RLFLOW_STABLE_PRODUCTS_AVX512
namespace detail {

#define RLFLOW_STABLE_AVX512 gnu::target("avx512f"), gnu::always_inline

// [a's 128-bit quarters i, j | b's quarters k, l] (Imm = i | j << 2 | k << 4 | l << 6), and the same
// within every quarter for single lanes. The masked forms with every lane taken: GCC 12 warns
// about the unmasked forms' undefined source operand.
template <int Imm>
[[RLFLOW_STABLE_AVX512]] inline __m512 quarters(__m512 a, __m512 b) { return _mm512_mask_shuffle_f32x4(a, 0xFFFF, a, b, Imm); }
template <int Imm>
[[RLFLOW_STABLE_AVX512]] inline __m512 lanes_of(__m512 a, __m512 b) { return _mm512_mask_shuffle_ps(a, 0xFFFF, a, b, Imm); }

//! The tree of 16 accumulators at once: lane 4 q + r of the result is the nt tree of a[4 r + q]
//! (each level adds lanes l and l + h of every accumulator, as lane_tree does).
[[RLFLOW_STABLE_AVX512]] inline __m512 tree16(__m512 const* a) {
  __m512 h1[8], h2[4], h3[2];
  for (int p = 0; p < 8; ++p)  // h = 8: [a l + a l+8 | b l + b l+8], l < 8
    h1[p] = _mm512_add_ps(quarters<0x44>(a[2 * p], a[2 * p + 1]), quarters<0xEE>(a[2 * p], a[2 * p + 1]));
  for (int p = 0; p < 4; ++p)  // h = 4: one 4-lane partial per quarter
    h2[p] = _mm512_add_ps(quarters<0x88>(h1[2 * p], h1[2 * p + 1]), quarters<0xDD>(h1[2 * p], h1[2 * p + 1]));
  for (int p = 0; p < 2; ++p)  // h = 2, within each quarter
    h3[p] = _mm512_add_ps(lanes_of<0x44>(h2[2 * p], h2[2 * p + 1]), lanes_of<0xEE>(h2[2 * p], h2[2 * p + 1]));
  return _mm512_add_ps(lanes_of<0x88>(h3[0], h3[1]), lanes_of<0xDD>(h3[0], h3[1]));  // h = 1
}

//! The accumulator that computes tile element e (row e / NT, column e % NT), so that tree16 leaves
//! element e in lane e.
constexpr int nt_acc_of(int e) { return 4 * (e % 4) + e / 4; }

//! One k step of an MT x NT tile of nt: 16 lanes of each of its 16 products (lanes outside mask
//! add fma(0, 0, s) = s: a lane sum starts at +0 and never becomes -0).
template <int MT>
[[RLFLOW_STABLE_AVX512]] inline void nt_step(__m512* a, float const* const* xr, float const* const* wr, int k, __mmask16 mask) {
  constexpr int NT = lanes / MT;
  __m512 xv[MT], wv[NT];
  for (int i = 0; i < MT; ++i) xv[i] = _mm512_maskz_loadu_ps(mask, xr[i] + k);
  for (int j = 0; j < NT; ++j) wv[j] = _mm512_maskz_loadu_ps(mask, wr[j] + k);
  for (int e = 0; e < 16; ++e) a[nt_acc_of(e)] = _mm512_fmadd_ps(xv[e / NT], wv[e % NT], a[nt_acc_of(e)]);
}

//! One MT x NT tile (MT NT = 16) of nt: tile[e] = the tree sum of x row e / NT against w row e % NT.
template <int MT>
[[RLFLOW_STABLE_AVX512]] inline void nt_tile(float* tile, float const* const* xr, float const* const* wr, int K, bool prefetch_next) {
  constexpr int NT = lanes / MT;
  __m512 a[16];
  for (int r = 0; r < 16; ++r) a[r] = _mm512_setzero_ps();
  int const K16 = K / lanes * lanes;
  for (int k = 0; k < K16; k += lanes) {
    if (prefetch_next)  // the next tile's weight rows (contiguous after these): one stream ahead
      for (int j = 0; j < NT; ++j)
        _mm_prefetch(reinterpret_cast<char const*>(reinterpret_cast<std::uintptr_t>(wr[j] + k) + sizeof(float) * std::size_t(NT) * K),
                     _MM_HINT_T0);
    nt_step<MT>(a, xr, wr, k, __mmask16(0xFFFF));
  }
  if (K16 < K) nt_step<MT>(a, xr, wr, K16, __mmask16((1u << (K - K16)) - 1u));
  _mm512_storeu_ps(tile, tree16(a));
}

//! nt over weight rows [n_begin, n_end), all M rows, MT rows per tile.
template <int MT>
[[gnu::target("avx512f")]] inline void nt_rows(float* out, float const* inp, float const* w, float const* b, int M, int K, int N,
                                              bool accumulate, int n_begin, int n_end) {
  constexpr int NT = lanes / MT;
  alignas(64) float tile[16];
  for (int n0 = n_begin; n0 < n_end; n0 += NT) {
    int const nc = std::min(NT, n_end - n0);
    float const* wr[NT];
    for (int j = 0; j < NT; ++j) wr[j] = w + std::size_t(std::min(n0 + j, n_end - 1)) * K;  // the edge repeats a row
    for (int m0 = 0; m0 < M; m0 += MT) {
      int const mc = std::min(MT, M - m0);
      float const* xr[MT];
      for (int i = 0; i < MT; ++i) xr[i] = inp + std::size_t(std::min(m0 + i, M - 1)) * K;
      nt_tile<MT>(tile, xr, wr, K, m0 == 0 && n0 + NT < n_end);
      for (int i = 0; i < mc; ++i)
        for (int j = 0; j < nc; ++j) {
          float* o = out + std::size_t(m0 + i) * N + n0 + j;
          *o = prior(o, b, n0 + j, accumulate) + tile[i * NT + j];
        }
    }
  }
}

//! One MT-row strip of nn over columns [n0, n0 + 16 NV) and weight rows [k0, k0 + kb): the
//! partial sums s (ld N) continue their chains (from +0 when first).
template <int MT>
[[RLFLOW_STABLE_AVX512]] inline void nn_strip(float* const* sr, float const* const* xr, float const* w, int kb, int N, int n0,
                                             int n_end, bool first) {
  constexpr int NV = lanes / MT;
  __mmask16 mask[NV];
  for (int j = 0; j < NV; ++j) {
    int const left = std::clamp(n_end - (n0 + lanes * j), 0, lanes);
    mask[j] = __mmask16((1u << left) - 1u);
  }
  __m512 a[MT][NV];
  for (int i = 0; i < MT; ++i)
    for (int j = 0; j < NV; ++j) a[i][j] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mask[j], sr[i] + n0 + lanes * j);
  for (int kk = 0; kk < kb; ++kk) {
    __m512 wv[NV];
    for (int j = 0; j < NV; ++j) wv[j] = _mm512_maskz_loadu_ps(mask[j], w + std::size_t(kk) * N + n0 + lanes * j);
    for (int i = 0; i < MT; ++i) {
      __m512 const xb = _mm512_set1_ps(xr[i][kk]);
      for (int j = 0; j < NV; ++j) a[i][j] = _mm512_fmadd_ps(xb, wv[j], a[i][j]);
    }
  }
  for (int i = 0; i < MT; ++i)
    for (int j = 0; j < NV; ++j) _mm512_mask_storeu_ps(sr[i] + n0 + lanes * j, mask[j], a[i][j]);
}

//! nn into the partial sums s (M, N) over columns [n_begin, n_end): weight rows in blocks of kb
//! (each block's rows stream from memory once; the sums stay in cache), MT rows per strip.
template <int MT>
[[gnu::target("avx512f")]] inline void nn_cols(float* s, float const* inp, float const* w, int M, int K, int N, int n_begin, int n_end,
                                              int kb) {
  constexpr int NV = lanes / MT;
  for (int k0 = 0; k0 < K; k0 += kb) {
    int const kn = std::min(kb, K - k0);
    for (int n0 = n_begin; n0 < n_end; n0 += lanes * NV)
      for (int m0 = 0; m0 < M; m0 += MT) {
        float const* xr[MT];
        float* sr[MT];
        for (int i = 0; i < MT; ++i) {
          int const m = std::min(m0 + i, M - 1);  // the edge repeats a row (and writes the same sums)
          xr[i] = inp + std::size_t(m) * K + k0;
          sr[i] = s + std::size_t(m) * N;
        }
        nn_strip<MT>(sr, xr, w + std::size_t(k0) * N, kn, N, n0, n_end, k0 == 0);
      }
  }
}

#undef RLFLOW_STABLE_AVX512

//! Per-thread partial sums of nn, grown once and reused (fresh memory is slow).
inline float* nn_scratch(std::size_t n) {
  thread_local std::vector<float> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

}  // namespace detail
#endif

//! Whether the kernels run here (an AVX-512F CPU under GCC or Clang on x86-64) and are switched on
//! (RLFLOW_STABLE_PRODUCTS=0 in the environment switches them off from the start).
inline bool available() {
#if RLFLOW_STABLE_PRODUCTS_AVX512
  int f = detail::enabled_flag().load(std::memory_order_relaxed);
  if (f < 0) {
    char const* env = std::getenv("RLFLOW_STABLE_PRODUCTS");  // "0": BLAS only (side-by-side runs)
    f = __builtin_cpu_supports("avx512f") && !(env && env[0] == '0' && env[1] == '\0') ? 1 : 0;
    detail::enabled_flag().store(f, std::memory_order_relaxed);
  }
  return f == 1;
#else
  return false;
#endif
}

//! Switches the kernels off (callers fall back to BLAS) or back on where the CPU has them; returns
//! whether they are on. For side-by-side benchmarks and tests.
inline bool set_enabled(bool on) {
#if RLFLOW_STABLE_PRODUCTS_AVX512
  detail::enabled_flag().store(on && __builtin_cpu_supports("avx512f") ? 1 : 0, std::memory_order_relaxed);
#else
  (void)on;
#endif
  return available();
}

//! The rows (M) up to which nt / nn beat BLAS sgemm on the decoders' shapes (bench_llama's
//! BM_StableProduct); the rollout engines use them up to here, and for every M in batch-invariant
//! mode.
inline constexpr int decode_rows = 32;
//! The weights (K N floats, 512 KiB) from which they do: smaller weights stay in cache, where
//! BLAS's packing costs little.
inline constexpr std::int64_t decode_min_weights = std::int64_t{1} << 17;

//! The weight rows (nt) or columns (nn) of one thread's block when a product is split across the
//! team: fixed, so the split never depends on the team size (the bits never do either way).
inline constexpr int split_block = 256;

//! The column blocks a product is split into: one (the whole product on the calling thread) unless
//! the team has several threads and the product is large enough to pay for the fork.
inline int split_blocks(int M, int K, int N) {
  if (2 * std::int64_t{M} * N * K < layers::gemm_split_flops || N <= split_block || layers::team_threads() <= 1) return 1;
  return (N + split_block - 1) / split_block;
}

//! Rows per pass over the weights: a block of rows (and nn's partial sums) stays in cache while the
//! weights stream past it, so a prefill-sized M costs M / row_block passes over the weights (not
//! M / 4) and nn's scratch stays row_block x N floats.
inline constexpr int row_block = 64;

namespace detail {
//! Calls f(r0, rows, n0, n1) for every block of up to row_block rows and, split across the team
//! (split_blocks), every block of output columns [n0, n1).
template <class F>
void over_blocks(int M, int K, int N, F&& f) {
  for (int r0 = 0; r0 < M; r0 += row_block) {
    int const rows = std::min(row_block, M - r0);
    int const blocks = split_blocks(rows, K, N);
    RLFLOW_MODEL_OMP_FOR_IF(blocks > 1)
    for (int blk = 0; blk < blocks; ++blk) {
      int const n0 = blocks == 1 ? 0 : blk * split_block, n1 = blocks == 1 ? N : std::min(N, n0 + split_block);
      f(r0, rows, n0, n1);
    }
  }
}
}  // namespace detail

//! out (M, N) = prior + inp (M, K) W^T in the nt order; W (N, K). Without available() it runs
//! reference_nt (the same bits, slowly).
inline void nt(float* out, float const* inp, float const* w, float const* b, int M, int K, int N, bool accumulate = false) {
#if RLFLOW_STABLE_PRODUCTS_AVX512
  if (M <= 0 || N <= 0) return;
  if (!available()) return reference_nt(out, inp, w, b, M, K, N, accumulate);
  detail::over_blocks(M, K, N, [&](int r0, int rows, int n0, int n1) {
    float const* x = inp + std::size_t(r0) * K;
    float* o = out + std::size_t(r0) * N;
    if (rows == 1) detail::nt_rows<1>(o, x, w, b, rows, K, N, accumulate, n0, n1);
    else if (rows == 2) detail::nt_rows<2>(o, x, w, b, rows, K, N, accumulate, n0, n1);
    else detail::nt_rows<4>(o, x, w, b, rows, K, N, accumulate, n0, n1);
  });
#else
  reference_nt(out, inp, w, b, M, K, N, accumulate);
#endif
}

//! out (M, N) = prior + inp (M, K) W in the nn order; W (K, N). Without available(), reference_nn.
inline void nn(float* out, float const* inp, float const* w, float const* b, int M, int K, int N, bool accumulate = false) {
#if RLFLOW_STABLE_PRODUCTS_AVX512
  if (M <= 0 || N <= 0) return;
  if (!available()) return reference_nn(out, inp, w, b, M, K, N, accumulate);
  float* const s = detail::nn_scratch(std::size_t(std::min(M, row_block)) * N);
  detail::over_blocks(M, K, N, [&](int r0, int rows, int n0, int n1) {
    float const* x = inp + std::size_t(r0) * K;
    float* o = out + std::size_t(r0) * N;
    int const kb = rows <= 8 ? 8 : rows <= 16 ? 16 : 64;  // weight rows per block: the sums of more rows want fewer passes
    if (rows == 1) detail::nn_cols<1>(s, x, w, rows, K, N, n0, n1, kb);
    else if (rows == 2) detail::nn_cols<2>(s, x, w, rows, K, N, n0, n1, kb);
    else detail::nn_cols<4>(s, x, w, rows, K, N, n0, n1, kb);
    for (int m = 0; m < rows; ++m)
      for (int n = n0; n < n1; ++n) {
        float* on = o + std::size_t(m) * N + n;
        *on = detail::prior(on, b, n, accumulate) + (K > 0 ? s[std::size_t(m) * N + n] : 0.0f);
      }
  });
#else
  reference_nn(out, inp, w, b, M, K, N, accumulate);
#endif
}

}  // namespace rlflow::model::stable
