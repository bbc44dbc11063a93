// rlflow/algorithm.hpp: the algorithm options of Trainer<...>. Each names verl's advantage
// estimator (algorithm.adv_estimator) and the roles it needs; FromConfig reads the estimator from
// the configuration, as verl does. The math lives in kernels/;
// the step order lives in trainer.hpp.
#pragma once
#include <rlflow/config/policy.hpp>  // algorithm_kind

namespace rlflow {

//! Group Relative Policy Optimization: group-normalised outcome advantage, no critic.
//! verl: algorithm.adv_estimator=grpo (Dr.GRPO with algorithm.norm_adv_by_std_in_grpo=false).
struct GRPO {
  using option_kind = algorithm_kind;
  static constexpr const char* name = "GRPO";
  static constexpr const char* adv_estimator = "grpo";
  static constexpr bool needs_critic = false;
};
//! PPO with a learned critic and GAE. verl: algorithm.adv_estimator=gae.
struct PPO {
  using option_kind = algorithm_kind;
  static constexpr const char* name = "PPO";
  static constexpr const char* adv_estimator = "gae";
  static constexpr bool needs_critic = true;
};
//! REINFORCE leave-one-out. verl: algorithm.adv_estimator=rloo.
struct RLOO {
  using option_kind = algorithm_kind;
  static constexpr const char* name = "RLOO";
  static constexpr const char* adv_estimator = "rloo";
  static constexpr bool needs_critic = false;
};
//! REINFORCE++ (token-level discounted returns, batch-whitened). verl: reinforce_plus_plus.
struct ReinforcePlusPlus {
  using option_kind = algorithm_kind;
  static constexpr const char* name = "ReinforcePlusPlus";
  static constexpr const char* adv_estimator = "reinforce_plus_plus";
  static constexpr bool needs_critic = false;
};
//! ReMax: the greedy response's reward is the baseline. verl: algorithm.adv_estimator=remax.
struct ReMax {
  using option_kind = algorithm_kind;
  static constexpr const char* name = "ReMax";
  static constexpr const char* adv_estimator = "remax";
  static constexpr bool needs_critic = false;
};

//! Group-normalised advantage by torch.unique-style grouping (same numbers as GRPO).
//! verl: algorithm.adv_estimator=grpo_vectorized.
struct GRPOVectorized {
  using option_kind = algorithm_kind;
  static constexpr const char* name = "GRPOVectorized";
  static constexpr const char* adv_estimator = "grpo_vectorized";
  static constexpr bool needs_critic = false;
};
//! RLOO computed with group sums (same numbers as RLOO). verl: algorithm.adv_estimator=rloo_vectorized.
struct RLOOVectorized {
  using option_kind = algorithm_kind;
  static constexpr const char* name = "RLOOVectorized";
  static constexpr const char* adv_estimator = "rloo_vectorized";
  static constexpr bool needs_critic = false;
};
//! Pass@k GRPO: only the best response of a group gets an advantage (rollout.n >= 2).
//! verl: algorithm.adv_estimator=grpo_passk.
struct GRPOPassK {
  using option_kind = algorithm_kind;
  static constexpr const char* name = "GRPOPassK";
  static constexpr const char* adv_estimator = "grpo_passk";
  static constexpr bool needs_critic = false;
};
//! Group Policy Gradient: group-mean baseline, scaled by batch size / number of non-zero scores. verl: gpg.
struct GPG {
  using option_kind = algorithm_kind;
  static constexpr const char* name = "GPG";
  static constexpr const char* adv_estimator = "gpg";
  static constexpr bool needs_critic = false;
};
//! On-Policy RL with Optimal reward baseline (length-weighted group baseline). verl: opo.
struct OPO {
  using option_kind = algorithm_kind;
  static constexpr const char* name = "OPO";
  static constexpr const char* adv_estimator = "opo";
  static constexpr bool needs_critic = false;
};
//! REINFORCE++ with a group-mean baseline, then batch whitening. verl: reinforce_plus_plus_baseline.
struct ReinforcePlusPlusBaseline {
  using option_kind = algorithm_kind;
  static constexpr const char* name = "ReinforcePlusPlusBaseline";
  static constexpr const char* adv_estimator = "reinforce_plus_plus_baseline";
  static constexpr bool needs_critic = false;
};
//! Group reward-Decoupled normalisation: every reward component named in
//! algorithm.gdpo_reward_keys (non-tensor columns the reward role writes per row) is GRPO-normalised
//! on its own, then the weighted sum is batch-whitened. verl: algorithm.adv_estimator=gdpo.
struct GDPO {
  using option_kind = algorithm_kind;
  static constexpr const char* name = "GDPO";
  static constexpr const char* adv_estimator = "gdpo";
  static constexpr bool needs_critic = false;
};
//! Optimal token baseline (needs actor.calculate_sum_pi_squared=true: the actor's old-log-prob
//! pass writes Σπ² per token). verl: algorithm.adv_estimator=optimal_token_baseline.
struct OptimalTokenBaseline {
  using option_kind = algorithm_kind;
  static constexpr const char* name = "OptimalTokenBaseline";
  static constexpr const char* adv_estimator = "optimal_token_baseline";
  static constexpr bool needs_critic = false;
};
//! The multi-turn (TIR) optimal token baseline. verl: tir_optimal_token_baseline.
struct TIROptimalTokenBaseline {
  using option_kind = algorithm_kind;
  static constexpr const char* name = "TIROptimalTokenBaseline";
  static constexpr const char* adv_estimator = "tir_optimal_token_baseline";
  static constexpr bool needs_critic = false;
};

//! The estimator is the configuration's algorithm.adv_estimator, as in verl: any of the names
//! above (gae only with a critic role; remax adds the greedy rollout). The type-named options are
//! the same algorithms fixed at compile time.
struct FromConfig {
  using option_kind = algorithm_kind;
  static constexpr const char* name = "FromConfig";
  static constexpr const char* adv_estimator = nullptr;  //!< read from algorithm.adv_estimator
  static constexpr bool needs_critic = false;             //!< gae needs one: checked at start-up
};

}  // namespace rlflow
