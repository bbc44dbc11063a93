// build error: ppo_micro_batch_size_per_gpu is not set and use_dynamic_bsz is false
// verl's default leaves the actor micro-batch null; a constexpr config must set it.
#include <rlflow/config/trainer_config.hpp>
constexpr rlflow::TrainerConfig cfg = [] {
  rlflow::TrainerConfig c;
  c.algorithm.adv_estimator = "grpo";
  c.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 8;
  return c;
}();
int main() { rlflow::checked_config<cfg> ok{}; (void)ok; }
