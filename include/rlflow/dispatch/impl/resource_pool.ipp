// rlflow/dispatch/impl/resource_pool.ipp: the bodies of the non-template functions declared in rlflow/dispatch/resource_pool.hpp (see
// RLFLOW_DECL in rlflow/core/config.hpp).
#pragma once

namespace rlflow {

namespace detail {
RLFLOW_DECL std::string list_str(std::vector<int> const& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}
}  // namespace detail

RLFLOW_DECL ResourcePool::ResourcePool(std::string name, std::vector<int> process_on_nodes, int max_colocate_count,
                                      Device device_type) {
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

RLFLOW_DECL DeviceId ResourcePool::device_of(int r) const {
  check_rank(r);
  auto const& b = bundles_[static_cast<std::size_t>(r)];
  return DeviceId{b.st->device_type, b.st->node_of[static_cast<std::size_t>(b.index)],
                  b.st->local_of[static_cast<std::size_t>(b.index)]};
}

RLFLOW_DECL std::vector<int> ResourcePool::local_world_size_list() const {
  std::vector<int> out;
  for (auto const& b : bundles_)
    out.push_back(b.st->process_on_nodes[static_cast<std::size_t>(b.st->node_of[static_cast<std::size_t>(b.index)])]);
  return out;
}

RLFLOW_DECL std::vector<int> ResourcePool::local_rank_list() const {
  std::vector<int> out;
  for (auto const& b : bundles_) out.push_back(b.st->local_of[static_cast<std::size_t>(b.index)]);
  return out;
}

RLFLOW_DECL std::vector<int> ResourcePool::used_slots() const {
  std::vector<int> out;
  for (auto const& b : bundles_) {
    std::lock_guard lock(b.st->mu);
    out.push_back(b.st->used[static_cast<std::size_t>(b.index)]);
  }
  return out;
}

RLFLOW_DECL void ResourcePool::Lease::release() {
  for (auto const& b : held_) {
    std::lock_guard lock(b.st->mu);
    --b.st->used[static_cast<std::size_t>(b.index)];
  }
  held_.clear();
}

RLFLOW_DECL ResourcePool::Lease ResourcePool::acquire(int n, std::string_view who) const {
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

RLFLOW_DECL std::vector<ResourcePool> ResourcePool::split(int size) const {
  if (size < 1 || world_size() % size != 0)
    throw config_error(msg("rlflow::ResourcePool::split: window size ", size, " does not divide the world size ",
                           world_size(), " of pool '", name_, "'; pass a divisor or a list of sizes"));
  return split(std::vector<int>(static_cast<std::size_t>(world_size() / size), size));
}

RLFLOW_DECL std::vector<ResourcePool> ResourcePool::split(std::vector<int> const& sizes) const {
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

RLFLOW_DECL ResourcePool merge(ResourcePool const& a, ResourcePool const& b) {
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

RLFLOW_DECL void ResourcePool::check_rank(int r) const {
  if (r < 0 || r >= world_size())
    throw config_error(msg("rlflow::ResourcePool '", name_, "': rank ", r, " is outside [0, ", world_size(), ")"));
}

RLFLOW_DECL ResourcePoolManager::ResourcePoolManager(Spec spec, Mapping mapping, int max_colocate_count, Device device_type)
    : spec_(std::move(spec)), mapping_(std::move(mapping)), max_colocate_(max_colocate_count), device_(device_type) {
  for (auto const& [role, pool] : mapping_) {
    bool found = false;
    for (auto const& s : spec_) found = found || s.first == pool;
    if (!found)
      throw config_error(msg("rlflow::ResourcePoolManager: role '", role, "' is mapped to pool '", pool,
                             "', which is not in the spec; add it to the spec or fix the mapping"));
  }
}

RLFLOW_DECL int ResourcePoolManager::total_devices() const {
  int n = 0;
  for (auto const& s : spec_)
    for (int c : s.second) n += c;
  return n;
}

RLFLOW_DECL void ResourcePoolManager::create(std::optional<int> available) {
  if (available && *available < total_devices())
    throw config_error(msg("rlflow::ResourcePoolManager: total available devices ", *available,
                           " is less than the total desired ", total_devices(),
                           "; reduce nnodes x n_gpus_per_node in the spec or add devices"));
  pools_.clear();
  for (auto const& [name, procs] : spec_) pools_.emplace_back(name, ResourcePool(name, procs, max_colocate_, device_));
}

RLFLOW_DECL ResourcePool const& ResourcePoolManager::get_resource_pool(std::string_view role) const {
  for (auto const& [r, pool] : mapping_)
    if (r == role) return pool_named(pool);
  std::string roles;
  for (auto const& m : mapping_) roles += (roles.empty() ? "" : ", ") + m.first;
  throw key_error(msg("rlflow::ResourcePoolManager: role '", role, "' has no pool; mapped roles: ", roles,
                      "; add {\"", role, "\", <pool>} to the mapping"));
}

RLFLOW_DECL ResourcePool const& ResourcePoolManager::pool_named(std::string_view name) const {
  if (pools_.empty())
    throw config_error("rlflow::ResourcePoolManager: pools not created yet; call create() first");
  for (auto const& [n, p] : pools_)
    if (n == name) return p;
  throw key_error(msg("rlflow::ResourcePoolManager: no pool named '", name, "'"));
}

}  // namespace rlflow
