// Short versions of both examples; learning is asserted by step counts (the mean score of the
// last steps exceeds that of the first steps by a clear margin), never by time.
#include <catch2/catch.hpp>

#include <rlflow/trainer/trainer.hpp>

#include "trainer/trainer_fixtures.hpp"

namespace test_trainer_learning {

using namespace rlflow;

namespace {
using rlflow::testing::quiet;
template <class T>
std::pair<double, double> first_and_last_mean(TrainerConfig cfg, int steps, int window) {
  cfg.trainer.total_training_steps = steps;
  cfg.trainer.default_local_dir =
      (std::filesystem::temp_directory_path() / ("rlflow_learning_" + std::to_string(::getpid()))).string().c_str();
  tasks::StringTask task;
  T t(cfg, task.make_dataset(4096, static_cast<std::uint64_t>(cfg.seed)), task.charset(), quiet());
  std::vector<double> s;
  for (int i = 0; i < steps; ++i) s.push_back(t.step().at("critic/score/mean"));
  double first = 0, last = 0;
  for (int i = 0; i < window; ++i) first += s[static_cast<std::size_t>(i)], last += s[s.size() - 1 - static_cast<std::size_t>(i)];
  std::filesystem::remove_all(std::string(cfg.trainer.default_local_dir.view()));
  return {first / window, last / window};
}
}  // namespace

TEST_CASE("GRPO learns to reverse strings (short demo)", "[trainer][learning]") {
  using T = Trainer<GRPO, Colocate<3>, roles::RuleReward<examples::ReverseScore>>;
  auto [first, last] = first_and_last_mean<T>(examples::grpo_reverse_config(), 60, 10);
  INFO("mean score of steps 1-10: " << first << ", of steps 51-60: " << last);
  REQUIRE(first < 0.3);
  REQUIRE(last > first + 0.15);
}

TEST_CASE("PPO with a critic learns to reverse strings (short example)", "[trainer][learning]") {
  using T = Trainer<PPO, Colocate<3>, roles::ValueCritic, roles::RuleReward<examples::ReverseScore>>;
  auto [first, last] = first_and_last_mean<T>(examples::ppo_reverse_config(), 60, 10);
  INFO("mean score of steps 1-10: " << first << ", of steps 51-60: " << last);
  REQUIRE(first < 0.35);
  REQUIRE(last > first + 0.15);
}

TEST_CASE("the headline Trainer<Colocate<3>, GRPO, TP<2>> learns to reverse strings (short demo)", "[trainer][learning][tp]") {
  using T = Trainer<Colocate<3>, GRPO, TP<2>>;
  auto [first, last] = first_and_last_mean<T>(examples::grpo_reverse_config(), 60, 10);
  INFO("mean score of steps 1-10: " << first << ", of steps 51-60: " << last);
  REQUIRE(first < 0.3);
  REQUIRE(last > first + 0.15);
}

TEST_CASE("GRPO with a standalone rollout pool (separate_async, one-step-off) learns to reverse strings", "[trainer][learning][async]") {
  using T = Trainer<GRPO, SeparateAsync, roles::RuleReward<examples::ReverseScore>>;
  auto [first, last] = first_and_last_mean<T>(examples::grpo_separate_async_config(), 60, 10);
  INFO("mean score of steps 1-10: " << first << ", of steps 51-60: " << last);
  REQUIRE(first < 0.3);
  REQUIRE(last > first + 0.15);
}

TEST_CASE("GRPO with colocate_async (one batch ahead) learns to reverse strings", "[trainer][learning][async]") {
  using T = Trainer<GRPO, Colocate<3>, roles::RuleReward<examples::ReverseScore>>;
  auto [first, last] = first_and_last_mean<T>(examples::grpo_colocate_async_config(), 60, 10);
  INFO("mean score of steps 1-10: " << first << ", of steps 51-60: " << last);
  REQUIRE(first < 0.3);
  REQUIRE(last > first + 0.15);
}

}  // namespace test_trainer_learning
