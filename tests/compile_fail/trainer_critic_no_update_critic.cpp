// build error: critic_role<R>: R .*has no member function 'update_critic'
// error count: 1
// no build error: is not a member of
#include <rlflow/trainer/trainer.hpp>
using namespace rlflow;
struct MyCritic {
  using role_tag = critic_tag;
  MyCritic(roles::RoleSetup, std::int64_t) {}
  DataProto compute_values(DataProto const& d) { return d; }
  void save_checkpoint(std::string) const {}
  void load_checkpoint(std::string) {}
  using methods = rlflow::methods<method<&MyCritic::compute_values, dispatch::DPComputeProto>,
                                  method<&MyCritic::save_checkpoint, dispatch::OneToAll, execute::RankZero>,
                                  method<&MyCritic::load_checkpoint, dispatch::OneToAll>>;
};
using T = Trainer<PPO, MyCritic>;
int main() {
  T t(TrainerConfig{}, PromptDataset{}, "abc");
  (void)t.fit();
}
