// build error: reward_role<R>: R::compute_rm_score is registered with a dispatch or execute mode that does not return
// error count: 1
// OneToAll gathers one DataProto per rank (a std::vector), not the batch the Trainer reads.
#include <rlflow/trainer/trainer.hpp>
using namespace rlflow;
struct MyReward {
  using role_tag = reward_tag;
  explicit MyReward(roles::RoleSetup) {}
  DataProto compute_rm_score(DataProto const& d) { return d; }
  using methods = rlflow::methods<method<&MyReward::compute_rm_score, dispatch::OneToAll>>;
};
using T = Trainer<GRPO, MyReward>;
int main() {
  T t(TrainerConfig{}, PromptDataset{}, "abc");
  (void)t.fit();
}
