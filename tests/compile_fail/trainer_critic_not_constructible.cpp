// build error: critic_role<R>: R cannot be constructed from \(rlflow::roles::RoleSetup, std::int64_t total_optimizer_steps\)
// error count: 1
#include <rlflow/trainer/trainer.hpp>
using namespace rlflow;
struct MyCritic {
  using role_tag = critic_tag;
  explicit MyCritic(roles::RoleSetup) {}
  using methods = rlflow::methods<>;
};
using T = Trainer<PPO, MyCritic>;
int main() {
  T t(TrainerConfig{}, PromptDataset{}, "abc");
  (void)t.fit();
}
