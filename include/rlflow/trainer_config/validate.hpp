// rlflow/trainer_config/validate.hpp: start-up validation (verl's start-up asserts): one constexpr predicate per check
// (config_checks), the messages with the numbers (explain), validate / check / warnings, and
// the compile-time check checked_config<cfg>.
// Part of rlflow/config/trainer_config.hpp (include that one).
#pragma once
#include <rlflow/trainer_config/parse.hpp>
#include <cmath>
#include <cstdint>
#include <numeric>  // std::gcd
#include <string>
#include <string_view>
#include <vector>

#include <rlflow/core/config.hpp>  // RLFLOW_DECL, RLFLOW_DEFINE_BODIES
#include <rlflow/core/error.hpp>  // config_error

namespace rlflow {

// ---- start-up validation (verl's start-up asserts) ---------------------------------------

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
// verl: model.lora_rank >= 0 (0 off), lora_alpha > 0; rlflow's LoRA runs at training TP 1 and
// adapts the actor only (critic.model.lora_rank stays rejected in verl_keys.hpp).
constexpr bool lora_settings(cfg_t const& c) {
  auto const& m = c.actor_rollout_ref.model;
  if (m.lora_rank == 0) return true;
  return m.lora_rank > 0 && m.lora_rank <= 65536 && m.lora_alpha > 0.0 && m.lora_alpha < 1e9 && !m.target_modules.joined.view().empty() &&
         c.actor_rollout_ref.actor.megatron.tensor_model_parallel_size == 1 && c.actor_rollout_ref.rollout.tensor_model_parallel_size == 1;
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
// verl/trainer/ppo/utils.py:96-107: a critic is needed by gae (the estimators with needs_critic)
constexpr bool critic_for_gae(cfg_t const& c) {
  return !estimator_of(c.algorithm.adv_estimator.view()).needs_critic || c.uses_critic();
}
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
// verl/utils/seqlen_balancing.py (rearrange_micro_batches asserts that the longest row fits the budget)
constexpr bool dynamic_bsz_budget_fits(cfg_t const& c) {
  auto const row = c.data.max_prompt_length + c.data.max_response_length;
  auto const& arr = c.actor_rollout_ref;
  return (!arr.actor.use_dynamic_bsz || arr.actor.ppo_max_token_len_per_gpu >= row) &&
         (!c.rollout_log_prob_use_dynamic_bsz() || arr.rollout.log_prob_max_token_len_per_gpu >= row) &&
         (!c.uses_reference() || !c.ref_log_prob_use_dynamic_bsz() || arr.ref.log_prob_max_token_len_per_gpu >= row) &&
         (!c.uses_critic() || !c.critic.use_dynamic_bsz || c.critic.ppo_max_token_len_per_gpu >= row);
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
// verl: multi_turn turn limits (null or positive), parallel calls, tool answer length, agent loop name, agent workers
constexpr bool multi_turn_ranges(cfg_t const& c) {
  auto const& m = c.actor_rollout_ref.rollout.multi_turn;
  auto const& a = c.actor_rollout_ref.rollout.agent;
  return m.max_assistant_turns.value_or(1) >= 1 && m.max_user_turns.value_or(1) >= 1 && m.max_parallel_calls >= 1 &&
         m.max_tool_response_length >= 0 && !a.default_agent_loop.view().empty() && a.num_workers >= 1 && a.num_workers <= 4096;
}
// verl/trainer/ppo/ray_trainer.py:267-270 (the estimators with needs_sum_pi_squared)
constexpr bool otb_sum_pi_squared(cfg_t const& c) {
  return !estimator_of(c.algorithm.adv_estimator.view()).needs_sum_pi_squared ||
         c.actor_rollout_ref.actor.calculate_sum_pi_squared;
}
// verl core_algos.py:516-519 (grpo_passk: the estimator's min_group_size)
constexpr bool passk_group_size(cfg_t const& c) {
  auto const need = estimator_of(c.algorithm.adv_estimator.view()).min_group_size;
  return need <= 1 || c.actor_rollout_ref.rollout.n >= need;
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
  X(lora_settings, "actor_rollout_ref.model.lora_rank must be 0 (off) or in [1, 65536] with lora_alpha > 0, target_modules not empty, and training and rollout tensor_model_parallel_size 1; fix the LoRA keys") \
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
  X(dynamic_bsz_budget_fits, "with use_dynamic_bsz every token budget (ppo_max_token_len_per_gpu, log_prob_max_token_len_per_gpu) must hold one row of data.max_prompt_length + data.max_response_length tokens; raise the budget") \
  X(val_sampling_temperature, "actor_rollout_ref.rollout.val_kwargs.do_sample=true needs val_kwargs.temperature > 0; set a positive temperature or do_sample=false") \
  X(sampling_ranges, "actor_rollout_ref.rollout sampling needs temperature >= 0, 0 < top_p <= 1, top_k >= -1 and val_kwargs.n >= 1; fix the sampling keys") \
  X(multi_turn_ranges, "actor_rollout_ref.rollout.multi_turn needs max_assistant_turns and max_user_turns null or >= 1, max_parallel_calls >= 1, max_tool_response_length >= 0, agent.default_agent_loop named and agent.num_workers in 1..4096 (tool threads per rollout worker); fix the offending key") \
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
RLFLOW_DECL std::int64_t largest_divisor_upto(std::int64_t n, std::int64_t cap);

//! The run-time message of a failed check: the keys, their values and a fix.
RLFLOW_DECL std::string explain(config_check_id id, TrainerConfig const& c);

}  // namespace detail

//! Every violated start-up constraint of 'cfg', each message naming the keys, their values and
//! a fix; empty when the config is valid. Includes the string keys' choice checks.
//! verl: verl/utils/config.py validate_config, the worker/config __post_init__ checks, and the
//! v1 trainers' start-up asserts.
RLFLOW_DECL std::vector<std::string> validate(TrainerConfig const& cfg);

//! The names of the failed checks (config_checks::<name>), in table order; choice checks excluded.
RLFLOW_DECL std::vector<std::string_view> failed_checks(TrainerConfig const& cfg);

//! Advisories that do not stop a run (verl prints these as warnings).
RLFLOW_DECL std::vector<std::string> warnings(TrainerConfig const& cfg);

//! Throws config_error listing every violation (validate) when 'cfg' is invalid. Call it before
//! any work starts. verl: validate_config.
RLFLOW_DECL void check(TrainerConfig const& cfg);

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

#if RLFLOW_DEFINE_BODIES
#include <rlflow/trainer_config/impl/validate.ipp>
#endif
