// build error: Score needs .static double score
#include <rlflow/trainer/trainer.hpp>
struct Score {
  static double score(std::string_view, std::string_view) { return 0.0; }
};
struct NotAScore {};
using R = rlflow::roles::RuleReward<NotAScore>;
static_assert(sizeof(R) > 0);
int main() {}
