// rlflow/config/estimators.hpp: the advantage-estimator table, the one place an estimator is named
// (verl: core_algos.AdvantageEstimator and ADV_ESTIMATOR_REGISTRY). Everything else reads it:
//   rlflow/algorithm/algorithm.hpp         the typed options (rlflow::GRPO, rlflow::PPO, ...), one per entry
//   trainer_config/              algorithm.adv_estimator's choices, "did you mean", the critic /
//                                sum_pi_squared / group-size checks
//   algorithm/impl/advantage_step.ipp      compute_advantage runs the entry's kernel
//   trainer.hpp                  prepare() and the greedy rollout of needs_greedy_baseline
// Adding an estimator: one X(...) entry below plus its kernel function in
// rlflow/algorithm/impl/advantage_step.ipp (detail::adv::<kernel>(estimator_args&)).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace rlflow {

//! One advantage estimator: what the configuration, the Trainer and the advantage step need to
//! know about it. Flags default to false.
struct estimator_info {
  std::string_view name;                //!< algorithm.adv_estimator (verl's AdvantageEstimator value)
  std::string_view type_name;           //!< the rlflow:: algorithm option (Trainer<GRPO, ...>)
  std::string_view kernel;              //!< detail::adv::<kernel>(estimator_args&) in algorithm/impl/advantage_step.ipp
  std::string_view doc;                 //!< what it computes and its verl counterpart
  bool needs_critic = false;            //!< reads the critic's 'values': the Trainer needs a critic role
  bool needs_greedy_baseline = false;   //!< reads 'reward_baselines': the Trainer adds a greedy rollout
  bool groups_by_uid = false;           //!< groups rows by the non-tensor 'uid' (one id per prompt)
  bool needs_sum_pi_squared = false;    //!< reads 'sum_pi_squared' (actor.calculate_sum_pi_squared=true)
  bool returns_are_advantages = false;  //!< one tensor is both advantages and returns (verl returns it twice)
  std::int64_t min_group_size = 1;      //!< smallest actor_rollout_ref.rollout.n it accepts
  std::string_view reads = {};          //!< the config keys it reads, '|'-separated
};

// X(name, Type, kernel, doc, fields...): one estimator. name: algorithm.adv_estimator; Type: the
// rlflow:: option deriving from rlflow::Estimator<"name"> (rlflow/algorithm/algorithm.hpp); kernel: its
// function in detail::adv (algorithm/impl/advantage_step.ipp); doc: what it computes, its verl function;
// fields: designated initializers of the estimator_info members after 'doc', in declaration order.
// Entries in verl's AdvantageEstimator order (the order of the config choices).
#define RLFLOW_ADV_ESTIMATORS(X)                                                                                      \
  X(gae, PPO, gae,                                                                                                    \
    "PPO with a learned critic and GAE; PF-PPO resampling when algorithm.use_pf_ppo. "                                \
    "verl: compute_gae_advantage_return",                                                                             \
    .needs_critic = true,                                                                                             \
    .reads = "algorithm.gamma|algorithm.lam|algorithm.use_pf_ppo|algorithm.pf_ppo.reweight_method|"                   \
             "algorithm.pf_ppo.weight_pow")                                                                           \
  X(grpo, GRPO, grpo,                                                                                                 \
    "Group Relative Policy Optimization: group-normalised outcome advantage, no critic "                              \
    "(Dr.GRPO with algorithm.norm_adv_by_std_in_grpo=false). verl: compute_grpo_outcome_advantage",                   \
    .groups_by_uid = true, .returns_are_advantages = true, .reads = "algorithm.norm_adv_by_std_in_grpo")              \
  X(reinforce_plus_plus, ReinforcePlusPlus, reinforce_plus_plus,                                                      \
    "REINFORCE++: token-level discounted returns, batch-whitened. "                                                   \
    "verl: compute_reinforce_plus_plus_outcome_advantage",                                                            \
    .reads = "algorithm.gamma")                                                                                       \
  X(reinforce_plus_plus_baseline, ReinforcePlusPlusBaseline, reinforce_plus_plus_baseline,                            \
    "REINFORCE++ with a group-mean baseline, then batch whitening. "                                                  \
    "verl: compute_reinforce_plus_plus_baseline_outcome_advantage",                                                   \
    .groups_by_uid = true)                                                                                            \
  X(remax, ReMax, remax,                                                                                              \
    "ReMax: the greedy response's reward is the baseline. verl: compute_remax_outcome_advantage",                     \
    .needs_greedy_baseline = true)                                                                                    \
  X(rloo, RLOO, rloo,                                                                                                 \
    "REINFORCE leave-one-out. verl: compute_rloo_outcome_advantage",                                                  \
    .groups_by_uid = true)                                                                                            \
  X(opo, OPO, opo,                                                                                                    \
    "On-Policy RL with Optimal reward baseline (length-weighted group baseline). "                                    \
    "verl: compute_opo_outcome_advantage",                                                                            \
    .groups_by_uid = true)                                                                                            \
  X(grpo_passk, GRPOPassK, grpo_passk,                                                                                \
    "Pass@k GRPO: only the best response of a group gets an advantage (rollout.n >= 2). "                             \
    "verl: compute_grpo_passk_outcome_advantage",                                                                     \
    .groups_by_uid = true, .min_group_size = 2, .reads = "algorithm.norm_adv_by_std_in_grpo")                         \
  X(gpg, GPG, gpg,                                                                                                    \
    "Group Policy Gradient: group-mean baseline, scaled by batch size / number of non-zero scores. "                  \
    "verl: compute_gpg_outcome_advantage",                                                                            \
    .groups_by_uid = true)                                                                                            \
  X(rloo_vectorized, RLOOVectorized, rloo_vectorized,                                                                 \
    "RLOO computed with group sums (same numbers as rloo). "                                                          \
    "verl: compute_rloo_vectorized_outcome_advantage",                                                                \
    .groups_by_uid = true)                                                                                            \
  X(grpo_vectorized, GRPOVectorized, grpo,                                                                            \
    "Group-normalised advantage by torch.unique-style grouping (same numbers as grpo). "                              \
    "verl: compute_grpo_vectorized_outcome_advantage",                                                                \
    .groups_by_uid = true, .returns_are_advantages = true, .reads = "algorithm.norm_adv_by_std_in_grpo")              \
  X(optimal_token_baseline, OptimalTokenBaseline, optimal_token_baseline,                                             \
    "Optimal token baseline (the actor's old-log-prob pass writes sum pi^2 per token). "                              \
    "verl: compute_optimal_token_baseline_advantage",                                                                 \
    .groups_by_uid = true, .needs_sum_pi_squared = true,                                                              \
    .reads = "actor_rollout_ref.actor.calculate_sum_pi_squared")                                                      \
  X(tir_optimal_token_baseline, TIROptimalTokenBaseline, tir_optimal_token_baseline,                                  \
    "The multi-turn (TIR) optimal token baseline. "                                                                   \
    "verl: compute_multi_turn_optimal_token_baseline_advantage",                                                      \
    .groups_by_uid = true, .needs_sum_pi_squared = true,                                                              \
    .reads = "actor_rollout_ref.actor.calculate_sum_pi_squared")                                                      \
  X(gdpo, GDPO, gdpo,                                                                                                 \
    "Group reward-Decoupled normalisation: each reward component named in algorithm.gdpo_reward_keys "                \
    "(non-tensor columns the reward role writes per row) is GRPO-normalised on its own, then the "                    \
    "weighted sum is batch-whitened. verl: compute_gdpo_outcome_advantage",                                           \
    .groups_by_uid = true,                                                                                            \
    .reads = "algorithm.gdpo_reward_keys|algorithm.gdpo_reward_weights|algorithm.norm_adv_by_std_in_grpo")

#define RLFLOW_DETAIL_ESTIMATOR_ROW(n, Type, k, d, ...) \
  ::rlflow::estimator_info{.name = #n, .type_name = #Type, .kernel = #k, .doc = d, __VA_ARGS__},
//! Every estimator, in table order.
inline constexpr estimator_info estimator_table[] = {RLFLOW_ADV_ESTIMATORS(RLFLOW_DETAIL_ESTIMATOR_ROW)};
#undef RLFLOW_DETAIL_ESTIMATOR_ROW

//! The names as one string literal "|gae|grpo|..." (a leading '|'), for algorithm.adv_estimator's
//! choices in trainer_config/keys.hpp, which need a literal (static_assert messages).
#define RLFLOW_DETAIL_ESTIMATOR_CHOICE(n, ...) "|" #n
#define RLFLOW_DETAIL_ESTIMATOR_CHOICES RLFLOW_ADV_ESTIMATORS(RLFLOW_DETAIL_ESTIMATOR_CHOICE)

inline constexpr std::size_t estimator_count = sizeof(estimator_table) / sizeof(estimator_table[0]);

// The look-ups index the table instead of comparing pointers: under -fsanitize=undefined GCC
// cannot evaluate a pointer's null test in a constant expression (static_asserts use these).

//! The index of the entry called 'name', or estimator_count.
constexpr std::size_t estimator_index(std::string_view name) {
  std::size_t i = 0;
  while (i < estimator_count && estimator_table[i].name != name) ++i;
  return i;
}

//! Whether an entry is called 'name'.
constexpr bool has_estimator(std::string_view name) { return estimator_index(name) < estimator_count; }

//! The entry called 'name', or nullptr.
constexpr estimator_info const* find_estimator(std::string_view name) {
  std::size_t const i = estimator_index(name);
  return i < estimator_count ? &estimator_table[i] : nullptr;
}

//! The entry called 'name'; an unknown name gives an entry with an empty name and every flag off
//! (the configuration's choice check reports it).
constexpr estimator_info estimator_of(std::string_view name) {
  std::size_t const i = estimator_index(name);
  return i < estimator_count ? estimator_table[i] : estimator_info{};
}

}  // namespace rlflow
