// examples/01_grpo_tp2.cpp: the headline type. GRPO on the reverse task (as 00_grpo_reverse)
// with the rollout as tensor-parallel replicas of 2 ranks: on the demo's 2 CPU workers, one
// replica whose 2 ranks each hold half the heads and half the MLP columns, while the actor trains
// data-parallel on both workers and every weight sync reshards its weights into the replica.
// No reward option: the default reward role scores each row by its data_source ("reverse").
// Run: make demo DEMO=01_grpo_tp2 (or build/examples/01_grpo_tp2 [key=value ...]).
#include <rlflow/rlflow.hpp>

#include "common/reverse_task.hpp"  // the task, the configuration, the main loop

using Trainer = rlflow::Trainer<rlflow::Colocate<3>, rlflow::GRPO, rlflow::TP<2>>;

int main(int argc, char** argv) {
  rlflow::TrainerConfig cfg = rlflow::examples::grpo_reverse_config();
  cfg.trainer.experiment_name = "grpo_tp2";
  cfg.trainer.default_local_dir = "runs/grpo_tp2";  // its own run folder beside the demo's
  return rlflow::examples::run_reverse_example<Trainer>(
      argc, argv, "01_grpo_tp2: GRPO on string reversal, rollout replicas of TP=2 ranks (the headline type)", cfg);
}
