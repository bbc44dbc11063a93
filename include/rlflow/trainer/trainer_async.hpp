// rlflow/trainer/trainer_async.hpp: the machinery of the asynchronous roads of the Trainer (verl v1's
// trainer_separate_async.py and trainer_colocate_async.py): a standalone rollout role
// (roles::StandaloneRollout), the checkpoint-engine interface that moves the trainer's weights
// to the rollout workers (CheckpointEngine, InProcessCheckpointEngine), a bounded replay buffer
// of generated batches, each stamped with the policy version that produced it (ReplayBuffer),
// and the driver-side producer that keeps the rollout workers generating ahead of the trainer
// within a staleness bound (AsyncRollout). trainer.hpp calls it; docs/trainer.md explains it.
//
// Versions: version v = the policy after v training steps. The batch of step s generated with
// version v is (s - 1) - v versions behind when step s trains on it ("staleness"); the bound is
// K = min(trainer.v1.sampler.max_off_policy_threshold, trainer.v1.<mode>.num_warmup_batches).
// K = 0 is a synchronous schedule on separate workers; K = 1 is one-step-off.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <atomic>
#include <exception>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <rlflow/trainer/checkpoint.hpp>               // CheckpointWriter, checkpoint field readers
#include <rlflow/data/data.hpp>                     // DataPosition
#include <rlflow/core/data_proto.hpp>               // DataProto
#include <rlflow/core/error.hpp>                    // error, config_error
#include <rlflow/core/metrics.hpp>                  // Metrics
#include <rlflow/dispatch/resource_pool.hpp>            // ResourcePool
#include <rlflow/roles/actor_rollout_ref.hpp>  // engines, detail::generate_with
#include <rlflow/dispatch/worker_group.hpp>             // WorkerGroup

namespace rlflow {

//! Test hooks of the asynchronous trainers (random delays, injected failures). Every hook is
//! optional. rlflow's own (verl has none).
struct AsyncHooks {
  //! On each rollout worker's thread, before it generates its chunk of the batch of 'step'.
  std::function<void(std::int64_t step, int rank)> in_generate;
  //! On the driver, when step 'step' has taken its batch and before it trains on it.
  std::function<void(std::int64_t step, DataProto const& batch)> before_train;
  //! In the checkpoint engine, before the weights of 'version' move to the rollout workers.
  std::function<void(std::int64_t version)> on_sync;
  //! On each rollout worker's thread, before it loads weights sent by the checkpoint engine.
  std::function<void(int rank)> in_update_weights;
};

//! Shared by the producer and its rollout workers: partial rollout on/off and the abort flag a
//! weight publication raises (verl: abort_all_requests before a weight sync).
struct RolloutControl {
  bool partial_rollout = false;
  std::atomic<bool> abort{false};
};

namespace roles {

//! A rollout worker of its own (the standalone rollout pool of separate_async, or the rollout
//! workers that share the trainer's devices in colocate_async): one rollout engine holding its
//! tensor-parallel shard (rank = replica * TP + tp_rank), no actor, no reference. CPU engines
//! only. verl: the standalone rollout replica (RolloutReplica / LLMServer on its own pool).
template <class System, int TP = 1>
class StandaloneRollout {
  static_assert(std::is_same_v<System, cpu::tag>,
                "rlflow::Trainer<..., SeparateAsync, Backend<cuda::tag>>: the standalone rollout runs on the CPU engines "
                "only; use rlflow::Backend<rlflow::cpu::tag> or rlflow::Colocate<N>");
  using E = engines<System>;

 public:
  using role_tag = rollout_tag;
  static constexpr std::string_view role_name = "rollout";
  using rollout_dispatch = std::conditional_t<TP == 1, dispatch::DPComputeProto,
                                              dispatch::NDComputeProto<dispatch::MeshLayout<TP>>>;

  RLFLOW_SC_NOINLINE StandaloneRollout(WorkerContext const& ctx, RoleSetup setup, std::shared_ptr<AsyncHooks const> hooks,
                    std::shared_ptr<RolloutControl const> control = nullptr)
      : ctx_(&ctx),
        setup_(std::move(setup)),
        tok_(role_tokenizer(setup_)),
        rollout_(std::make_from_tuple<typename E::rollout>(E::rollout_args(setup_.policy_model, model::TPRank{ctx.rank % TP, TP}))),
        hooks_(std::move(hooks)),
        control_(std::move(control)) {
    detail::apply_lm_head(rollout_, setup_.cfg, TP);  // actor_rollout_ref.model.lm_head
    // this worker thread's team, by the trainer workers' rule (TrainerOptions::threads_per_worker)
    model::layers::set_worker_threads(setup_.threads_per_worker > 0 ? setup_.threads_per_worker
                                                                    : model::layers::default_worker_threads(ctx.local_world_size));
  }

  //! Same contract as the hybrid role's generate_sequences (the same code runs); meta_info
  //! 'global_step' names the step for the in_generate hook. Never sleeps: the pool only generates.
  //! verl: generate_sequences (AsyncLLMServerManager.generate on a standalone replica)
  RLFLOW_SC_NOINLINE DataProto generate_sequences(DataProto const& prompts) {
    if constexpr (TP > 1) {
      if (!mesh_.tp) {
        mesh_ = comm::split_mesh(ctx_->comm(), TP);
        rollout_.set_tp_communicator(mesh_.tp.get());
      }
    }
    if (hooks_ && hooks_->in_generate) {
      std::int64_t step = -1;
      if (auto const* v = prompts.meta_info().find("global_step"); v && v->is_int()) step = v->as_int();
      hooks_->in_generate(step, ctx_->rank);
    }
    if (!control_ || !control_->partial_rollout || TP > 1) return detail::generate_with(rollout_, *tok_, setup_.cfg, prompts);
    engine::GenerateControl gc;
    gc.abort = &control_->abort;
    if (prompts.has_tensor("partial_rollout_len")) return continue_partial(prompts, gc);
    return detail::generate_with(rollout_, *tok_, setup_.cfg, prompts, &gc);
  }

  //! Releases the rollout engine's KV cache and activations (colocate_async: the memory goes back
  //! to training while the rollout idles); returns the bytes released. The next generation
  //! re-acquires them. verl: sleep_replicas / release_kv_cache.
  RLFLOW_SC_NOINLINE std::int64_t sleep() {
    auto const held = static_cast<std::int64_t>(rollout_.memory_bytes());
    rollout_.sleep();
    return held;
  }
  //! Bytes the rollout engine holds now (KV cache and activations, weights excluded).
  std::int64_t memory_bytes() const { return static_cast<std::int64_t>(rollout_.memory_bytes()); }

  //! Loads a full flat copy of the policy's weights; each rank keeps its TP shard.
  //! verl: the checkpoint engine's receive side (update_weights on the replica)
  RLFLOW_SC_NOINLINE void update_weights(std::shared_ptr<std::vector<float> const> weights) {
    if (hooks_ && hooks_->in_update_weights) hooks_->in_update_weights(ctx_->rank);
    rollout_.load_weights(std::span<float const>(*weights));
    rollout_.wake();
  }

  //! This rank's rollout weights (its TP shard), for tests and tools.
  std::vector<float> rollout_weights() const { return {rollout_.weights().begin(), rollout_.weights().end()}; }
  //! This rank's LM head (actor_rollout_ref.model.lm_head): 0 replicated, 1 vocabulary-parallel.
  std::int64_t lm_head() const { return detail::lm_head_code(rollout_); }

  using methods = rlflow::methods<rlflow::method<&StandaloneRollout::generate_sequences, rollout_dispatch>,
                                  rlflow::method<&StandaloneRollout::update_weights, dispatch::OneToAll>,
                                  rlflow::method<&StandaloneRollout::sleep, dispatch::OneToAll>,
                                  rlflow::method<&StandaloneRollout::memory_bytes, dispatch::OneToAll>,
                                  rlflow::method<&StandaloneRollout::rollout_weights, dispatch::OneToAll>,
                                  rlflow::method<&StandaloneRollout::lm_head, dispatch::OneToAll>>;

 private:
  //! Continues the unfinished rows of an aborted generation (its output, 'partial_rollout_len'
  //! >= 0) with the weights loaded now: each row's prompt and tokens so far are the new prompt,
  //! the sampling counter goes on at its token index, so every token stays a function of (seed,
  //! index, the weights that drew it). Rows with the same length go in one call. verl:
  //! resume_generation (the partial rollout continues with the new weights).
  RLFLOW_SC_NOINLINE DataProto continue_partial(DataProto const& part, engine::GenerateControl gc) {
    if (rollout_.is_sleeping()) rollout_.wake();
    Tensor const& pids = part.tensor("prompts");
    Tensor const& am_full = part.tensor("attention_mask");
    Tensor responses = part.tensor("responses").clone();
    Tensor rmask = part.tensor("response_mask").clone();
    Tensor lp = part.tensor("rollout_log_probs").clone();
    auto const len = part.tensor("partial_rollout_len").span<std::int32_t>();
    auto const seeds_all = part.tensor("rollout_seed").span<std::int64_t>();
    std::int64_t const B = pids.dim(0), P = pids.dim(1), R = responses.dim(1);
    engine::SamplingParams const sp = detail::rollout_sampling(*tok_, setup_.cfg, part);
    std::map<std::int32_t, std::vector<std::int64_t>> groups;
    for (std::int64_t r = 0; r < B; ++r)
      if (len[static_cast<std::size_t>(r)] >= 0) groups[len[static_cast<std::size_t>(r)]].push_back(r);
    std::vector<std::int32_t> new_len(static_cast<std::size_t>(B), -1);
    for (auto const& [j, rows] : groups) {
      auto const nb = static_cast<std::int64_t>(rows.size());
      Tensor ids = Tensor::empty(DType::int32, Shape{nb, P + j});
      Tensor am = Tensor::empty(DType::int32, Shape{nb, P + j});
      std::vector<std::uint64_t> seeds(static_cast<std::size_t>(nb));
      for (std::int64_t i = 0; i < nb; ++i) {
        std::int64_t const r = rows[static_cast<std::size_t>(i)];
        for (std::int64_t t = 0; t < P; ++t) {
          ids.at<std::int32_t>(i, t) = pids.at<std::int32_t>(r, t);
          am.at<std::int32_t>(i, t) = am_full.at<std::int32_t>(r, t);
        }
        for (std::int64_t t = 0; t < j; ++t) {
          ids.at<std::int32_t>(i, P + t) = responses.at<std::int32_t>(r, t);
          am.at<std::int32_t>(i, P + t) = 1;
        }
        seeds[static_cast<std::size_t>(i)] = static_cast<std::uint64_t>(seeds_all[static_cast<std::size_t>(r)]);
      }
      engine::SamplingParams sp2 = sp;
      sp2.max_new_tokens = static_cast<int>(R - j);
      gc.first_token = static_cast<std::uint64_t>(j);
      engine::RolloutResult res = rollout_.generate(ids, am, sp2, seeds, gc);
      for (std::int64_t i = 0; i < nb; ++i) {
        std::int64_t const r = rows[static_cast<std::size_t>(i)];
        for (std::int64_t t = 0; t < R - j; ++t) {
          responses.at<std::int32_t>(r, j + t) = res.responses.at<std::int32_t>(i, t);
          rmask.at<std::int32_t>(r, j + t) = res.response_mask.at<std::int32_t>(i, t);
          lp.at<float>(r, j + t) = res.log_probs.at<float>(i, t);
        }
      }
      for (int u : res.unfinished) new_len[static_cast<std::size_t>(rows[static_cast<std::size_t>(u)])] = j + res.generated;
    }
    auto [full_ids, full_am] = detail::join_prompt_response(pids, am_full, responses, rmask);
    return DataProto::from_dict({{"prompts", pids},
                                 {"responses", responses},
                                 {"input_ids", full_ids},
                                 {"attention_mask", full_am},
                                 {"response_mask", rmask},
                                 {"rollout_log_probs", lp},
                                 {"rollout_seed", part.tensor("rollout_seed")},
                                 {"partial_rollout_len", Tensor::from(new_len)}},
                                part.non_tensors());
  }

  WorkerContext const* ctx_;
  RoleSetup setup_;
  std::shared_ptr<model::Tokenizer const> tok_;
  typename E::rollout rollout_;
  std::shared_ptr<AsyncHooks const> hooks_;
  std::shared_ptr<RolloutControl const> control_;
  comm::MeshCommunicators mesh_;
};

}  // namespace roles

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

//! One generated batch in the replay buffer. verl: the trajectories of one step's prompt groups
//! in TransferQueue, tagged with global_steps (the version that produced them).
struct RolloutBatch {
  std::int64_t step = 0;     //!< the training step it is for (its prompts and seeds are that step's)
  std::int64_t version = 0;  //!< the policy version that generated it (the first, with partial rollout)
  std::int64_t max_version = 0;  //!< the newest version that generated some of its tokens (partial rollout)
  std::int64_t resumes = 0;      //!< times its generation was aborted by a weight sync and resumed
  DataProto batch;           //!< generate_sequences' output
  DataPosition pos_after;    //!< the data position after this batch's prompts
  std::int64_t epoch = 0;    //!< the epoch its prompts came from
  double generate_s = 0;     //!< seconds the rollout workers spent generating it
  //! ReMax: the greedy rollout of the batch's prompts (one row per prompt), generated with the
  //! weights that finished the batch; empty otherwise.
  DataProto greedy;
};

//! Writes the buffered batches into the checkpoint being built, one file each
//! ('replay_buffer_step_<s>.dataproto', DataProto::save), and returns the trainer_state.json
//! field 'replay_buffer' that lists them (step, policy_version, epoch, data_position_after,
//! generate_s, file; ReMax: greedy_file, 'replay_buffer_step_<s>_greedy.dataproto'). rlflow's
//! own (verl does not checkpoint its async buffers).
inline nlohmann::ordered_json save_replay_buffer(CheckpointWriter& w, std::vector<RolloutBatch> const& batches) {
  auto out = nlohmann::ordered_json::array();
  for (auto const& b : batches) {
    std::string const file = "replay_buffer_step_" + std::to_string(b.step) + ".dataproto";
    b.batch.save(w.path(file));
    out.push_back({{"step", b.step},
                   {"policy_version", b.version},
                   {"max_policy_version", b.max_version},
                   {"partial_rollout_resumes", b.resumes},
                   {"epoch", b.epoch},
                   {"data_position_after", {{"epoch", b.pos_after.epoch}, {"index", b.pos_after.index}}},
                   {"generate_s", b.generate_s},
                   {"file", file}});
    if (b.greedy.size() > 0) {  // ReMax's greedy rollout of the batch's prompts
      std::string const gfile = "replay_buffer_step_" + std::to_string(b.step) + "_greedy.dataproto";
      b.greedy.save(w.path(gfile));
      out.back()["greedy_file"] = gfile;
    }
  }
  return out;
}

//! Reads the batches save_replay_buffer wrote into checkpoint 'dir' of step 'global_step' (none
//! when trainer_state.json has no 'replay_buffer'). Every field is checked before a batch is
//! loaded: steps consecutive from global_step + 1, versions in [0, global_step], positions in
//! range, files listed in the (already verified) manifest; a format_error names the file and field.
inline std::vector<RolloutBatch> load_replay_buffer(std::filesystem::path const& dir, std::int64_t global_step, std::int64_t prompts) {
  std::string const file = (dir / "trainer_state.json").string();
  nlohmann::json const st = detail::read_json_file(dir / "trainer_state.json");
  std::vector<RolloutBatch> out;
  if (!st.contains("replay_buffer")) return out;
  auto const& rb = st["replay_buffer"];
  if (!rb.is_array())
    throw format_error(msg("rlflow checkpoint: '", file, "': field 'replay_buffer' must be an array, got ", rb.type_name()));
  auto const manifest = read_checkpoint_manifest(dir);
  constexpr auto big = std::numeric_limits<std::int32_t>::max();
  for (std::size_t i = 0; i < rb.size(); ++i) {
    std::string const where = msg(file, "' field 'replay_buffer[", i, "]");
    auto const& e = rb[i];
    RolloutBatch b;
    b.step = detail::json_int(e, "step", where, global_step + 1 + static_cast<std::int64_t>(i),
                              global_step + 1 + static_cast<std::int64_t>(i));
    b.version = detail::json_int(e, "policy_version", where, 0, global_step);
    b.max_version = e.contains("max_policy_version") ? detail::json_int(e, "max_policy_version", where, b.version, global_step) : b.version;
    b.resumes = e.contains("partial_rollout_resumes") ? detail::json_int(e, "partial_rollout_resumes", where, 0, big) : 0;
    b.epoch = detail::json_int(e, "epoch", where, 0, big);
    auto const& pa = detail::json_field(e, "data_position_after", where);
    b.pos_after.epoch = detail::json_int(pa, "epoch", where + ".data_position_after", 0, big);
    b.pos_after.index = detail::json_int(pa, "index", where + ".data_position_after", 0, prompts);
    b.generate_s = detail::json_number(e, "generate_s", where);
    auto const& f = detail::json_field(e, "file", where);
    if (!f.is_string() || !manifest.files.count(f.get<std::string>()))
      throw format_error(msg("rlflow checkpoint: '", where, ".file' = ", f.dump(), " is not a file listed in ",
                             (dir / "MANIFEST.json").string(), "; the checkpoint is inconsistent, resume from another one"));
    b.batch = DataProto::load(dir / f.get<std::string>());
    if (e.contains("greedy_file")) {  // ReMax's greedy rollout
      auto const& g = e["greedy_file"];
      if (!g.is_string() || !manifest.files.count(g.get<std::string>()))
        throw format_error(msg("rlflow checkpoint: '", where, ".greedy_file' = ", g.dump(), " is not a file listed in ",
                               (dir / "MANIFEST.json").string(), "; the checkpoint is inconsistent, resume from another one"));
      b.greedy = DataProto::load(dir / g.get<std::string>());
    }
    out.push_back(std::move(b));
  }
  return out;
}

//! A bounded FIFO of generated batches between one producer and one consumer. push blocks while
//! full, pop while empty; close() wakes both (push then drops, pop throws); fail(e) makes every
//! later pop rethrow e. verl: ReplayBuffer (v1), strategy 'wait' (nothing is ever dropped).
class ReplayBuffer {
 public:
  explicit ReplayBuffer(std::size_t capacity) : cap_(capacity) {
    if (cap_ < 1) throw config_error("rlflow::ReplayBuffer: capacity must be at least 1");
  }
  //! false when the buffer was closed (the batch is dropped: the trainer is going away).
  bool push(RolloutBatch b) {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return closed_ || q_.size() < cap_; });
    if (closed_) return false;
    q_.push_back(std::move(b));
    max_depth_ = std::max(max_depth_, q_.size());
    cv_.notify_all();
    return true;
  }
  //! The oldest batch; 'depth' receives the entries held when it was taken (itself included).
  RolloutBatch pop(std::size_t& depth) {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return closed_ || error_ || !q_.empty(); });
    if (!q_.empty()) {  // batches made before a failure are still served
      depth = q_.size();
      RolloutBatch b = std::move(q_.front());
      q_.pop_front();
      cv_.notify_all();
      return b;
    }
    if (error_) std::rethrow_exception(error_);
    throw error("rlflow::ReplayBuffer: closed while the trainer waited for a batch");
  }
  void fail(std::exception_ptr e) {
    std::lock_guard lk(mu_);
    error_ = e;
    cv_.notify_all();
  }
  void close() {
    std::lock_guard lk(mu_);
    closed_ = true;
    cv_.notify_all();
  }
  std::size_t capacity() const { return cap_; }
  std::size_t size() const {
    std::lock_guard lk(mu_);
    return q_.size();
  }
  //! Copies of the batches held, oldest first (for a checkpoint; the buffer is unchanged).
  std::vector<RolloutBatch> snapshot() const {
    std::lock_guard lk(mu_);
    return {q_.begin(), q_.end()};
  }
  std::size_t max_depth() const {
    std::lock_guard lk(mu_);
    return max_depth_;
  }

 private:
  std::size_t const cap_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RolloutBatch> q_;
  std::exception_ptr error_;
  bool closed_ = false;
  std::size_t max_depth_ = 0;
};

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
