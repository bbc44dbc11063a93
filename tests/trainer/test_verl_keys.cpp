// tests/trainer/test_verl_keys.cpp <-> verl's keys (trainer_config/verl_keys.hpp, parse.hpp's
// apply_key and key_suggestion, the Trainer's start-up notices and type-fixed values): every key
// of verl's trainer config (tests/config/verl_keys.txt) is honoured, an alias, accepted with a
// notice or rejected with the rlflow equivalent; a verl GRPO GSM8K command line from verl's docs
// starts with notices only; suggestions come only from close keys of the same section; and
// trainer.logger, trainer.rollout_data_dir and trainer.val_only on a small run from files; on the
// same small run at rollout TP 2, the paged engine against the static one (RoleSetup::static_rollout).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <rlflow/data/data_files.hpp>  // read_rows
#include <rlflow/trainer/trainer.hpp>

#include "common/files_demo.hpp"
#include "fixtures.hpp"
#include "trainer/trainer_fixtures.hpp"

namespace test_verl_keys {

namespace fs = std::filesystem;
using rlflow::TrainerConfig;
using rlflow::detail::verl_key_use;
using Trainer = rlflow::Trainer<rlflow::GRPO, rlflow::Colocate<3>, rlflow::TP<2>>;

namespace {

std::vector<std::string> verl_keys(std::string* header = nullptr) {
  std::ifstream in(RLFLOW_VERL_KEYS_FILE);
  REQUIRE(in.good());
  std::vector<std::string> keys;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line[0] == '#') {
      if (header) *header += line;
      continue;
    }
    keys.push_back(line);
  }
  return keys;
}

std::string section(std::string const& k) {
  auto const p = k.rfind('.');
  return p == std::string::npos ? "" : k.substr(0, p);
}
std::string leaf(std::string const& k) {
  auto const p = k.rfind('.');
  return p == std::string::npos ? k : k.substr(p + 1);
}

//! Plain Levenshtein distance (the reference for the suggestion checks).
std::size_t levenshtein(std::string const& a, std::string const& b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i)
    for (std::size_t j = 1; j <= b.size(); ++j)
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
  return d[a.size()][b.size()];
}

//! A value the key accepts that differs from its default.
std::string other_value(rlflow::detail::key_info const& k, TrainerConfig const& c) {
  using kk = rlflow::detail::key_kind;
  auto const now = c.get(k.name);
  if (!k.choices.empty()) {
    for (auto ch : rlflow::detail::split_choices(k.choices))
      if (ch != "null" && std::string(ch) != now && !ch.empty()) return std::string(ch);
  }
  switch (k.kind) {
    case kk::boolean:
    case kk::null_boolean: return now == "true" ? "false" : "true";
    case kk::integer:
    case kk::null_integer: return now == "3" ? "5" : "3";
    case kk::number:
    case kk::null_number: return now == "0.25" ? "0.5" : "0.25";
    default: return "rlflow_test_value";
  }
}

std::vector<std::string> notice_keys(TrainerConfig const& c) {
  std::vector<std::string> out;
  for (auto const& n : rlflow::detail::verl_key_notices(c)) out.push_back(n.substr(0, n.find(' ')));
  return out;
}

}  // namespace

TEST_CASE("every key of verl's trainer config is honoured, an alias, without effect (notice) or rejected", "[config][verl]") {
  std::string header;
  auto const keys = verl_keys(&header);
  CHECK_THAT(header, Catch::Contains("_generated_ppo_trainer.yaml") && Catch::Contains("commit"));
  REQUIRE(keys.size() > 400);
  std::set<std::string> const listed(keys.begin(), keys.end());
  std::map<verl_key_use, int> uses;
  int honoured = 0;
  for (auto const& k : keys) {
    INFO(k);
    bool const in_table = rlflow::detail::find_key(k) != nullptr;
    auto const* r = rlflow::detail::find_verl_key(k);
    CHECK(in_table != (r != nullptr));  // exactly one of the two
    if (in_table) ++honoured;
    if (r) ++uses[r->use];
  }
  CHECK(honoured > 100);
  CHECK(uses[verl_key_use::no_effect] > 100);
  CHECK(uses[verl_key_use::rejected] > 50);
  // no stale row: each row is a key of verl's list, named once
  std::set<std::string> rows;
  for (auto const& r : rlflow::detail::verl_key_rules) {
    INFO(r.key);
    CHECK(listed.count(std::string(r.key)) == 1);
    CHECK(rows.insert(std::string(r.key)).second);
    CHECK(!r.why.empty());
    if (r.use == verl_key_use::rejected) CHECK(!r.instead.empty());
    if (r.use == verl_key_use::alias) CHECK(rlflow::detail::find_key(r.why) != nullptr);
  }
  // the keys of a typical verl GRPO script are accepted
  TrainerConfig c;
  for (auto const* k : {"actor_rollout_ref.actor.fsdp_config.optimizer_offload", "actor_rollout_ref.actor.fsdp_config.param_offload",
                        "actor_rollout_ref.rollout.name", "actor_rollout_ref.rollout.mode"}) {
    auto const* r = rlflow::detail::find_verl_key(k);
    REQUIRE(r != nullptr);
    CHECK(r->use == verl_key_use::no_effect);
  }
  CHECK_NOTHROW(c.apply_overrides({"trainer.logger=[console,wandb]", "trainer.val_only=false", "trainer.rollout_data_dir=null"}));
  // docs/configuration.md carries the classification table as the code prints it
  std::ifstream in(std::string(RLFLOW_SOURCE_DIR) + "/docs/configuration.md");
  REQUIRE(in.good());
  std::string const doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK_THAT(doc, Catch::Contains(rlflow::detail::verl_keys_markdown()));
}

TEST_CASE("each verl key behaves as its class says", "[config][verl]") {
  for (std::size_t row = 0; row < rlflow::detail::verl_key_rule_count; ++row) {
    auto const& r = rlflow::detail::verl_key_rules[row];
    std::string const key(r.key);
    INFO(key);
    TrainerConfig c;
    switch (r.use) {
      case verl_key_use::no_effect: {
        c.set(key, "true");
        CHECK(notice_keys(c) == std::vector<std::string>{key});
        auto const notes = rlflow::detail::verl_key_notices(c);
        CHECK_THAT(notes[0], Catch::Contains(std::string(r.why)));
        // every other bit stays clear, and the key reaches the config through files too
        TrainerConfig f;
        auto const dot = key.find('.');
        std::string json = "\"" + key.substr(dot == std::string::npos ? 0 : dot + 1) + "\": 1";
        if (dot != std::string::npos) {
          std::string path = key.substr(0, key.rfind('.'));
          json = "{\"" + key.substr(key.rfind('.') + 1) + "\": 1}";
          for (auto p = path.rfind('.'); ; p = path.rfind('.')) {
            std::string const part = p == std::string::npos ? path : path.substr(p + 1);
            json = "{\"" + part + "\": " + json + "}";
            if (p == std::string::npos) break;
            path = path.substr(0, p);
          }
        } else {
          json = "{\"" + key + "\": 1}";
        }
        f.apply_text(json, "json", "x.json");
        CHECK(notice_keys(f) == std::vector<std::string>{key});
        break;
      }
      case verl_key_use::alias: {
        auto const& target = *rlflow::detail::find_key(r.why);
        std::string const v = other_value(target, c);
        c.set(key, v);
        TrainerConfig d;
        d.set(r.why, v);
        CHECK(c.get(r.why) == d.get(r.why));
        CHECK(c.get(r.why) != TrainerConfig{}.get(r.why));
        CHECK(notice_keys(c).empty());
        break;
      }
      case verl_key_use::rejected: {
        if (r.verl_default.substr(0, 2) != "${") {  // an interpolation is not a value a user types
          CHECK_NOTHROW(c.set(key, std::string(r.verl_default)));
          CHECK(notice_keys(c).empty());
        }
        CHECK_THROWS_WITH(c.set(key, "rlflow_test_value"),
                          Catch::Contains(key) && Catch::Contains(std::string(r.why)) && Catch::Contains(std::string(r.instead)));
        break;
      }
    }
  }
  // two no-effect keys give two notices, in the table's order
  TrainerConfig c;
  c.apply_overrides({"actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.actor.fsdp_config.param_offload=True"});
  CHECK(notice_keys(c).size() == 2);
}

TEST_CASE("unknown keys: a suggestion only from a close key of the same section", "[config][verl]") {
  std::mt19937 rng(20261205);
  std::vector<std::string> all;
  for (auto const& k : rlflow::detail::config_keys) all.emplace_back(k.name);
  for (auto const& r : rlflow::detail::verl_key_rules) all.emplace_back(r.key);
  std::set<std::string> const known(all.begin(), all.end());
  int suggested = 0, silent = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::string key = all[std::uniform_int_distribution<std::size_t>(0, all.size() - 1)(rng)];
    std::string lf = leaf(key);
    int const edits = std::uniform_int_distribution<int>(1, 6)(rng);
    for (int e = 0; e < edits && !lf.empty(); ++e) {
      auto const at = std::uniform_int_distribution<std::size_t>(0, lf.size() - 1)(rng);
      switch (std::uniform_int_distribution<int>(0, 2)(rng)) {
        case 0: lf[at] = static_cast<char>('a' + std::uniform_int_distribution<int>(0, 25)(rng)); break;
        case 1: lf.erase(at, 1); break;
        default: lf.insert(at, 1, 'q'); break;
      }
    }
    std::string const typo = section(key).empty() ? lf : section(key) + "." + lf;
    if (lf.empty() || known.count(typo)) continue;
    INFO(typo);
    TrainerConfig c;
    std::string err;
    try {
      c.set(typo, "1");
    } catch (rlflow::config_error const& e) {
      err = e.what();
    }
    REQUIRE_THAT(err, Catch::Contains("unknown config key '" + typo + "'"));
    auto const at = err.find("did you mean '");
    // the reference: the suffix rule, else the closest same-section key within max(1, min(3, |leaf| / 4)) edits
    std::size_t const limit = std::clamp<std::size_t>(lf.size() / 4, 1, 3);
    std::size_t best = limit + 1;
    for (auto const& k : all)
      if (section(k) == section(typo)) best = std::min(best, levenshtein(lf, leaf(k)));
    int suffix = 0;
    for (auto const& k : all)
      if (k.size() > typo.size() && k.compare(k.size() - typo.size(), typo.size(), typo) == 0 && k[k.size() - typo.size() - 1] == '.')
        ++suffix;
    if (at == std::string::npos) {
      ++silent;
      CHECK(best > limit);
      CHECK(suffix == 0);
      continue;
    }
    ++suggested;
    std::string const hint = err.substr(at + 14, err.find('\'', at + 14) - at - 14);
    CHECK(known.count(hint) == 1);
    if (suffix > 0) {
      CHECK(hint.size() > typo.size());
      CHECK(hint.compare(hint.size() - typo.size(), typo.size(), typo) == 0);
    } else {
      CHECK(section(hint) == section(typo));
      CHECK(levenshtein(leaf(hint), lf) == best);
      CHECK(best <= limit);
    }
  }
  CHECK(suggested > 20);
  CHECK(silent > 20);
  // typos of verl's keys point to the key, not to a far one
  TrainerConfig c;
  CHECK_THROWS_WITH(c.set("actor_rollout_ref.model.use_remove_padin", "true"),
                    Catch::Contains("did you mean 'actor_rollout_ref.model.use_remove_padding'"));
  CHECK_THROWS_WITH(c.set("actor_rollout_ref.actor.fsdp_config.param_offlod", "true"),
                    Catch::Contains("did you mean 'actor_rollout_ref.actor.fsdp_config.param_offload'"));
  CHECK_THROWS_WITH(c.set("actor_rollout_ref.actor.something_else", "1"), !Catch::Contains("did you mean"));
}

namespace {

//! verl's GRPO GSM8K / Qwen2.5-0.5B command (docs/ascend_tutorial/ascend_quick_start.rst) with the
//! logger of the issue's script and local paths for the model and data.
std::vector<std::string> quickstart_args(rlflow::examples::DemoFiles const& f, fs::path const& out) {
  return {"algorithm.adv_estimator=grpo",
          "data.train_files=" + f.train_file.string(),
          "data.val_files=" + f.val_file.string(),
          "data.train_batch_size=128",
          "data.max_prompt_length=512",
          "data.max_response_length=128",
          "data.filter_overlong_prompts=True",
          "data.truncation='error'",
          "actor_rollout_ref.model.path=" + f.model_dir.string(),
          "actor_rollout_ref.actor.optim.lr=5e-7",
          "actor_rollout_ref.model.use_remove_padding=True",
          "actor_rollout_ref.actor.entropy_coeff=0.001",
          "actor_rollout_ref.actor.ppo_mini_batch_size=64",
          "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=20",
          "actor_rollout_ref.actor.use_kl_loss=True",
          "actor_rollout_ref.actor.kl_loss_coef=0.001",
          "actor_rollout_ref.actor.kl_loss_type=low_var_kl",
          "actor_rollout_ref.model.enable_gradient_checkpointing=True",
          "actor_rollout_ref.actor.fsdp_config.param_offload=False",
          "actor_rollout_ref.actor.fsdp_config.optimizer_offload=False",
          "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=40",
          "actor_rollout_ref.rollout.enable_chunked_prefill=False",
          "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
          "actor_rollout_ref.rollout.name=vllm",
          "actor_rollout_ref.rollout.gpu_memory_utilization=0.6",
          "actor_rollout_ref.rollout.n=5",
          "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=40",
          "actor_rollout_ref.ref.fsdp_config.param_offload=True",
          "algorithm.kl_ctrl.kl_coef=0.001",
          "trainer.critic_warmup=0",
          "trainer.logger=['console','wandb']",
          "trainer.project_name='verl_grpo_example_gsm8k'",
          "trainer.experiment_name='qwen2_7b_function_rm'",
          "trainer.n_gpus_per_node=8",
          "trainer.nnodes=1",
          "trainer.save_freq=-1",
          "trainer.test_freq=5",
          "trainer.total_epochs=1",
          "trainer.default_local_dir=" + out.string()};
}

rlflow::CommandLine parse(std::vector<std::string> const& args, TrainerConfig const& defaults) {
  std::vector<char const*> argv{"verl_quickstart"};
  for (auto const& a : args) argv.push_back(a.c_str());
  return rlflow::parse_command_line(static_cast<int>(argv.size()), argv.data(), defaults);
}

}  // namespace

TEST_CASE("verl's GRPO GSM8K quickstart command line starts, with notices only for keys without effect", "[config][verl][trainer]") {
  fixtures::TempDir d;
  // a tiny Qwen2 folder (4 heads, 2 key/value heads: TP 2 splits them) and 128 GSM8K-style rows
  auto const f = rlflow::examples::write_demo_files(d.p / "in", 3, 128, 4, 1, 4, 16, 640, 40, rlflow::model::Arch::qwen2);
  auto const args = quickstart_args(f, d.p / "run");
  auto cl = parse(args, Trainer::program_defaults());
  std::set<std::string> no_effect_given;
  for (auto const& a : args) {
    auto const* r = rlflow::detail::find_verl_key(a.substr(0, a.find('=')));
    if (r && r->use == verl_key_use::no_effect) no_effect_given.insert(std::string(r->key));
  }
  REQUIRE(no_effect_given.size() == 4);
  rlflow::TrainerOptions opts;
  opts.console = false;
  Trainer t(cl.config, opts);
  CHECK(t.startup_warnings().empty());
  for (auto const& w : t.startup_warnings()) WARN(w);
  std::set<std::string> noticed;
  for (auto const& n : t.startup_notices()) {
    INFO(n);
    auto const key = n.substr(0, n.find(' '));
    if (key == "trainer.logger=wandb") {
      CHECK_THAT(n, Catch::Contains("tensorboard") && Catch::Contains("rlflow_report"));
      continue;
    }
    CHECK(no_effect_given.count(key) == 1);
    noticed.insert(key);
  }
  CHECK(noticed == no_effect_given);
  CHECK(t.config().actor_rollout_ref.rollout.tensor_model_parallel_size == 2);
  CHECK(t.config().algorithm.adv_estimator == "grpo");
  CHECK(t.total_steps() == 1);
}

TEST_CASE("keys the program's type fixes: a conflicting value names the type, --help shows the program's values", "[config][verl][trainer]") {
  auto const defaults = Trainer::program_defaults();
  auto const help = rlflow::config_help(defaults);
  CHECK_THAT(help, Catch::Contains("actor_rollout_ref.rollout.tensor_model_parallel_size = 2 ") &&
                       Catch::Contains("algorithm.adv_estimator = grpo ") && Catch::Contains("trainer.device = cpu ") &&
                       Catch::Contains("critic.enable = false "));
  fixtures::TempDir d;
  auto const f = rlflow::examples::write_demo_files(d.p / "in", 4, 8, 2, 1, 4, 16, 64, 40, rlflow::model::Arch::qwen2);
  for (std::int64_t tp : {1, 4, 8}) {
    INFO(tp);
    TrainerConfig c = defaults;
    c.actor_rollout_ref.model.path = f.model_dir.string();
    c.data.train_files = f.train_file.string();
    c.actor_rollout_ref.rollout.tensor_model_parallel_size = tp;
    rlflow::TrainerOptions opts;
    opts.console = false;
    if (tp == 2) continue;
    CHECK_THROWS_WITH(Trainer(c, opts), Catch::Contains("TP<2>") && Catch::Contains("tensor_model_parallel_size=" + std::to_string(tp)) &&
                                            Catch::Contains("rlflow::TP<" + std::to_string(tp) + ">"));
  }
  TrainerConfig c = defaults;
  c.max_colocate_count = 5;
  CHECK_THROWS_WITH(Trainer(c, rlflow::testing::quiet()), Catch::Contains("Colocate<3>") && Catch::Contains("max_colocate_count=5"));
}

namespace {
TrainerConfig small_run(rlflow::examples::DemoFiles const& f, fs::path const& out) {
  TrainerConfig c = Trainer::program_defaults();
  c.actor_rollout_ref.model.path = f.model_dir.string();
  c.data.train_files = f.train_file.string();
  c.data.val_files = f.val_file.string();
  c.data.max_prompt_length = 96;
  c.data.max_response_length = 6;
  c.data.filter_overlong_prompts = true;
  c.data.train_batch_size = 4;
  c.actor_rollout_ref.actor.ppo_mini_batch_size = 4;
  c.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 4;
  c.actor_rollout_ref.rollout.n = 2;
  c.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 8;
  c.actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu = 8;
  c.trainer.nnodes = 1;
  c.trainer.n_gpus_per_node = 2;
  c.trainer.total_training_steps = 2;
  c.trainer.val_before_train = false;
  c.trainer.default_local_dir = out.string();
  c.seed = 5;
  return c;
}
}  // namespace

TEST_CASE("trainer.logger, trainer.rollout_data_dir and trainer.val_only", "[config][verl][trainer]") {
  fixtures::TempDir d;
  auto const f = rlflow::examples::write_demo_files(d.p / "in", 6, 12, 3, 1, 4, 16, 128, 120, rlflow::model::Arch::qwen2);
  rlflow::TrainerOptions opts;
  opts.console = false;
  {  // console only: no metrics file; rollout_data_dir: one file per step, every row, scores as the step's metric
    auto c = small_run(f, d.p / "run1");
    c.trainer.logger = "console";
    c.trainer.rollout_data_dir = (d.p / "dump").string();
    Trainer t(c, opts);
    std::vector<rlflow::Metrics> steps;
    while (t.global_step() < t.total_steps()) steps.push_back(t.step());
    CHECK(!fs::exists(d.p / "run1" / "metrics.jsonl"));
    for (std::int64_t s = 1; s <= 2; ++s) {
      INFO(s);
      auto const rows = rlflow::read_rows(d.p / "dump" / (std::to_string(s) + ".jsonl"));
      REQUIRE(rows.size() == 8);  // train_batch_size x n
      double sum = 0;
      for (auto const& r : rows) {
        CHECK(r["step"] == s);
        CHECK(r["input"].get<std::string>().find("####") != std::string::npos);  // the prompt holds the instruction
        CHECK(r.contains("output"));
        sum += r["score"].get<double>();
      }
      CHECK(sum / 8 == Approx(steps[static_cast<std::size_t>(s - 1)].at("critic/score/mean")).margin(1e-12));
    }
  }
  {  // file: metrics.jsonl, one line per step; tensorboard: event files where protobuf was found
    auto c = small_run(f, d.p / "run2");
    c.trainer.logger = "file,tensorboard";
    ::setenv("TENSORBOARD_DIR", (d.p / "tb").string().c_str(), 1);
    Trainer t(c, opts);
    t.fit();
    ::unsetenv("TENSORBOARD_DIR");
    CHECK(rlflow::read_rows(d.p / "run2" / "metrics.jsonl").size() == 2);
#if defined(RLFLOW_HAS_TENSORBOARD)
    CHECK(t.startup_notices().empty());
    REQUIRE(fs::exists(d.p / "tb"));
    int files = 0;
    for (auto const& e : fs::directory_iterator(d.p / "tb"))
      files += e.path().filename().string().rfind("events.out.tfevents.", 0) == 0 && fs::file_size(e.path()) > 100;
    CHECK(files == 1);
#else
    REQUIRE(t.startup_notices().size() == 1);
    CHECK_THAT(t.startup_notices()[0], Catch::Contains("protobuf"));
#endif
  }
  {  // val_only: one validation, no training step, its metrics logged at step 0
    auto c = small_run(f, d.p / "run3");
    c.trainer.val_only = true;
    c.actor_rollout_ref.rollout.val_kwargs.n = 1;
    Trainer t(c, opts);
    auto const w0 = t.actor_weights();
    auto const m = t.fit();
    CHECK(t.global_step() == 0);
    CHECK(t.actor_weights() == w0);
    bool has_val = false;
    for (auto const& [k, v] : m) has_val = has_val || k.rfind("val-core/", 0) == 0;
    CHECK(has_val);
    auto const lines = rlflow::read_rows(d.p / "run3" / "metrics.jsonl");
    REQUIRE(lines.size() == 1);
    CHECK(lines[0]["step"] == 0);
    auto c2 = small_run(f, d.p / "run4");
    c2.trainer.val_only = true;
    c2.data.val_files = "";
    CHECK_THROWS_WITH(Trainer(c2, opts), Catch::Contains("trainer.val_only=true") && Catch::Contains("data.val_files"));
  }
}

TEST_CASE("rollout TP 2 on the paged engine: the static engine's responses and log-probs, the paged metrics",
          "[config][trainer][paged][tp]") {
  // Trainer<..., TP<2>> on 2 workers: one rollout replica of TP 2. With the replicated LM head
  // (the paged engine's) both engines split the heads alike and all-reduce rank-order sums, so the
  // rows' tokens are the same. The log-probs are not always the same bits at TP 2 (the engines'
  // products run over batches of different shapes: the paged engine's scheduled tokens, the static
  // engine's padded rows; seen up to 4.8e-7, one float step at |log p| of 4 to 8): they are
  // compared within 2e-5, the paged engine's own TP-vs-one-rank bound (test_paged_engine.cpp).
  // The actor recomputes its log-probs, so the same rows train to the same weights bit for bit.
  // lm_head=auto on this vocabulary (>= 256 tokens), and lm_head=vocab_parallel, ask for the
  // vocabulary-parallel head: the paged engine runs it too (its metrics come with the batch), and
  // both engines draw through one sampler, so their rows are the same and their log-probs are
  // within the same bound.
  fixtures::TempDir d;
  auto const f = rlflow::examples::write_demo_files(d.p / "in", 7, 12, 3, 1, 4, 16, 128, 120, rlflow::model::Arch::qwen2);
  std::mt19937_64 rng(GENERATE(take(1, random(1, 1000000))));
  std::uint64_t const seed = rng();
  INFO("seed " << seed);
  auto run_config = [&](char const* dir, char const* head) {
    auto c = small_run(f, d.p / dir);
    c.actor_rollout_ref.model.lm_head = head;
    c.seed = std::int64_t(seed % 100000);
    return c;
  };
  rlflow::TrainerOptions so, po;
  so.console = po.console = false;
  so.static_rollout = true;
  Trainer ts(run_config("static", "replicated"), so), tp(run_config("paged", "replicated"), po);
  int const V = static_cast<int>(tp.tokenizer().vocab_size());
  REQUIRE(V >= rlflow::engine::vocab_parallel_min_vocab);
  // a random left-padded prompt batch with one seed per row, through each trainer's rollout group
  int const B = 6, P = 12;
  rlflow::Tensor ids = rlflow::Tensor::empty(rlflow::DType::int32, rlflow::Shape{B, P});
  rlflow::Tensor am = rlflow::Tensor::empty(rlflow::DType::int32, rlflow::Shape{B, P});
  std::vector<std::int64_t> seeds;
  for (int i = 0; i < B; ++i) {
    int const pad = int(rng() % std::uint64_t(P - 1));
    for (int t = 0; t < P; ++t) {
      ids.at<std::int32_t>(i, t) = t < pad ? 0 : std::int32_t(rng() % std::uint64_t(V));
      am.at<std::int32_t>(i, t) = t < pad ? 0 : 1;
    }
    seeds.push_back(std::int64_t(rng() % 1000000));
  }
  auto const prompts = rlflow::DataProto::from_dict({{"input_ids", ids}, {"attention_mask", am}, {"rollout_seed", rlflow::Tensor::from(seeds)}});
  // the static and the paged engine's batches of these prompts: the same rows, log-probs within
  // 2e-5; the paged engine's counters come with its batch only; each rollout rank's LM head
  auto same_rollout = [&](Trainer& st, Trainer& pg, std::int64_t head) {
    auto const gs = st.actor_rollout_wg().call<&Trainer::actor_role::generate_sequences>(prompts);
    auto const gp = pg.actor_rollout_wg().call<&Trainer::actor_role::generate_sequences>(prompts);
    REQUIRE(gs.meta_info().find(std::string(rlflow::metrics_key)) == nullptr);
    REQUIRE(gp.meta_info().find(std::string(rlflow::metrics_key)) != nullptr);
    auto const rs = gs.tensor("responses").span<std::int32_t>(), rp = gp.tensor("responses").span<std::int32_t>();
    REQUIRE(std::vector<std::int32_t>(rp.begin(), rp.end()) == std::vector<std::int32_t>(rs.begin(), rs.end()));
    auto const ms = gs.tensor("response_mask").span<std::int32_t>(), mp = gp.tensor("response_mask").span<std::int32_t>();
    REQUIRE(std::vector<std::int32_t>(mp.begin(), mp.end()) == std::vector<std::int32_t>(ms.begin(), ms.end()));
    auto const ls = gs.tensor("rollout_log_probs").span<float>(), lp = gp.tensor("rollout_log_probs").span<float>();
    REQUIRE(ls.size() == lp.size());
    double worst = 0;
    for (std::size_t i = 0; i < ls.size(); ++i) worst = std::max(worst, double(std::fabs(ls[i] - lp[i])));
    INFO("largest log-prob difference " << worst);
    REQUIRE(worst <= 2e-5);
    for (Trainer* t : {&st, &pg})
      for (auto const& heads : t->actor_rollout_wg().call<&Trainer::actor_role::lm_heads>()) REQUIRE(heads.at(2) == head);
  };
  same_rollout(ts, tp, 0);
  // the training steps: the same rows, so the same scores and lengths; the paged metrics at TP 2
  for (int s = 0; s < 2; ++s) {
    INFO("step " << s + 1);
    auto const m_s = ts.step(), m_p = tp.step();
    REQUIRE(m_s.count("perf/rollout/generation_tokens") == 0);
    REQUIRE(m_p.count("perf/rollout/generation_tokens") == 1);
    REQUIRE(m_p.count("perf/rollout/prefix_cache_hit_rate") == 1);
    REQUIRE(m_p.at("response_length/mean") == m_s.at("response_length/mean"));
    REQUIRE(m_p.at("critic/score/mean") == m_s.at("critic/score/mean"));
    // each generated token counted once (the TP ranks of the replica generate the same rows)
    double const rows = 4.0 * 2.0;  // train_batch_size x n
    REQUIRE(m_p.at("perf/rollout/generation_tokens") == Approx(m_p.at("response_length/mean") * rows).margin(0.5));
  }
  REQUIRE(tp.actor_weights() == ts.actor_weights());
  // lm_head=auto here, and vocab_parallel, mean the vocabulary-parallel head, on the paged engine too
  for (char const* head : {"auto", "vocab_parallel"}) {
    INFO("lm_head=" << head);
    Trainer sv(run_config((std::string("static_") + head).c_str(), head), so), pv(run_config((std::string("paged_") + head).c_str(), head), po);
    same_rollout(sv, pv, 1);
    REQUIRE(pv.step().count("perf/rollout/generation_tokens") == 1);
  }
}

}  // namespace test_verl_keys
