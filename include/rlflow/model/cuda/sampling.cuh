// rlflow/model/cuda/sampling.cuh: next-token sampling on CUDA (nvcc only), the device twin of
// engine/sampling.hpp's sample_token: greedy (first maximal logit), temperature, top-k, top-p and
// the inverse-CDF draw u = uniform01(philox4x32(seed, counter, "samp")), with the same candidate
// order (logit descending, id ascending when a filter is on; id order otherwise). The candidate
// sort is one cub::DeviceSegmentedRadixSort over 64-bit keys (order-preserving logit bits, then
// the id), so ties are broken by the id without relying on sort stability. Sums and scans run in
// double with CUB block primitives (one block per row). Also returns the log-prob of the chosen
// token under softmax(logits / T) (T = 1 when greedy), as layers::logprob_forward_row.
// Defines rlflow::kernels::cuda::model::Sampler.
#pragma once
#if !defined(__CUDACC__)
#error "rlflow/model/cuda/sampling.cuh needs nvcc; build this translation unit as a .cu file"
#endif
#include <cuda_runtime.h>
#include <cub/block/block_reduce.cuh>                  // cub::BlockReduce
#include <cub/block/block_scan.cuh>                    // cub::BlockScan
#include <cub/device/device_segmented_radix_sort.cuh>  // cub::DeviceSegmentedRadixSort
#include <cuda/functional>                             // ::cuda::maximum, ::cuda::minimum
#include <climits>                                     // INT_MAX
#include <cstdint>
#include <vector>

#include <rlflow/core/config.hpp>                     // RLFLOW_KERNEL
#include <rlflow/core/error.hpp>                      // value_error
#include <rlflow/model/random.hpp>               // philox4x32, uniform01 (host and device)
#include <rlflow/model/cuda/gpt_layers.cuh>   // RLFLOW_CUDA_CHECK, device_buffer

namespace rlflow::kernels::cuda::model {

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

RLFLOW_MODEL_KERNEL void make_keys_kernel(std::uint64_t* keys, float const* logits, std::int64_t total, int V) {
  for (std::int64_t t = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; t < total; t += std::int64_t(gridDim.x) * blockDim.x)
    keys[t] = candidate_key(logits[t], int(t % V));
}
RLFLOW_MODEL_KERNEL void segment_offsets_kernel(int* offs, int n, int V) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i <= n; i += gridDim.x * blockDim.x) offs[i] = i * V;
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

//! One block per row: samples the token of row i and its log-prob. sorted (n, V) holds the
//! candidate keys in order when a filter is on (null otherwise).
RLFLOW_MODEL_KERNEL void sample_kernel(std::int32_t* tok, float* logp, float const* logits, std::uint64_t const* sorted,
                                 std::uint64_t const* seeds, int V, float temperature, int top_k, float top_p,
                                 std::uint64_t counter) {
  __shared__ shared_t sh;
  std::size_t const row = blockIdx.x;
  float const* z = logits + row * V;
  int chosen = 0;
  if (temperature == 0.0f) {  // greedy: the first maximal logit
    arg_best b{0.0f, -1};
    for (int v = threadIdx.x; v < V; v += block)
      if (b.i < 0 || z[v] > b.v) b = arg_best{z[v], v};
    arg_best const best = reduce_a(sh.u.ra).Reduce(b, arg_best_op{});
    if (threadIdx.x == 0) sh.i = best.i < 0 ? 0 : best.i;
    __syncthreads();
    chosen = sh.i;
    __syncthreads();
  } else {
    double const inv_t = 1.0 / double(temperature);
    double const m = block_max([&](int v) { return double(z[v]) * inv_t; }, V, sh);
    double const u = ::rlflow::model::uniform01(::rlflow::model::philox4x32(seeds[row], counter, samp_stream));
    std::uint64_t const* keys = sorted ? sorted + row * V : nullptr;
    auto id_at = [&](int i) -> int { return keys ? int(std::uint32_t(keys[i])) : i; };
    auto w_at = [&](int i) -> double { return exp(double(z[id_at(i)]) * inv_t - m); };
    int kept = V;
    if (keys) {
      if (top_k > 0 && top_k < V) kept = top_k;
      if (top_p < 1.0f) {
        double const total = block_sum(w_at, kept, sh);
        int const f = block_find_first(w_at, kept, double(top_p) * total, false, sh);
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
  // log softmax(z * inv_tf)[chosen], inv_tf = float(1 / T) as layers::logprob_forward_row
  float const inv_tf = temperature > 0.0f ? 1.0f / temperature : 1.0f;
  double const mz = block_max([&](int v) { return double(z[v]) * inv_tf; }, V, sh);
  double const s = block_sum([&](int v) { return exp(double(z[v]) * inv_tf - mz); }, V, sh);
  if (threadIdx.x == 0) {
    tok[row] = chosen;
    logp[row] = float(double(z[chosen]) * inv_tf - (mz + log(s)));
  }
}

}  // namespace sampling_detail

//! Samples one token per row of device logits (n, V) on a stream; owns its scratch (sort keys,
//! CUB temporary storage, seeds, outputs). The device twin of engine::sample_token plus the
//! rollout's log-prob. verl: vLLM's sampler (temperature / top_k / top_p).
class Sampler {
 public:
  //! Samples rows [0, n) of d_logits; seeds (n) on the host; counter is the step index. Writes
  //! host tokens (n) and log-probs (n) and synchronises the stream.
  void sample(float const* d_logits, int n, int V, float temperature, int top_k, float top_p, std::uint64_t const* seeds,
              std::uint64_t counter, std::int32_t* tokens, float* log_probs, cudaStream_t stream) {
    if (n < 1) return;
    if (!(temperature >= 0.0f) || top_k < 0 || !(top_p > 0.0f && top_p <= 1.0f))
      throw value_error(msg("rlflow::kernels::cuda::model::Sampler: temperature = ", temperature, ", top_k = ", top_k,
                            ", top_p = ", top_p, " are invalid; use temperature >= 0, top_k >= 0, 0 < top_p <= 1"));
    namespace sd = sampling_detail;
    std::uint64_t* d_seeds = seeds_.ensure<std::uint64_t>(std::size_t(n));
    std::int32_t* d_tok = tok_.ensure<std::int32_t>(std::size_t(n));
    float* d_lp = lp_.ensure<float>(std::size_t(n));
    RLFLOW_CUDA_CHECK(cudaMemcpyAsync(d_seeds, seeds, sizeof(std::uint64_t) * n, cudaMemcpyHostToDevice, stream));
    bool const filtered = temperature > 0.0f && ((top_k > 0 && top_k < V) || top_p < 1.0f);
    std::uint64_t* sorted = nullptr;
    if (filtered) {
      std::int64_t const total = std::int64_t(n) * V;
      if (total > std::int64_t(INT_MAX))
        throw value_error(msg("rlflow::kernels::cuda::model::Sampler: ", n, " rows of ", V,
                              " logits exceed the sort's int range; sample fewer rows at a time"));
      std::uint64_t* keys_in = keys_in_.ensure<std::uint64_t>(std::size_t(total));
      sorted = keys_out_.ensure<std::uint64_t>(std::size_t(total));
      int* offs = offs_.ensure<int>(std::size_t(n) + 1);
      sd::make_keys_kernel<<<layers::grid_for(total), 256, 0, stream>>>(keys_in, d_logits, total, V);
      sd::segment_offsets_kernel<<<layers::grid_for(n + 1), 256, 0, stream>>>(offs, n, V);
      RLFLOW_CUDA_CHECK(cudaGetLastError());
      std::size_t temp_bytes = 0;
      RLFLOW_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortKeys(nullptr, temp_bytes, keys_in, sorted, int(total), n, offs,
                                                                offs + 1, 0, 64, stream));
      void* temp = temp_.ensure<unsigned char>(temp_bytes);
      RLFLOW_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortKeys(temp, temp_bytes, keys_in, sorted, int(total), n, offs,
                                                                offs + 1, 0, 64, stream));
    }
    sd::sample_kernel<<<unsigned(n), sd::block, 0, stream>>>(d_tok, d_lp, d_logits, sorted, d_seeds, V, temperature, top_k,
                                                             top_p, counter);
    RLFLOW_CUDA_CHECK(cudaGetLastError());
    RLFLOW_CUDA_CHECK(cudaMemcpyAsync(tokens, d_tok, sizeof(std::int32_t) * n, cudaMemcpyDeviceToHost, stream));
    RLFLOW_CUDA_CHECK(cudaMemcpyAsync(log_probs, d_lp, sizeof(float) * n, cudaMemcpyDeviceToHost, stream));
    RLFLOW_CUDA_CHECK(cudaStreamSynchronize(stream));
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
  std::vector<layers::device_buffer*> buffers() { return {&seeds_, &tok_, &lp_, &keys_in_, &keys_out_, &offs_, &temp_}; }
  layers::device_buffer seeds_, tok_, lp_, keys_in_, keys_out_, offs_, temp_;
};

}  // namespace rlflow::kernels::cuda::model
