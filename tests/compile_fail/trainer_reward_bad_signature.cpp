// build error: reward_role<R>: R::compute_rm_score cannot be called as the Trainer calls it
// error count: 1
#include <rlflow/trainer/trainer.hpp>
using namespace rlflow;
struct MyReward {
  using role_tag = reward_tag;
  explicit MyReward(roles::RoleSetup) {}
  double compute_rm_score(std::string const&) { return 0; }
  using methods = rlflow::methods<method<&MyReward::compute_rm_score, dispatch::OneToAll>>;
};
using T = Trainer<GRPO, MyReward>;
int main() {
  T t(TrainerConfig{}, PromptDataset{}, "abc");
  (void)t.fit();
}
