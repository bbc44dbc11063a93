// rlflow/core/memory.hpp: memory resources. Defines caching_host_resource (a size-bucketed cache of
// 64-byte aligned host blocks, reused across steps so hot paths never pay first-touch page
// faults) and default_host_resource(). Device memory resources live in kernels/cuda (nvcc only).
#pragma once
#include <cstddef>          // std::size_t, std::max_align_t
#include <cstdlib>          // std::aligned_alloc, std::free
#include <map>              // free lists by block size
#include <memory_resource>  // std::pmr::memory_resource
#include <mutex>            // the cache is shared across worker threads
#include <new>              // std::bad_alloc
#include <vector>

namespace rlflow {

using memory_resource = std::pmr::memory_resource;

inline constexpr std::size_t host_alignment = 64;

//! A thread-safe caching host memory resource (the PyTorch CachingAllocator idea, host side).
//! Blocks are rounded up to a size class (powers of two below 1 MiB, 1 MiB multiples above)
//! and kept on a free list when released, so a buffer of the same class is reused without
//! page faults. release_cached() returns every cached block to the system.
class caching_host_resource final : public memory_resource {
 public:
  struct stats_t {
    std::size_t allocations = 0;  //!< do_allocate calls
    std::size_t cache_hits = 0;   //!< of which served from the cache
    std::size_t bytes_in_use = 0;
    std::size_t bytes_cached = 0;
  };

  caching_host_resource() = default;
  caching_host_resource(caching_host_resource const&) = delete;
  caching_host_resource& operator=(caching_host_resource const&) = delete;
  ~caching_host_resource() override { release_cached(); }

  //! Frees every cached (unused) block.
  void release_cached() {
    std::lock_guard lock(mu_);
    for (auto& [size, blocks] : free_)
      for (void* p : blocks) std::free(p);
    free_.clear();
    stats_.bytes_cached = 0;
  }

  stats_t stats() const {
    std::lock_guard lock(mu_);
    return stats_;
  }

  static std::size_t size_class(std::size_t bytes) {
    if (bytes <= 256) return 256;
    constexpr std::size_t mib = std::size_t{1} << 20;
    if (bytes >= mib) return (bytes + mib - 1) / mib * mib;
    std::size_t c = 512;
    while (c < bytes) c <<= 1;
    return c;
  }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    if (alignment > host_alignment) throw std::bad_alloc();
    std::size_t const cls = size_class(bytes);
    {
      std::lock_guard lock(mu_);
      ++stats_.allocations;
      auto it = free_.find(cls);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        ++stats_.cache_hits;
        stats_.bytes_cached -= cls;
        stats_.bytes_in_use += cls;
        return p;
      }
      stats_.bytes_in_use += cls;
    }
    void* p = std::aligned_alloc(host_alignment, cls);
    if (!p) {
      std::lock_guard lock(mu_);
      stats_.bytes_in_use -= cls;
      throw std::bad_alloc();
    }
    return p;
  }

  void do_deallocate(void* p, std::size_t bytes, std::size_t) override {
    if (!p) return;
    std::size_t const cls = size_class(bytes);
    std::lock_guard lock(mu_);
#if defined(__SANITIZE_ADDRESS__)
    // Under AddressSanitizer blocks go straight back so use-after-free is still caught.
    std::free(p);
    stats_.bytes_in_use -= cls;
    return;
#endif
    free_[cls].push_back(p);
    stats_.bytes_in_use -= cls;
    stats_.bytes_cached += cls;
  }

  bool do_is_equal(memory_resource const& other) const noexcept override { return this == &other; }

  mutable std::mutex mu_;
  std::map<std::size_t, std::vector<void*>> free_;
  stats_t stats_;
};

//! The process-wide caching host resource used when no resource is passed explicitly.
inline caching_host_resource& default_host_resource() {
  static caching_host_resource r;
  return r;
}

}  // namespace rlflow
