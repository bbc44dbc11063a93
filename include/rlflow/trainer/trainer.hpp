// rlflow/trainer/trainer.hpp: Trainer<Options...>, the colocated PPO-family trainer (verl's
// RayPPOTrainer.fit, v0 step order). Options, in any order: a placement (Colocate<N>), an
// algorithm (GRPO, PPO, RLOO, ReinforcePlusPlus, ReMax), a parallel layout (TP<1>), a backend
// (Backend<cpu::tag>) and role types (without a reward role, roles::DefaultReward scores each row
// by its data_source; PPO also needs a critic; a custom hybrid actor role replaces the built-in
// one). Role contracts: roles/concepts.hpp (docs/roles.md); option checks: trainer/checks.hpp.
// The roles run fused on one pool (one worker thread per device, DP over the workers); the
// driver's step() is verl's step written as plain calls. TP<N> runs the rollout as replicas of
// N tensor-parallel ranks (world size / N of them) while the actor trains data-parallel on every
// worker; each weight sync reshards the actor's weights into the replicas. Backend<cuda::tag> runs
// the actor, rollout and reference engines on one device per worker; it needs
// rlflow/trainer/trainer_cuda.cuh in a .cu file. SeparateAsync (trainer.v1.trainer_mode=separate_async)
// and trainer_mode=colocate_async generate on rollout workers of their own, ahead of the
// trainer within a staleness bound (trainer_async.hpp; CPU backend only).
//
// Letters: B prompts per step, n samples per prompt, P prompt tokens, R response tokens.
#pragma once
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>  // TrainerOptions::after_advantage
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <variant>  // std::monostate
#include <vector>

#include <nlohmann/json.hpp>

#include <rlflow/algorithm/advantage_step.hpp>            // apply_kl_penalty, compute_advantage
#include <rlflow/algorithm/algorithm.hpp>                 // GRPO, PPO, ...
#include <rlflow/trainer/checkpoint.hpp>                // CheckpointWriter, verify_checkpoint
#include <rlflow/config/config_limits.hpp>             // check_size_limits
#include <rlflow/data/data.hpp>                      // PromptDataset, DataPosition
#include <rlflow/data/data_files.hpp>                // load_prompt_files, ChatTemplate
#include <rlflow/model/bpe_tokenizer.hpp>       // BPETokenizer
#include <rlflow/model/hf_gpt2.hpp>             // read_gpt2_config, load_gpt2_weights
#include <rlflow/core/data_proto.hpp>                // DataProto
#include <rlflow/core/device_memory.hpp>             // gib
#include <rlflow/detail/options.hpp>            // option sorting
#include <rlflow/trainer/driver.hpp>     // the driver's non-template parts (ValGeneration, make_prompt_batch, ...)
#include <rlflow/trainer/checks.hpp>     // check_trainer_options (one message per mistake)
#include <rlflow/kernels/kernels.hpp>           // advantages, apply_kl_penalty, agg_loss
#include <rlflow/core/metrics.hpp>                   // Metrics, MetricsLogger
#include <rlflow/config/policy.hpp>                    // Colocate, TP, Backend
#include <rlflow/dispatch/resource_pool.hpp>             // ResourcePool
#include <rlflow/roles/actor_rollout_ref.hpp>   // roles::ActorRolloutRef
#include <rlflow/roles/critic.hpp>              // roles::ValueCritic
#include <rlflow/roles/reward.hpp>              // roles::RuleReward, roles::DefaultReward
#include <rlflow/trainer/trainer_async.hpp>             // AsyncRollout, AsyncHooks (separate_async, colocate_async)
#include <rlflow/config/trainer_config.hpp>            // TrainerConfig, check
#include <rlflow/dispatch/worker_group.hpp>              // make_colocated_group
#if defined(RLFLOW_HAS_MPI)
#include <rlflow/mpi/mpi.hpp>              // WorkerGroup<H, dispatch::Mpi>, mpi::drive (target rlflow::mpi)
#endif

namespace rlflow {

//! Runtime knobs of a Trainer that are not verl config keys.
struct TrainerOptions {
  std::string metrics_file;  //!< JSON-lines metrics; empty: '<default_local_dir>/metrics.jsonl'
  bool console = true;       //!< print one progress line per step
  ChatTemplate chat_template;  //!< how chat-message prompts of data files become text (data_files.hpp)
  std::shared_ptr<AsyncHooks const> async_hooks;  //!< test hooks of the async modes (trainer_async.hpp)
  //! Async modes: partial rollout (a weight sync aborts the batch being generated, which goes on
  //! with the new weights; verl v1 always does this). Off by default: a batch then depends on
  //! when the sync came, so runs are not reproducible (docs/trainer.md, "Partial rollout").
  //! The config key async_training.partial_rollout does the same; either turns it on.
  bool partial_rollout = false;
  //! Called on the driver once per training step, after the advantages (step 12) and before the
  //! critic and actor updates, with the step's whole batch: prompts and responses, rewards,
  //! old/ref log-probs, values, `advantages`, `returns` and every column the roles added. For
  //! inspection only (logging, dumping a step, checking an estimator); the batch is the one the
  //! updates will read, so the hook must not keep references past the call. A hook that throws
  //! fails the step before any weight changes. verl has no hook here; its nearest relative is the
  //! JSON-lines dump of `trainer.rollout_data_dir` (`_dump_generations`).
  std::function<void(std::int64_t step, DataProto const& batch)> after_advantage;
  //! CPU: OpenMP threads per worker (the layout is workers = trainer.n_gpus_per_node x this);
  //! 0: from the machine (OMP_NUM_THREADS when set, else the cores shared by the workers).
  int threads_per_worker = 0;
};

namespace detail {
template <class A>
inline constexpr bool is_algorithm_v = is_kind<A, algorithm_kind>;
template <class T>
struct is_colocate : std::false_type {};
template <int N>
struct is_colocate<Colocate<N>> : std::true_type {};
}  // namespace detail

namespace detail {
//! The trainer's worker-group backend: a program linked with rlflow::mpi (RLFLOW_HAS_MPI) uses
//! the MPI backend, which is in process unless the program was started by mpirun
//! (docs/multi_node.md); otherwise the in-process backend.
#if defined(RLFLOW_HAS_MPI)
using trainer_group_backend = dispatch::Mpi;
#else
using trainer_group_backend = dispatch::InProcess;
#endif
}  // namespace detail

//! The colocated trainer. verl: RayPPOTrainer (hybrid engine, global_pool, v0 step order).
template <class... Options>
class Trainer {
  // Every compile-time check, in order; the first failure is the only message (trainer_checks.hpp).
  // After one, the Trainer builds from the defaults so that nothing below adds errors of its own.
  static constexpr bool options_ok = detail::check_trainer_options<Options...>();
  template <class Picked, class Default>
  using if_ok = std::conditional_t<options_ok, Picked, Default>;

 public:
  using placement = if_ok<detail::pick_kind_t<placement_kind, Colocate<3>, Options...>, Colocate<3>>;
  using algorithm = if_ok<detail::pick_kind_t<algorithm_kind, GRPO, Options...>, GRPO>;
  using parallel = if_ok<detail::pick_kind_t<parallel_kind, TP<1>, Options...>, TP<1>>;
  using backend = if_ok<detail::pick_kind_t<backend_kind, Backend<cpu::tag>, Options...>, Backend<cpu::tag>>;
  using reward_role = if_ok<detail::pick_role_t<reward_tag, roles::DefaultReward, Options...>, roles::DefaultReward>;
  using critic_role = if_ok<detail::pick_role_t<critic_tag, void, Options...>, void>;
  //! The hybrid role: the one given ('using role_tag = rlflow::actor_tag;'), else the built-in one.
  using actor_role = if_ok<detail::pick_role_t<actor_tag, roles::BasicActorRolloutRef<typename backend::system, parallel::size>,
                                               Options...>,
                           roles::ActorRolloutRef>;
  static constexpr bool on_cuda = !std::is_same_v<typename backend::system, cpu::tag>;
  static constexpr bool has_critic = !std::is_void_v<critic_role>;

 private:
  template <class Critic>
  struct fused_of {
    using type = Fused<actor_role, Critic, reward_role>;
  };
  template <class Critic>
    requires std::is_void_v<Critic>
  struct fused_of<Critic> {
    using type = Fused<actor_role, reward_role>;
  };
  using fused_host = typename fused_of<critic_role>::type;
  using group_type = WorkerGroup<fused_host, detail::trainer_group_backend>;

 public:
  //! Builds the pool and the fused workers after checking the whole configuration (no work is
  //! done when a check fails). 'alphabet' is the task's character set (CharTokenizer).
  Trainer(TrainerConfig cfg, PromptDataset train, std::string alphabet, TrainerOptions opts = {})
      : cfg_(prepare(std::move(cfg))),
        train_(std::move(train)),
        tok_(std::make_shared<model::CharTokenizer const>(alphabet)),
        opts_(std::move(opts)) {
    if (!cfg_.actor_rollout_ref.model.path.empty())
      throw config_error(msg("rlflow::Trainer: actor_rollout_ref.model.path=", cfg_.actor_rollout_ref.model.path.view(),
                             " is set, but this constructor builds the character-level GPT of a task alphabet; use "
                             "Trainer(cfg) (model and data from files) or clear model.path"));
    roles::RoleSetup setup;
    setup.alphabet = alphabet;
    setup.policy_model.vocab_size = tok_->vocab_size();
    setup.policy_model.max_seq_len = static_cast<int>(cfg_.data.max_prompt_length + cfg_.data.max_response_length);
    setup.policy_model.n_layer = static_cast<int>(cfg_.actor_rollout_ref.model.n_layer);
    setup.policy_model.n_head = static_cast<int>(cfg_.actor_rollout_ref.model.n_head);
    setup.policy_model.n_embd = static_cast<int>(cfg_.actor_rollout_ref.model.n_embd);
    setup.policy_model.seed = static_cast<std::uint64_t>(cfg_.seed);
    setup.critic_model = setup.policy_model;
    setup.critic_model.value_head = true;
    setup.critic_model.seed = static_cast<std::uint64_t>(cfg_.seed) + 1;
    start(std::move(setup));
  }

  //! The real-model path (verl's): the policy (and reference) from actor_rollout_ref.model.path,
  //! a Hugging Face GPT-2 folder; its byte-level BPE tokenizer from model.path or
  //! actor_rollout_ref.model.tokenizer_path; the critic's trunk from critic.model.path (default:
  //! the policy's folder); prompts from data.train_files, validation prompts from data.val_files
  //! (JSON lines in verl's schema, see data_files.hpp). Everything is read and checked before the
  //! workers start.
  explicit Trainer(TrainerConfig cfg, TrainerOptions opts = {}) : cfg_(prepare(std::move(cfg))), opts_(std::move(opts)) {
    from_files_ = true;
    check(cfg_);
    start(load_files());
  }

 private:
  //! Checks, builds the pool and the workers, and resumes (both constructors end here).
  void start(roles::RoleSetup setup) {
    check_tensor_parallel(setup.policy_model);  // first: its message names the TP<N> option, not only the config key
    check_lm_head(setup.policy_model);
    if (!cfg_.custom_reward_function.path.empty() && !std::is_same_v<reward_role, roles::DefaultReward>)
      throw config_error(msg("rlflow::Trainer: custom_reward_function.path=", cfg_.custom_reward_function.path.view(),
                             " is set, but the Trainer was given its own reward role, which would ignore it; drop the "
                             "reward role (the default reward loads the custom function) or clear the key"));
    check(cfg_);
    for (auto const& w : warnings(cfg_)) warn(w);
#if !defined(__OPTIMIZE__)
    warn("this program was compiled without optimisation (-O0), so every step runs several times slower; build it "
         "with -O2 or CMAKE_BUILD_TYPE=Release");
#endif
    check_honoured_keys();
    if (train_.size() < cfg_.data.train_batch_size)
      throw config_error(msg("rlflow::Trainer: the dataset holds ", train_.size(), " prompts, fewer than one batch of data.train_batch_size=",
                             cfg_.data.train_batch_size, "; lower data.train_batch_size or provide more prompts"));
    check_prompts();
    check_size_limits(cfg_, tok_->vocab_size(), train_.size(), has_critic, physical_memory_bytes(), on_cuda);
    total_steps_ = cfg_.trainer.total_training_steps
                       ? *cfg_.trainer.total_training_steps
                       : train_.batches_per_epoch(cfg_.data.train_batch_size) * cfg_.trainer.total_epochs;
    if (total_steps_ < 1)
      throw config_error(msg("rlflow::Trainer: no training steps (dataset of ", train_.size(), " prompts, data.train_batch_size=",
                             cfg_.data.train_batch_size, ", trainer.total_epochs=", cfg_.trainer.total_epochs,
                             "); set trainer.total_training_steps or provide more prompts"));
    setup.cfg = cfg_;
    setup.threads_per_worker = opts_.threads_per_worker;
    setup.tokenizer = tok_;
    setup.policy_model.validate();
    setup.critic_model.validate();
    std::int64_t const updates = cfg_.data.train_batch_size / cfg_.actor_rollout_ref.actor.ppo_mini_batch_size *
                                 cfg_.actor_rollout_ref.actor.ppo_epochs;
    std::int64_t const critic_updates =
        cfg_.data.train_batch_size / cfg_.critic_ppo_mini_batch_size() * cfg_.critic_ppo_epochs();
    // CUDA: one worker per device and the memory estimate against each device, before any work.
    if constexpr (on_cuda) roles::engines<typename backend::system>::check_devices(cfg_, setup.policy_model);
    pool_.emplace("global_pool",
                  std::vector<int>(static_cast<std::size_t>(cfg_.trainer.nnodes), static_cast<int>(cfg_.trainer.n_gpus_per_node)),
                  placement::max_colocate_count);
    GroupOptions go;
    go.name = "global_pool";
    // Training TP: the group's mesh is dp x tp, so DPComputeProto gives a TP group's ranks the same
    // rows and collects from tp_rank 0 (verl: the megatron workers' compute dispatch).
    go.tp = static_cast<int>(training_tp());
    if constexpr (has_critic)
      group_.emplace(*pool_, go, std::tuple(setup, total_steps_ * updates), std::tuple(setup, total_steps_ * critic_updates),
                     std::tuple(setup));
    else
      group_.emplace(*pool_, go, std::tuple(setup, total_steps_ * updates), std::tuple(setup));
    build_async(setup);  // the async modes' rollout group: built on every rank, before drive()
#if defined(RLFLOW_HAS_MPI)
    // Under mpirun every rank built the same group; worker ranks serve here until the driver's
    // trainer is destroyed, then return an inert trainer (is_driver() false, fit() does nothing).
    driver_ = mpi::drive();
    if (!driver_) return;
#endif
    if (cfg_.algorithm.use_kl_in_reward) {
      auto const& k = cfg_.algorithm.kl_ctrl;
      if (k.type.view() == "adaptive") adaptive_kl_.emplace(k.kl_coef, k.target_kl, static_cast<double>(k.horizon));
      else fixed_kl_.value = k.kl_coef;
    }
    maybe_resume();
    start_async();
    logger();  // a fresh run truncates an old metrics.jsonl now; a resumed one drops the lines after its step
  }

 public:
  TrainerConfig const& config() const { return cfg_; }
  //! The tokenizer (CharTokenizer of the alphabet, or the model folder's BPETokenizer).
  model::Tokenizer const& tokenizer() const { return *tok_; }
  //! The validation prompts (data.val_files), if any.
  std::optional<PromptDataset> const& val_dataset() const { return val_; }
  //! The samples of the last validation kept for trainer.log_val_generations.
  std::vector<ValGeneration> const& last_val_generations() const { return val_generations_; }
  //! Rollout replicas of TP<N> ranks each: world size / N (the planner's rollout_replicas).
  //! separate_async: standalone rollout devices / N.
  std::int64_t rollout_replicas() const { return cfg_.rollout_devices() / parallel::size; }
  //! The async modes' rollout workers and replay buffer (empty in the sync mode).
  auto* async_rollout()
    requires(!on_cuda)
  {
    return async_ ? &*async_ : nullptr;
  }
  std::int64_t global_step() const { return global_step_; }
  std::int64_t total_steps() const { return total_steps_; }
  DataPosition data_position() const { return pos_; }
  //! The warnings raised while the Trainer was built (config advisories, resume differences).
  std::vector<std::string> const& startup_warnings() const { return startup_warnings_; }
  group_type& workers() { return *group_; }
  //! False on the worker ranks of an MPI job (their trainer only served the driver's calls).
  bool is_driver() const {
#if defined(RLFLOW_HAS_MPI)
    return static_cast<bool>(driver_);
#else
    return true;
#endif
  }

  //! The per-role views (verl: actor_rollout_wg, critic_wg, rm_wg).
  auto actor_rollout_wg() { return group_->template view<actor_role>(); }
  auto reward_wg() { return group_->template view<reward_role>(); }
  auto critic_wg()
    requires has_critic
  {
    return group_->template view<critic_role>();
  }

  //! Runs the remaining steps (verl: fit). Returns the last step's metrics.
  Metrics fit() {
    Metrics last;
    if (!is_driver()) return last;  // an MPI worker rank served its calls already
    if (val_ && cfg_.trainer.val_before_train && global_step_ < total_steps_) {
      // verl: validate before the first step (also after a resume) and log it at the current step
      Metrics vm = validate();
      logger().log(global_step_, vm);
    }
    while (global_step_ < total_steps_) last = step();
    return last;
  }

  //! One training step in verl's order; returns its metrics (verl names).
  Metrics step() {
    using clock = std::chrono::steady_clock;
    auto const t_step = clock::now();
    Metrics m;
    auto timed = [&m](const char* key, auto&& f) {
      auto const t0 = clock::now();
      f();
      m[std::string("timing_s/") + key] += std::chrono::duration<double>(clock::now() - t0).count();
    };
    std::int64_t const step_no = global_step_ + 1;
    // A step that throws before it completes does not consume its batch (see docs/trainer.md).
    struct restore_position {
      DataPosition& pos;
      DataPosition saved;
      bool done = false;
      ~restore_position() {
        if (!done) pos = saved;
      }
    } position_guard{pos_, pos_};
    auto const& rc = cfg_.actor_rollout_ref.rollout;
    std::int64_t const n = rc.n;

    // 1-3: prompts, uid per prompt (before repetition), repeat n times interleaved.
    std::int64_t epoch = pos_.epoch;
    DataProto prompts, batch;
    if (!take_async(step_no, m, batch, epoch)) {  // async modes: the batch comes from the rollout workers' buffer
      auto items = train_.next_batch(pos_, cfg_.data.train_batch_size);
      prompts = make_prompt_batch(items, step_no);
      DataProto gen_batch = prompts.repeat(n, /*interleave=*/true);
      add_rollout_seeds(gen_batch, step_no, /*salt=*/0);

      // 4: generate (the rollout sleeps afterwards when free_cache_engine).
      timed("gen", [&] { batch = actor_rollout_wg().template call<&actor_role::generate_sequences>(gen_batch); });
    }

    // ReMax: one greedy response per prompt; its reward is the baseline.
    std::optional<Tensor> remax_baselines;
    if (estimator_of(cfg_.algorithm.adv_estimator.view()).needs_greedy_baseline) {
      timed("gen_max", [&] {
        // async modes: the rollout workers generated it with the batch's weights (take_async)
        DataProto greedy = async_ ? std::exchange(async_greedy_, DataProto{})
                                  : actor_rollout_wg().template call<&actor_role::generate_sequences>(greedy_prompts(prompts, step_no));
        DataProto s = reward_wg().template call<&reward_role::compute_rm_score>(greedy);
        check_reward_scores(s, greedy.size(), greedy.tensor("response_mask").dim(1));
        auto base = detail::row_sums(s.tensor("token_level_scores"));
        std::vector<float> per_row(static_cast<std::size_t>(greedy.size() * n));
        for (std::size_t i = 0; i < per_row.size(); ++i) per_row[i] = static_cast<float>(base[i / static_cast<std::size_t>(n)]);
        remax_baselines = Tensor::from(per_row);
      });
    }

    // 5-7: response mask is part of the generation output; global_token_num per row.
    Tensor const& attn = batch.tensor("attention_mask");
    Tensor const& rmask = batch.tensor("response_mask");
    std::int64_t const rows = batch.size(), R = rmask.dim(1);
    double total_tokens = 0;
    for (auto v : attn.span<std::int32_t>()) total_tokens += v != 0;

    // 8: reward.
    timed("reward", [&] {
      DataProto s = reward_wg().template call<&reward_role::compute_rm_score>(batch);
      check_reward_scores(s, rows, R);
      batch.union_with(std::move(s));
    });

    // 9: old log-probs (+ entropy, reported as actor/entropy).
    timed("old_log_prob", [&] {
      if (cfg_.algorithm.rollout_correction.bypass_mode) {
        // verl: apply_bypass_mode: old_log_probs := rollout_log_probs (no actor forward; the actor's
        // loss becomes bypass_mode and computes the rollout correction itself)
        batch.set_tensor("old_log_probs", batch.tensor("rollout_log_probs").clone());
        return;
      }
      DataProto old = actor_rollout_wg().template call<&actor_role::compute_log_prob>(batch);
      m["actor/entropy"] = kernels::agg_loss(cpu::par, kernels::Dims{rows, R}, old.tensor("entropys").span<float>(),
                                             rmask.span<std::int32_t>(),
                                             kernels::parse_agg_mode(cfg_.actor_rollout_ref.actor.loss_agg_mode.view()));
      batch.union_with(old.pop(old.has_tensor("sum_pi_squared") ? std::vector<std::string>{"old_log_probs", "sum_pi_squared"}
                                                                 : std::vector<std::string>{"old_log_probs"}));
    });

    // 10: reference log-probs.
    if (cfg_.uses_reference())
      timed("ref", [&] { batch.union_with(actor_rollout_wg().template call<&actor_role::compute_ref_log_prob>(batch)); });

    // 11: values.
    if constexpr (has_critic)
      timed("values", [&] { batch.union_with(critic_wg().template call<&critic_role::compute_values>(batch)); });

    // 12: KL in the reward, then advantages on the driver.
    timed("adv", [&] { compute_advantage(batch, remax_baselines, m); });
    if (opts_.after_advantage) opts_.after_advantage(step_no, batch);

    // 13-14: critic update (always), actor update after the critic warm-up, weight sync.
    if constexpr (has_critic) {
      timed("update_critic", [&] {
        auto lists = critic_wg().template call<&critic_role::update_critic>(batch);
        merge_metric_lists(m, lists);
      });
    }
    if (cfg_.trainer.critic_warmup <= global_step_) {
      timed("update_actor", [&] {
        auto lists = actor_rollout_wg().template call<&actor_role::update_actor>(batch);
        merge_metric_lists(m, lists);
      });
    }
    timed("update_weights", [&] {
      actor_rollout_wg().template call<&actor_role::update_weights>();
      publish_async(step_no);  // async modes: the rollout workers load these weights before their next batch
    });

    global_step_ = step_no;
    async_taken_ = 0;  // the taken batch is consumed
    position_guard.done = true;
    bool const last = global_step_ == total_steps_;

    // 15: validation every trainer.test_freq steps and after the last (verl: _validate).
    if (val_ && cfg_.trainer.test_freq > 0 && (last || global_step_ % cfg_.trainer.test_freq == 0))
      timed("testing", [&] {
        for (auto const& [k, v] : validate()) m[k] = v;
      });

    // 16: data metrics (verl: compute_data_metrics, compute_timing_metrics, compute_throughout_metrics).
    data_metrics(batch, m);
    double const step_time = std::chrono::duration<double>(clock::now() - t_step).count();
    m["timing_s/step"] = step_time;
    m["perf/total_num_tokens"] = total_tokens;
    m["perf/time_per_step"] = step_time;
    // verl: n_gpus counts every pool (separate_async: trainer + standalone rollout devices)
    m["perf/throughput"] = total_tokens / (step_time * static_cast<double>(cfg_.world_size() +
                                                                         (cfg_.is_separate_async() ? cfg_.rollout_devices() : 0)));
    m["training/global_step"] = static_cast<double>(global_step_);
    m["training/epoch"] = static_cast<double>(epoch);
    m["data/truncated_prompts"] = static_cast<double>(truncated_prompts_);
    if constexpr (on_cuda) {
      // verl: perf/max_memory_allocated_gb, perf/max_memory_reserved_gb (max over the workers' devices
      // of this step's peaks; the peaks restart after each step)
      double alloc = 0, reserved = 0;
      for (auto const& s : actor_rollout_wg().template call<&actor_role::memory_stats>(1)) {
        alloc = std::max(alloc, static_cast<double>(s[1]) / gib);
        reserved = std::max(reserved, static_cast<double>(s[3]) / gib);
      }
      m["perf/max_memory_allocated_gb"] = alloc;
      m["perf/max_memory_reserved_gb"] = reserved;
    }

    // The step's line is written before its checkpoint, so a checkpoint never exists without the
    // metrics of the steps it contains. The save time is in the returned metrics only.
    logger().log(global_step_, m);
    if (cfg_.trainer.log_train_generations > 0 && logger().prints(global_step_)) print_samples(batch);
    if (cfg_.trainer.save_freq > 0 && (last || global_step_ % cfg_.trainer.save_freq == 0))
      timed("save_checkpoint", [&] { save_checkpoint(); });
    return m;
  }

  //! Writes a checkpoint of the current state into trainer.default_local_dir/global_step_N
  //! (atomically; see checkpoint.hpp). verl: _save_checkpoint
  std::filesystem::path save_checkpoint() {
    CheckpointWriter w(checkpoint_root(), global_step_);
    actor_rollout_wg().template call<&actor_role::save_checkpoint>(w.path("actor.safetensors").string());
    if constexpr (has_critic) critic_wg().template call<&critic_role::save_checkpoint>(w.path("critic.safetensors").string());
    nlohmann::ordered_json replay;  // async modes: the generated batches not yet trained on
    if constexpr (!on_cuda)
      if (async_) replay = save_replay_buffer(w, async_->snapshot());
    nlohmann::ordered_json st;
    st["global_step"] = global_step_;
    st["data_position"] = {{"epoch", pos_.epoch}, {"index", pos_.index}};
    st["kl_coef"] = adaptive_kl_ ? adaptive_kl_->value : fixed_kl_.value;
    st["truncated_prompts"] = truncated_prompts_;
    st["rng"] = "counter-based: every random draw is a function of (seed, global_step, row); no hidden state";
    st["config"] = cfg_.to_json();
    if (!replay.is_null()) st["replay_buffer"] = replay;
    w.write("trainer_state.json", st.dump(2));
    auto dir = w.commit();
    // verl: max_actor_ckpt_to_keep / max_critic_ckpt_to_keep. One folder holds both models, so
    // a folder is removed only when both limits allow it (null or 0: keep all).
    auto const& tr = cfg_.trainer;
    std::int64_t keep = tr.max_actor_ckpt_to_keep.value_or(0);
    if constexpr (has_critic) {
      std::int64_t const kc = tr.max_critic_ckpt_to_keep.value_or(0);
      keep = keep == 0 || kc == 0 ? 0 : std::max(keep, kc);
    }
    if (keep > 0) prune_checkpoints(checkpoint_root(), keep);
    return dir;
  }

  //! One pass over the validation set (verl: _validate): every prompt answered
  //! actor_rollout_ref.rollout.val_kwargs.n times with the val_kwargs sampling (greedy unless
  //! do_sample), scored by the reward role; per data_source: 'val-core/<data_source>/reward/mean@n'
  //! (mean score), and with n > 1 'val-aux/<ds>/reward/std@n' (mean over prompts of the
  //! per-prompt standard deviation), 'val-core/<ds>/reward/best@n/mean' and
  //! 'val-aux/<ds>/reward/worst@n/mean' (mean over prompts of the best / worst of its n scores,
  //! computed on the n samples themselves, where verl bootstraps). Prints
  //! trainer.log_val_generations samples (prompt, response, score) when console output is on.
  Metrics validate() {
    if (!val_) throw config_error("rlflow::Trainer::validate: no validation set; set data.val_files=path/to/val.jsonl");
    auto const& vk = cfg_.actor_rollout_ref.rollout.val_kwargs;
    std::int64_t const n = vk.n, world = cfg_.world_size();
    std::int64_t const total = val_->size();
    std::int64_t const bs = cfg_.data.val_batch_size.has_value && cfg_.data.val_batch_size.stored > 0
                                ? std::min<std::int64_t>(cfg_.data.val_batch_size.stored, total)
                                : total;
    // data_source -> per-prompt score lists
    std::map<std::string, std::vector<std::vector<double>>> scores;
    val_generations_.clear();
    std::vector<ValGeneration> samples;
    for (std::int64_t b0 = 0; b0 < total; b0 += bs) {
      std::vector<PromptItem> items;
      for (std::int64_t i = b0; i < std::min(total, b0 + bs); ++i) items.push_back((*val_)[i]);
      DataProto prompts = make_prompt_batch(items, -1);
      DataProto gen = prompts.repeat(n, /*interleave=*/true);
      std::int64_t const real = gen.size();
      if (real % world != 0) {  // verl: pad_dataproto_to_divisor, then unpad
        std::vector<std::int64_t> idx(static_cast<std::size_t>((real + world - 1) / world * world));
        for (std::size_t k = 0; k < idx.size(); ++k) idx[k] = std::min<std::int64_t>(std::int64_t(k), real - 1);
        gen = gen.index(idx);
      }
      detail::add_val_seeds(gen, cfg_.seed, global_step_, b0, n);
      gen.meta_info().set("validate", true);
      gen.meta_info().set("do_sample", vk.do_sample);
      DataProto out = actor_rollout_wg().template call<&actor_role::generate_sequences>(gen);
      DataProto sc = reward_wg().template call<&reward_role::compute_rm_score>(out);
      detail::collect_val_scores(items, n, out, sc, cfg_.trainer.log_val_generations, *tok_, scores, samples);
    }
    Metrics m = detail::val_metrics(scores, n);
    val_generations_ = std::move(samples);
    if (opts_.console) detail::print_val_generations(val_generations_);
    return m;
  }

  //! The actor's weights (rank 0), for tests and tools.
  //! Training TP: gathered from the shards (every rank gathers; rank 0's copy is returned).
  std::vector<float> actor_weights() {
    if constexpr (requires { &actor_role::gather_actor_weights; })
      if (training_tp() > 1) return actor_rollout_wg().template call<&actor_role::gather_actor_weights>()[0];
    return actor_rollout_wg().template call<&actor_role::actor_weights>();
  }
  std::vector<float> critic_weights()
    requires has_critic
  {
    if constexpr (requires { &critic_role::gather_critic_weights; })
      if (training_tp() > 1) return critic_wg().template call<&critic_role::gather_critic_weights>()[0];
    return critic_wg().template call<&critic_role::critic_weights>();
  }

 private:
  //! Reads model.path, the tokenizer and the data files (the files constructor).
  roles::RoleSetup load_files() {
    namespace fs = std::filesystem;
    auto const& mc = cfg_.actor_rollout_ref.model;
    if (mc.path.empty())
      throw config_error("rlflow::Trainer(cfg): actor_rollout_ref.model.path is empty; set it to a Hugging Face GPT-2 "
                         "folder (config.json, model.safetensors, vocab.json, merges.txt), or build the character-level "
                         "model with Trainer(cfg, dataset, alphabet)");
    if (cfg_.data.train_files.empty())
      throw config_error("rlflow::Trainer(cfg): data.train_files is empty; set it to a JSON-lines file in verl's schema "
                         "(docs/quickstart.md, 'Bring your model and data')");
    fs::path const model_dir(std::string(mc.path.view()));
    fs::path const tok_dir = mc.tokenizer_path.empty() ? model_dir : fs::path(std::string(mc.tokenizer_path.view()));
    auto tok = std::make_shared<model::BPETokenizer const>(model::BPETokenizer::from_folder(tok_dir));
    tok_ = tok;
    roles::RoleSetup setup;
    setup.policy_model = model::hf::read_gpt2_config(model_dir);
    // the folder decides the shape: the config (size checks, checkpoints' saved config) records it
    cfg_.actor_rollout_ref.model.n_layer = setup.policy_model.n_layer;
    cfg_.actor_rollout_ref.model.n_head = setup.policy_model.n_head;
    cfg_.actor_rollout_ref.model.n_embd = setup.policy_model.n_embd;
    setup.policy_model.seed = static_cast<std::uint64_t>(cfg_.seed);
    std::int64_t const PR = cfg_.data.max_prompt_length + cfg_.data.max_response_length;
    if (PR > setup.policy_model.max_seq_len)
      throw config_error(msg("rlflow::Trainer: data.max_prompt_length + data.max_response_length = ", PR, " exceeds the model's ",
                             setup.policy_model.max_seq_len, " positions (n_positions in ", (model_dir / "config.json").string(),
                             "); lower them"));
    if (tok->vocab_size() > setup.policy_model.vocab_size)
      throw config_error(msg("rlflow::Trainer: the tokenizer in ", tok_dir.string(), " has ", tok->vocab_size(),
                             " tokens but the model's vocab_size is ", setup.policy_model.vocab_size,
                             "; use the tokenizer that belongs to the model"));
    setup.policy_init = std::make_shared<std::vector<float> const>(model::hf::load_gpt2_weights(model_dir, setup.policy_model));
    if constexpr (has_critic) {
      fs::path const critic_dir = cfg_.critic.model.path.empty() ? model_dir : fs::path(std::string(cfg_.critic.model.path.view()));
      setup.critic_model = model::hf::read_gpt2_config(critic_dir);
      setup.critic_model.value_head = true;
      setup.critic_model.seed = static_cast<std::uint64_t>(cfg_.seed) + 1;
      if (PR > setup.critic_model.max_seq_len || tok->vocab_size() > setup.critic_model.vocab_size)
        throw config_error(msg("rlflow::Trainer: the critic model in ", critic_dir.string(), " (", setup.critic_model.max_seq_len,
                               " positions, ", setup.critic_model.vocab_size, " tokens) does not fit the prompts + responses (",
                               PR, ") or the tokenizer (", tok->vocab_size(), " tokens)"));
      setup.critic_init = std::make_shared<std::vector<float> const>(model::hf::load_gpt2_weights(critic_dir, setup.critic_model));
    } else {
      setup.critic_model = setup.policy_model;
      setup.critic_model.value_head = true;
    }
    DataFileOptions o;
    o.prompt_key = std::string(cfg_.data.prompt_key.view());
    o.chat_template = opts_.chat_template;
    o.max_prompt_length = cfg_.data.max_prompt_length;
    o.filter_overlong_prompts = cfg_.data.filter_overlong_prompts;
    o.prompt_tokens = [tok](std::string const& s) { return static_cast<std::int64_t>(tok->encode(s).size()) + 1; };  // + BOS
    auto train = load_prompt_files(parse_file_list(cfg_.data.train_files.view()), o);
    train_ = PromptDataset(std::move(train.items), cfg_.data.shuffle, static_cast<std::uint64_t>(cfg_.data.seed));
    if (opts_.console && train.filtered_overlong > 0)
      std::fprintf(stderr, "rlflow: %lld of %lld training prompts are longer than data.max_prompt_length=%lld and were dropped\n",
                   static_cast<long long>(train.filtered_overlong), static_cast<long long>(train.rows_read),
                   static_cast<long long>(cfg_.data.max_prompt_length));
    if (!cfg_.data.val_files.empty()) {
      auto val = load_prompt_files(parse_file_list(cfg_.data.val_files.view()), o);
      val_.emplace(std::move(val.items), /*shuffle=*/false, 0);
      if (cfg_.data.truncation.view() == "error")  // as check_prompts does for the training set: never a silent cut
        for (std::int64_t i = 0; i < val_->size(); ++i)
          if (std::int64_t const len = o.prompt_tokens((*val_)[i].prompt); len > cfg_.data.max_prompt_length)
            throw config_error(msg("rlflow::Trainer: validation prompt ", i, " has ", len, " tokens (BOS included), longer than "
                                   "data.max_prompt_length=", cfg_.data.max_prompt_length, "; raise it, set "
                                   "data.filter_overlong_prompts=true, or data.truncation=left or right"));
      if (opts_.console && val.filtered_overlong > 0)
        std::fprintf(stderr, "rlflow: %lld of %lld validation prompts are longer than data.max_prompt_length=%lld and were dropped\n",
                     static_cast<long long>(val.filtered_overlong), static_cast<long long>(val.rows_read),
                     static_cast<long long>(cfg_.data.max_prompt_length));
    }
    return setup;
  }

  static TrainerConfig prepare(TrainerConfig cfg) {
    // The type decides what the config would otherwise say; a conflicting explicit value is an error.
    std::string_view const have = cfg.algorithm.adv_estimator.view();
    if constexpr (algorithm::adv_estimator != nullptr) {
      std::string_view const want = algorithm::adv_estimator;
      if (have != want && have != AlgorithmConfig{}.adv_estimator.view())  // an explicit, different estimator
        throw config_error(msg("rlflow::Trainer<", algorithm::name, ">: algorithm.adv_estimator=", have, " contradicts the ",
                               algorithm::name, " option (", want, "); drop the key, change the Trainer's algorithm, or use "
                               "rlflow::FromConfig to let the configuration choose"));
      cfg.algorithm.adv_estimator = config_string(algorithm::adv_estimator);
    } else if (estimator_of(have).needs_critic && !has_critic) {
      throw config_error(msg("rlflow::Trainer<FromConfig>: algorithm.adv_estimator=", have,
                             have == AlgorithmConfig{}.adv_estimator.view() ? " (the default)" : "", " needs a critic and the "
                             "Trainer has no critic role; set algorithm.adv_estimator to a critic-free estimator (grpo, "
                             "rloo, gdpo, optimal_token_baseline, ...) or pass rlflow::roles::ValueCritic"));
    }
    if (cfg.algorithm.adv_estimator == "gdpo" && cfg.algorithm.gdpo_reward_keys.items().empty())
      throw config_error(msg("rlflow::Trainer<", algorithm::name, ">: algorithm.adv_estimator=gdpo needs algorithm.gdpo_reward_keys, "
                             "the per-sample reward components the reward role writes as non-tensor columns (verl asserts "
                             "it is set); e.g. algorithm.gdpo_reward_keys=[format_reward,accuracy_reward]"));
    if (!cfg.critic.enable.has_value) cfg.critic.enable = has_critic;
    if (cfg.critic.enable.stored != has_critic)
      throw config_error(msg("rlflow::Trainer: critic.enable=", cfg.critic.enable.stored ? "true" : "false",
                             " but the Trainer was ", has_critic ? "given" : "not given",
                             " a critic role; make them agree"));
    cfg.max_colocate_count = placement::max_colocate_count;
    cfg.actor_rollout_ref.rollout.tensor_model_parallel_size = parallel::size;
    // The placement decides the road: SeparateAsync is trainer_mode=separate_async; Colocate<N>
    // is sync or colocate_async.
    if constexpr (placement::is_async) {
      if (cfg.is_colocate_async())
        throw config_error(msg("rlflow::Trainer<SeparateAsync>: trainer.v1.trainer_mode=colocate_async contradicts the "
                               "SeparateAsync placement; use rlflow::Colocate<N> for colocate_async, or drop the key"));
      cfg.trainer.v1.trainer_mode = config_string("separate_async");
    } else if (cfg.is_separate_async()) {
      throw config_error(msg("rlflow::Trainer<Colocate<", placement::max_colocate_count, ">>: trainer.v1.trainer_mode=separate_async "
                             "needs a standalone rollout pool; use rlflow::Trainer<rlflow::SeparateAsync, ...> or "
                             "trainer.v1.trainer_mode=sync / colocate_async"));
    }
    return cfg;
  }

  //! TP<N>: the rollout runs as world_size / N replicas of N ranks, each split by heads. A world
  //! size N does not divide, or more ranks than heads, is an error before any work.
  void check_tensor_parallel(model::GPTConfig const& m) const {
    constexpr int N = parallel::size;
    if constexpr (N > 1) {
      std::int64_t const ws = cfg_.world_size();
      if (ws % N != 0)
        throw config_error(msg("rlflow::Trainer<..., TP<", N, ">>: the ", ws, " workers (trainer.nnodes * n_gpus_per_node) ",
                               "do not split into rollout replicas of ", N, " ranks; use a multiple of ", N,
                               " devices or a TP that divides ", ws));
      model::check_tensor_parallel(m, N, "rlflow::Trainer<..., TP<N>>: actor_rollout_ref.model");
    }
  }

  //! actor_rollout_ref.model.lm_head (rlflow): vocab_parallel needs at least one vocabulary row per
  //! rank of the TP groups that use it (rollout TP<N>, training TP); without tensor parallelism the
  //! key changes nothing (a warning).
  void check_lm_head(model::GPTConfig const& m) {
    std::string_view const h = cfg_.actor_rollout_ref.model.lm_head.view();
    if (h == "auto") return;
    std::int64_t const tp = std::max<std::int64_t>(parallel::size, training_tp());
    if (tp == 1) {
      warn(msg("actor_rollout_ref.model.lm_head=", h, " has no effect: neither the rollout (TP<1>) nor training ",
               "(actor_rollout_ref.actor.megatron.tensor_model_parallel_size=1) is tensor-parallel"));
      return;
    }
    if (h == "vocab_parallel" && m.vocab_size < tp)
      throw config_error(msg("rlflow::Trainer: actor_rollout_ref.model.lm_head=vocab_parallel splits the LM head's ", m.vocab_size,
                             " vocabulary rows over TP groups of up to ", tp, " ranks, fewer rows than ranks; set ",
                             "actor_rollout_ref.model.lm_head=replicated (or auto)"));
  }

  //! actor_rollout_ref.actor.megatron.tensor_model_parallel_size = T: the actor and the reference
  //! train as world / T DP ranks of T-way tensor-parallel shards (check(cfg) has already checked T
  //! divides the workers and n_head). What training TP does not cover yet is an error before work.
  void check_training_tp() const {
    auto const t = training_tp();
    if (t == 1) return;
    auto const no = [&](std::string_view what, std::string_view fix) {
      throw config_error(msg("rlflow::Trainer: actor_rollout_ref.actor.megatron.tensor_model_parallel_size=", t, " (training ",
                             "tensor parallelism) does not support ", what, " yet; ", fix, ", or set the key to 1"));
    };
    if constexpr (on_cuda) no("the CUDA backend (the CUDA engines have no sharded layout)", "train on the CPU backend");
    if constexpr (has_critic)
      if constexpr (!requires { &critic_role::gather_critic_weights; })
        no("a custom critic role (the critic is sharded as the actor)", "use the built-in roles::ValueCritic");
    if constexpr (!requires { &actor_role::gather_actor_weights; })
      no("a custom actor role", "use the built-in roles::BasicActorRolloutRef");
    // The async modes: the trainer's group trains as in the sync mode; the rollout workers take the
    // gathered full weights (actor_weights()), so their TP<N> is independent of T.
  }
  std::int64_t training_tp() const { return cfg_.actor_rollout_ref.actor.megatron.tensor_model_parallel_size; }

  //! Config keys the colocated Trainer accepts (verl's names) but does not act on: an error
  //! naming the key and what rlflow does instead, or a warning where ignoring it is harmless.
  //! config_help() marks the same keys (detail::trainer_unhonoured_keys).
  void check_honoured_keys() {
    auto const& c = cfg_;
    auto const instead = [](std::string_view key) {
      for (auto const& u : rlflow::detail::trainer_unhonoured_keys)
        if (u.key == key) return std::string(u.instead);
      return std::string();
    };
    auto const reject = [&](std::string_view key, std::string const& value, std::string const& fix) {
      throw config_error(msg("rlflow::Trainer: ", key, "=", value, " is not honoured: ", instead(key), "; ", fix));
    };
    // actor_rollout_ref.model.path: Trainer(cfg) loads it; the alphabet constructor rejects it itself.
    if (!from_files_ && !c.data.train_files.empty())
      throw config_error(msg("rlflow::Trainer: data.train_files=", c.data.train_files.str(),
                             " is not read by Trainer(cfg, dataset, alphabet), which trains on the PromptDataset it is "
                             "given; use the Trainer(cfg) constructor (model and data from files) or leave "
                             "data.train_files empty"));
    if (c.trainer.test_freq > 0 && !val_)
      throw config_error(msg("rlflow::Trainer: trainer.test_freq=", c.trainer.test_freq,
                             " asks for validation, but there is no validation set; set data.val_files (read by the "
                             "Trainer(cfg) constructor) or trainer.test_freq=-1"));
    check_async_config();
    check_training_tp();
    if (c.actor_rollout_ref.model.vocab_size != 0 && c.actor_rollout_ref.model.vocab_size != tok_->vocab_size())
      reject("actor_rollout_ref.model.vocab_size", std::to_string(c.actor_rollout_ref.model.vocab_size),
             msg("set it to 0 (or to the tokenizer's ", tok_->vocab_size(), ")"));
    for (auto const* key : {"trainer.max_actor_ckpt_to_keep", "trainer.max_critic_ckpt_to_keep"}) {
      auto const& v = std::string_view(key) == "trainer.max_actor_ckpt_to_keep" ? c.trainer.max_actor_ckpt_to_keep
                                                                                 : c.trainer.max_critic_ckpt_to_keep;
      if (v.has_value && v.stored < 0)
        throw config_error(msg("rlflow::Trainer: ", key, "=", v.stored, " must be null, 0 (keep all) or positive"));
    }
    if (!from_files_ && !c.data.val_files.empty())
      warn(msg("data.val_files=", c.data.val_files.str(),
               " is ignored by Trainer(cfg, dataset, alphabet); the Trainer(cfg) constructor reads it and validates"));
    std::string_view const device = std::is_same_v<typename backend::system, cpu::tag> ? "cpu" : "cuda";
    if (c.trainer.device.view() != device)
      warn(msg("trainer.device=", c.trainer.device.str(), " is ignored: ", instead("trainer.device"), " (here ", device,
               "); set trainer.device=", device, " to silence this"));
    cfg_.trainer.device = config_string(device);
  }

  // ---- the async modes (trainer_async.hpp) ------------------------------------------------

  bool async_mode() const { return cfg_.is_separate_async() || cfg_.is_colocate_async(); }
  //! trainer.v1.<mode>.num_warmup_batches: batches the rollout workers may generate ahead.
  std::int64_t warmup_batches() const {
    return cfg_.is_separate_async() ? cfg_.trainer.v1.separate_async.num_warmup_batches
                                    : cfg_.trainer.v1.colocate_async.num_warmup_batches;
  }
  //! The staleness bound K (versions behind, at most): min(max_off_policy_threshold, num_warmup_batches).
  std::int64_t staleness_bound() const {
    return std::min(cfg_.trainer.v1.sampler.max_off_policy_threshold, warmup_batches());
  }

  //! What the async modes support here, checked before work (verl's start-up asserts of
  //! separate_async are in check(cfg)).
  void check_async_config() const {
    if (!async_mode()) {
      if (cfg_.async_training.partial_rollout || opts_.partial_rollout)
        throw config_error(msg("rlflow::Trainer: async_training.partial_rollout=true needs an async mode (the sync mode "
                               "never syncs weights during a generation); set trainer.v1.trainer_mode=colocate_async "
                               "or separate_async, or async_training.partial_rollout=false"));
      return;
    }
    if ((cfg_.async_training.partial_rollout || opts_.partial_rollout) && parallel::size > 1)
      throw config_error(msg("rlflow::Trainer<TP<", parallel::size, ">>: async_training.partial_rollout=true needs rollout "
                             "TP 1 (the ranks of a TP replica could stop at different tokens); use TP<1> or "
                             "async_training.partial_rollout=false"));
    std::string const mode = cfg_.trainer.v1.trainer_mode.str();
    if constexpr (on_cuda)
      throw config_error(msg("rlflow::Trainer<..., Backend<cuda::tag>>: trainer.v1.trainer_mode=", mode,
                             " runs its rollout workers on the CPU engines only; use trainer.v1.trainer_mode=sync with the "
                             "CUDA backend, or rlflow::Backend<rlflow::cpu::tag>"));
    // verl (trainer_separate_async.py:66-71): a reward model needs its own pool in separate_async
    // (check(cfg) rejects it without one); rlflow's reward roles score on the trainer pool
    if (cfg_.is_separate_async() && cfg_.reward.reward_model.enable)
      throw config_error(msg("rlflow::Trainer<SeparateAsync>: reward.reward_model.enable=true asks for a reward model on a "
                             "reward pool of its own (reward.reward_model.nnodes=", cfg_.reward.reward_model.nnodes,
                             " x n_gpus_per_node=", cfg_.reward.reward_model.n_gpus_per_node, "); rlflow has no "
                             "reward-model worker to place there (the reward role scores on the trainer pool "
                             "'global_pool'); set reward.reward_model.enable=false and score with a reward role"));
    if (warmup_batches() < 0)
      throw config_error(msg("rlflow::Trainer: trainer.v1.", mode, ".num_warmup_batches=", warmup_batches(),
                             " must be 0 (a synchronous schedule) or more (batches generated ahead)"));
    if (cfg_.is_separate_async() && cfg_.rollout_devices() % parallel::size != 0)
      throw config_error(msg("rlflow::Trainer<SeparateAsync, TP<", parallel::size, ">>: the standalone rollout pool has ",
                             cfg_.rollout_devices(), " devices (actor_rollout_ref.rollout.nnodes * n_gpus_per_node), which "
                             "do not split into replicas of ", parallel::size, " ranks; use a multiple of ", parallel::size));
  }

  //! Builds the rollout workers of the async modes (on every rank, before drive(): the MPI
  //! backend places a separate pool on processes of its own); start_async starts the producer.
  void build_async(roles::RoleSetup const& setup) {
    if constexpr (!on_cuda) {
      if (!async_mode()) return;
      bool const sep = cfg_.is_separate_async();
      typename async_type::Plan plan;
      plan.mode = sep ? "separate_async" : "colocate_async";
      // separate_async: a pool of its own; colocate_async: rollout workers on the trainer's devices
      plan.pool_name = sep ? "rollout_pool" : "global_pool/rollout";
      plan.devices_per_node = sep ? std::vector<int>(static_cast<std::size_t>(cfg_.actor_rollout_ref.rollout.nnodes),
                                                     static_cast<int>(cfg_.rollout_n_gpus_per_node()))
                                  : std::vector<int>(static_cast<std::size_t>(cfg_.trainer.nnodes),
                                                     static_cast<int>(cfg_.trainer.n_gpus_per_node));
      plan.bound = staleness_bound();
#if defined(RLFLOW_HAS_MPI)
      // under mpirun the standalone rollout pool runs in the processes after the trainer's
      if (sep && mpi::launched()) mpi::place_pool(plan.pool_name, 1 + group_->world_size());
#endif
      plan.partial_rollout = opts_.partial_rollout || cfg_.async_training.partial_rollout;
      plan.sleep_when_idle = !sep;  // colocate_async: the rollout's memory goes back to training while it idles
      // ReMax's greedy rollout, on the producer thread (reads train_ only)
      if (estimator_of(cfg_.algorithm.adv_estimator.view()).needs_greedy_baseline)
        plan.make_greedy = [this](std::int64_t s, DataPosition pos) {
          return greedy_prompts(make_prompt_batch(train_.next_batch(pos, cfg_.data.train_batch_size), s), s);
        };
      std::int64_t const n = cfg_.actor_rollout_ref.rollout.n;
      // runs on the producer thread: reads train_, cfg_ and tok_ only (never changed after start)
      async_.emplace(std::move(plan), setup, opts_.async_hooks, [this, n](std::int64_t s, DataPosition& pos, std::int64_t& epoch) {
        epoch = pos.epoch;
        auto items = train_.next_batch(pos, cfg_.data.train_batch_size);
        DataProto gen = make_prompt_batch(items, s).repeat(n, /*interleave=*/true);
        add_rollout_seeds(gen, s, /*salt=*/0);
        return gen;
      });
    }
  }
  //! After a resume: the steps to generate for, the checkpoint's replay buffer (the batches this
  //! run can train on) and the producer's start with the trainer's current weights.
  void start_async() {
    if (!async_mode() || global_step_ >= total_steps_) take_restored_batches(-1);  // warns if it drops any
    if constexpr (!on_cuda) {
      if (!async_ || global_step_ >= total_steps_) return;
      async_->set_steps(global_step_ + 1, total_steps_, pos_, take_restored_batches(staleness_bound()));
      async_->start(std::make_shared<std::vector<float> const>(actor_weights()), global_step_);
    }
  }

  //! The batches a resumed checkpoint's replay buffer held that this run can train on: the
  //! leading ones within staleness bound 'bound' and the run's steps (-1: none); a warning names
  //! the ones dropped (they are generated again with the checkpoint's weights).
  std::vector<RolloutBatch> take_restored_batches(std::int64_t bound) {
    std::vector<RolloutBatch> keep, all = std::move(restored_batches_);
    restored_batches_.clear();
    for (auto& b : all) {
      if (bound < 0 || b.step > total_steps_ || (b.step - 1) - b.version > bound) break;
      keep.push_back(std::move(b));
    }
    if (keep.size() < all.size())
      warn(msg("the checkpoint's replay buffer holds ", all.size(), " generated batches (steps ", all.front().step, "..",
               all.back().step, "); ", all.size() - keep.size(), " of them are not used by this run (trainer.v1.trainer_mode=",
               cfg_.trainer.v1.trainer_mode.str(), bound < 0 ? std::string(", no batches generated ahead")
                                                             : msg(", staleness bound ", bound, ", ", total_steps_, " steps"),
               ") and are generated again with the checkpoint's weights"));
    return keep;
  }

  //! Async modes: the batch of step_no from the buffer (the data position moves to after its
  //! prompts); false in the sync mode.
  bool take_async(std::int64_t step_no, Metrics& m, DataProto& batch, std::int64_t& epoch) {
    if constexpr (on_cuda) {
      return false;
    } else {
      if (!async_) return false;
      if (async_taken_ != 0) {
        // A step that failed on the driver after taking its batch (reward role, hook, update): the
        // batch has left the buffer and the producer generates only forward, so no later step can
        // have its batch. Fail at once (at bound 0 take() would wait for weights that never come).
        async_->stop();
        throw error(msg("rlflow::Trainer::step: step ", step_no, " cannot run: step ", async_taken_,
                        " failed after taking its generated batch from the replay buffer (trainer.v1.trainer_mode=",
                        cfg_.trainer.v1.trainer_mode.str(), "), and the rollout workers do not generate a batch twice; "
                        "build a new Trainer with trainer.resume_mode=auto to resume from the last checkpoint"));
      }
      if (step_no > total_steps_)
        throw config_error(msg("rlflow::Trainer::step: step ", step_no, " is past the run's ", total_steps_,
                               " steps; the rollout workers generated for steps up to ", total_steps_));
      auto const t0 = std::chrono::steady_clock::now();
      RolloutBatch b = async_->take(step_no, m);
      async_taken_ = step_no;  // until the step completes (step() clears it)
      // verl v1: the 'gen' timer wraps replay_buffer.sample, i.e. the wait for a ready batch
      m["timing_s/gen"] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      batch = std::move(b.batch);
      async_greedy_ = std::move(b.greedy);
      if (estimator_of(cfg_.algorithm.adv_estimator.view()).needs_greedy_baseline && async_greedy_.size() == 0)
        throw error(msg("rlflow::Trainer: step ", step_no, ": ReMax's greedy rollout is missing from the batch (internal error)"));
      pos_ = b.pos_after;
      epoch = b.epoch;
      if (opts_.async_hooks && opts_.async_hooks->before_train) opts_.async_hooks->before_train(step_no, batch);
      return true;
    }
  }

  //! ReMax: the greedy rollout's input, the step's prompts (one row each) with seeds of salt 1
  //! and do_sample false. verl: gen_baseline_batch (do_sample=False).
  DataProto greedy_prompts(DataProto prompts, std::int64_t step_no) const {
    add_rollout_seeds(prompts, step_no, /*salt=*/1);
    prompts.meta_info().set("do_sample", false);
    return prompts;
  }

  //! Async modes: hands the weights of version step_no to the rollout workers' producer.
  void publish_async(std::int64_t step_no) {
    if constexpr (!on_cuda) {
      if (async_) async_->publish_weights(std::make_shared<std::vector<float> const>(actor_weights()), step_no);
    }
  }

  //! Prompts longer than data.max_prompt_length: an error before any work (truncation=error),
  //! or counted and cut (left / right).
  void check_prompts() {
    truncated_prompts_ = 0;
    truncated_prompts_ = detail::check_prompts(train_, *tok_, cfg_, opts_.console);
  }

  //! input_ids / attention_mask (B, P) int32 left-padded (BOS + prompt), uid, reward_model, data_source.
  DataProto make_prompt_batch(std::vector<PromptItem> const& items, std::int64_t step_no) const {
    return detail::make_prompt_batch(items, step_no, cfg_, *tok_);
  }

  //! rollout_seed (rows) int64: a function of (seed, step, row, salt) only, so a sequence's
  //! tokens do not depend on the DP layout or on the other rows.
  void add_rollout_seeds(DataProto& d, std::int64_t step_no, std::uint64_t salt) const {
    detail::add_rollout_seeds(d, cfg_.seed, step_no, salt);
  }

  //! KL in the reward with the trainer's controller, then the public advantage step (dispatch by
  //! algorithm.adv_estimator, which prepare() set from the algorithm option).
  void compute_advantage(DataProto& batch, std::optional<Tensor> const& remax_baselines, Metrics& m) {
    if (cfg_.algorithm.use_kl_in_reward) {
      auto const km = adaptive_kl_ ? rlflow::apply_kl_penalty(batch, *adaptive_kl_, cfg_.algorithm.kl_penalty.view())
                                   : rlflow::apply_kl_penalty(batch, fixed_kl_, cfg_.algorithm.kl_penalty.view());
      for (auto const& [k, v] : km) m[k] = v;
    } else {
      batch.set_tensor("token_level_rewards", batch.tensor("token_level_scores").clone());
    }
    // decoupled rollout correction (verl: compute_rollout_correction_and_add_to_batch; not in bypass mode)
    auto const& rc = cfg_.algorithm.rollout_correction;
    if ((!rc.rollout_is.empty() || !rc.rollout_rs.empty()) && !rc.bypass_mode && batch.has_tensor("rollout_log_probs"))
      for (auto const& [k, v] : rlflow::compute_rollout_correction_and_add_to_batch(batch, rc)) m[k] = v;
    if (remax_baselines) batch.set_tensor("reward_baselines", *remax_baselines);
    rlflow::compute_advantage(batch, cfg_.algorithm,
                              detail::mix64(static_cast<std::uint64_t>(cfg_.seed) ^ static_cast<std::uint64_t>(global_step_ + 1)));
  }

  //! The reward role's result must hold float32 'token_level_scores' of shape (rows, R): a
  //! shape_error naming the key and both shapes otherwise, before any later worker runs.
  static void check_reward_scores(DataProto const& s, std::int64_t rows, std::int64_t R) {
    detail::check_reward_scores(s, rows, R);
  }

  void merge_metric_lists(Metrics& m, std::vector<roles::MetricLists> const& per_rank) const {
    detail::merge_metric_lists(m, per_rank);
  }

  //! verl: compute_data_metrics (score, rewards, advantages, returns, values, lengths).
  void data_metrics(DataProto const& batch, Metrics& m) const {
    detail::data_metrics(batch, m, has_critic);
  }

  //! Prints trainer.log_train_generations rows of this step's batch, spread evenly over it:
  //! prompt, response (decoded, special tokens dropped) and score (the row's summed
  //! token_level_scores). rlflow's own (verl logs only validation generations).
  void print_samples(DataProto const& batch) const {
    detail::print_samples(batch, cfg_.trainer.log_train_generations, *tok_);
  }

  //! The metrics writer, opened on first use: appends after a resume (dropping lines of steps
  //! after the checkpoint, which are about to be redone), truncates otherwise.
  MetricsLogger& logger() {
    if (!logger_) {
      auto const path = metrics_path();
      if (global_step_ > 0 && std::filesystem::exists(path)) detail::trim_metrics_file(path, global_step_);
      ConsoleOptions co;
      co.log_freq = cfg_.trainer.log_freq;
      logger_.emplace(path, total_steps_, opts_.console, /*append=*/global_step_ > 0, co);
      // the run's config beside its metrics, for rlflow_report's config table
      rlflow::detail::write_file_atomic(path.has_parent_path() ? path.parent_path() / "config.json" : "config.json",
                                        cfg_.to_json().dump(2));
    }
    return *logger_;
  }

  std::filesystem::path checkpoint_root() const { return std::filesystem::path(std::string(cfg_.trainer.default_local_dir.view())); }
  std::filesystem::path metrics_path() const {
    return opts_.metrics_file.empty() ? checkpoint_root() / "metrics.jsonl" : std::filesystem::path(opts_.metrics_file);
  }

  //! Compares the checkpoint's saved config with this run's, key by key. Keys that decide the
  //! shape or meaning of the saved state (model shape, sequence lengths, estimator, critic) must
  //! be equal: a config_error lists them. Keys about where and how long to run (epochs, steps,
  //! paths, save/keep/log settings) may differ silently. Any other difference (seed, learning
  //! rates, clip ratios, ...) is allowed and listed in one warning (verl warns too).
  void check_resume_config(nlohmann::json const& saved, std::string const& state_file) {
    if (std::string const w = detail::check_resume_config(saved, state_file, cfg_); !w.empty()) warn(w);
  }

  void warn(std::string const& w) {
    startup_warnings_.push_back(w);
    if (opts_.console) std::fprintf(stderr, "rlflow: warning: %s\n", w.c_str());
  }

  //! trainer.resume_mode: auto (latest checkpoint if any), disable, resume_path (resume_from_path).
  void maybe_resume() {
    auto const found = detail::resume_checkpoint_dir(cfg_, checkpoint_root());
    if (!found) return;
    std::filesystem::path const dir = *found;
    // every file present and intact, every field checked, before anything is loaded
    std::vector<std::string> required{"trainer_state.json", "actor.safetensors"};
    if constexpr (has_critic) required.push_back("critic.safetensors");
    verify_checkpoint(dir, required);
    auto const manifest = read_checkpoint_manifest(dir);
    auto const st = read_trainer_state(dir, manifest.step, train_.size());
    check_resume_config(st.config, (dir / "trainer_state.json").string());
    restored_batches_ = load_replay_buffer(dir, st.global_step, train_.size());  // async modes' saved batches, checked
    actor_rollout_wg().template call<&actor_role::load_checkpoint>((dir / "actor.safetensors").string());
    if constexpr (has_critic) critic_wg().template call<&critic_role::load_checkpoint>((dir / "critic.safetensors").string());
    global_step_ = st.global_step;
    pos_ = DataPosition{st.epoch, st.index};
    if (adaptive_kl_) adaptive_kl_->value = st.kl_coef;
    else fixed_kl_.value = st.kl_coef;
    if (opts_.console)
      std::fprintf(stderr, "rlflow: resumed from %s (global step %lld)\n", dir.string().c_str(),
                   static_cast<long long>(global_step_));
  }

  TrainerConfig cfg_;
  PromptDataset train_;
  std::shared_ptr<model::Tokenizer const> tok_;
  TrainerOptions opts_;
  std::optional<PromptDataset> val_;
  std::vector<ValGeneration> val_generations_;
  std::int64_t total_steps_ = 0;
  std::int64_t global_step_ = 0;
  std::int64_t async_taken_ = 0;  //!< async modes: the step that took its batch and has not completed (0: none)
  std::int64_t truncated_prompts_ = 0;
  DataPosition pos_;
  kernels::FixedKLController fixed_kl_;
  std::optional<kernels::AdaptiveKLController> adaptive_kl_;
  std::optional<ResourcePool> pool_;
  std::optional<group_type> group_;
  std::vector<RolloutBatch> restored_batches_;  //!< a resumed checkpoint's replay buffer, until start_async
  DataProto async_greedy_;  //!< ReMax in the async modes: the taken batch's greedy rollout, until the step uses it
  std::optional<MetricsLogger> logger_;
  std::vector<std::string> startup_warnings_;
  bool from_files_ = false;  // built by Trainer(cfg): model and data from files
#if defined(RLFLOW_HAS_MPI)
  mpi::DriverScope driver_;  // released (workers stop serving) before the group goes
#endif
  //! The async modes' rollout workers and producer. Last member: stopped and joined first, so a
  //! rollout call in flight when the trainer goes (e.g. after a driver-side error) finishes while
  //! the MPI workers still serve, instead of ending at their liveness timeout.
  using async_type = std::conditional_t<on_cuda, std::monostate, AsyncRollout<cpu::tag, parallel::size, detail::trainer_group_backend>>;
  std::optional<async_type> async_;
};

//! A human-readable description of a Trainer type (placement, algorithm, layout, roles).
template <class T>
std::string describe() {
  std::string const placement =
      T::placement::is_async ? std::string("SeparateAsync") : msg("Colocate<", T::placement::max_colocate_count, ">");
  return msg("Trainer<", T::algorithm::name, ", ", placement, ", TP<", T::parallel::size,
             ">> backend=", T::on_cuda ? "cuda" : "cpu", " roles=actor_rollout_ref", T::has_critic ? ",critic" : "", ",reward");
}

}  // namespace rlflow

// RLFLOW_SEPARATE_COMPILATION: the common instantiations come from the compiled part.
#include <rlflow/trainer/separate_compilation.hpp>
