// rlflow/trainer/rollout_source.hpp: where the batch of a Trainer step comes from, chosen once at
// start-up. InlineRollout (trainer.v1.trainer_mode=sync): the actor-rollout group generates it
// inside the step. BufferedRollout (separate_async, colocate_async): it is taken from the replay
// buffer that AsyncRollout's producer fills on rollout workers of their own (async_rollout.hpp).
// Everything a road adds to a step is a method of its source: taking the batch, the bookkeeping
// of a taken batch, ReMax's greedy batch, publishing the weights after the update, and the
// replay buffer in checkpoints and on resume. Trainer::step() calls the same methods on every road.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include <rlflow/trainer/async_rollout.hpp>           // AsyncRollout, AsyncHooks
#include <rlflow/trainer/checkpoint.hpp>              // CheckpointWriter
#include <rlflow/data/data.hpp>                    // PromptDataset, DataPosition
#include <rlflow/core/data_proto.hpp>              // DataProto
#include <rlflow/trainer/checks.hpp>   // async_mode, staleness_bound
#include <rlflow/trainer/driver.hpp>   // make_prompt_batch, add_rollout_seeds
#include <rlflow/core/error.hpp>                   // error, config_error
#include <rlflow/core/metrics.hpp>                 // Metrics
#include <rlflow/model/tokenizer.hpp>         // model::Tokenizer
#include <rlflow/trainer/replay_buffer.hpp>           // RolloutBatch, save_replay_buffer
#include <rlflow/roles/setup.hpp>             // roles::RoleSetup
#include <rlflow/config/estimators.hpp>            // estimator_of
#include <rlflow/config/trainer_config.hpp>          // TrainerConfig
#if defined(RLFLOW_HAS_MPI)
#include <rlflow/mpi/mpi.hpp>            // mpi::launched, mpi::place_pool
#endif

namespace rlflow::detail {

//! What a rollout source reads from its Trainer (which outlives it; nothing here changes after start-up).
struct RolloutContext {
  TrainerConfig const* cfg = nullptr;
  PromptDataset const* train = nullptr;
  std::shared_ptr<model::Tokenizer const> tok;
  std::int64_t total_steps = 0;
  int trainer_world_size = 1;  //!< the trainer group's ranks (the MPI placement of a standalone pool)
  std::shared_ptr<AsyncHooks const> hooks;
  bool partial_rollout = false;  //!< TrainerOptions::partial_rollout
  //! The actor-rollout group's generate_sequences.
  std::function<DataProto(DataProto const&)> generate;
  //! The actor's current full weights (gathered under training TP).
  std::function<std::vector<float>()> weights;
  //! A start-up warning (Trainer::startup_warnings).
  std::function<void(std::string const&)> warn;
};

//! ReMax: the greedy rollout's input, the step's prompts (one row each) with seeds of salt 1
//! and do_sample false. verl: gen_baseline_batch (do_sample=False).
inline DataProto greedy_prompts(DataProto prompts, std::int64_t step_no, TrainerConfig const& cfg) {
  add_rollout_seeds(prompts, cfg.seed, step_no, /*salt=*/1);
  prompts.meta_info().set("do_sample", false);
  return prompts;
}

//! The prompts of step 'step_no' from 'pos' on (moving it past them), one row each with its uid.
inline DataProto step_prompts(RolloutContext const& ctx, std::int64_t step_no, DataPosition& pos) {
  return make_prompt_batch(ctx.train->next_batch(pos, ctx.cfg->data.train_batch_size), step_no, *ctx.cfg, *ctx.tok);
}

//! The generation input of a step's prompts: repeated rollout.n times interleaved (uid per
//! prompt before repetition), rollout seeds of salt 0.
inline DataProto rollout_input(RolloutContext const& ctx, DataProto const& prompts, std::int64_t step_no) {
  DataProto gen = prompts.repeat(ctx.cfg->actor_rollout_ref.rollout.n, /*interleave=*/true);
  add_rollout_seeds(gen, ctx.cfg->seed, step_no, /*salt=*/0);
  return gen;
}

//! What both rollout roads share (the Trainer holds one road in a std::variant, so each call is
//! a direct call). A road provides generate(step_no, pos, epoch, metrics) (the batch of step
//! 'step_no'; moves 'pos' past its prompts, sets 'epoch', adds 'timing_s/gen'), greedy_batch
//! (ReMax: one greedy row per prompt of the last generate), publish_weights (after the actor
//! update: the weights go where the next batches are generated) and start(global_step, pos) (on
//! the driver, after the resume). verl: the 'gen' stage of RayPPOTrainer.fit (sync) or the replay
//! buffer sample of the v1 async trainers.
class RolloutSource {
 public:
  explicit RolloutSource(RolloutContext ctx) : ctx_(std::move(ctx)) {}
  RolloutSource(RolloutSource const&) = delete;
  RolloutSource& operator=(RolloutSource const&) = delete;

  //! Step 'step_no' completed: its batch is consumed.
  void step_done() {}
  //! Devices of a rollout pool of its own (perf/throughput counts them); 0 when it shares the trainer's.
  std::int64_t own_devices() const { return 0; }
  //! The generated batches not yet trained on, written into the checkpoint being built; null: none.
  nlohmann::ordered_json save_replay_buffer(CheckpointWriter&) { return nullptr; }
  //! A resumed checkpoint's replay buffer, kept until start().
  void restore(std::vector<RolloutBatch> batches) { restored_ = std::move(batches); }

 protected:
  ~RolloutSource() = default;

  //! The restored batches this run can train on: the leading ones within staleness bound
  //! 'bound' and the run's steps (-1: none); a warning names the ones dropped (they are generated
  //! again with the checkpoint's weights).
  std::vector<RolloutBatch> take_restored(std::int64_t bound) {
    std::vector<RolloutBatch> keep, all = std::move(restored_);
    restored_.clear();
    std::int64_t const total = ctx_.total_steps;
    for (auto& b : all) {
      if (bound < 0 || b.step > total || (b.step - 1) - b.version > bound) break;
      keep.push_back(std::move(b));
    }
    if (keep.size() < all.size())
      ctx_.warn(msg("the checkpoint's replay buffer holds ", all.size(), " generated batches (steps ", all.front().step, "..",
                    all.back().step, "); ", all.size() - keep.size(), " of them are not used by this run (trainer.v1.trainer_mode=",
                    ctx_.cfg->trainer.v1.trainer_mode.str(), bound < 0 ? std::string(", no batches generated ahead")
                                                                        : msg(", staleness bound ", bound, ", ", total, " steps"),
                    ") and are generated again with the checkpoint's weights"));
    return keep;
  }

  RolloutContext ctx_;
  std::vector<RolloutBatch> restored_;
};

//! Moves the rollout engine's counters out of a generated batch (meta_info 'metrics': one dict per
//! rollout rank, concatenated into a dict of lists) into the step's metrics as perf/rollout/<name>
//! (roles::detail::paged_rollout_metrics names them): the sum over the ranks, the maximum for the
//! kv_cache_peak_* ones, and prefix_cache_hit_rate = hits / queries of the sums. They depend on
//! the layout and the schedule (as the other perf/ metrics do), never the tokens.
inline void take_rollout_metrics(DataProto& batch, Metrics& m) {
  Value const* v = batch.meta_info().find(metrics_key);
  if (!v || !v->is_dict()) return;
  for (auto const& [k, x] : v->as_dict()) {
    bool const peak = k.rfind("kv_cache_peak", 0) == 0;
    double acc = 0;
    auto add = [&](Value const& e) { acc = peak ? std::max(acc, e.as_number()) : acc + e.as_number(); };
    if (x.is_list())
      for (auto const& e : x.as_list()) add(e);
    else
      add(x);
    m["perf/rollout/" + k] = acc;
  }
  double const q = m["perf/rollout/prefix_cache_queries"], h = m["perf/rollout/prefix_cache_hits"];
  m["perf/rollout/prefix_cache_hit_rate"] = q > 0 ? h / q : 0.0;
  batch.meta_info().erase(metrics_key);
}

//! The sync road: the actor-rollout group generates the step's batch (the rollout sleeps
//! afterwards when free_cache_engine), and ReMax's greedy batch of the same prompts. verl:
//! RayPPOTrainer.fit, generate_sequences and gen_baseline_batch.
class InlineRollout final : public RolloutSource {
 public:
  using RolloutSource::RolloutSource;

  DataProto generate(std::int64_t step_no, DataPosition& pos, std::int64_t&, Metrics& m) {
    prompts_ = step_prompts(ctx_, step_no, pos);
    DataProto gen_batch = rollout_input(ctx_, prompts_, step_no);
    auto const t0 = std::chrono::steady_clock::now();
    DataProto batch = ctx_.generate(gen_batch);
    m["timing_s/gen"] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    take_rollout_metrics(batch, m);
    return batch;
  }
  DataProto greedy_batch(std::int64_t step_no) { return ctx_.generate(greedy_prompts(prompts_, step_no, *ctx_.cfg)); }
  void publish_weights(std::int64_t) {}  // the actor's update_weights already moved them into its rollout
  //! A resumed async run's buffer is not used here (a warning names it).
  void start(std::int64_t, DataPosition) { take_restored(-1); }

 private:
  DataProto prompts_;  //!< the step's prompts, one row each (ReMax's greedy batch)
};

//! The async roads: the step's batch (and ReMax's greedy batch) from the replay buffer of an
//! AsyncRollout producer on rollout workers of their own, a standalone pool (separate_async) or
//! the trainer's devices (colocate_async); the weights of each step are published to it. The
//! workers are built on every rank (the MPI backend places a separate pool on processes of its
//! own), the producer starts on the driver. verl: trainer_separate_async.py /
//! trainer_colocate_async.py (replay_buffer.sample, checkpoint engine sync).
template <class Async>
class BufferedRollout final : public RolloutSource {
 public:
  BufferedRollout(RolloutContext ctx, roles::RoleSetup const& setup) : RolloutSource(std::move(ctx)) {
    TrainerConfig const& cfg = *ctx_.cfg;
    bool const sep = cfg.is_separate_async();
    typename Async::Plan plan;
    plan.mode = sep ? "separate_async" : "colocate_async";
    // separate_async: a pool of its own; colocate_async: rollout workers on the trainer's devices
    plan.pool_name = sep ? "rollout_pool" : "global_pool/rollout";
    plan.devices_per_node = sep ? std::vector<int>(static_cast<std::size_t>(cfg.actor_rollout_ref.rollout.nnodes),
                                                   static_cast<int>(cfg.rollout_n_gpus_per_node()))
                                : std::vector<int>(static_cast<std::size_t>(cfg.trainer.nnodes),
                                                   static_cast<int>(cfg.trainer.n_gpus_per_node));
    plan.bound = staleness_bound(cfg);
#if defined(RLFLOW_HAS_MPI)
    // under mpirun the standalone rollout pool runs in the processes after the trainer's
    if (sep && mpi::launched()) mpi::place_pool(plan.pool_name, 1 + ctx_.trainer_world_size);
#endif
    plan.partial_rollout = ctx_.partial_rollout || cfg.async_training.partial_rollout;
    plan.sleep_when_idle = !sep;  // colocate_async: the rollout's memory goes back to training while it idles
    if (estimator_of(cfg.algorithm.adv_estimator.view()).needs_greedy_baseline)  // ReMax's greedy rollout, on the producer thread (reads the context only)
      plan.make_greedy = [this](std::int64_t s, DataPosition pos) { return greedy_prompts(step_prompts(ctx_, s, pos), s, *ctx_.cfg); };
    // runs on the producer thread: reads the dataset, the config and the tokenizer only (never changed after start)
    async_.emplace(std::move(plan), setup, ctx_.hooks, [this](std::int64_t s, DataPosition& pos, std::int64_t& epoch) {
      epoch = pos.epoch;
      return rollout_input(ctx_, step_prompts(ctx_, s, pos), s);
    });
  }

  //! The batch of step_no from the buffer (the data position moves to after its prompts).
  DataProto generate(std::int64_t step_no, DataPosition& pos, std::int64_t& epoch, Metrics& m) {
    TrainerConfig const& cfg = *ctx_.cfg;
    if (taken_ != 0) {
      // A step that failed on the driver after taking its batch (reward role, hook, update): the
      // batch has left the buffer and the producer generates only forward, so no later step can
      // have its batch. Fail at once (at bound 0 take() would wait for weights that never come).
      async_->stop();
      throw error(msg("rlflow::Trainer::step: step ", step_no, " cannot run: step ", taken_,
                      " failed after taking its generated batch from the replay buffer (trainer.v1.trainer_mode=",
                      cfg.trainer.v1.trainer_mode.str(), "), and the rollout workers do not generate a batch twice; "
                      "build a new Trainer with trainer.resume_mode=auto to resume from the last checkpoint"));
    }
    if (step_no > ctx_.total_steps)
      throw config_error(msg("rlflow::Trainer::step: step ", step_no, " is past the run's ", ctx_.total_steps,
                             " steps; the rollout workers generated for steps up to ", ctx_.total_steps));
    auto const t0 = std::chrono::steady_clock::now();
    RolloutBatch b = async_->take(step_no, m);
    taken_ = step_no;  // until the step completes (step_done)
    // verl v1: the 'gen' timer wraps replay_buffer.sample, i.e. the wait for a ready batch
    m["timing_s/gen"] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    DataProto batch = std::move(b.batch);
    take_rollout_metrics(batch, m);
    greedy_ = std::move(b.greedy);
    if (estimator_of(cfg.algorithm.adv_estimator.view()).needs_greedy_baseline && greedy_.size() == 0)
      throw error(msg("rlflow::Trainer: step ", step_no, ": ReMax's greedy rollout is missing from the batch (internal error)"));
    pos = b.pos_after;
    epoch = b.epoch;
    if (ctx_.hooks && ctx_.hooks->before_train) ctx_.hooks->before_train(step_no, batch);
    return batch;
  }
  //! The rollout workers generated it with the batch's weights.
  DataProto greedy_batch(std::int64_t) { return std::exchange(greedy_, DataProto{}); }
  //! The rollout workers load these weights before their next batch.
  void publish_weights(std::int64_t step_no) {
    async_->publish_weights(std::make_shared<std::vector<float> const>(ctx_.weights()), step_no);
  }
  void step_done() { taken_ = 0; }
  //! verl: n_gpus counts every pool (separate_async: trainer + standalone rollout devices).
  std::int64_t own_devices() const { return ctx_.cfg->is_separate_async() ? ctx_.cfg->rollout_devices() : 0; }
  nlohmann::ordered_json save_replay_buffer(CheckpointWriter& w) {
    return rlflow::save_replay_buffer(w, async_->snapshot());
  }
  //! The steps to generate for, the checkpoint's batches this run can train on, and the
  //! producer's start with the trainer's current weights.
  void start(std::int64_t global_step, DataPosition pos) {
    if (global_step >= ctx_.total_steps) {
      take_restored(-1);  // warns if it drops any
      return;
    }
    async_->set_steps(global_step + 1, ctx_.total_steps, pos, take_restored(staleness_bound(*ctx_.cfg)));
    async_->start(std::make_shared<std::vector<float> const>(ctx_.weights()), global_step);
  }

  Async& rollout() { return *async_; }

 private:
  std::int64_t taken_ = 0;  //!< the step that took its batch and has not completed (0: none)
  DataProto greedy_;        //!< ReMax: the taken batch's greedy rollout, until the step uses it
  std::optional<Async> async_;  //!< last: its producer stops and joins before the members it reads go
};

}  // namespace rlflow::detail
