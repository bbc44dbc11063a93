// rlflow/trainer/checkpoint_engine.hpp: the weight sync of the async roads, trainer to rollout workers
// across pools (CheckpointEngine; in-process and MPI engines over a rollout WorkerGroup).
#pragma once
#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include <rlflow/roles/standalone_rollout.hpp>  // AsyncHooks

namespace rlflow {

//! Moves the trainer's weights to the rollout workers across pools. verl: CheckpointEngine
//! (actor_rollout_ref.rollout.checkpoint_engine.backend: nccl, nixl, ...). The in-process
//! implementation below hands every rollout rank one shared full copy; an MPI / NCCL engine
//! implements the same call as a broadcast from the trainer's rank 0.
class CheckpointEngine {
 public:
  virtual ~CheckpointEngine() = default;
  virtual std::string_view name() const = 0;
  //! Sends the full flat weights of policy 'version' to every rollout rank; returns the bytes
  //! moved (weights bytes x receiving ranks).
  virtual std::int64_t update_weights(std::shared_ptr<std::vector<float> const> weights, std::int64_t version) = 0;
};

//! What the checkpoint engines over a rollout WorkerGroup share: the sync calls the group's
//! update_weights with the full flat weights (each rank loads, and reshards, its copy).
template <class Group>
class GroupCheckpointEngine : public CheckpointEngine {
 public:
  GroupCheckpointEngine(Group& g, std::shared_ptr<AsyncHooks const> hooks) : g_(&g), hooks_(std::move(hooks)) {}
  std::int64_t update_weights(std::shared_ptr<std::vector<float> const> w, std::int64_t version) override {
    if (hooks_ && hooks_->on_sync) hooks_->on_sync(version);
    std::int64_t const bytes = static_cast<std::int64_t>(w->size() * sizeof(float)) * g_->world_size();
    g_->template call<&Group::host_type::update_weights>(std::move(w));
    return bytes;
  }

 protected:
  Group* g_;
  std::shared_ptr<AsyncHooks const> hooks_;
};

//! The in-process checkpoint engine: every rollout rank loads (and reshards) one shared copy.
template <class Group>
class InProcessCheckpointEngine final : public GroupCheckpointEngine<Group> {
 public:
  using GroupCheckpointEngine<Group>::GroupCheckpointEngine;
  std::string_view name() const override { return "in_process"; }
};

//! The checkpoint engine of the MPI backend (a rollout group WorkerGroup<Rollout, dispatch::Mpi>
//! in other processes; selected with backend=nccl on the CPU engines, MPI being their
//! transport): the driver holds the trainer's gathered weights and sends them to every rollout
//! process as one bulk segment each (wire::Bulk: straight from the vector, no serialization
//! pass), point to point from the driver; each rank loads (and reshards) its copy. verl:
//! CheckpointEngine with backend nccl (a broadcast from the trainer's rank 0). Started without
//! mpirun the group runs in process and this is the in-process engine.
template <class Group>
class MpiCheckpointEngine final : public GroupCheckpointEngine<Group> {
 public:
  using GroupCheckpointEngine<Group>::GroupCheckpointEngine;
  std::string_view name() const override { return this->g_->in_process() ? "in_process" : "mpi"; }
};

}  // namespace rlflow
