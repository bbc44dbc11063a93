// rlflow/trainer_config/schema.hpp: the configuration tree: one struct per verl config group (OptimConfig ...
// AlgorithmConfig, TrainerSection) and TrainerConfig, the whole tree, with verl's defaults.
// Part of rlflow/config/trainer_config.hpp (include that one).
#pragma once
#include <rlflow/config/estimators.hpp>  // estimator_of (uses_critic)
#include <rlflow/trainer_config/values.hpp>
#include <rlflow/trainer_config/verl_keys.hpp>  // verl_key_rule_words
#include <array>         // std::array (optim.betas)
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>
#include <nlohmann/json_fwd.hpp>  // TrainerConfig::apply_json / to_json

namespace rlflow {

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
  //! "model": the folder's Jinja chat_template (else TrainerOptions::chat_template); "chatml",
  //! "llama3", "plain": the built-in template of that name (HfChatTemplate::named).
  config_string chat_template = "model";
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
  //! The built-in model's architecture: "gpt2", "llama", "qwen2", "qwen3" (model.path: the folder's).
  config_string arch = "gpt2";
  //! The LM head's split where an engine runs tensor-parallel (rollout TP<N>, training TP):
  //! "auto" (vocabulary-parallel from 256 tokens, replicated below), "vocab_parallel", "replicated".
  config_string lm_head = "auto";
  //! verl: model.use_remove_padding (packed sequences in the actor's and reference's passes).
  bool use_remove_padding = false;
  //! verl: model.enable_gradient_checkpointing (the actor's and reference's forwards keep each
  //! layer's input only; the backward recomputes the rest). verl's default: true; rlflow's: false,
  //! since it costs about one more trunk forward per update and the CUDA engine does not do it.
  bool enable_gradient_checkpointing = false;
  //! verl: model.lora_rank (0: full fine-tuning), lora_alpha, target_modules (model/lora.hpp).
  std::int64_t lora_rank = 0;
  double lora_alpha = 16.0;
  string_list target_modules = "all-linear";
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
  config_string default_agent_loop = "single_turn_agent";  //!< the loop of rows without an agent_name
};

//! verl: actor_rollout_ref.rollout.multi_turn.* (rollouts through the agent loop; rlflow/agent).
struct MultiTurnRolloutConfig {
  bool enable = false;
  nullable<std::int64_t> max_assistant_turns{};  //!< null: no limit
  nullable<std::int64_t> max_user_turns{};       //!< null: no limit
  std::int64_t max_parallel_calls = 1;
  std::int64_t max_tool_response_length = 256;   //!< characters; 0: no limit
  config_string tool_response_truncate_side = "middle";
  config_string format = "hermes";
  config_string tokenization_sanity_check_mode = "strict";
  config_string tool_config_path = "";           //!< empty: no tools
};

//! verl: actor_rollout_ref.rollout.* (verl/trainer/config/rollout/rollout.yaml).
struct RolloutConfig {
  std::int64_t n = 1;
  double temperature = 1.0;
  std::int64_t top_k = -1;
  double top_p = 1.0;
  bool do_sample = true;
  double gpu_memory_utilization = 0.5;
  bool enable_prefix_caching = true;              //!< the paged rollout engine's keys (vLLM's EngineArgs)
  bool enable_chunked_prefill = true;
  std::int64_t max_num_batched_tokens = 8192;
  std::int64_t max_num_seqs = 1024;
  std::int64_t block_size = 16;
  std::int64_t kv_cache_bytes = 0;                //!< 0: derived (max_num_seqs full-length sequences, at most a quarter of free memory; CUDA: what gpu_memory_utilization leaves)
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
  MultiTurnRolloutConfig multi_turn{};
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
  bool use_remove_padding = false;  //!< verl: critic.model.use_remove_padding
  bool enable_gradient_checkpointing = false;  //!< verl: critic.model.enable_gradient_checkpointing (verl's default: true)
};

//! verl: critic.* (verl/trainer/config/critic/critic.yaml); null fields inherit the actor's.
struct CriticConfig {
  nullable<bool> enable{};                        //!< null: on iff the estimator needs a critic (gae)
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
  //! Metric sinks (verl's names): console, file / jsonl, tensorboard; hosted ones are accepted with a notice.
  string_list logger = "console,file";
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
  config_string rollout_data_dir = "";  //!< verl: one <step>.jsonl of generations per step here; empty: none
  bool val_only = false;                //!< verl: validate once and stop (no training)
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
  //! verl keys given that have no effect here (one bit per row of detail::verl_key_rules); the
  //! Trainer prints a notice for each at start-up. Not a key: never dumped or loaded.
  std::array<std::uint64_t, detail::verl_key_rule_words> verl_keys_without_effect{};

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
  //! verl: need_critic (verl/trainer/ppo/utils.py:96-107): the estimator's needs_critic.
  constexpr bool uses_critic() const {
    return critic.enable.has_value ? critic.enable.stored : estimator_of(algorithm.adv_estimator.view()).needs_critic;
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

}  // namespace rlflow
