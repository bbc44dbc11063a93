// rlflow/resource_pool.hpp: resource pools (verl: ResourcePool / RayResourcePool,
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

#include <rlflow/backend.hpp>            // Device
#include <rlflow/dispatch/context.hpp>   // DeviceId
#include <rlflow/error.hpp>              // config_error, key_error

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
inline std::string list_str(std::vector<int> const& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}
}  // namespace detail

//! A window of bundles (one device + max_colocate_count slots each). verl: RayResourcePool /
//! SubRayResourcePool. Bundle order: node by node; rank r of every group built on this pool
//! lands on bundle r, hence the same device (colocation, test SC-HL-1).
class ResourcePool {
 public:
  //! verl: RayResourcePool(process_on_nodes, max_colocate_count). Each node entry must be >= 1.
  ResourcePool(std::string name, std::vector<int> process_on_nodes, int max_colocate_count = 10,
               Device device_type = Device::cpu) {
    if (process_on_nodes.empty())
      throw config_error(msg("rlflow::ResourcePool '", name, "': process_on_nodes is empty; give at least one node, e.g. {",
                             "n_gpus_per_node}"));
    if (max_colocate_count < 1)
      throw config_error(msg("rlflow::ResourcePool '", name, "': max_colocate_count = ", max_colocate_count,
                             " must be >= 1"));
    auto st = std::make_shared<detail::PoolState>();
    st->name = name;
    st->process_on_nodes = process_on_nodes;
    st->max_colocate_count = max_colocate_count;
    st->device_type = device_type;
    for (std::size_t n = 0; n < process_on_nodes.size(); ++n) {
      if (process_on_nodes[n] < 1)
        throw config_error(msg("rlflow::ResourcePool '", name, "': node ", n, " has ", process_on_nodes[n],
                               " processes; every node entry must be >= 1 (process_on_nodes = ",
                               detail::list_str(process_on_nodes), ")"));
      for (int l = 0; l < process_on_nodes[n]; ++l) {
        st->node_of.push_back(static_cast<int>(n));
        st->local_of.push_back(l);
      }
    }
    st->used.assign(st->node_of.size(), 0);
    name_ = std::move(name);
    for (int b = 0; b < static_cast<int>(st->node_of.size()); ++b) bundles_.push_back({st, b});
  }

  std::string const& name() const { return name_; }
  //! verl: world_size (the window's size).
  int world_size() const { return static_cast<int>(bundles_.size()); }
  int max_colocate_count() const { return bundles_.front().st->max_colocate_count; }
  double device_share() const { return 1.0 / max_colocate_count(); }
  Device device_type() const { return bundles_.front().st->device_type; }
  //! verl: the pool's process list (of the pool this window was cut from).
  std::vector<int> const& process_on_nodes() const { return bundles_.front().st->process_on_nodes; }

  //! The device of window rank r (rank -> device as in verl: bundle r of the window).
  DeviceId device_of(int r) const {
    check_rank(r);
    auto const& b = bundles_[static_cast<std::size_t>(r)];
    return DeviceId{b.st->device_type, b.st->node_of[static_cast<std::size_t>(b.index)],
                    b.st->local_of[static_cast<std::size_t>(b.index)]};
  }
  //! verl: local_world_size_list(): for each process, its node's process count.
  std::vector<int> local_world_size_list() const {
    std::vector<int> out;
    for (auto const& b : bundles_)
      out.push_back(b.st->process_on_nodes[static_cast<std::size_t>(b.st->node_of[static_cast<std::size_t>(b.index)])]);
    return out;
  }
  //! verl: local_rank_list(): each process's index on its node.
  std::vector<int> local_rank_list() const {
    std::vector<int> out;
    for (auto const& b : bundles_) out.push_back(b.st->local_of[static_cast<std::size_t>(b.index)]);
    return out;
  }
  //! Workers currently placed on each bundle of the window.
  std::vector<int> used_slots() const {
    std::vector<int> out;
    for (auto const& b : bundles_) {
      std::lock_guard lock(b.st->mu);
      out.push_back(b.st->used[static_cast<std::size_t>(b.index)]);
    }
    return out;
  }

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
    void release() {
      for (auto const& b : held_) {
        std::lock_guard lock(b.st->mu);
        --b.st->used[static_cast<std::size_t>(b.index)];
      }
      held_.clear();
    }
    struct Ref {
      std::shared_ptr<detail::PoolState> st;
      int index;
    };
    std::vector<Ref> held_;
  };

  //! Takes one slot on each of the first n bundles for 'who' (a group's name). Fails with the
  //! pool, the numbers and the fix if n exceeds the window or a device is full.
  Lease acquire(int n, std::string_view who) const {
    if (n < 1 || n > world_size())
      throw config_error(msg(who, ": asks for ", n, " workers but resource pool '", name_, "' has ", world_size(),
                             " devices (process_on_nodes = ", detail::list_str(process_on_nodes()),
                             "); ask for at most ", world_size(), " workers or add nodes/devices to the pool"));
    Lease lease;
    for (int r = 0; r < n; ++r) {
      auto const& b = bundles_[static_cast<std::size_t>(r)];
      std::lock_guard lock(b.st->mu);
      int& used = b.st->used[static_cast<std::size_t>(b.index)];
      if (used >= b.st->max_colocate_count)
        throw config_error(msg(who, ": device ", device_of(r).str(), " (rank ", r, ") of resource pool '", name_,
                               "' already hosts ", used, " workers = max_colocate_count ", b.st->max_colocate_count,
                               "; raise max_colocate_count, fuse the roles into one worker "
                               "(rlflow::make_colocated_group), or use another pool"));
      ++used;
      lease.held_.push_back({b.st, b.index});
    }
    return lease;
  }

  //! verl: split_resource_pool(pool, int): world_size / size equal windows (size must divide).
  std::vector<ResourcePool> split(int size) const {
    if (size < 1 || world_size() % size != 0)
      throw config_error(msg("rlflow::ResourcePool::split: window size ", size, " does not divide the world size ",
                             world_size(), " of pool '", name_, "'; pass a divisor or a list of sizes"));
    return split(std::vector<int>(static_cast<std::size_t>(world_size() / size), size));
  }
  //! verl: split_resource_pool(pool, [sizes...]): consecutive windows; sizes must sum to world_size.
  std::vector<ResourcePool> split(std::vector<int> const& sizes) const {
    int sum = 0;
    for (int s : sizes) {
      if (s < 1)
        throw config_error(msg("rlflow::ResourcePool::split: every window size must be >= 1, got ",
                               detail::list_str(sizes)));
      sum += s;
    }
    if (sum != world_size())
      throw config_error(msg("rlflow::ResourcePool::split: sizes ", detail::list_str(sizes), " sum to ", sum,
                             " but pool '", name_, "' has ", world_size(), " devices; make them sum to ", world_size()));
    std::vector<ResourcePool> out;
    int start = 0;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      ResourcePool p = *this;
      p.name_ = msg(name_, "_split_", i);
      p.bundles_.assign(bundles_.begin() + start, bundles_.begin() + start + sizes[i]);
      out.push_back(std::move(p));
      start += sizes[i];
    }
    return out;
  }
  //! verl: merge_resource_pool(a, b): a's devices then b's; both must agree on
  //! max_colocate_count and device type.
  friend ResourcePool merge(ResourcePool const& a, ResourcePool const& b) {
    if (a.max_colocate_count() != b.max_colocate_count() || a.device_type() != b.device_type())
      throw config_error(msg("rlflow::merge(ResourcePool): pools '", a.name_, "' (max_colocate_count ",
                             a.max_colocate_count(), ", ", device_name(a.device_type()), ") and '", b.name_,
                             "' (max_colocate_count ", b.max_colocate_count(), ", ", device_name(b.device_type()),
                             ") differ; merge pools of the same kind"));
    ResourcePool p = a;
    p.name_ = a.name_ + "_" + b.name_;
    p.bundles_.insert(p.bundles_.end(), b.bundles_.begin(), b.bundles_.end());
    return p;
  }

 private:
  void check_rank(int r) const {
    if (r < 0 || r >= world_size())
      throw config_error(msg("rlflow::ResourcePool '", name_, "': rank ", r, " is outside [0, ", world_size(), ")"));
  }
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

  ResourcePoolManager(Spec spec, Mapping mapping, int max_colocate_count = 3, Device device_type = Device::cpu)
      : spec_(std::move(spec)), mapping_(std::move(mapping)), max_colocate_(max_colocate_count), device_(device_type) {
    for (auto const& [role, pool] : mapping_) {
      bool found = false;
      for (auto const& s : spec_) found = found || s.first == pool;
      if (!found)
        throw config_error(msg("rlflow::ResourcePoolManager: role '", role, "' is mapped to pool '", pool,
                               "', which is not in the spec; add it to the spec or fix the mapping"));
    }
  }

  //! Devices the spec asks for (verl: get_n_gpus).
  int total_devices() const {
    int n = 0;
    for (auto const& s : spec_)
      for (int c : s.second) n += c;
    return n;
  }

  //! verl: create_resource_pool + _check_resource_available. 'available' defaults to 'enough'.
  void create(std::optional<int> available = std::nullopt) {
    if (available && *available < total_devices())
      throw config_error(msg("rlflow::ResourcePoolManager: total available devices ", *available,
                             " is less than the total desired ", total_devices(),
                             "; reduce nnodes x n_gpus_per_node in the spec or add devices"));
    pools_.clear();
    for (auto const& [name, procs] : spec_) pools_.emplace_back(name, ResourcePool(name, procs, max_colocate_, device_));
  }

  //! verl: get_resource_pool(role).
  ResourcePool const& get_resource_pool(std::string_view role) const {
    for (auto const& [r, pool] : mapping_)
      if (r == role) return pool_named(pool);
    std::string roles;
    for (auto const& m : mapping_) roles += (roles.empty() ? "" : ", ") + m.first;
    throw key_error(msg("rlflow::ResourcePoolManager: role '", role, "' has no pool; mapped roles: ", roles,
                        "; add {\"", role, "\", <pool>} to the mapping"));
  }
  ResourcePool const& pool_named(std::string_view name) const {
    if (pools_.empty())
      throw config_error("rlflow::ResourcePoolManager: pools not created yet; call create() first");
    for (auto const& [n, p] : pools_)
      if (n == name) return p;
    throw key_error(msg("rlflow::ResourcePoolManager: no pool named '", name, "'"));
  }

 private:
  Spec spec_;
  Mapping mapping_;
  int max_colocate_;
  Device device_;
  std::vector<std::pair<std::string, ResourcePool>> pools_;
};

}  // namespace rlflow
