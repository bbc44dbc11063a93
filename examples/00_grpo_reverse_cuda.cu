// examples/00_grpo_reverse_cuda.cu: the demo on a GPU, the twin of 00_grpo_reverse.cpp with
// Backend<cuda::tag>: the actor, rollout and reference engines run on one device per worker
// (trainer.n_gpus_per_node workers, default 1 here). Same command line (key=value overrides,
// --config FILE, --help). Built when nvcc exists; run it on a GPU machine (tools/gpu_check.sh does).
#include <rlflow/rlflow.hpp>
#include <rlflow/trainer/trainer_cuda.cuh>  // the CUDA engines of the built-in roles

#include "common/reverse_task.hpp"  // the task, its reward, the configuration, the main loop

using Trainer = rlflow::Trainer<rlflow::GRPO, rlflow::Colocate<3>, rlflow::Backend<rlflow::cuda::tag>,
                                rlflow::roles::RuleReward<rlflow::examples::ReverseScore>>;

int main(int argc, char** argv) {
  rlflow::TrainerConfig cfg = rlflow::examples::grpo_reverse_config();
  cfg.trainer.n_gpus_per_node = 1;  // one worker per device
  cfg.trainer.experiment_name = "grpo_reverse_cuda";
  cfg.trainer.default_local_dir = "runs/grpo_reverse_cuda";
  return rlflow::examples::run_reverse_example<Trainer>(
      argc, argv, "00_grpo_reverse_cuda: GRPO on string reversal with a tiny GPT on the GPU", cfg);
}
