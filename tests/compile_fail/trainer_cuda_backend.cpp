// build error: the CUDA engines are not visible; include <rlflow/trainer/trainer_cuda.cuh>
// error count: 1
// Backend<cuda::tag> in a g++ translation unit: the CUDA engines (engine/cuda/*.cuh) need nvcc, so
// the trainer says to include rlflow/trainer/trainer_cuda.cuh in a .cu file.
#include <rlflow/trainer/trainer.hpp>
struct Score {
  static double score(std::string_view, std::string_view) { return 0.0; }
};
using T = rlflow::Trainer<rlflow::GRPO, rlflow::Backend<rlflow::cuda::tag>, rlflow::roles::RuleReward<Score>>;
static_assert(sizeof(T) > 0);
int main() {}
