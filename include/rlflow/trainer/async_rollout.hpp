// rlflow/trainer/async_rollout.hpp: the driver-side producer of the async roads (AsyncRollout): it keeps
// a group of standalone rollout workers generating ahead of the trainer, within a staleness
// bound, into a replay buffer, and moves each published policy version to them through a
// checkpoint engine. verl: the rollout loop of trainer_separate_async.py / trainer_colocate_async.py.
//
// Versions: version v = the policy after v training steps. The batch of step s generated with
// version v is (s - 1) - v versions behind when step s trains on it ("staleness"); the bound is
// K = min(trainer.v1.sampler.max_off_policy_threshold, trainer.v1.<mode>.num_warmup_batches).
// K = 0 is a synchronous schedule on separate workers; K = 1 is one-step-off.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <rlflow/trainer/checkpoint_engine.hpp>         // InProcessCheckpointEngine, MpiCheckpointEngine
#include <rlflow/data/data.hpp>                      // DataPosition
#include <rlflow/core/data_proto.hpp>                // DataProto
#include <rlflow/core/error.hpp>                     // error, worker_error
#include <rlflow/core/metrics.hpp>                   // Metrics
#include <rlflow/trainer/replay_buffer.hpp>             // RolloutBatch, ReplayBuffer
#include <rlflow/dispatch/resource_pool.hpp>             // ResourcePool
#include <rlflow/roles/standalone_rollout.hpp>  // roles::StandaloneRollout, AsyncHooks, RolloutControl
#include <rlflow/dispatch/worker_group.hpp>              // WorkerGroup

namespace rlflow {

//! The asynchronous rollout of one trainer: a group of StandaloneRollout workers on its own
//! pool, a producer thread on the driver that generates the batches of steps first..last in
//! order into a ReplayBuffer, applying the newest published weights before each batch, and
//! never starting the batch of step s before version s - 1 - bound is published (so no batch is
//! more than 'bound' versions behind when trained on). Errors of the producer (a rollout worker
//! that throws, a failing weight sync) end the producer and are rethrown by the next take(),
//! which joins it first, and by every later one, wrapped with the pool, role and step (the
//! trainer's state is that of the last completed step: resume from a checkpoint). The
//! destructor stops the producer and joins it.
template <class System, int TP, class Backend = dispatch::InProcess>
class AsyncRollout {
 public:
  using role = roles::StandaloneRollout<System, TP>;
  using group_type = WorkerGroup<role, Backend>;
  using engine_type = std::conditional_t<std::is_same_v<Backend, dispatch::InProcess>, InProcessCheckpointEngine<group_type>,
                                         MpiCheckpointEngine<group_type>>;
  //! Builds the prompts (input_ids, attention_mask, rollout_seed, non-tensors) of step 's',
  //! advancing 'pos'; called on the producer thread, so it must only read shared state.
  using MakePrompts = std::function<DataProto(std::int64_t s, DataPosition& pos, std::int64_t& epoch)>;

  struct Plan {
    std::string mode;       //!< "separate_async" or "colocate_async" (metric prefix)
    std::string pool_name;  //!< the rollout workers' pool ("rollout_pool" / "global_pool")
    std::vector<int> devices_per_node;
    std::int64_t bound = 1;        //!< staleness bound K
    std::int64_t first_step = 1;   //!< the first step to generate for
    std::int64_t last_step = 1;    //!< the last
    DataPosition start_pos;        //!< the data position before first_step's prompts
    //! Batches restored from a checkpoint (steps first_step, first_step + 1, ... in order, each
    //! within the bound): they go into the buffer before the producer starts, which then
    //! generates from the step after the last of them.
    std::vector<RolloutBatch> restored;
    //! Partial rollout: a weight publication aborts the batch being generated, the newest
    //! weights are loaded and its unfinished rows continue with them (CPU, rollout TP 1).
    bool partial_rollout = false;
    //! colocate_async: the rollout workers release their KV cache and activations whenever the
    //! producer goes idle (verl: sleep_replicas), and re-acquire them when generating again.
    bool sleep_when_idle = false;
    //! ReMax: builds the greedy rollout's prompts of step 's' (one row per prompt, do_sample
    //! false) from the data position before that step's prompts; the producer generates them
    //! after the batch, with the same weights, into RolloutBatch::greedy. Empty: no greedy rollout.
    std::function<DataProto(std::int64_t s, DataPosition pos_before)> make_greedy;
  };

  AsyncRollout(Plan plan, roles::RoleSetup setup, std::shared_ptr<AsyncHooks const> hooks, MakePrompts make)
      : plan_(std::move(plan)),
        hooks_(std::move(hooks)),
        make_(std::move(make)),
        pool_(plan_.pool_name, plan_.devices_per_node, 1),
        buffer_(static_cast<std::size_t>(plan_.bound + 1)) {
    restore(std::exchange(plan_.restored, {}));
    GroupOptions go;
    go.name = plan_.pool_name;
    control_->partial_rollout = plan_.partial_rollout && TP == 1;
    group_.emplace(pool_, go, std::move(setup), hooks_, std::shared_ptr<RolloutControl const>(control_));
    engine_.emplace(*group_, hooks_);
  }
  AsyncRollout(AsyncRollout const&) = delete;
  AsyncRollout& operator=(AsyncRollout const&) = delete;
  ~AsyncRollout() { stop(); }

  //! The steps to generate for, the data position before the first, and the batches a resumed
  //! checkpoint's replay buffer restored (steps first_step, first_step + 1, ... in order): known
  //! after a resume, while the group is built before, on every rank, as the MPI backend needs.
  //! Call before start().
  void set_steps(std::int64_t first_step, std::int64_t last_step, DataPosition start_pos,
                 std::vector<RolloutBatch> restored = {}) {
    plan_.first_step = first_step;
    plan_.last_step = last_step;
    plan_.start_pos = std::move(start_pos);
    restore(std::move(restored));
  }

  //! Publishes the initial weights (the trainer's, 'version' = its global step) and starts the producer.
  void start(std::shared_ptr<std::vector<float> const> weights, std::int64_t version) {
    publish_weights(std::move(weights), version);
    producer_ = std::thread([this] { produce(); });
  }

  //! Publishes the weights of 'version' (called after each training step); the producer loads
  //! them before its next batch.
  void publish_weights(std::shared_ptr<std::vector<float> const> weights, std::int64_t version) {
    std::lock_guard lk(mu_);
    staged_ = std::move(weights);
    staged_version_ = version;
    if (control_->partial_rollout) control_->abort.store(true, std::memory_order_release);
    cv_.notify_all();
  }

  //! Takes the batch of step 'step' (waiting if it is not ready) and writes the async metrics.
  RolloutBatch take(std::int64_t step, Metrics& m) {
    using clock = std::chrono::steady_clock;
    auto const t0 = clock::now();
    std::size_t depth = 0;
    RolloutBatch b;
    try {
      b = buffer_.pop(depth);
    } catch (std::exception const& e) {
      // the producer ended at the failure: join it now (the trainer holds no running thread);
      // every later take() rethrows the same error, without waiting
      stop();
      throw worker_error(msg("rlflow::Trainer: step ", step, ": the rollout workers on pool '", plan_.pool_name,
                             "' (role rollout, ", plan_.mode, ") failed: ", e.what()));
    }
    {
      std::lock_guard lk(mu_);  // the producer waits for room in the buffer under mu_
      cv_.notify_all();
    }
    double const waited = std::chrono::duration<double>(clock::now() - t0).count();
    if (b.step != step)
      throw error(msg("rlflow::Trainer: step ", step, " received the batch generated for step ", b.step,
                      " from pool '", plan_.pool_name, "'; batches must arrive in order (internal error)"));
    std::int64_t const staleness = (step - 1) - b.version;
    if (staleness < 0 || staleness > plan_.bound)
      throw error(msg("rlflow::Trainer: step ", step, " received a batch of policy version ", b.version, ", ", staleness,
                      " versions behind, outside the staleness bound 0..", plan_.bound, " (internal error)"));
    std::string const p = plan_.mode + "/";
    // verl: training/off_policy/trajectory_staleness (one version per batch here: mean = max = min)
    m["training/off_policy/trajectory_staleness/mean"] = static_cast<double>(staleness);
    m["training/off_policy/trajectory_staleness/max"] = static_cast<double>(staleness);
    m["training/off_policy/trajectory_staleness/min"] = static_cast<double>((step - 1) - b.max_version);
    m[p + "staleness_bound"] = static_cast<double>(plan_.bound);
    m[p + "buffer_depth"] = static_cast<double>(depth);
    m[p + "buffer_capacity"] = static_cast<double>(buffer_.capacity());
    m[p + "trainer_idle_s"] = waited;
    m[p + "generate_s"] = b.generate_s;
    m[p + "policy_version"] = static_cast<double>(b.version);
    if (control_->partial_rollout) m[p + "partial_rollout_resumes"] = static_cast<double>(b.resumes);
    {
      std::lock_guard lk(mu_);
      m[p + "rollout_idle_s"] = rollout_idle_s_;
      m[p + "weight_sync_s"] = sync_s_;
      m[p + "weight_sync_bytes"] = static_cast<double>(sync_bytes_);
      if (plan_.sleep_when_idle) m[p + "rollout_memory_released_bytes"] = static_cast<double>(released_bytes_);
      rollout_idle_s_ = sync_s_ = 0;
      sync_bytes_ = released_bytes_ = 0;
    }
    return b;
  }

  //! Copies of the buffered batches, oldest first, taken at a batch boundary of the producer
  //! (it is held there while they are copied; a batch being generated is finished and pushed
  //! first). With the trainer's own state they are everything the rollout side holds, so a
  //! checkpoint that saves them resumes to the same continuation (docs/trainer.md, "Resume").
  //! verl: none (its async trainers do not checkpoint the buffer).
  std::vector<RolloutBatch> snapshot() {
    std::unique_lock lk(mu_);
    paused_ = true;
    cv_.notify_all();
    cv_.wait(lk, [&] { return !producer_busy_; });
    auto out = buffer_.snapshot();
    paused_ = false;
    cv_.notify_all();
    return out;
  }
  //! The newest policy version published to the producer.
  std::int64_t published_version() const {
    std::lock_guard lk(mu_);
    return staged_version_;
  }
  //! The partial-rollout switch and abort flag shared with the rollout workers (tests, tools).
  RolloutControl& control() { return *control_; }
  //! The last step whose batch was started (its policy version chosen) or restored.
  std::int64_t started_through() const {
    std::lock_guard lk(mu_);
    return started_through_;
  }

  //! Stops the producer (it finishes the chunk it is generating) and joins it. Idempotent.
  void stop() {
    {
      std::lock_guard lk(mu_);
      stopping_ = true;
      cv_.notify_all();
    }
    buffer_.close();
    if (producer_.joinable()) producer_.join();
  }

  group_type& workers() { return *group_; }
  //! True until the producer thread is joined (by stop(), the destructor, or a failed take()).
  bool producer_running() const { return producer_.joinable(); }
  std::int64_t bound() const { return plan_.bound; }
  std::size_t max_buffer_depth() const { return buffer_.max_depth(); }
  std::string_view checkpoint_engine_name() const { return engine_->name(); }

 private:
  //! True while some row of a partial-rollout output is unfinished.
  static bool unfinished(DataProto const& d) {
    if (!d.has_tensor("partial_rollout_len")) return false;
    for (auto x : d.tensor("partial_rollout_len").span<std::int32_t>())
      if (x >= 0) return true;
    return false;
  }

  //! Sends the weights of 'v' through the checkpoint engine; 'applied' becomes v.
  void sync(std::shared_ptr<std::vector<float> const> w, std::int64_t v, std::int64_t& applied) {
    auto const t0 = std::chrono::steady_clock::now();
    std::int64_t bytes = 0;
    try {
      bytes = engine_->update_weights(std::move(w), v);
    } catch (std::exception const& e) {
      throw worker_error(msg("the weight sync of policy version ", v, " through the '", engine_->name(),
                             "' checkpoint engine failed: ", e.what()));
    }
    applied = v;
    std::lock_guard lk(mu_);
    sync_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    sync_bytes_ += bytes;
  }

  void produce() {
    using clock = std::chrono::steady_clock;
    struct idle_on_exit {  // a pause never waits for a producer that has ended
      AsyncRollout* self;
      ~idle_on_exit() {
        std::lock_guard lk(self->mu_);
        self->producer_busy_ = false;
        self->cv_.notify_all();
      }
    } idle{this};
    try {
      DataPosition pos = plan_.start_pos;
      std::int64_t applied = -1;
      for (std::int64_t s = plan_.first_step; s <= plan_.last_step; ++s) {
        std::shared_ptr<std::vector<float> const> w;
        std::int64_t v = -1;
        {
          auto const t0 = clock::now();
          std::unique_lock lk(mu_);
          // idle here (and only here): a pause waits for this point. Room in the buffer is
          // waited for before generating, so a finished batch is always pushed without blocking
          // (with the version rule the buffer never holds more than bound + 1 batches anyway).
          producer_busy_ = false;
          cv_.notify_all();
          cv_.wait(lk, [&] {
            return stopping_ || (!paused_ && staged_version_ >= s - 1 - plan_.bound && buffer_.size() < buffer_.capacity());
          });
          producer_busy_ = true;
          rollout_idle_s_ += std::chrono::duration<double>(clock::now() - t0).count();
          if (stopping_) return;
          started_through_ = s;
          if (staged_version_ > applied) {
            w = staged_;
            v = staged_version_;
          }
          control_->abort.store(false, std::memory_order_release);
        }
        if (w) sync(std::move(w), v, applied);
        RolloutBatch b;
        b.step = s;
        b.version = b.max_version = applied;
        DataPosition const pos_before = pos;
        DataProto prompts = make_(s, pos, b.epoch);
        auto const t0 = clock::now();
        // generates 'in' into 'out'; with partial rollout, a generation aborted by a newer version
        // loads it and continues (verl: abort_all_requests, update_weights, resume_generation).
        // false when the producer is stopping.
        auto const generate = [&](DataProto in, DataProto& out) {
          in.meta_info().set("global_step", s);
          out = group_->template call<&role::generate_sequences>(in);
          while (control_->partial_rollout && unfinished(out)) {
            {
              std::lock_guard lk(mu_);
              if (stopping_) return false;
              w = staged_version_ > applied ? staged_ : nullptr;
              v = staged_version_;
              control_->abort.store(false, std::memory_order_release);
            }
            if (w) sync(std::move(w), v, applied);
            b.max_version = applied;
            ++b.resumes;
            out.meta_info().set("global_step", s);
            out = group_->template call<&role::generate_sequences>(out);
          }
          if (control_->partial_rollout) (void)out.pop(std::vector<std::string>{"partial_rollout_len"});
          return true;
        };
        if (!generate(std::move(prompts), b.batch)) return;
        // ReMax: the greedy baseline rollout of the same prompts, with the weights that finished
        // the batch (= its version without partial rollout). verl: the greedy copy of gen_max.
        if (plan_.make_greedy && !generate(plan_.make_greedy(s, pos_before), b.greedy)) return;
        b.generate_s = std::chrono::duration<double>(clock::now() - t0).count();
        b.pos_after = pos;
        auto const t1 = clock::now();
        if (!buffer_.push(std::move(b))) return;
        bool idle_next = s == plan_.last_step;
        {
          std::lock_guard lk(mu_);
          rollout_idle_s_ += std::chrono::duration<double>(clock::now() - t1).count();
          idle_next = idle_next || staged_version_ < s - plan_.bound || buffer_.size() >= buffer_.capacity();
        }
        if (plan_.sleep_when_idle && idle_next) {  // the next batch must wait: give the memory back meanwhile
          std::int64_t released = 0;
          for (auto x : group_->template call<&role::sleep>()) released += x;
          std::lock_guard lk(mu_);
          released_bytes_ += released;
        }
      }
    } catch (...) {
      buffer_.fail(std::current_exception());
    }
  }

  Plan plan_;
  std::shared_ptr<AsyncHooks const> hooks_;
  //! Seeds the buffer with restored batches: each must be for the next step to generate; the
  //! steps and the data position then continue after them.
  void restore(std::vector<RolloutBatch> restored) {
    if (restored.size() > buffer_.capacity())
      throw error(msg("rlflow::AsyncRollout: ", restored.size(), " restored batches exceed the buffer's capacity ",
                      buffer_.capacity(), " (internal error)"));
    started_through_ = plan_.first_step - 1;
    for (auto& b : restored) {
      if (b.step != plan_.first_step)
        throw error(msg("rlflow::AsyncRollout: a restored batch is for step ", b.step, " where step ", plan_.first_step,
                        " was expected (internal error)"));
      ++plan_.first_step;
      plan_.start_pos = b.pos_after;
      started_through_ = b.step;
      buffer_.push(std::move(b));
    }
  }

  MakePrompts make_;
  ResourcePool pool_;
  std::optional<group_type> group_;
  std::optional<engine_type> engine_;
  ReplayBuffer buffer_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool paused_ = false;
  bool producer_busy_ = false;  // true while the producer is between two batch boundaries
  std::int64_t started_through_ = 0;
  std::shared_ptr<std::vector<float> const> staged_;
  std::int64_t staged_version_ = -1;
  bool stopping_ = false;
  double rollout_idle_s_ = 0, sync_s_ = 0;
  std::int64_t sync_bytes_ = 0, released_bytes_ = 0;
  std::shared_ptr<RolloutControl> control_ = std::make_shared<RolloutControl>();
  std::thread producer_;  // last: joined (by stop) before the members it uses go
};

}  // namespace rlflow
