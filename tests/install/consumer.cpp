// A downstream program: includes the umbrella header, uses a Tensor and reads a YAML config (so it
// links yaml-cpp through the exported rlflow::rlflow target).
#include <rlflow/rlflow.hpp>
#include <cstdio>

int main() {
  auto t = rlflow::Tensor::from(std::vector<float>{1, 2, 3, 4}, rlflow::Shape{2, 2});
  auto v = t.slice_rows(1, 2);
  if (v.span<float>()[0] != 3.0f) return 1;
  rlflow::TrainerConfig c;
  c.apply_text("actor_rollout_ref:\n  actor:\n    optim: &o {lr: 0.5}\ncritic:\n  optim: *o\n", "yaml", "consumer.yaml");
  if (c.critic.optim.lr != 0.5) return 1;
  std::printf("consumer ok: rlflow %d.%d.%d\n", rlflow::version_major, rlflow::version_minor, rlflow::version_patch);
  return 0;
}
