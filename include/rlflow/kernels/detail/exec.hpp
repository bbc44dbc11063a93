// rlflow/kernels/detail/exec.hpp: the backend customization point of the RL kernels.
// exec<System> provides the handful of data-parallel primitives every kernel is written with
// (for_each, reduce, row_reduce, group_reduce, top_k, scratch buffers, one-element loads); the
// CPU twin here runs plain loops, the CUDA one (cuda/exec.cuh, nvcc only) runs Thrust/CUB on a
// stream. Also: argument checks shared by the public entry points. Not public API.
#pragma once
#include <algorithm>  // std::sort
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#if defined(__SSE2__)
#include <immintrin.h>  // _mm_stream_ps, _mm_stream_si32, _mm_sfence
#endif

#include <rlflow/core/backend.hpp>          // cpu::tag, cuda::tag, execution_policy, system_of_t
#include <rlflow/core/config.hpp>
#include <rlflow/core/error.hpp>            // shape_error, value_error
#include <rlflow/kernels/math.hpp>     // first_index, finite
#include <rlflow/kernels/options.hpp>  // Dims
#include <rlflow/core/memory.hpp>           // default_host_resource (cached scratch: no first-touch faults)

namespace rlflow::kernels::detail {

//! Uninitialised host scratch of trivially copyable T from the caching host resource, so the
//! per-call buffers of a training step are reused instead of page-faulted in every time.
template <class T>
class host_scratch {
  static_assert(std::is_trivially_copyable_v<T>, "rlflow::kernels::detail::host_scratch: T must be trivially copyable");

 public:
  host_scratch() = default;
  explicit host_scratch(std::int64_t n) : n_(n > 0 ? n : 0) {
    if (n_) p_ = static_cast<T*>(default_host_resource().allocate(bytes(), host_alignment));
  }
  host_scratch(host_scratch&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr, o.n_ = 0; }
  host_scratch& operator=(host_scratch&& o) noexcept {
    if (this != &o) {
      release();
      p_ = o.p_, n_ = o.n_;
      o.p_ = nullptr, o.n_ = 0;
    }
    return *this;
  }
  host_scratch(host_scratch const&) = delete;
  host_scratch& operator=(host_scratch const&) = delete;
  ~host_scratch() { release(); }
  T* data() const { return p_; }
  std::int64_t size() const { return n_; }
  T& operator[](std::int64_t i) const { return p_[i]; }

 private:
  std::size_t bytes() const { return static_cast<std::size_t>(n_) * sizeof(T); }
  void release() {
    if (p_) default_host_resource().deallocate(p_, bytes(), host_alignment);
    p_ = nullptr;
  }
  T* p_ = nullptr;
  std::int64_t n_ = 0;
};

template <class T>
inline constexpr bool dependent_false = false;

//! Primary template: fails loudly for an unknown system (style E4).
template <class System>
struct exec {
  static_assert(dependent_false<System>,
                "rlflow::kernels: no implementation for this execution policy; pass rlflow::cpu::par or rlflow::cuda::par");
};

// ---------------------------------------------------------------------------------------------
// CPU: plain loops. Double accumulators; rows and groups are visited in index order so results
// are deterministic.

template <>
struct exec<cpu::tag> {
  template <class T>
  using buffer = host_scratch<T>;

  explicit exec(cpu::par_t) {}

  template <class T>
  buffer<T> alloc(std::int64_t n) const { return buffer<T>(n); }

  template <class F>
  void for_each(std::int64_t n, F f) const {
    for (std::int64_t i = 0; i < n; ++i) f(i);
  }

  //! f(i, t, flat) over a (rows, cols) matrix, row-major.
  template <class F>
  void for_each_2d(std::int64_t rows, std::int64_t cols, F f) const {
    for (std::int64_t i = 0; i < rows; ++i) {
      std::int64_t const base = i * cols;
      for (std::int64_t t = 0; t < cols; ++t) f(i, t, base + t);
    }
  }

  //! adv[i,t] = mask ? a[i] : 0 (and ret likewise when non-null): the score-to-token broadcast.
  template <class M>
  void broadcast_rows(std::int64_t rows, std::int64_t cols, float const* __restrict a, M const* __restrict m,
                      float* __restrict adv, float* __restrict ret) const {
    broadcast_rows_fn(
        rows, cols, [=](std::int64_t i) { return a[i]; }, [=](std::int64_t i) -> void const* { return a + i; }, m, adv, ret);
  }

  //! broadcast_rows with the row value computed on the fly: a(i) = value(i), fused so the per-row
  //! scratch array and its extra pass disappear. touch(i) returns the address value(i) will read
  //! at random (a group table entry); it is prefetched a few rows ahead so many rows and short
  //! responses do not wait on cache misses one at a time. Outputs larger than
  //! stream_store_bytes are written with non-temporal stores (as memcpy does for large copies):
  //! a regular store first reads the line it writes, which would add the whole output to the
  //! memory traffic, and an output that size would not stay in cache for its reader anyway.
  template <class F, class Touch, class M>
  void broadcast_rows_fn(std::int64_t rows, std::int64_t cols, F value, Touch touch, M const* __restrict m,
                         float* __restrict adv, float* __restrict ret) const {
    constexpr std::int64_t ahead = 32;
    double const out_bytes = static_cast<double>(rows) * static_cast<double>(cols) * sizeof(float) * (ret ? 2.0 : 1.0);
    bool const stream = out_bytes >= static_cast<double>(stream_store_bytes);
    for (std::int64_t i = 0; i < rows; ++i) {
      if (i + ahead < rows) __builtin_prefetch(touch(i + ahead), 0, 3);
      float const v = value(i);
      M const* __restrict mr = m + i * cols;
      if (stream) {
        if (ret) stream_row<true>(v, mr, adv + i * cols, ret + i * cols, cols);
        else stream_row<false>(v, mr, adv + i * cols, nullptr, cols);
        continue;
      }
      float* __restrict ar = adv + i * cols;
      if (ret) {
        float* __restrict rr = ret + i * cols;
        for (std::int64_t t = 0; t < cols; ++t) {
          float const x = mr[t] != M(0) ? v : 0.0f;
          ar[t] = x;
          rr[t] = x;
        }
      } else {
        for (std::int64_t t = 0; t < cols; ++t) ar[t] = mr[t] != M(0) ? v : 0.0f;
      }
    }
    if (stream) store_fence();
  }

  //! Output size from which the broadcast bypasses the cache (see broadcast_rows_fn).
  static constexpr std::size_t stream_store_bytes = std::size_t{16} << 20;

 private:
  //! out[t] = m[t] ? v : 0 for t < n (and the same into out2 when Two) with non-temporal stores
  //! (SSE2 where available: 16-byte aligned movntps for the body, movnti for the unaligned head
  //! and the tail). Both outputs are written from one read of the mask row.
  template <bool Two, class M>
  static void stream_row(float v, M const* __restrict m, float* __restrict out, float* __restrict out2, std::int64_t n) {
#if defined(__SSE2__)
    auto scalar = [&](std::int64_t t) {
      float const x = m[t] != M(0) ? v : 0.0f;
      int bits;
      std::memcpy(&bits, &x, sizeof bits);
      _mm_stream_si32(reinterpret_cast<int*>(out + t), bits);
      if constexpr (Two) _mm_stream_si32(reinterpret_cast<int*>(out2 + t), bits);
    };
    // the head runs until out is 16-byte aligned; out2 (same row offset in a buffer of the same
    // alignment class, in practice) is stored aligned when it is, unaligned-then-flushed otherwise
    std::int64_t t = 0;
    for (; t < n && (reinterpret_cast<std::uintptr_t>(out + t) & 15u) != 0; ++t) scalar(t);
    bool const aligned2 = !Two || (reinterpret_cast<std::uintptr_t>(out2 + t) & 15u) == 0;
    __m128 const vv = _mm_set1_ps(v);
    for (; t + 4 <= n; t += 4) {
      __m128 x;
      if constexpr (std::is_same_v<M, float>) {
        // m != 0 exactly as the scalar test: NaN counts as set, +0 and -0 as clear
        x = _mm_andnot_ps(_mm_cmpeq_ps(_mm_loadu_ps(m + t), _mm_setzero_ps()), vv);
      } else if constexpr (std::is_same_v<M, std::int32_t>) {
        // verl's int32 mask: the same test on four lanes (m == 0 -> 0, anything else -> v)
        __m128i const mi = _mm_loadu_si128(reinterpret_cast<__m128i const*>(m + t));
        x = _mm_andnot_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(mi, _mm_setzero_si128())), vv);
      } else {
        x = _mm_setr_ps(m[t] != M(0) ? v : 0.0f, m[t + 1] != M(0) ? v : 0.0f, m[t + 2] != M(0) ? v : 0.0f,
                        m[t + 3] != M(0) ? v : 0.0f);
      }
      _mm_stream_ps(out + t, x);
      if constexpr (Two) {
        if (aligned2) _mm_stream_ps(out2 + t, x);
        else _mm_storeu_ps(out2 + t, x);
      }
    }
    for (; t < n; ++t) scalar(t);
#else
    for (std::int64_t t = 0; t < n; ++t) {
      out[t] = m[t] != M(0) ? v : 0.0f;
      if constexpr (Two) out2[t] = out[t];
    }
#endif
  }

  //! Orders the non-temporal stores before anything that follows (another thread may read them).
  static void store_fence() {
#if defined(__SSE2__)
    _mm_sfence();
#endif
  }

 public:
  template <class V, class F>
  V reduce(std::int64_t n, V init, F f) const {
    V acc = init;
    for (std::int64_t i = 0; i < n; ++i) acc = acc + f(i);
    return acc;
  }

  //! min over i of f(i) (f returns math::first_index::none when i does not qualify).
  template <class F>
  std::int64_t min_index(std::int64_t n, F f) const {
    for (std::int64_t i = 0; i < n; ++i) {
      std::int64_t const k = f(i);
      if (k != math::first_index::none) return k;
    }
    return math::first_index::none;
  }

  //! out(i, sum_t f(i, t)) for each row.
  template <class V, class F, class Out>
  void row_reduce(std::int64_t rows, std::int64_t cols, V init, F f, Out out) const {
    for (std::int64_t i = 0; i < rows; ++i) {
      V acc = init;
      for (std::int64_t t = 0; t < cols; ++t) acc = acc + f(i, t);
      out(i, acc);
    }
  }

  //! result[g] = merge over rows i with group[i] == g (in row order) of value(i); 'identity' for
  //! empty groups. group ids must already be validated to lie in [0, groups).
  template <class V, class F, class Merge>
  void group_reduce(std::int64_t rows, std::int64_t const* group, std::int64_t groups, V identity, F value, Merge merge,
                    V* result) const {
    for (std::int64_t g = 0; g < groups; ++g) result[g] = identity;
    // Shuffled group ids make this a random read-modify-write per row: prefetch the entry a few
    // rows ahead (ids are read in order) so the misses overlap instead of serialising.
    // merge(r, value(i)) may take a row value of another type than V (the CPU group
    // statistics push doubles, see welford_push).
    constexpr std::int64_t ahead = 16;
    for (std::int64_t i = 0; i < rows; ++i) {
      if (i + ahead < rows) __builtin_prefetch(result + group[i + ahead], 1, 3);
      V& r = result[group[i]];
      r = merge(r, value(i));
    }
  }

  //! Up to k indices i < n with candidate(i), largest key(i) first, ties by lower index.
  template <class Key, class Cand>
  std::int64_t top_k(std::int64_t n, Key key, Cand candidate, std::int64_t k, buffer<std::int64_t>& out) const {
    std::vector<std::pair<double, std::int64_t>> c;
    for (std::int64_t i = 0; i < n; ++i)
      if (candidate(i)) c.emplace_back(key(i), i);
    std::int64_t const m = std::min<std::int64_t>(k, static_cast<std::int64_t>(c.size()));
    auto better = [](auto const& a, auto const& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
    std::partial_sort(c.begin(), c.begin() + m, c.end(), better);
    out = buffer<std::int64_t>(m);
    for (std::int64_t j = 0; j < m; ++j) out[j] = c[static_cast<std::size_t>(j)].second;
    return m;
  }

  template <class T>
  T load(T const* p, std::int64_t i) const { return p[i]; }
};

// ---------------------------------------------------------------------------------------------
// Without nvcc the CUDA specialization explains how to get one (style 2.5).
#if !RLFLOW_HAS_CUDA
template <>
struct exec<cuda::tag> {
  template <class P>
  explicit exec(P const&) {
    static_assert(dependent_false<P>,
                  "rlflow::kernels (rlflow::cuda::par, ...): this translation unit was not compiled by nvcc; build it as a "
                  ".cu file or pass rlflow::cpu::par");
  }
};
#endif

//! The exec for a policy object.
template <class Policy>
exec<system_of_t<Policy>> make_exec(Policy const& p) {
  return exec<system_of_t<Policy>>(p);
}

// ---------------------------------------------------------------------------------------------
// Mask access: any nonzero element is a valid token (float 0/1, uint8_t, bool).

template <class M>
RLFLOW_HD inline bool on(M m) { return m != M(0); }

//! Mask element types (nonzero = valid): float, bool, uint8 and int32 (verl's response_mask
//! dtype, read in place so the advantage path from verl's tensors converts nothing).
template <class M>
inline constexpr bool is_mask_type = std::is_same_v<M, float> || std::is_same_v<M, bool> || std::is_same_v<M, std::uint8_t> ||
                                     std::is_same_v<M, std::int32_t>;

// ---------------------------------------------------------------------------------------------
// Host-side argument checks (shapes and configuration; values are checked on the backend).

inline void expect_size(const char* fn, const char* name, std::size_t got, std::int64_t want, const char* shape) {
  if (static_cast<std::int64_t>(got) != want)
    throw shape_error(msg("rlflow::kernels::", fn, ": '", name, "' has ", got, " elements but must have ", shape, " = ", want,
                          "; pass a buffer of that shape"));
}

inline void expect_dims(const char* fn, Dims d) {
  if (d.rows < 0 || d.cols < 0)
    throw shape_error(msg("rlflow::kernels::", fn, ": dims (B = ", d.rows, ", T = ", d.cols, ") must be non-negative"));
}

//! A named (B, T) argument for expect_token_spans.
struct token_span {
  const char* name;
  std::size_t size;
};
//! Checks the dims and that every listed argument holds B*T elements (the shared preamble of the
//! token-level kernels).
inline void expect_token_spans(const char* fn, Dims d, std::initializer_list<token_span> spans) {
  expect_dims(fn, d);
  for (auto const& s : spans) expect_size(fn, s.name, s.size, d.numel(), "B*T");
}

inline std::string where(Dims d, std::int64_t flat) {
  if (d.cols <= 0) return msg("element ", flat);
  return msg("row ", flat / d.cols, ", token ", flat % d.cols);
}

//! Throws value_error naming the first valid position of a (B, T) input that is NaN or inf.
template <class Ex, class M>
void check_finite_tokens(Ex const& ex, const char* fn, const char* name, Dims d, float const* x, M const* mask) {
  if (!x) return;
  std::int64_t const bad = ex.min_index(d.numel(), [=] RLFLOW_HD(std::int64_t i) -> std::int64_t {
    return (on(mask[i]) && !math::finite(x[i])) ? i : math::first_index::none;
  });
  if (bad != math::first_index::none)
    throw value_error(msg("rlflow::kernels::", fn, ": '", name, "' is ", ex.load(x, bad), " at ", where(d, bad),
                          " (a valid response token); NaN/inf inputs are rejected rather than propagated - fix the "
                          "producer of '", name, "' or mask the token out"));
}

[[noreturn]] inline void throw_nonfinite_row(const char* fn, const char* name, float v, std::int64_t row) {
  throw value_error(msg("rlflow::kernels::", fn, ": '", name, "' is ", v, " at row ", row,
                        "; NaN/inf scores are rejected rather than propagated - fix the reward function for that row"));
}

[[noreturn]] inline void throw_bad_group(const char* fn, std::int64_t id, std::int64_t row, std::int64_t rows) {
  throw value_error(msg("rlflow::kernels::", fn, ": group id ", id, " at row ", row, " is outside [0, B = ", rows,
                        "); group ids must be dense - map uids with rlflow::kernels::group_index"));
}

//! Throws value_error naming the first row whose per-row input is NaN or inf.
template <class Ex>
void check_finite_rows(Ex const& ex, const char* fn, const char* name, std::int64_t rows, float const* x) {
  std::int64_t const bad = ex.min_index(rows, [=] RLFLOW_HD(std::int64_t i) -> std::int64_t {
    return !math::finite(x[i]) ? i : math::first_index::none;
  });
  if (bad != math::first_index::none) throw_nonfinite_row(fn, name, ex.load(x, bad), bad);
}

//! Group ids must be dense: 0 <= group[i] < rows (map uids with rlflow::kernels::group_index).
template <class Ex>
void check_groups(Ex const& ex, const char* fn, std::int64_t rows, std::int64_t const* group) {
  std::int64_t const bad = ex.min_index(rows, [=] RLFLOW_HD(std::int64_t i) -> std::int64_t {
    return (group[i] < 0 || group[i] >= rows) ? i : math::first_index::none;
  });
  if (bad != math::first_index::none) throw_bad_group(fn, ex.load(group, bad), bad, rows);
}

//! check_finite_rows(x) then check_groups(group) in one pass over the rows (CPU), returning the
//! size of the group table the rows need (largest id + 1; 0 for no rows). Throws the same errors
//! in the same order: the first non-finite x wins over any bad group id.
inline std::int64_t check_rows_and_groups(exec<cpu::tag> const&, const char* fn, const char* name, std::int64_t rows,
                                          float const* x, std::int64_t const* group) {
  std::int64_t bad_x = math::first_index::none, bad_g = math::first_index::none, top = -1;
  for (std::int64_t i = 0; i < rows; ++i) {
    std::int64_t const gi = group[i];
    top = gi > top ? gi : top;
    if (!math::finite(x[i]) || gi < 0 || gi >= rows) [[unlikely]] {
      if (!math::finite(x[i])) {
        bad_x = i;
        break;
      }
      if (bad_g == math::first_index::none) bad_g = i;
    }
  }
  if (bad_x != math::first_index::none) throw_nonfinite_row(fn, name, x[bad_x], bad_x);
  if (bad_g != math::first_index::none) throw_bad_group(fn, group[bad_g], bad_g, rows);
  return top + 1;
}

}  // namespace rlflow::kernels::detail

#if RLFLOW_HAS_CUDA
#include <rlflow/kernels/cuda/exec.cuh>
#endif
