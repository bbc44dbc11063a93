// tests/device/trainer_cuda_reference.cpp: the CPU Trainer steps test_trainer_cuda compares the
// CUDA steps against (trainer_cuda_reference.hpp).
#include "trainer_cuda_reference.hpp"

#include <rlflow/trainer/trainer.hpp>

#include "common/reverse_task.hpp"

namespace rlflow::test_cuda_trainer {
namespace {

using Score = examples::ReverseScore;

template <class T>
CpuStep one_step(TrainerConfig const& cfg) {
  tasks::StringTask const task{};
  TrainerOptions quiet;
  quiet.console = false;
  T t(cfg, task.make_dataset(256, 3), task.charset(), quiet);
  CpuStep s;
  s.initial_weights = t.actor_weights();
  s.metrics = t.step();
  s.final_weights = t.actor_weights();
  return s;
}

}  // namespace

CpuStep cpu_grpo_step(TrainerConfig const& cfg) {
  return one_step<Trainer<GRPO, Colocate<3>, roles::RuleReward<Score>>>(cfg);
}

CpuStep cpu_ppo_step(TrainerConfig const& cfg) {
  return one_step<Trainer<PPO, Colocate<3>, roles::ValueCritic, roles::RuleReward<Score>>>(cfg);
}

}  // namespace rlflow::test_cuda_trainer
