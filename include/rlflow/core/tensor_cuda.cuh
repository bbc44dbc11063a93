// rlflow/core/tensor_cuda.cuh: device memory for Tensor (nvcc only). Defines RLFLOW_CUDA_CHECK,
// cuda::caching_device_resource (cudaMalloc'd blocks reused across steps, like the host cache)
// and the copies between host and device tensors (to_device, to_host, copy). Tensors on the
// device keep their shape and dtype; typed span access stays host-only (Tensor says so).
#pragma once
#if !defined(__CUDACC__)
#error "rlflow/core/tensor_cuda.cuh is for translation units compiled by nvcc; include rlflow/core/tensor.hpp in host code"
#endif
#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <vector>

#include <rlflow/core/error.hpp>
#include <rlflow/core/memory.hpp>
#include <rlflow/core/tensor.hpp>

//! Throws rlflow::error naming the call and CUDA's message when 'expr' is not cudaSuccess.
#define RLFLOW_CUDA_CHECK(expr)                                                                         \
  do {                                                                                                  \
    cudaError_t rlflow_cuda_status_ = (expr);                                                           \
    if (rlflow_cuda_status_ != cudaSuccess)                                                             \
      throw ::rlflow::error(::rlflow::msg(#expr, " failed: ", cudaGetErrorString(rlflow_cuda_status_))); \
  } while (0)

namespace rlflow::cuda {

//! A thread-safe caching device memory resource (size classes as caching_host_resource).
class caching_device_resource final : public memory_resource {
 public:
  caching_device_resource() = default;
  caching_device_resource(caching_device_resource const&) = delete;
  caching_device_resource& operator=(caching_device_resource const&) = delete;
  ~caching_device_resource() override { release_cached(); }

  //! cudaFree of every cached block (sleep / colocation hands the memory back).
  void release_cached() noexcept {
    std::lock_guard lock(mu_);
    for (auto& [size, blocks] : free_)
      for (void* p : blocks) cudaFree(p);
    free_.clear();
  }

 private:
  void* do_allocate(std::size_t bytes, std::size_t) override {
    std::size_t const cls = caching_host_resource::size_class(bytes);
    {
      std::lock_guard lock(mu_);
      auto it = free_.find(cls);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        return p;
      }
    }
    void* p = nullptr;
    RLFLOW_CUDA_CHECK(cudaMalloc(&p, cls));
    return p;
  }
  void do_deallocate(void* p, std::size_t bytes, std::size_t) override {
    if (!p) return;
    std::lock_guard lock(mu_);
    free_[caching_host_resource::size_class(bytes)].push_back(p);
  }
  bool do_is_equal(memory_resource const& o) const noexcept override { return this == &o; }

  std::mutex mu_;
  std::map<std::size_t, std::vector<void*>> free_;
};

//! The process-wide device cache used when no resource is passed.
inline caching_device_resource& default_device_resource() {
  static caching_device_resource r;
  return r;
}

//! Copies src into dst (same dtype and shape; any direction). Synchronous on 'stream'.
inline void copy(Tensor& dst, Tensor const& src, cudaStream_t stream = nullptr) {
  if (dst.dtype() != src.dtype() || !(dst.shape() == src.shape()))
    throw shape_error(msg("rlflow::cuda::copy: destination ", dst.describe(), " and source ", src.describe(),
                          " differ in dtype or shape"));
  if (src.nbytes() == 0) return;
  cudaMemcpyKind kind = cudaMemcpyDefault;
  RLFLOW_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), src.nbytes(), kind, stream));
  RLFLOW_CUDA_CHECK(cudaStreamSynchronize(stream));
}

//! A device copy of a host tensor.
inline Tensor to_device(Tensor const& host, memory_resource* mr = nullptr, cudaStream_t stream = nullptr) {
  if (host.device() != Device::cpu) throw error(msg("rlflow::cuda::to_device: ", host.describe(), " is already on the device"));
  Tensor d = Tensor::empty(host.dtype(), host.shape(), mr ? mr : &default_device_resource(), Device::cuda);
  copy(d, host, stream);
  return d;
}

//! A host copy of a device tensor.
inline Tensor to_host(Tensor const& dev, memory_resource* mr = nullptr, cudaStream_t stream = nullptr) {
  if (dev.device() != Device::cuda) throw error(msg("rlflow::cuda::to_host: ", dev.describe(), " is already on the host"));
  Tensor h = Tensor::empty(dev.dtype(), dev.shape(), mr);
  copy(h, dev, stream);
  return h;
}

}  // namespace rlflow::cuda
