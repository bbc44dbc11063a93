// rlflow/algorithm/advantage_step.hpp: the driver's advantage step on a DataProto, public so that a custom
// driver loop calls it instead of repeating the chain (verl: ray_trainer.apply_kl_penalty,
// compute_advantage, core_algos.compute_pf_ppo_reweight_data, rollout_corr_helper.
// compute_rollout_correction_and_add_to_batch, v1 utils.compute_advantage_for_multi_trajectories).
// Dispatches on algorithm.adv_estimator by verl's names; the math is in kernels/ (cpu::par: the
// driver holds the batch on the host). Trainer<...> runs the same functions.
//
// Letters: B rows (prompts x n), T response tokens.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <utility>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <rlflow/core/backend.hpp>                 // cpu::par
#include <rlflow/core/data_proto.hpp>              // DataProto
#include <rlflow/core/error.hpp>                   // config_error, key_error, value_error
#include <rlflow/config/estimators.hpp>              // estimator_table, RLFLOW_ADV_ESTIMATORS
#include <rlflow/kernels/kernels.hpp>         // estimators, apply_kl_penalty, rollout correction
#include <rlflow/core/metrics.hpp>                 // Metrics
#include <rlflow/config/trainer_config.hpp>          // AlgorithmConfig, TrainerConfig

namespace rlflow {

namespace detail::adv {

//! The one mask representation inside rlflow: verl's int32 (B, T) response_mask, nonzero = valid,
//! which every kernel reads in place. A mask of another dtype (int64, uint8, bool or float32, from
//! a custom driver's batch) is converted to int32 here, once, at the boundary; for an int32 mask
//! the returned handle shares the batch's storage (no copy).
RLFLOW_DECL Tensor int32_mask(Tensor const& m, const char* fn);

//! verl: compute_response_mask (the last T columns of attention_mask) when the batch has none.
RLFLOW_DECL Tensor response_mask_of(DataProto const& batch, const char* fn);

RLFLOW_DECL Tensor const& need_tensor(DataProto const& batch, const char* key, const char* fn, const char* why);

//! A float buffer (B) from the caching resource, passed to the kernels as a span.
struct floats_t {
  Tensor t;
  operator std::span<float const>() const { return t.span<float>(); }
};

//! Dense group ids (B) of the 'uid' column, held in an int64 tensor from the caching resource
//! (no fresh allocation in steady state); converts to the span the estimators take.
struct group_ids_t {
  Tensor ids;
  operator std::span<std::int64_t const>() const { return ids.span<std::int64_t>(); }
};

//! Groups rows by 'uid' in first-seen order (the estimators depend only on which rows share a
//! uid, not on how groups are numbered): string uids are hashed in place (viewed, no copies);
//! other values group by their repr.
RLFLOW_DECL group_ids_t group_ids(DataProto const& batch, const char* fn, std::string_view estimator);

//! What an estimator's kernel reads and writes; compute_advantage fills it once per call.
struct estimator_args {
  DataProto& batch;
  AlgorithmConfig const& algo;
  const char* fn;                        //!< the public function, for messages
  std::string_view est;                  //!< algorithm.adv_estimator
  kernels::Dims d;                       //!< B rows, T response tokens
  std::span<float const> rewards;        //!< token_level_rewards (B, T)
  std::span<std::int32_t const> mask;    //!< response_mask as int32 (B, T)
  std::span<float> adv, ret;             //!< outputs (B, T); one buffer when returns_are_advantages
  kernels::GRPOOptions go;               //!< algorithm.norm_adv_by_std_in_grpo
  bool resample = false;                 //!< set by a kernel: PF-PPO resampling afterwards (gae)
  floats_t scores() const;               //!< (B) row scores, verl's token_level_rewards.sum(-1)
  group_ids_t groups() const;            //!< group ids of the 'uid' column
};

//! An estimator's kernel: the 'kernel' column of the estimator table (rlflow/config/estimators.hpp)
//! names one of these; their bodies are in algorithm/impl/advantage_step.ipp.
using estimator_kernel = void (*)(estimator_args&);
#define RLFLOW_DETAIL_ESTIMATOR_KERNEL_DECL(n, Type, k, ...) RLFLOW_DECL void k(estimator_args& a);
RLFLOW_ADV_ESTIMATORS(RLFLOW_DETAIL_ESTIMATOR_KERNEL_DECL)
#undef RLFLOW_DETAIL_ESTIMATOR_KERNEL_DECL

RLFLOW_DECL std::vector<double> parse_weights(string_list const& l);

}  // namespace detail::adv

//! algorithm.rollout_correction as the kernels' options (empty strings are verl's nulls).
RLFLOW_DECL kernels::RolloutCorrectionOptions rollout_correction_options(RolloutCorrectionConfig const& rc);

//! KL in the reward: token_level_rewards = token_level_scores - beta * kl_penalty(old_log_probs,
//! ref_log_prob) * m with the controller's coefficient before its update; then the controller
//! updates with n_steps = B. Metrics actor/reward_kl_penalty and actor/reward_kl_penalty_coeff.
//! Controller: kernels::FixedKLController or kernels::AdaptiveKLController.
//! verl: ray_trainer.apply_kl_penalty
template <class Controller>
Metrics apply_kl_penalty(DataProto& batch, Controller& kl_ctrl, std::string_view kl_penalty = "kl") {
  const char* fn = "apply_kl_penalty";
  Tensor const mt = detail::adv::response_mask_of(batch, fn);
  std::int64_t const B = mt.dim(0), T = mt.dim(1);
  Tensor const mask = detail::adv::int32_mask(mt, fn);
  Tensor const& scores = detail::adv::need_tensor(batch, "token_level_scores", fn, "holds the rewards");
  Tensor const& old = detail::adv::need_tensor(batch, "old_log_probs", fn, "the KL penalty is taken of");
  Tensor const& ref = detail::adv::need_tensor(batch, "ref_log_prob", fn, "the KL penalty is taken against");
  Tensor rewards = Tensor::empty(DType::float32, Shape{B, T});
  auto const r = kernels::apply_kl_penalty(cpu::par, kernels::Dims{B, T}, scores.span<float>(), old.span<float>(), ref.span<float>(),
                                           mask.span<std::int32_t>(), kernels::parse_kl_penalty(kl_penalty), kl_ctrl,
                                           rewards.span<float>());
  batch.set_tensor("token_level_rewards", rewards);
  return Metrics{{"actor/reward_kl_penalty", r.current_kl}, {"actor/reward_kl_penalty_coeff", r.beta}};
}

//! PF-PPO: resample B rows with replacement, weights from the row scores s_i = sum_t
//! token_level_scores: "pow" |s|^weight_pow, "max_min" 1 at the batch's max and min score (else 0),
//! "max_random" 0.4 at the max (else 0.1); then clamp(w + 1e-8, min 1e-8). Every tensor and
//! non-tensor column is gathered. verl draws with torch.multinomial; rlflow draws with a
//! std::mt19937_64 seeded by 'seed' (same distribution, different stream; docs/kernels.md).
//! verl: core_algos.compute_pf_ppo_reweight_data
RLFLOW_DECL DataProto compute_pf_ppo_reweight_data(DataProto const& data, std::string_view reweight_method = "pow",
                                                   double weight_pow = 2.0, std::uint64_t seed = 0);

//! IS weights and rejection sampling of the decoupled mode: response_mask is replaced by the
//! rejected one, rollout_is_weights (B, T) is added when rollout_is is set; returns the
//! "rollout_corr/..." metrics. Needs old_log_probs and rollout_log_probs.
//! verl: rollout_corr_helper.compute_rollout_correction_and_add_to_batch
RLFLOW_DECL Metrics compute_rollout_correction_and_add_to_batch(DataProto& batch, RolloutCorrectionConfig const& rc);

//! Advantages and returns (B, T) into the batch from token_level_rewards + response_mask, by
//! algo.adv_estimator with verl's arguments: runs the kernel of the estimator table's entry
//! (rlflow/config/estimators.hpp), e.g. gae (values, gamma, lam; then PF-PPO resampling when
//! use_pf_ppo, drawn with pf_ppo_seed), grpo (uid, norm_adv_by_std_in_grpo, epsilon 1e-6), gdpo
//! (gdpo_reward_keys: non-tensor columns of per-row scores; weights), remax (reward_baselines
//! (B)), optimal_token_baseline (old_log_probs, sum_pi_squared, rollout_is_weights if present).
//! A missing input is a key_error naming it; an unknown estimator a config_error.
//! verl: ray_trainer.compute_advantage
RLFLOW_DECL void compute_advantage(DataProto& batch, AlgorithmConfig const& algo, std::uint64_t pf_ppo_seed = 0);

//! verl v1: compute_advantage_for_multi_trajectories. Multi-output agent loops give each row a key
//! "{uid}_{session}_{index}" (batch_keys, one per row). For GRPO only the last output (highest
//! index) of each "{uid}_{session}" enters the group statistics, and its advantage, read at its
//! first valid token, is broadcast to every valid token of every output of that trajectory
//! (advantages = returns). Any other estimator is compute_advantage unchanged. A key without two
//! '_' separators, or with a non-integer index, is a value_error.
RLFLOW_DECL void compute_advantage_for_multi_trajectories(DataProto& batch, std::vector<std::string> const& batch_keys,
                                                          AlgorithmConfig const& algo, std::uint64_t pf_ppo_seed = 0);

//! verl's in-reward KL controller built from algorithm.kl_ctrl (fixed | adaptive).
struct KLInRewardController {
  kernels::FixedKLController fixed{};
  std::optional<kernels::AdaptiveKLController> adaptive;
  explicit KLInRewardController(AlgorithmConfig const& a);
  double value() const { return adaptive ? adaptive->value : fixed.value; }
};

//! The driver's 'adv' step (verl fit, step 12): token_level_rewards = token_level_scores, or with
//! the KL penalty when algorithm.use_kl_in_reward; the decoupled rollout correction when
//! algorithm.rollout_correction.rollout_is or rollout_rs is set, the batch has rollout_log_probs
//! and bypass_mode is off; then compute_advantage. Returns the step's metrics
//! (actor/reward_kl_penalty*, rollout_corr/*).
RLFLOW_DECL Metrics compute_advantage_step(DataProto& batch, TrainerConfig const& cfg, KLInRewardController& kl,
                                           std::uint64_t pf_ppo_seed = 0);

}  // namespace rlflow

#if RLFLOW_DEFINE_BODIES
#include <rlflow/algorithm/impl/advantage_step.ipp>
#endif
