// examples/00_grpo_reverse.cpp: the demo. GRPO from a random tiny GPT on an embedded verifiable
// task: reverse a short string ("abc=" -> "cba"), with partial credit per correct character.
// Prompts are generated in-process; the reward is rule-based. Takes verl-style key=value
// overrides, --config FILE and --help. Run: make demo (or build/examples/00_grpo_reverse).
#include <rlflow/rlflow.hpp>

#include "common/reverse_task.hpp"  // the task, its reward, the configuration, the main loop

using Trainer = rlflow::Trainer<rlflow::GRPO, rlflow::Colocate<3>,
                                rlflow::roles::RuleReward<rlflow::examples::ReverseScore>>;

int main(int argc, char** argv) {
  return rlflow::examples::run_reverse_example<Trainer>(
      argc, argv, "00_grpo_reverse: GRPO on string reversal with a tiny GPT (the rlflow demo)",
      rlflow::examples::grpo_reverse_config());
}
