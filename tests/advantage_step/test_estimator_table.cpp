// tests/advantage_step/test_estimator_table.cpp <-> include/rlflow/config/estimators.hpp: the estimator
// table is the single source of the estimator names. Every entry is a choice of
// algorithm.adv_estimator (and only the entries are), runs in compute_advantage, has its typed
// option (rlflow::GRPO, ...), and each flag agrees with what the config checks, the Trainer's
// critic default and the kernel actually require.
#include <catch2/catch.hpp>

#include <rlflow/algorithm/advantage_step.hpp>
#include <rlflow/algorithm/algorithm.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace test_estimator_table {

using namespace rlflow;

namespace {

//! The public option names and their config strings, as users write them.
static_assert(std::string_view(PPO::adv_estimator) == "gae" && PPO::needs_critic);
static_assert(std::string_view(GRPO::adv_estimator) == "grpo" && !GRPO::needs_critic);
static_assert(std::string_view(RLOO::adv_estimator) == "rloo");
static_assert(std::string_view(ReinforcePlusPlus::adv_estimator) == "reinforce_plus_plus");
static_assert(std::string_view(ReinforcePlusPlusBaseline::adv_estimator) == "reinforce_plus_plus_baseline");
static_assert(std::string_view(ReMax::adv_estimator) == "remax");
static_assert(std::string_view(GRPOVectorized::adv_estimator) == "grpo_vectorized");
static_assert(std::string_view(RLOOVectorized::adv_estimator) == "rloo_vectorized");
static_assert(std::string_view(GRPOPassK::adv_estimator) == "grpo_passk");
static_assert(std::string_view(GPG::adv_estimator) == "gpg");
static_assert(std::string_view(OPO::adv_estimator) == "opo");
static_assert(std::string_view(GDPO::adv_estimator) == "gdpo");
static_assert(std::string_view(OptimalTokenBaseline::adv_estimator) == "optimal_token_baseline");
static_assert(std::string_view(TIROptimalTokenBaseline::adv_estimator) == "tir_optimal_token_baseline");
static_assert(FromConfig::adv_estimator == nullptr);

//! Each entry's Type is an algorithm option that names its entry.
#define CHECK_TAG(n, Type, ...)                                                                      \
  static_assert(std::is_same_v<Type::option_kind, algorithm_kind>);                                  \
  static_assert(std::is_base_of_v<Estimator<#n>, Type>);                                             \
  static_assert(std::string_view(Type::adv_estimator) == #n && std::string_view(Type::name) == #Type); \
  static_assert(Type::needs_critic == estimator_of(#n).needs_critic);
RLFLOW_ADV_ESTIMATORS(CHECK_TAG)
#undef CHECK_TAG

std::vector<std::string_view> split(std::string_view s) {
  std::vector<std::string_view> out;
  while (!s.empty()) {
    auto const bar = s.find('|');
    out.push_back(s.substr(0, bar));
    if (bar == std::string_view::npos) break;
    s.remove_prefix(bar + 1);
  }
  return out;
}

//! A config that passes every check (micro-batches set, a critic for gae).
TrainerConfig valid_config(std::string_view est) {
  TrainerConfig c;
  c.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 8;
  c.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 8;
  c.actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu = 8;
  c.critic.ppo_micro_batch_size_per_gpu = 8;
  c.actor_rollout_ref.rollout.n = 4;
  c.actor_rollout_ref.actor.calculate_sum_pi_squared = true;
  c.set("algorithm.adv_estimator", est);
  return c;
}

bool failed(TrainerConfig const& c, std::string_view check) {
  for (auto f : failed_checks(c))
    if (f == check) return true;
  return false;
}

//! B = 8 rows in 2 interleaved groups of 4, T = 5; every input any estimator reads.
DataProto full_batch() {
  std::int64_t const B = 8, T = 5;
  std::mt19937 g(7);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> r(B * T, 0.0f), values(B * T), old(B * T), sp(B * T), base(B);
  std::vector<std::int32_t> m(B * T, 0);
  NonTensorColumn uid, f1, f2;
  for (std::int64_t i = 0; i < B; ++i) {
    std::int64_t const len = 1 + i % T;
    for (std::int64_t t = 0; t < len; ++t) m[i * T + t] = 1;
    r[i * T + len - 1] = static_cast<float>(i % 3) * 0.5f;
    base[i] = 0.25f;
    uid.emplace_back("p" + std::to_string(i % 2));
    f1.emplace_back(static_cast<double>(i % 2));
    f2.emplace_back(static_cast<double>(i % 3));
  }
  for (std::int64_t k = 0; k < B * T; ++k) {
    values[k] = u(g);
    old[k] = -1.0f + 0.5f * u(g);
    sp[k] = 0.5f + 0.25f * u(g);
  }
  return DataProto::from_dict({{"token_level_rewards", Tensor::from(r, Shape{B, T})},
                               {"response_mask", Tensor::from(m, Shape{B, T})},
                               {"values", Tensor::from(values, Shape{B, T})},
                               {"old_log_probs", Tensor::from(old, Shape{B, T})},
                               {"sum_pi_squared", Tensor::from(sp, Shape{B, T})},
                               {"reward_baselines", Tensor::from(base, Shape{B})}},
                              {{"uid", uid}, {"format_reward", f1}, {"accuracy_reward", f2}});
}

AlgorithmConfig algo_for(std::string_view est) {
  TrainerConfig c;
  c.set("algorithm.adv_estimator", est);
  c.set("algorithm.gdpo_reward_keys", "[format_reward,accuracy_reward]");
  return c.algorithm;
}

//! True when compute_advantage on 'b' throws a key_error whose message names 'what'.
bool throws_naming(DataProto b, std::string_view est, std::string_view what) {
  try {
    compute_advantage(b, algo_for(est));
  } catch (key_error const& e) {
    return std::string_view(e.what()).find(what) != std::string_view::npos;
  }
  return false;
}

}  // namespace

TEST_CASE("estimator table: names, types and kernels are unique and named", "[advantage_step][estimators]") {
  REQUIRE(estimator_count == std::size(estimator_table));
  std::set<std::string_view> names, types;
  for (auto const& e : estimator_table) {
    INFO(e.name);
    CHECK(names.insert(e.name).second);
    CHECK(types.insert(e.type_name).second);
    CHECK(!e.kernel.empty());
    CHECK(e.doc.find("verl: ") != std::string_view::npos);
    CHECK(find_estimator(e.name) == &e);
    CHECK(e.min_group_size >= 1);
  }
  CHECK(find_estimator("ppo") == nullptr);
  CHECK(estimator_of("ppo").name.empty());
}

TEST_CASE("estimator table: algorithm.adv_estimator accepts exactly the table's names", "[advantage_step][estimators][config]") {
  detail::key_info const* key = nullptr;
  for (auto const& k : detail::config_keys)
    if (k.name == "algorithm.adv_estimator") key = &k;
  REQUIRE(key != nullptr);
  auto const choices = split(key->choices);
  REQUIRE(choices.size() == estimator_count);
  for (std::size_t i = 0; i < estimator_count; ++i) CHECK(choices[i] == estimator_table[i].name);
  for (auto const& e : estimator_table) {
    INFO(e.name);
    TrainerConfig c;
    CHECK_NOTHROW(c.set("algorithm.adv_estimator", e.name));
    CHECK(c.algorithm.adv_estimator == e.name);
    CHECK(validate(valid_config(e.name)).empty());
    // A misspelling is refused with the entry as the suggestion.
    std::string const typo = std::string(e.name) + "x";
    CHECK_THROWS_WITH(c.set("algorithm.adv_estimator", typo),
                      Catch::Contains("did you mean '" + std::string(e.name) + "'"));
    // Each entry's keys are config keys.
    for (auto k : split(e.reads)) {
      INFO(k);
      bool found = false;
      for (auto const& ck : detail::config_keys) found = found || ck.name == k;
      CHECK(found);
    }
  }
  TrainerConfig c;
  CHECK_THROWS_AS(c.set("algorithm.adv_estimator", "ppo"), config_error);
}

TEST_CASE("estimator table: the flags are what the config checks and the Trainer require", "[advantage_step][estimators][config]") {
  for (auto const& e : estimator_table) {
    INFO(e.name);
    TrainerConfig c = valid_config(e.name);
    // The Trainer's critic default (critic.enable=null) follows needs_critic.
    CHECK(c.uses_critic() == e.needs_critic);
    c.critic.enable = false;
    CHECK(failed(c, "critic_for_gae") == e.needs_critic);
    c = valid_config(e.name);
    c.critic.enable = true;
    bool warns = false;  // a critic nobody reads is a warning
    for (auto const& w : warnings(c)) warns = warns || w.find("critic.enable=true") != std::string::npos;
    CHECK(warns == !e.needs_critic);
    c = valid_config(e.name);
    c.actor_rollout_ref.actor.calculate_sum_pi_squared = false;
    CHECK(failed(c, "otb_sum_pi_squared") == e.needs_sum_pi_squared);
    c = valid_config(e.name);
    c.actor_rollout_ref.rollout.n = e.min_group_size;
    CHECK_FALSE(failed(c, "passk_group_size"));
    c.actor_rollout_ref.rollout.n = 1;
    CHECK(failed(c, "passk_group_size") == (e.min_group_size > 1));
    c.actor_rollout_ref.rollout.n = 0;  // the sampler's own check reports it, not this one
    CHECK(failed(c, "passk_group_size") == (e.min_group_size > 1));
  }
}

TEST_CASE("estimator table: every entry runs in compute_advantage and reads what its flags say", "[advantage_step][estimators]") {
  DataProto const full = full_batch();
  auto without = [&](std::vector<std::string> const& tensors, bool drop_uid) {
    std::vector<std::string> keep;
    for (auto const& k : full.tensor_keys())
      if (std::find(tensors.begin(), tensors.end(), k) == tensors.end()) keep.push_back(k);
    std::vector<std::string> nt{"format_reward", "accuracy_reward"};
    if (!drop_uid) nt.push_back("uid");
    return full.select(keep, nt);
  };
  for (auto const& e : estimator_table) {
    INFO(e.name);
    DataProto b = full;
    REQUIRE_NOTHROW(compute_advantage(b, algo_for(e.name)));
    Tensor const& a = b.tensor("advantages");
    Tensor const& r = b.tensor("returns");
    REQUIRE(a.dim(0) == 8);
    REQUIRE(a.dim(1) == 5);
    auto const as = a.span<float>(), rs = r.span<float>();
    bool nonzero = false;
    for (std::size_t k = 0; k < as.size(); ++k) {
      CHECK(std::isfinite(as[k]));
      CHECK(std::isfinite(rs[k]));
      nonzero = nonzero || as[k] != 0.0f;
    }
    CHECK(nonzero);
    // One buffer for both outputs exactly when the entry says so.
    CHECK((as.data() == rs.data()) == e.returns_are_advantages);
    CHECK(throws_naming(without({}, true), e.name, "'uid'") == e.groups_by_uid);
    CHECK(throws_naming(without({"values"}, false), e.name, "'values'") == e.needs_critic);
    CHECK(throws_naming(without({"reward_baselines"}, false), e.name, "'reward_baselines'") == e.needs_greedy_baseline);
    CHECK(throws_naming(without({"sum_pi_squared"}, false), e.name, "'sum_pi_squared'") == e.needs_sum_pi_squared);
  }
  DataProto b = full;
  AlgorithmConfig bad;
  bad.adv_estimator = "ppo";
  try {
    compute_advantage(b, bad);
    FAIL("an unknown estimator must throw");
  } catch (config_error const& err) {
    for (auto const& e : estimator_table) CHECK_THAT(err.what(), Catch::Contains(std::string(e.name)));
  }
}

}  // namespace test_estimator_table
