// build error: the standalone rollout pool runs on the CPU engines only
// error count: 1
#include <rlflow/trainer/trainer.hpp>
struct Score {
  static double score(std::string_view, std::string_view) { return 0.0; }
};
using T = rlflow::Trainer<rlflow::SeparateAsync, rlflow::GRPO, rlflow::Backend<rlflow::cpu::tag>, rlflow::roles::RuleReward<Score>>;
static_assert(sizeof(T) > 0);
using U = rlflow::Trainer<rlflow::SeparateAsync, rlflow::GRPO, rlflow::Backend<rlflow::cuda::tag>, rlflow::roles::RuleReward<Score>>;
static_assert(sizeof(U) > 0);
int main() {}
