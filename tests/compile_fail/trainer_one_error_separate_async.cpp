// build error: the standalone rollout pool runs on the CPU engines only
// error count: 1
// no build error: N is smaller than the number of colocated roles
// no build error: the CUDA engines are not visible
#include <rlflow/trainer/trainer.hpp>
using namespace rlflow;
// Two mistakes behind one: SeparateAsync with the CUDA backend (in a .cpp file, so the CUDA
// engines are not visible either). Only the first check's message may appear.
using T = Trainer<SeparateAsync, PPO, roles::ValueCritic, Backend<cuda::tag>>;
int main() {
  T t(TrainerConfig{}, PromptDataset{}, "abc");
  (void)t.fit();
}
