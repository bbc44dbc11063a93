// build error: N is smaller than the number of colocated roles
// error count: 1
// no build error: reward_role
#include <rlflow/trainer/trainer.hpp>
using namespace rlflow;
struct MyReward {
  using role_tag = reward_tag;
  using methods = rlflow::methods<>;
};
using T = Trainer<Colocate<2>, PPO, roles::ValueCritic, MyReward>;
int main() {
  T t(TrainerConfig{}, PromptDataset{}, "abc");
  (void)t.fit();
}
