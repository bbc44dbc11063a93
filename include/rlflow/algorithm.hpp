// rlflow/algorithm.hpp: the algorithm options of Trainer<...>. Each names verl's advantage
// estimator (algorithm.adv_estimator) and the roles it needs. The math lives in kernels/;
// the step order lives in trainer.hpp.
#pragma once
#include <rlflow/policy.hpp>  // algorithm_kind

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

}  // namespace rlflow
