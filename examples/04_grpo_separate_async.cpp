// examples/04_grpo_separate_async.cpp: the demo (GRPO on string reversal) on verl's second road,
// trainer.v1.trainer_mode=separate_async: the actor and the reward on a 2-device trainer pool,
// the rollout on a standalone 1-device pool that generates one batch ahead (one-step-off),
// weights synced across the pools after every step through the checkpoint engine. Takes
// verl-style key=value overrides (e.g. trainer.v1.separate_async.num_warmup_batches=0 for a
// synchronous schedule), --config FILE and --help. Run: make demo DEMO=04_grpo_separate_async.
#include <rlflow/rlflow.hpp>

#include "common/reverse_task.hpp"  // the task, its reward, the configuration, the main loop

using Trainer = rlflow::Trainer<rlflow::GRPO, rlflow::SeparateAsync,
                                rlflow::roles::RuleReward<rlflow::examples::ReverseScore>>;

int main(int argc, char** argv) {
  return rlflow::examples::run_reverse_example<Trainer>(
      argc, argv, "04_grpo_separate_async: the GRPO demo with a standalone rollout pool (separate_async)",
      rlflow::examples::grpo_separate_async_config());
}
