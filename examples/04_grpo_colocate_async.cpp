// examples/04_grpo_colocate_async.cpp: the demo (GRPO on string reversal) with
// trainer.v1.trainer_mode=colocate_async: one pool of 2 devices; its rollout workers generate the
// next batch while the current one trains (one batch ahead), and load the new weights after
// every step. Takes verl-style key=value overrides, --config FILE and --help.
// Run: make demo DEMO=04_grpo_colocate_async.
#include <rlflow/rlflow.hpp>

#include "common/reverse_task.hpp"  // the task, its reward, the configuration, the main loop

using Trainer = rlflow::Trainer<rlflow::GRPO, rlflow::Colocate<3>,
                                rlflow::roles::RuleReward<rlflow::examples::ReverseScore>>;

int main(int argc, char** argv) {
  return rlflow::examples::run_reverse_example<Trainer>(
      argc, argv, "04_grpo_colocate_async: the GRPO demo with rollout overlapping training (colocate_async)",
      rlflow::examples::grpo_colocate_async_config());
}
