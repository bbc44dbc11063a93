// build error: actor_rollout_ref_role<R>: R .*has no member function 'memory_stats'
// error count: 1
// A custom hybrid role that forgot one of the methods the Trainer calls.
#include <rlflow/trainer/trainer.hpp>
using namespace rlflow;
struct MyActor {
  using role_tag = actor_tag;
  MyActor(WorkerContext const&, roles::RoleSetup, std::int64_t) {}
  DataProto generate_sequences(DataProto const& d) { return d; }
  DataProto compute_log_prob(DataProto const& d) { return d; }
  DataProto compute_ref_log_prob(DataProto const& d) { return d; }
  roles::MetricLists update_actor(DataProto const&) { return {}; }
  void update_weights() {}
  void save_checkpoint(std::string) const {}
  void load_checkpoint(std::string) {}
  using methods = rlflow::methods<method<&MyActor::generate_sequences, dispatch::DPComputeProto>,
                                  method<&MyActor::compute_log_prob, dispatch::DPComputeProto>,
                                  method<&MyActor::compute_ref_log_prob, dispatch::DPComputeProto>,
                                  method<&MyActor::update_actor, dispatch::DPComputeMetric>,
                                  method<&MyActor::update_weights, dispatch::OneToAll>,
                                  method<&MyActor::save_checkpoint, dispatch::OneToAll, execute::RankZero>,
                                  method<&MyActor::load_checkpoint, dispatch::OneToAll>>;
};
using T = Trainer<GRPO, MyActor>;
int main() {
  T t(TrainerConfig{}, PromptDataset{}, "abc");
  (void)t.fit();
}
