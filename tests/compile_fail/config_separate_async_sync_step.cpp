// build error: separate_async needs data.train_batch_size == trainer.v1.separate_async.parameter_sync_step
// separate_async with 768 prompts but parameter_sync_step 4 x mini-batch 256 = 1024.
#include <rlflow/config/trainer_config.hpp>
constexpr rlflow::TrainerConfig cfg = [] {
  rlflow::TrainerConfig c;
  c.algorithm.adv_estimator = "grpo";
  c.trainer.v1.trainer_mode = "separate_async";
  c.data.train_batch_size = 768;
  c.actor_rollout_ref.rollout.nnodes = 1;
  c.actor_rollout_ref.rollout.checkpoint_engine.backend = "nccl";
  c.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 8;
  c.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 8;
  return c;
}();
int main() { rlflow::checked_config<cfg> ok{}; (void)ok; }
