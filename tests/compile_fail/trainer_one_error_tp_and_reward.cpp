// build error: rlflow::TP<N>: N must be a power of two between 1 and 8
// error count: 1
// no build error: reward_role
// no build error: incomplete type
// Two mistakes in one Trainer: only the first (TP<3>) is reported; the reward role is checked once it is fixed.
#include <rlflow/trainer/trainer.hpp>
using namespace rlflow;
struct MyReward {
  using role_tag = reward_tag;
  using methods = rlflow::methods<>;
};
using T = Trainer<Colocate<3>, GRPO, TP<3>, MyReward>;
int main() {
  T t(TrainerConfig{}, PromptDataset{}, "abc");
  (void)t.fit();
}
