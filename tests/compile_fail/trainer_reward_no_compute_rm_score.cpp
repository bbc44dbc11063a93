// build error: reward_role<R>: R .*has no member function 'compute_rm_score'
// error count: 1
// no build error: is not a member of
// The member is misspelt: the message names the one the Trainer calls.
#include <rlflow/trainer/trainer.hpp>
using namespace rlflow;
struct MyReward {
  using role_tag = reward_tag;
  explicit MyReward(roles::RoleSetup) {}
  DataProto compute_score(DataProto const& d) { return d; }
  using methods = rlflow::methods<method<&MyReward::compute_score, dispatch::DPComputeProto>>;
};
using T = Trainer<GRPO, MyReward>;
int main() {
  T t(TrainerConfig{}, PromptDataset{}, "abc");
  (void)t.fit();
}
