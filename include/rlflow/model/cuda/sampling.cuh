// rlflow/model/cuda/sampling.cuh: next-token sampling on CUDA (nvcc only), the device twin of
// engine/sampling.hpp's min_p_filter + sample_token: greedy (first maximal logit), temperature,
// top-k, top-p, min-p and the inverse-CDF draw u = uniform01(philox4x32(seed, counter, "samp")),
// with the same candidate order (logit descending, id ascending when a filter is on; id order
// otherwise). Each draw has its own logits row, vocabulary, filters, seed and counter (the paged
// engine's requests), and several draws may read one row (a group's n first tokens). The
// candidate sort is one cub::DeviceSegmentedRadixSort over 64-bit keys (order-preserving logit
// bits, then the id), so ties are broken by the id without relying on stability; draws are
// sorted in chunks of a bounded number of keys, which bounds the scratch. Sums and scans run in
// double with CUB block primitives (one block per draw). Also returns the log-prob of the chosen
// token under softmax(logits / T) over the draw's vocabulary (T = 1 when greedy), as
// layers::logprob_forward_row. Defines rlflow::kernels::cuda::model::DrawSpec and Sampler.
#pragma once
#if !defined(__CUDACC__)
#error "rlflow/model/cuda/sampling.cuh needs nvcc; build this translation unit as a .cu file"
#endif
#include <cuda_runtime.h>
#include <cub/block/block_reduce.cuh>                  // cub::BlockReduce
#include <cub/block/block_scan.cuh>                    // cub::BlockScan
#include <cub/device/device_segmented_radix_sort.cuh>  // cub::DeviceSegmentedRadixSort
#include <cuda/functional>                             // ::cuda::maximum, ::cuda::minimum
#include <algorithm>                                   // std::max, std::clamp
#include <climits>                                     // INT_MAX
#include <cmath>                                       // INFINITY
#include <cstdint>
#include <vector>

#include <rlflow/core/config.hpp>                     // RLFLOW_KERNEL
#include <rlflow/core/error.hpp>                      // value_error
#include <rlflow/model/random.hpp>               // philox4x32, uniform01 (host and device)
#include <rlflow/model/cuda/gpt_layers.cuh>   // RLFLOW_CUDA_CHECK, device_buffer

namespace rlflow::kernels::cuda::model {

//! One draw of Sampler::sample_draws: the logits row it reads and how it samples (a request's
//! filters, the sample's seed and its token's counter). Trivially copyable: it goes to the device.
struct DrawSpec {
  std::int64_t row = 0;          //!< the logits row (rows of the sampler's stride)
  std::uint64_t seed = 0;        //!< philox key
  std::uint64_t counter = 0;     //!< philox counter (the token's index)
  float temperature = 1.0f;      //!< 0: greedy
  float top_p = 1.0f;            //!< 1: off
  float min_p = 0.0f;            //!< 0: off
  int top_k = 0;                 //!< 0: off
  int vocab = 0;                 //!< ids [0, vocab) are sampled and scored (at most the stride)
};

namespace sampling_detail {

constexpr int block = 256;
constexpr std::uint64_t samp_stream = 0x73616d70u;  // "samp": the counter_hi the CPU sampler uses

struct arg_best {
  float v;
  int i;
};
struct arg_best_op {
  __device__ arg_best operator()(arg_best const& a, arg_best const& b) const {
    if (a.i < 0) return b;
    if (b.i < 0) return a;
    if (b.v > a.v || (b.v == a.v && b.i < a.i)) return b;
    return a;
  }
};

using reduce_d = cub::BlockReduce<double, block>;
using reduce_i = cub::BlockReduce<int, block>;
using reduce_a = cub::BlockReduce<arg_best, block>;
using scan_d = cub::BlockScan<double, block>;

struct shared_t {
  union {
    typename reduce_d::TempStorage rd;
    typename reduce_i::TempStorage ri;
    typename reduce_a::TempStorage ra;
    typename scan_d::TempStorage sd;
  } u;
  double d;
  int i;
};

//! Order-preserving 64-bit key: ascending key order = (logit descending, id ascending).
//! -0.0 is folded into +0.0 so the two compare equal, as the CPU comparator's '>' does.
__device__ inline std::uint64_t candidate_key(float logit, int id) {
  float const f = logit == 0.0f ? 0.0f : logit;
  std::uint32_t const b = __float_as_uint(f);
  std::uint32_t const asc = (b & 0x80000000u) ? ~b : (b | 0x80000000u);  // ascending in the float's order
  return (std::uint64_t(~asc) << 32) | std::uint32_t(id);
}

//! Block-wide double sum of f(i) over [0, n), returned to every thread.
template <class F>
__device__ double block_sum(F f, int n, shared_t& sh) {
  double s = 0.0;
  for (int i = threadIdx.x; i < n; i += block) s += f(i);
  double const t = reduce_d(sh.u.rd).Sum(s);
  if (threadIdx.x == 0) sh.d = t;
  __syncthreads();
  double const r = sh.d;
  __syncthreads();
  return r;
}
//! Block-wide double max of f(i) over [0, n), returned to every thread.
template <class F>
__device__ double block_max(F f, int n, shared_t& sh) {
  double m = -INFINITY;
  for (int i = threadIdx.x; i < n; i += block) m = fmax(m, f(i));
  double const t = reduce_d(sh.u.rd).Reduce(m, ::cuda::maximum<>{});
  if (threadIdx.x == 0) sh.d = t;
  __syncthreads();
  double const r = sh.d;
  __syncthreads();
  return r;
}
//! First i in [0, n) whose inclusive prefix sum cum_i = w(0) + ... + w(i) satisfies
//! (strict ? thr < cum_i : cum_i >= thr); n when none. Tiles of 'block' items, carried prefix.
template <class W>
__device__ int block_find_first(W w, int n, double thr, bool strict, shared_t& sh) {
  double carry = 0.0;
  for (int base = 0; base < n; base += block) {
    int const i = base + int(threadIdx.x);
    double const wi = i < n ? w(i) : 0.0;
    double cum = 0.0, agg = 0.0;
    scan_d(sh.u.sd).InclusiveSum(wi, cum, agg);
    cum += carry;
    __syncthreads();  // the scan's storage is reused by the reduction below
    int const cand = (i < n && (strict ? thr < cum : cum >= thr)) ? i : INT_MAX;
    int const first = reduce_i(sh.u.ri).Reduce(cand, ::cuda::minimum<>{});
    if (threadIdx.x == 0) sh.i = first;
    __syncthreads();
    int const f = sh.i;
    __syncthreads();
    if (f != INT_MAX) return f;
    carry += agg;
  }
  return n;
}

//! A draw on the device: its spec and where its sorted keys start in the chunk's key buffer
//! (-1: unfiltered, candidates in id order).
struct draw_t {
  DrawSpec s;
  std::int64_t key_off;
};

//! min-p's cut for the block's draw: max z + T log(min_p) over its vocabulary (engine::min_p_filter's),
//! or -inf when min-p is off. Every thread gets it.
__device__ inline double min_p_cut(DrawSpec const& sp, float const* z, shared_t& sh) {
  if (!(sp.min_p > 0.0f && sp.temperature > 0.0f)) return -INFINITY;
  double const m = block_max([&](int v) { return double(z[v]); }, sp.vocab, sh);
  return m + double(sp.temperature) * log(double(sp.min_p));
}

//! One block per draw of a chunk: the sort keys of a filtered draw's candidates (its logits after
//! the min-p cut), at its key_off.
RLFLOW_MODEL_KERNEL void draw_keys_kernel(std::uint64_t* keys, float const* logits, std::int64_t ld, draw_t const* draws) {
  __shared__ shared_t sh;
  draw_t const dr = draws[blockIdx.x];
  if (dr.key_off < 0) return;  // the whole block leaves: no barrier is skipped
  float const* z = logits + dr.s.row * ld;
  double const cut = min_p_cut(dr.s, z, sh);
  for (int v = threadIdx.x; v < dr.s.vocab; v += block)
    keys[dr.key_off + v] = candidate_key(double(z[v]) < cut ? -INFINITY : z[v], v);
}

//! One block per draw of a chunk: samples its token and its log-prob. sorted holds the filtered
//! draws' candidate keys in order (null when none of the chunk's draws is filtered).
RLFLOW_MODEL_KERNEL void sample_kernel(std::int32_t* tok, float* logp, float const* logits, std::int64_t ld,
                                       draw_t const* draws, std::uint64_t const* sorted) {
  __shared__ shared_t sh;
  draw_t const dr = draws[blockIdx.x];
  DrawSpec const& sp = dr.s;
  float const* z = logits + sp.row * ld;
  int const V = sp.vocab;
  int chosen = 0;
  if (sp.temperature == 0.0f) {  // greedy: the first maximal logit
    arg_best b{0.0f, -1};
    for (int v = threadIdx.x; v < V; v += block)
      if (b.i < 0 || z[v] > b.v) b = arg_best{z[v], v};
    arg_best const best = reduce_a(sh.u.ra).Reduce(b, arg_best_op{});
    if (threadIdx.x == 0) sh.i = best.i < 0 ? 0 : best.i;
    __syncthreads();
    chosen = sh.i;
    __syncthreads();
  } else {
    double const cut = min_p_cut(sp, z, sh);
    auto zf = [&](int v) -> double {  // the logit after the min-p cut
      double const x = z[v];
      return x < cut ? -INFINITY : x;
    };
    double const inv_t = 1.0 / double(sp.temperature);
    double const m = block_max([&](int v) { return zf(v) * inv_t; }, V, sh);
    double const u = ::rlflow::model::uniform01(::rlflow::model::philox4x32(sp.seed, sp.counter, samp_stream));
    std::uint64_t const* keys = sorted && dr.key_off >= 0 ? sorted + dr.key_off : nullptr;
    auto id_at = [&](int i) -> int { return keys ? int(std::uint32_t(keys[i])) : i; };
    auto w_at = [&](int i) -> double { return exp(zf(id_at(i)) * inv_t - m); };
    int kept = V;
    if (keys) {
      if (sp.top_k > 0 && sp.top_k < V) kept = sp.top_k;
      if (sp.top_p < 1.0f) {
        double const total = block_sum(w_at, kept, sh);
        int const f = block_find_first(w_at, kept, double(sp.top_p) * total, false, sh);
        if (f < kept) kept = f + 1;
      }
    }
    double const total = block_sum(w_at, kept, sh);
    int const f = block_find_first(w_at, kept, u * total, true, sh);
    if (f < kept) {
      chosen = id_at(f);
    } else {  // rounding left target == total: the last candidate with nonzero weight
      int last = -1;
      for (int i = threadIdx.x; i < kept; i += block)
        if (w_at(i) > 0.0) last = i;
      int const l = reduce_i(sh.u.ri).Reduce(last, ::cuda::maximum<>{});
      if (threadIdx.x == 0) sh.i = l;
      __syncthreads();
      int const li = sh.i;
      __syncthreads();
      chosen = id_at(li >= 0 ? li : 0);
    }
  }
  // log softmax(z * inv_tf)[chosen] over the unfiltered vocabulary, inv_tf = float(1 / T) as
  // layers::logprob_forward_row
  float const inv_tf = sp.temperature > 0.0f ? 1.0f / sp.temperature : 1.0f;
  double const mz = block_max([&](int v) { return double(z[v]) * inv_tf; }, V, sh);
  double const s = block_sum([&](int v) { return exp(double(z[v]) * inv_tf - mz); }, V, sh);
  if (threadIdx.x == 0) {
    tok[blockIdx.x] = chosen;
    logp[blockIdx.x] = float(double(z[chosen]) * inv_tf - (mz + log(s)));
  }
}

}  // namespace sampling_detail

//! Samples one token per draw from device logits rows on a stream; owns its scratch (draws, sort
//! keys, CUB temporary storage, outputs). The device twin of engine::min_p_filter +
//! engine::sample_token plus the rollout's log-prob. verl: vLLM's sampler (temperature / top_k /
//! top_p / min_p).
class Sampler {
 public:
  //! By default at most this many candidate keys are sorted at once (draws are split into
  //! chunks): with the CUB scratch about 3 x 8 bytes each, 384 MiB.
  static constexpr std::int64_t default_max_sort_keys = std::int64_t{1} << 24;
  //! 'max_sort_keys': the most keys one chunk sorts (a draw wider than that is sorted alone).
  explicit Sampler(std::int64_t max_sort_keys = default_max_sort_keys)
      : max_sort_keys_(std::clamp<std::int64_t>(max_sort_keys, 1, INT_MAX)) {}

  //! Samples draws [0, n) (host specs) from the device logits ('rows' rows of stride ld floats).
  //! Writes host tokens (n) and log-probs (n) and synchronises the stream. Checks every spec first.
  void sample_draws(float const* d_logits, std::int64_t rows, std::int64_t ld, DrawSpec const* specs, int n,
                    std::int32_t* tokens, float* log_probs, cudaStream_t stream) {
    if (n < 1) return;
    namespace sd = sampling_detail;
    for (int i = 0; i < n; ++i) {
      DrawSpec const& s = specs[i];
      if (!(s.temperature >= 0.0f && s.temperature < INFINITY) || s.top_k < 0 || !(s.top_p > 0.0f && s.top_p <= 1.0f) ||
          !(s.min_p >= 0.0f && s.min_p <= 1.0f) || s.vocab < 1 || s.vocab > ld || s.row < 0 || s.row >= rows ||
          ld > std::int64_t(INT_MAX))
        throw value_error(msg("rlflow::kernels::cuda::model::Sampler: draw ", i, " has temperature = ", s.temperature,
                              ", top_k = ", s.top_k, ", top_p = ", s.top_p, ", min_p = ", s.min_p, ", vocab = ", s.vocab,
                              ", row = ", s.row, " (", rows, " rows of stride ", ld, "); use a finite temperature >= 0, top_k >= 0, "
                              "0 < top_p <= 1, 0 <= min_p <= 1, 1 <= vocab <= the row stride <= INT_MAX, 0 <= row < rows"));
    }
    // chunks [first[c], first[c + 1]) of at most max_sort_keys_ filtered keys (at least one draw);
    // key offsets are relative to the chunk, segments' begin / end offsets are listed per chunk
    host_draws_.resize(std::size_t(n));
    seg_begin_.clear();
    seg_end_.clear();
    chunks_.clear();  // per chunk: first draw, first segment, keys
    std::int64_t keys = 0;
    for (int i = 0; i < n; ++i) {
      DrawSpec const& s = specs[i];
      bool const filtered = s.temperature > 0.0f && ((s.top_k > 0 && s.top_k < s.vocab) || s.top_p < 1.0f);
      std::int64_t const add = filtered ? s.vocab : 0;
      if (chunks_.empty() || (keys > 0 && keys + add > max_sort_keys_)) {
        chunks_.push_back({i, int(seg_begin_.size()), 0});
        keys = 0;
      }
      host_draws_[std::size_t(i)] = {s, filtered ? keys : -1};
      if (filtered) {
        seg_begin_.push_back(int(keys));
        seg_end_.push_back(int(keys + add));
      }
      keys += add;
      chunks_.back().keys = keys;
    }
    int const nc = int(chunks_.size()), ns = int(seg_begin_.size());
    // every buffer at its largest size before the first launch (growing one frees memory)
    std::int64_t most_keys = 0;
    std::size_t temp_bytes = 0;
    for (int c = 0; c < nc; ++c) {
      Chunk const& k = chunks_[std::size_t(c)];
      int const segs = (c + 1 < nc ? chunks_[std::size_t(c) + 1].seg : ns) - k.seg;
      if (segs == 0) continue;
      most_keys = std::max(most_keys, k.keys);
      std::size_t b = 0;
      RLFLOW_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortKeys(nullptr, b, static_cast<std::uint64_t const*>(nullptr),
                                                                static_cast<std::uint64_t*>(nullptr), int(k.keys), segs,
                                                                static_cast<int const*>(nullptr), static_cast<int const*>(nullptr),
                                                                0, 64, stream));
      temp_bytes = std::max(temp_bytes, b);
    }
    auto* d_draws = draws_.ensure<sd::draw_t>(std::size_t(n));
    std::int32_t* d_tok = tok_.ensure<std::int32_t>(std::size_t(n));
    float* d_lp = lp_.ensure<float>(std::size_t(n));
    int* d_segs = ns > 0 ? offs_.ensure<int>(2 * std::size_t(ns)) : nullptr;
    std::uint64_t* keys_in = most_keys > 0 ? keys_in_.ensure<std::uint64_t>(std::size_t(most_keys)) : nullptr;
    std::uint64_t* sorted = most_keys > 0 ? keys_out_.ensure<std::uint64_t>(std::size_t(most_keys)) : nullptr;
    void* temp = temp_bytes > 0 ? temp_.ensure<unsigned char>(temp_bytes) : nullptr;
    RLFLOW_CUDA_CHECK(cudaMemcpyAsync(d_draws, host_draws_.data(), sizeof(sd::draw_t) * std::size_t(n), cudaMemcpyHostToDevice, stream));
    if (ns > 0) {
      seg_begin_.insert(seg_begin_.end(), seg_end_.begin(), seg_end_.end());  // begin offsets, then end offsets
      RLFLOW_CUDA_CHECK(cudaMemcpyAsync(d_segs, seg_begin_.data(), sizeof(int) * 2 * std::size_t(ns), cudaMemcpyHostToDevice, stream));
    }
    for (int c = 0; c < nc; ++c) {
      Chunk const& k = chunks_[std::size_t(c)];
      int const first = k.first, count = (c + 1 < nc ? chunks_[std::size_t(c) + 1].first : n) - first;
      int const segs = (c + 1 < nc ? chunks_[std::size_t(c) + 1].seg : ns) - k.seg;
      if (segs > 0) {  // the chunk's filtered draws: their keys, sorted per draw
        sd::draw_keys_kernel<<<unsigned(count), sd::block, 0, stream>>>(keys_in, d_logits, ld, d_draws + first);
        RLFLOW_CUDA_CHECK(cudaGetLastError());
        std::size_t b = temp_bytes;
        int const* begins = d_segs + k.seg;
        int const* ends = d_segs + ns + k.seg;
        RLFLOW_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortKeys(temp, b, keys_in, sorted, int(k.keys), segs, begins, ends, 0, 64,
                                                                  stream));
      }
      sd::sample_kernel<<<unsigned(count), sd::block, 0, stream>>>(d_tok + first, d_lp + first, d_logits, ld, d_draws + first,
                                                                   segs > 0 ? sorted : nullptr);
      RLFLOW_CUDA_CHECK(cudaGetLastError());
    }
    RLFLOW_CUDA_CHECK(cudaMemcpyAsync(tokens, d_tok, sizeof(std::int32_t) * std::size_t(n), cudaMemcpyDeviceToHost, stream));
    RLFLOW_CUDA_CHECK(cudaMemcpyAsync(log_probs, d_lp, sizeof(float) * std::size_t(n), cudaMemcpyDeviceToHost, stream));
    RLFLOW_CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  //! Samples rows [0, n) of d_logits (n, V) with one set of filters; seeds (n) on the host;
  //! counter is the step index (the static engine's batch). Writes host tokens (n) and log-probs
  //! (n) and synchronises the stream.
  void sample(float const* d_logits, int n, int V, float temperature, int top_k, float top_p, std::uint64_t const* seeds,
              std::uint64_t counter, std::int32_t* tokens, float* log_probs, cudaStream_t stream) {
    specs_.resize(std::size_t(std::max(n, 0)));
    for (int i = 0; i < n; ++i)
      specs_[std::size_t(i)] = DrawSpec{i, seeds[i], counter, temperature, top_p, 0.0f, top_k, V};
    sample_draws(d_logits, n, V, specs_.data(), n, tokens, log_probs, stream);
  }

  //! Frees all scratch (the rollout's sleep()).
  void release() {
    for (auto* b : buffers()) b->release();
  }
  std::size_t memory_bytes() const {
    std::size_t s = 0;
    for (auto* b : const_cast<Sampler*>(this)->buffers()) s += b->bytes();
    return s;
  }

 private:
  struct Chunk {
    int first, seg;
    std::int64_t keys;
  };
  std::vector<layers::device_buffer*> buffers() { return {&draws_, &tok_, &lp_, &keys_in_, &keys_out_, &offs_, &temp_}; }
  std::int64_t max_sort_keys_;
  layers::device_buffer draws_, tok_, lp_, keys_in_, keys_out_, offs_, temp_;
  std::vector<DrawSpec> specs_;
  std::vector<sampling_detail::draw_t> host_draws_;
  std::vector<int> seg_begin_, seg_end_;
  std::vector<Chunk> chunks_;
};

}  // namespace rlflow::kernels::cuda::model
