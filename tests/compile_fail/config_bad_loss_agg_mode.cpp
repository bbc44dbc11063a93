// build error: actor_rollout_ref.actor.loss_agg_mode is not one of
// A misspelt loss aggregation mode is caught by the choice check.
#include <rlflow/config/trainer_config.hpp>
constexpr rlflow::TrainerConfig cfg = [] {
  rlflow::TrainerConfig c;
  c.algorithm.adv_estimator = "grpo";
  c.actor_rollout_ref.actor.loss_agg_mode = "token_mean";
  c.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 8;
  c.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 8;
  return c;
}();
int main() { rlflow::checked_config<cfg> ok{}; (void)ok; }
