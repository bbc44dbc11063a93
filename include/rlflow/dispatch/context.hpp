// rlflow/dispatch/context.hpp: a worker's identity and environment. Defines DeviceId,
// WorkerContext (rank, world size, local rank, node, device, mesh coordinates, env, the
// group's communicator) and rlflow::this_worker() for code running inside a worker method.
// verl: Worker's RANK / WORLD_SIZE / LOCAL_RANK / ... env and accessors (worker.py).
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <rlflow/core/backend.hpp>               // Device
#include <rlflow/comm/communicator.hpp>  // comm::Communicator
#include <rlflow/dispatch/mode.hpp>          // GroupShape, MeshCoord
#include <rlflow/core/error.hpp>

namespace rlflow {

//! One device of a resource pool: its kind, the node, and its index on that node.
struct DeviceId {
  Device type = Device::cpu;
  int node = 0;
  int index = 0;  //!< local device index on the node (what CUDA_VISIBLE_DEVICES would name)
  std::string str() const { return msg(device_name(type), ":", index, "@node", node); }
  friend bool operator==(DeviceId const&, DeviceId const&) = default;
};

//! Everything a worker knows about itself. Stable for the worker's lifetime; roles may keep a
//! reference (take 'rlflow::WorkerContext const&' as the first constructor argument).
struct WorkerContext {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;        //!< index among this group's workers on the same node
  int local_world_size = 1;  //!< this group's workers on the same node
  int node = 0;
  DeviceId device;
  double device_share = 1.0;  //!< 1 / max_colocate_count of the pool (verl num_gpus per actor)
  GroupShape shape;
  MeshCoord mesh;
  std::string group_name;
  std::string pool_name;
  std::vector<std::pair<std::string, std::string>> env;  //!< verl: the worker's env vars
  comm::Communicator* communicator = nullptr;

  //! The env value of 'key'; key_error naming the key and the known keys if absent.
  std::string const& getenv(std::string_view key) const {
    for (auto const& [k, v] : env)
      if (k == key) return v;
    std::string keys;
    for (auto const& [k, v] : env) keys += (keys.empty() ? "" : ", ") + k;
    throw key_error(msg("rlflow::WorkerContext::getenv: rank ", rank, " of '", group_name, "' has no env key '", key,
                        "'; known keys: ", keys, "; pass it in GroupOptions::env"));
  }
  bool has_env(std::string_view key) const {
    for (auto const& kv : env)
      if (kv.first == key) return true;
    return false;
  }
  //! The group's communicator (collectives across this group's ranks).
  comm::Communicator& comm() const {
    if (!communicator)
      throw error(msg("rlflow::WorkerContext::comm: group '", group_name, "' has no communicator"));
    return *communicator;
  }
};

namespace dispatch::detail {
inline WorkerContext*& current_worker() {
  thread_local WorkerContext* ctx = nullptr;
  return ctx;
}
}  // namespace dispatch::detail

//! The context of the worker running the calling code; error outside worker methods.
inline WorkerContext& this_worker() {
  WorkerContext* c = dispatch::detail::current_worker();
  if (!c)
    throw error("rlflow::this_worker(): called outside a worker thread; call it from a role method or constructor");
  return *c;
}
//! True when called on a worker thread.
inline bool on_worker() { return dispatch::detail::current_worker() != nullptr; }

}  // namespace rlflow
