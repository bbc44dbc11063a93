// build error: separate rollout / reference roles are not supported
// error count: 1
#include <rlflow/trainer/trainer.hpp>
using namespace rlflow;
struct MyRollout {
  using role_tag = rollout_tag;
  using methods = rlflow::methods<>;
};
using T = Trainer<GRPO, MyRollout>;
int main() {
  T t(TrainerConfig{}, PromptDataset{}, "abc");
  (void)t.fit();
}
