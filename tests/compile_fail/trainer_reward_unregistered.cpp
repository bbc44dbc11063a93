// build error: reward_role<R>: R::compute_rm_score is not registered; add rlflow::method<&R::compute_rm_score
// error count: 1
// no build error: is not listed in R::methods
#include <rlflow/trainer/trainer.hpp>
using namespace rlflow;
struct MyReward {
  using role_tag = reward_tag;
  MyReward(WorkerContext const&, roles::RoleSetup) {}
  DataProto compute_rm_score(DataProto const& d) { return d; }
  using methods = rlflow::methods<>;
};
using T = Trainer<GRPO, MyReward>;
int main() {
  T t(TrainerConfig{}, PromptDataset{}, "abc");
  (void)t.fit();
}
