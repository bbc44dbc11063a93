// build error: reward_role<R>: R has no 'using methods = rlflow::methods<...>;'
// error count: 1
// A reward role without a method table: only the contract's message (docs/roles.md).
#include <rlflow/trainer/trainer.hpp>
using namespace rlflow;
struct MyReward {
  using role_tag = reward_tag;
  explicit MyReward(roles::RoleSetup) {}
  DataProto compute_rm_score(DataProto const& d) { return d; }
};
using T = Trainer<GRPO, MyReward>;
int main() {
  T t(TrainerConfig{}, PromptDataset{}, "abc");
  (void)t.fit();
}
