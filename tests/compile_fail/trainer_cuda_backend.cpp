// build error: the CUDA trainer is milestone 2
#include <rlflow/trainer.hpp>
struct Score {
  static double score(std::string_view, std::string_view) { return 0.0; }
};
using T = rlflow::Trainer<rlflow::GRPO, rlflow::Backend<rlflow::cuda::tag>, rlflow::roles::RuleReward<Score>>;
static_assert(sizeof(T) > 0);
int main() {}
