// rlflow/trainer_config/keys.hpp: the key table: RLFLOW_TRAINER_CONFIG_KEYS (every key with its choices and help),
// the key kinds and detail::config_keys, and the constexpr choice checks.
// Part of rlflow/config/trainer_config.hpp (include that one).
#pragma once
#include <rlflow/trainer_config/schema.hpp>
#include <string_view>
#include <type_traits>   // std::is_same_v
#include <utility>       // std::declval

namespace rlflow {

// ---- the key table ----------------------------------------------------------------------------
// X(path, choices, help). choices: "a|b|c" ("null|..." allows an empty/null value), or "". A leading
// '|' is ignored (algorithm.adv_estimator's choices come from the estimator table that way).
#define RLFLOW_TRAINER_CONFIG_KEYS(X)                                                                              \
  X(data.train_files, "", "prompt file(s) of the training set: JSON lines in verl's schema (verl: parquet)")         \
  X(data.val_files, "", "prompt file of the validation set")                                                      \
  X(data.prompt_key, "", "field holding the prompt in each record")                                               \
  X(data.chat_template, "model|chatml|llama3|plain", "rlflow: how chat-message prompts become text: model (the folder's Jinja chat_template, else the plain User:/Assistant: rendering) or a built-in template") \
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
  X(actor_rollout_ref.model.path, "", "Hugging Face model folder (config.json of model_type gpt2, llama, qwen2 or qwen3, model.safetensors, the tokenizer files); empty: random init") \
  X(actor_rollout_ref.model.tokenizer_path, "", "folder with tokenizer.json, or vocab.json and merges.txt; empty: model.path")       \
  X(actor_rollout_ref.model.vocab_size, "", "rlflow: vocabulary size of the built-in GPT; 0: the task tokenizer's") \
  X(actor_rollout_ref.model.n_layer, "", "rlflow: transformer blocks of the built-in GPT")                          \
  X(actor_rollout_ref.model.n_head, "", "rlflow: attention heads of the built-in GPT")                             \
  X(actor_rollout_ref.model.n_embd, "", "rlflow: embedding width of the built-in GPT")                             \
  X(actor_rollout_ref.model.arch, "gpt2|llama|qwen2|qwen3", "rlflow: the built-in model's architecture (model.path empty): GPT-2, or a Llama-family model of the same width with n_head / 2 key/value heads and a SwiGLU MLP of 3 n_embd; with model.path, the folder's model_type") \
  X(actor_rollout_ref.model.lm_head, "auto|vocab_parallel|replicated", "rlflow: the LM head's split under tensor parallelism (rollout TP<N>, training TP); auto: vocab_parallel from 256 tokens") \
  X(actor_rollout_ref.model.use_remove_padding, "", "pack the rows' real tokens end to end (no padding) in the actor's and reference's log-prob and update passes") \
  X(actor_rollout_ref.model.enable_gradient_checkpointing, "", "activation checkpointing in the actor and reference: keep each layer's input only, recompute the layer in the backward (bit-identical gradients; CPU engines; verl's default true, rlflow's false)") \
  X(actor_rollout_ref.model.lora_rank, "", "LoRA rank r of the actor's adapters; 0: train full weights") \
  X(actor_rollout_ref.model.lora_alpha, "", "LoRA alpha: the adapters' output is scaled by lora_alpha / lora_rank") \
  X(actor_rollout_ref.model.target_modules, "all-linear|q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj|c_attn|c_proj|c_fc", "linears that get LoRA adapters: all-linear (every projection of a block) or a list of module names") \
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
  X(actor_rollout_ref.rollout.gpu_memory_utilization, "", "CUDA: fraction of device memory the rollout may fill (weights + KV block pool), in (0, 1]")       \
  X(actor_rollout_ref.rollout.enable_prefix_caching, "", "reuse cached KV blocks of an equal token prefix across requests") \
  X(actor_rollout_ref.rollout.enable_chunked_prefill, "", "split long prefills into chunks scheduled with the decodes") \
  X(actor_rollout_ref.rollout.max_num_batched_tokens, "", "tokens (prefill chunks plus decodes) in one engine step") \
  X(actor_rollout_ref.rollout.max_num_seqs, "", "sequences (samples) the rollout engine runs at once")            \
  X(actor_rollout_ref.rollout.block_size, "", "rlflow: positions per KV-cache block of the paged rollout engine")   \
  X(actor_rollout_ref.rollout.kv_cache_bytes, "", "rlflow: the rollout's KV block pool in bytes; 0: derived from max_num_seqs and free memory (CUDA: gpu_memory_utilization)") \
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
  X(actor_rollout_ref.rollout.agent.num_workers, "", "tool-call threads per rollout worker (its conversations are all in flight at once)")                    \
  X(actor_rollout_ref.rollout.agent.default_agent_loop, "", "agent loop of rows without an agent_name column: single_turn_agent, tool_agent or a registered one") \
  X(actor_rollout_ref.rollout.multi_turn.enable, "", "roll out through the agent loop (tool calls over several turns); rows may also name a loop in agent_name") \
  X(actor_rollout_ref.rollout.multi_turn.max_assistant_turns, "", "assistant turns per conversation at most; null: no limit") \
  X(actor_rollout_ref.rollout.multi_turn.max_user_turns, "", "tool / user turns per conversation at most; null: no limit") \
  X(actor_rollout_ref.rollout.multi_turn.max_parallel_calls, "", "tool calls run per assistant turn at most (the rest are dropped)") \
  X(actor_rollout_ref.rollout.multi_turn.max_tool_response_length, "", "characters of a tool answer kept; 0: no limit") \
  X(actor_rollout_ref.rollout.multi_turn.tool_response_truncate_side, "left|right|middle", "which part of a long tool answer is cut: left keeps the start, right the end, middle both ends") \
  X(actor_rollout_ref.rollout.multi_turn.format, "hermes", "tool-call format the model writes: hermes (<tool_call>{...}</tool_call>)") \
  X(actor_rollout_ref.rollout.multi_turn.tokenization_sanity_check_mode, "strict|ignore_strippable|disable", "compare the conversation's ids with the template's tokenized after each tool turn") \
  X(actor_rollout_ref.rollout.multi_turn.tool_config_path, "", "tool configuration file (verl's YAML shape); empty: no tools") \
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
  X(critic.model.use_remove_padding, "", "pack the rows' real tokens end to end (no padding) in the critic's passes") \
  X(critic.model.enable_gradient_checkpointing, "", "activation checkpointing in the critic: keep each layer's input only, recompute the layer in the backward (bit-identical gradients; verl's default true, rlflow's false)") \
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
  X(algorithm.adv_estimator, RLFLOW_DETAIL_ESTIMATOR_CHOICES, "advantage estimator")                             \
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
  X(trainer.logger, "console|file|jsonl|tensorboard|wandb|swanlab|mlflow|vemlp_wandb|clearml|trackio",             \
    "metric sinks, e.g. [console,tensorboard]: console prints, file / jsonl write metrics.jsonl, tensorboard writes event files; hosted ones only print a notice") \
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
  X(trainer.rollout_data_dir, "", "write each step's generations to <dir>/<step>.jsonl (input, output, score, step); empty: none") \
  X(trainer.val_only, "", "run the validation once and stop (needs data.val_files)")                               \
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

//! 'choices' without the leading '|' that a generated list has.
constexpr std::string_view choice_list(std::string_view choices) {
  if (!choices.empty() && choices.front() == '|') choices.remove_prefix(1);
  return choices;
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
                             ::rlflow::detail::choice_list(choices), help,                                  \
                             +[](::rlflow::TrainerConfig& c) -> void* { return &c.path; }},

inline constexpr key_info config_keys[] = {RLFLOW_TRAINER_CONFIG_KEYS(RLFLOW_DETAIL_KEY_ROW)};
#undef RLFLOW_DETAIL_KEY_ROW

//! True when 'v' is one of the '|'-separated 'choices' ("null" admits an empty value).
constexpr bool one_of(std::string_view v, std::string_view choices) {
  choices = choice_list(choices);
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
  // an index loop: g++ 12 cannot evaluate string_view::find's pointer test on a member array at compile time
  std::string_view const s = v.joined.view();
  std::size_t start = 0;
  for (std::size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == ',') {
      if (i > start && !one_of(s.substr(start, i - start), choices)) return false;
      start = i + 1;
    }
  return true;
}
template <class T>
constexpr bool choice_ok(T const&, std::string_view) { return true; }

}  // namespace detail

}  // namespace rlflow
