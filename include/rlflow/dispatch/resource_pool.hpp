// rlflow/dispatch/resource_pool.hpp: resource pools (verl: ResourcePool / RayResourcePool,
// split_resource_pool, merge_resource_pool, ResourcePoolManager). A pool is {name: processes
// per node}; each process is a bundle of one device and max_colocate_count slots; a worker
// takes one slot (1/max_colocate_count of its device). A pool value is a window over bundles
// (ranks restart at 0 in every window); copies, splits and merges share the slot accounting.
// Does not start workers (worker_group.hpp does).
#pragma once
#include <algorithm>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <rlflow/core/backend.hpp>            // Device
#include <rlflow/dispatch/context.hpp>   // DeviceId
#include <rlflow/core/config.hpp>             // RLFLOW_DECL, RLFLOW_DEFINE_BODIES
#include <rlflow/core/error.hpp>              // config_error, key_error

namespace rlflow {

namespace detail {
//! The bundles of one created pool and their occupied slots.
struct PoolState {
  std::string name;
  std::vector<int> process_on_nodes;
  int max_colocate_count = 1;
  Device device_type = Device::cpu;
  std::vector<int> node_of, local_of;  // per bundle
  std::mutex mu;
  std::vector<int> used;  // workers placed on each bundle
};
RLFLOW_DECL std::string list_str(std::vector<int> const& v);
}  // namespace detail

//! A window of bundles (one device + max_colocate_count slots each). verl: RayResourcePool /
//! SubRayResourcePool. Bundle order: node by node; rank r of every group built on this pool
//! lands on bundle r, hence the same device (colocation, test SC-HL-1).
class ResourcePool {
 public:
  //! verl: RayResourcePool(process_on_nodes, max_colocate_count). Each node entry must be >= 1.
  ResourcePool(std::string name, std::vector<int> process_on_nodes, int max_colocate_count = 10,
               Device device_type = Device::cpu);

  std::string const& name() const { return name_; }
  //! verl: world_size (the window's size).
  int world_size() const { return static_cast<int>(bundles_.size()); }
  int max_colocate_count() const { return bundles_.front().st->max_colocate_count; }
  double device_share() const { return 1.0 / max_colocate_count(); }
  Device device_type() const { return bundles_.front().st->device_type; }
  //! verl: the pool's process list (of the pool this window was cut from).
  std::vector<int> const& process_on_nodes() const { return bundles_.front().st->process_on_nodes; }

  //! The device of window rank r (rank -> device as in verl: bundle r of the window).
  DeviceId device_of(int r) const;
  //! verl: local_world_size_list(): for each process, its node's process count.
  std::vector<int> local_world_size_list() const;
  //! verl: local_rank_list(): each process's index on its node.
  std::vector<int> local_rank_list() const;
  //! Workers currently placed on each bundle of the window.
  std::vector<int> used_slots() const;

  //! Slots held by a worker group on bundles [0, n) of a window; released on destruction.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& o) noexcept : held_(std::move(o.held_)) { o.held_.clear(); }
    Lease& operator=(Lease&& o) noexcept {
      if (this != &o) {
        release();
        held_ = std::move(o.held_);
        o.held_.clear();
      }
      return *this;
    }
    ~Lease() { release(); }
    std::size_t size() const { return held_.size(); }

   private:
    friend class ResourcePool;
    void release();
    struct Ref {
      std::shared_ptr<detail::PoolState> st;
      int index;
    };
    std::vector<Ref> held_;
  };

  //! Takes one slot on each of the first n bundles for 'who' (a group's name). Fails with the
  //! pool, the numbers and the fix if n exceeds the window or a device is full.
  Lease acquire(int n, std::string_view who) const;

  //! verl: split_resource_pool(pool, int): world_size / size equal windows (size must divide).
  std::vector<ResourcePool> split(int size) const;
  //! verl: split_resource_pool(pool, [sizes...]): consecutive windows; sizes must sum to world_size.
  std::vector<ResourcePool> split(std::vector<int> const& sizes) const;
  //! verl: merge_resource_pool(a, b): a's devices then b's; both must agree on
  //! max_colocate_count and device type.
  friend RLFLOW_DECL ResourcePool merge(ResourcePool const& a, ResourcePool const& b);

 private:
  void check_rank(int r) const;
  struct BundleRef {
    std::shared_ptr<detail::PoolState> st;
    int index;
  };
  std::string name_;
  std::vector<BundleRef> bundles_;
};

//! verl: ResourcePoolManager: pools by name from {name: processes per node} and a role -> pool
//! mapping. create() checks the devices requested against the devices available.
class ResourcePoolManager {
 public:
  using Spec = std::vector<std::pair<std::string, std::vector<int>>>;
  using Mapping = std::vector<std::pair<std::string, std::string>>;  // role name -> pool name

  ResourcePoolManager(Spec spec, Mapping mapping, int max_colocate_count = 3, Device device_type = Device::cpu);

  //! Devices the spec asks for (verl: get_n_gpus).
  int total_devices() const;

  //! verl: create_resource_pool + _check_resource_available. 'available' defaults to 'enough'.
  void create(std::optional<int> available = std::nullopt);

  //! verl: get_resource_pool(role).
  ResourcePool const& get_resource_pool(std::string_view role) const;
  ResourcePool const& pool_named(std::string_view name) const;

 private:
  Spec spec_;
  Mapping mapping_;
  int max_colocate_;
  Device device_;
  std::vector<std::pair<std::string, ResourcePool>> pools_;
};

}  // namespace rlflow

#if RLFLOW_DEFINE_BODIES
#include <rlflow/dispatch/impl/resource_pool.ipp>
#endif
