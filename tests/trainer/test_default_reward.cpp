// Tests for the default reward role (roles::DefaultReward) and its score registry
// (tasks/reward_score.hpp): routing by data_source, run-time registration, the errors for an
// unknown data source or a missing column, and a Trainer without a reward option scoring exactly
// as one given RuleReward<ReverseScore>.
#include <catch2/catch.hpp>

#include <rlflow/trainer/trainer.hpp>

#include <filesystem>
#include <unistd.h>

#include "common/reverse_task.hpp"

namespace test_default_reward {

using namespace rlflow;

namespace {
std::string const alphabet = "abcd=";

//! A scored batch: responses (strings, then EOS, then pad), data sources and ground truths.
DataProto batch_of(std::vector<std::string> const& responses, std::vector<std::string> const& sources,
                   std::vector<std::string> const& truths, int R = 5) {
  model::CharTokenizer tok(alphabet);
  auto const B = static_cast<std::int64_t>(responses.size());
  Tensor resp = Tensor::full(Shape{B, R}, tok.pad_id());
  Tensor mask = Tensor::zeros(DType::int32, Shape{B, R});
  NonTensorColumn rm, src;
  for (std::int64_t i = 0; i < B; ++i) {
    auto ids = tok.encode(responses[static_cast<std::size_t>(i)]);
    ids.push_back(tok.eos_id());
    for (std::size_t t = 0; t < ids.size() && t < std::size_t(R); ++t) {
      resp.at<std::int32_t>(i, std::int64_t(t)) = ids[t];
      mask.at<std::int32_t>(i, std::int64_t(t)) = 1;
    }
    rm.emplace_back(Dict{{"ground_truth", truths[static_cast<std::size_t>(i)]}});
    src.emplace_back(sources[static_cast<std::size_t>(i)]);
  }
  return DataProto::from_dict({{"responses", resp}, {"response_mask", mask}}, {{"reward_model", rm}, {"data_source", src}});
}

roles::RoleSetup setup_of() {
  roles::RoleSetup s;
  s.alphabet = alphabet;
  return s;
}

//! The score a row got: the sum of its token_level_scores (one nonzero at the last valid token).
double row_score(DataProto const& out, std::int64_t i) {
  Tensor const& t = out.tensor("token_level_scores");
  double s = 0;
  for (std::int64_t k = 0; k < t.dim(1); ++k) s += t.at<float>(i, k);
  return s;
}
}  // namespace

TEST_CASE("DefaultReward scores each row with the scorer of its data_source", "[trainer][reward]") {
  WorkerContext ctx;
  roles::DefaultReward r(ctx, setup_of());
  // partial credit by hand: matching positions / max(len(response), len(truth))
  auto out = r.compute_rm_score(batch_of({"cba", "cb", "abcd", "dcba"}, {"reverse", "reverse", "sort", "sort"},
                                         {"cba", "cba", "abcd", "abcd"}));
  REQUIRE(row_score(out, 0) == Approx(1.0));
  REQUIRE(row_score(out, 1) == Approx(2.0 / 3.0));
  REQUIRE(row_score(out, 2) == Approx(1.0));
  REQUIRE(row_score(out, 3) == Approx(0.0));
  // the score sits on the last valid token (the EOS): row 1 "cb" + EOS -> position 2
  REQUIRE(out.tensor("token_level_scores").at<float>(1, 2) == Approx(2.0 / 3.0));
  REQUIRE(out.tensor("token_level_scores").at<float>(1, 1) == 0.0f);
}

TEST_CASE("register_score adds a data source at run time, unknown ones are errors naming them", "[trainer][reward]") {
  WorkerContext ctx;
  roles::DefaultReward r(ctx, setup_of());
  std::string const name = "test/length" + std::to_string(::getpid());
  auto data = batch_of({"ab", "abc"}, {name, "reverse"}, {"x", "cba"});
  REQUIRE_THROWS_AS(r.compute_rm_score(data), key_error);
  REQUIRE_THROWS_WITH(r.compute_rm_score(data), Catch::Contains("'" + name + "'") && Catch::Contains("reverse") &&
                                                    Catch::Contains("sort") && Catch::Contains("register_score"));
  tasks::register_score(name, [](std::string_view resp, std::string_view) { return 0.25 * double(resp.size()); });
  REQUIRE(tasks::ScoreRegistry::global().contains(name));
  auto out = r.compute_rm_score(data);
  REQUIRE(row_score(out, 0) == Approx(0.5));
  REQUIRE(row_score(out, 1) == Approx(1.0 / 3.0));  // "abc" vs "cba": only 'b' matches
  // a second registration without replace is refused; with replace it overrides
  REQUIRE_THROWS_WITH(tasks::register_score(name, [](std::string_view, std::string_view) { return 1.0; }),
                      Catch::Contains("already has a scorer"));
  tasks::register_score(name, [](std::string_view, std::string_view) { return -2.0; }, /*replace=*/true);
  REQUIRE(row_score(r.compute_rm_score(data), 0) == Approx(-2.0));
  REQUIRE(tasks::default_compute_score(name, "a", "b") == -2.0);
  // a scorer returning NaN is reported with the row, as for RuleReward
  tasks::register_score(name, [](std::string_view, std::string_view) { return std::nan(""); }, true);
  REQUIRE_THROWS_WITH(r.compute_rm_score(data), Catch::Contains("DefaultReward") && Catch::Contains("row 0"));
  REQUIRE(tasks::ScoreRegistry::global().remove(name));
  REQUIRE_FALSE(tasks::ScoreRegistry::global().contains(name));
}

TEST_CASE("DefaultReward needs the data_source column", "[trainer][reward]") {
  WorkerContext ctx;
  roles::DefaultReward r(ctx, setup_of());
  DataProto d = batch_of({"ab"}, {"reverse"}, {"ba"});
  DataProto no_src = DataProto::from_dict({{"responses", d.tensor("responses")}, {"response_mask", d.tensor("response_mask")}},
                                         {{"reward_model", d.non_tensor("reward_model")}});
  REQUIRE_THROWS_WITH(r.compute_rm_score(no_src), Catch::Contains("data_source") && Catch::Contains("RuleReward"));
}

TEST_CASE("a Trainer without a reward option scores as RuleReward<ReverseScore>", "[trainer][reward]") {
  namespace fs = std::filesystem;
  using Default = Trainer<GRPO>;
  STATIC_REQUIRE(std::is_same_v<Default::reward_role, roles::DefaultReward>);
  auto cfg = [](char const* name) {
    TrainerConfig c = examples::reverse_base_config();
    c.data.train_batch_size = 8;
    c.actor_rollout_ref.actor.ppo_mini_batch_size = 8;
    c.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 16;
    c.actor_rollout_ref.rollout.n = 4;
    c.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 16;
    c.actor_rollout_ref.model.n_embd = 32;
    c.trainer.total_training_steps = 2;
    auto dir = fs::temp_directory_path() / (std::string("rlflow_default_reward_") + name + std::to_string(::getpid()));
    fs::remove_all(dir);
    c.trainer.default_local_dir = dir.string().c_str();
    return c;
  };
  TrainerOptions q;
  q.console = false;
  tasks::StringTask task;
  auto data = task.make_dataset(64, 5);
  Default a(cfg("a"), data, task.charset(), q);
  Trainer<GRPO, roles::RuleReward<examples::ReverseScore>> b(cfg("b"), data, task.charset(), q);
  for (int s = 0; s < 2; ++s) {
    Metrics ma = a.step(), mb = b.step();
    for (auto const& key : {"critic/score/mean", "critic/score/max", "critic/advantages/mean", "actor/pg_loss"}) {
      INFO(key);
      REQUIRE(ma.at(key) == mb.at(key));
    }
  }
  REQUIRE(a.actor_rollout_wg().call<&roles::ActorRolloutRef::actor_weights>() ==
          b.actor_rollout_wg().call<&roles::ActorRolloutRef::actor_weights>());
}

}  // namespace test_default_reward
