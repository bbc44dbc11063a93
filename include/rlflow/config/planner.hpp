// rlflow/config/planner.hpp: the resource planner. From a TrainerConfig it computes the accounting of
// one training step (samples, optimizer updates, rollout replicas, devices, weight syncs, device
// share, per-worker micro-batches and gradient-accumulation steps) plus every violated start-up
// constraint, and prints it as a table or one JSON object (the 'rlflow_plan' tool, 'make plan').
// Does not start workers; the formulas are verl's batch sizing and resource-pool accounting.
#pragma once
#include <algorithm> // std::max
#include <array>     // table rows
#include <cstdint>   // std::int64_t
#include <iomanip>   // std::setw
#include <ostream>   // plan_main output
#include <sstream>   // table building
#include <string>
#include <vector>

#include <nlohmann/json.hpp>            // Plan::as_json

#include <rlflow/core/config.hpp>  // RLFLOW_DECL, RLFLOW_DEFINE_BODIES
#include <rlflow/core/error.hpp>           // config_error, msg
#include <rlflow/config/trainer_config.hpp>  // TrainerConfig, validate, warnings, parse_command_line

namespace rlflow {

//! Micro-batching of one trained role (actor or critic) on one data-parallel worker.
//! verl: the per-GPU mini-batch (engine_workers.py:260-269) and its micro-batches (engine/utils.py:122-130).
struct RolePlan {
  bool enabled = false;
  std::int64_t dp_size = 0;                      //!< data-parallel workers: devices / ulysses size
  std::int64_t ppo_mini_batch_size = 0;          //!< prompts per optimizer step
  std::int64_t ppo_epochs = 0;
  std::int64_t mini_batch_rows = 0;              //!< M × n (global rows per optimizer step)
  std::int64_t updates_per_step = 0;             //!< optimizer steps per training step: B/M × epochs
  std::int64_t rows_per_worker = 0;              //!< B × n / DP
  std::int64_t mini_batch_rows_per_worker = 0;   //!< M × n / DP
  bool dynamic_bsz = false;                      //!< micro-batches packed by tokens (counts below unknown)
  std::int64_t micro_batch_size_per_gpu = 0;     //!< 0 when unset or dynamic
  std::int64_t grad_accumulation_steps = 0;      //!< micro-batches per optimizer step per worker
  std::int64_t micro_batches_per_step = 0;       //!< forward/backward passes per training step per worker
};

//! One row of the plan's table: what, the formula in letters, the formula with the numbers filled
//! in (ending in the value), and the JSON key of Plan::as_json() that holds the value ("actor.dp_size"
//! for nested ones). The planner page shows these next to its readouts.
struct PlanRow {
  std::string quantity;
  std::string formula;
  std::string value;
  std::string key;
};

//! The accounting of one training step for a config, plus its violations. verl: the quantities
//! of ResourcePoolManager, the rollout replica layout and the trainer's mini-batch loop
//! (verl's batch sizing and resource-pool accounting).
struct Plan {
  std::string trainer_mode;                      //!< trainer.v1.trainer_mode
  std::int64_t train_batch_size = 0;             //!< B
  std::int64_t rollout_n = 0;                    //!< n
  std::int64_t samples_per_step = 0;             //!< B × n
  std::int64_t updates_per_step = 0;             //!< actor optimizer steps: (B·n)/(M·n) × ppo_epochs
  std::int64_t parameter_sync_step = 1;          //!< local updates between weight syncs (separate_async)
  std::int64_t train_devices = 0;                //!< trainer.nnodes × trainer.n_gpus_per_node
  std::int64_t standalone_rollout_devices = 0;   //!< rollout.nnodes × rollout.n_gpus_per_node (separate_async)
  std::int64_t reward_devices = 0;               //!< own reward-model pool, if any
  std::int64_t total_devices = 0;                //!< train + standalone rollout + reward pool
  std::int64_t rollout_devices = 0;              //!< devices the replicas are cut from
  std::int64_t replica_world_size = 0;           //!< TP × DP × PP
  std::int64_t rollout_replicas = 0;             //!< rollout_devices / replica_world_size (floor)
  std::int64_t idle_rollout_devices = 0;         //!< rollout_devices % replica_world_size
  std::int64_t samples_per_replica = 0;          //!< ceil(samples_per_step / rollout_replicas)
  std::int64_t weight_syncs_per_step = 0;        //!< 1 per training step
  std::string weight_sync_scope;                 //!< "in-pool" (colocated) or "cross-pool"
  std::string weight_sync_backend;               //!< naive (in place) or the checkpoint engine backend
  std::int64_t max_colocate_count = 0;
  double device_share_per_worker = 0.0;          //!< 1 / max_colocate_count (trainer pool)
  double rollout_device_share_per_worker = 0.0;  //!< standalone rollout pools: 1/2 (verl replica.py:205)
  std::vector<std::string> trainer_pool_roles;   //!< worker groups on the trainer pool
  std::vector<std::string> rollout_pool_roles;   //!< worker groups on the standalone rollout pool
  RolePlan actor{};
  RolePlan critic{};
  std::int64_t log_prob_micro_batches_per_worker = 0;  //!< old log-prob passes per worker per step (0: dynamic)
  std::int64_t ref_micro_batches_per_worker = 0;       //!< reference passes per worker per step (0: none/dynamic)
  std::vector<std::string> violations;           //!< validate(cfg)
  std::vector<std::string> warnings;             //!< warnings(cfg)

  //! The plan as one JSON object (keys as the fields above).
  nlohmann::json as_json() const;
  //! as_json() printed with two-space indentation.
  std::string to_json() const { return as_json().dump(2); }
  //! The table's rows (quantity, formula, filled-in value, JSON key), in to_table() order.
  std::vector<PlanRow> rows() const;
  //! A human-readable table: quantity | formula | value, then the violations.
  std::string to_table() const;
};

namespace detail {
RLFLOW_DECL std::int64_t safe_div(std::int64_t a, std::int64_t b);
RLFLOW_DECL std::int64_t ceil_div(std::int64_t a, std::int64_t b);

RLFLOW_DECL RolePlan role_plan(std::int64_t B, std::int64_t n, std::int64_t mini, std::int64_t epochs, std::int64_t dp,
                               bool dynamic, nullable<std::int64_t> micro_per_gpu, nullable<std::int64_t> micro_global);
}  // namespace detail

//! The plan of 'cfg'. Never throws for an invalid config: quantities that cannot be computed are
//! 0 and the reasons are in Plan::violations.
RLFLOW_DECL Plan plan(TrainerConfig const& cfg);

RLFLOW_DECL nlohmann::json role_plan_json(RolePlan const& r);

//! The 'rlflow_plan' command line: 'rlflow_plan [--config FILE] [key=value ...] [--json]'.
//! Prints the plan (table, or JSON with --json) to 'out' and returns 0; prints a usage error to
//! 'err' and returns 2 for bad arguments (unknown key, bad value, unreadable file).
RLFLOW_DECL int plan_main(int argc, char const* const* argv, std::ostream& out, std::ostream& err);

}  // namespace rlflow

#if RLFLOW_DEFINE_BODIES
#include <rlflow/config/impl/planner.ipp>
#endif
