// build error: actor_rollout_ref.rollout.n must be divisible by trainer.nnodes
// A constexpr config whose B*n (1020) is not a multiple of the 8 devices fails to build.
#include <rlflow/config/trainer_config.hpp>
constexpr rlflow::TrainerConfig cfg = [] {
  rlflow::TrainerConfig c;
  c.algorithm.adv_estimator = "grpo";
  c.data.train_batch_size = 1020;
  c.actor_rollout_ref.actor.ppo_mini_batch_size = 255;
  c.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 1;
  c.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 8;
  return c;
}();
int main() { return static_cast<int>(rlflow::checked<cfg>.seed) - 42; }
