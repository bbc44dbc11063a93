// examples/03_ppo_reverse.cpp: PPO with a learned critic and GAE on the demo's task (reverse a
// short string, partial credit). Same command line as 00_grpo_reverse: key=value overrides,
// --config FILE, --help.
#include <rlflow/rlflow.hpp>

#include "common/reverse_task.hpp"  // the task, its reward, the configuration, the main loop

using Trainer = rlflow::Trainer<rlflow::PPO, rlflow::Colocate<3>, rlflow::roles::ValueCritic,
                                rlflow::roles::RuleReward<rlflow::examples::ReverseScore>>;

int main(int argc, char** argv) {
  return rlflow::examples::run_reverse_example<Trainer>(
      argc, argv, "03_ppo_reverse: PPO (GAE + critic) on string reversal with a tiny GPT",
      rlflow::examples::ppo_reverse_config());
}
