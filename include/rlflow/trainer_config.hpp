// rlflow/trainer_config.hpp: the runtime configuration of a Trainer, with verl's key names and
// defaults (data.*, actor_rollout_ref.*, critic.*, reward.*, algorithm.*, trainer.*, seed, ...).
// Defines TrainerConfig (a structural literal type: usable as a constexpr value and as a template
// argument), the key table that drives set/get, YAML/JSON loading, JSON dumping, --help and the
// reference doc, the start-up validation (validate/check, verl_algorithms.md §11) and the
// compile-time check checked_config<cfg>. Does not compute the resource plan (see planner.hpp).
#pragma once
#include <algorithm>     // std::min
#include <array>         // std::array (optim.betas)
#include <charconv>      // std::from_chars
#include <cmath>         // std::isfinite
#include <cstddef>       // std::size_t
#include <cstdint>       // std::int64_t
#include <cstdlib>       // std::strtod
#include <filesystem>    // is_directory (--config on a folder)
#include <fstream>       // config files
#include <iomanip>       // std::setw in help text
#include <sstream>       // number formatting, file reading
#include <string>
#include <string_view>
#include <type_traits>   // std::is_same_v
#include <utility>       // std::declval
#include <vector>

#include <nlohmann/json.hpp>        // JSON loading and dumping

#include <rlflow/detail/yaml.hpp>  // parse_yaml_flat, flat_entry
#include <rlflow/error.hpp>        // config_error, format_error, io_error, msg
#include <rlflow/run_main.hpp>     // help_requested (from_args on --help)

namespace rlflow {

// ---- value types usable in a constexpr config and as a template argument ----------------------

//! A string of at most N characters stored inline, so a TrainerConfig can be constexpr and a
//! class-type template argument. Compares equal to string literals: cfg.algorithm.adv_estimator == "grpo".
template <std::size_t N>
struct fixed_string {
  char chars[N + 1]{};    // public: structural type
  std::size_t length = 0;

  constexpr fixed_string() = default;
  constexpr fixed_string(char const* s) { assign(std::string_view(s)); }            // NOLINT: implicit by design
  constexpr fixed_string(std::string_view s) { assign(s); }                         // NOLINT
  fixed_string(std::string const& s) { assign(std::string_view(s)); }               // NOLINT

  constexpr void assign(std::string_view s) {
    if (s.size() > N)
      throw config_error(msg("rlflow::fixed_string<", N, ">: '", std::string(s), "' has ", s.size(),
                             " characters; at most ", N, " fit; use a shorter value"));
    for (std::size_t i = 0; i <= N; ++i) chars[i] = i < s.size() ? s[i] : '\0';
    length = s.size();
  }
  constexpr std::string_view view() const { return std::string_view(chars, length); }
  std::string str() const { return std::string(view()); }
  constexpr bool empty() const { return length == 0; }
  constexpr std::size_t size() const { return length; }
  friend constexpr bool operator==(fixed_string const& a, std::string_view b) { return a.view() == b; }
  template <std::size_t M>
  friend constexpr bool operator==(fixed_string const& a, fixed_string<M> const& b) { return a.view() == b.view(); }
  friend std::ostream& operator<<(std::ostream& os, fixed_string const& s) { return os << s.view(); }
};

//! The string type of config values (names, paths): up to 255 characters.
using config_string = fixed_string<255>;

//! Tag for an unset nullable value (verl's null / None).
struct null_t {
  constexpr explicit null_t(int) {}
};
inline constexpr null_t null{0};

//! A value that may be null, as verl's Optional config fields. Structural (public members).
template <class T>
struct nullable {
  T stored{};
  bool has_value = false;

  constexpr nullable() = default;
  constexpr nullable(null_t) {}                                    // NOLINT: implicit by design
  constexpr nullable(T v) : stored(v), has_value(true) {}          // NOLINT
  constexpr explicit operator bool() const { return has_value; }
  constexpr T value() const {
    if (!has_value) throw config_error("rlflow::nullable::value(): the value is null; set it or use value_or()");
    return stored;
  }
  constexpr T value_or(T fallback) const { return has_value ? stored : fallback; }
  constexpr T operator*() const { return value(); }
};

//! A list of strings stored comma-joined inline (trainer.logger = [console, jsonl]).
struct string_list {
  config_string joined{};
  constexpr string_list() = default;
  constexpr string_list(char const* s) : joined(s) {}  // NOLINT: "console,jsonl"
  std::vector<std::string> items() const {
    std::vector<std::string> out;
    std::string_view v = joined.view();
    while (!v.empty()) {
      auto const comma = v.find(',');
      out.emplace_back(v.substr(0, comma));
      if (comma == std::string_view::npos) break;
      v.remove_prefix(comma + 1);
    }
    return out;
  }
  constexpr bool contains(std::string_view item) const {
    std::string_view v = joined.view();
    while (true) {
      auto const comma = v.find(',');
      if (v.substr(0, comma) == item) return true;
      if (comma == std::string_view::npos) return false;
      v.remove_prefix(comma + 1);
    }
  }
};

// ---- the configuration tree (verl's keys; rlflow additions are marked) -----------------------

//! Optimizer settings. verl: actor_rollout_ref.actor.optim / critic.optim (AdamW).
struct OptimConfig {
  double lr = 1e-6;
  double weight_decay = 0.01;
  std::array<double, 2> betas{0.9, 0.999};
  std::int64_t lr_warmup_steps = -1;     //!< -1: use lr_warmup_steps_ratio
  double lr_warmup_steps_ratio = 0.0;
  double min_lr_ratio = 0.0;
  config_string lr_scheduler_type = "constant";
};

//! verl: data.* (verl/trainer/config/data/legacy_data.yaml).
struct DataConfig {
  config_string train_files = "";
  config_string val_files = "";
  config_string prompt_key = "prompt";
  std::int64_t max_prompt_length = 512;
  std::int64_t max_response_length = 512;
  std::int64_t train_batch_size = 1024;
  nullable<std::int64_t> val_batch_size{};
  nullable<std::int64_t> gen_batch_size{};
  bool shuffle = true;
  config_string truncation = "error";
  bool filter_overlong_prompts = false;
  std::int64_t seed = 1;  //!< verl: data.seed (the train sampler's shuffle seed)
};

//! rlflow: the built-in GPT's shape (verl has model.path to a Hugging Face model instead).
struct ModelConfig {
  config_string path = "";
  config_string tokenizer_path = "";  //!< verl: tokenizer folder; empty: model.path
  std::int64_t vocab_size = 0;  //!< 0: taken from the task's tokenizer
  std::int64_t n_layer = 2;
  std::int64_t n_head = 4;
  std::int64_t n_embd = 64;
};

//! verl: actor_rollout_ref.actor.policy_loss.*.
struct PolicyLossConfig {
  config_string loss_mode = "vanilla";
  double clip_cov_ratio = 0.0002;
  double clip_cov_lb = 1.0;
  double clip_cov_ub = 5.0;
  double kl_cov_ratio = 0.0002;
  double ppo_kl_coef = 0.1;
  nullable<double> dro_beta{};
};

//! verl: actor_rollout_ref.actor.megatron.* (verl/trainer/config/actor/megatron_actor.yaml; only the
//! tensor-parallel degree: engine::TrainingEngine's Megatron-style training TP).
struct MegatronConfig {
  std::int64_t tensor_model_parallel_size = 1;
};

//! verl: actor_rollout_ref.actor.* (verl/trainer/config/actor/actor.yaml, verl/workers/config/actor.py).
struct ActorConfig {
  config_string strategy = "fsdp";
  std::int64_t ppo_mini_batch_size = 256;
  nullable<std::int64_t> ppo_micro_batch_size{};  //!< deprecated global micro-batch
  nullable<std::int64_t> ppo_micro_batch_size_per_gpu{};
  bool use_dynamic_bsz = false;
  std::int64_t ppo_max_token_len_per_gpu = 16384;
  std::int64_t ppo_epochs = 1;
  bool shuffle = false;
  std::int64_t data_loader_seed = 42;
  double clip_ratio = 0.2;
  nullable<double> clip_ratio_low{0.2};
  nullable<double> clip_ratio_high{0.2};
  double clip_ratio_c = 3.0;
  double tau_pos = 1.0;
  double tau_neg = 1.05;
  config_string loss_agg_mode = "token-mean";
  nullable<double> loss_scale_factor{};
  double entropy_coeff = 0.0;
  bool calculate_entropy = false;
  bool calculate_sum_pi_squared = false;
  bool use_kl_loss = false;
  double kl_loss_coef = 0.001;
  config_string kl_loss_type = "low_var_kl";
  double grad_clip = 1.0;
  std::int64_t ulysses_sequence_parallel_size = 1;
  PolicyLossConfig policy_loss{};
  OptimConfig optim{};
  MegatronConfig megatron{};
};

//! verl: actor_rollout_ref.rollout.val_kwargs.*.
struct ValKwargsConfig {
  double temperature = 0.0;
  std::int64_t top_k = -1;
  double top_p = 1.0;
  std::int64_t n = 1;
  bool do_sample = false;
};

//! verl: actor_rollout_ref.rollout.checkpoint_engine.* (weight sync transport).
struct CheckpointEngineConfig {
  config_string backend = "naive";
  std::int64_t update_weights_bucket_megabytes = 2048;
};

//! verl: actor_rollout_ref.rollout.agent.*.
struct AgentConfig {
  std::int64_t num_workers = 8;
};

//! verl: actor_rollout_ref.rollout.* (verl/trainer/config/rollout/rollout.yaml).
struct RolloutConfig {
  std::int64_t n = 1;
  double temperature = 1.0;
  std::int64_t top_k = -1;
  double top_p = 1.0;
  bool do_sample = true;
  double gpu_memory_utilization = 0.5;
  std::int64_t tensor_model_parallel_size = 2;
  std::int64_t data_parallel_size = 1;
  std::int64_t pipeline_model_parallel_size = 1;
  std::int64_t nnodes = 0;                        //!< standalone rollout nodes (separate_async)
  nullable<std::int64_t> n_gpus_per_node{};       //!< null: trainer.n_gpus_per_node
  bool free_cache_engine = true;
  bool calculate_log_probs = true;
  nullable<std::int64_t> log_prob_micro_batch_size{};
  nullable<std::int64_t> log_prob_micro_batch_size_per_gpu{};
  nullable<bool> log_prob_use_dynamic_bsz{};      //!< null: actor.use_dynamic_bsz
  std::int64_t log_prob_max_token_len_per_gpu = 16384;
  ValKwargsConfig val_kwargs{};
  AgentConfig agent{};
  CheckpointEngineConfig checkpoint_engine{};
};

//! verl: actor_rollout_ref.ref.*.
struct RefConfig {
  nullable<std::int64_t> log_prob_micro_batch_size{};
  nullable<std::int64_t> log_prob_micro_batch_size_per_gpu{};
  nullable<bool> log_prob_use_dynamic_bsz{};      //!< null: actor.use_dynamic_bsz
  std::int64_t log_prob_max_token_len_per_gpu = 16384;
};

//! verl: actor_rollout_ref.*.
struct ActorRolloutRefConfig {
  bool hybrid_engine = true;
  ModelConfig model{};
  ActorConfig actor{};
  RolloutConfig rollout{};
  RefConfig ref{};
};

//! verl: critic.model.* (the critic's initial weights).
struct CriticModelConfig {
  config_string path = "";  //!< a GPT-2 folder for the critic's trunk; empty: actor_rollout_ref.model.path
};

//! verl: critic.* (verl/trainer/config/critic/critic.yaml); null fields inherit the actor's.
struct CriticConfig {
  nullable<bool> enable{};                        //!< null: on iff algorithm.adv_estimator == gae
  config_string strategy = "fsdp";
  nullable<std::int64_t> ppo_mini_batch_size{};   //!< null: actor.ppo_mini_batch_size
  nullable<std::int64_t> ppo_micro_batch_size{};
  nullable<std::int64_t> ppo_micro_batch_size_per_gpu{};
  bool use_dynamic_bsz = false;
  std::int64_t ppo_max_token_len_per_gpu = 32768;
  nullable<std::int64_t> ppo_epochs{};            //!< null: actor.ppo_epochs
  nullable<bool> shuffle{};                       //!< null: actor.shuffle
  double cliprange_value = 0.5;
  config_string loss_agg_mode = "";               //!< empty (null): actor.loss_agg_mode
  double grad_clip = 1.0;
  std::int64_t ulysses_sequence_parallel_size = 1;
  OptimConfig optim{1e-5};
  CriticModelConfig model{};
};

//! verl: reward.reward_model.* (verl/trainer/config/reward/reward.yaml).
struct RewardModelConfig {
  bool enable = false;
  bool enable_resource_pool = false;
  std::int64_t n_gpus_per_node = 8;
  std::int64_t nnodes = 0;
};

//! verl: reward.*.
struct RewardConfig {
  RewardModelConfig reward_model{};
};

//! verl: algorithm.kl_ctrl.* (verl/trainer/config/algorithm.py).
struct KLControlConfig {
  config_string type = "fixed";
  double kl_coef = 0.001;
  std::int64_t horizon = 10000;
  double target_kl = 0.1;
};

//! verl: algorithm.pf_ppo.* (ppo_trainer.yaml).
struct PFPPOConfig {
  config_string reweight_method = "pow";
  double weight_pow = 2.0;
};

//! verl: algorithm.rollout_correction.* (config/algorithm/rollout_correction.yaml). Empty strings are
//! verl's nulls: rollout_is off, no rejection sampling.
struct RolloutCorrectionConfig {
  config_string rollout_is = "";
  config_string rollout_is_threshold = "2.0";
  bool rollout_is_batch_normalize = false;
  config_string rollout_rs = "";
  config_string rollout_rs_threshold = "";
  bool bypass_mode = false;
  config_string loss_type = "ppo_clip";
};

//! verl: algorithm.* (verl/trainer/config/ppo_trainer.yaml).
struct AlgorithmConfig {
  double gamma = 1.0;
  double lam = 1.0;
  config_string adv_estimator = "gae";
  bool norm_adv_by_std_in_grpo = true;
  bool use_kl_in_reward = false;
  config_string kl_penalty = "kl";
  KLControlConfig kl_ctrl{};
  bool use_pf_ppo = false;
  PFPPOConfig pf_ppo{};
  RolloutCorrectionConfig rollout_correction{};
  string_list gdpo_reward_keys{};     //!< null: GDPO falls back to token_level_rewards
  string_list gdpo_reward_weights{};  //!< null: all 1
};

//! verl: trainer.v1.colocate_async.*.
struct ColocateAsyncConfig {
  std::int64_t num_warmup_batches = 1;
};
//! verl: trainer.v1.separate_async.*.
struct SeparateAsyncConfig {
  std::int64_t num_warmup_batches = 1;
  std::int64_t parameter_sync_step = 4;
};
//! verl: trainer.v1.sampler.* (replay buffer).
struct SamplerConfig {
  std::int64_t max_off_policy_threshold = 8;
  config_string strategy = "drop";
};
//! verl: trainer.v1.*.
struct TrainerV1Config {
  config_string trainer_mode = "sync";
  ColocateAsyncConfig colocate_async{};
  SeparateAsyncConfig separate_async{};
  SamplerConfig sampler{};
};

//! verl: async_training.* of the fully-async recipe (verl/experimental/fully_async_policy,
//! config/fully_async_ppo_trainer.yaml); only the key rlflow's async modes honour.
struct AsyncTrainingConfig {
  //! A weight sync aborts the batch being generated; its unfinished rows resume with the new
  //! weights (verl's default there: true; rlflow's: false, a run with it is not reproducible).
  bool partial_rollout = false;
};

//! verl: custom_reward_function.* (rlflow: a C symbol in a shared library, see rewards/custom.hpp).
struct CustomRewardFunctionConfig {
  config_string path = "";
  config_string name = "compute_score";
};

//! verl: trainer.*.
struct TrainerSection {
  config_string project_name = "verl_examples";
  config_string experiment_name = "gsm8k";
  string_list logger = "console";
  std::int64_t nnodes = 1;
  std::int64_t n_gpus_per_node = 8;
  std::int64_t total_epochs = 30;
  nullable<std::int64_t> total_training_steps{};
  std::int64_t save_freq = -1;
  std::int64_t test_freq = -1;
  std::int64_t critic_warmup = 0;
  config_string default_local_dir = "checkpoints/${trainer.project_name}/${trainer.experiment_name}";
  config_string resume_mode = "auto";
  config_string resume_from_path = "";
  bool balance_batch = true;
  bool val_before_train = true;
  std::int64_t log_val_generations = 0;
  std::int64_t log_freq = 1;               // rlflow: a console line every this many steps
  std::int64_t log_train_generations = 0;  // rlflow: samples printed with each console line
  nullable<std::int64_t> max_actor_ckpt_to_keep{};
  nullable<std::int64_t> max_critic_ckpt_to_keep{};
  config_string device = "cuda";
  bool use_v1 = true;
  TrainerV1Config v1{};
};

struct CommandLine;

//! The whole run configuration, one member per verl config group. A plain aggregate and a
//! structural literal type: build it in code (designated initializers work), load it from
//! YAML/JSON, override keys with 'a.b.c=value' as verl users type them, check it with
//! rlflow::check (run time) or rlflow::checked_config<cfg> (compile time).
//! verl: the hydra config tree of verl/trainer/config/ppo_trainer.yaml.
struct TrainerConfig {
  DataConfig data{};
  ActorRolloutRefConfig actor_rollout_ref{};
  CriticConfig critic{};
  RewardConfig reward{};
  CustomRewardFunctionConfig custom_reward_function{};
  AlgorithmConfig algorithm{};
  TrainerSection trainer{};
  AsyncTrainingConfig async_training{};
  std::int64_t seed = 42;               //!< rlflow: master seed (model init, sampling, shuffling)
  std::int64_t max_colocate_count = 3;  //!< verl: ResourcePoolManager.max_colocate_count

  // ---- derived values (verl's interpolations and rules) ----
  //! Devices of the trainer pool: trainer.nnodes × trainer.n_gpus_per_node.
  constexpr std::int64_t world_size() const { return trainer.nnodes * trainer.n_gpus_per_node; }
  //! Actor data-parallel size: world / ulysses_sequence_parallel_size / training TP
  //! (actor.megatron.tensor_model_parallel_size; 0 when the TP degree does not divide the world,
  //! which the check actor_tensor_parallel_divides reports).
  constexpr std::int64_t actor_dp_size() const {
    auto const sp = actor_rollout_ref.actor.ulysses_sequence_parallel_size;
    auto const tp = actor_rollout_ref.actor.megatron.tensor_model_parallel_size;
    return sp > 0 && tp > 0 && world_size() % tp == 0 ? world_size() / tp / sp : 0;
  }
  //! Critic data-parallel size: world / critic.ulysses_sequence_parallel_size / training TP (the
  //! critic is sharded with the actor's TP degree).
  constexpr std::int64_t critic_dp_size() const {
    auto const sp = critic.ulysses_sequence_parallel_size;
    auto const tp = actor_rollout_ref.actor.megatron.tensor_model_parallel_size;
    return sp > 0 && tp > 0 && world_size() % tp == 0 ? world_size() / tp / sp : 0;
  }
  //! verl: rollout.n_gpus_per_node defaults to trainer.n_gpus_per_node.
  constexpr std::int64_t rollout_n_gpus_per_node() const {
    return actor_rollout_ref.rollout.n_gpus_per_node.value_or(trainer.n_gpus_per_node);
  }
  constexpr bool is_separate_async() const { return trainer.v1.trainer_mode == "separate_async"; }
  constexpr bool is_colocate_async() const { return trainer.v1.trainer_mode == "colocate_async"; }
  //! verl v1: parameter_sync_step of the mode, or 1 (only separate_async defines it).
  constexpr std::int64_t parameter_sync_step() const {
    return is_separate_async() ? trainer.v1.separate_async.parameter_sync_step : 1;
  }
  //! verl: need_critic (verl/trainer/ppo/utils.py:96-107).
  constexpr bool uses_critic() const {
    return critic.enable.has_value ? critic.enable.stored : algorithm.adv_estimator == "gae";
  }
  //! verl: need_reference_policy (verl/trainer/ppo/utils.py:75-79).
  constexpr bool uses_reference() const {
    return algorithm.use_kl_in_reward || actor_rollout_ref.actor.use_kl_loss;
  }
  constexpr std::int64_t critic_ppo_mini_batch_size() const {
    return critic.ppo_mini_batch_size.value_or(actor_rollout_ref.actor.ppo_mini_batch_size);
  }
  constexpr std::int64_t critic_ppo_epochs() const {
    return critic.ppo_epochs.value_or(actor_rollout_ref.actor.ppo_epochs);
  }
  constexpr bool critic_shuffle() const { return critic.shuffle.value_or(actor_rollout_ref.actor.shuffle); }
  constexpr std::string_view critic_loss_agg_mode() const {
    return critic.loss_agg_mode.empty() ? actor_rollout_ref.actor.loss_agg_mode.view() : critic.loss_agg_mode.view();
  }
  constexpr bool rollout_log_prob_use_dynamic_bsz() const {
    return actor_rollout_ref.rollout.log_prob_use_dynamic_bsz.value_or(actor_rollout_ref.actor.use_dynamic_bsz);
  }
  constexpr bool ref_log_prob_use_dynamic_bsz() const {
    return actor_rollout_ref.ref.log_prob_use_dynamic_bsz.value_or(actor_rollout_ref.actor.use_dynamic_bsz);
  }
  //! ε_lo / ε_hi of the PPO clip, falling back to clip_ratio when null (verl actor.py).
  constexpr double clip_ratio_low() const {
    return actor_rollout_ref.actor.clip_ratio_low.value_or(actor_rollout_ref.actor.clip_ratio);
  }
  constexpr double clip_ratio_high() const {
    return actor_rollout_ref.actor.clip_ratio_high.value_or(actor_rollout_ref.actor.clip_ratio);
  }
  //! Rollout replica world size: TP × DP × PP (verl llm_server.py:518-564).
  constexpr std::int64_t rollout_replica_world_size() const {
    auto const& r = actor_rollout_ref.rollout;
    return r.tensor_model_parallel_size * r.data_parallel_size * r.pipeline_model_parallel_size;
  }
  //! Devices serving rollout: the trainer pool (hybrid) or the standalone fleet (separate_async).
  constexpr std::int64_t rollout_devices() const {
    return is_separate_async() ? actor_rollout_ref.rollout.nnodes * rollout_n_gpus_per_node() : world_size();
  }

  // ---- keys, loading, dumping (defined below) ----
  //! Sets one dotted key from text ('data.train_batch_size', "1024"); throws config_error for an
  //! unknown key (naming the closest known key) or a value of the wrong type.
  void set(std::string_view key, std::string_view value);
  //! The value of a dotted key as text (null -> "null", lists -> "[a, b]").
  std::string get(std::string_view key) const;
  //! Applies 'key=value' overrides in order (hydra's leading '+' / '++' are accepted).
  void apply_overrides(std::vector<std::string> const& overrides);
  //! Applies a YAML or JSON document (chosen by 'format' = "yaml" or "json").
  void apply_text(std::string_view text, std::string_view format, std::string_view source = "<config>");
  //! Applies a .yaml/.yml/.json file.
  void apply_file(std::string const& path);
  //! Applies a parsed JSON object (nested keys).
  void apply_json(nlohmann::json const& j, std::string_view source = "<json>");
  //! Every key as a nested JSON object (checkpoints, --dump).
  nlohmann::json to_json() const;
  //! Loads a config file on top of the defaults.
  static TrainerConfig from_file(std::string const& path);
  //! Parses argv on top of 'defaults' (verl's defaults when omitted): '--config FILE'
  //! (repeatable, applied first), then 'key=value' overrides (in order). '--help' / '-h' throws
  //! rlflow::help_requested carrying the usage and every key with its default (from 'defaults');
  //! rlflow::run_main prints it and returns 0. '--json' is accepted and ignored here
  //! (rlflow::parse_command_line reports it).
  static TrainerConfig from_args(int argc, char const* const* argv, TrainerConfig const& defaults);
  static TrainerConfig from_args(int argc, char const* const* argv);
};

// ---- the key table ----------------------------------------------------------------------------
// X(path, choices, help). choices: "a|b|c" ("null|..." allows an empty/null value), or "".
#define RLFLOW_TRAINER_CONFIG_KEYS(X)                                                                              \
  X(data.train_files, "", "prompt file of the training set (rlflow: JSONL/text; verl: parquet)")                   \
  X(data.val_files, "", "prompt file of the validation set")                                                      \
  X(data.prompt_key, "", "field holding the prompt in each record")                                               \
  X(data.max_prompt_length, "", "prompt tokens kept per sample")                                                   \
  X(data.max_response_length, "", "response tokens generated at most per sample")                                  \
  X(data.train_batch_size, "", "prompts per training step (B)")                                                    \
  X(data.val_batch_size, "", "prompts per validation batch; null: the whole validation set")                       \
  X(data.gen_batch_size, "", "prompts per generation request; null: train_batch_size")                             \
  X(data.shuffle, "", "shuffle the training prompts every epoch")                                                  \
  X(data.truncation, "error|left|right|middle", "what to do with prompts longer than max_prompt_length")           \
  X(data.filter_overlong_prompts, "", "drop prompts longer than max_prompt_length")                                \
  X(data.seed, "", "seed of the training prompts' per-epoch shuffle")                                              \
  X(actor_rollout_ref.hybrid_engine, "", "actor and rollout share processes (required true)")                     \
  X(actor_rollout_ref.model.path, "", "Hugging Face GPT-2 folder (config.json, model.safetensors, vocab.json, merges.txt); empty: random init") \
  X(actor_rollout_ref.model.tokenizer_path, "", "folder with vocab.json and merges.txt; empty: model.path")       \
  X(actor_rollout_ref.model.vocab_size, "", "rlflow: vocabulary size of the built-in GPT; 0: the task tokenizer's") \
  X(actor_rollout_ref.model.n_layer, "", "rlflow: transformer blocks of the built-in GPT")                          \
  X(actor_rollout_ref.model.n_head, "", "rlflow: attention heads of the built-in GPT")                             \
  X(actor_rollout_ref.model.n_embd, "", "rlflow: embedding width of the built-in GPT")                             \
  X(actor_rollout_ref.actor.strategy, "fsdp|fsdp2|megatron", "training backend name (rlflow trains data-parallel)") \
  X(actor_rollout_ref.actor.ppo_mini_batch_size, "", "prompts per optimizer step (M); rows = M × rollout.n")         \
  X(actor_rollout_ref.actor.ppo_micro_batch_size, "", "deprecated global micro-batch; use ppo_micro_batch_size_per_gpu") \
  X(actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu, "", "rows per forward/backward on one device (gradient accumulation)") \
  X(actor_rollout_ref.actor.use_dynamic_bsz, "", "pack micro-batches by token count instead of rows")                \
  X(actor_rollout_ref.actor.ppo_max_token_len_per_gpu, "", "token cap of a dynamic micro-batch")                    \
  X(actor_rollout_ref.actor.ppo_epochs, "", "passes over each training batch")                                      \
  X(actor_rollout_ref.actor.shuffle, "", "shuffle rows between PPO epochs")                                        \
  X(actor_rollout_ref.actor.data_loader_seed, "", "seed of the mini-batch shuffle (plus the DP rank)")             \
  X(actor_rollout_ref.actor.clip_ratio, "", "PPO clip ε (fallback of clip_ratio_low/high)")                         \
  X(actor_rollout_ref.actor.clip_ratio_low, "", "lower clip ε_lo: ratio ≥ 1 − ε_lo; null: clip_ratio")              \
  X(actor_rollout_ref.actor.clip_ratio_high, "", "upper clip ε_hi: ratio ≤ 1 + ε_hi; null: clip_ratio")             \
  X(actor_rollout_ref.actor.clip_ratio_c, "", "dual-clip bound c for negative advantages (> 1)")                   \
  X(actor_rollout_ref.actor.tau_pos, "", "SAPO gate temperature for positive advantages")                          \
  X(actor_rollout_ref.actor.tau_neg, "", "SAPO gate temperature for negative advantages")                          \
  X(actor_rollout_ref.actor.loss_agg_mode,                                                                         \
    "token-mean|token-sum|seq-mean-token-sum|seq-mean-token-mean|seq-mean-token-sum-norm",                         \
    "how per-token losses are aggregated (verl agg_loss)")                                                         \
  X(actor_rollout_ref.actor.loss_scale_factor, "", "divisor of seq-mean-token-sum-norm; null: padded width")        \
  X(actor_rollout_ref.actor.entropy_coeff, "", "entropy bonus coefficient (loss −= coeff × entropy)")               \
  X(actor_rollout_ref.actor.calculate_entropy, "", "compute the entropy metric even when entropy_coeff = 0")        \
  X(actor_rollout_ref.actor.calculate_sum_pi_squared, "", "compute Σπ² per token (needed by optimal_token_baseline)") \
  X(actor_rollout_ref.actor.use_kl_loss, "", "add kl_loss_coef × KL(π‖π_ref) to the actor loss")                    \
  X(actor_rollout_ref.actor.kl_loss_coef, "", "weight of the KL loss")                                             \
  X(actor_rollout_ref.actor.kl_loss_type, "kl|k1|abs|mse|k2|low_var_kl|k3|kl+|k1+|abs+|mse+|k2+|low_var_kl+|k3+",   \
    "KL estimator of the KL loss ('+': straight-through k2 gradient)")                                             \
  X(actor_rollout_ref.actor.grad_clip, "", "global gradient-norm clip of the actor")                               \
  X(actor_rollout_ref.actor.ulysses_sequence_parallel_size, "", "sequence-parallel degree (DP = devices / this)")   \
  X(actor_rollout_ref.actor.megatron.tensor_model_parallel_size, "", "training TP degree (Megatron-style; divides n_head and the devices)") \
  X(actor_rollout_ref.actor.policy_loss.loss_mode,                                                                 \
    "vanilla|gspo|sapo|gpg|clip_cov|kl_cov|geo_mean|dro|cispo|dppo_tv|dppo_kl", "policy loss function")            \
  X(actor_rollout_ref.actor.policy_loss.clip_cov_ratio, "", "clip_cov: fraction of tokens clipped (> 0)")          \
  X(actor_rollout_ref.actor.policy_loss.clip_cov_lb, "", "clip_cov: covariance lower bound")                      \
  X(actor_rollout_ref.actor.policy_loss.clip_cov_ub, "", "clip_cov: covariance upper bound")                      \
  X(actor_rollout_ref.actor.policy_loss.kl_cov_ratio, "", "kl_cov: fraction of tokens penalised (> 0)")            \
  X(actor_rollout_ref.actor.policy_loss.ppo_kl_coef, "", "kl_cov: coefficient of |Δ| on selected tokens")          \
  X(actor_rollout_ref.actor.policy_loss.dro_beta, "", "dro: β of the quadratic penalty (> 0; required by dro)")   \
  X(actor_rollout_ref.actor.optim.lr, "", "actor AdamW learning rate")                                             \
  X(actor_rollout_ref.actor.optim.weight_decay, "", "actor AdamW weight decay")                                    \
  X(actor_rollout_ref.actor.optim.betas, "", "actor AdamW (β1, β2)")                                               \
  X(actor_rollout_ref.actor.optim.lr_warmup_steps, "", "linear warm-up steps; -1: lr_warmup_steps_ratio × total")   \
  X(actor_rollout_ref.actor.optim.lr_warmup_steps_ratio, "", "warm-up as a fraction of the total steps")           \
  X(actor_rollout_ref.actor.optim.min_lr_ratio, "", "cosine schedule floor as a fraction of lr")                   \
  X(actor_rollout_ref.actor.optim.lr_scheduler_type, "constant|cosine", "learning-rate schedule after warm-up")    \
  X(actor_rollout_ref.rollout.n, "", "responses sampled per prompt (GRPO group size)")                              \
  X(actor_rollout_ref.rollout.temperature, "", "sampling temperature")                                              \
  X(actor_rollout_ref.rollout.top_k, "", "top-k sampling; -1 (or 0): off")                                          \
  X(actor_rollout_ref.rollout.top_p, "", "nucleus sampling mass in (0, 1]")                                         \
  X(actor_rollout_ref.rollout.do_sample, "", "sample (true) or decode greedily (false)")                            \
  X(actor_rollout_ref.rollout.gpu_memory_utilization, "", "fraction of device memory for weights + KV cache")       \
  X(actor_rollout_ref.rollout.tensor_model_parallel_size, "", "TP degree of one rollout replica")                   \
  X(actor_rollout_ref.rollout.data_parallel_size, "", "DP degree inside one rollout replica")                       \
  X(actor_rollout_ref.rollout.pipeline_model_parallel_size, "", "PP degree of one rollout replica")                 \
  X(actor_rollout_ref.rollout.nnodes, "", "nodes of the standalone rollout fleet (separate_async)")                 \
  X(actor_rollout_ref.rollout.n_gpus_per_node, "", "devices per node of the rollout fleet; null: trainer's")        \
  X(actor_rollout_ref.rollout.free_cache_engine, "", "release KV cache (sleep) between generation and training")    \
  X(actor_rollout_ref.rollout.calculate_log_probs, "", "return the sampler's log-probs (rollout_log_probs)")         \
  X(actor_rollout_ref.rollout.log_prob_micro_batch_size, "", "deprecated global micro-batch of old log-prob passes") \
  X(actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu, "", "rows per device in old log-prob passes")      \
  X(actor_rollout_ref.rollout.log_prob_use_dynamic_bsz, "", "token-packed log-prob passes; null: actor.use_dynamic_bsz") \
  X(actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu, "", "token cap of a dynamic log-prob micro-batch")    \
  X(actor_rollout_ref.rollout.val_kwargs.temperature, "", "validation sampling temperature")                        \
  X(actor_rollout_ref.rollout.val_kwargs.top_k, "", "validation top-k")                                             \
  X(actor_rollout_ref.rollout.val_kwargs.top_p, "", "validation top-p")                                             \
  X(actor_rollout_ref.rollout.val_kwargs.n, "", "validation responses per prompt")                                  \
  X(actor_rollout_ref.rollout.val_kwargs.do_sample, "", "sample during validation (needs temperature > 0)")         \
  X(actor_rollout_ref.rollout.agent.num_workers, "", "agent-loop workers that drive generation")                    \
  X(actor_rollout_ref.rollout.checkpoint_engine.backend, "naive|nccl|nixl|mooncake|kimi_ckpt_engine|delta_sharded", \
    "weight-sync transport; naive = in place (colocated only)")                                                   \
  X(actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes, "", "bucket size of weight sync")   \
  X(actor_rollout_ref.ref.log_prob_micro_batch_size, "", "deprecated global micro-batch of reference passes")        \
  X(actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu, "", "rows per device in reference log-prob passes")    \
  X(actor_rollout_ref.ref.log_prob_use_dynamic_bsz, "", "token-packed reference passes; null: actor.use_dynamic_bsz") \
  X(actor_rollout_ref.ref.log_prob_max_token_len_per_gpu, "", "token cap of a dynamic reference micro-batch")       \
  X(critic.enable, "", "train a value model; null: on iff algorithm.adv_estimator = gae")                          \
  X(critic.strategy, "fsdp|fsdp2|megatron", "critic training backend name")                                        \
  X(critic.ppo_mini_batch_size, "", "prompts per critic optimizer step; null: actor's")                            \
  X(critic.ppo_micro_batch_size, "", "deprecated global critic micro-batch")                                        \
  X(critic.ppo_micro_batch_size_per_gpu, "", "rows per critic forward/backward on one device")                     \
  X(critic.use_dynamic_bsz, "", "token-packed critic micro-batches")                                                \
  X(critic.ppo_max_token_len_per_gpu, "", "token cap of a dynamic critic micro-batch")                              \
  X(critic.ppo_epochs, "", "critic passes per batch; null: actor's")                                                \
  X(critic.shuffle, "", "shuffle critic rows between epochs; null: actor's")                                        \
  X(critic.model.path, "", "Hugging Face GPT-2 folder for the critic's trunk; empty: actor_rollout_ref.model.path") \
  X(critic.cliprange_value, "", "value clip ε_v of the clipped value loss")                                         \
  X(critic.loss_agg_mode,                                                                                          \
    "null|token-mean|token-sum|seq-mean-token-sum|seq-mean-token-mean|seq-mean-token-sum-norm",                    \
    "value-loss aggregation; null: actor's")                                                                       \
  X(critic.grad_clip, "", "global gradient-norm clip of the critic")                                               \
  X(critic.ulysses_sequence_parallel_size, "", "critic sequence-parallel degree")                                   \
  X(critic.optim.lr, "", "critic AdamW learning rate")                                                              \
  X(critic.optim.weight_decay, "", "critic AdamW weight decay")                                                     \
  X(critic.optim.betas, "", "critic AdamW (β1, β2)")                                                                \
  X(critic.optim.lr_warmup_steps, "", "critic warm-up steps; -1: ratio × total")                                    \
  X(critic.optim.lr_warmup_steps_ratio, "", "critic warm-up fraction")                                              \
  X(critic.optim.min_lr_ratio, "", "critic cosine floor")                                                           \
  X(critic.optim.lr_scheduler_type, "constant|cosine", "critic learning-rate schedule")                            \
  X(reward.reward_model.enable, "", "score with a reward model worker")                                             \
  X(reward.reward_model.enable_resource_pool, "", "give the reward model its own device pool")                     \
  X(reward.reward_model.n_gpus_per_node, "", "devices per node of the reward pool")                                \
  X(reward.reward_model.nnodes, "", "nodes of the reward pool")                                                    \
  X(custom_reward_function.path, "", "shared library (.so) with the scorer replacing the data_source scorers; empty: none") \
  X(custom_reward_function.name, "", "the scorer's C symbol in custom_reward_function.path")                        \
  X(algorithm.gamma, "", "discount γ (GAE, REINFORCE++)")                                                           \
  X(algorithm.lam, "", "GAE λ")                                                                                     \
  X(algorithm.adv_estimator,                                                                                       \
    "gae|grpo|reinforce_plus_plus|reinforce_plus_plus_baseline|remax|rloo|opo|grpo_passk|gpg|rloo_vectorized|"     \
    "grpo_vectorized|optimal_token_baseline|tir_optimal_token_baseline|gdpo",                                      \
    "advantage estimator")                                                                                         \
  X(algorithm.norm_adv_by_std_in_grpo, "", "GRPO divides by the group std (false: Dr.GRPO)")                        \
  X(algorithm.use_kl_in_reward, "", "subtract β × KL from the token rewards")                                       \
  X(algorithm.kl_penalty, "kl|k1|abs|mse|k2|low_var_kl|k3|kl+|k1+|abs+|mse+|k2+|low_var_kl+|k3+",                    \
    "KL estimator of the in-reward penalty")                                                                       \
  X(algorithm.kl_ctrl.type, "fixed|adaptive", "in-reward KL controller")                                            \
  X(algorithm.kl_ctrl.kl_coef, "", "initial β of the in-reward KL")                                                 \
  X(algorithm.kl_ctrl.horizon, "", "adaptive controller horizon (> 0)")                                             \
  X(algorithm.kl_ctrl.target_kl, "", "adaptive controller target KL (> 0)")                                         \
  X(algorithm.use_pf_ppo, "", "PF-PPO: resample the batch by score weights after GAE")                              \
  X(algorithm.pf_ppo.reweight_method, "pow|max_min|max_random", "PF-PPO sample weights")                            \
  X(algorithm.pf_ppo.weight_pow, "", "PF-PPO exponent p of the pow weights abs(score)^p")                                \
  X(algorithm.gdpo_reward_keys, "", "GDPO: per-sample reward components (non-tensor keys), each GRPO-normalised")   \
  X(algorithm.gdpo_reward_weights, "", "GDPO: one weight per reward key; null: all 1")                              \
  X(algorithm.rollout_correction.rollout_is, "null|token|sequence", "rollout IS weights π_train/π_rollout; null: off") \
  X(algorithm.rollout_correction.rollout_is_threshold, "", "IS truncation: upper (TIS) or lower_upper (IcePop)")    \
  X(algorithm.rollout_correction.rollout_is_batch_normalize, "", "normalise the IS weights to mean 1")              \
  X(algorithm.rollout_correction.rollout_rs, "", "rejection sampling, e.g. token_k1,seq_mean_k3; null: off")        \
  X(algorithm.rollout_correction.rollout_rs_threshold, "", "rejection thresholds: one, or one per option")          \
  X(algorithm.rollout_correction.bypass_mode, "", "old_log_probs := rollout_log_probs; loss bypass_mode")           \
  X(algorithm.rollout_correction.loss_type, "ppo_clip|reinforce", "bypass-mode loss")                               \
  X(trainer.project_name, "", "project name (logs, checkpoint path)")                                               \
  X(trainer.experiment_name, "", "experiment name (logs, checkpoint path)")                                         \
  X(trainer.logger, "console|jsonl", "metric sinks, e.g. [console,jsonl]")                                          \
  X(trainer.nnodes, "", "nodes of the trainer pool")                                                                \
  X(trainer.n_gpus_per_node, "", "devices per node of the trainer pool")                                            \
  X(trainer.total_epochs, "", "passes over the training prompts")                                                   \
  X(trainer.total_training_steps, "", "stop after this many steps; null: epochs × steps per epoch")                 \
  X(trainer.save_freq, "", "checkpoint every this many steps; -1: never")                                           \
  X(trainer.test_freq, "", "validate every this many steps; -1: never")                                             \
  X(trainer.critic_warmup, "", "steps that update only the critic before the actor starts")                         \
  X(trainer.default_local_dir, "", "checkpoint directory (${key} is replaced by the key's value)")                  \
  X(trainer.resume_mode, "auto|disable|resume_path", "resume from the latest checkpoint, never, or a given path")   \
  X(trainer.resume_from_path, "", "checkpoint to resume from when resume_mode = resume_path")                      \
  X(trainer.balance_batch, "", "balance sequence lengths across DP ranks")                                          \
  X(trainer.val_before_train, "", "validate before the first step")                                                 \
  X(trainer.log_val_generations, "", "validation generations logged per validation")                               \
  X(trainer.log_freq, "", "rlflow: print a progress line every this many steps (the first and last always)")     \
  X(trainer.log_train_generations, "", "rlflow: (prompt, response, score) samples printed with each progress line")  \
  X(trainer.max_actor_ckpt_to_keep, "", "actor checkpoints kept; null: all")                                        \
  X(trainer.max_critic_ckpt_to_keep, "", "critic checkpoints kept; null: all")                                      \
  X(trainer.device, "cuda|cpu", "device kind of the workers")                                                       \
  X(trainer.use_v1, "", "use the v1 trainer modes")                                                                 \
  X(trainer.v1.trainer_mode, "sync|colocate_async|separate_async", "placement and overlap of rollout and training")  \
  X(trainer.v1.colocate_async.num_warmup_batches, "", "batches submitted ahead in colocate_async")                 \
  X(trainer.v1.separate_async.num_warmup_batches, "", "batches submitted ahead in separate_async")                 \
  X(trainer.v1.separate_async.parameter_sync_step, "", "local updates per weight sync in separate_async")           \
  X(trainer.v1.sampler.max_off_policy_threshold, "", "oldest weight version a sampled group may come from (> 0)")    \
  X(trainer.v1.sampler.strategy, "drop|wait", "what to do with groups older than the threshold")                   \
  X(async_training.partial_rollout, "", "async modes: a weight sync aborts the batch in flight, resumed with the new weights") \
  X(seed, "", "rlflow: master seed (model init, sampling, shuffling)")                                              \
  X(max_colocate_count, "", "role workers per device in a pool; each takes 1/max_colocate_count of it")

namespace detail {

//! What a key holds; drives parsing, printing and the docs.
enum class key_kind { integer, number, boolean, string, list, number_pair, null_integer, null_number, null_boolean };

template <class T>
constexpr key_kind kind_of() {
  if constexpr (std::is_same_v<T, std::int64_t>) return key_kind::integer;
  else if constexpr (std::is_same_v<T, double>) return key_kind::number;
  else if constexpr (std::is_same_v<T, bool>) return key_kind::boolean;
  else if constexpr (std::is_same_v<T, config_string>) return key_kind::string;
  else if constexpr (std::is_same_v<T, string_list>) return key_kind::list;
  else if constexpr (std::is_same_v<T, std::array<double, 2>>) return key_kind::number_pair;
  else if constexpr (std::is_same_v<T, nullable<std::int64_t>>) return key_kind::null_integer;
  else if constexpr (std::is_same_v<T, nullable<double>>) return key_kind::null_number;
  else if constexpr (std::is_same_v<T, nullable<bool>>) return key_kind::null_boolean;
  else static_assert(sizeof(T) == 0, "rlflow::TrainerConfig: unsupported key type; use int64, double, bool, config_string or nullable<...>");
}

inline constexpr std::string_view kind_name(key_kind k) {
  switch (k) {
    case key_kind::integer: return "int";
    case key_kind::number: return "float";
    case key_kind::boolean: return "bool";
    case key_kind::string: return "string";
    case key_kind::list: return "list";
    case key_kind::number_pair: return "[float, float]";
    case key_kind::null_integer: return "int or null";
    case key_kind::null_number: return "float or null";
    case key_kind::null_boolean: return "bool or null";
  }
  return "?";
}

//! One row of the key table.
struct key_info {
  std::string_view name;
  key_kind kind;
  std::string_view choices;  // "a|b|c" or ""
  std::string_view help;
  void* (*ref)(TrainerConfig&);
};

#define RLFLOW_DETAIL_KEY_ROW(path, choices, help)                                                           \
  ::rlflow::detail::key_info{#path,                                                                          \
                             ::rlflow::detail::kind_of<decltype(std::declval<::rlflow::TrainerConfig&>().path)>(), \
                             choices, help, +[](::rlflow::TrainerConfig& c) -> void* { return &c.path; }},

inline constexpr key_info config_keys[] = {RLFLOW_TRAINER_CONFIG_KEYS(RLFLOW_DETAIL_KEY_ROW)};
#undef RLFLOW_DETAIL_KEY_ROW

//! True when 'v' is one of the '|'-separated 'choices' ("null" admits an empty value).
constexpr bool one_of(std::string_view v, std::string_view choices) {
  if (choices.empty()) return true;
  while (true) {
    auto const bar = choices.find('|');
    auto const c = choices.substr(0, bar);
    if (c == v || (c == "null" && v.empty())) return true;
    if (bar == std::string_view::npos) return false;
    choices.remove_prefix(bar + 1);
  }
}
constexpr bool choice_ok(config_string const& v, std::string_view choices) { return one_of(v.view(), choices); }
constexpr bool choice_ok(string_list const& v, std::string_view choices) {
  std::string_view s = v.joined.view();
  while (!s.empty()) {
    auto const comma = s.find(',');
    if (!one_of(s.substr(0, comma), choices)) return false;
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  return true;
}
template <class T>
constexpr bool choice_ok(T const&, std::string_view) { return true; }

//! Levenshtein distance (insert, delete, substitute = 1).
inline std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t const up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0u : 1u)});
      diag = up;
    }
  }
  return row[b.size()];
}

//! The candidate closest to 'word' (a key that ends with '.word' wins outright).
inline std::string closest(std::string_view word, std::vector<std::string_view> const& candidates) {
  std::string_view best;
  std::size_t best_score = static_cast<std::size_t>(-1);
  for (auto c : candidates) {
    std::size_t score = edit_distance(word, c) * 4;
    if (c.size() > word.size() && c.substr(c.size() - word.size()) == word && c[c.size() - word.size() - 1] == '.')
      score = 0;
    else {
      // the last segments match closely: prefer it over keys that only share the prefix
      auto const last = [](std::string_view s) { auto p = s.rfind('.'); return p == s.npos ? s : s.substr(p + 1); };
      if (last(word) == last(c)) score = std::min(score, 1 + edit_distance(word, c));
    }
    if (score < best_score) {
      best_score = score;
      best = c;
    }
  }
  return std::string(best);
}

inline std::vector<std::string_view> key_names() {
  std::vector<std::string_view> out;
  for (auto const& k : config_keys) out.push_back(k.name);
  return out;
}

inline std::vector<std::string_view> split_choices(std::string_view choices) {
  std::vector<std::string_view> out;
  while (!choices.empty()) {
    auto const bar = choices.find('|');
    out.push_back(choices.substr(0, bar));
    if (bar == std::string_view::npos) break;
    choices.remove_prefix(bar + 1);
  }
  return out;
}

inline key_info const* find_key(std::string_view name) {
  for (auto const& k : config_keys)
    if (k.name == name) return &k;
  return nullptr;
}

//! The key or a config_error naming the closest known key.
inline key_info const& require_key(std::string_view name, std::string_view where = "") {
  if (auto const* k = find_key(name)) return *k;
  if (name.size() > 200)  // no key is that long; the edit distance would cost O(length) per key
    throw config_error(msg(where.empty() ? "" : std::string(where) + ": ", "unknown config key '",
                           std::string(name.substr(0, 80)), "...' (", name.size(),
                           " characters; no key is longer than 200); run with --help to list every key"));
  std::string const hint = closest(name, key_names());
  throw config_error(msg(where.empty() ? "" : std::string(where) + ": ", "unknown config key '", std::string(name),
                         "'; did you mean '", hint, "'? (run with --help to list every key)"));
}

//! Formats a double the way the docs and messages show it (shortest round-trip form).
inline std::string format_number(double v) {
  std::ostringstream os;
  os.precision(15);
  os << v;
  return os.str();
}

inline std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& ch : out) ch = static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
  return out;
}

inline bool is_null_text(std::string_view v) {
  auto const l = lower(v);
  return l == "null" || l == "none" || l == "~";
}

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

inline std::int64_t parse_integer(key_info const& k, std::string_view v, std::string_view where) {
  v = trim(v);
  if (!v.empty() && v.front() == '+') v.remove_prefix(1);
  std::int64_t out = 0;
  auto const [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || ptr != v.data() + v.size() || v.empty())
    throw config_error(msg(where, "key '", k.name, "' expects an integer, got '", std::string(v), "'; write e.g. ",
                           k.name, "=8"));
  return out;
}

inline double parse_number(key_info const& k, std::string_view v, std::string_view where) {
  std::string s(trim(v));
  char* end = nullptr;
  double const out = s.empty() ? 0.0 : std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(out))
    throw config_error(msg(where, "key '", k.name, "' expects a finite number, got '", s, "'; write e.g. ", k.name,
                           "=0.5"));
  return out;
}

inline bool parse_boolean(key_info const& k, std::string_view v, std::string_view where) {
  auto const l = lower(trim(v));
  if (l == "true" || l == "yes" || l == "on" || l == "1") return true;
  if (l == "false" || l == "no" || l == "off" || l == "0") return false;
  throw config_error(msg(where, "key '", k.name, "' expects true or false, got '", std::string(v), "'; write ",
                         k.name, "=true or ", k.name, "=false"));
}

//! Splits "[a, 'b', c]" / "a,b" into items (quotes stripped).
inline std::vector<std::string> parse_list_text(std::string_view v) {
  v = trim(v);
  if (v.size() >= 2 && v.front() == '[' && v.back() == ']') v = v.substr(1, v.size() - 2);
  std::vector<std::string> out;
  while (true) {
    auto const comma = v.find(',');
    auto item = trim(v.substr(0, comma));
    if (item.size() >= 2 && (item.front() == '\'' || item.front() == '"') && item.back() == item.front())
      item = item.substr(1, item.size() - 2);
    if (!item.empty()) out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
  }
  return out;
}

inline void check_choice(key_info const& k, std::string_view v, std::string_view where) {
  if (one_of(v, k.choices)) return;
  std::vector<std::string_view> options;
  for (auto c : split_choices(k.choices))
    if (c != "null") options.push_back(c);
  std::string list;
  for (auto c : options) list += (list.empty() ? "" : ", ") + std::string(c);
  throw config_error(msg(where, "key '", k.name, "' = '", std::string(v), "' is not one of: ", list,
                         v.size() > 200 ? std::string() : msg("; did you mean '", closest(v, options), "'?")));
}

//! Stores a scalar (or list) value into the key's field, parsing by the key's kind.
inline void store(TrainerConfig& cfg, key_info const& k, std::string_view text, bool quoted, bool is_null,
                  std::vector<std::string> const* list_items, std::string_view where) {
  void* p = k.ref(cfg);
  bool const null_value = is_null || (!quoted && is_null_text(text));
  auto const need_not_null = [&] {
    if (null_value)
      throw config_error(msg(where, "key '", k.name, "' cannot be null (it is a ", kind_name(k.kind),
                             "); give a value, e.g. the default"));
  };
  if (list_items != nullptr && k.kind != key_kind::list && k.kind != key_kind::number_pair)
    throw config_error(msg(where, "key '", k.name, "' expects a ", kind_name(k.kind), ", got a list"));
  switch (k.kind) {
    case key_kind::integer:
      need_not_null();
      *static_cast<std::int64_t*>(p) = parse_integer(k, text, where);
      break;
    case key_kind::number:
      need_not_null();
      *static_cast<double*>(p) = parse_number(k, text, where);
      break;
    case key_kind::boolean:
      need_not_null();
      *static_cast<bool*>(p) = parse_boolean(k, text, where);
      break;
    case key_kind::null_integer:
      *static_cast<nullable<std::int64_t>*>(p) =
          null_value ? nullable<std::int64_t>{} : nullable<std::int64_t>{parse_integer(k, text, where)};
      break;
    case key_kind::null_number:
      *static_cast<nullable<double>*>(p) =
          null_value ? nullable<double>{} : nullable<double>{parse_number(k, text, where)};
      break;
    case key_kind::null_boolean:
      *static_cast<nullable<bool>*>(p) = null_value ? nullable<bool>{} : nullable<bool>{parse_boolean(k, text, where)};
      break;
    case key_kind::string: {
      std::string_view v = null_value ? std::string_view{} : text;
      if (!quoted && v.size() >= 2 && (v.front() == '\'' || v.front() == '"') && v.back() == v.front())
        v = v.substr(1, v.size() - 2);
      check_choice(k, v, where);
      if (v.size() > 255)
        throw config_error(msg(where, "key '", k.name, "' value has ", v.size(), " characters; at most 255 fit"));
      static_cast<config_string*>(p)->assign(v);
      break;
    }
    case key_kind::list: {
      std::vector<std::string> items = list_items ? *list_items : null_value ? std::vector<std::string>{}
                                                                             : parse_list_text(text);
      std::string joined;
      for (auto const& it : items) {
        check_choice(k, it, where);
        joined += (joined.empty() ? "" : ",") + it;
      }
      if (joined.size() > 255) throw config_error(msg(where, "key '", k.name, "' list is too long (255 characters)"));
      static_cast<string_list*>(p)->joined.assign(joined);
      break;
    }
    case key_kind::number_pair: {
      need_not_null();
      std::vector<std::string> items = list_items ? *list_items : parse_list_text(text);
      if (items.size() != 2)
        throw config_error(msg(where, "key '", k.name, "' expects two numbers, e.g. ", k.name, "=[0.9,0.999]; got ",
                               items.size(), " values"));
      auto& arr = *static_cast<std::array<double, 2>*>(p);
      arr = {parse_number(k, items[0], where), parse_number(k, items[1], where)};
      break;
    }
  }
}

//! The key's value as text: numbers in shortest form, null as "null", lists as [a, b].
inline std::string value_text(TrainerConfig const& cfg, key_info const& k) {
  void* p = k.ref(const_cast<TrainerConfig&>(cfg));
  switch (k.kind) {
    case key_kind::integer: return std::to_string(*static_cast<std::int64_t*>(p));
    case key_kind::number: return format_number(*static_cast<double*>(p));
    case key_kind::boolean: return *static_cast<bool*>(p) ? "true" : "false";
    case key_kind::null_integer: {
      auto const& v = *static_cast<nullable<std::int64_t>*>(p);
      return v.has_value ? std::to_string(v.stored) : "null";
    }
    case key_kind::null_number: {
      auto const& v = *static_cast<nullable<double>*>(p);
      return v.has_value ? format_number(v.stored) : "null";
    }
    case key_kind::null_boolean: {
      auto const& v = *static_cast<nullable<bool>*>(p);
      return v.has_value ? (v.stored ? "true" : "false") : "null";
    }
    case key_kind::string: {
      auto const& v = *static_cast<config_string*>(p);
      return v.empty() && one_of("", k.choices) && !k.choices.empty() ? "null" : v.str();
    }
    case key_kind::list: {
      std::string out = "[";
      for (auto const& it : static_cast<string_list*>(p)->items()) out += (out.size() > 1 ? ", " : "") + it;
      return out + "]";
    }
    case key_kind::number_pair: {
      auto const& a = *static_cast<std::array<double, 2>*>(p);
      std::string out = "[";  // appended piecewise: g++ 12 -O3 warns (-Wrestrict) on "[" + std::string
      out += format_number(a[0]);
      out += ", ";
      out += format_number(a[1]);
      out += "]";
      return out;
    }
  }
  return "";
}

//! The key's value as JSON.
inline nlohmann::json value_json(TrainerConfig const& cfg, key_info const& k) {
  void* p = k.ref(const_cast<TrainerConfig&>(cfg));
  switch (k.kind) {
    case key_kind::integer: return *static_cast<std::int64_t*>(p);
    case key_kind::number: return *static_cast<double*>(p);
    case key_kind::boolean: return *static_cast<bool*>(p);
    case key_kind::null_integer: {
      auto const& v = *static_cast<nullable<std::int64_t>*>(p);
      return v.has_value ? nlohmann::json(v.stored) : nlohmann::json(nullptr);
    }
    case key_kind::null_number: {
      auto const& v = *static_cast<nullable<double>*>(p);
      return v.has_value ? nlohmann::json(v.stored) : nlohmann::json(nullptr);
    }
    case key_kind::null_boolean: {
      auto const& v = *static_cast<nullable<bool>*>(p);
      return v.has_value ? nlohmann::json(v.stored) : nlohmann::json(nullptr);
    }
    case key_kind::string: {
      auto const& v = *static_cast<config_string*>(p);
      if (v.empty() && !k.choices.empty() && one_of("", k.choices)) return nullptr;
      return v.str();
    }
    case key_kind::list: return static_cast<string_list*>(p)->items();
    case key_kind::number_pair: {
      auto const& a = *static_cast<std::array<double, 2>*>(p);
      return nlohmann::json::array({a[0], a[1]});
    }
  }
  return nullptr;
}

//! Flattens a JSON object into dotted entries.
inline void flatten_json(nlohmann::json const& j, std::string const& prefix, std::vector<flat_entry>& out,
                         std::string_view source, int depth = 0) {
  if (depth > 16)  // the deepest key has 5 parts; a deeper document is not a config (and must not exhaust the stack)
    throw format_error(msg(source, ": config nesting deeper than 16 levels at '", prefix.substr(0, 200),
                           "...'; config keys have at most 5 parts"));
  if (!j.is_object())
    throw format_error(msg(source, ": expected a JSON object of config keys at '", prefix.empty() ? "<root>" : prefix,
                           "', got ", j.type_name()));
  for (auto it = j.begin(); it != j.end(); ++it) {
    std::string const key = prefix.empty() ? it.key() : prefix + "." + it.key();
    auto const& v = it.value();
    if (v.is_object()) {
      flatten_json(v, key, out, source, depth + 1);
      continue;
    }
    flat_entry e;
    e.key = key;
    if (v.is_null()) {
      e.is_null = true;
    } else if (v.is_array()) {
      e.is_list = true;
      for (auto const& item : v) {
        if (item.is_structured())
          throw format_error(msg(source, ": key '", key, "' holds a nested ", item.type_name(),
                                 " inside its list; list items must be plain values"));
        e.items.push_back(item.is_string() ? item.get<std::string>() : item.dump());
      }
    } else if (v.is_string()) {
      e.text = v.get<std::string>();
      e.quoted = true;
    } else {
      e.text = v.dump();
    }
    out.push_back(std::move(e));
  }
}

inline void apply_entries(TrainerConfig& cfg, std::vector<flat_entry> const& entries, std::string_view source) {
  for (auto const& e : entries) {
    std::string const where = e.line > 0 ? msg(source, ":", e.line, ": ") : msg(source, ": ");
    auto const& k = require_key(e.key, where.substr(0, where.size() - 2));
    store(cfg, k, e.text, e.quoted, e.is_null, e.is_list ? &e.items : nullptr, where);
  }
}

inline std::string read_text_file(std::string const& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw io_error(msg("rlflow config: '", path, "' is a directory, not a config file; pass a .yaml, .yml or .json file to --config"));
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec))
    throw io_error(msg("rlflow config: '", path, "' is not a regular file; pass a .yaml, .yml or .json file to --config"));
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw io_error(msg("rlflow config: cannot open '", path, "'; check the path given to --config"));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace detail

// ---- TrainerConfig members --------------------------------------------------------------------

inline void TrainerConfig::set(std::string_view key, std::string_view value) {
  auto const& k = detail::require_key(detail::trim(key));
  detail::store(*this, k, value, false, false, nullptr, "");
}

inline std::string TrainerConfig::get(std::string_view key) const {
  return detail::value_text(*this, detail::require_key(key));
}

inline void TrainerConfig::apply_overrides(std::vector<std::string> const& overrides) {
  for (auto const& o : overrides) {
    std::string_view s = o;
    if (s.substr(0, 2) == "++") s.remove_prefix(2);
    else if (s.substr(0, 1) == "+") s.remove_prefix(1);
    auto const eq = s.find('=');
    if (eq == std::string_view::npos || eq == 0)
      throw config_error(msg("override '", o, "' is not 'key=value'; write e.g. data.train_batch_size=1024"));
    set(s.substr(0, eq), s.substr(eq + 1));
  }
}

inline void TrainerConfig::apply_json(nlohmann::json const& j, std::string_view source) {
  std::vector<detail::flat_entry> entries;
  detail::flatten_json(j, "", entries, source);
  detail::apply_entries(*this, entries, source);
}

inline void TrainerConfig::apply_text(std::string_view text, std::string_view format, std::string_view source) {
  if (format == "json") {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (nlohmann::json::exception const& e) {  // parse_error, and out_of_range for numbers beyond a double
      throw format_error(msg(source, ": invalid JSON: ", e.what()));
    }
    apply_json(j, source);
  } else if (format == "yaml") {
    detail::apply_entries(*this, detail::parse_yaml_flat(text, source), source);
  } else {
    throw config_error(msg("rlflow config: unknown format '", std::string(format), "' for ", std::string(source),
                           "; use yaml or json (.yaml, .yml, .json)"));
  }
}

inline void TrainerConfig::apply_file(std::string const& path) {
  auto const dot = path.rfind('.');
  std::string const ext = dot == std::string::npos ? "" : detail::lower(path.substr(dot + 1));
  std::string const format = ext == "json" ? "json" : (ext == "yaml" || ext == "yml") ? "yaml" : ext;
  if (format != "json" && format != "yaml")
    throw config_error(msg("rlflow config: '", path, "' has extension '.", ext,
                           "'; config files must end in .yaml, .yml or .json"));
  apply_text(detail::read_text_file(path), format, path);
}

inline nlohmann::json TrainerConfig::to_json() const {
  nlohmann::json out = nlohmann::json::object();
  for (auto const& k : detail::config_keys) {
    nlohmann::json* node = &out;
    std::string_view name = k.name;
    while (true) {
      auto const dot = name.find('.');
      if (dot == std::string_view::npos) break;
      node = &(*node)[std::string(name.substr(0, dot))];
      name.remove_prefix(dot + 1);
    }
    (*node)[std::string(name)] = detail::value_json(*this, k);
  }
  return out;
}

inline TrainerConfig TrainerConfig::from_file(std::string const& path) {
  TrainerConfig cfg;
  cfg.apply_file(path);
  return cfg;
}

//! What a command line asked for: the config plus the flags rlflow programs understand.
struct CommandLine {
  TrainerConfig config{};
  bool help = false;                      //!< --help / -h: print config_help() and stop
  bool json = false;                      //!< --json: machine-readable output (planner)
  std::vector<std::string> config_files;  //!< --config FILE, in order
  std::vector<std::string> overrides;     //!< key=value, in order
};

//! Parses '--config FILE' / '--config=FILE' (applied first, in order), 'key=value' overrides
//! (then, in order), '--help', '--json'. Anything else throws config_error with the fix.
//! 'defaults' is the configuration the files and overrides are applied to.
inline CommandLine parse_command_line(int argc, char const* const* argv, TrainerConfig const& defaults = TrainerConfig{}) {
  CommandLine cl;
  cl.config = defaults;
  for (int i = 1; i < argc; ++i) {
    std::string_view const a = argv[i];
    if (a == "--help" || a == "-h") {
      cl.help = true;
    } else if (a == "--json") {
      cl.json = true;
    } else if (a == "--config" || a == "-c") {
      if (i + 1 >= argc) throw config_error(msg("'", a, "' needs a file: --config path/to/config.yaml"));
      cl.config_files.emplace_back(argv[++i]);
    } else if (a.substr(0, 9) == "--config=") {
      cl.config_files.emplace_back(a.substr(9));
    } else if (a.find('=') != std::string_view::npos && a.substr(0, 2) != "--") {
      cl.overrides.emplace_back(a);
    } else {
      throw config_error(msg("unknown argument '", a,
                             "'; pass key=value overrides (e.g. data.train_batch_size=512), --config FILE, --json or "
                             "--help"));
    }
  }
  for (auto const& f : cl.config_files) cl.config.apply_file(f);
  cl.config.apply_overrides(cl.overrides);
  return cl;
}

inline std::string config_help(TrainerConfig const& defaults);

inline TrainerConfig TrainerConfig::from_args(int argc, char const* const* argv, TrainerConfig const& defaults) {
  CommandLine cl = parse_command_line(argc, argv, defaults);
  if (cl.help)
    throw help_requested(msg("usage: ", argc > 0 && argv[0] ? argv[0] : "trainer", " [--config FILE] [key=value ...]\n\n",
                             config_help(defaults)));
  return std::move(cl.config);
}

inline TrainerConfig TrainerConfig::from_args(int argc, char const* const* argv) {
  return from_args(argc, argv, TrainerConfig{});
}

//! Replaces '${dotted.key}' in 'text' by that key's value (verl's interpolation, e.g. in
//! trainer.default_local_dir). An unknown key throws config_error naming the closest key.
inline std::string interpolate(TrainerConfig const& cfg, std::string_view text) {
  std::string out;
  while (true) {
    auto const start = text.find("${");
    if (start == std::string_view::npos) break;
    auto const end = text.find('}', start);
    if (end == std::string_view::npos)
      throw config_error(msg("unterminated '${' in '", std::string(text), "'; close it with '}'"));
    out += text.substr(0, start);
    out += cfg.get(text.substr(start + 2, end - start - 2));
    text.remove_prefix(end + 1);
  }
  return out + std::string(text);
}

//! The key reference as Markdown table rows: | `key` | `default` | type | choices | help |
//! (docs/configuration.md embeds it; a test keeps the two in sync).
inline std::string config_reference_markdown() {
  TrainerConfig const defaults{};
  std::ostringstream os;
  os << "| key | default | type | choices | meaning |\n| --- | --- | --- | --- | --- |\n";
  for (auto const& k : detail::config_keys) {
    std::string choices(k.choices);
    for (auto& ch : choices)
      if (ch == '|') ch = ',';
    auto const v = detail::value_text(defaults, k);
    os << "| `" << k.name << "` | " << (v.empty() ? std::string("(empty)") : "`" + v + "`") << " | " << detail::kind_name(k.kind) << " | "
       << (choices.empty() ? "" : "`" + choices + "`") << " | " << k.help << " |\n";
  }
  return os.str();
}

namespace detail {
//! Keys the colocated Trainer accepts (for verl compatibility) but does not act on, with what
//! rlflow does instead. --help marks them; Trainer rejects a non-default value of most (or
//! warns where ignoring it is harmless). Remove a row when the key becomes real.
struct unhonoured_key {
  std::string_view key;
  std::string_view instead;
};
inline constexpr unhonoured_key trainer_unhonoured_keys[] = {
    {"actor_rollout_ref.model.vocab_size", "the built-in GPT's vocabulary is the tokenizer's"},
    {"trainer.device", "the Trainer's Backend option decides the device"},
};
inline std::string_view unhonoured_note(std::string_view key) {
  for (auto const& u : trainer_unhonoured_keys)
    if (u.key == key) return u.instead;
  return {};
}
}  // namespace detail

//! Every key with its type, default (taken from 'defaults'), choices and help: the text of --help.
inline std::string config_help(TrainerConfig const& defaults) {
  std::ostringstream os;
  os << "rlflow configuration keys (override with key=value; load files with --config FILE.{yaml,json}).\n"
        "Keys marked [not honoured] are accepted for verl compatibility but the Trainer does not act on them:\n"
        "it rejects a non-default value (or warns where ignoring it is harmless). Every other key is honoured.\n";
  for (auto const& k : detail::config_keys) {
    os << "  " << k.name << " = " << detail::value_text(defaults, k) << "  (" << detail::kind_name(k.kind);
    if (!k.choices.empty()) os << ": " << k.choices;
    os << ")\n      " << k.help << "\n";
    if (auto const note = detail::unhonoured_note(k.name); !note.empty()) os << "      [not honoured] " << note << "\n";
  }
  return os.str();
}

//! config_help of verl's defaults.
inline std::string config_help() { return config_help(TrainerConfig{}); }

// ---- start-up validation (verl_algorithms.md §11) ---------------------------------------------

//! One constexpr predicate per start-up check; true = satisfied. Shared by validate() (run time,
//! messages with the numbers) and checked_config<cfg> (compile time, static_assert per check).
namespace config_checks {
using cfg_t = TrainerConfig;

constexpr bool trainer_world_positive(cfg_t const& c) { return c.trainer.nnodes >= 1 && c.trainer.n_gpus_per_node >= 1; }
constexpr bool batch_sizes_positive(cfg_t const& c) {
  auto const& a = c.actor_rollout_ref.actor;
  return c.data.train_batch_size >= 1 && a.ppo_mini_batch_size >= 1 && c.actor_rollout_ref.rollout.n >= 1 &&
         a.ppo_epochs >= 1;
}
constexpr bool lengths_positive(cfg_t const& c) { return c.data.max_prompt_length >= 1 && c.data.max_response_length >= 1; }
constexpr bool sequence_parallel_divides_world(cfg_t const& c) {
  auto const sa = c.actor_rollout_ref.actor.ulysses_sequence_parallel_size, sc = c.critic.ulysses_sequence_parallel_size;
  if (sa < 1 || sc < 1) return false;
  return c.world_size() < 1 || (c.world_size() % sa == 0 && (!c.uses_critic() || c.world_size() % sc == 0));
}
// verl/workers/megatron_workers.py (mpu.initialize_model_parallel): TP groups tile the devices;
// rlflow splits attention by heads, so TP also divides the model's n_head.
constexpr bool actor_tensor_parallel_divides(cfg_t const& c) {
  auto const tp = c.actor_rollout_ref.actor.megatron.tensor_model_parallel_size;
  if (tp < 1) return false;
  return (c.world_size() < 1 || c.world_size() % tp == 0) &&
         (c.actor_rollout_ref.model.n_head < 1 || c.actor_rollout_ref.model.n_head % tp == 0);
}
// verl/utils/config.py:86-113 (FSDP: divisible by the device count)
constexpr bool real_batch_divisible_by_world(cfg_t const& c) {
  auto const w = c.world_size();
  return w < 1 || (c.data.train_batch_size * c.actor_rollout_ref.rollout.n) % w == 0;
}
// verl/workers/config/actor.py:197-244
constexpr bool actor_micro_exclusive(cfg_t const& c) {
  auto const& a = c.actor_rollout_ref.actor;
  return !(a.ppo_micro_batch_size.has_value && a.ppo_micro_batch_size_per_gpu.has_value);
}
constexpr bool actor_micro_required(cfg_t const& c) {
  auto const& a = c.actor_rollout_ref.actor;
  return a.use_dynamic_bsz || a.ppo_micro_batch_size.has_value || a.ppo_micro_batch_size_per_gpu.has_value;
}
constexpr bool actor_micro_positive(cfg_t const& c) {
  auto const& a = c.actor_rollout_ref.actor;
  return a.ppo_micro_batch_size.value_or(1) >= 1 && a.ppo_micro_batch_size_per_gpu.value_or(1) >= 1 &&
         (!a.use_dynamic_bsz || a.ppo_max_token_len_per_gpu >= 1);
}
constexpr bool actor_mini_le_train(cfg_t const& c) {
  return c.data.train_batch_size >= c.actor_rollout_ref.actor.ppo_mini_batch_size;
}
// verl/utils/tensordict_utils.py:588 (per-rank data divisible by the per-GPU mini-batch)
constexpr bool actor_train_divisible_by_mini(cfg_t const& c) {
  auto const m = c.actor_rollout_ref.actor.ppo_mini_batch_size;
  return m < 1 || c.data.train_batch_size < m || c.data.train_batch_size % m == 0;  // B < M: actor_mini_le_train
}
// verl/workers/engine_workers.py:266-269
constexpr bool actor_mini_divisible_by_dp(cfg_t const& c) {
  auto const dp = c.actor_dp_size();
  return dp < 1 || (c.actor_rollout_ref.actor.ppo_mini_batch_size * c.actor_rollout_ref.rollout.n) % dp == 0;
}
// verl/workers/engine/utils.py:125-127
constexpr bool actor_mini_divisible_by_micro(cfg_t const& c) {
  auto const& a = c.actor_rollout_ref.actor;
  auto const dp = c.actor_dp_size();
  if (a.use_dynamic_bsz || !a.ppo_micro_batch_size_per_gpu.has_value || dp < 1) return true;
  auto const micro = a.ppo_micro_batch_size_per_gpu.stored;
  auto const per_gpu = a.ppo_mini_batch_size * c.actor_rollout_ref.rollout.n / dp;
  return micro < 1 || per_gpu % micro == 0;
}
// verl/workers/config/actor.py:224-244 (deprecated global micro-batch)
constexpr bool actor_deprecated_micro(cfg_t const& c) {
  auto const& a = c.actor_rollout_ref.actor;
  if (!a.ppo_micro_batch_size.has_value || a.use_dynamic_bsz) return true;
  auto const micro = a.ppo_micro_batch_size.stored;
  return micro >= 1 && a.ppo_mini_batch_size % micro == 0 &&
         micro * a.ulysses_sequence_parallel_size >= c.world_size();
}
// verl core_algos.py:1323-1334
constexpr bool clip_ratio_c_above_one(cfg_t const& c) { return c.actor_rollout_ref.actor.clip_ratio_c > 1.0; }
constexpr bool clip_ratios_in_range(cfg_t const& c) {
  return c.actor_rollout_ref.actor.clip_ratio >= 0.0 && c.clip_ratio_low() >= 0.0 && c.clip_ratio_low() < 1.0 &&
         c.clip_ratio_high() >= 0.0;
}
// verl core_algos.py:1794,1886,2028
constexpr bool policy_loss_parameters(cfg_t const& c) {
  auto const& p = c.actor_rollout_ref.actor.policy_loss;
  if (p.loss_mode == "clip_cov") return p.clip_cov_ratio > 0.0;
  if (p.loss_mode == "kl_cov") return p.kl_cov_ratio > 0.0;
  if (p.loss_mode == "dro") return p.dro_beta.has_value && p.dro_beta.stored > 0.0;
  return true;
}
// verl core_algos.py:209
constexpr bool kl_ctrl_adaptive_parameters(cfg_t const& c) {
  auto const& k = c.algorithm.kl_ctrl;
  return !(k.type == "adaptive") || (k.horizon > 0 && k.target_kl > 0.0);
}
// verl/trainer/ppo/utils.py:96-107: a critic is needed by gae
constexpr bool critic_for_gae(cfg_t const& c) { return !(c.algorithm.adv_estimator == "gae") || c.uses_critic(); }
// verl/workers/config/critic.py:103-129
constexpr bool critic_micro_exclusive(cfg_t const& c) {
  return !c.uses_critic() || !(c.critic.ppo_micro_batch_size.has_value && c.critic.ppo_micro_batch_size_per_gpu.has_value);
}
constexpr bool critic_micro_required(cfg_t const& c) {
  return !c.uses_critic() || c.critic.use_dynamic_bsz || c.critic.ppo_micro_batch_size.has_value ||
         c.critic.ppo_micro_batch_size_per_gpu.has_value;
}
constexpr bool critic_sizes_positive(cfg_t const& c) {
  return !c.uses_critic() || (c.critic_ppo_mini_batch_size() >= 1 && c.critic_ppo_epochs() >= 1 &&
                              c.critic.ppo_micro_batch_size_per_gpu.value_or(1) >= 1 &&
                              c.critic.ppo_micro_batch_size.value_or(1) >= 1);
}
constexpr bool critic_mini_le_train(cfg_t const& c) {
  return !c.uses_critic() || c.data.train_batch_size >= c.critic_ppo_mini_batch_size();
}
constexpr bool critic_train_divisible_by_mini(cfg_t const& c) {
  auto const m = c.critic_ppo_mini_batch_size();
  return !c.uses_critic() || m < 1 || c.data.train_batch_size < m || c.data.train_batch_size % m == 0;
}
constexpr bool critic_mini_divisible_by_dp(cfg_t const& c) {
  auto const dp = c.critic_dp_size();
  return !c.uses_critic() || dp < 1 || (c.critic_ppo_mini_batch_size() * c.actor_rollout_ref.rollout.n) % dp == 0;
}
constexpr bool critic_mini_divisible_by_micro(cfg_t const& c) {
  auto const dp = c.critic_dp_size();
  if (!c.uses_critic() || c.critic.use_dynamic_bsz || !c.critic.ppo_micro_batch_size_per_gpu.has_value || dp < 1)
    return true;
  auto const micro = c.critic.ppo_micro_batch_size_per_gpu.stored;
  return micro < 1 || (c.critic_ppo_mini_batch_size() * c.actor_rollout_ref.rollout.n / dp) % micro == 0;
}
// verl/utils/config.py:115-167
constexpr bool ref_log_prob_micro(cfg_t const& c) {
  auto const& r = c.actor_rollout_ref.ref;
  if (!c.uses_reference() || c.ref_log_prob_use_dynamic_bsz()) return true;
  return r.log_prob_micro_batch_size.has_value != r.log_prob_micro_batch_size_per_gpu.has_value &&
         r.log_prob_micro_batch_size.value_or(1) >= 1 && r.log_prob_micro_batch_size_per_gpu.value_or(1) >= 1;
}
constexpr bool rollout_log_prob_micro(cfg_t const& c) {
  auto const& r = c.actor_rollout_ref.rollout;
  if (c.rollout_log_prob_use_dynamic_bsz()) return true;
  return r.log_prob_micro_batch_size.has_value != r.log_prob_micro_batch_size_per_gpu.has_value &&
         r.log_prob_micro_batch_size.value_or(1) >= 1 && r.log_prob_micro_batch_size_per_gpu.value_or(1) >= 1;
}
// verl/workers/engine_workers.py:615-636
constexpr bool dynamic_bsz_consistent(cfg_t const& c) {
  return c.actor_rollout_ref.actor.use_dynamic_bsz == c.rollout_log_prob_use_dynamic_bsz();
}
// verl/utils/config.py:184-200
constexpr bool val_sampling_temperature(cfg_t const& c) {
  auto const& v = c.actor_rollout_ref.rollout.val_kwargs;
  return !v.do_sample || v.temperature > 0.0;
}
// rlflow sampler domain (temperature, top-k, top-p, n)
constexpr bool sampling_ranges(cfg_t const& c) {
  auto const& r = c.actor_rollout_ref.rollout;
  return r.temperature >= 0.0 && r.top_p > 0.0 && r.top_p <= 1.0 && r.top_k >= -1 && r.val_kwargs.temperature >= 0.0 &&
         r.val_kwargs.top_p > 0.0 && r.val_kwargs.top_p <= 1.0 && r.val_kwargs.top_k >= -1 && r.val_kwargs.n >= 1;
}
// verl/trainer/ppo/ray_trainer.py:267-270
constexpr bool otb_sum_pi_squared(cfg_t const& c) {
  return !(c.algorithm.adv_estimator == "optimal_token_baseline" ||
           c.algorithm.adv_estimator == "tir_optimal_token_baseline") ||
         c.actor_rollout_ref.actor.calculate_sum_pi_squared;
}
// verl core_algos.py:516-519
constexpr bool passk_group_size(cfg_t const& c) {
  return !(c.algorithm.adv_estimator == "grpo_passk") || c.actor_rollout_ref.rollout.n >= 2;
}
// verl v1 trainer_base.py:1380-1384
constexpr bool gen_batch_divides_train(cfg_t const& c) {
  auto const& g = c.data.gen_batch_size;
  return !g.has_value || (g.stored >= 1 && c.data.train_batch_size % g.stored == 0);
}
// verl v1 trainer_separate_async.py:51-58 (and trainer_base.py:511-514)
constexpr bool separate_async_sync_step(cfg_t const& c) {
  return !c.is_separate_async() || (c.trainer.v1.separate_async.parameter_sync_step >= 1 &&
                                    c.data.train_batch_size == c.trainer.v1.separate_async.parameter_sync_step *
                                                                   c.actor_rollout_ref.actor.ppo_mini_batch_size);
}
// trainer_separate_async.py:59-62, llm_server.py:500
constexpr bool separate_async_rollout_pool(cfg_t const& c) {
  return !c.is_separate_async() || (c.actor_rollout_ref.rollout.nnodes > 0 && c.rollout_n_gpus_per_node() > 0);
}
// trainer_separate_async.py:63-65
constexpr bool separate_async_transport(cfg_t const& c) {
  return !c.is_separate_async() || !(c.actor_rollout_ref.rollout.checkpoint_engine.backend == "naive");
}
// trainer_separate_async.py:66-71
constexpr bool separate_async_reward_pool(cfg_t const& c) {
  return !c.is_separate_async() || !c.reward.reward_model.enable || c.reward.reward_model.enable_resource_pool;
}
// llm_server.py:518-564: at least one replica fits on the rollout devices
constexpr bool rollout_replica_fits(cfg_t const& c) {
  auto const& r = c.actor_rollout_ref.rollout;
  return r.tensor_model_parallel_size >= 1 && r.data_parallel_size >= 1 && r.pipeline_model_parallel_size >= 1 &&
         (c.rollout_devices() < 1 || c.rollout_devices() >= c.rollout_replica_world_size());
}
// verl/workers/rollout/replica.py:107-117
constexpr bool rollout_replica_node_shape(cfg_t const& c) {
  auto const w = c.rollout_replica_world_size();
  auto const gpn = c.is_separate_async() ? c.rollout_n_gpus_per_node() : c.trainer.n_gpus_per_node;
  return w < 1 || gpn < 1 || w <= gpn || w % gpn == 0;
}
// v1 trainer_base.py:763-776
constexpr bool reward_pool_shape(cfg_t const& c) {
  auto const& r = c.reward.reward_model;
  return !(r.enable && r.enable_resource_pool) || (r.n_gpus_per_node > 0 && r.nnodes > 0);
}
constexpr bool max_colocate_count_positive(cfg_t const& c) { return c.max_colocate_count >= 1; }
// v1 replay_buffer.py:159-186
constexpr bool sampler_threshold_positive(cfg_t const& c) { return c.trainer.v1.sampler.max_off_policy_threshold > 0; }
constexpr bool resume_path_given(cfg_t const& c) {
  return !(c.trainer.resume_mode == "resume_path") || !c.trainer.resume_from_path.empty();
}
constexpr bool discount_in_range(cfg_t const& c) {
  return c.algorithm.gamma >= 0.0 && c.algorithm.gamma <= 1.0 && c.algorithm.lam >= 0.0 && c.algorithm.lam <= 1.0;
}
// verl v0 ray_trainer.py:333-339
constexpr bool hybrid_engine_on(cfg_t const& c) { return c.actor_rollout_ref.hybrid_engine; }
// rlflow: the built-in GPT's shape
constexpr bool model_shape(cfg_t const& c) {
  auto const& m = c.actor_rollout_ref.model;
  return m.n_layer >= 1 && m.n_head >= 1 && m.n_embd >= 1 && m.n_embd % m.n_head == 0 && m.vocab_size >= 0;
}
constexpr bool logging_ranges(cfg_t const& c) { return c.trainer.log_freq >= 1 && c.trainer.log_train_generations >= 0; }
constexpr bool training_length(cfg_t const& c) {
  return c.trainer.total_epochs >= 1 && c.trainer.total_training_steps.value_or(1) >= 1;
}
constexpr bool optimizer_ranges(cfg_t const& c) {
  auto const ok = [](OptimConfig const& o) {
    return o.lr >= 0.0 && o.weight_decay >= 0.0 && o.betas[0] >= 0.0 && o.betas[0] < 1.0 && o.betas[1] >= 0.0 &&
           o.betas[1] < 1.0 && o.lr_warmup_steps_ratio >= 0.0 && o.lr_warmup_steps_ratio <= 1.0 &&
           o.min_lr_ratio >= 0.0 && o.min_lr_ratio <= 1.0;
  };
  return ok(c.actor_rollout_ref.actor.optim) && ok(c.critic.optim) && c.actor_rollout_ref.actor.grad_clip > 0.0 &&
         c.critic.grad_clip > 0.0;
}

}  // namespace config_checks

// X(check, compile-time message). The run-time messages (with the numbers) are in detail::explain.
#define RLFLOW_CONFIG_CHECKS(X)                                                                                   \
  X(trainer_world_positive, "trainer.nnodes and trainer.n_gpus_per_node must be at least 1; set e.g. trainer.nnodes=1 trainer.n_gpus_per_node=8") \
  X(batch_sizes_positive, "data.train_batch_size, actor_rollout_ref.actor.ppo_mini_batch_size, actor_rollout_ref.rollout.n and actor_rollout_ref.actor.ppo_epochs must be at least 1; set positive values") \
  X(lengths_positive, "data.max_prompt_length and data.max_response_length must be at least 1; set positive lengths") \
  X(sequence_parallel_divides_world, "the device count trainer.nnodes * trainer.n_gpus_per_node must be divisible by ulysses_sequence_parallel_size; change one of them") \
  X(actor_tensor_parallel_divides, "actor_rollout_ref.actor.megatron.tensor_model_parallel_size must be at least 1 and divide both the device count and actor_rollout_ref.model.n_head; pick a common divisor") \
  X(real_batch_divisible_by_world, "data.train_batch_size * actor_rollout_ref.rollout.n must be divisible by trainer.nnodes * trainer.n_gpus_per_node; change data.train_batch_size or the device count") \
  X(actor_micro_exclusive, "actor_rollout_ref.actor.ppo_micro_batch_size and ppo_micro_batch_size_per_gpu are both set; set only ppo_micro_batch_size_per_gpu") \
  X(actor_micro_required, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu is not set and use_dynamic_bsz is false; set ppo_micro_batch_size_per_gpu") \
  X(actor_micro_positive, "actor_rollout_ref.actor micro-batch sizes and ppo_max_token_len_per_gpu must be at least 1; set positive values") \
  X(actor_mini_le_train, "data.train_batch_size must be at least actor_rollout_ref.actor.ppo_mini_batch_size; lower ppo_mini_batch_size") \
  X(actor_train_divisible_by_mini, "data.train_batch_size must be divisible by actor_rollout_ref.actor.ppo_mini_batch_size; pick a mini-batch that divides the batch") \
  X(actor_mini_divisible_by_dp, "actor_rollout_ref.actor.ppo_mini_batch_size * actor_rollout_ref.rollout.n must be divisible by the data-parallel size; change ppo_mini_batch_size or the device count") \
  X(actor_mini_divisible_by_micro, "the per-device mini-batch (ppo_mini_batch_size * rollout.n / DP) must be divisible by actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu; pick a micro-batch that divides it") \
  X(actor_deprecated_micro, "actor_rollout_ref.actor.ppo_micro_batch_size must divide ppo_mini_batch_size and times ulysses_sequence_parallel_size be at least the device count; use ppo_micro_batch_size_per_gpu instead") \
  X(clip_ratio_c_above_one, "actor_rollout_ref.actor.clip_ratio_c must be greater than 1 (dual clip); set e.g. 3.0") \
  X(clip_ratios_in_range, "actor_rollout_ref.actor.clip_ratio, clip_ratio_low and clip_ratio_high must be at least 0 and clip_ratio_low below 1; set e.g. 0.2") \
  X(policy_loss_parameters, "actor_rollout_ref.actor.policy_loss: clip_cov needs clip_cov_ratio > 0, kl_cov needs kl_cov_ratio > 0, dro needs dro_beta > 0; set the parameter of the chosen loss_mode") \
  X(kl_ctrl_adaptive_parameters, "algorithm.kl_ctrl.type=adaptive needs algorithm.kl_ctrl.horizon > 0 and target_kl > 0; set e.g. horizon=10000 target_kl=0.1") \
  X(critic_for_gae, "algorithm.adv_estimator=gae needs a critic but critic.enable=false; set critic.enable=true or choose an estimator without a critic (grpo, rloo, ...)") \
  X(critic_micro_exclusive, "critic.ppo_micro_batch_size and critic.ppo_micro_batch_size_per_gpu are both set; set only critic.ppo_micro_batch_size_per_gpu") \
  X(critic_micro_required, "critic.ppo_micro_batch_size_per_gpu is not set and critic.use_dynamic_bsz is false; set critic.ppo_micro_batch_size_per_gpu") \
  X(critic_sizes_positive, "critic mini-batch, micro-batch and ppo_epochs must be at least 1; set positive values") \
  X(critic_mini_le_train, "data.train_batch_size must be at least critic.ppo_mini_batch_size; lower critic.ppo_mini_batch_size") \
  X(critic_train_divisible_by_mini, "data.train_batch_size must be divisible by critic.ppo_mini_batch_size; pick a mini-batch that divides the batch") \
  X(critic_mini_divisible_by_dp, "critic.ppo_mini_batch_size * actor_rollout_ref.rollout.n must be divisible by the critic data-parallel size; change critic.ppo_mini_batch_size") \
  X(critic_mini_divisible_by_micro, "the per-device critic mini-batch must be divisible by critic.ppo_micro_batch_size_per_gpu; pick a micro-batch that divides it") \
  X(ref_log_prob_micro, "exactly one of actor_rollout_ref.ref.log_prob_micro_batch_size and log_prob_micro_batch_size_per_gpu must be set when a reference policy is used; set log_prob_micro_batch_size_per_gpu") \
  X(rollout_log_prob_micro, "exactly one of actor_rollout_ref.rollout.log_prob_micro_batch_size and log_prob_micro_batch_size_per_gpu must be set; set log_prob_micro_batch_size_per_gpu") \
  X(dynamic_bsz_consistent, "actor_rollout_ref.actor.use_dynamic_bsz must equal actor_rollout_ref.rollout.log_prob_use_dynamic_bsz; set both the same") \
  X(val_sampling_temperature, "actor_rollout_ref.rollout.val_kwargs.do_sample=true needs val_kwargs.temperature > 0; set a positive temperature or do_sample=false") \
  X(sampling_ranges, "actor_rollout_ref.rollout sampling needs temperature >= 0, 0 < top_p <= 1, top_k >= -1 and val_kwargs.n >= 1; fix the sampling keys") \
  X(otb_sum_pi_squared, "algorithm.adv_estimator=optimal_token_baseline needs actor_rollout_ref.actor.calculate_sum_pi_squared=true; set it") \
  X(passk_group_size, "algorithm.adv_estimator=grpo_passk needs actor_rollout_ref.rollout.n >= 2; sample at least two responses per prompt") \
  X(gen_batch_divides_train, "data.gen_batch_size must be at least 1 and divide data.train_batch_size; change data.gen_batch_size") \
  X(separate_async_sync_step, "trainer.v1.trainer_mode=separate_async needs data.train_batch_size == trainer.v1.separate_async.parameter_sync_step * actor_rollout_ref.actor.ppo_mini_batch_size; change one of them") \
  X(separate_async_rollout_pool, "trainer.v1.trainer_mode=separate_async needs a standalone rollout pool: actor_rollout_ref.rollout.nnodes > 0 and n_gpus_per_node > 0; set them") \
  X(separate_async_transport, "trainer.v1.trainer_mode=separate_async cannot sync weights with actor_rollout_ref.rollout.checkpoint_engine.backend=naive; set backend=nccl") \
  X(separate_async_reward_pool, "trainer.v1.trainer_mode=separate_async with reward.reward_model.enable=true needs reward.reward_model.enable_resource_pool=true; give the reward model its own pool") \
  X(rollout_replica_fits, "the rollout devices must hold at least one replica of tensor_model_parallel_size * data_parallel_size * pipeline_model_parallel_size devices; lower the parallel sizes or add devices") \
  X(rollout_replica_node_shape, "a rollout replica larger than one node must span whole nodes: TP * DP * PP must be divisible by n_gpus_per_node; change the parallel sizes") \
  X(reward_pool_shape, "reward.reward_model.enable_resource_pool=true needs reward.reward_model.n_gpus_per_node > 0 and nnodes > 0; set the pool shape") \
  X(max_colocate_count_positive, "max_colocate_count must be at least 1; set e.g. max_colocate_count=3") \
  X(sampler_threshold_positive, "trainer.v1.sampler.max_off_policy_threshold must be greater than 0; set e.g. 8") \
  X(resume_path_given, "trainer.resume_mode=resume_path needs trainer.resume_from_path; set the checkpoint path") \
  X(discount_in_range, "algorithm.gamma and algorithm.lam must lie in [0, 1]; set e.g. 1.0") \
  X(hybrid_engine_on, "actor_rollout_ref.hybrid_engine must be true (actor and rollout share workers); set it to true") \
  X(model_shape, "actor_rollout_ref.model needs n_layer, n_head, n_embd >= 1 with n_embd divisible by n_head; fix the model shape") \
  X(training_length, "trainer.total_epochs must be at least 1 and trainer.total_training_steps null or at least 1; set positive values") \
  X(logging_ranges, "trainer.log_freq must be at least 1 and trainer.log_train_generations at least 0; set e.g. log_freq=10") \
  X(optimizer_ranges, "optim.lr and weight_decay must be >= 0, betas in [0, 1), warm-up and min_lr ratios in [0, 1], grad_clip > 0; fix the optimizer keys")

namespace detail {

enum class config_check_id {
#define RLFLOW_DETAIL_CHECK_ENUM(name, text) name,
  RLFLOW_CONFIG_CHECKS(RLFLOW_DETAIL_CHECK_ENUM)
#undef RLFLOW_DETAIL_CHECK_ENUM
};

struct check_row {
  config_check_id id;
  std::string_view name;
  bool (*ok)(TrainerConfig const&);
  std::string_view summary;
};
inline constexpr check_row config_check_rows[] = {
#define RLFLOW_DETAIL_CHECK_ROW(name, text) {config_check_id::name, #name, &config_checks::name, text},
    RLFLOW_CONFIG_CHECKS(RLFLOW_DETAIL_CHECK_ROW)
#undef RLFLOW_DETAIL_CHECK_ROW
};

inline std::string opt_text(nullable<std::int64_t> const& v) { return v.has_value ? std::to_string(v.stored) : "null"; }
inline std::string opt_text(nullable<double> const& v) { return v.has_value ? format_number(v.stored) : "null"; }
inline std::string opt_text(nullable<bool> const& v) { return v.has_value ? (v.stored ? "true" : "false") : "null"; }
inline std::string b(bool v) { return v ? "true" : "false"; }
inline std::string num(double v) { return format_number(v); }

//! Largest divisor of 'n' not above 'cap' (for suggestions).
inline std::int64_t largest_divisor_upto(std::int64_t n, std::int64_t cap) {
  for (std::int64_t d = std::min(n, cap); d >= 1; --d)
    if (n % d == 0) return d;
  return 1;
}

//! The run-time message of a failed check: the keys, their values and a fix.
inline std::string explain(config_check_id id, TrainerConfig const& c) {
  auto const& a = c.actor_rollout_ref.actor;
  auto const& r = c.actor_rollout_ref.rollout;
  auto const B = c.data.train_batch_size, n = r.n, M = a.ppo_mini_batch_size, W = c.world_size();
  auto const world_txt = msg("trainer.nnodes=", c.trainer.nnodes, " * trainer.n_gpus_per_node=", c.trainer.n_gpus_per_node,
                             " = ", W, " devices");
  switch (id) {
    case config_check_id::trainer_world_positive:
      return msg("trainer.nnodes=", c.trainer.nnodes, " and trainer.n_gpus_per_node=", c.trainer.n_gpus_per_node,
                 " must both be at least 1; set e.g. trainer.nnodes=1 trainer.n_gpus_per_node=8");
    case config_check_id::batch_sizes_positive:
      return msg("data.train_batch_size=", B, ", actor_rollout_ref.actor.ppo_mini_batch_size=", M,
                 ", actor_rollout_ref.rollout.n=", n, " and actor_rollout_ref.actor.ppo_epochs=", a.ppo_epochs,
                 " must all be at least 1; set positive values (defaults 1024, 256, 1, 1)");
    case config_check_id::lengths_positive:
      return msg("data.max_prompt_length=", c.data.max_prompt_length, " and data.max_response_length=",
                 c.data.max_response_length, " must be at least 1; set positive lengths (default 512)");
    case config_check_id::actor_tensor_parallel_divides: {
      auto const tp = a.megatron.tensor_model_parallel_size;
      auto const nh = c.actor_rollout_ref.model.n_head;
      std::int64_t common = 1;  // the largest TP that divides both
      for (std::int64_t d = 1; d <= std::min<std::int64_t>(W, nh); ++d)
        if (W % d == 0 && nh % d == 0) common = d;
      return msg("actor_rollout_ref.actor.megatron.tensor_model_parallel_size=", tp, " must be at least 1 and divide both ",
                 world_txt, " and actor_rollout_ref.model.n_head=", nh,
                 " (training TP tiles the devices and splits attention by heads); set it to a common divisor, e.g. ", common);
    }
    case config_check_id::sequence_parallel_divides_world:
      return msg(world_txt, " must be divisible by actor_rollout_ref.actor.ulysses_sequence_parallel_size=",
                 a.ulysses_sequence_parallel_size,
                 c.uses_critic() ? msg(" and critic.ulysses_sequence_parallel_size=", c.critic.ulysses_sequence_parallel_size) : "",
                 " (each at least 1); set ulysses_sequence_parallel_size to a divisor of ", W);
    case config_check_id::real_batch_divisible_by_world: {
      auto const lo = (B * n) / W * W, hi = lo + W;
      return msg("data.train_batch_size=", B, " * actor_rollout_ref.rollout.n=", n, " = ", B * n,
                 " rows must be divisible by ", world_txt, "; set data.train_batch_size so that B * n is a multiple of ",
                 W, " (e.g. B * n = ", lo > 0 ? lo : hi, " or ", lo > 0 ? hi : hi + W, ") or change the device count");
    }
    case config_check_id::actor_micro_exclusive:
      return msg("actor_rollout_ref.actor.ppo_micro_batch_size=", opt_text(a.ppo_micro_batch_size),
                 " and actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=", opt_text(a.ppo_micro_batch_size_per_gpu),
                 " are both set; set only ppo_micro_batch_size_per_gpu (ppo_micro_batch_size is deprecated): "
                 "actor_rollout_ref.actor.ppo_micro_batch_size=null");
    case config_check_id::actor_micro_required: {
      auto const dp = c.actor_dp_size();
      auto const per_gpu = dp > 0 ? M * n / dp : M * n;
      return msg("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=null and ppo_micro_batch_size=null while "
                 "actor_rollout_ref.actor.use_dynamic_bsz=false; set actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"
                 " (a divisor of the per-device mini-batch ", per_gpu, ", e.g. ", largest_divisor_upto(per_gpu, 8),
                 ") or use_dynamic_bsz=true");
    }
    case config_check_id::actor_micro_positive:
      return msg("actor_rollout_ref.actor.ppo_micro_batch_size=", opt_text(a.ppo_micro_batch_size),
                 ", ppo_micro_batch_size_per_gpu=", opt_text(a.ppo_micro_batch_size_per_gpu),
                 " and ppo_max_token_len_per_gpu=", a.ppo_max_token_len_per_gpu,
                 " must be at least 1 when set; set positive values");
    case config_check_id::actor_mini_le_train:
      return msg("data.train_batch_size=", B, " is smaller than actor_rollout_ref.actor.ppo_mini_batch_size=", M,
                 "; set actor_rollout_ref.actor.ppo_mini_batch_size at most ", B, " (e.g. ",
                 largest_divisor_upto(B, M), ")");
    case config_check_id::actor_train_divisible_by_mini:
      return msg("data.train_batch_size=", B, " is not divisible by actor_rollout_ref.actor.ppo_mini_batch_size=", M,
                 " (", B, " % ", M, " = ", M > 0 ? B % M : 0,
                 "), so the last mini-batch would be short; set ppo_mini_batch_size to a divisor of ", B, " (e.g. ",
                 largest_divisor_upto(B, M), ")");
    case config_check_id::actor_mini_divisible_by_dp:
      return msg("actor_rollout_ref.actor.ppo_mini_batch_size=", M, " * actor_rollout_ref.rollout.n=", n, " = ", M * n,
                 " rows per mini-batch must be divisible by the data-parallel size ", c.actor_dp_size(), " (", world_txt,
                 " / actor_rollout_ref.actor.ulysses_sequence_parallel_size=", a.ulysses_sequence_parallel_size,
                 "); set ppo_mini_batch_size so that M * n is a multiple of ", c.actor_dp_size());
    case config_check_id::actor_mini_divisible_by_micro: {
      auto const dp = c.actor_dp_size();
      auto const per_gpu = M * n / dp;
      return msg("the per-device mini-batch actor_rollout_ref.actor.ppo_mini_batch_size=", M,
                 " * actor_rollout_ref.rollout.n=", n, " / DP=", dp, " = ", per_gpu,
                 " rows is not divisible by actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=",
                 opt_text(a.ppo_micro_batch_size_per_gpu), "; set ppo_micro_batch_size_per_gpu to a divisor of ",
                 per_gpu, " (e.g. ", largest_divisor_upto(per_gpu, a.ppo_micro_batch_size_per_gpu.value_or(1)), ")");
    }
    case config_check_id::actor_deprecated_micro:
      return msg("the deprecated actor_rollout_ref.actor.ppo_micro_batch_size=", opt_text(a.ppo_micro_batch_size),
                 " must divide ppo_mini_batch_size=", M, " and, times ulysses_sequence_parallel_size=",
                 a.ulysses_sequence_parallel_size, ", be at least the device count ", W,
                 "; set actor_rollout_ref.actor.ppo_micro_batch_size=null and use ppo_micro_batch_size_per_gpu");
    case config_check_id::clip_ratio_c_above_one:
      return msg("actor_rollout_ref.actor.clip_ratio_c=", num(a.clip_ratio_c),
                 " must be greater than 1 (the dual-clip bound); set actor_rollout_ref.actor.clip_ratio_c=3.0");
    case config_check_id::clip_ratios_in_range:
      return msg("actor_rollout_ref.actor.clip_ratio=", num(a.clip_ratio), ", clip_ratio_low=", opt_text(a.clip_ratio_low),
                 " (effective ", num(c.clip_ratio_low()), ") and clip_ratio_high=", opt_text(a.clip_ratio_high),
                 " (effective ", num(c.clip_ratio_high()),
                 ") must be at least 0, and clip_ratio_low below 1 (the ratio is clamped to [1 - low, 1 + high]); set "
                 "e.g. 0.2");
    case config_check_id::policy_loss_parameters: {
      auto const& p = a.policy_loss;
      if (p.loss_mode == "clip_cov")
        return msg("actor_rollout_ref.actor.policy_loss.loss_mode=clip_cov needs policy_loss.clip_cov_ratio > 0, got ",
                   num(p.clip_cov_ratio), "; set actor_rollout_ref.actor.policy_loss.clip_cov_ratio=0.0002");
      if (p.loss_mode == "kl_cov")
        return msg("actor_rollout_ref.actor.policy_loss.loss_mode=kl_cov needs policy_loss.kl_cov_ratio > 0, got ",
                   num(p.kl_cov_ratio), "; set actor_rollout_ref.actor.policy_loss.kl_cov_ratio=0.0002");
      return msg("actor_rollout_ref.actor.policy_loss.loss_mode=dro needs policy_loss.dro_beta > 0, got ",
                 opt_text(p.dro_beta), "; set e.g. actor_rollout_ref.actor.policy_loss.dro_beta=0.1");
    }
    case config_check_id::kl_ctrl_adaptive_parameters:
      return msg("algorithm.kl_ctrl.type=adaptive needs algorithm.kl_ctrl.horizon > 0 and target_kl > 0, got horizon=",
                 c.algorithm.kl_ctrl.horizon, " target_kl=", num(c.algorithm.kl_ctrl.target_kl),
                 "; set e.g. algorithm.kl_ctrl.horizon=10000 algorithm.kl_ctrl.target_kl=0.1");
    case config_check_id::critic_for_gae:
      return msg("algorithm.adv_estimator=gae needs a value model but critic.enable=", opt_text(c.critic.enable),
                 "; set critic.enable=true (or null), or choose an estimator without a critic, e.g. "
                 "algorithm.adv_estimator=grpo");
    case config_check_id::critic_micro_exclusive:
      return msg("critic.ppo_micro_batch_size=", opt_text(c.critic.ppo_micro_batch_size),
                 " and critic.ppo_micro_batch_size_per_gpu=", opt_text(c.critic.ppo_micro_batch_size_per_gpu),
                 " are both set; set only critic.ppo_micro_batch_size_per_gpu (critic.ppo_micro_batch_size=null)");
    case config_check_id::critic_micro_required:
      return msg("critic.ppo_micro_batch_size_per_gpu=null and critic.ppo_micro_batch_size=null while the critic is "
                 "used (algorithm.adv_estimator=", c.algorithm.adv_estimator, ", critic.enable=",
                 opt_text(c.critic.enable), ") and critic.use_dynamic_bsz=false; set critic.ppo_micro_batch_size_per_gpu");
    case config_check_id::critic_sizes_positive:
      return msg("critic.ppo_mini_batch_size=", c.critic_ppo_mini_batch_size(), ", critic.ppo_epochs=",
                 c.critic_ppo_epochs(), ", critic.ppo_micro_batch_size_per_gpu=",
                 opt_text(c.critic.ppo_micro_batch_size_per_gpu), " and critic.ppo_micro_batch_size=",
                 opt_text(c.critic.ppo_micro_batch_size), " must be at least 1; set positive values");
    case config_check_id::critic_mini_le_train:
      return msg("data.train_batch_size=", B, " is smaller than critic.ppo_mini_batch_size=",
                 c.critic_ppo_mini_batch_size(), "; set critic.ppo_mini_batch_size at most ", B);
    case config_check_id::critic_train_divisible_by_mini: {
      auto const m = c.critic_ppo_mini_batch_size();
      return msg("data.train_batch_size=", B, " is not divisible by critic.ppo_mini_batch_size=", m,
                 "; set critic.ppo_mini_batch_size to a divisor of ", B, " (e.g. ", largest_divisor_upto(B, m), ")");
    }
    case config_check_id::critic_mini_divisible_by_dp:
      return msg("critic.ppo_mini_batch_size=", c.critic_ppo_mini_batch_size(), " * actor_rollout_ref.rollout.n=", n,
                 " = ", c.critic_ppo_mini_batch_size() * n, " rows must be divisible by the critic data-parallel size ",
                 c.critic_dp_size(), "; set critic.ppo_mini_batch_size so that it times n is a multiple of ", c.critic_dp_size(),
                 ", or change the device count");
    case config_check_id::critic_mini_divisible_by_micro: {
      auto const per_gpu = c.critic_ppo_mini_batch_size() * n / c.critic_dp_size();
      return msg("the per-device critic mini-batch critic.ppo_mini_batch_size=", c.critic_ppo_mini_batch_size(),
                 " * n=", n, " / DP=", c.critic_dp_size(), " = ", per_gpu,
                 " rows is not divisible by critic.ppo_micro_batch_size_per_gpu=",
                 opt_text(c.critic.ppo_micro_batch_size_per_gpu), "; set it to a divisor of ", per_gpu);
    }
    case config_check_id::ref_log_prob_micro:
      return msg("a reference policy is used (algorithm.use_kl_in_reward=", b(c.algorithm.use_kl_in_reward),
                 ", actor_rollout_ref.actor.use_kl_loss=", b(a.use_kl_loss),
                 ") so exactly one of actor_rollout_ref.ref.log_prob_micro_batch_size=",
                 opt_text(c.actor_rollout_ref.ref.log_prob_micro_batch_size), " and log_prob_micro_batch_size_per_gpu=",
                 opt_text(c.actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu),
                 " must be set (and at least 1); set actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu");
    case config_check_id::rollout_log_prob_micro:
      return msg("exactly one of actor_rollout_ref.rollout.log_prob_micro_batch_size=",
                 opt_text(r.log_prob_micro_batch_size), " and actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=",
                 opt_text(r.log_prob_micro_batch_size_per_gpu),
                 " must be set (and at least 1); set actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu");
    case config_check_id::dynamic_bsz_consistent:
      return msg("actor_rollout_ref.actor.use_dynamic_bsz=", b(a.use_dynamic_bsz),
                 " differs from actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=", opt_text(r.log_prob_use_dynamic_bsz),
                 "; set both to the same value (or log_prob_use_dynamic_bsz=null to inherit)");
    case config_check_id::val_sampling_temperature:
      return msg("actor_rollout_ref.rollout.val_kwargs.do_sample=true needs val_kwargs.temperature > 0, got ",
                 num(r.val_kwargs.temperature),
                 "; set actor_rollout_ref.rollout.val_kwargs.temperature=1.0 or val_kwargs.do_sample=false");
    case config_check_id::sampling_ranges:
      return msg("actor_rollout_ref.rollout.temperature=", num(r.temperature), " top_p=", num(r.top_p), " top_k=",
                 r.top_k, " val_kwargs.temperature=", num(r.val_kwargs.temperature), " val_kwargs.top_p=",
                 num(r.val_kwargs.top_p), " val_kwargs.top_k=", r.val_kwargs.top_k, " val_kwargs.n=", r.val_kwargs.n,
                 ": need temperature >= 0, 0 < top_p <= 1, top_k >= -1 (-1 or 0: off), n >= 1; fix the offending key");
    case config_check_id::otb_sum_pi_squared:
      return msg("algorithm.adv_estimator=", c.algorithm.adv_estimator,
                 " needs sum_pi_squared but actor_rollout_ref.actor.calculate_sum_pi_squared=false; set "
                 "actor_rollout_ref.actor.calculate_sum_pi_squared=true");
    case config_check_id::passk_group_size:
      return msg("algorithm.adv_estimator=grpo_passk needs groups of at least 2 but actor_rollout_ref.rollout.n=", n,
                 "; set actor_rollout_ref.rollout.n=2 or more");
    case config_check_id::gen_batch_divides_train:
      return msg("data.gen_batch_size=", opt_text(c.data.gen_batch_size), " must be at least 1 and divide data.train_batch_size=",
                 B, "; set data.gen_batch_size to a divisor of ", B, " or null");
    case config_check_id::separate_async_sync_step: {
      auto const ps = c.trainer.v1.separate_async.parameter_sync_step;
      return msg("trainer.v1.trainer_mode=separate_async needs data.train_batch_size == "
                 "trainer.v1.separate_async.parameter_sync_step * actor_rollout_ref.actor.ppo_mini_batch_size, but ",
                 B, " != ", ps, " * ", M, " = ", ps * M, "; set data.train_batch_size=", ps * M,
                 M > 0 && B % M == 0 ? msg(" or trainer.v1.separate_async.parameter_sync_step=", B / M) : std::string());
    }
    case config_check_id::separate_async_rollout_pool:
      return msg("trainer.v1.trainer_mode=separate_async needs a standalone rollout pool, but "
                 "actor_rollout_ref.rollout.nnodes=", r.nnodes, " and actor_rollout_ref.rollout.n_gpus_per_node=",
                 c.rollout_n_gpus_per_node(), "; set e.g. actor_rollout_ref.rollout.nnodes=1 "
                 "actor_rollout_ref.rollout.n_gpus_per_node=4");
    case config_check_id::separate_async_transport:
      return msg("trainer.v1.trainer_mode=separate_async syncs weights across pools, which "
                 "actor_rollout_ref.rollout.checkpoint_engine.backend=naive cannot do (in place, same pool only); set "
                 "actor_rollout_ref.rollout.checkpoint_engine.backend=nccl");
    case config_check_id::separate_async_reward_pool:
      return msg("trainer.v1.trainer_mode=separate_async with reward.reward_model.enable=true needs "
                 "reward.reward_model.enable_resource_pool=true (got false); set "
                 "reward.reward_model.enable_resource_pool=true with its n_gpus_per_node and nnodes");
    case config_check_id::rollout_replica_fits:
      return msg("a rollout replica needs actor_rollout_ref.rollout.tensor_model_parallel_size=",
                 r.tensor_model_parallel_size, " * data_parallel_size=", r.data_parallel_size,
                 " * pipeline_model_parallel_size=", r.pipeline_model_parallel_size, " = ",
                 c.rollout_replica_world_size(), " devices (each at least 1) but the rollout has ", c.rollout_devices(),
                 c.is_separate_async() ? " (actor_rollout_ref.rollout.nnodes * n_gpus_per_node)" : " (the trainer pool)",
                 "; lower the parallel sizes or add devices");
    case config_check_id::rollout_replica_node_shape: {
      auto const gpn = c.is_separate_async() ? c.rollout_n_gpus_per_node() : c.trainer.n_gpus_per_node;
      return msg("a rollout replica of TP*DP*PP = ", c.rollout_replica_world_size(),
                 " devices is larger than a node (n_gpus_per_node=", gpn,
                 ") but not a whole number of nodes; make TP*DP*PP a multiple of ", gpn, " or at most ", gpn);
    }
    case config_check_id::reward_pool_shape:
      return msg("reward.reward_model.enable_resource_pool=true needs reward.reward_model.n_gpus_per_node > 0 and "
                 "nnodes > 0, got n_gpus_per_node=", c.reward.reward_model.n_gpus_per_node, " nnodes=",
                 c.reward.reward_model.nnodes, "; set e.g. reward.reward_model.nnodes=1");
    case config_check_id::max_colocate_count_positive:
      return msg("max_colocate_count=", c.max_colocate_count, " must be at least 1; set max_colocate_count=3 (verl's default)");
    case config_check_id::sampler_threshold_positive:
      return msg("trainer.v1.sampler.max_off_policy_threshold=", c.trainer.v1.sampler.max_off_policy_threshold,
                 " must be greater than 0; set trainer.v1.sampler.max_off_policy_threshold=8");
    case config_check_id::resume_path_given:
      return msg("trainer.resume_mode=resume_path needs trainer.resume_from_path, which is empty; set "
                 "trainer.resume_from_path=<checkpoint dir> or trainer.resume_mode=auto");
    case config_check_id::discount_in_range:
      return msg("algorithm.gamma=", num(c.algorithm.gamma), " and algorithm.lam=", num(c.algorithm.lam),
                 " must lie in [0, 1]; set e.g. algorithm.gamma=1.0 algorithm.lam=0.95");
    case config_check_id::hybrid_engine_on:
      return "actor_rollout_ref.hybrid_engine=false is not supported (verl requires the hybrid engine); set "
             "actor_rollout_ref.hybrid_engine=true";
    case config_check_id::model_shape: {
      auto const& m = c.actor_rollout_ref.model;
      return msg("actor_rollout_ref.model.n_layer=", m.n_layer, " n_head=", m.n_head, " n_embd=", m.n_embd,
                 " vocab_size=", m.vocab_size,
                 ": need n_layer, n_head, n_embd >= 1, vocab_size >= 0 and n_embd divisible by n_head; set e.g. "
                 "n_embd=", m.n_head > 0 ? std::max<std::int64_t>(m.n_head, (m.n_embd / m.n_head) * m.n_head) : 64);
    }
    case config_check_id::training_length:
      return msg("trainer.total_epochs=", c.trainer.total_epochs, " must be at least 1 and trainer.total_training_steps=",
                 opt_text(c.trainer.total_training_steps), " null or at least 1; set positive values");
    case config_check_id::logging_ranges:
      return msg("trainer.log_freq=", c.trainer.log_freq, " must be at least 1 and trainer.log_train_generations=",
                 c.trainer.log_train_generations, " at least 0; set e.g. trainer.log_freq=10 trainer.log_train_generations=2");
    case config_check_id::optimizer_ranges: {
      auto const o = [](std::string_view p, OptimConfig const& x) {
        return msg(p, ".optim.lr=", num(x.lr), " weight_decay=", num(x.weight_decay), " betas=[", num(x.betas[0]), ", ",
                   num(x.betas[1]), "] lr_warmup_steps_ratio=", num(x.lr_warmup_steps_ratio), " min_lr_ratio=",
                   num(x.min_lr_ratio));
      };
      return msg(o("actor_rollout_ref.actor", a.optim), "; ", o("critic", c.critic.optim),
                 "; actor_rollout_ref.actor.grad_clip=", num(a.grad_clip), " critic.grad_clip=", num(c.critic.grad_clip),
                 ": need lr, weight_decay >= 0, betas in [0, 1), ratios in [0, 1], grad_clip > 0; fix the offending key");
    }
  }
  return "unknown check";
}

}  // namespace detail

//! Every violated start-up constraint of 'cfg', each message naming the keys, their values and
//! a fix; empty when the config is valid. Includes the string keys' choice checks.
//! verl: verl/utils/config.py validate_config, the worker/config __post_init__ checks, and the
//! v1 trainers' start-up asserts (verl_algorithms.md §11).
inline std::vector<std::string> validate(TrainerConfig const& cfg) {
  std::vector<std::string> out;
  for (auto const& k : detail::config_keys) {
    if (k.choices.empty()) continue;
    try {
      if (k.kind == detail::key_kind::string) {
        detail::check_choice(k, static_cast<config_string*>(k.ref(const_cast<TrainerConfig&>(cfg)))->view(), "");
      } else if (k.kind == detail::key_kind::list) {
        for (auto const& it : static_cast<string_list*>(k.ref(const_cast<TrainerConfig&>(cfg)))->items())
          detail::check_choice(k, it, "");
      }
    } catch (config_error const& e) {
      out.emplace_back(e.what());
    }
  }
  for (auto const& row : detail::config_check_rows)
    if (!row.ok(cfg)) out.push_back(detail::explain(row.id, cfg));
  return out;
}

//! The names of the failed checks (config_checks::<name>), in table order; choice checks excluded.
inline std::vector<std::string_view> failed_checks(TrainerConfig const& cfg) {
  std::vector<std::string_view> out;
  for (auto const& row : detail::config_check_rows)
    if (!row.ok(cfg)) out.push_back(row.name);
  return out;
}

//! Advisories that do not stop a run (verl prints these as warnings).
inline std::vector<std::string> warnings(TrainerConfig const& cfg) {
  std::vector<std::string> out;
  if (cfg.algorithm.use_kl_in_reward && cfg.actor_rollout_ref.actor.use_kl_loss)
    out.push_back("algorithm.use_kl_in_reward=true and actor_rollout_ref.actor.use_kl_loss=true: the KL is applied "
                  "twice (in the reward and in the loss); usually keep one (verl warns the same)");
  auto const w = cfg.rollout_replica_world_size();
  if (w >= 1 && cfg.rollout_devices() >= w && cfg.rollout_devices() % w != 0)
    out.push_back(msg(cfg.rollout_devices() % w, " of ", cfg.rollout_devices(),
                      " rollout devices stay idle: replicas use TP*DP*PP = ", w,
                      " devices each (verl floors the replica count); make the device count a multiple of ", w));
  if (cfg.critic.enable.has_value && cfg.critic.enable.stored && !(cfg.algorithm.adv_estimator == "gae"))
    out.push_back(msg("critic.enable=true with algorithm.adv_estimator=", cfg.algorithm.adv_estimator,
                      ": the critic is trained but its values are not used by the estimator"));
  return out;
}

//! Throws config_error listing every violation (validate) when 'cfg' is invalid. Call it before
//! any work starts. verl: validate_config.
inline void check(TrainerConfig const& cfg) {
  auto const v = validate(cfg);
  if (v.empty()) return;
  std::string text = msg("invalid rlflow configuration (", v.size(), v.size() == 1 ? " problem" : " problems", "):");
  for (auto const& s : v) text += "\n  - " + s;
  throw config_error(text);
}

//! True when every check passes; usable in constant expressions.
constexpr bool is_valid(TrainerConfig const& c) {
  bool ok = true;
#define RLFLOW_DETAIL_VALID_CHOICE(path, choices, help) ok = ok && detail::choice_ok(c.path, choices);
  RLFLOW_TRAINER_CONFIG_KEYS(RLFLOW_DETAIL_VALID_CHOICE)
#undef RLFLOW_DETAIL_VALID_CHOICE
#define RLFLOW_DETAIL_VALID_CHECK(name, text) ok = ok && config_checks::name(c);
  RLFLOW_CONFIG_CHECKS(RLFLOW_DETAIL_VALID_CHECK)
#undef RLFLOW_DETAIL_VALID_CHECK
  return ok;
}

//! Compile-time validation of a constexpr config: instantiating checked_config<cfg> fails to
//! build with one static_assert per violated check, in the words of the run-time message.
//!   constexpr rlflow::TrainerConfig cfg = [] { rlflow::TrainerConfig c; c.data.train_batch_size = 512; ...; return c; }();
//!   constexpr auto const& ok = rlflow::checked<cfg>;   // or rlflow::checked_config<cfg>{}
template <TrainerConfig C>
struct checked_config {
#define RLFLOW_DETAIL_STATIC_CHOICE(path, choices, help)                                                            \
  static_assert(detail::choice_ok(C.path, choices),                                                               \
                "rlflow::checked_config<cfg>: " #path " is not one of '" choices "'; set it to one of them");
  RLFLOW_TRAINER_CONFIG_KEYS(RLFLOW_DETAIL_STATIC_CHOICE)
#undef RLFLOW_DETAIL_STATIC_CHOICE
#define RLFLOW_DETAIL_STATIC_CHECK(name, text) static_assert(config_checks::name(C), "rlflow::checked_config<cfg>: " text);
  RLFLOW_CONFIG_CHECKS(RLFLOW_DETAIL_STATIC_CHECK)
#undef RLFLOW_DETAIL_STATIC_CHECK
  static constexpr TrainerConfig const& value = C;
};

//! The config itself, after checked_config<C>'s static_asserts pass.
template <TrainerConfig C>
inline constexpr TrainerConfig const& checked = checked_config<C>::value;

}  // namespace rlflow
