// rlflow/core/device_memory.hpp: device memory accounting of the CUDA backend, host-only (g++ and
// nvcc): per-device counters of allocated / reserved bytes and their peaks (what verl reports as
// perf/max_memory_allocated_gb and perf/max_memory_reserved_gb from torch.cuda) and the hint that
// every device out-of-memory message ends with. Does not call CUDA: the device buffers of
// engine/cuda and kernels/model feed the counters, so the counting is tested on the CPU. The
// trainer's estimate and pre-work checks are in device_memory_estimate.hpp.
#pragma once
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include <rlflow/core/error.hpp>  // msg

namespace rlflow {

//! Bytes in one GiB.
inline constexpr double gib = 1024.0 * 1024.0 * 1024.0;

//! A snapshot of one device's counters (bytes).
struct DeviceMemoryStats {
  std::int64_t allocated = 0;       //!< held by live buffers / tensors now
  std::int64_t peak_allocated = 0;  //!< max of 'allocated' since the last reset_peak()
  std::int64_t reserved = 0;        //!< obtained from the driver (allocated + cached blocks)
  std::int64_t peak_reserved = 0;   //!< max of 'reserved' since the last reset_peak()
};

//! Thread-safe counters of one device. 'reserve' / 'unreserve' track memory taken from and given
//! back to the driver (cudaMalloc / cudaFree); 'use' / 'unuse' track memory handed to a buffer.
//! A buffer that mallocs directly calls reserve + use; a caching resource calls use on a cache hit.
class DeviceMemoryCounter {
 public:
  void reserve(std::int64_t bytes) { bump(reserved_, peak_reserved_, bytes); }
  void unreserve(std::int64_t bytes) { reserved_.fetch_sub(bytes, std::memory_order_relaxed); }
  void use(std::int64_t bytes) { bump(allocated_, peak_allocated_, bytes); }
  void unuse(std::int64_t bytes) { allocated_.fetch_sub(bytes, std::memory_order_relaxed); }
  //! Restarts the peaks at the current values (verl: torch.cuda.reset_peak_memory_stats).
  void reset_peak() {
    peak_allocated_.store(allocated_.load(std::memory_order_relaxed), std::memory_order_relaxed);
    peak_reserved_.store(reserved_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  }
  DeviceMemoryStats stats() const {
    return {allocated_.load(std::memory_order_relaxed), peak_allocated_.load(std::memory_order_relaxed),
            reserved_.load(std::memory_order_relaxed), peak_reserved_.load(std::memory_order_relaxed)};
  }

 private:
  static void bump(std::atomic<std::int64_t>& cur, std::atomic<std::int64_t>& peak, std::int64_t bytes) {
    std::int64_t const now = cur.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    std::int64_t p = peak.load(std::memory_order_relaxed);
    while (now > p && !peak.compare_exchange_weak(p, now, std::memory_order_relaxed)) {
    }
  }
  std::atomic<std::int64_t> allocated_{0}, peak_allocated_{0}, reserved_{0}, peak_reserved_{0};
};

//! Devices a process can account for (device ids at or above this share the last counter).
inline constexpr int max_accounted_devices = 64;

//! The process-wide counter of device 'device' (a CUDA device ordinal).
inline DeviceMemoryCounter& device_memory_counter(int device) {
  static std::array<DeviceMemoryCounter, max_accounted_devices> counters;
  return counters[static_cast<std::size_t>(std::clamp(device, 0, max_accounted_devices - 1))];
}

//! What to lower when device memory runs out (shared by the estimate check and the allocation errors).
inline constexpr char const* device_memory_fix =
    "lower actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu and actor_rollout_ref.rollout / ref "
    "log_prob_micro_batch_size_per_gpu, the rows per device (data.train_batch_size * rollout.n / workers: raise "
    "trainer.n_gpus_per_node) or data.max_prompt_length + data.max_response_length, or use a smaller model";

}  // namespace rlflow
