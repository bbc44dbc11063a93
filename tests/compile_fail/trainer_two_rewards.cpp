// build error: more than one reward role; keep one
// error count: 1
#include <rlflow/trainer/trainer.hpp>
struct Score {
  static double score(std::string_view, std::string_view) { return 0.0; }
};
using T = rlflow::Trainer<rlflow::GRPO, rlflow::roles::RuleReward<Score>, rlflow::roles::DefaultReward>;
static_assert(sizeof(T) > 0);
int main() {}
