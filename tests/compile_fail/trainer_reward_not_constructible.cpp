// build error: reward_role<R>: R cannot be constructed from rlflow::roles::RoleSetup
// error count: 1
// no build error: cannot be constructed from the given arguments
// no build error: too many initializers
#include <rlflow/trainer/trainer.hpp>
using namespace rlflow;
struct MyReward {
  using role_tag = reward_tag;
  MyReward() = default;
  DataProto compute_rm_score(DataProto const& d) { return d; }
  using methods = rlflow::methods<method<&MyReward::compute_rm_score, dispatch::DPComputeProto>>;
};
using T = Trainer<GRPO, MyReward>;
int main() {
  T t(TrainerConfig{}, PromptDataset{}, "abc");
  (void)t.fit();
}
