// rlflow/trainer_config/impl/validate.ipp: the bodies of the non-template functions declared in rlflow/trainer_config/validate.hpp (see RLFLOW_DECL in rlflow/core/config.hpp).
#pragma once

namespace rlflow {
namespace detail {

RLFLOW_DECL std::int64_t largest_divisor_upto(std::int64_t n, std::int64_t cap) {
  for (std::int64_t d = std::min(n, cap); d >= 1; --d)
    if (n % d == 0) return d;
  return 1;
}

RLFLOW_DECL std::string explain(config_check_id id, TrainerConfig const& c) {
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
      // B * n is a multiple of W exactly when B is a multiple of W / gcd(W, n): suggest reachable B
      std::int64_t const step = n > 0 ? W / std::gcd(W, n) : W;
      auto const lo = B / step * step, hi = lo + step;
      return msg("data.train_batch_size=", B, " * actor_rollout_ref.rollout.n=", n, " = ", B * n,
                 " rows must be divisible by ", world_txt, "; set data.train_batch_size to a multiple of ", step,
                 " (e.g. ", lo > 0 ? lo : hi, " or ", lo > 0 ? hi : hi + step, ") or change the device count");
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
      return msg("algorithm.adv_estimator=", c.algorithm.adv_estimator, " needs a value model but critic.enable=",
                 opt_text(c.critic.enable),
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
    case config_check_id::dynamic_bsz_budget_fits: {
      auto const row = c.data.max_prompt_length + c.data.max_response_length;
      auto const& arr = c.actor_rollout_ref;
      std::string key = "critic.ppo_max_token_len_per_gpu";
      std::int64_t v = c.critic.ppo_max_token_len_per_gpu;
      if (a.use_dynamic_bsz && a.ppo_max_token_len_per_gpu < row) {
        key = "actor_rollout_ref.actor.ppo_max_token_len_per_gpu", v = a.ppo_max_token_len_per_gpu;
      } else if (c.rollout_log_prob_use_dynamic_bsz() && r.log_prob_max_token_len_per_gpu < row) {
        key = "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu", v = r.log_prob_max_token_len_per_gpu;
      } else if (c.uses_reference() && c.ref_log_prob_use_dynamic_bsz() && arr.ref.log_prob_max_token_len_per_gpu < row) {
        key = "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu", v = arr.ref.log_prob_max_token_len_per_gpu;
      }
      return msg(key, "=", v, " is below one row of data.max_prompt_length=", c.data.max_prompt_length,
                 " + data.max_response_length=", c.data.max_response_length, " = ", row,
                 " tokens, and a token-budget micro-batch (use_dynamic_bsz=true) holds whole rows; set ", key, "=", row,
                 " or more");
    }
    case config_check_id::val_sampling_temperature:
      return msg("actor_rollout_ref.rollout.val_kwargs.do_sample=true needs val_kwargs.temperature > 0, got ",
                 num(r.val_kwargs.temperature),
                 "; set actor_rollout_ref.rollout.val_kwargs.temperature=1.0 or val_kwargs.do_sample=false");
    case config_check_id::sampling_ranges:
      return msg("actor_rollout_ref.rollout.temperature=", num(r.temperature), " top_p=", num(r.top_p), " top_k=",
                 r.top_k, " val_kwargs.temperature=", num(r.val_kwargs.temperature), " val_kwargs.top_p=",
                 num(r.val_kwargs.top_p), " val_kwargs.top_k=", r.val_kwargs.top_k, " val_kwargs.n=", r.val_kwargs.n,
                 ": need temperature >= 0, 0 < top_p <= 1, top_k >= -1 (-1 or 0: off), n >= 1; fix the offending key");
    case config_check_id::multi_turn_ranges: {
      auto const& m = r.multi_turn;
      return msg("actor_rollout_ref.rollout.multi_turn.max_assistant_turns=", opt_text(m.max_assistant_turns),
                 " max_user_turns=", opt_text(m.max_user_turns), " max_parallel_calls=", m.max_parallel_calls,
                 " max_tool_response_length=", m.max_tool_response_length, " agent.default_agent_loop='",
                 r.agent.default_agent_loop, "' agent.num_workers=", r.agent.num_workers,
                 ": need the turn limits null (no limit) or >= 1, max_parallel_calls >= 1, ",
                 "max_tool_response_length >= 0 (0: no limit), a loop name (single_turn_agent, tool_agent) and ",
                 "agent.num_workers in 1..4096 (the tool threads of one rollout worker); fix the offending key");
    }
    case config_check_id::otb_sum_pi_squared:
      return msg("algorithm.adv_estimator=", c.algorithm.adv_estimator,
                 " needs sum_pi_squared but actor_rollout_ref.actor.calculate_sum_pi_squared=false; set "
                 "actor_rollout_ref.actor.calculate_sum_pi_squared=true");
    case config_check_id::passk_group_size:
      return msg("algorithm.adv_estimator=", c.algorithm.adv_estimator, " needs groups of at least ",
                 estimator_of(c.algorithm.adv_estimator.view()).min_group_size, " but actor_rollout_ref.rollout.n=", n,
                 "; set actor_rollout_ref.rollout.n=", estimator_of(c.algorithm.adv_estimator.view()).min_group_size, " or more");
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
    case config_check_id::lora_settings: {
      auto const& m = c.actor_rollout_ref.model;
      return msg("actor_rollout_ref.model.lora_rank=", m.lora_rank, " lora_alpha=", num(m.lora_alpha), " target_modules=[",
                 m.target_modules.joined.view(), "] with actor_rollout_ref.actor.megatron.tensor_model_parallel_size=",
                 a.megatron.tensor_model_parallel_size, " and actor_rollout_ref.rollout.tensor_model_parallel_size=",
                 r.tensor_model_parallel_size, ": LoRA needs lora_rank in [1, 65536] (0 turns it off), lora_alpha > 0, target "
                 "modules (all-linear or names), and both tensor_model_parallel_size=1 (adapters are not sharded); fix the "
                 "offending key");
    }
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


RLFLOW_DECL std::vector<std::string> validate(TrainerConfig const& cfg) {
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

RLFLOW_DECL std::vector<std::string_view> failed_checks(TrainerConfig const& cfg) {
  std::vector<std::string_view> out;
  for (auto const& row : detail::config_check_rows)
    if (!row.ok(cfg)) out.push_back(row.name);
  return out;
}

RLFLOW_DECL std::vector<std::string> warnings(TrainerConfig const& cfg) {
  std::vector<std::string> out;
  if (cfg.algorithm.use_kl_in_reward && cfg.actor_rollout_ref.actor.use_kl_loss)
    out.push_back("algorithm.use_kl_in_reward=true and actor_rollout_ref.actor.use_kl_loss=true: the KL is applied "
                  "twice (in the reward and in the loss); usually keep one (verl warns the same)");
  auto const w = cfg.rollout_replica_world_size();
  if (w >= 1 && cfg.rollout_devices() >= w && cfg.rollout_devices() % w != 0)
    out.push_back(msg(cfg.rollout_devices() % w, " of ", cfg.rollout_devices(),
                      " rollout devices stay idle: replicas use TP*DP*PP = ", w,
                      " devices each (verl floors the replica count); make the device count a multiple of ", w));
  bool const critic_unused = !estimator_of(cfg.algorithm.adv_estimator.view()).needs_critic;
  if (cfg.critic.enable.has_value && cfg.critic.enable.stored && critic_unused)
    out.push_back(msg("critic.enable=true with algorithm.adv_estimator=", cfg.algorithm.adv_estimator,
                      ": the critic is trained but its values are not used by the estimator"));
  return out;
}

RLFLOW_DECL void check(TrainerConfig const& cfg) {
  auto const v = validate(cfg);
  if (v.empty()) return;
  std::string text = msg("invalid rlflow configuration (", v.size(), v.size() == 1 ? " problem" : " problems", "):");
  for (auto const& s : v) text += "\n  - " + s;
  throw config_error(text);
}

}  // namespace rlflow
