// build error: N must be a power of two between 1 and 8
// error count: 1
#include <rlflow/trainer/trainer.hpp>
struct Score {
  static double score(std::string_view, std::string_view) { return 0.0; }
};
using T = rlflow::Trainer<rlflow::GRPO, rlflow::TP<3>, rlflow::roles::RuleReward<Score>>;
static_assert(sizeof(T) > 0);
int main() {}
