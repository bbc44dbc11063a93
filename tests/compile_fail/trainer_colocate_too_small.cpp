// build error: N is smaller than the number of colocated roles
// error count: 1
#include <rlflow/trainer/trainer.hpp>
struct Score {
  static double score(std::string_view, std::string_view) { return 0.0; }
};
using T = rlflow::Trainer<rlflow::PPO, rlflow::Colocate<2>, rlflow::roles::ValueCritic, rlflow::roles::RuleReward<Score>>;
static_assert(sizeof(T) > 0);
int main() {}
