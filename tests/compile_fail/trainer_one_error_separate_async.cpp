// build error: the separate-async placement is milestone 2
// error count: 1
// no build error: N is smaller than the number of colocated roles
#include <rlflow/trainer.hpp>
using namespace rlflow;
using T = Trainer<SeparateAsync, PPO, roles::ValueCritic>;
int main() {
  T t(TrainerConfig{}, PromptDataset{}, "abc");
  (void)t.fit();
}
