// rlflow/trainer_config/verl_keys.hpp: verl's trainer keys that rlflow's key table does not hold,
// each with what rlflow does with it: an alias of an rlflow key, accepted with a start-up notice
// (no effect here, and why), or rejected (why, and the rlflow equivalent; verl's own default value
// is accepted without effect). tests/config/verl_keys.txt lists every key of verl's trainer config
// and the CTest config.verl_keys checks each is honoured or has a row here.
// Part of rlflow/config/trainer_config.hpp (include that one).
#pragma once
#include <cstddef>
#include <string_view>

namespace rlflow::detail {

//! What rlflow does with a verl key that is not in its key table.
enum class verl_key_use {
  alias,      //!< stored into the rlflow key 'why' names (verl spells it differently)
  no_effect,  //!< accepted; the Trainer prints a one-line notice at start-up saying 'why'
  rejected,   //!< an error naming 'why' and 'instead', unless the value is verl's default
};

//! One verl key. verl: verl/trainer/config/_generated_ppo_trainer.yaml.
struct verl_key_rule {
  std::string_view key;
  verl_key_use use;
  std::string_view why;           //!< alias: the rlflow key; otherwise why it does nothing here
  std::string_view instead;       //!< rejected: the rlflow equivalent or what to do
  std::string_view verl_default;  //!< rejected: verl's default, accepted without effect
};

// ---- why a key does nothing here ---------------------------------------------------------------
inline constexpr std::string_view why_hydra = "Hydra's class path; the Trainer's template arguments fix the classes";
inline constexpr std::string_view why_reward_model_padding = "rlflow has no reward-model worker whose passes could be packed";
inline constexpr std::string_view why_fsdp =
    "FSDP sharding, wrapping and offload: each rlflow worker keeps whole weights in its own host or device memory";
inline constexpr std::string_view why_profiler = "profiler settings: rlflow has no profiler hooks; run perf or nsys around the program";
inline constexpr std::string_view why_ray = "Ray / NCCL cluster settings: rlflow runs in one process, or one per rank under mpirun";
inline constexpr std::string_view why_kernels =
    "PyTorch compile, kernel and activation-memory options: rlflow's kernels are its own C++ (what the backward keeps: actor_rollout_ref.model.enable_gradient_checkpointing)";
inline constexpr std::string_view why_rollout_n = "verl fills it from actor_rollout_ref.rollout.n, which rlflow reads";
inline constexpr std::string_view why_lengths = "verl fills it from data.max_prompt_length / data.max_response_length, which rlflow reads";
inline constexpr std::string_view why_checkpoint =
    "rlflow checkpoints always hold the model, the optimizer and the trainer state (safetensors, written in place)";
inline constexpr std::string_view why_engine =
    "vLLM / SGLang engine settings: rlflow's rollout is its own KV-cache engine inside the trainer's workers";
inline constexpr std::string_view why_trace = "rollout tracing and metrics servers: rlflow logs through trainer.logger";
inline constexpr std::string_view why_loading = "Python loading options: rlflow reads the folder's safetensors and tokenizer itself";
inline constexpr std::string_view why_critic_tokenizer = "the critic reads the policy's tokenizer";
inline constexpr std::string_view why_total_steps = "verl fills it from the trainer's step count, which rlflow computes";
inline constexpr std::string_view why_multimodal = "images and videos: rlflow's models are text-only";
inline constexpr std::string_view why_ref = "the reference runs inside the actor's workers with the actor's layout";
inline constexpr std::string_view why_critic_forward =
    "the critic's value passes use critic.ppo_micro_batch_size_per_gpu and critic.ppo_max_token_len_per_gpu";
inline constexpr std::string_view why_critic_seed = "the critic's mini-batches shuffle with actor_rollout_ref.actor.data_loader_seed";
inline constexpr std::string_view why_loader = "PyTorch DataLoader options: rlflow reads the prompt files in the driver";
// ---- why a key is rejected, and what to use instead --------------------------------------------
inline constexpr std::string_view why_reward_model = "rlflow has no reward-model worker";
inline constexpr std::string_view why_reward_manager = "rlflow has no Python reward managers";
inline constexpr std::string_view instead_reward_model =
    "score with a reward role (docs/roles.md) or a C scorer in custom_reward_function.path; reward_model.enable, "
    "enable_resource_pool, nnodes and n_gpus_per_node are reward.reward_model.*";
inline constexpr std::string_view why_agent =
    "verl's Python interactions, agent-loop files and async servers: rlflow's agent loops are C++ types registered by name";
inline constexpr std::string_view instead_agent =
    "register a C++ agent loop or tool (docs/agent_loop.md) and select it with agent.default_agent_loop or a row's agent_name";
inline constexpr std::string_view why_one_template =
    "rlflow tokenizes every turn with the one chat template training sees, so that the ids equal the template's";
inline constexpr std::string_view instead_drop = "drop the key";
inline constexpr std::string_view why_repeat_rollouts = "verl's repeated multi-turn rollouts of one prompt";
inline constexpr std::string_view instead_rollout_n = "set actor_rollout_ref.rollout.n (samples per prompt)";
inline constexpr std::string_view why_logprobs_mode = "rlflow returns the sampler's processed log-probs only";
inline constexpr std::string_view instead_logprobs_mode = "drop the key; actor_rollout_ref.rollout.calculate_log_probs=true returns them";
inline constexpr std::string_view why_rollout_feature =
    "quantized, speculative (MTP), MoE-routing, oversampled, ignore-EOS and skipped rollouts are not in rlflow";
inline constexpr std::string_view instead_none = "drop the key";
inline constexpr std::string_view why_lora = "rlflow's LoRA adapts the actor only (the critic trains full weights)";
inline constexpr std::string_view instead_lora = "drop the key; actor_rollout_ref.model.lora_rank adapts the actor";
inline constexpr std::string_view why_lora_more =
    "rlflow's LoRA adapts whole module kinds (target_modules) and starts from fresh adapters";
inline constexpr std::string_view instead_lora_more =
    "list the modules in actor_rollout_ref.model.target_modules; load a PEFT folder with engine::load_peft / apply_peft";
inline constexpr std::string_view why_chat_template = "rlflow renders prompts with the folder's Jinja template or a built-in one";
inline constexpr std::string_view instead_chat_template = "use data.chat_template=model|chatml|llama3|plain";
inline constexpr std::string_view why_hf_config = "rlflow reads config.json from actor_rollout_ref.model.path";
inline constexpr std::string_view instead_hf_config = "edit config.json in the model folder";
inline constexpr std::string_view why_python_model = "rlflow loads no Python modules and applies no config overrides";
inline constexpr std::string_view why_optimizer = "rlflow's optimizer is AdamW (its own C++)";
inline constexpr std::string_view instead_optimizer = "drop the key; optim.lr, weight_decay and betas tune AdamW";
inline constexpr std::string_view why_num_cycles = "rlflow's cosine schedule is verl's default half cycle";
inline constexpr std::string_view why_reward_fn_key = "rlflow picks the rule scorer by the data_source field";
inline constexpr std::string_view instead_reward_fn_key = "name the field data_source in the prompt file";
inline constexpr std::string_view why_data_tokenizer = "rlflow's tokenizer key is in the model section";
inline constexpr std::string_view instead_data_tokenizer = "use actor_rollout_ref.model.tokenizer_path";
inline constexpr std::string_view why_max_samples = "rlflow reads every record of the prompt files";
inline constexpr std::string_view instead_max_samples = "cut the file (e.g. head -n N train.jsonl > small.jsonl)";
inline constexpr std::string_view why_python_data = "rlflow loads no Python dataset, sampler or generator classes";
inline constexpr std::string_view instead_python_data = "write the prompts as JSON lines in verl's schema (docs/data.md)";
inline constexpr std::string_view why_validation_dir = "rlflow keeps validation generations in memory only";
inline constexpr std::string_view instead_validation_dir = "trainer.log_val_generations=N prints N of them";

//! Every verl key outside RLFLOW_TRAINER_CONFIG_KEYS (one row each; exact names).
inline constexpr verl_key_rule verl_key_rules[] = {
    {"actor_rollout_ref.actor.optim._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"actor_rollout_ref.actor.optim.optimizer", verl_key_use::rejected, why_optimizer, instead_optimizer, "AdamW"},
    {"actor_rollout_ref.actor.optim.optimizer_impl", verl_key_use::rejected, why_optimizer, instead_optimizer, "torch.optim"},
    {"actor_rollout_ref.actor.optim.total_training_steps", verl_key_use::no_effect, why_total_steps, {}, {}},
    {"actor_rollout_ref.actor.optim.clip_grad", verl_key_use::alias, "actor_rollout_ref.actor.grad_clip", {}, {}},
    {"actor_rollout_ref.actor.optim.num_cycles", verl_key_use::rejected, why_num_cycles, instead_none, "0.5"},
    {"actor_rollout_ref.actor.optim.warmup_style", verl_key_use::alias, "actor_rollout_ref.actor.optim.lr_scheduler_type", {}, {}},
    {"actor_rollout_ref.actor.optim.override_optimizer_config", verl_key_use::rejected, why_optimizer, instead_optimizer, "null"},
    {"actor_rollout_ref.actor.fsdp_config._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"actor_rollout_ref.actor.fsdp_config.wrap_policy.min_num_params", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"actor_rollout_ref.actor.fsdp_config.param_offload", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"actor_rollout_ref.actor.fsdp_config.optimizer_offload", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"actor_rollout_ref.actor.fsdp_config.offload_policy", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"actor_rollout_ref.actor.fsdp_config.reshard_after_forward", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"actor_rollout_ref.actor.fsdp_config.fsdp_size", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"actor_rollout_ref.actor.fsdp_config.forward_prefetch", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"actor_rollout_ref.actor.fsdp_config.model_dtype", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"actor_rollout_ref.actor.fsdp_config.use_orig_params", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"actor_rollout_ref.actor.fsdp_config.seed", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"actor_rollout_ref.actor.fsdp_config.full_determinism", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"actor_rollout_ref.actor.fsdp_config.ulysses_sequence_parallel_size", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"actor_rollout_ref.actor.fsdp_config.entropy_from_logits_with_chunking", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"actor_rollout_ref.actor.fsdp_config.use_torch_compile", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"actor_rollout_ref.actor.fsdp_config.entropy_checkpointing", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"actor_rollout_ref.actor.fsdp_config.forward_only", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"actor_rollout_ref.actor.fsdp_config.strategy", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"actor_rollout_ref.actor.fsdp_config.dtype", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"actor_rollout_ref.actor._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"actor_rollout_ref.actor.rollout_n", verl_key_use::no_effect, why_rollout_n, {}, {}},
    {"actor_rollout_ref.actor.freeze_vision_tower", verl_key_use::no_effect, why_multimodal, {}, {}},
    {"actor_rollout_ref.actor.policy_loss._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"actor_rollout_ref.actor.use_prefix_grouper", verl_key_use::no_effect, why_kernels, {}, {}},
    {"actor_rollout_ref.actor.use_torch_compile", verl_key_use::no_effect, why_kernels, {}, {}},
    {"actor_rollout_ref.actor.checkpoint._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"actor_rollout_ref.actor.checkpoint.save_contents", verl_key_use::no_effect, why_checkpoint, {}, {}},
    {"actor_rollout_ref.actor.checkpoint.load_contents", verl_key_use::no_effect, why_checkpoint, {}, {}},
    {"actor_rollout_ref.actor.checkpoint.async_save", verl_key_use::no_effect, why_checkpoint, {}, {}},
    {"actor_rollout_ref.actor.use_fused_kernels", verl_key_use::no_effect, why_kernels, {}, {}},
    {"actor_rollout_ref.actor.profiler._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"actor_rollout_ref.actor.profiler.tool", verl_key_use::no_effect, why_profiler, {}, {}},
    {"actor_rollout_ref.actor.profiler.enable", verl_key_use::no_effect, why_profiler, {}, {}},
    {"actor_rollout_ref.actor.profiler.all_ranks", verl_key_use::no_effect, why_profiler, {}, {}},
    {"actor_rollout_ref.actor.profiler.ranks", verl_key_use::no_effect, why_profiler, {}, {}},
    {"actor_rollout_ref.actor.profiler.save_path", verl_key_use::no_effect, why_profiler, {}, {}},
    {"actor_rollout_ref.actor.profiler.tool_config.nsys._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"actor_rollout_ref.actor.profiler.tool_config.nsys.discrete", verl_key_use::no_effect, why_profiler, {}, {}},
    {"actor_rollout_ref.actor.profiler.tool_config.npu._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"actor_rollout_ref.actor.profiler.tool_config.npu.contents", verl_key_use::no_effect, why_profiler, {}, {}},
    {"actor_rollout_ref.actor.profiler.tool_config.npu.level", verl_key_use::no_effect, why_profiler, {}, {}},
    {"actor_rollout_ref.actor.profiler.tool_config.npu.analysis", verl_key_use::no_effect, why_profiler, {}, {}},
    {"actor_rollout_ref.actor.profiler.tool_config.npu.discrete", verl_key_use::no_effect, why_profiler, {}, {}},
    {"actor_rollout_ref.actor.profiler.tool_config.torch._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"actor_rollout_ref.actor.profiler.tool_config.torch.contents", verl_key_use::no_effect, why_profiler, {}, {}},
    {"actor_rollout_ref.actor.profiler.tool_config.torch.discrete", verl_key_use::no_effect, why_profiler, {}, {}},
    {"actor_rollout_ref.actor.profiler.tool_config.torch_memory._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"actor_rollout_ref.actor.profiler.tool_config.torch_memory.trace_alloc_max_entries", verl_key_use::no_effect, why_profiler, {}, {}},
    {"actor_rollout_ref.actor.profiler.tool_config.torch_memory.stack_depth", verl_key_use::no_effect, why_profiler, {}, {}},
    {"actor_rollout_ref.actor.router_replay._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"actor_rollout_ref.actor.router_replay.mode", verl_key_use::rejected, why_rollout_feature, instead_none, "disabled"},
    {"actor_rollout_ref.actor.router_replay.record_file", verl_key_use::rejected, why_rollout_feature, instead_none, "null"},
    {"actor_rollout_ref.actor.router_replay.replay_file", verl_key_use::rejected, why_rollout_feature, instead_none, "null"},
    {"actor_rollout_ref.actor.entropy_from_logits_with_chunking", verl_key_use::no_effect, why_kernels, {}, {}},
    {"actor_rollout_ref.actor.entropy_checkpointing", verl_key_use::no_effect, why_kernels, {}, {}},
    {"actor_rollout_ref.actor.use_remove_padding", verl_key_use::alias, "actor_rollout_ref.model.use_remove_padding", {}, {}},
    {"actor_rollout_ref.actor.sum_pi_squared_checkpointing", verl_key_use::no_effect, why_kernels, {}, {}},
    {"actor_rollout_ref.ref.rollout_n", verl_key_use::no_effect, why_rollout_n, {}, {}},
    {"actor_rollout_ref.ref.strategy", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"actor_rollout_ref.ref.use_torch_compile", verl_key_use::no_effect, why_kernels, {}, {}},
    {"actor_rollout_ref.ref.profiler._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"actor_rollout_ref.ref.profiler.tool", verl_key_use::no_effect, why_profiler, {}, {}},
    {"actor_rollout_ref.ref.profiler.enable", verl_key_use::no_effect, why_profiler, {}, {}},
    {"actor_rollout_ref.ref.profiler.all_ranks", verl_key_use::no_effect, why_profiler, {}, {}},
    {"actor_rollout_ref.ref.profiler.ranks", verl_key_use::no_effect, why_profiler, {}, {}},
    {"actor_rollout_ref.ref.profiler.save_path", verl_key_use::no_effect, why_profiler, {}, {}},
    {"actor_rollout_ref.ref.profiler.tool_config.nsys._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"actor_rollout_ref.ref.profiler.tool_config.nsys.discrete", verl_key_use::no_effect, why_profiler, {}, {}},
    {"actor_rollout_ref.ref.profiler.tool_config.npu._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"actor_rollout_ref.ref.profiler.tool_config.npu.contents", verl_key_use::no_effect, why_profiler, {}, {}},
    {"actor_rollout_ref.ref.profiler.tool_config.npu.level", verl_key_use::no_effect, why_profiler, {}, {}},
    {"actor_rollout_ref.ref.profiler.tool_config.npu.analysis", verl_key_use::no_effect, why_profiler, {}, {}},
    {"actor_rollout_ref.ref.profiler.tool_config.npu.discrete", verl_key_use::no_effect, why_profiler, {}, {}},
    {"actor_rollout_ref.ref.profiler.tool_config.torch._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"actor_rollout_ref.ref.profiler.tool_config.torch.contents", verl_key_use::no_effect, why_profiler, {}, {}},
    {"actor_rollout_ref.ref.profiler.tool_config.torch.discrete", verl_key_use::no_effect, why_profiler, {}, {}},
    {"actor_rollout_ref.ref.profiler.tool_config.torch_memory._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"actor_rollout_ref.ref.profiler.tool_config.torch_memory.trace_alloc_max_entries", verl_key_use::no_effect, why_profiler, {}, {}},
    {"actor_rollout_ref.ref.profiler.tool_config.torch_memory.stack_depth", verl_key_use::no_effect, why_profiler, {}, {}},
    {"actor_rollout_ref.ref.router_replay._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"actor_rollout_ref.ref.router_replay.mode", verl_key_use::rejected, why_rollout_feature, instead_none, "disabled"},
    {"actor_rollout_ref.ref.router_replay.record_file", verl_key_use::rejected, why_rollout_feature, instead_none, "null"},
    {"actor_rollout_ref.ref.router_replay.replay_file", verl_key_use::rejected, why_rollout_feature, instead_none, "null"},
    {"actor_rollout_ref.ref.fsdp_config._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"actor_rollout_ref.ref.fsdp_config.wrap_policy.min_num_params", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"actor_rollout_ref.ref.fsdp_config.param_offload", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"actor_rollout_ref.ref.fsdp_config.optimizer_offload", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"actor_rollout_ref.ref.fsdp_config.offload_policy", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"actor_rollout_ref.ref.fsdp_config.reshard_after_forward", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"actor_rollout_ref.ref.fsdp_config.fsdp_size", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"actor_rollout_ref.ref.fsdp_config.forward_prefetch", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"actor_rollout_ref.ref.fsdp_config.model_dtype", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"actor_rollout_ref.ref.fsdp_config.use_orig_params", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"actor_rollout_ref.ref.fsdp_config.seed", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"actor_rollout_ref.ref.fsdp_config.full_determinism", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"actor_rollout_ref.ref.fsdp_config.ulysses_sequence_parallel_size", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"actor_rollout_ref.ref.fsdp_config.entropy_from_logits_with_chunking", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"actor_rollout_ref.ref.fsdp_config.use_torch_compile", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"actor_rollout_ref.ref.fsdp_config.entropy_checkpointing", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"actor_rollout_ref.ref.fsdp_config.forward_only", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"actor_rollout_ref.ref.fsdp_config.strategy", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"actor_rollout_ref.ref.fsdp_config.dtype", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"actor_rollout_ref.ref._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"actor_rollout_ref.ref.ulysses_sequence_parallel_size", verl_key_use::no_effect, why_ref, {}, {}},
    {"actor_rollout_ref.ref.entropy_from_logits_with_chunking", verl_key_use::no_effect, why_kernels, {}, {}},
    {"actor_rollout_ref.ref.entropy_checkpointing", verl_key_use::no_effect, why_kernels, {}, {}},
    {"actor_rollout_ref.rollout._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"actor_rollout_ref.rollout.name", verl_key_use::no_effect, why_engine, {}, {}},
    {"actor_rollout_ref.rollout.mode", verl_key_use::no_effect, why_engine, {}, {}},
    {"actor_rollout_ref.rollout.prompt_length", verl_key_use::no_effect, why_lengths, {}, {}},
    {"actor_rollout_ref.rollout.response_length", verl_key_use::no_effect, why_lengths, {}, {}},
    {"actor_rollout_ref.rollout.dtype", verl_key_use::no_effect, why_engine, {}, {}},
    {"actor_rollout_ref.rollout.ignore_eos", verl_key_use::rejected, why_rollout_feature, instead_none, "false"},
    {"actor_rollout_ref.rollout.enforce_eager", verl_key_use::no_effect, why_engine, {}, {}},
    {"actor_rollout_ref.rollout.cudagraph_capture_sizes", verl_key_use::no_effect, why_engine, {}, {}},
    {"actor_rollout_ref.rollout.expert_parallel_size", verl_key_use::no_effect, why_engine, {}, {}},
    {"actor_rollout_ref.rollout.max_model_len", verl_key_use::no_effect, why_engine, {}, {}},
    {"actor_rollout_ref.rollout.logprobs_mode", verl_key_use::rejected, why_logprobs_mode, instead_logprobs_mode, "processed_logprobs"},
    {"actor_rollout_ref.rollout.scheduling_policy", verl_key_use::no_effect, why_engine, {}, {}},
    {"actor_rollout_ref.rollout.load_format", verl_key_use::no_effect, why_engine, {}, {}},
    {"actor_rollout_ref.rollout.disable_log_stats", verl_key_use::no_effect, why_engine, {}, {}},
    {"actor_rollout_ref.rollout.over_sample_rate", verl_key_use::rejected, why_rollout_feature, instead_none, "0"},
    {"actor_rollout_ref.rollout.multi_stage_wake_up", verl_key_use::no_effect, why_engine, {}, {}},
    {"actor_rollout_ref.rollout.engine_kwargs.vllm", verl_key_use::no_effect, why_engine, {}, {}},
    {"actor_rollout_ref.rollout.engine_kwargs.sglang", verl_key_use::no_effect, why_engine, {}, {}},
    {"actor_rollout_ref.rollout.engine_kwargs.trtllm", verl_key_use::no_effect, why_engine, {}, {}},
    {"actor_rollout_ref.rollout.val_kwargs._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"actor_rollout_ref.rollout.multi_turn._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"actor_rollout_ref.rollout.multi_turn.interaction_config_path", verl_key_use::rejected, why_agent, instead_agent, "null"},
    {"actor_rollout_ref.rollout.multi_turn.use_inference_chat_template", verl_key_use::rejected, why_one_template, instead_drop, "false"},
    {"actor_rollout_ref.rollout.multi_turn.num_repeat_rollouts", verl_key_use::rejected, why_repeat_rollouts, instead_rollout_n, "null"},
    {"actor_rollout_ref.rollout.agent._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"actor_rollout_ref.rollout.agent.agent_loop_config_path", verl_key_use::rejected, why_agent, instead_agent, "null"},
    {"actor_rollout_ref.rollout.agent.custom_async_server._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"actor_rollout_ref.rollout.agent.custom_async_server.path", verl_key_use::rejected, why_agent, instead_agent, "null"},
    {"actor_rollout_ref.rollout.agent.custom_async_server.name", verl_key_use::rejected, why_agent, instead_agent, "null"},
    {"actor_rollout_ref.rollout.checkpoint_engine._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"actor_rollout_ref.rollout.checkpoint_engine.engine_kwargs", verl_key_use::no_effect, why_engine, {}, {}},
    {"actor_rollout_ref.rollout.trace._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"actor_rollout_ref.rollout.trace.backend", verl_key_use::no_effect, why_trace, {}, {}},
    {"actor_rollout_ref.rollout.trace.token2text", verl_key_use::no_effect, why_trace, {}, {}},
    {"actor_rollout_ref.rollout.trace.max_samples_per_step_per_worker", verl_key_use::no_effect, why_trace, {}, {}},
    {"actor_rollout_ref.rollout.skip_rollout", verl_key_use::rejected, why_rollout_feature, instead_none, "false"},
    {"actor_rollout_ref.rollout.skip_dump_dir", verl_key_use::rejected, why_rollout_feature, instead_none, "/tmp/rollout_dump"},
    {"actor_rollout_ref.rollout.skip_tokenizer_init", verl_key_use::no_effect, why_engine, {}, {}},
    {"actor_rollout_ref.rollout.enable_rollout_routing_replay", verl_key_use::rejected, why_rollout_feature, instead_none, "false"},
    {"actor_rollout_ref.rollout.profiler._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"actor_rollout_ref.rollout.profiler.tool", verl_key_use::no_effect, why_profiler, {}, {}},
    {"actor_rollout_ref.rollout.profiler.enable", verl_key_use::no_effect, why_profiler, {}, {}},
    {"actor_rollout_ref.rollout.profiler.all_ranks", verl_key_use::no_effect, why_profiler, {}, {}},
    {"actor_rollout_ref.rollout.profiler.ranks", verl_key_use::no_effect, why_profiler, {}, {}},
    {"actor_rollout_ref.rollout.profiler.save_path", verl_key_use::no_effect, why_profiler, {}, {}},
    {"actor_rollout_ref.rollout.profiler.tool_config", verl_key_use::no_effect, why_profiler, {}, {}},
    {"actor_rollout_ref.rollout.prometheus._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"actor_rollout_ref.rollout.prometheus.enable", verl_key_use::no_effect, why_trace, {}, {}},
    {"actor_rollout_ref.rollout.prometheus.port", verl_key_use::no_effect, why_trace, {}, {}},
    {"actor_rollout_ref.rollout.prometheus.file", verl_key_use::no_effect, why_trace, {}, {}},
    {"actor_rollout_ref.rollout.prometheus.served_model_name", verl_key_use::no_effect, why_trace, {}, {}},
    {"actor_rollout_ref.rollout.quantization", verl_key_use::rejected, why_rollout_feature, instead_none, "null"},
    {"actor_rollout_ref.rollout.quantization_config_file", verl_key_use::rejected, why_rollout_feature, instead_none, "null"},
    {"actor_rollout_ref.rollout.mtp", verl_key_use::rejected, why_rollout_feature, instead_none, "${oc.select:actor_rollout_ref.model.mtp, null}"},
    {"actor_rollout_ref.rollout.layered_summon", verl_key_use::no_effect, why_engine, {}, {}},
    {"actor_rollout_ref.model._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"actor_rollout_ref.model.hf_config_path", verl_key_use::rejected, why_hf_config, instead_hf_config, "null"},
    {"actor_rollout_ref.model.use_shm", verl_key_use::no_effect, why_loading, {}, {}},
    {"actor_rollout_ref.model.trust_remote_code", verl_key_use::no_effect, why_loading, {}, {}},
    {"actor_rollout_ref.model.custom_chat_template", verl_key_use::rejected, why_chat_template, instead_chat_template, "null"},
    {"actor_rollout_ref.model.external_lib", verl_key_use::rejected, why_python_model, instead_hf_config, "null"},
    {"actor_rollout_ref.model.override_config", verl_key_use::rejected, why_python_model, instead_hf_config, "{}"},
    {"actor_rollout_ref.model.enable_activation_offload", verl_key_use::no_effect, why_kernels, {}, {}},
    {"actor_rollout_ref.model.exclude_modules", verl_key_use::rejected, why_lora_more, instead_lora_more, "null"},
    {"actor_rollout_ref.model.lora_adapter_path", verl_key_use::rejected, why_lora_more, instead_lora_more, "null"},
    {"actor_rollout_ref.model.use_liger", verl_key_use::no_effect, why_kernels, {}, {}},
    {"actor_rollout_ref.model.use_fused_kernels", verl_key_use::no_effect, why_kernels, {}, {}},
    {"actor_rollout_ref.model.fused_kernel_options.impl_backend", verl_key_use::no_effect, why_kernels, {}, {}},
    {"actor_rollout_ref.model.tiled_mlp.enabled", verl_key_use::no_effect, why_kernels, {}, {}},
    {"actor_rollout_ref.model.tiled_mlp.num_shards", verl_key_use::no_effect, why_kernels, {}, {}},
    {"actor_rollout_ref.model.mtp._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"actor_rollout_ref.model.mtp.enable", verl_key_use::rejected, why_rollout_feature, instead_none, "false"},
    {"actor_rollout_ref.model.mtp.enable_train", verl_key_use::rejected, why_rollout_feature, instead_none, "false"},
    {"actor_rollout_ref.model.mtp.enable_rollout", verl_key_use::rejected, why_rollout_feature, instead_none, "false"},
    {"actor_rollout_ref.model.mtp.detach_encoder", verl_key_use::rejected, why_rollout_feature, instead_none, "false"},
    {"actor_rollout_ref.model.mtp.mtp_loss_scaling_factor", verl_key_use::rejected, why_rollout_feature, instead_none, "0.1"},
    {"actor_rollout_ref.model.mtp.speculative_algorithm", verl_key_use::rejected, why_rollout_feature, instead_none, "EAGLE"},
    {"actor_rollout_ref.model.mtp.speculative_num_steps", verl_key_use::rejected, why_rollout_feature, instead_none, "2"},
    {"actor_rollout_ref.model.mtp.speculative_eagle_topk", verl_key_use::rejected, why_rollout_feature, instead_none, "2"},
    {"actor_rollout_ref.model.mtp.speculative_num_draft_tokens", verl_key_use::rejected, why_rollout_feature, instead_none, "4"},
    {"actor_rollout_ref.model.mtp.method", verl_key_use::rejected, why_rollout_feature, instead_none, "mtp"},
    {"actor_rollout_ref.model.mtp.num_speculative_tokens", verl_key_use::rejected, why_rollout_feature, instead_none, "1"},
    {"actor_rollout_ref.nccl_timeout", verl_key_use::no_effect, why_ray, {}, {}},
    {"data.tokenizer", verl_key_use::rejected, why_data_tokenizer, instead_data_tokenizer, "null"},
    {"data.use_shm", verl_key_use::no_effect, why_loader, {}, {}},
    {"data.train_max_samples", verl_key_use::rejected, why_max_samples, instead_max_samples, "-1"},
    {"data.val_max_samples", verl_key_use::rejected, why_max_samples, instead_max_samples, "-1"},
    {"data.reward_fn_key", verl_key_use::rejected, why_reward_fn_key, instead_reward_fn_key, "data_source"},
    {"data.tool_config_path", verl_key_use::alias, "actor_rollout_ref.rollout.multi_turn.tool_config_path", {}, {}},
    {"data.return_raw_input_ids", verl_key_use::no_effect, why_loader, {}, {}},
    {"data.return_raw_chat", verl_key_use::no_effect, why_loader, {}, {}},
    {"data.return_full_prompt", verl_key_use::no_effect, why_loader, {}, {}},
    {"data.dataloader_num_workers", verl_key_use::no_effect, why_loader, {}, {}},
    {"data.image_patch_size", verl_key_use::no_effect, why_multimodal, {}, {}},
    {"data.validation_shuffle", verl_key_use::no_effect, why_loader, {}, {}},
    {"data.filter_overlong_prompts_workers", verl_key_use::no_effect, why_loader, {}, {}},
    {"data.image_key", verl_key_use::no_effect, why_multimodal, {}, {}},
    {"data.video_key", verl_key_use::no_effect, why_multimodal, {}, {}},
    {"data.trust_remote_code", verl_key_use::no_effect, why_loader, {}, {}},
    {"data.custom_cls.path", verl_key_use::rejected, why_python_data, instead_python_data, "null"},
    {"data.custom_cls.name", verl_key_use::rejected, why_python_data, instead_python_data, "null"},
    {"data.return_multi_modal_inputs", verl_key_use::no_effect, why_multimodal, {}, {}},
    {"data.sampler.class_path", verl_key_use::rejected, why_python_data, instead_python_data, "null"},
    {"data.sampler.class_name", verl_key_use::rejected, why_python_data, instead_python_data, "null"},
    {"data.datagen.path", verl_key_use::rejected, why_python_data, instead_python_data, "null"},
    {"data.datagen.name", verl_key_use::rejected, why_python_data, instead_python_data, "null"},
    {"data.apply_chat_template_kwargs", verl_key_use::rejected, why_chat_template, instead_chat_template, "{}"},
    {"reward_manager._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"reward_manager.source", verl_key_use::rejected, why_reward_manager, instead_reward_model, "register"},
    {"reward_manager.name", verl_key_use::rejected, why_reward_manager, instead_reward_model, "${oc.select:reward_model.reward_manager,naive}"},
    {"reward_manager.module._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"reward_manager.module.path", verl_key_use::rejected, why_reward_manager, instead_reward_model, "null"},
    {"reward_manager.module.name", verl_key_use::rejected, why_reward_manager, instead_reward_model, "custom_reward_manager"},
    {"critic.optim._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"critic.optim.optimizer", verl_key_use::rejected, why_optimizer, instead_optimizer, "AdamW"},
    {"critic.optim.optimizer_impl", verl_key_use::rejected, why_optimizer, instead_optimizer, "torch.optim"},
    {"critic.optim.total_training_steps", verl_key_use::no_effect, why_total_steps, {}, {}},
    {"critic.optim.clip_grad", verl_key_use::alias, "critic.grad_clip", {}, {}},
    {"critic.optim.num_cycles", verl_key_use::rejected, why_num_cycles, instead_none, "0.5"},
    {"critic.optim.warmup_style", verl_key_use::alias, "critic.optim.lr_scheduler_type", {}, {}},
    {"critic.optim.override_optimizer_config", verl_key_use::rejected, why_optimizer, instead_optimizer, "null"},
    {"critic.model.fsdp_config._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"critic.model.fsdp_config.wrap_policy.min_num_params", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"critic.model.fsdp_config.param_offload", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"critic.model.fsdp_config.optimizer_offload", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"critic.model.fsdp_config.offload_policy", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"critic.model.fsdp_config.reshard_after_forward", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"critic.model.fsdp_config.fsdp_size", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"critic.model.fsdp_config.forward_prefetch", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"critic.model.fsdp_config.model_dtype", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"critic.model.fsdp_config.use_orig_params", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"critic.model.fsdp_config.seed", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"critic.model.fsdp_config.full_determinism", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"critic.model.fsdp_config.ulysses_sequence_parallel_size", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"critic.model.fsdp_config.entropy_from_logits_with_chunking", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"critic.model.fsdp_config.use_torch_compile", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"critic.model.fsdp_config.entropy_checkpointing", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"critic.model.fsdp_config.forward_only", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"critic.model.fsdp_config.strategy", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"critic.model.fsdp_config.dtype", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"critic.model.tokenizer_path", verl_key_use::no_effect, why_critic_tokenizer, {}, {}},
    {"critic.model.override_config", verl_key_use::rejected, why_python_model, instead_hf_config, "{}"},
    {"critic.model.external_lib", verl_key_use::rejected, why_python_model, instead_hf_config, "${oc.select:actor_rollout_ref.model.external_lib,null}"},
    {"critic.model.trust_remote_code", verl_key_use::no_effect, why_loading, {}, {}},
    {"critic.model._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"critic.model.use_shm", verl_key_use::no_effect, why_loading, {}, {}},
    {"critic.model.enable_activation_offload", verl_key_use::no_effect, why_kernels, {}, {}},
    {"critic.model.lora_rank", verl_key_use::rejected, why_lora, instead_lora, "0"},
    {"critic.model.lora_alpha", verl_key_use::rejected, why_lora, instead_lora, "16"},
    {"critic.model.target_modules", verl_key_use::rejected, why_lora, instead_lora, "all-linear"},
    {"critic.model.tiled_mlp.enabled", verl_key_use::no_effect, why_kernels, {}, {}},
    {"critic.model.tiled_mlp.num_shards", verl_key_use::no_effect, why_kernels, {}, {}},
    {"critic._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"critic.rollout_n", verl_key_use::no_effect, why_rollout_n, {}, {}},
    {"critic.forward_max_token_len_per_gpu", verl_key_use::no_effect, why_critic_forward, {}, {}},
    {"critic.data_loader_seed", verl_key_use::no_effect, why_critic_seed, {}, {}},
    {"critic.checkpoint._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"critic.checkpoint.save_contents", verl_key_use::no_effect, why_checkpoint, {}, {}},
    {"critic.checkpoint.load_contents", verl_key_use::no_effect, why_checkpoint, {}, {}},
    {"critic.checkpoint.async_save", verl_key_use::no_effect, why_checkpoint, {}, {}},
    {"critic.profiler._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"critic.profiler.tool", verl_key_use::no_effect, why_profiler, {}, {}},
    {"critic.profiler.enable", verl_key_use::no_effect, why_profiler, {}, {}},
    {"critic.profiler.all_ranks", verl_key_use::no_effect, why_profiler, {}, {}},
    {"critic.profiler.ranks", verl_key_use::no_effect, why_profiler, {}, {}},
    {"critic.profiler.save_path", verl_key_use::no_effect, why_profiler, {}, {}},
    {"critic.profiler.tool_config.nsys._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"critic.profiler.tool_config.nsys.discrete", verl_key_use::no_effect, why_profiler, {}, {}},
    {"critic.profiler.tool_config.npu._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"critic.profiler.tool_config.npu.contents", verl_key_use::no_effect, why_profiler, {}, {}},
    {"critic.profiler.tool_config.npu.level", verl_key_use::no_effect, why_profiler, {}, {}},
    {"critic.profiler.tool_config.npu.analysis", verl_key_use::no_effect, why_profiler, {}, {}},
    {"critic.profiler.tool_config.npu.discrete", verl_key_use::no_effect, why_profiler, {}, {}},
    {"critic.profiler.tool_config.torch._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"critic.profiler.tool_config.torch.contents", verl_key_use::no_effect, why_profiler, {}, {}},
    {"critic.profiler.tool_config.torch.discrete", verl_key_use::no_effect, why_profiler, {}, {}},
    {"critic.profiler.tool_config.torch_memory._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"critic.profiler.tool_config.torch_memory.trace_alloc_max_entries", verl_key_use::no_effect, why_profiler, {}, {}},
    {"critic.profiler.tool_config.torch_memory.stack_depth", verl_key_use::no_effect, why_profiler, {}, {}},
    {"critic.forward_micro_batch_size", verl_key_use::no_effect, why_critic_forward, {}, {}},
    {"critic.forward_micro_batch_size_per_gpu", verl_key_use::no_effect, why_critic_forward, {}, {}},
    {"reward_model.enable", verl_key_use::alias, "reward.reward_model.enable", {}, {}},
    {"reward_model.enable_resource_pool", verl_key_use::alias, "reward.reward_model.enable_resource_pool", {}, {}},
    {"reward_model.n_gpus_per_node", verl_key_use::alias, "reward.reward_model.n_gpus_per_node", {}, {}},
    {"reward_model.nnodes", verl_key_use::alias, "reward.reward_model.nnodes", {}, {}},
    {"reward_model.strategy", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"reward_model.model.input_tokenizer", verl_key_use::rejected, why_reward_model, instead_reward_model, "${actor_rollout_ref.model.path}"},
    {"reward_model.model.path", verl_key_use::rejected, why_reward_model, instead_reward_model, "~/models/FsfairX-LLaMA3-RM-v0.1"},
    {"reward_model.model.external_lib", verl_key_use::rejected, why_reward_model, instead_reward_model, "${actor_rollout_ref.model.external_lib}"},
    {"reward_model.model.trust_remote_code", verl_key_use::rejected, why_reward_model, instead_reward_model, "false"},
    {"reward_model.model.override_config", verl_key_use::rejected, why_reward_model, instead_reward_model, "{}"},
    {"reward_model.model.use_shm", verl_key_use::rejected, why_reward_model, instead_reward_model, "false"},
    {"reward_model.model.use_remove_padding", verl_key_use::no_effect, why_reward_model_padding, {}, {}},
    {"reward_model.model.use_fused_kernels", verl_key_use::no_effect, why_kernels, {}, {}},
    {"reward_model.model.fsdp_config._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"reward_model.model.fsdp_config.wrap_policy.min_num_params", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"reward_model.model.fsdp_config.param_offload", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"reward_model.model.fsdp_config.reshard_after_forward", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"reward_model.model.fsdp_config.fsdp_size", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"reward_model.model.fsdp_config.forward_prefetch", verl_key_use::no_effect, why_fsdp, {}, {}},
    {"reward_model.micro_batch_size", verl_key_use::rejected, why_reward_model, instead_reward_model, "null"},
    {"reward_model.micro_batch_size_per_gpu", verl_key_use::rejected, why_reward_model, instead_reward_model, "null"},
    {"reward_model.max_length", verl_key_use::rejected, why_reward_model, instead_reward_model, "null"},
    {"reward_model.use_dynamic_bsz", verl_key_use::rejected, why_reward_model, instead_reward_model, "${critic.use_dynamic_bsz}"},
    {"reward_model.forward_max_token_len_per_gpu", verl_key_use::rejected, why_reward_model, instead_reward_model, "${critic.forward_max_token_len_per_gpu}"},
    {"reward_model.reward_manager", verl_key_use::rejected, why_reward_model, instead_reward_model, "naive"},
    {"reward_model.reward_loop_source", verl_key_use::rejected, why_reward_model, instead_reward_model, "register"},
    {"reward_model.reward_loop_module_path", verl_key_use::rejected, why_reward_model, instead_reward_model, "null"},
    {"reward_model.reward_loop_class_name", verl_key_use::rejected, why_reward_model, instead_reward_model, "null"},
    {"reward_model.launch_reward_fn_async", verl_key_use::rejected, why_reward_model, instead_reward_model, "false"},
    {"reward_model.sandbox_fusion.url", verl_key_use::rejected, why_reward_model, instead_reward_model, "null"},
    {"reward_model.sandbox_fusion.max_concurrent", verl_key_use::rejected, why_reward_model, instead_reward_model, "64"},
    {"reward_model.sandbox_fusion.memory_limit_mb", verl_key_use::rejected, why_reward_model, instead_reward_model, "1024"},
    {"reward_model.profiler._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"reward_model.profiler.tool", verl_key_use::no_effect, why_profiler, {}, {}},
    {"reward_model.profiler.enable", verl_key_use::no_effect, why_profiler, {}, {}},
    {"reward_model.profiler.all_ranks", verl_key_use::no_effect, why_profiler, {}, {}},
    {"reward_model.profiler.ranks", verl_key_use::no_effect, why_profiler, {}, {}},
    {"reward_model.profiler.save_path", verl_key_use::no_effect, why_profiler, {}, {}},
    {"reward_model.profiler.tool_config", verl_key_use::no_effect, why_profiler, {}, {}},
    {"reward_model.ulysses_sequence_parallel_size", verl_key_use::rejected, why_reward_model, instead_reward_model, "1"},
    {"reward_model.use_reward_loop", verl_key_use::rejected, why_reward_model, instead_reward_model, "true"},
    {"reward_model.num_workers", verl_key_use::rejected, why_reward_model, instead_reward_model, "1"},
    {"reward_model.rollout._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"reward_model.rollout.name", verl_key_use::rejected, why_reward_model, instead_reward_model, "???"},
    {"reward_model.rollout.dtype", verl_key_use::rejected, why_reward_model, instead_reward_model, "bfloat16"},
    {"reward_model.rollout.gpu_memory_utilization", verl_key_use::rejected, why_reward_model, instead_reward_model, "0.5"},
    {"reward_model.rollout.enforce_eager", verl_key_use::rejected, why_reward_model, instead_reward_model, "true"},
    {"reward_model.rollout.cudagraph_capture_sizes", verl_key_use::rejected, why_reward_model, instead_reward_model, "null"},
    {"reward_model.rollout.free_cache_engine", verl_key_use::rejected, why_reward_model, instead_reward_model, "true"},
    {"reward_model.rollout.data_parallel_size", verl_key_use::rejected, why_reward_model, instead_reward_model, "1"},
    {"reward_model.rollout.expert_parallel_size", verl_key_use::rejected, why_reward_model, instead_reward_model, "1"},
    {"reward_model.rollout.tensor_model_parallel_size", verl_key_use::rejected, why_reward_model, instead_reward_model, "2"},
    {"reward_model.rollout.max_num_batched_tokens", verl_key_use::rejected, why_reward_model, instead_reward_model, "8192"},
    {"reward_model.rollout.max_model_len", verl_key_use::rejected, why_reward_model, instead_reward_model, "null"},
    {"reward_model.rollout.max_num_seqs", verl_key_use::rejected, why_reward_model, instead_reward_model, "1024"},
    {"reward_model.rollout.load_format", verl_key_use::rejected, why_reward_model, instead_reward_model, "auto"},
    {"reward_model.rollout.engine_kwargs", verl_key_use::rejected, why_reward_model, instead_reward_model, "{}"},
    {"reward_model.rollout.limit_images", verl_key_use::rejected, why_reward_model, instead_reward_model, "null"},
    {"reward_model.rollout.enable_chunked_prefill", verl_key_use::rejected, why_reward_model, instead_reward_model, "true"},
    {"reward_model.rollout.enable_prefix_caching", verl_key_use::rejected, why_reward_model, instead_reward_model, "true"},
    {"reward_model.rollout.disable_log_stats", verl_key_use::rejected, why_reward_model, instead_reward_model, "true"},
    {"reward_model.rollout.skip_tokenizer_init", verl_key_use::rejected, why_reward_model, instead_reward_model, "false"},
    {"reward_model.rollout.prompt_length", verl_key_use::rejected, why_reward_model, instead_reward_model, "2048"},
    {"reward_model.rollout.response_length", verl_key_use::rejected, why_reward_model, instead_reward_model, "2048"},
    {"algorithm._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"algorithm.kl_ctrl._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"trainer.validation_data_dir", verl_key_use::rejected, why_validation_dir, instead_validation_dir, "null"},
    {"trainer.esi_redundant_time", verl_key_use::no_effect, why_ray, {}, {}},
    {"trainer.default_hdfs_dir", verl_key_use::no_effect, why_checkpoint, {}, {}},
    {"trainer.del_local_ckpt_after_load", verl_key_use::no_effect, why_checkpoint, {}, {}},
    {"trainer.ray_wait_register_center_timeout", verl_key_use::no_effect, why_ray, {}, {}},
    {"trainer.use_legacy_worker_impl", verl_key_use::no_effect, why_ray, {}, {}},
    {"global_profiler._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"global_profiler.tool", verl_key_use::no_effect, why_profiler, {}, {}},
    {"global_profiler.steps", verl_key_use::no_effect, why_profiler, {}, {}},
    {"global_profiler.profile_continuous_steps", verl_key_use::no_effect, why_profiler, {}, {}},
    {"global_profiler.save_path", verl_key_use::no_effect, why_profiler, {}, {}},
    {"global_profiler.global_tool_config.nsys._target_", verl_key_use::no_effect, why_hydra, {}, {}},
    {"global_profiler.global_tool_config.nsys.discrete", verl_key_use::no_effect, why_profiler, {}, {}},
    {"global_profiler.global_tool_config.nsys.controller_nsight_options.trace", verl_key_use::no_effect, why_profiler, {}, {}},
    {"global_profiler.global_tool_config.nsys.controller_nsight_options.cuda-memory-usage", verl_key_use::no_effect, why_profiler, {}, {}},
    {"global_profiler.global_tool_config.nsys.controller_nsight_options.cuda-graph-trace", verl_key_use::no_effect, why_profiler, {}, {}},
    {"global_profiler.global_tool_config.nsys.worker_nsight_options.trace", verl_key_use::no_effect, why_profiler, {}, {}},
    {"global_profiler.global_tool_config.nsys.worker_nsight_options.cuda-memory-usage", verl_key_use::no_effect, why_profiler, {}, {}},
    {"global_profiler.global_tool_config.nsys.worker_nsight_options.cuda-graph-trace", verl_key_use::no_effect, why_profiler, {}, {}},
    {"global_profiler.global_tool_config.nsys.worker_nsight_options.capture-range", verl_key_use::no_effect, why_profiler, {}, {}},
    {"global_profiler.global_tool_config.nsys.worker_nsight_options.capture-range-end", verl_key_use::no_effect, why_profiler, {}, {}},
    {"global_profiler.global_tool_config.nsys.worker_nsight_options.kill", verl_key_use::no_effect, why_profiler, {}, {}},
    {"global_profiler.global_tool_config.torch_memory.trace_alloc_max_entries", verl_key_use::no_effect, why_profiler, {}, {}},
    {"global_profiler.global_tool_config.torch_memory.stack_depth", verl_key_use::no_effect, why_profiler, {}, {}},
    {"global_profiler.global_tool_config.torch_memory.context", verl_key_use::no_effect, why_profiler, {}, {}},
    {"global_profiler.global_tool_config.torch_memory.stacks", verl_key_use::no_effect, why_profiler, {}, {}},
    {"global_profiler.global_tool_config.torch_memory.kw_args", verl_key_use::no_effect, why_profiler, {}, {}},
    {"transfer_queue.enable", verl_key_use::no_effect, why_ray, {}, {}},
    {"ray_kwargs.ray_init.num_cpus", verl_key_use::no_effect, why_ray, {}, {}},
    {"ray_kwargs.timeline_json_file", verl_key_use::no_effect, why_ray, {}, {}},
};

inline constexpr std::size_t verl_key_rule_count = sizeof(verl_key_rules) / sizeof(verl_key_rules[0]);
//! 64-bit words of TrainerConfig::verl_keys_without_effect (one bit per row).
inline constexpr std::size_t verl_key_rule_words = (verl_key_rule_count + 63) / 64;

//! The row of 'key', or nullptr.
constexpr verl_key_rule const* find_verl_key(std::string_view key) {
  for (auto const& r : verl_key_rules)
    if (r.key == key) return &r;
  return nullptr;
}

}  // namespace rlflow::detail
