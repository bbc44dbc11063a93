// tools/compile_time/config_keys_hana.cpp: the configuration key table by Boost.Hana reflection
// (BOOST_HANA_ADAPT_STRUCT on every config struct, a recursive walk over hana::accessors) instead of
// the X-macro list; compare with config_keys_xmacro.cpp. Both print every dotted key path they reach
// and the value it reads from a default TrainerConfig, sorted, so their outputs diff.
#include <rlflow/trainer_config/schema.hpp>

#include <boost/hana/accessors.hpp>
#include <boost/hana/adapt_struct.hpp>
#include <boost/hana/first.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/second.hpp>
#include <boost/hana/string.hpp>

#include <algorithm>
#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

BOOST_HANA_ADAPT_STRUCT(rlflow::OptimConfig, lr, weight_decay, betas, lr_warmup_steps, lr_warmup_steps_ratio, min_lr_ratio, lr_scheduler_type);
BOOST_HANA_ADAPT_STRUCT(rlflow::DataConfig, train_files, val_files, prompt_key, max_prompt_length, max_response_length, train_batch_size, val_batch_size, gen_batch_size, shuffle, truncation, filter_overlong_prompts, seed);
BOOST_HANA_ADAPT_STRUCT(rlflow::ModelConfig, path, tokenizer_path, vocab_size, n_layer, n_head, n_embd);
BOOST_HANA_ADAPT_STRUCT(rlflow::PolicyLossConfig, loss_mode, clip_cov_ratio, clip_cov_lb, clip_cov_ub, kl_cov_ratio, ppo_kl_coef, dro_beta);
BOOST_HANA_ADAPT_STRUCT(rlflow::MegatronConfig, tensor_model_parallel_size);
BOOST_HANA_ADAPT_STRUCT(rlflow::ActorConfig, strategy, ppo_mini_batch_size, ppo_micro_batch_size, ppo_micro_batch_size_per_gpu, use_dynamic_bsz, ppo_max_token_len_per_gpu, ppo_epochs, shuffle, data_loader_seed, clip_ratio, clip_ratio_low, clip_ratio_high, clip_ratio_c, tau_pos, tau_neg, loss_agg_mode, loss_scale_factor, entropy_coeff, calculate_entropy, calculate_sum_pi_squared, use_kl_loss, kl_loss_coef, kl_loss_type, grad_clip, ulysses_sequence_parallel_size, policy_loss, optim, megatron);
BOOST_HANA_ADAPT_STRUCT(rlflow::ValKwargsConfig, temperature, top_k, top_p, n, do_sample);
BOOST_HANA_ADAPT_STRUCT(rlflow::CheckpointEngineConfig, backend, update_weights_bucket_megabytes);
BOOST_HANA_ADAPT_STRUCT(rlflow::AgentConfig, num_workers);
BOOST_HANA_ADAPT_STRUCT(rlflow::RolloutConfig, n, temperature, top_k, top_p, do_sample, gpu_memory_utilization, enable_prefix_caching, enable_chunked_prefill, max_num_batched_tokens, max_num_seqs, block_size, kv_cache_bytes, tensor_model_parallel_size, data_parallel_size, pipeline_model_parallel_size, nnodes, n_gpus_per_node, free_cache_engine, calculate_log_probs, log_prob_micro_batch_size, log_prob_micro_batch_size_per_gpu, log_prob_use_dynamic_bsz, log_prob_max_token_len_per_gpu, val_kwargs, agent, checkpoint_engine);
BOOST_HANA_ADAPT_STRUCT(rlflow::RefConfig, log_prob_micro_batch_size, log_prob_micro_batch_size_per_gpu, log_prob_use_dynamic_bsz, log_prob_max_token_len_per_gpu);
BOOST_HANA_ADAPT_STRUCT(rlflow::ActorRolloutRefConfig, hybrid_engine, model, actor, rollout, ref);
BOOST_HANA_ADAPT_STRUCT(rlflow::CriticModelConfig, path);
BOOST_HANA_ADAPT_STRUCT(rlflow::CriticConfig, enable, strategy, ppo_mini_batch_size, ppo_micro_batch_size, ppo_micro_batch_size_per_gpu, use_dynamic_bsz, ppo_max_token_len_per_gpu, ppo_epochs, shuffle, cliprange_value, loss_agg_mode, grad_clip, ulysses_sequence_parallel_size, optim, model);
BOOST_HANA_ADAPT_STRUCT(rlflow::RewardModelConfig, enable, enable_resource_pool, n_gpus_per_node, nnodes);
BOOST_HANA_ADAPT_STRUCT(rlflow::RewardConfig, reward_model);
BOOST_HANA_ADAPT_STRUCT(rlflow::KLControlConfig, type, kl_coef, horizon, target_kl);
BOOST_HANA_ADAPT_STRUCT(rlflow::PFPPOConfig, reweight_method, weight_pow);
BOOST_HANA_ADAPT_STRUCT(rlflow::RolloutCorrectionConfig, rollout_is, rollout_is_threshold, rollout_is_batch_normalize, rollout_rs, rollout_rs_threshold, bypass_mode, loss_type);
BOOST_HANA_ADAPT_STRUCT(rlflow::AlgorithmConfig, gamma, lam, adv_estimator, norm_adv_by_std_in_grpo, use_kl_in_reward, kl_penalty, kl_ctrl, use_pf_ppo, pf_ppo, rollout_correction, gdpo_reward_keys, gdpo_reward_weights);
BOOST_HANA_ADAPT_STRUCT(rlflow::ColocateAsyncConfig, num_warmup_batches);
BOOST_HANA_ADAPT_STRUCT(rlflow::SeparateAsyncConfig, num_warmup_batches, parameter_sync_step);
BOOST_HANA_ADAPT_STRUCT(rlflow::SamplerConfig, max_off_policy_threshold, strategy);
BOOST_HANA_ADAPT_STRUCT(rlflow::TrainerV1Config, trainer_mode, colocate_async, separate_async, sampler);
BOOST_HANA_ADAPT_STRUCT(rlflow::AsyncTrainingConfig, partial_rollout);
BOOST_HANA_ADAPT_STRUCT(rlflow::CustomRewardFunctionConfig, path, name);
BOOST_HANA_ADAPT_STRUCT(rlflow::TrainerSection, project_name, experiment_name, logger, nnodes, n_gpus_per_node, total_epochs, total_training_steps, save_freq, test_freq, critic_warmup, default_local_dir, resume_mode, resume_from_path, balance_batch, val_before_train, log_val_generations, log_freq, log_train_generations, max_actor_ckpt_to_keep, max_critic_ckpt_to_keep, device, use_v1, v1);
BOOST_HANA_ADAPT_STRUCT(rlflow::TrainerConfig, data, actor_rollout_ref, critic, reward, custom_reward_function, algorithm, trainer, async_training, seed, max_colocate_count);

namespace hana = boost::hana;

struct row { std::string path; void* (*get)(rlflow::TrainerConfig&); };
template <class T>
concept adapted = hana::Struct<T>::value;
// Collects the leaves below T at prefix; Get reaches the T from the root.
template <class T, class Get>
void walk(std::string const& prefix, Get get, std::vector<row>& out) {
  hana::for_each(hana::accessors<T>(), [&](auto pair) {
    std::string const name = prefix + hana::to<char const*>(hana::first(pair));
    auto const field = hana::second(pair);
    using F = std::remove_cvref_t<decltype(field(std::declval<T&>()))>;
    auto sub = [get, field](rlflow::TrainerConfig& c) -> F& { return field(get(c)); };
    if constexpr (adapted<F>) walk<F>(name + ".", sub, out);
    else out.push_back({name, nullptr});
  });
}

int main() {
  std::vector<row> rows;
  walk<rlflow::TrainerConfig>("", [](rlflow::TrainerConfig& c) -> rlflow::TrainerConfig& { return c; }, rows);
  std::sort(rows.begin(), rows.end(), [](row const& a, row const& b) { return a.path < b.path; });
  for (auto const& r : rows) std::printf("%s\n", r.path.c_str());
}
