// Tests for the role contracts (rlflow/roles/concepts.hpp, docs/roles.md): the concepts accept the
// built-in roles and reject each broken rule; a hand-written reward role that follows the
// documented contract (read responses / response_mask / reward_model, score on the last valid
// token) trains exactly as RuleReward with the same rule; custom critic and actor roles derived
// from the built-in ones run through the Trainer with the same metrics as the built-ins.
// The compile-time messages themselves are the compile-fail tests tests/compile_fail/trainer_*.cpp.
#include <catch2/catch.hpp>

#include <rlflow/trainer/trainer.hpp>

#include <atomic>
#include <filesystem>
#include <unistd.h>

#include "trainer/trainer_fixtures.hpp"

namespace test_role_contracts {

using namespace rlflow;
namespace fs = std::filesystem;

namespace {
using Score = examples::ReverseScore;

//! The reward contract written out by hand (docs/roles.md), scoring with StringTask::score.
class HandReward {
 public:
  using role_tag = reward_tag;
  explicit HandReward(roles::RoleSetup setup) : tok_(roles::role_tokenizer(setup)) {}
  DataProto compute_rm_score(DataProto const& data) {
    Tensor const& resp = data.tensor("responses");
    Tensor const& mask = data.tensor("response_mask");
    auto const& rm = data.non_tensor("reward_model");
    REQUIRE(data.has_non_tensor("data_source"));
    std::int64_t const b = resp.dim(0), R = resp.dim(1);
    Tensor out = Tensor::zeros(DType::float32, Shape{b, R});
    for (std::int64_t i = 0; i < b; ++i) {
      std::vector<std::int32_t> ids;
      std::int64_t last = -1;
      for (std::int64_t t = 0; t < R; ++t) {
        if (!mask.at<std::int32_t>(i, t)) continue;
        last = t;
        if (resp.at<std::int32_t>(i, t) != tok_->eos_id()) ids.push_back(resp.at<std::int32_t>(i, t));
      }
      std::string const truth = rm[static_cast<std::size_t>(i)].as_dict().get("ground_truth").as_string();
      if (last >= 0) out.at<float>(i, last) = static_cast<float>(Score::score(tok_->decode(ids), truth));
    }
    calls += 1;
    return DataProto::from_dict({{"token_level_scores", out}});
  }
  using methods = rlflow::methods<method<&HandReward::compute_rm_score, dispatch::DPComputeProto>>;
  static inline std::atomic<int> calls{0};

 private:
  std::shared_ptr<model::Tokenizer const> tok_;
};

std::atomic<int> actors_built{0}, critics_built{0};

//! A custom hybrid role: the built-in one, with its constructor and method table inherited.
struct CountingActor : roles::ActorRolloutRef {
  CountingActor(WorkerContext const& ctx, roles::RoleSetup setup, std::int64_t steps)
      : roles::ActorRolloutRef(ctx, std::move(setup), steps) {
    ++actors_built;
  }
};

//! A custom critic: the built-in one, with its method table inherited.
struct CountingCritic : roles::ValueCritic {
  CountingCritic(WorkerContext const& ctx, roles::RoleSetup setup, std::int64_t steps)
      : roles::ValueCritic(ctx, std::move(setup), steps) {
    ++critics_built;
  }
};

// Roles that break one rule each (the concepts must say false; the Trainer would static_assert).
struct NoTable {
  using role_tag = reward_tag;
  explicit NoTable(roles::RoleSetup) {}
  DataProto compute_rm_score(DataProto const& d) { return d; }
};
struct Unregistered {
  using role_tag = reward_tag;
  explicit Unregistered(roles::RoleSetup) {}
  DataProto compute_rm_score(DataProto const& d) { return d; }
  using methods = rlflow::methods<>;
};
struct WrongMode {
  using role_tag = reward_tag;
  explicit WrongMode(roles::RoleSetup) {}
  DataProto compute_rm_score(DataProto const& d) { return d; }
  using methods = rlflow::methods<method<&WrongMode::compute_rm_score, dispatch::OneToAll>>;
};
struct WrongReturn {
  using role_tag = reward_tag;
  explicit WrongReturn(roles::RoleSetup) {}
  double compute_rm_score(DataProto const&) { return 0; }
  using methods = rlflow::methods<method<&WrongReturn::compute_rm_score, dispatch::OneToAll>>;
};
struct NoSetupCtor {
  using role_tag = reward_tag;
  DataProto compute_rm_score(DataProto const& d) { return d; }
  using methods = rlflow::methods<method<&NoSetupCtor::compute_rm_score, dispatch::DPComputeProto>>;
};
struct CriticWithoutUpdate {
  using role_tag = critic_tag;
  CriticWithoutUpdate(roles::RoleSetup, std::int64_t) {}
  DataProto compute_values(DataProto const& d) { return d; }
  void save_checkpoint(std::string) const {}
  void load_checkpoint(std::string) {}
  using methods = rlflow::methods<method<&CriticWithoutUpdate::compute_values, dispatch::DPComputeProto>,
                                  method<&CriticWithoutUpdate::save_checkpoint, dispatch::OneToAll, execute::RankZero>,
                                  method<&CriticWithoutUpdate::load_checkpoint, dispatch::OneToAll>>;
};

using rlflow::testing::fresh_dir;
using rlflow::testing::quiet;
//! The shared tiny configuration, two steps.
TrainerConfig two_step_config(fs::path const& dir) {
  TrainerConfig c = rlflow::testing::tiny_config(dir);
  c.trainer.total_training_steps = 2;
  return c;
}

using rlflow::testing::task;

//! The metrics of 'steps' steps of trainer type T, without the wall-clock ones.
template <class T>
std::vector<Metrics> run_steps(std::string const& name, int steps) {
  auto dir = fresh_dir(name);
  T t(two_step_config(dir), task.make_dataset(64, 3), task.charset(), quiet());
  std::vector<Metrics> out;
  for (int i = 0; i < steps; ++i) out.push_back(rlflow::testing::deterministic_part(t.step()));
  fs::remove_all(dir);
  return out;
}

void require_same(std::vector<Metrics> const& a, std::vector<Metrics> const& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t s = 0; s < a.size(); ++s) {
    REQUIRE(a[s].size() == b[s].size());
    for (auto const& [k, v] : a[s]) {
      INFO("step " << s + 1 << ", metric " << k);
      REQUIRE(b[s].count(k) == 1);
      if (std::isnan(v)) REQUIRE(std::isnan(b[s].at(k)));
      else REQUIRE(v == b[s].at(k));
    }
  }
}
}  // namespace

TEST_CASE("the role concepts accept the built-in roles and reject each broken rule", "[trainer][roles]") {
  // built-in roles meet their contracts
  STATIC_REQUIRE(roles::reward_role<roles::RuleReward<Score>>);
  STATIC_REQUIRE(roles::reward_role<roles::DefaultReward>);
  STATIC_REQUIRE(roles::reward_role<HandReward>);
  STATIC_REQUIRE(roles::critic_role<roles::ValueCritic>);
  STATIC_REQUIRE(roles::critic_role<CountingCritic>);
  STATIC_REQUIRE(roles::actor_rollout_ref_role<roles::ActorRolloutRef>);
  STATIC_REQUIRE(roles::actor_rollout_ref_role<roles::BasicActorRolloutRef<cpu::tag, 2>>);
  STATIC_REQUIRE(roles::actor_rollout_ref_role<CountingActor>);
  // a role of one kind is not a role of another
  STATIC_REQUIRE_FALSE(roles::reward_role<roles::ValueCritic>);
  STATIC_REQUIRE_FALSE(roles::critic_role<roles::RuleReward<Score>>);
  STATIC_REQUIRE_FALSE(roles::actor_rollout_ref_role<roles::ValueCritic>);
  // one broken rule each
  STATIC_REQUIRE_FALSE(roles::reward_role<NoTable>);
  STATIC_REQUIRE_FALSE(roles::reward_role<Unregistered>);
  STATIC_REQUIRE_FALSE(roles::reward_role<WrongMode>);
  STATIC_REQUIRE_FALSE(roles::reward_role<WrongReturn>);
  STATIC_REQUIRE_FALSE(roles::reward_role<NoSetupCtor>);
  STATIC_REQUIRE_FALSE(roles::critic_role<CriticWithoutUpdate>);
  // the Trainer sorts the custom roles into its slots
  using T = Trainer<PPO, CountingCritic, CountingActor, HandReward>;
  STATIC_REQUIRE(std::is_same_v<T::reward_role, HandReward>);
  STATIC_REQUIRE(std::is_same_v<T::critic_role, CountingCritic>);
  STATIC_REQUIRE(std::is_same_v<T::actor_role, CountingActor>);
  STATIC_REQUIRE(std::is_same_v<Trainer<GRPO>::actor_role, roles::ActorRolloutRef>);
}

TEST_CASE("a hand-written reward role following docs/roles.md trains exactly as RuleReward", "[trainer][roles]") {
  HandReward::calls = 0;
  auto hand = run_steps<Trainer<GRPO, HandReward>>("hand", 2);
  REQUIRE(HandReward::calls == 2 * 2);  // two steps, one chunk per DP worker (n_gpus_per_node = 2)
  auto rule = run_steps<Trainer<GRPO, roles::RuleReward<Score>>>("rule", 2);
  require_same(hand, rule);
  REQUIRE(hand.back().at("critic/score/mean") > 0.0);  // the scores reached the advantages
}

TEST_CASE("custom actor and critic roles run through the Trainer like the built-in ones", "[trainer][roles]") {
  actors_built = 0;
  critics_built = 0;
  auto custom = run_steps<Trainer<PPO, CountingCritic, CountingActor, roles::RuleReward<Score>>>("custom", 2);
  REQUIRE(actors_built == 2);  // one per worker
  REQUIRE(critics_built == 2);
  auto builtin = run_steps<Trainer<PPO, roles::ValueCritic, roles::RuleReward<Score>>>("builtin", 2);
  require_same(custom, builtin);
}

}  // namespace test_role_contracts
