// build error: exactly one reward role is required
#include <rlflow/trainer.hpp>
struct Score {
  static double score(std::string_view, std::string_view) { return 0.0; }
};
using T = rlflow::Trainer<rlflow::GRPO>;
static_assert(sizeof(T) > 0);
int main() {}
