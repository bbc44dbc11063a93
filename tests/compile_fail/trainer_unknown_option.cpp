// build error: unknown_trainer_option_is<float>
// error count: 1
#include <rlflow/trainer/trainer.hpp>
struct Score {
  static double score(std::string_view, std::string_view) { return 0.0; }
};
using T = rlflow::Trainer<rlflow::GRPO, float, rlflow::roles::RuleReward<Score>>;
static_assert(sizeof(T) > 0);
int main() {}
