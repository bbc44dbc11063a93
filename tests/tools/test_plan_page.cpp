// Tests of the planner page's C++ entry points (plan_page.hpp, what the WebAssembly module
// exports) and of Plan::rows: the page's plan is plan(cfg) of the same overrides, its rows are
// the table's with JSON keys that resolve to the plan's values, violations split into problem and
// fix, key_info gives verl's defaults.
#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

#include "plan_page.hpp"

namespace test_plan_page {

using rlflow::TrainerConfig;

namespace {
nlohmann::json at_dotted(nlohmann::json const& j, std::string const& key) {
  nlohmann::json::json_pointer ptr("/" + [&] {
    std::string s = key;
    for (auto& c : s)
      if (c == '.') c = '/';
    return s;
  }());
  return j.contains(ptr) ? j.at(ptr) : nlohmann::json("<missing>");
}
}  // namespace

TEST_CASE("plan page: evaluate equals plan() of the same overrides over random configs", "[tools][plan_page]") {
  std::mt19937 rng(17);
  std::vector<std::pair<std::string, std::vector<std::string>>> const choices = {
      {"data.train_batch_size", {"256", "1000", "1024", "2048"}},
      {"actor_rollout_ref.actor.ppo_mini_batch_size", {"64", "256", "300"}},
      {"actor_rollout_ref.rollout.n", {"1", "4", "8"}},
      {"trainer.n_gpus_per_node", {"2", "6", "8"}},
      {"actor_rollout_ref.rollout.tensor_model_parallel_size", {"1", "2", "4"}},
      {"trainer.v1.trainer_mode", {"sync", "separate_async"}},
      {"actor_rollout_ref.rollout.nnodes", {"0", "1"}},
      {"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", {"null", "8"}},
      {"algorithm.adv_estimator", {"gae", "grpo"}},
  };
  for (int trial = 0; trial < 60; ++trial) {
    std::string text;
    TrainerConfig cfg;
    for (auto const& [k, vs] : choices) {
      if (rng() % 2) continue;
      auto const& v = vs[rng() % vs.size()];
      text += k + "=" + v + "\n";
      cfg.set(k, v);
    }
    auto const j = rlflow::plan_page::evaluate(text, {"trainer.v1.trainer_mode", "data.train_batch_size"});
    INFO(text);
    REQUIRE(j.at("ok") == true);
    auto const p = rlflow::plan(cfg);
    CHECK(j.at("plan") == p.as_json());
    CHECK(j.at("values").at("trainer.v1.trainer_mode") == cfg.get("trainer.v1.trainer_mode"));
    CHECK(j.at("values").at("data.train_batch_size") == cfg.get("data.train_batch_size"));
    REQUIRE(j.at("violations").size() == p.violations.size());
    for (std::size_t i = 0; i < p.violations.size(); ++i) {
      auto const& v = j.at("violations")[i];
      auto const problem = v.at("problem").get<std::string>(), fix = v.at("fix").get<std::string>();
      CHECK(v.at("text") == p.violations[i]);
      CHECK((fix.empty() ? problem : problem + "; " + fix) == p.violations[i]);  // nothing lost in the split
    }
    // every row's key names a value of the plan, and the filled-in formula ends in it
    for (auto const& rows : {j.at("rows"), j.at("page_rows")}) {
      for (auto const& r : rows) {
        auto const key = r.at("key").get<std::string>();
        auto const v = at_dotted(j.at("plan"), key);
        INFO(r.at("quantity") << ": " << key << " -> " << r.at("value"));
        CHECK(!key.empty());  // a row of Plan::rows() needs the JSON key of its value (the page shows it there)
        CHECK(v != nlohmann::json("<missing>"));
        bool const numeric_text = r.at("value").get<std::string>().find_first_of("0123456789") != std::string::npos;
        if (v.is_number_integer() && numeric_text) {
          auto const value = r.at("value").get<std::string>(), want = std::to_string(v.get<std::int64_t>());
          bool const ends = value.size() >= want.size() && value.compare(value.size() - want.size(), want.size(), want) == 0;
          bool const has = value.find("= " + want) != std::string::npos || value == want || value.rfind(want + " ", 0) == 0;
          CHECK((ends || has));
        }
      }
    }
  }
}

TEST_CASE("plan page: the rows are to_table's, in order", "[tools][plan_page]") {
  TrainerConfig cfg;
  cfg.trainer.v1.trainer_mode = "separate_async";
  cfg.actor_rollout_ref.rollout.n = 8;
  cfg.actor_rollout_ref.rollout.nnodes = 1;
  cfg.actor_rollout_ref.rollout.n_gpus_per_node = 4;
  auto const p = rlflow::plan(cfg);
  auto const table = p.to_table();
  std::size_t pos = 0;
  for (auto const& r : p.rows()) {
    auto const at = table.find(r.quantity, pos);
    INFO(r.quantity);
    REQUIRE(at != std::string::npos);
    auto const eol = table.find('\n', at);
    auto const line = table.substr(at, eol - at);
    CHECK(line.find(r.formula) != std::string::npos);
    CHECK(line.substr(line.size() - r.value.size()) == r.value);
    pos = eol;
  }
  auto const j = p.as_json();
  auto const rows = p.rows();
  auto find = [&](std::string const& k) {
    for (auto const& r : rows)
      if (r.key == k) return r.value;
    return std::string("<none>");
  };
  CHECK(find("samples_per_step") == "1024 x 8 = 8192");
  CHECK(find("rollout_replicas") == "4/2 = 2");
  CHECK(find("total_devices") == "8 + 4 + 0 = 12");
  CHECK(find("updates_per_step") == "1024/256 x 1 = 4");
  CHECK(j.at("total_devices") == 12);
}

TEST_CASE("plan page: bad arguments give rlflow_plan's message", "[tools][plan_page]") {
  auto const j = rlflow::plan_page::evaluate("data.train_bach_size=3\n");
  CHECK(j.at("ok") == false);
  auto const e = j.at("error").get<std::string>();
  CHECK(e.rfind("rlflow_plan: unknown config key 'data.train_bach_size'", 0) == 0);
  CHECK(e.find("data.train_batch_size") != std::string::npos);
  CHECK(rlflow::plan_page::evaluate("data.train_batch_size=abc").at("ok") == false);
  CHECK(rlflow::plan_page::evaluate("--config\nx.yaml").at("ok") == false);
  // empty lines and CRLF are ignored; the same as no overrides
  CHECK(rlflow::plan_page::evaluate("\n\r\n").at("plan") == rlflow::plan(TrainerConfig{}).as_json());
  CHECK(rlflow::plan_page::split_lines("a=1\r\n\nb=2") == std::vector<std::string>{"a=1", "b=2"});
}

TEST_CASE("plan page: key_info gives kind, choices and verl's defaults", "[tools][plan_page]") {
  auto const j = rlflow::plan_page::key_info(
      {"data.train_batch_size", "trainer.v1.trainer_mode", "critic.ppo_micro_batch_size_per_gpu", "actor_rollout_ref.actor.use_kl_loss"});
  REQUIRE(j.size() == 4);
  CHECK(j[0].at("default") == "1024");
  CHECK(j[0].at("kind") == "int");
  CHECK(j[1].at("choices") == nlohmann::json({"sync", "colocate_async", "separate_async"}));
  CHECK(j[1].at("default") == "sync");
  CHECK(j[2].at("default") == "null");
  CHECK(j[2].at("kind") == "int or null");
  CHECK(j[3].at("default") == "false");
  CHECK_THROWS_AS(rlflow::plan_page::key_info({"data.train_bach_size"}), rlflow::config_error);
}

TEST_CASE("plan page: split_violation keeps problem and fix", "[tools][plan_page]") {
  auto const v = rlflow::plan_page::split_violation("a=1 is wrong; because x; set a=2");
  CHECK(v.at("problem") == "a=1 is wrong; because x");
  CHECK(v.at("fix") == "set a=2");
  CHECK(rlflow::plan_page::split_violation("no fix here").at("fix") == "");
}

}  // namespace test_plan_page
