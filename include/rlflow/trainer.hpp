// rlflow/trainer.hpp: Trainer<Options...>, the colocated PPO-family trainer (verl's
// RayPPOTrainer.fit, v0 step order). Options, in any order: a placement (Colocate<N>), an
// algorithm (GRPO, PPO, RLOO, ReinforcePlusPlus, ReMax), a parallel layout (TP<1>), a backend
// (Backend<cpu::tag>) and role types (a reward role is required; PPO also needs a critic).
// The roles run fused on one pool (one worker thread per device, DP over the workers); the
// driver's step() is verl's step written as plain calls. SeparateAsync and TP > 1 are milestone 2
// and are rejected at compile time with that message. Backend<cuda::tag> runs the actor, rollout
// and reference engines on one device per worker; it needs rlflow/trainer_cuda.cuh in a .cu file.
//
// Letters: B prompts per step, n samples per prompt, P prompt tokens, R response tokens.
#pragma once
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include <rlflow/advantage_step.hpp>            // apply_kl_penalty, compute_advantage
#include <rlflow/algorithm.hpp>                 // GRPO, PPO, ...
#include <rlflow/checkpoint.hpp>                // CheckpointWriter, verify_checkpoint
#include <rlflow/data.hpp>                      // PromptDataset, DataPosition
#include <rlflow/data_proto.hpp>                // DataProto
#include <rlflow/device_memory.hpp>             // gib
#include <rlflow/detail/options.hpp>            // option sorting
#include <rlflow/kernels/kernels.hpp>           // advantages, apply_kl_penalty, agg_loss
#include <rlflow/metrics.hpp>                   // Metrics, MetricsLogger
#include <rlflow/policy.hpp>                    // Colocate, TP, Backend
#include <rlflow/resource_pool.hpp>             // ResourcePool
#include <rlflow/roles/actor_rollout_ref.hpp>   // roles::ActorRolloutRef
#include <rlflow/roles/critic.hpp>              // roles::ValueCritic
#include <rlflow/roles/reward.hpp>              // roles::RuleReward
#include <rlflow/trainer_config.hpp>            // TrainerConfig, check
#include <rlflow/worker_group.hpp>              // make_colocated_group

namespace rlflow {

//! Runtime knobs of a Trainer that are not verl config keys.
struct TrainerOptions {
  std::string metrics_file;  //!< JSON-lines metrics; empty: '<default_local_dir>/metrics.jsonl'
  bool console = true;       //!< print one progress line per step
};

namespace detail {
template <class A>
inline constexpr bool is_algorithm_v = is_kind<A, algorithm_kind>;
template <class T>
struct is_colocate : std::false_type {};
template <int N>
struct is_colocate<Colocate<N>> : std::true_type {};

//! A deterministic 64-bit mix (splitmix64) for per-row seeds.
constexpr std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

struct Stat {
  double mean = 0, max = 0, min = 0;
};
inline Stat stat_of(std::vector<double> const& v) {
  Stat s;
  if (v.empty()) return s;
  s.max = -std::numeric_limits<double>::infinity();
  s.min = std::numeric_limits<double>::infinity();
  for (double x : v) {
    s.mean += x;
    s.max = std::max(s.max, x);
    s.min = std::min(s.min, x);
  }
  s.mean /= static_cast<double>(v.size());
  return s;
}
inline void put_stat(Metrics& m, std::string const& name, std::vector<double> const& v) {
  auto s = stat_of(v);
  m[name + "/mean"] = s.mean;
  m[name + "/max"] = s.max;
  m[name + "/min"] = s.min;
}
//! Values of a (B, R) float tensor at valid tokens.
inline std::vector<double> valid_values(Tensor const& x, Tensor const& mask) {
  std::vector<double> v;
  auto xs = x.span<float>();
  auto ms = mask.span<std::int32_t>();
  for (std::size_t i = 0; i < xs.size(); ++i)
    if (ms[i]) v.push_back(xs[i]);
  return v;
}
//! Per-row sums of a (B, R) float tensor.
inline std::vector<double> row_sums(Tensor const& x) {
  std::int64_t const B = x.dim(0), R = x.dim(1);
  std::vector<double> v(static_cast<std::size_t>(B), 0.0);
  auto xs = x.span<float>();
  for (std::int64_t i = 0; i < B; ++i)
    for (std::int64_t t = 0; t < R; ++t) v[static_cast<std::size_t>(i)] += xs[static_cast<std::size_t>(i * R + t)];
  return v;
}
}  // namespace detail

//! The colocated trainer. verl: RayPPOTrainer (hybrid engine, global_pool, v0 step order).
template <class... Options>
class Trainer {
  static_assert((detail::check_known_option<Options>() && ...),
                "rlflow::Trainer<...>: unknown option; search the error output for 'unknown_trainer_option_is'");
  static_assert(detail::count_kind<placement_kind, Options...> <= 1,
                "rlflow::Trainer<...>: more than one placement policy (Colocate<N> / SeparateAsync); keep one");
  static_assert(detail::count_kind<algorithm_kind, Options...> == 1,
                "rlflow::Trainer<...>: exactly one algorithm is required; add rlflow::GRPO, rlflow::PPO, rlflow::RLOO, "
                "rlflow::ReinforcePlusPlus or rlflow::ReMax");
  static_assert(detail::count_kind<parallel_kind, Options...> <= 1,
                "rlflow::Trainer<...>: more than one parallel layout (TP<N>); keep one");
  static_assert(detail::count_kind<backend_kind, Options...> <= 1,
                "rlflow::Trainer<...>: more than one backend (Backend<Tag>); keep one");
  static_assert(detail::count_role<reward_tag, Options...> == 1,
                "rlflow::Trainer<...>: exactly one reward role is required; pass "
                "rlflow::roles::RuleReward<YourScore> or a type with 'using role_tag = rlflow::reward_tag;'");
  static_assert(detail::count_role<critic_tag, Options...> <= 1,
                "rlflow::Trainer<...>: more than one critic role; keep one");
  static_assert(detail::count_role<actor_tag, Options...> + detail::count_role<rollout_tag, Options...> +
                        detail::count_role<reference_tag, Options...> ==
                    0,
                "rlflow::Trainer<...>: custom actor / rollout / reference roles are not supported yet; the trainer uses "
                "rlflow::roles::ActorRolloutRef (the hybrid engine)");

 public:
  using placement = detail::pick_kind_t<placement_kind, Colocate<3>, Options...>;
  using algorithm = detail::pick_kind_t<algorithm_kind, GRPO, Options...>;
  using parallel = detail::pick_kind_t<parallel_kind, TP<1>, Options...>;
  using backend = detail::pick_kind_t<backend_kind, Backend<cpu::tag>, Options...>;
  using reward_role = detail::pick_role_t<reward_tag, void, Options...>;
  using critic_role = detail::pick_role_t<critic_tag, void, Options...>;
  using actor_role = roles::BasicActorRolloutRef<typename backend::system>;
  static constexpr bool on_cuda = !std::is_same_v<typename backend::system, cpu::tag>;
  static constexpr bool has_critic = !std::is_void_v<critic_role>;

 private:
  static_assert(!std::is_same_v<algorithm, PPO> || has_critic,
                "rlflow::Trainer<..., PPO, ...>: PPO needs a critic; pass a role with 'using role_tag = "
                "rlflow::critic_tag;' such as rlflow::roles::ValueCritic");
  static_assert(!placement::is_async,
                "rlflow::Trainer<..., SeparateAsync, ...>: the separate-async placement is milestone 2; use "
                "rlflow::Colocate<N> for now");
  static_assert(parallel::size == 1,
                "rlflow::Trainer<..., TP<N>, ...>: tensor parallelism above 1 is milestone 2; use rlflow::TP<1>");
  static_assert(roles::has_engines<typename backend::system>,
                "rlflow::Trainer<..., Backend<cuda::tag>, ...>: the CUDA engines are not visible; include "
                "<rlflow/trainer_cuda.cuh> in a .cu file compiled by nvcc, or use rlflow::Backend<rlflow::cpu::tag>");

  static constexpr int role_count = 2 + (has_critic ? 1 : 0);
  static_assert(placement::max_colocate_count >= role_count,
                "rlflow::Trainer<Colocate<N>, ...>: N is smaller than the number of colocated roles (actor_rollout_ref, "
                "reward and, with a critic, critic); raise N");

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
  using group_type = WorkerGroup<fused_host>;

 public:
  //! Builds the pool and the fused workers after checking the whole configuration (no work is
  //! done when a check fails). 'alphabet' is the task's character set (CharTokenizer).
  Trainer(TrainerConfig cfg, PromptDataset train, std::string alphabet, TrainerOptions opts = {})
      : cfg_(prepare(std::move(cfg))), train_(std::move(train)), tok_(alphabet), opts_(std::move(opts)) {
    check(cfg_);
    for (auto const& w : warnings(cfg_))
      if (opts_.console) std::fprintf(stderr, "rlflow: warning: %s\n", w.c_str());
#if !defined(__OPTIMIZE__)
    if (opts_.console)
      std::fprintf(stderr, "rlflow: warning: this program was compiled without optimisation (-O0), so every step runs "
                           "several times slower; build it with -O2 or CMAKE_BUILD_TYPE=Release\n");
#endif
    if (train_.size() < cfg_.data.train_batch_size)
      throw config_error(msg("rlflow::Trainer: the dataset holds ", train_.size(), " prompts, fewer than one batch of data.train_batch_size=",
                             cfg_.data.train_batch_size, "; lower data.train_batch_size or provide more prompts"));
    check_prompts();
    total_steps_ = cfg_.trainer.total_training_steps
                       ? *cfg_.trainer.total_training_steps
                       : train_.batches_per_epoch(cfg_.data.train_batch_size) * cfg_.trainer.total_epochs;
    if (total_steps_ < 1)
      throw config_error(msg("rlflow::Trainer: no training steps (dataset of ", train_.size(), " prompts, data.train_batch_size=",
                             cfg_.data.train_batch_size, ", trainer.total_epochs=", cfg_.trainer.total_epochs,
                             "); set trainer.total_training_steps or provide more prompts"));
    roles::RoleSetup setup;
    setup.cfg = cfg_;
    setup.alphabet = alphabet;
    setup.policy_model.vocab_size = tok_.vocab_size();
    setup.policy_model.max_seq_len = static_cast<int>(cfg_.data.max_prompt_length + cfg_.data.max_response_length);
    setup.policy_model.n_layer = static_cast<int>(cfg_.actor_rollout_ref.model.n_layer);
    setup.policy_model.n_head = static_cast<int>(cfg_.actor_rollout_ref.model.n_head);
    setup.policy_model.n_embd = static_cast<int>(cfg_.actor_rollout_ref.model.n_embd);
    setup.policy_model.seed = static_cast<std::uint64_t>(cfg_.seed);
    setup.policy_model.validate();
    setup.critic_model = setup.policy_model;
    setup.critic_model.value_head = true;
    setup.critic_model.seed = static_cast<std::uint64_t>(cfg_.seed) + 1;
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
    if constexpr (has_critic)
      group_.emplace(*pool_, go, std::tuple(setup, total_steps_ * updates), std::tuple(setup, total_steps_ * critic_updates),
                     std::tuple(setup));
    else
      group_.emplace(*pool_, go, std::tuple(setup, total_steps_ * updates), std::tuple(setup));
    if (cfg_.algorithm.use_kl_in_reward) {
      auto const& k = cfg_.algorithm.kl_ctrl;
      if (k.type.view() == "adaptive") adaptive_kl_.emplace(k.kl_coef, k.target_kl, static_cast<double>(k.horizon));
      else fixed_kl_.value = k.kl_coef;
    }
    maybe_resume();
  }

  TrainerConfig const& config() const { return cfg_; }
  std::int64_t global_step() const { return global_step_; }
  std::int64_t total_steps() const { return total_steps_; }
  DataPosition data_position() const { return pos_; }
  group_type& workers() { return *group_; }

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
    auto const& rc = cfg_.actor_rollout_ref.rollout;
    std::int64_t const n = rc.n;

    // 1-3: prompts, uid per prompt (before repetition), repeat n times interleaved.
    std::int64_t const epoch = pos_.epoch;
    auto items = train_.next_batch(pos_, cfg_.data.train_batch_size);
    DataProto prompts = make_prompt_batch(items, step_no);
    DataProto gen_batch = prompts.repeat(n, /*interleave=*/true);
    add_rollout_seeds(gen_batch, step_no, /*salt=*/0);

    // 4: generate (the rollout sleeps afterwards when free_cache_engine).
    DataProto batch;
    timed("gen", [&] { batch = actor_rollout_wg().template call<&actor_role::generate_sequences>(gen_batch); });

    // ReMax: one greedy response per prompt; its reward is the baseline.
    std::optional<Tensor> remax_baselines;
    if constexpr (std::is_same_v<algorithm, ReMax>) {
      timed("gen_max", [&] {
        DataProto greedy_in = prompts;
        add_rollout_seeds(greedy_in, step_no, /*salt=*/1);
        greedy_in.meta_info().set("do_sample", false);
        DataProto greedy = actor_rollout_wg().template call<&actor_role::generate_sequences>(greedy_in);
        DataProto s = reward_wg().template call<&reward_role::compute_rm_score>(greedy);
        auto base = detail::row_sums(s.tensor("token_level_scores"));
        std::vector<float> per_row(static_cast<std::size_t>(prompts.size() * n));
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
    timed("reward", [&] { batch.union_with(reward_wg().template call<&reward_role::compute_rm_score>(batch)); });

    // 9: old log-probs (+ entropy, reported as actor/entropy).
    timed("old_log_prob", [&] {
      if (cfg_.algorithm.rollout_correction.bypass_mode) {
        // verl: apply_bypass_mode: old_log_probs := rollout_log_probs (no actor forward; the actor's
        // loss becomes bypass_mode and computes the rollout correction itself)
        batch.set_tensor("old_log_probs", batch.tensor("rollout_log_probs").clone());
        return;
      }
      DataProto old = actor_rollout_wg().template call<&actor_role::compute_log_prob>(batch);
      auto fmask = roles::detail::float_mask(rmask);
      m["actor/entropy"] = kernels::agg_loss(cpu::par, kernels::Dims{rows, R}, old.tensor("entropys").span<float>(),
                                             std::span<float const>(fmask),
                                             kernels::parse_agg_mode(cfg_.actor_rollout_ref.actor.loss_agg_mode.view()));
      batch.union_with(old.pop({"old_log_probs"}));
    });

    // 10: reference log-probs.
    if (cfg_.uses_reference())
      timed("ref", [&] { batch.union_with(actor_rollout_wg().template call<&actor_role::compute_ref_log_prob>(batch)); });

    // 11: values.
    if constexpr (has_critic)
      timed("values", [&] { batch.union_with(critic_wg().template call<&critic_role::compute_values>(batch)); });

    // 12: KL in the reward, then advantages on the driver.
    timed("adv", [&] { compute_advantage(batch, remax_baselines, m); });

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
    timed("update_weights", [&] { actor_rollout_wg().template call<&actor_role::update_weights>(); });

    global_step_ = step_no;

    // 16: data metrics (verl: compute_data_metrics, compute_timing_metrics, compute_throughout_metrics).
    data_metrics(batch, m);
    double const step_time = std::chrono::duration<double>(clock::now() - t_step).count();
    m["timing_s/step"] = step_time;
    m["perf/total_num_tokens"] = total_tokens;
    m["perf/time_per_step"] = step_time;
    m["perf/throughput"] = total_tokens / (step_time * static_cast<double>(cfg_.world_size()));
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
    bool const last = global_step_ == total_steps_;
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
    nlohmann::ordered_json st;
    st["global_step"] = global_step_;
    st["data_position"] = {{"epoch", pos_.epoch}, {"index", pos_.index}};
    st["kl_coef"] = adaptive_kl_ ? adaptive_kl_->value : fixed_kl_.value;
    st["truncated_prompts"] = truncated_prompts_;
    st["rng"] = "counter-based: every random draw is a function of (seed, global_step, row); no hidden state";
    st["config"] = cfg_.to_json();
    w.write("trainer_state.json", st.dump(2));
    return w.commit();
  }

  //! The actor's weights (rank 0), for tests and tools.
  std::vector<float> actor_weights() { return actor_rollout_wg().template call<&actor_role::actor_weights>(); }
  std::vector<float> critic_weights()
    requires has_critic
  {
    return critic_wg().template call<&critic_role::critic_weights>();
  }

 private:
  static TrainerConfig prepare(TrainerConfig cfg) {
    // The type decides what the config would otherwise say; a conflicting explicit value is an error.
    std::string_view const want = algorithm::adv_estimator;
    std::string_view const have = cfg.algorithm.adv_estimator.view();
    if (have != want && have != "gae")
      throw config_error(msg("rlflow::Trainer<", algorithm::name, ">: algorithm.adv_estimator=", have, " contradicts the ",
                             algorithm::name, " option (", want, "); drop the key or change the Trainer's algorithm"));
    cfg.algorithm.adv_estimator = config_string(algorithm::adv_estimator);
    if (!cfg.critic.enable.has_value) cfg.critic.enable = has_critic;
    if (cfg.critic.enable.stored != has_critic)
      throw config_error(msg("rlflow::Trainer: critic.enable=", cfg.critic.enable.stored ? "true" : "false",
                             " but the Trainer was ", has_critic ? "given" : "not given",
                             " a critic role; make them agree"));
    cfg.max_colocate_count = placement::max_colocate_count;
    cfg.trainer.device = std::is_same_v<typename backend::system, cpu::tag> ? "cpu" : "cuda";
    cfg.actor_rollout_ref.rollout.tensor_model_parallel_size = parallel::size;
    return cfg;
  }

  //! Prompts longer than data.max_prompt_length: an error before any work (truncation=error),
  //! or counted and cut (left / right).
  void check_prompts() {
    std::int64_t const P = cfg_.data.max_prompt_length;
    std::int64_t over = 0, longest = 0;
    for (std::int64_t i = 0; i < train_.size(); ++i) {
      auto const len = static_cast<std::int64_t>(tok_.encode(train_[i].prompt).size()) + 1;  // + BOS
      if (len > P) ++over;
      longest = std::max(longest, len);
    }
    truncated_prompts_ = 0;
    if (over == 0) return;
    std::string_view const mode = cfg_.data.truncation.view();
    if (mode == "error")
      throw config_error(msg("rlflow::Trainer: ", over, " of ", train_.size(), " prompts are longer than data.max_prompt_length=",
                             P, " tokens (longest: ", longest, ", BOS included); raise data.max_prompt_length to ", longest,
                             " or set data.truncation=left or right"));
    if (mode != "left" && mode != "right")
      throw config_error(msg("rlflow::Trainer: data.truncation=", mode, " is not supported by the built-in tokenizer path; "
                             "use error, left or right"));
    truncated_prompts_ = over;
    if (opts_.console)
      std::fprintf(stderr, "rlflow: %lld of %lld prompts exceed data.max_prompt_length=%lld and are truncated (%s)\n",
                   static_cast<long long>(over), static_cast<long long>(train_.size()), static_cast<long long>(P),
                   std::string(mode).c_str());
  }

  //! input_ids / attention_mask (B, P) int32 left-padded (BOS + prompt), uid, reward_model, data_source.
  DataProto make_prompt_batch(std::vector<PromptItem> const& items, std::int64_t step_no) const {
    std::int64_t const B = static_cast<std::int64_t>(items.size()), P = cfg_.data.max_prompt_length;
    Tensor ids = Tensor::full(Shape{B, P}, tok_.pad_id());
    Tensor am = Tensor::zeros(DType::int32, Shape{B, P});
    NonTensorColumn uid, rm, src, raw;
    bool const cut_left = cfg_.data.truncation.view() == "left";
    for (std::int64_t i = 0; i < B; ++i) {
      auto const& it = items[static_cast<std::size_t>(i)];
      std::vector<std::int32_t> t = tok_.encode(it.prompt);
      t.insert(t.begin(), tok_.bos_id());
      if (static_cast<std::int64_t>(t.size()) > P) {
        if (cut_left) t.erase(t.begin(), t.end() - P);
        else t.resize(static_cast<std::size_t>(P));
      }
      std::int64_t const off = P - static_cast<std::int64_t>(t.size());
      for (std::size_t k = 0; k < t.size(); ++k) {
        ids.at<std::int32_t>(i, off + static_cast<std::int64_t>(k)) = t[k];
        am.at<std::int32_t>(i, off + static_cast<std::int64_t>(k)) = 1;
      }
      // verl draws uuid4 per prompt; a deterministic id keeps runs and resumes reproducible.
      uid.emplace_back(msg("step", step_no, "-prompt", i));
      rm.emplace_back(Dict{{"ground_truth", it.ground_truth}});
      src.emplace_back(it.data_source);
      raw.emplace_back(it.prompt);
    }
    DataProto d = DataProto::from_dict({{"input_ids", ids}, {"attention_mask", am}},
                                       {{"uid", uid}, {"reward_model", rm}, {"data_source", src}, {"raw_prompt", raw}});
    return d;
  }

  //! rollout_seed (rows) int64: a function of (seed, step, row, salt) only, so a sequence's
  //! tokens do not depend on the DP layout or on the other rows.
  void add_rollout_seeds(DataProto& d, std::int64_t step_no, std::uint64_t salt) const {
    std::int64_t const rows = d.size();
    std::vector<std::int64_t> s(static_cast<std::size_t>(rows));
    for (std::int64_t i = 0; i < rows; ++i)
      s[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(
          detail::mix64(detail::mix64(static_cast<std::uint64_t>(cfg_.seed) ^ (salt << 62)) + static_cast<std::uint64_t>(step_no) * 1000003ull +
                        static_cast<std::uint64_t>(i)) >> 1);
    d.set_tensor("rollout_seed", Tensor::from(s));
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
    std::map<std::string, std::vector<double>> all;
    for (auto const& lists : per_rank)
      for (auto const& [k, v] : lists) all[k].insert(all[k].end(), v.begin(), v.end());
    for (auto const& [k, v] : reduce_metrics(all)) m[k] = v;
  }

  //! verl: compute_data_metrics (score, rewards, advantages, returns, values, lengths).
  void data_metrics(DataProto const& batch, Metrics& m) const {
    Tensor const& rmask = batch.tensor("response_mask");
    detail::put_stat(m, "critic/score", detail::row_sums(batch.tensor("token_level_scores")));
    detail::put_stat(m, "critic/rewards", detail::row_sums(batch.tensor("token_level_rewards")));
    detail::put_stat(m, "critic/advantages", detail::valid_values(batch.tensor("advantages"), rmask));
    detail::put_stat(m, "critic/returns", detail::valid_values(batch.tensor("returns"), rmask));
    if constexpr (has_critic) {
      auto values = detail::valid_values(batch.tensor("values"), rmask);
      detail::put_stat(m, "critic/values", values);
      auto returns = detail::valid_values(batch.tensor("returns"), rmask);
      // verl: vf_explained_var = 1 - var(returns - values) / (var(returns) + 1e-5)
      double mr = 0, md = 0;
      for (std::size_t i = 0; i < returns.size(); ++i) mr += returns[i], md += returns[i] - values[i];
      double const N = std::max<double>(1.0, static_cast<double>(returns.size()));
      mr /= N;
      md /= N;
      double vr = 0, vd = 0;
      for (std::size_t i = 0; i < returns.size(); ++i) {
        vr += (returns[i] - mr) * (returns[i] - mr);
        vd += (returns[i] - values[i] - md) * (returns[i] - values[i] - md);
      }
      m["critic/vf_explained_var"] = 1.0 - (vd / N) / (vr / N + 1e-5);
    }
    std::int64_t const rows = rmask.dim(0), R = rmask.dim(1);
    std::vector<double> lens(static_cast<std::size_t>(rows)), plens(static_cast<std::size_t>(rows));
    double clipped = 0;
    Tensor const& attn = batch.tensor("attention_mask");
    std::int64_t const P = attn.dim(1) - R;
    for (std::int64_t i = 0; i < rows; ++i) {
      double l = 0, p = 0;
      for (std::int64_t t = 0; t < R; ++t) l += rmask.at<std::int32_t>(i, t) != 0;
      for (std::int64_t t = 0; t < P; ++t) p += attn.at<std::int32_t>(i, t) != 0;
      lens[static_cast<std::size_t>(i)] = l;
      plens[static_cast<std::size_t>(i)] = p;
      clipped += l == static_cast<double>(R);
    }
    detail::put_stat(m, "response_length", lens);
    m["response_length/clip_ratio"] = clipped / static_cast<double>(std::max<std::int64_t>(rows, 1));
    detail::put_stat(m, "prompt_length", plens);
  }

  //! Prints trainer.log_train_generations rows of this step's batch, spread evenly over it:
  //! prompt, response (decoded, special tokens dropped) and score (the row's summed
  //! token_level_scores). rlflow's own (verl logs only validation generations).
  void print_samples(DataProto const& batch) const {
    Tensor const& p = batch.tensor("prompts");
    Tensor const& r = batch.tensor("responses");
    auto const scores = detail::row_sums(batch.tensor("token_level_scores"));
    std::int64_t const rows = batch.size(), k = std::min<std::int64_t>(cfg_.trainer.log_train_generations, rows);
    auto const P = p.dim(1), R = r.dim(1);
    for (std::int64_t i = 0; i < k; ++i) {
      std::int64_t const row = i * rows / k;
      auto const pr = p.span<std::int32_t>().subspan(static_cast<std::size_t>(row * P), static_cast<std::size_t>(P));
      auto const re = r.span<std::int32_t>().subspan(static_cast<std::size_t>(row * R), static_cast<std::size_t>(R));
      std::printf("  sample %lld/%lld: %s -> %s (score %.4g)\n", static_cast<long long>(i + 1), static_cast<long long>(k),
                  quoted(tok_.decode(pr)).c_str(), quoted(tok_.decode(re)).c_str(), scores[static_cast<std::size_t>(row)]);
    }
    std::fflush(stdout);
  }
  static std::string quoted(std::string const& s) {
    std::string out = "'";
    for (char c : s) out += c == '\n' ? std::string("\\n") : std::string(1, c);
    return out + "'";
  }

  //! The metrics writer, opened on first use: appends after a resume (dropping lines of steps
  //! after the checkpoint, which are about to be redone), truncates otherwise.
  MetricsLogger& logger() {
    if (!logger_) {
      auto const path = metrics_path();
      if (global_step_ > 0 && std::filesystem::exists(path)) {
        std::ifstream in(path);
        std::string line, kept;
        while (std::getline(in, line)) {
          try {
            if (nlohmann::json::parse(line).at("step").get<std::int64_t>() <= global_step_) kept += line + "\n";
          } catch (std::exception const&) {
            // a torn last line from a killed run: dropped
          }
        }
        in.close();
        rlflow::detail::write_file_atomic(path, kept);
      }
      ConsoleOptions co;
      co.log_freq = cfg_.trainer.log_freq;
      logger_.emplace(path, total_steps_, opts_.console, /*append=*/global_step_ > 0, co);
    }
    return *logger_;
  }

  std::filesystem::path checkpoint_root() const { return std::filesystem::path(std::string(cfg_.trainer.default_local_dir.view())); }
  std::filesystem::path metrics_path() const {
    return opts_.metrics_file.empty() ? checkpoint_root() / "metrics.jsonl" : std::filesystem::path(opts_.metrics_file);
  }

  //! trainer.resume_mode: auto (latest checkpoint if any), disable, resume_path (resume_from_path).
  void maybe_resume() {
    std::string_view const mode = cfg_.trainer.resume_mode.view();
    if (mode == "disable") return;
    std::filesystem::path dir;
    if (mode == "resume_path") {
      dir = std::string(cfg_.trainer.resume_from_path.view());
      if (dir.empty())
        throw config_error("rlflow::Trainer: trainer.resume_mode=resume_path needs trainer.resume_from_path=<dir>/global_step_N");
    } else {
      auto step = latest_checkpoint_step(checkpoint_root());
      if (!step) return;
      dir = checkpoint_root() / ("global_step_" + std::to_string(*step));
    }
    verify_checkpoint(dir);  // every file present and intact before anything is loaded
    auto bytes = rlflow::detail::read_all(dir / "trainer_state.json");
    nlohmann::json st = nlohmann::json::parse(bytes.begin(), bytes.end());
    actor_rollout_wg().template call<&actor_role::load_checkpoint>((dir / "actor.safetensors").string());
    if constexpr (has_critic) critic_wg().template call<&critic_role::load_checkpoint>((dir / "critic.safetensors").string());
    global_step_ = st.at("global_step").get<std::int64_t>();
    pos_.epoch = st.at("data_position").at("epoch").get<std::int64_t>();
    pos_.index = st.at("data_position").at("index").get<std::int64_t>();
    double const kl = st.at("kl_coef").get<double>();
    if (adaptive_kl_) adaptive_kl_->value = kl;
    else fixed_kl_.value = kl;
    if (opts_.console)
      std::fprintf(stderr, "rlflow: resumed from %s (global step %lld)\n", dir.string().c_str(),
                   static_cast<long long>(global_step_));
  }

  TrainerConfig cfg_;
  PromptDataset train_;
  model::CharTokenizer tok_;
  TrainerOptions opts_;
  std::int64_t total_steps_ = 0;
  std::int64_t global_step_ = 0;
  std::int64_t truncated_prompts_ = 0;
  DataPosition pos_;
  kernels::FixedKLController fixed_kl_;
  std::optional<kernels::AdaptiveKLController> adaptive_kl_;
  std::optional<ResourcePool> pool_;
  std::optional<group_type> group_;
  std::optional<MetricsLogger> logger_;
};

//! A human-readable description of a Trainer type (placement, algorithm, layout, roles).
template <class T>
std::string describe() {
  return msg("Trainer<", T::algorithm::name, ", Colocate<", T::placement::max_colocate_count, ">, TP<", T::parallel::size,
             ">> backend=", T::on_cuda ? "cuda" : "cpu", " roles=actor_rollout_ref", T::has_critic ? ",critic" : "", ",reward");
}

}  // namespace rlflow
