// rlflow/kernels/cuda/exec.cuh: the CUDA backend of the RL kernels (nvcc only): exec<cuda::tag>
// runs every primitive on the policy's stream with Thrust (for_each, transform_reduce,
// CUB radix sort + reduce_by_key for groups) and CUB block reductions (one block per row).
// Scratch buffers, Thrust's and CUB's temporaries included, are stream-ordered (cudaMallocAsync)
// from the device's default pool, which keeps freed memory cached (release threshold raised once
// per device), so a step's scratch is re-used, not re-mapped. Results that the host needs (sums,
// indices) synchronise the stream. All pointers passed to the kernels must be device (or managed)
// pointers.
#pragma once
#include <cuda_runtime.h>

#include <cub/block/block_reduce.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <thrust/execution_policy.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/reduce.h>
#include <thrust/sequence.h>
#include <thrust/sort.h>
#include <thrust/copy.h>
#include <thrust/transform_reduce.h>
#include <thrust/functional.h>

#include <atomic>
#include <bit>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include <rlflow/core/backend.hpp>
#include <rlflow/core/error.hpp>
#include <rlflow/kernels/math.hpp>

namespace rlflow::kernels::cuda {

//! Throws rlflow::error naming the call and the CUDA error.
inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw ::rlflow::error(::rlflow::msg("rlflow::kernels (cuda): ", what, " failed: ", cudaGetErrorName(e), " (",
                                        cudaGetErrorString(e), ")"));
}

//! Raises the release threshold of the current device's default memory pool to 'never' (once per
//! device and process), so memory freed by cudaFreeAsync stays cached for the next allocation
//! instead of going back to the driver at every synchronisation. Engines' long-lived buffers
//! (weights, KV cache) use cudaMalloc and are not affected.
inline void keep_pool_memory() {
  static std::atomic<std::uint64_t> done{0};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return;
  std::uint64_t const bit = std::uint64_t{1} << dev;
  if (done.load(std::memory_order_relaxed) & bit) return;
  cudaMemPool_t pool{};
  if (cudaDeviceGetDefaultMemPool(&pool, dev) == cudaSuccess) {
    std::uint64_t keep = std::numeric_limits<std::uint64_t>::max();
    check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), "cudaMemPoolSetAttribute(ReleaseThreshold)");
  }
  done.fetch_or(bit, std::memory_order_relaxed);
}

//! Thrust's temporary storage from the stream-ordered pool (Thrust's default is a synchronous
//! cudaMalloc/cudaFree per algorithm call).
struct stream_allocator {
  using value_type = char;
  cudaStream_t stream = nullptr;
  char* allocate(std::ptrdiff_t n) {
    void* p = nullptr;
    check(cudaMallocAsync(&p, static_cast<std::size_t>(n), stream), "cudaMallocAsync (thrust temporary storage)");
    return static_cast<char*>(p);
  }
  void deallocate(char* p, std::size_t) { cudaFreeAsync(p, stream); }
};

//! A stream-ordered device array (moved, never copied).
template <class T>
class device_buffer {
 public:
  device_buffer() = default;
  device_buffer(std::int64_t n, cudaStream_t s) : n_(n), s_(s) {
    if (n > 0) check(cudaMallocAsync(reinterpret_cast<void**>(&p_), static_cast<std::size_t>(n) * sizeof(T), s), "cudaMallocAsync");
  }
  device_buffer(device_buffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(o.n_), s_(o.s_) {}
  device_buffer& operator=(device_buffer&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr);
      n_ = o.n_;
      s_ = o.s_;
    }
    return *this;
  }
  ~device_buffer() { release(); }
  T* data() const { return p_; }
  std::int64_t size() const { return n_; }

 private:
  void release() {
    if (p_) cudaFreeAsync(p_, s_);
    p_ = nullptr;
  }
  T* p_ = nullptr;
  std::int64_t n_ = 0;
  cudaStream_t s_ = nullptr;
};

template <class V, class F, class Out, int Threads>
RLFLOW_KERNEL void row_reduce_kernel(std::int64_t rows, std::int64_t cols, V init, F f, Out out) {
  using reduce_t = cub::BlockReduce<V, Threads>;
  __shared__ typename reduce_t::TempStorage tmp;
  for (std::int64_t i = blockIdx.x; i < rows; i += gridDim.x) {
    V acc = init;
    for (std::int64_t t = threadIdx.x; t < cols; t += Threads) acc = acc + f(i, t);
    V const total = reduce_t(tmp).Reduce(acc, [] __device__(V const& a, V const& b) { return a + b; });
    if (threadIdx.x == 0) out(i, total);
    __syncthreads();
  }
}

//! f(i, t, k) over a row-major (rows, cols) matrix, k = i * cols + t. The row index takes a
//! division per element; below 2^32 elements it is a 32-bit one (a few times cheaper than the
//! 64-bit division, which is emulated) so the broadcast stays memory-bound.
template <class F>
RLFLOW_KERNEL void for_each_2d_kernel(std::int64_t rows, std::int64_t cols, F f) {
  std::int64_t const n = rows * cols;
  std::int64_t const stride = static_cast<std::int64_t>(blockDim.x) * gridDim.x;
  std::int64_t const first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (n <= static_cast<std::int64_t>(UINT32_MAX) - stride) {
    auto const c = static_cast<std::uint32_t>(cols);
    for (auto k = static_cast<std::uint32_t>(first); k < static_cast<std::uint32_t>(n); k += static_cast<std::uint32_t>(stride)) {
      std::uint32_t const i = k / c;
      f(static_cast<std::int64_t>(i), static_cast<std::int64_t>(k - i * c), static_cast<std::int64_t>(k));
    }
    return;
  }
  for (std::int64_t k = first; k < n; k += stride) {
    std::int64_t const i = k / cols;
    f(i, k - i * cols, k);
  }
}

//! adv[i, t] = m[i, t] != 0 ? a[i] : 0 (and ret the same), four columns per thread: cols % 4 == 0
//! and every pointer 16-byte aligned (the caller checks). One division per four elements.
template <class M>
RLFLOW_KERNEL void broadcast_rows4_kernel(std::int64_t rows, std::int64_t cols, float const* a, M const* m, float* adv,
                                          float* ret) {
  using mask4 = std::conditional_t<sizeof(M) == 4, int4, std::conditional_t<sizeof(M) == 2, short4, char4>>;
  std::int64_t const q = cols / 4, n = rows * q;
  std::int64_t const stride = static_cast<std::int64_t>(blockDim.x) * gridDim.x;
  for (std::int64_t k = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n; k += stride) {
    std::int64_t const i = n <= static_cast<std::int64_t>(UINT32_MAX) ? static_cast<std::int64_t>(static_cast<std::uint32_t>(k) / static_cast<std::uint32_t>(q)) : k / q;
    mask4 const mm = reinterpret_cast<mask4 const*>(m)[k];
    float const v = a[i];
    float4 const o{mm.x != 0 ? v : 0.0f, mm.y != 0 ? v : 0.0f, mm.z != 0 ? v : 0.0f, mm.w != 0 ? v : 0.0f};
    reinterpret_cast<float4*>(adv)[k] = o;
    if (ret) reinterpret_cast<float4*>(ret)[k] = o;
  }
}

}  // namespace rlflow::kernels::cuda

namespace rlflow::kernels::detail {

template <>
struct exec<::rlflow::cuda::tag> {
  template <class T>
  using buffer = ::rlflow::kernels::cuda::device_buffer<T>;

  cudaStream_t stream;
  mutable ::rlflow::kernels::cuda::stream_allocator thrust_alloc;
  explicit exec(::rlflow::cuda::par_t p) : stream(static_cast<cudaStream_t>(p.stream)), thrust_alloc{stream} {
    ::rlflow::kernels::cuda::keep_pool_memory();
  }

  auto pol() const { return thrust::cuda::par(thrust_alloc).on(stream); }

  template <class T>
  buffer<T> alloc(std::int64_t n) const { return buffer<T>(n, stream); }

  template <class F>
  void for_each(std::int64_t n, F f) const {
    if (n <= 0) return;
    thrust::for_each(pol(), thrust::counting_iterator<std::int64_t>(0), thrust::counting_iterator<std::int64_t>(n), f);
    ::rlflow::kernels::cuda::check(cudaGetLastError(), "thrust::for_each");
  }

  template <class F>
  void for_each_2d(std::int64_t rows, std::int64_t cols, F f) const {
    std::int64_t const n = rows * cols;
    if (n <= 0) return;
    int const threads = 256;
    std::int64_t blocks = (n + threads - 1) / threads;
    if (blocks > 65535LL * 16) blocks = 65535LL * 16;
    ::rlflow::kernels::cuda::for_each_2d_kernel<<<static_cast<unsigned>(blocks), threads, 0, stream>>>(rows, cols, f);
    ::rlflow::kernels::cuda::check(cudaGetLastError(), "for_each_2d kernel launch");
  }

  template <class M>
  void broadcast_rows(std::int64_t rows, std::int64_t cols, float const* a, M const* m, float* adv, float* ret) const {
    auto const aligned = [](void const* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
    if constexpr (sizeof(M) == 4 || sizeof(M) == 2 || sizeof(M) == 1) {
      if (cols % 4 == 0 && rows * cols > 0 && aligned(adv) && (ret == nullptr || aligned(ret)) &&
          reinterpret_cast<std::uintptr_t>(m) % (4 * sizeof(M)) == 0) {
        int const threads = 256;
        std::int64_t blocks = (rows * (cols / 4) + threads - 1) / threads;
        if (blocks > 65535LL * 16) blocks = 65535LL * 16;
        ::rlflow::kernels::cuda::broadcast_rows4_kernel<M><<<static_cast<unsigned>(blocks), threads, 0, stream>>>(rows, cols, a, m, adv, ret);
        ::rlflow::kernels::cuda::check(cudaGetLastError(), "broadcast_rows4 kernel launch");
        return;
      }
    }
    for_each_2d(rows, cols, [=] __device__ __host__(std::int64_t i, std::int64_t, std::int64_t k) {
      float const v = m[k] != M(0) ? a[i] : 0.0f;
      adv[k] = v;
      if (ret) ret[k] = v;
    });
  }

  template <class V, class F>
  V reduce(std::int64_t n, V init, F f) const {
    if (n <= 0) return init;
    V const r = thrust::transform_reduce(pol(), thrust::counting_iterator<std::int64_t>(0),
                                         thrust::counting_iterator<std::int64_t>(n), f, init, thrust::plus<V>());
    return r;
  }

  template <class F>
  std::int64_t min_index(std::int64_t n, F f) const {
    if (n <= 0) return math::first_index::none;
    return thrust::transform_reduce(pol(), thrust::counting_iterator<std::int64_t>(0), thrust::counting_iterator<std::int64_t>(n),
                                    f, math::first_index::none, math::first_index{});
  }

  template <class V, class F, class Out>
  void row_reduce(std::int64_t rows, std::int64_t cols, V init, F f, Out out) const {
    if (rows <= 0) return;
    constexpr int threads = 256;
    std::int64_t const blocks = rows < 65535LL * 32 ? rows : 65535LL * 32;
    ::rlflow::kernels::cuda::row_reduce_kernel<V, F, Out, threads>
        <<<static_cast<unsigned>(blocks), threads, 0, stream>>>(rows, cols, init, f, out);
    ::rlflow::kernels::cuda::check(cudaGetLastError(), "row_reduce kernel launch");
  }

  //! Sort rows by group id (stable), reduce_by_key with 'merge', scatter to result[group].
  template <class V, class F, class Merge>
  void group_reduce(std::int64_t rows, std::int64_t const* group, std::int64_t groups, V identity, F value, Merge merge,
                    V* result) const {
    for_each(groups, [=] __host__ __device__(std::int64_t g) { result[g] = identity; });
    if (rows <= 0) return;
    if (rows < std::numeric_limits<std::int32_t>::max() && groups <= std::numeric_limits<std::int32_t>::max()) {
      // ids are dense in [0, groups): a stable LSD radix sort of 32-bit keys over only the bits
      // that 'groups' needs (20 for a million groups) instead of Thrust's 64-bit sort; stable, so
      // each group's rows keep their order and the merge sequence (and result) is unchanged.
      auto keys = alloc<std::int32_t>(2 * rows);
      auto perm = alloc<std::int32_t>(2 * rows);
      std::int32_t* kin = keys.data();
      std::int32_t* pin = perm.data();
      for_each(rows, [=] __host__ __device__(std::int64_t i) {
        kin[i] = static_cast<std::int32_t>(group[i]);
        pin[i] = static_cast<std::int32_t>(i);
      });
      cub::DoubleBuffer<std::int32_t> k(kin, kin + rows), p(pin, pin + rows);
      int const end_bit = groups > 1 ? static_cast<int>(std::bit_width(static_cast<std::uint64_t>(groups - 1))) : 1;
      std::size_t temp_bytes = 0;
      ::rlflow::kernels::cuda::check(
          cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, k, p, static_cast<int>(rows), 0, end_bit, stream), "cub::DeviceRadixSort::SortPairs (size)");
      auto temp = alloc<unsigned char>(static_cast<std::int64_t>(temp_bytes));
      ::rlflow::kernels::cuda::check(
          cub::DeviceRadixSort::SortPairs(temp.data(), temp_bytes, k, p, static_cast<int>(rows), 0, end_bit, stream), "cub::DeviceRadixSort::SortPairs");
      std::int32_t const* sk = k.Current();
      std::int32_t const* sp = p.Current();
      auto okeys = alloc<std::int32_t>(rows);
      auto ovals = alloc<V>(rows);
      auto vals = thrust::make_transform_iterator(sp, [=] __host__ __device__(std::int32_t i) -> V { return value(static_cast<std::int64_t>(i)); });
      auto ends = thrust::reduce_by_key(pol(), sk, sk + rows, vals, okeys.data(), ovals.data(), thrust::equal_to<std::int32_t>(), merge);
      std::int64_t const nseg = ends.first - okeys.data();
      std::int32_t const* ok = okeys.data();
      V const* ov = ovals.data();
      for_each(nseg, [=] __host__ __device__(std::int64_t j) { result[ok[j]] = ov[j]; });
      return;
    }
    auto keys = alloc<std::int64_t>(rows);
    auto perm = alloc<std::int64_t>(rows);
    auto okeys = alloc<std::int64_t>(rows);
    auto ovals = alloc<V>(rows);
    std::int64_t* kp = keys.data();
    std::int64_t* pp = perm.data();
    for_each(rows, [=] __host__ __device__(std::int64_t i) {
      kp[i] = group[i];
      pp[i] = i;
    });
    thrust::stable_sort_by_key(pol(), kp, kp + rows, pp);
    auto vals = thrust::make_transform_iterator(pp, value);
    auto ends = thrust::reduce_by_key(pol(), kp, kp + rows, vals, okeys.data(), ovals.data(), thrust::equal_to<std::int64_t>(),
                                      merge);
    std::int64_t const nseg = ends.first - okeys.data();
    std::int64_t const* ok = okeys.data();
    V const* ov = ovals.data();
    for_each(nseg, [=] __host__ __device__(std::int64_t j) { result[ok[j]] = ov[j]; });
  }

  template <class Key, class Cand>
  std::int64_t top_k(std::int64_t n, Key key, Cand candidate, std::int64_t k, buffer<std::int64_t>& out) const {
    if (n <= 0 || k <= 0) {
      out = alloc<std::int64_t>(0);
      return 0;
    }
    auto idx = alloc<std::int64_t>(n);
    std::int64_t* ip = idx.data();
    std::int64_t* last = thrust::copy_if(pol(), thrust::counting_iterator<std::int64_t>(0),
                                         thrust::counting_iterator<std::int64_t>(n), ip, candidate);
    std::int64_t const c = last - ip;
    if (c == 0) {
      out = alloc<std::int64_t>(0);
      return 0;
    }
    auto keys = alloc<double>(c);
    double* kp = keys.data();
    for_each(c, [=] __host__ __device__(std::int64_t j) { kp[j] = key(ip[j]); });
    thrust::stable_sort_by_key(pol(), kp, kp + c, ip, thrust::greater<double>());
    std::int64_t const m = c < k ? c : k;
    out = std::move(idx);
    return m;
  }

  template <class T>
  T load(T const* p, std::int64_t i) const {
    T v{};
    ::rlflow::kernels::cuda::check(cudaMemcpyAsync(&v, p + i, sizeof(T), cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync");
    ::rlflow::kernels::cuda::check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    return v;
  }
};

}  // namespace rlflow::kernels::detail
