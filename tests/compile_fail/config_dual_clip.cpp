// build error: actor_rollout_ref.actor.clip_ratio_c must be greater than 1
// The dual-clip bound must exceed 1 (verl core_algos.py asserts it).
#include <rlflow/config/trainer_config.hpp>
constexpr rlflow::TrainerConfig cfg = [] {
  rlflow::TrainerConfig c;
  c.algorithm.adv_estimator = "grpo";
  c.actor_rollout_ref.actor.clip_ratio_c = 0.5;
  c.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 8;
  c.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 8;
  return c;
}();
int main() { rlflow::checked_config<cfg> ok{}; (void)ok; }
