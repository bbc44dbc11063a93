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
#include <rlflow/core/data_proto.hpp>                // DataProto
#include <rlflow/core/device_memory.hpp>             // gib
#include <rlflow/detail/options.hpp>            // option sorting
#include <rlflow/trainer/driver.hpp>     // the driver's non-template parts (ValGeneration, make_prompt_batch, ...)
#include <rlflow/trainer/rollout_source.hpp>     // RolloutSource: the sync road and the async roads
#include <rlflow/trainer/checks.hpp>     // check_trainer_options (one message per mistake), start-up checks
#include <rlflow/trainer/files.hpp>      // load_trainer_files
#include <rlflow/kernels/kernels.hpp>           // advantages, apply_kl_penalty, agg_loss
#include <rlflow/core/metrics.hpp>                   // Metrics, MetricsLogger
#include <rlflow/core/tensorboard.hpp>               // TensorBoardWriter (trainer.logger=tensorboard)
#include <cstdlib>                                   // std::getenv (TENSORBOARD_DIR)
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
  //! The policy's (and reference's) starting weights: an rlflow checkpoint folder (global_step_N,
  //! its actor.safetensors) or a .safetensors file of rlflow::engine, e.g. an SFT run's
  //! (trainer/sft.hpp). Weights only: the optimizer, step and data position start fresh. Empty:
  //! the seeded initialisation, or model.path's weights. verl: model.path set to the SFT output.
  std::string init_weights;
  //! CPU: generate with the static KV-cache engine instead of the paged one: the reference the
  //! tests compare the paged engine with. Without it every rollout, at any TP and with either LM
  //! head (actor_rollout_ref.model.lm_head), runs on the paged engine (roles::CpuRollout). The
  //! CUDA trainer refuses it (it generates with the paged engine only).
  bool static_rollout = false;
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
//! TrainerOptions::init_weights read: a global_step_N folder (verified against its manifest) or a
//! .safetensors file; the file's model must be the trainer's (engine::load_weights checks).
inline std::shared_ptr<std::vector<float> const> load_init_weights(std::string const& where, model::GPTConfig const& model) {
  std::filesystem::path p(where);
  if (std::filesystem::is_directory(p)) {
    if (!std::filesystem::exists(p / "actor.safetensors"))
      throw config_error(msg("rlflow::Trainer: TrainerOptions::init_weights = ", where, " is a folder without actor.safetensors; "
                             "name a checkpoint folder (global_step_N) or an actor.safetensors file"));
    if (std::filesystem::exists(p / "MANIFEST.json")) verify_checkpoint(p, {"actor.safetensors"});
    p /= "actor.safetensors";
  } else if (!std::filesystem::exists(p)) {
    throw config_error(msg("rlflow::Trainer: TrainerOptions::init_weights = ", where, " does not exist; name a checkpoint folder "
                           "(global_step_N) or an actor.safetensors file"));
  }
  return std::make_shared<std::vector<float> const>(engine::load_weights(p, model));
}

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
    model::Arch arch{};
    model::arch_from_name(cfg_.actor_rollout_ref.model.arch.view(), arch);  // the key's values are checked
    setup.policy_model = model::builtin_model(setup.policy_model, arch);
    setup.critic_model = setup.policy_model;
    setup.critic_model.value_head = true;
    setup.critic_model.seed = static_cast<std::uint64_t>(cfg_.seed) + 1;
    start(std::move(setup));
  }

  //! The real-model path (verl's): the policy (and reference) from actor_rollout_ref.model.path,
  //! a Hugging Face folder of GPT-2 or the Llama family (llama, qwen2, qwen3); its tokenizer
  //! (tokenizer.json, or vocab.json + merges.txt) and Jinja chat template from model.path or
  //! actor_rollout_ref.model.tokenizer_path; the critic's trunk from critic.model.path (default:
  //! the policy's folder); prompts from data.train_files, validation prompts from data.val_files
  //! (JSON lines in verl's schema, see data_files.hpp). Everything is read and checked before the
  //! workers start.
  explicit Trainer(TrainerConfig cfg, TrainerOptions opts = {}) : cfg_(prepare(std::move(cfg))), opts_(std::move(opts)) {
    from_files_ = true;
    check(cfg_);
    auto files = detail::load_trainer_files(cfg_, opts_.chat_template, opts_.console, has_critic);
    tok_ = std::move(files.tok);
    train_ = std::move(files.train);
    val_ = std::move(files.val);
    start(std::move(files.setup));
  }

 private:
  //! Checks, builds the pool and the workers, and resumes (both constructors end here).
  void start(roles::RoleSetup setup) {
    auto const warn_fn = [this](std::string const& w) { warn(w); };
    // first: its message names the TP<N> option, not only the config key
    detail::check_tensor_parallel<Trainer>(cfg_, setup.policy_model);
    detail::check_lm_head<Trainer>(cfg_, setup.policy_model, warn_fn);
    detail::check_custom_reward<Trainer>(cfg_);
    check(cfg_);
    for (auto const& w : warnings(cfg_)) warn(w);
    for (auto const& n : detail::verl_key_notices(cfg_)) notice(n);
    for (auto const& l : cfg_.trainer.logger.items()) {
      if (l != "console" && l != "file" && l != "jsonl" && l != "tensorboard")
        notice(msg("trainer.logger=", l, " has no effect here: rlflow sends no metrics to hosted services; use "
                   "trainer.logger=tensorboard (event files) or file (metrics.jsonl, which rlflow_report turns into an "
                   "HTML report)"));
#if !defined(RLFLOW_HAS_TENSORBOARD)
      if (l == "tensorboard")
        notice("trainer.logger=tensorboard has no effect here: this program was built without protobuf (install "
               "libprotobuf-dev protobuf-compiler, reconfigure and link rlflow::rlflow_compiled); metrics.jsonl and "
               "rlflow_report still work with trainer.logger=file");
#endif
    }
    if (on_cuda && opts_.static_rollout)
      throw config_error("rlflow::Trainer<..., Backend<cuda::tag>>: TrainerOptions::static_rollout = true selects the static "
                         "KV-cache engine, the CPU trainer's reference for its paged engine; the CUDA trainer generates with "
                         "the paged engine only (engine::cuda::PagedEngine); leave static_rollout false, or train with "
                         "Backend<cpu::tag>");
    if (cfg_.trainer.val_only && !val_)
      throw config_error(msg("rlflow::Trainer: trainer.val_only=true runs the validation only, but there is no validation "
                             "set; set data.val_files (read by the Trainer(cfg) constructor) or trainer.val_only=false"));
#if !defined(__OPTIMIZE__)
    warn("this program was compiled without optimisation (-O0), so every step runs several times slower; build it "
         "with -O2 or CMAKE_BUILD_TYPE=Release");
#endif
    detail::check_honoured_keys<Trainer>(
        cfg_, {.from_files = from_files_, .has_val = val_.has_value(), .vocab_size = tok_->vocab_size(),
               .partial_rollout_option = opts_.partial_rollout},
        warn_fn);
    detail::check_dataset_size(cfg_, train_);
    // prompts longer than data.max_prompt_length: an error (truncation=error), or counted and cut
    truncated_prompts_ = detail::check_prompts(train_, *tok_, cfg_, opts_.console);
    check_size_limits(cfg_, tok_->vocab_size(), train_.size(), has_critic, physical_memory_bytes(), on_cuda);
    total_steps_ = detail::total_training_steps(cfg_, train_);
    setup.cfg = cfg_;
    setup.threads_per_worker = opts_.threads_per_worker;
    setup.static_rollout = opts_.static_rollout;
    setup.tokenizer = tok_;
    setup.policy_model.validate();
    setup.critic_model.validate();
    if (!opts_.init_weights.empty()) setup.policy_init = detail::load_init_weights(opts_.init_weights, setup.policy_model);
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
    make_rollout_source(setup);  // the async roads' rollout group: built on every rank, before drive()
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
    road([&](auto& r) { return r.start(global_step_, pos_); });  // async roads: the producer starts, after the checkpoint's buffered batches
    logger();  // a fresh run truncates an old metrics.jsonl now; a resumed one drops the lines after its step
  }

 public:
  TrainerConfig const& config() const { return cfg_; }
  //! The tokenizer (CharTokenizer of the alphabet, or the model folder's load_tokenizer: HFTokenizer or BPETokenizer).
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
    auto* b = rollout_ ? std::get_if<detail::BufferedRollout<async_type>>(&*rollout_) : nullptr;
    return b ? &b->rollout() : nullptr;
  }
  std::int64_t global_step() const { return global_step_; }
  std::int64_t total_steps() const { return total_steps_; }
  DataPosition data_position() const { return pos_; }
  //! The warnings raised while the Trainer was built (config advisories, resume differences).
  std::vector<std::string> const& startup_warnings() const { return startup_warnings_; }
  //! The notices printed while the Trainer was built: verl keys and loggers that have no effect here.
  std::vector<std::string> const& startup_notices() const { return startup_notices_; }
  //! 'cfg' with the values this Trainer type fixes (rollout TP, colocation count, the algorithm's
  //! estimator, critic.enable, the async mode, trainer.device of the backend): pass it to TrainerConfig::from_args as the
  //! defaults, so --help shows what the program runs with.
  static TrainerConfig program_defaults(TrainerConfig cfg = {}) {
    if constexpr (algorithm::adv_estimator != nullptr) cfg.algorithm.adv_estimator = config_string(algorithm::adv_estimator);
    cfg.critic.enable = has_critic;
    cfg.max_colocate_count = placement::max_colocate_count;
    cfg.actor_rollout_ref.rollout.tensor_model_parallel_size = parallel::size;
    if constexpr (placement::is_async) cfg.trainer.v1.trainer_mode = config_string("separate_async");
    cfg.trainer.device = config_string(on_cuda ? "cuda" : "cpu");
    return cfg;
  }
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
    if (cfg_.trainer.val_only) {
      // verl: trainer.val_only validates once (after a resume: the checkpoint's weights) and returns
      last = validate();
      log_metrics(global_step_, last);
      return last;
    }
    if (val_ && cfg_.trainer.val_before_train && global_step_ < total_steps_) {
      // verl: validate before the first step (also after a resume) and log it at the current step
      Metrics vm = validate();
      log_metrics(global_step_, vm);
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
    std::int64_t const n = cfg_.actor_rollout_ref.rollout.n;

    // 1-4: prompts, uid per prompt (before repetition), repeat n times interleaved, generate (the
    // rollout sleeps afterwards when free_cache_engine); the async roads take the batch the
    // rollout workers generated from the replay buffer instead.
    std::int64_t epoch = pos_.epoch;
    DataProto batch = road([&](auto& r) { return r.generate(step_no, pos_, epoch, m); });

    // ReMax: one greedy response per prompt; its reward is the baseline.
    std::optional<Tensor> remax_baselines;
    if (estimator_of(cfg_.algorithm.adv_estimator.view()).needs_greedy_baseline) {
      timed("gen_max", [&] {
        // the async roads: the rollout workers generated it with the batch's weights
        DataProto greedy = road([&](auto& r) { return r.greedy_batch(step_no); });
        DataProto s = reward_wg().template call<&reward_role::compute_rm_score>(greedy);
        detail::check_reward_scores(s, greedy.size(), greedy.tensor("response_mask").dim(1));
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
      detail::check_reward_scores(s, rows, R);
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
      road([&](auto& r) { return r.publish_weights(step_no); });  // async roads: the rollout workers load these weights before their next batch
    });

    global_step_ = step_no;
    road([&](auto& r) { return r.step_done(); });  // the taken batch is consumed
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
    m["perf/throughput"] = total_tokens / (step_time * static_cast<double>(cfg_.world_size() + road([&](auto& r) { return r.own_devices(); })));
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
    log_metrics(global_step_, m);
    if (cfg_.trainer.log_train_generations > 0 && logger().prints(global_step_)) print_samples(batch);
    if (!cfg_.trainer.rollout_data_dir.empty())
      detail::dump_generations(batch, *tok_, global_step_, std::string(cfg_.trainer.rollout_data_dir.view()));
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
    nlohmann::ordered_json replay = road([&](auto& r) { return r.save_replay_buffer(w); });  // async roads: the batches not yet trained on
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
    // A value other than the type's and verl's default contradicts the type (verl's default cannot be told
    // from an explicit one; program_defaults() makes the type's value the default instead).
    if (auto const tp = cfg.actor_rollout_ref.rollout.tensor_model_parallel_size;
        tp != parallel::size && tp != TrainerConfig{}.actor_rollout_ref.rollout.tensor_model_parallel_size)
      throw config_error(msg("rlflow::Trainer<..., TP<", parallel::size, ">>: actor_rollout_ref.rollout.tensor_model_parallel_size=",
                             tp, " contradicts the program's TP<", parallel::size, "> option, which fixes the rollout's TP degree; ",
                             "drop the key, or build the program with rlflow::TP<", tp, ">"));
    if (auto const c = cfg.max_colocate_count; c != placement::max_colocate_count && c != TrainerConfig{}.max_colocate_count)
      throw config_error(msg("rlflow::Trainer<Colocate<", placement::max_colocate_count, ">, ...>: max_colocate_count=", c,
                             " contradicts the program's placement option, which fixes it; drop the key, or build the ",
                             "program with rlflow::Colocate<", c, ">"));
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

  std::int64_t training_tp() const { return detail::training_tp(cfg_); }

  //! The rollout road, chosen once from the placement and trainer.v1.trainer_mode (prepare()
  //! made them agree): the sync road generates inline on the actor-rollout group; separate_async
  //! and colocate_async take from the replay buffer of rollout workers of their own.
  void make_rollout_source(roles::RoleSetup const& setup) {
    detail::RolloutContext ctx;
    ctx.cfg = &cfg_;
    ctx.train = &train_;
    ctx.tok = tok_;
    ctx.total_steps = total_steps_;
    ctx.trainer_world_size = group_->world_size();
    ctx.hooks = opts_.async_hooks;
    ctx.partial_rollout = opts_.partial_rollout;
    ctx.generate = [this](DataProto const& d) { return actor_rollout_wg().template call<&actor_role::generate_sequences>(d); };
    ctx.weights = [this] { return actor_weights(); };
    ctx.warn = [this](std::string const& w) { warn(w); };
    if constexpr (!on_cuda)
      if (detail::async_mode(cfg_)) {
        rollout_.emplace(std::in_place_type<detail::BufferedRollout<async_type>>, std::move(ctx), setup);
        return;
      }
    rollout_.emplace(std::in_place_type<detail::InlineRollout>, std::move(ctx));
  }

  //! Calls f with the rollout road (a direct call: the road's type is one of the variant's).
  template <class F>
  decltype(auto) road(F&& f) {
    return std::visit(std::forward<F>(f), *rollout_);
  }

  //! input_ids / attention_mask (B, P) int32 left-padded (BOS + prompt), uid, reward_model, data_source.
  DataProto make_prompt_batch(std::vector<PromptItem> const& items, std::int64_t step_no) const {
    return detail::make_prompt_batch(items, step_no, cfg_, *tok_);
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
      // trainer.logger: console prints, file / jsonl write metrics.jsonl, tensorboard writes event files
      auto const& sinks = cfg_.trainer.logger;
      bool const to_file = sinks.contains("file") || sinks.contains("jsonl");
      auto const path = to_file ? metrics_path() : std::filesystem::path{};
      if (to_file && global_step_ > 0 && std::filesystem::exists(path)) detail::trim_metrics_file(path, global_step_);
      ConsoleOptions co;
      co.log_freq = cfg_.trainer.log_freq;
      logger_.emplace(path, total_steps_, opts_.console && sinks.contains("console"), /*append=*/global_step_ > 0, co);
      // the run's config beside its metrics, for rlflow_report's config table
      if (to_file)
        rlflow::detail::write_file_atomic(path.has_parent_path() ? path.parent_path() / "config.json" : "config.json",
                                          cfg_.to_json().dump(2));
#if defined(RLFLOW_HAS_TENSORBOARD)
      if (sinks.contains("tensorboard")) {
        // verl's folder: $TENSORBOARD_DIR, else tensorboard_log/<project>/<experiment>
        char const* env = std::getenv("TENSORBOARD_DIR");
        tensorboard_.emplace(env && *env ? std::filesystem::path(env)
                                         : std::filesystem::path("tensorboard_log") / std::string(cfg_.trainer.project_name.view()) /
                                               std::string(cfg_.trainer.experiment_name.view()));
      }
#endif
    }
    return *logger_;
  }

  std::filesystem::path checkpoint_root() const { return std::filesystem::path(std::string(cfg_.trainer.default_local_dir.view())); }
  std::filesystem::path metrics_path() const {
    return opts_.metrics_file.empty() ? checkpoint_root() / "metrics.jsonl" : std::filesystem::path(opts_.metrics_file);
  }

  //! Every sink of trainer.logger.
  void log_metrics(std::int64_t step, Metrics const& m) {
    logger().log(step, m);
#if defined(RLFLOW_HAS_TENSORBOARD)
    if (tensorboard_) tensorboard_->add_scalars(step, m);
#endif
  }

  void notice(std::string const& n) {
    startup_notices_.push_back(n);
    if (opts_.console) std::fprintf(stderr, "rlflow: notice: %s\n", n.c_str());
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
    if (std::string const w = detail::check_resume_config(st.config, (dir / "trainer_state.json").string(), cfg_); !w.empty())
      warn(w);
    road([&](auto& r) { return r.restore(load_replay_buffer(dir, st.global_step, train_.size())); });  // async roads' saved batches, checked
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
  std::int64_t truncated_prompts_ = 0;
  DataPosition pos_;
  kernels::FixedKLController fixed_kl_;
  std::optional<kernels::AdaptiveKLController> adaptive_kl_;
  std::optional<ResourcePool> pool_;
  std::optional<group_type> group_;
  std::optional<MetricsLogger> logger_;
  std::vector<std::string> startup_warnings_;
  std::vector<std::string> startup_notices_;
#if defined(RLFLOW_HAS_TENSORBOARD)
  std::optional<TensorBoardWriter> tensorboard_;
#endif
  bool from_files_ = false;  // built by Trainer(cfg): model and data from files
#if defined(RLFLOW_HAS_MPI)
  mpi::DriverScope driver_;  // released (workers stop serving) before the group goes
#endif
  //! The async roads' producer and rollout workers (CPU backend only).
  using async_type = std::conditional_t<on_cuda, std::monostate, AsyncRollout<cpu::tag, parallel::size, detail::trainer_group_backend>>;
  //! Where the steps' batches come from (trainer/rollout_source.hpp). Last member: an async road's
  //! producer is stopped and joined first, so a rollout call in flight when the trainer goes
  //! (e.g. after a driver-side error) finishes while the MPI workers still serve, instead of
  //! ending at their liveness timeout.
  using rollout_road = std::conditional_t<on_cuda, std::variant<detail::InlineRollout>,
                                          std::variant<detail::InlineRollout, detail::BufferedRollout<async_type>>>;
  std::optional<rollout_road> rollout_;
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
