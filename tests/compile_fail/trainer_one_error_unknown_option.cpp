// build error: unknown_trainer_option_is<float>
// error count: 1
// no build error: reward_role
#include <rlflow/trainer/trainer.hpp>
using namespace rlflow;
struct MyReward {
  using role_tag = reward_tag;
  using methods = rlflow::methods<>;
};
using T = Trainer<GRPO, float, MyReward>;
int main() {
  T t(TrainerConfig{}, PromptDataset{}, "abc");
  (void)t.fit();
}
