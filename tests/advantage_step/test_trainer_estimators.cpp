// tests/advantage_step/test_trainer_estimators.cpp <-> trainer.hpp + algorithm.hpp: every verl
// advantage estimator is selectable in the Trainer, by type (rlflow::GDPO, ...) or from the
// configuration (rlflow::FromConfig reads algorithm.adv_estimator, as verl does). Checked against
// independent paths: FromConfig equals the type-named option bit for bit; the vectorized
// variants (other kernels, same math) equal GRPO / RLOO; GDPO's whitened advantage has mean 0;
// the optimal token baseline gets sum_pi_squared from the actor's old-log-prob pass, and the step's
// advantages equal a double-precision OTB of the batch TrainerOptions::after_advantage hands over.
#include <catch2/catch.hpp>

#include <rlflow/trainer/trainer.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <string>
#include <vector>
#include <unistd.h>

#include "kernels/reference.hpp"
#include "trainer/trainer_fixtures.hpp"

namespace test_trainer_estimators {

using namespace rlflow;
using namespace rlflow::testing;
namespace fs = std::filesystem;

namespace {
using rlflow::testing::task;
using Reward = roles::RuleReward<Score>;

template <class T>
std::vector<Metrics> run(TrainerConfig const& cfg, int steps) {
  T t(cfg, task.make_dataset(64, 3), task.charset(), quiet());
  std::vector<Metrics> out;
  for (int i = 0; i < steps; ++i) out.push_back(deterministic_part(t.step()));
  return out;
}

void require_same(std::vector<Metrics> const& a, std::vector<Metrics> const& b, double rel) {
  REQUIRE(a.size() == b.size());
  for (std::size_t s = 0; s < a.size(); ++s) {
    REQUIRE(a[s].size() == b[s].size());
    for (auto const& [k, v] : a[s]) {
      INFO("step " << s << " metric " << k);
      REQUIRE(b[s].count(k) == 1);
      if (rel == 0) CHECK(v == b[s].at(k));
      else CHECK(v == Approx(b[s].at(k)).epsilon(rel).margin(rel));
    }
  }
}

//! The demo task's reward plus two per-sample components as non-tensor columns (GDPO's input):
//! accuracy_reward = the rule score, length_reward = -|response length - 3| / 3.
struct TwoPartReward {
  using role_tag = reward_tag;
  static constexpr std::string_view role_name = "reward";
  TwoPartReward(WorkerContext const& ctx, roles::RoleSetup setup) : rule_(ctx, std::move(setup)) {}
  DataProto compute_rm_score(DataProto const& data) {
    DataProto out = rule_.compute_rm_score(data);
    auto const scores = out.tensor("token_level_scores");
    auto const mask = data.tensor("response_mask");
    std::int64_t const b = scores.dim(0), R = scores.dim(1);
    NonTensorColumn acc, len;
    for (std::int64_t i = 0; i < b; ++i) {
      double s = 0, n = 0;
      for (std::int64_t j = 0; j < R; ++j) {
        s += scores.span<float>()[static_cast<std::size_t>(i * R + j)];
        n += mask.dtype() == DType::float32 ? double(mask.span<float>()[static_cast<std::size_t>(i * R + j)] != 0)
                                            : double(mask.span<std::int32_t>()[static_cast<std::size_t>(i * R + j)] != 0);
      }
      acc.emplace_back(s);
      len.emplace_back(-std::fabs(n - 3.0) / 3.0);
    }
    if (record) {  // what the test's GDPO reference needs: group, valid tokens, both components
      std::lock_guard<std::mutex> lock(record->mu);
      auto const& uid = data.non_tensor("uid");
      for (std::int64_t i = 0; i < b; ++i) {
        double n = 0;
        for (std::int64_t j = 0; j < R; ++j)
          n += mask.dtype() == DType::float32 ? double(mask.span<float>()[static_cast<std::size_t>(i * R + j)] != 0)
                                              : double(mask.span<std::int32_t>()[static_cast<std::size_t>(i * R + j)] != 0);
        auto const u = static_cast<std::size_t>(i);
        record->rows.push_back({uid[u].as_string(), n, acc[u].as_number(), len[u].as_number()});
      }
    }
    out.set_non_tensor("accuracy_reward", std::move(acc));
    out.set_non_tensor("length_reward", std::move(len));
    return out;
  }
  struct Row {
    std::string uid;
    double tokens, accuracy, length;
  };
  struct Record {
    std::mutex mu;
    std::vector<Row> rows;
  };
  static inline Record* record = nullptr;  //!< set by the test that checks the advantages
  using methods = rlflow::methods<rlflow::method<&TwoPartReward::compute_rm_score, dispatch::DPComputeProto>>;
  Reward rule_;
};
}  // namespace

TEST_CASE("FromConfig: algorithm.adv_estimator chooses the estimator, as the type-named option does", "[trainer][estimators]") {
  auto dir = fresh_dir("fromconfig");
  auto cfg = tiny_config(dir);
  cfg.trainer.total_training_steps = 2;
  SECTION("grpo") {
    auto c = cfg;
    c.apply_overrides({"algorithm.adv_estimator=grpo"});
    require_same(run<Trainer<FromConfig, Reward>>(c, 2), run<Trainer<GRPO, Reward>>(cfg, 2), 0);
  }
  SECTION("remax runs the greedy baseline") {
    auto c = cfg;
    c.apply_overrides({"algorithm.adv_estimator=remax"});
    Trainer<FromConfig, Reward> t(c, task.make_dataset(64, 3), task.charset(), quiet());
    CHECK(t.step().count("timing_s/gen_max") == 1);
    require_same(run<Trainer<FromConfig, Reward>>(c, 2), run<Trainer<ReMax, Reward>>(cfg, 2), 0);
  }
  SECTION("remax in an async mode (the producer makes the greedy rollout) trains as the ReMax type does") {
    auto c = cfg;
    c.apply_overrides({"algorithm.adv_estimator=remax", "trainer.v1.trainer_mode=colocate_async",
                       "trainer.v1.colocate_async.num_warmup_batches=0"});
    auto const no_async = [](std::vector<Metrics> ms) {  // the async bookkeeping metrics are timings
      for (auto& m : ms) std::erase_if(m, [](auto const& kv) { return kv.first.starts_with("colocate_async/"); });
      return ms;
    };
    require_same(no_async(run<Trainer<FromConfig, Reward>>(c, 2)), no_async(run<Trainer<ReMax, Reward>>(c, 2)), 0);
  }
  SECTION("gae with a critic is PPO") {
    auto c = cfg;
    c.apply_overrides({"algorithm.adv_estimator=gae"});
    require_same(run<Trainer<FromConfig, roles::ValueCritic, Reward>>(c, 2), run<Trainer<PPO, roles::ValueCritic, Reward>>(cfg, 2), 0);
  }
  SECTION("gae (the default) without a critic is an error before work") {
    REQUIRE_THROWS_WITH((Trainer<FromConfig, Reward>(cfg, task.make_dataset(64, 3), task.charset(), quiet())),
                        Catch::Contains("algorithm.adv_estimator=gae") && Catch::Contains("critic-free estimator"));
  }
  SECTION("a type-named option still rejects a contradicting key, and names FromConfig") {
    auto c = cfg;
    c.apply_overrides({"algorithm.adv_estimator=rloo"});
    REQUIRE_THROWS_WITH((Trainer<GRPO, Reward>(c, task.make_dataset(64, 3), task.charset(), quiet())),
                        Catch::Contains("contradicts") && Catch::Contains("rlflow::FromConfig"));
  }
  fs::remove_all(dir);
}

TEST_CASE("the vectorized estimators (other kernels, same math) train like GRPO and RLOO", "[trainer][estimators]") {
  auto dir = fresh_dir("vectorized");
  auto cfg = tiny_config(dir);
  require_same(run<Trainer<GRPOVectorized, Reward>>(cfg, 3), run<Trainer<GRPO, Reward>>(cfg, 3), 1e-5);
  require_same(run<Trainer<RLOOVectorized, Reward>>(cfg, 3), run<Trainer<RLOO, Reward>>(cfg, 3), 1e-5);
  fs::remove_all(dir);
}

TEST_CASE("every critic-free estimator runs in the Trainer with finite advantages", "[trainer][estimators]") {
  auto dir = fresh_dir("each");
  auto cfg = tiny_config(dir);
  cfg.trainer.total_training_steps = 2;
  auto const est = GENERATE(as<std::string>{}, "grpo_passk", "gpg", "opo", "reinforce_plus_plus", "reinforce_plus_plus_baseline",
                            "rloo", "grpo_vectorized", "rloo_vectorized");
  INFO(est);
  auto c = cfg;
  c.apply_overrides({"algorithm.adv_estimator=" + est});
  auto const ms = run<Trainer<FromConfig, Reward>>(c, 2);
  for (auto const& m : ms) {
    CHECK(std::isfinite(m.at("critic/advantages/mean")));
    CHECK(std::isfinite(m.at("critic/advantages/max")));
    CHECK(std::isfinite(m.at("actor/pg_loss")));
  }
  fs::remove_all(dir);
}

TEST_CASE("GDPO in the Trainer: reward components from the reward role, a whitened advantage", "[trainer][estimators][gdpo]") {
  auto dir = fresh_dir("gdpo");
  auto cfg = tiny_config(dir);
  cfg.trainer.total_training_steps = 2;
  SECTION("without gdpo_reward_keys: an error before work") {
    REQUIRE_THROWS_WITH((Trainer<GDPO, TwoPartReward>(cfg, task.make_dataset(64, 3), task.charset(), quiet())),
                        Catch::Contains("gdpo_reward_keys"));
  }
  SECTION("two components, weighted") {
    auto c = cfg;
    c.apply_overrides({"algorithm.gdpo_reward_keys=[accuracy_reward,length_reward]", "algorithm.gdpo_reward_weights=[1.0,0.5]"});
    auto const ms = run<Trainer<GDPO, TwoPartReward>>(c, 2);
    for (auto const& m : ms) CHECK(std::fabs(m.at("critic/advantages/mean")) < 1e-4);  // masked_whiten: batch mean 0
    auto c2 = c;
    c2.apply_overrides({"algorithm.adv_estimator=gdpo"});
    require_same(run<Trainer<FromConfig, TwoPartReward>>(c2, 2), ms, 0);
  }
  SECTION("the step's advantages equal a plain double-precision GDPO of the scored rows") {
    // verl's compute_gdpo_outcome_advantage: GRPO per component within each uid group (eps 1e-6,
    // std-normalised), weighted sum, whitened over the batch's valid tokens (unbiased variance,
    // + 1e-8); the Trainer reports critic/advantages/{mean,max,min} over the valid tokens
    auto c = cfg;
    c.apply_overrides({"algorithm.gdpo_reward_keys=[accuracy_reward,length_reward]", "algorithm.gdpo_reward_weights=[1.0,0.5]"});
    TwoPartReward::Record rec;
    TwoPartReward::record = &rec;
    Trainer<GDPO, TwoPartReward> t(c, task.make_dataset(64, 3), task.charset(), quiet());
    for (int step = 0; step < 3; ++step) {
      rec.rows.clear();
      auto const m = t.step();
      auto const& rows = rec.rows;
      REQUIRE(rows.size() == 32u);  // 8 prompts x 4 samples
      std::map<std::string, std::vector<std::size_t>> groups;
      for (std::size_t i = 0; i < rows.size(); ++i) groups[rows[i].uid].push_back(i);
      std::vector<double> a(rows.size(), 0.0);
      for (int k = 0; k < 2; ++k) {
        auto score = [&](std::size_t i) { return k == 0 ? rows[i].accuracy : rows[i].length; };
        for (auto const& [uid, g] : groups) {
          double mu = 0, ss = 0, n = static_cast<double>(g.size());
          for (auto i : g) mu += score(i);
          mu /= n;
          for (auto i : g) ss += (score(i) - mu) * (score(i) - mu);
          double const sd = n > 1 ? std::sqrt(ss / (n - 1)) : 1.0;
          if (n == 1) mu = 0;
          for (auto i : g) a[i] += (k == 0 ? 1.0 : 0.5) * (score(i) - mu) / (sd + 1e-6);
        }
      }
      double N = 0, sum = 0, var = 0;
      for (std::size_t i = 0; i < rows.size(); ++i) N += rows[i].tokens, sum += rows[i].tokens * a[i];
      double const mean = sum / N;
      for (std::size_t i = 0; i < rows.size(); ++i) var += rows[i].tokens * (a[i] - mean) * (a[i] - mean);
      var /= N - 1;
      double mx = -1e300, mn = 1e300, tot = 0;
      for (std::size_t i = 0; i < rows.size(); ++i) {
        if (rows[i].tokens == 0) continue;
        double const w = (a[i] - mean) / std::sqrt(var + 1e-8);
        mx = std::max(mx, w), mn = std::min(mn, w), tot += rows[i].tokens * w;
      }
      INFO("step " << step);
      REQUIRE(mx - mn > 0.1);  // the components vary: the check is not between constants
      CHECK(m.at("critic/advantages/max") == Approx(mx).margin(1e-4));
      CHECK(m.at("critic/advantages/min") == Approx(mn).margin(1e-4));
      CHECK(m.at("critic/advantages/mean") == Approx(tot / N).margin(1e-5));
    }
    TwoPartReward::record = nullptr;
  }
  SECTION("a key the reward role does not write fails the step, naming it, and the batch is kept") {
    auto c = cfg;
    c.apply_overrides({"algorithm.gdpo_reward_keys=[accuracy_reward,format_reward]"});
    Trainer<GDPO, TwoPartReward> t(c, task.make_dataset(64, 3), task.charset(), quiet());
    auto const pos = t.data_position();
    REQUIRE_THROWS_WITH(t.step(), Catch::Contains("format_reward"));
    CHECK(t.data_position() == pos);
  }
  fs::remove_all(dir);
}

TEST_CASE("the optimal token baseline gets sum_pi_squared from the actor's old-log-prob pass", "[trainer][estimators][otb]") {
  auto dir = fresh_dir("otb");
  auto cfg = tiny_config(dir);
  cfg.trainer.total_training_steps = 2;
  SECTION("without calculate_sum_pi_squared: an error before work naming the key") {
    REQUIRE_THROWS_WITH((Trainer<OptimalTokenBaseline, Reward>(cfg, task.make_dataset(64, 3), task.charset(), quiet())),
                        Catch::Contains("calculate_sum_pi_squared"));
  }
  SECTION("with it, both variants train") {
    auto c = cfg;
    c.apply_overrides({"actor_rollout_ref.actor.calculate_sum_pi_squared=true"});
    for (auto const& m : run<Trainer<OptimalTokenBaseline, Reward>>(c, 2)) {
      CHECK(std::isfinite(m.at("critic/advantages/mean")));
      CHECK(std::isfinite(m.at("actor/pg_loss")));
    }
    for (auto const& m : run<Trainer<TIROptimalTokenBaseline, Reward>>(c, 2)) CHECK(std::isfinite(m.at("critic/advantages/mean")));
    auto c2 = c;
    c2.apply_overrides({"algorithm.adv_estimator=optimal_token_baseline"});
    require_same(run<Trainer<FromConfig, Reward>>(c2, 2), run<Trainer<OptimalTokenBaseline, Reward>>(c, 2), 0);
  }
  SECTION("the step's advantages equal a plain double-precision OTB of the step's own batch") {
    // TrainerOptions::after_advantage hands over the batch the updates will read: the rewards,
    // the mask, the uids, the actor's old log-probs and sum_pi_squared, and the advantages the
    // Trainer computed. ref::otb (tests/kernels/reference.hpp, written from verl's
    // compute_optimal_token_baseline_advantage) recomputes them in double from those inputs.
    auto c = cfg;
    c.trainer.total_training_steps = 3;
    c.apply_overrides({"actor_rollout_ref.actor.calculate_sum_pi_squared=true"});
    auto check_steps = [&]<class T>(bool tir) {
      std::int64_t seen = 0;
      double spread = 0;
      auto opts = quiet();
      opts.after_advantage = [&](std::int64_t step, DataProto const& b) {
        INFO((tir ? "tir_" : "") << "optimal_token_baseline, step " << step);
        ++seen;
        auto const& rm = b.tensor("response_mask");
        int const B = static_cast<int>(rm.dim(0)), R = static_cast<int>(rm.dim(1));
        auto dbl = [](Tensor const& x) {
          ref::vec v;
          if (x.dtype() == DType::float32) for (float f : x.span<float>()) v.push_back(f);
          else for (std::int32_t i : x.span<std::int32_t>()) v.push_back(i);
          return v;
        };
        ref::vec const m = dbl(rm), r = dbl(b.tensor("token_level_rewards")), lp = dbl(b.tensor("old_log_probs")),
                       sp = dbl(b.tensor("sum_pi_squared")), adv = dbl(b.tensor("advantages")),
                       ret = dbl(b.tensor("returns"));
        REQUIRE(b.has_tensor("rollout_is_weights") == false);
        std::map<std::string, std::int64_t> ids;
        std::vector<std::int64_t> g;
        for (int i = 0; i < B; ++i) g.push_back(ids.try_emplace(b.non_tensor("uid")[static_cast<std::size_t>(i)].as_string(),
                                                                static_cast<std::int64_t>(ids.size())).first->second);
        REQUIRE(static_cast<int>(ids.size()) * c.actor_rollout_ref.rollout.n == B);
        // sum_pi_squared sits at the sampled token's position: p(token)^2 <= sum_v p_v^2 <= 1.
        for (std::size_t k = 0; k < m.size(); ++k)
          if (m[k] != 0) {
            CHECK(sp[k] <= 1 + 1e-5);
            CHECK(sp[k] >= std::exp(2 * lp[k]) - 1e-5);
          }
        auto [wa, wr] = ref::otb(r, m, g, lp, sp, {}, B, R, tir, /*zero_tail=*/true);
        double lo = 1e300, hi = -1e300;
        for (std::size_t k = 0; k < m.size(); ++k) {
          if (m[k] == 0) continue;
          CHECK(adv[k] == Approx(wa[k]).margin(1e-5).epsilon(1e-5));
          CHECK(ret[k] == Approx(wr[k]).margin(1e-5).epsilon(1e-5));
          lo = std::min(lo, adv[k]), hi = std::max(hi, adv[k]);
        }
        spread = std::max(spread, hi - lo);
      };
      T t(c, task.make_dataset(64, 3), task.charset(), opts);
      for (int s = 0; s < 3; ++s) t.step();
      CHECK(seen == 3);
      CHECK(spread > 0.1);  // not a comparison of constants
    };
    check_steps.template operator()<Trainer<OptimalTokenBaseline, Reward>>(false);
    check_steps.template operator()<Trainer<TIROptimalTokenBaseline, Reward>>(true);
  }
  SECTION("a throwing after_advantage hook fails the step before the update; the retried step equals an uninterrupted one") {
    auto c = cfg;
    c.apply_overrides({"actor_rollout_ref.actor.calculate_sum_pi_squared=true"});
    auto const plain = run<Trainer<OptimalTokenBaseline, Reward>>(c, 2);
    bool thrown = false;
    auto opts = quiet();
    opts.after_advantage = [&](std::int64_t step, DataProto const&) {
      if (step == 2 && !thrown) {
        thrown = true;
        throw std::runtime_error("inspection hook failed");
      }
    };
    Trainer<OptimalTokenBaseline, Reward> t(c, task.make_dataset(64, 3), task.charset(), opts);
    std::vector<Metrics> got{deterministic_part(t.step())};
    auto const pos = t.data_position();
    REQUIRE_THROWS_WITH(t.step(), Catch::Contains("inspection hook failed"));
    CHECK(t.data_position() == pos);
    got.push_back(deterministic_part(t.step()));
    require_same(got, plain, 0);
  }
  fs::remove_all(dir);
}

}  // namespace test_trainer_estimators
