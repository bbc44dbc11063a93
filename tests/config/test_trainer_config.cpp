// Tests of rlflow/config/trainer_config.hpp: verl defaults, key table, set/get, YAML/JSON/CLI loading,
// unknown-key suggestions, the §11 start-up checks against an independent reference over random
// configs, the compile-time check, and that docs/configuration.md lists every key.
#include <catch2/catch.hpp>
#include <numeric>
#include <algorithm>

#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <rlflow/config/trainer_config.hpp>

namespace test_trainer_config {

using rlflow::TrainerConfig;

namespace {

//! A config that passes every check with verl's defaults otherwise (micro-batches set).
TrainerConfig valid_config() {
  TrainerConfig c;
  c.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 8;
  c.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 8;
  c.actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu = 8;
  c.critic.ppo_micro_batch_size_per_gpu = 8;
  return c;
}

bool has(std::vector<std::string_view> const& v, std::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string joined(std::vector<std::string> const& v) {
  std::string s;
  for (auto const& x : v) s += x + "\n";
  return s;
}

std::string write_temp(std::string const& name, std::string const& text) {
  std::string const path = std::string("rlflow_test_config_") + name;
  std::ofstream(path) << text;
  return path;
}

}  // namespace

// ---- defaults ---------------------------------------------------------------------------------

TEST_CASE("defaults are verl's", "[config][defaults]") {
  TrainerConfig const c{};
  auto const& a = c.actor_rollout_ref.actor;
  auto const& r = c.actor_rollout_ref.rollout;
  CHECK(c.data.train_batch_size == 1024);
  CHECK(!c.data.gen_batch_size.has_value);
  CHECK(!c.data.val_batch_size.has_value);
  CHECK(c.data.max_prompt_length == 512);
  CHECK(c.data.max_response_length == 512);
  CHECK(a.ppo_mini_batch_size == 256);
  CHECK(!a.ppo_micro_batch_size_per_gpu.has_value);
  CHECK(a.clip_ratio == 0.2);
  CHECK(c.clip_ratio_low() == 0.2);
  CHECK(c.clip_ratio_high() == 0.2);
  CHECK(a.clip_ratio_c == 3.0);
  CHECK(a.policy_loss.loss_mode == "vanilla");
  CHECK(a.policy_loss.clip_cov_ratio == 0.0002);
  CHECK(a.policy_loss.clip_cov_lb == 1.0);
  CHECK(a.policy_loss.clip_cov_ub == 5.0);
  CHECK(a.policy_loss.kl_cov_ratio == 0.0002);
  CHECK(a.policy_loss.ppo_kl_coef == 0.1);
  CHECK(a.loss_agg_mode == "token-mean");
  CHECK(!a.loss_scale_factor.has_value);
  CHECK(a.entropy_coeff == 0.0);
  CHECK(a.use_kl_loss == false);
  CHECK(a.kl_loss_coef == 0.001);
  CHECK(a.kl_loss_type == "low_var_kl");
  CHECK(a.ppo_epochs == 1);
  CHECK(a.shuffle == false);
  CHECK(a.data_loader_seed == 42);
  CHECK(a.tau_pos == 1.0);
  CHECK(a.tau_neg == 1.05);
  CHECK(c.critic.cliprange_value == 0.5);
  CHECK(r.n == 1);
  CHECK(r.temperature == 1.0);
  CHECK(r.top_k == -1);
  CHECK(r.top_p == 1.0);
  CHECK(r.gpu_memory_utilization == 0.5);
  CHECK(r.tensor_model_parallel_size == 2);
  CHECK(r.data_parallel_size == 1);
  CHECK(r.pipeline_model_parallel_size == 1);
  CHECK(r.nnodes == 0);
  CHECK(c.rollout_n_gpus_per_node() == 8);
  CHECK(r.free_cache_engine);
  CHECK(r.calculate_log_probs);
  CHECK(r.val_kwargs.temperature == 0.0);
  CHECK(r.val_kwargs.n == 1);
  CHECK(r.val_kwargs.do_sample == false);
  CHECK(r.agent.num_workers == 8);
  CHECK(r.checkpoint_engine.backend == "naive");
  CHECK(r.checkpoint_engine.update_weights_bucket_megabytes == 2048);
  CHECK(c.actor_rollout_ref.hybrid_engine);
  CHECK(c.algorithm.gamma == 1.0);
  CHECK(c.algorithm.lam == 1.0);
  CHECK(c.algorithm.adv_estimator == "gae");
  CHECK(c.algorithm.norm_adv_by_std_in_grpo);
  CHECK(!c.algorithm.use_kl_in_reward);
  CHECK(c.algorithm.kl_penalty == "kl");
  CHECK(c.algorithm.kl_ctrl.type == "fixed");
  CHECK(c.algorithm.kl_ctrl.kl_coef == 0.001);
  CHECK(c.algorithm.kl_ctrl.horizon == 10000);
  CHECK(c.algorithm.kl_ctrl.target_kl == 0.1);
  CHECK(c.trainer.balance_batch);
  CHECK(c.trainer.total_epochs == 30);
  CHECK(c.trainer.nnodes == 1);
  CHECK(c.trainer.n_gpus_per_node == 8);
  CHECK(c.trainer.save_freq == -1);
  CHECK(c.trainer.test_freq == -1);
  CHECK(c.trainer.critic_warmup == 0);
  CHECK(c.trainer.use_v1);
  CHECK(c.trainer.v1.trainer_mode == "sync");
  CHECK(c.trainer.v1.colocate_async.num_warmup_batches == 1);
  CHECK(c.trainer.v1.separate_async.num_warmup_batches == 1);
  CHECK(c.trainer.v1.separate_async.parameter_sync_step == 4);
  CHECK(c.trainer.v1.sampler.max_off_policy_threshold == 8);
  CHECK(c.trainer.v1.sampler.strategy == "drop");
  CHECK(!c.reward.reward_model.enable);
  CHECK(!c.reward.reward_model.enable_resource_pool);
  CHECK(c.reward.reward_model.n_gpus_per_node == 8);
  CHECK(c.reward.reward_model.nnodes == 0);
  CHECK(c.max_colocate_count == 3);
  // inheritance (verl's ${oc.select:...} interpolations)
  CHECK(c.critic_ppo_mini_batch_size() == 256);
  CHECK(c.critic_ppo_epochs() == 1);
  CHECK(c.critic_loss_agg_mode() == "token-mean");
  CHECK(c.uses_critic());  // gae
  CHECK(!c.uses_reference());
  CHECK(c.get("critic.loss_agg_mode") == "null");
  CHECK(c.get("actor_rollout_ref.rollout.n_gpus_per_node") == "null");
}

TEST_CASE("derived values follow verl's rules", "[config][derived]") {
  TrainerConfig c;
  c.algorithm.adv_estimator = "grpo";
  CHECK(!c.uses_critic());
  c.critic.enable = true;
  CHECK(c.uses_critic());
  c.critic.enable = rlflow::null;
  c.algorithm.adv_estimator = "gae";
  CHECK(c.uses_critic());
  c.actor_rollout_ref.actor.use_kl_loss = true;
  CHECK(c.uses_reference());
  c.actor_rollout_ref.actor.clip_ratio = 0.3;
  c.actor_rollout_ref.actor.clip_ratio_low = rlflow::null;
  CHECK(c.clip_ratio_low() == 0.3);
  CHECK(c.clip_ratio_high() == 0.2);
  c.critic.ppo_mini_batch_size = 64;
  CHECK(c.critic_ppo_mini_batch_size() == 64);
  c.trainer.n_gpus_per_node = 4;
  c.trainer.nnodes = 3;
  CHECK(c.world_size() == 12);
  CHECK(c.rollout_n_gpus_per_node() == 4);
  CHECK(c.parameter_sync_step() == 1);
  c.trainer.v1.trainer_mode = "separate_async";
  CHECK(c.parameter_sync_step() == 4);
  CHECK(rlflow::interpolate(c, c.trainer.default_local_dir.view()) == "checkpoints/verl_examples/gsm8k");
  c.set("trainer.experiment_name", "run7");
  CHECK(rlflow::interpolate(c, "${trainer.experiment_name}/x") == "run7/x");
  CHECK_THROWS_WITH(rlflow::interpolate(c, "${trainer.experiment_nam}"), Catch::Contains("trainer.experiment_name"));
}

// ---- key table, set/get -------------------------------------------------------------------------

TEST_CASE("every key round-trips through get and set", "[config][keys]") {
  TrainerConfig c{};
  std::set<std::string_view> names;
  for (auto const& k : rlflow::detail::config_keys) {
    INFO(k.name);
    CHECK(names.insert(k.name).second);  // unique
    CHECK(!k.help.empty());
    auto const before = c.get(k.name);
    c.set(k.name, before);
    CHECK(c.get(k.name) == before);
  }
  CHECK(names.size() >= 140);
  CHECK(c.to_json() == TrainerConfig{}.to_json());
}

TEST_CASE("set parses each kind and rejects bad values with the key and a fix", "[config][keys]") {
  TrainerConfig c;
  c.set("data.train_batch_size", "512");
  CHECK(c.data.train_batch_size == 512);
  c.set("actor_rollout_ref.actor.clip_ratio_high", "0.28");
  CHECK(c.clip_ratio_high() == 0.28);
  c.set("actor_rollout_ref.actor.clip_ratio_high", "null");
  CHECK(!c.actor_rollout_ref.actor.clip_ratio_high.has_value);
  c.set("actor_rollout_ref.actor.use_kl_loss", "True");
  CHECK(c.actor_rollout_ref.actor.use_kl_loss);
  c.set("critic.enable", "None");
  CHECK(!c.critic.enable.has_value);
  c.set("critic.enable", "false");
  CHECK(c.critic.enable.has_value);
  CHECK(!c.critic.enable.stored);
  c.set("algorithm.adv_estimator", "grpo");
  CHECK(c.algorithm.adv_estimator == "grpo");
  c.set("trainer.logger", "['console','jsonl']");
  CHECK(c.trainer.logger.items() == std::vector<std::string>{"console", "jsonl"});
  CHECK(c.trainer.logger.contains("jsonl"));
  CHECK(c.get("trainer.logger") == "[console, jsonl]");
  c.set("actor_rollout_ref.actor.optim.betas", "[0.9, 0.95]");
  CHECK(c.actor_rollout_ref.actor.optim.betas[1] == 0.95);
  c.set("actor_rollout_ref.actor.optim.lr", "1e-6");
  CHECK(c.actor_rollout_ref.actor.optim.lr == 1e-6);

  CHECK_THROWS_AS(c.set("data.train_batch_size", "12x"), rlflow::config_error);
  CHECK_THROWS_WITH(c.set("data.train_batch_size", "12x"),
                    Catch::Contains("data.train_batch_size") && Catch::Contains("integer") && Catch::Contains("12x"));
  CHECK_THROWS_WITH(c.set("data.train_batch_size", "null"), Catch::Contains("cannot be null"));
  CHECK_THROWS_WITH(c.set("actor_rollout_ref.rollout.temperature", "hot"), Catch::Contains("finite number"));
  CHECK_THROWS_WITH(c.set("actor_rollout_ref.rollout.temperature", "inf"), Catch::Contains("finite number"));
  CHECK_THROWS_WITH(c.set("data.shuffle", "maybe"), Catch::Contains("true or false"));
  CHECK_THROWS_WITH(c.set("actor_rollout_ref.actor.loss_agg_mode", "token_mean"),
                    Catch::Contains("did you mean 'token-mean'"));
  CHECK_THROWS_WITH(c.set("algorithm.adv_estimator", "grp"), Catch::Contains("did you mean 'grpo'"));
  CHECK_THROWS_WITH(c.set("algorithm.kl_penalty", "full"), Catch::Contains("is not one of"));
  CHECK_THROWS_WITH(c.set("trainer.logger", "[console,wandbb]"), Catch::Contains("wandbb") && Catch::Contains("did you mean 'wandb'"));
  CHECK_THROWS_WITH(c.set("actor_rollout_ref.actor.optim.betas", "[0.9]"), Catch::Contains("two numbers"));
  CHECK_THROWS_WITH(c.set("trainer.project_name", std::string(300, 'x')), Catch::Contains("255"));
  // values are unchanged by failed sets
  CHECK(c.data.train_batch_size == 512);
  CHECK(c.actor_rollout_ref.actor.loss_agg_mode == "token-mean");
}

TEST_CASE("an unknown key names the closest known key", "[config][keys]") {
  TrainerConfig c;
  struct Case {
    char const* typo;
    char const* expected;
  };
  for (auto const& t : {Case{"data.train_bach_size", "data.train_batch_size"},
                        Case{"actor_rollout_ref.actor.ppo_mini_batchsize", "actor_rollout_ref.actor.ppo_mini_batch_size"},
                        Case{"trainer.ngpus_per_node", "trainer.n_gpus_per_node"},
                        Case{"actor_rollout_ref.rollout.temprature", "actor_rollout_ref.rollout.temperature"},
                        Case{"ppo_micro_batch_size_per_gpu", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"},
                        Case{"rollout.tensor_model_parallel_size", "actor_rollout_ref.rollout.tensor_model_parallel_size"},
                        Case{"algorithm.kl_ctrl.kl_coeff", "algorithm.kl_ctrl.kl_coef"},
                        Case{"trainer.v1.separate_async.parameter_sync_steps",
                             "trainer.v1.separate_async.parameter_sync_step"}}) {
    INFO(t.typo);
    CHECK_THROWS_AS(c.set(t.typo, "1"), rlflow::config_error);
    CHECK_THROWS_WITH(c.set(t.typo, "1"),
                      Catch::Contains(std::string("unknown config key '") + t.typo) &&
                          Catch::Contains(std::string("did you mean '") + t.expected + "'"));
  }
  CHECK(rlflow::detail::edit_distance("kitten", "sitting") == 3);
  CHECK(rlflow::detail::edit_distance("", "abc") == 3);
  CHECK(rlflow::detail::edit_distance("abc", "abc") == 0);
}

TEST_CASE("overrides as verl users type them", "[config][cli]") {
  TrainerConfig c;
  c.apply_overrides({"data.train_batch_size=256", "+actor_rollout_ref.rollout.n=4", "++seed=7",
                     "trainer.experiment_name=a=b", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=null"});
  CHECK(c.data.train_batch_size == 256);
  CHECK(c.actor_rollout_ref.rollout.n == 4);
  CHECK(c.seed == 7);
  CHECK(c.trainer.experiment_name == "a=b");
  CHECK_THROWS_WITH(c.apply_overrides({"data.train_batch_size"}), Catch::Contains("key=value"));
}

// ---- files and command lines ------------------------------------------------------------------

static char const* const yaml_doc = R"(# a verl-style config
data:
  train_batch_size: 512   # prompts
  max_prompt_length: 128
  gen_batch_size: ~
  train_files: "data/train.jsonl"
actor_rollout_ref:
  actor:
    ppo_mini_batch_size: 128
    ppo_micro_batch_size_per_gpu: 4
    loss_agg_mode: 'seq-mean-token-mean'
    optim:
      lr: 1.0e-5
      betas: [0.9, 0.95]
  rollout:
    n: 4
    log_prob_micro_batch_size_per_gpu: 8
    val_kwargs:
      do_sample: true
      temperature: 0.7
algorithm:
  adv_estimator: grpo
  kl_ctrl:
    type: adaptive
trainer:
  logger:
    - console
    - jsonl
  experiment_name: "with # hash"
seed: 3
)";

static void check_loaded(TrainerConfig const& c) {
  CHECK(c.data.train_batch_size == 512);
  CHECK(c.data.max_prompt_length == 128);
  CHECK(!c.data.gen_batch_size.has_value);
  CHECK(c.data.train_files == "data/train.jsonl");
  CHECK(c.actor_rollout_ref.actor.ppo_mini_batch_size == 128);
  CHECK(c.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu.value() == 4);
  CHECK(c.actor_rollout_ref.actor.loss_agg_mode == "seq-mean-token-mean");
  CHECK(c.actor_rollout_ref.actor.optim.lr == 1e-5);
  CHECK(c.actor_rollout_ref.actor.optim.betas[1] == 0.95);
  CHECK(c.actor_rollout_ref.rollout.n == 4);
  CHECK(c.actor_rollout_ref.rollout.val_kwargs.do_sample);
  CHECK(c.actor_rollout_ref.rollout.val_kwargs.temperature == 0.7);
  CHECK(c.algorithm.adv_estimator == "grpo");
  CHECK(c.algorithm.kl_ctrl.type == "adaptive");
  CHECK(c.trainer.logger.items() == std::vector<std::string>{"console", "jsonl"});
  CHECK(c.trainer.experiment_name == "with # hash");
  CHECK(c.seed == 3);
  CHECK(c.data.max_response_length == 512);  // untouched keys keep defaults
}

TEST_CASE("YAML and JSON files load the same values", "[config][files]") {
  TrainerConfig y;
  y.apply_text(yaml_doc, "yaml", "inline.yaml");
  check_loaded(y);
  // JSON dump of the YAML-loaded config loads back to the same config
  TrainerConfig j;
  j.apply_text(y.to_json().dump(), "json", "dump.json");
  check_loaded(j);
  CHECK(j.to_json() == y.to_json());
  // through files and from_args: files first, then overrides in order
  auto const path = write_temp("a.yaml", yaml_doc);
  char const* argv[] = {"prog", "data.train_batch_size=256", "--config", path.c_str(), "seed=11", "--json"};
  auto const cl = rlflow::parse_command_line(6, argv);
  CHECK(cl.json);
  CHECK(!cl.help);
  CHECK(cl.config.data.train_batch_size == 256);
  CHECK(cl.config.seed == 11);
  CHECK(cl.config.actor_rollout_ref.rollout.n == 4);
  CHECK(TrainerConfig::from_args(6, argv).to_json() == cl.config.to_json());
  auto const jpath = write_temp("b.json", y.to_json().dump(2));
  CHECK(TrainerConfig::from_file(jpath).to_json() == y.to_json());
  std::remove(path.c_str());
  std::remove(jpath.c_str());
}

TEST_CASE("file and argument errors name the place and the fix", "[config][files]") {
  TrainerConfig c;
  CHECK_THROWS_WITH(c.apply_text("data:\n  train_bach_size: 3\n", "yaml", "x.yaml"),
                    Catch::Contains("x.yaml:2") && Catch::Contains("did you mean 'data.train_batch_size'"));
  CHECK_THROWS_WITH(c.apply_text("data:\n  train_batch_size: big\n", "yaml", "x.yaml"),
                    Catch::Contains("x.yaml:2") && Catch::Contains("integer"));
  CHECK_THROWS_AS(c.apply_text("data:\n\ttrain_batch_size: 3\n", "yaml", "x.yaml"), rlflow::format_error);
  CHECK_THROWS_AS(c.apply_text("data:\n  train_batch_size: 3\n   max_prompt_length: 4\n", "yaml", "x.yaml"),
                  rlflow::format_error);
  CHECK_THROWS_WITH(c.apply_text("data: |\n  text\n", "yaml", "x.yaml"), Catch::Contains("x.yaml:1"));  // a section, not a value
  CHECK_THROWS_WITH(c.apply_text("just text\n", "yaml", "x.yaml"), Catch::Contains("x.yaml:1") && Catch::Contains("key: value"));
  CHECK_THROWS_WITH(c.apply_text("data:\n  train_batch_size: [3\n", "yaml", "x.yaml"),
                    Catch::Contains("x.yaml:") && Catch::Contains("invalid YAML"));
  CHECK_THROWS_AS(c.apply_text("{\"data\": {\"train_batch_size\": }", "json", "x.json"), rlflow::format_error);
  CHECK_THROWS_WITH(c.apply_text("{\"data\": {\"train_batch_siz\": 3}}", "json", "x.json"),
                    Catch::Contains("did you mean 'data.train_batch_size'"));
  CHECK_THROWS_WITH(c.apply_text("{\"data\": {\"train_batch_size\": [1]}}", "json", "x.json"),
                    Catch::Contains("got a list"));
  CHECK_THROWS_AS(c.apply_file("does/not/exist.yaml"), rlflow::io_error);
  CHECK_THROWS_WITH(c.apply_file("config.toml"), Catch::Contains(".yaml, .yml or .json"));
  char const* bad[] = {"prog", "--frobnicate"};
  CHECK_THROWS_WITH(rlflow::parse_command_line(2, bad), Catch::Contains("--frobnicate") && Catch::Contains("key=value"));
  char const* help[] = {"prog", "--help"};
  CHECK(rlflow::parse_command_line(2, help).help);
  auto const h = rlflow::config_help();
  CHECK_THAT(h, Catch::Contains("data.train_batch_size = 1024") &&
                    Catch::Contains("actor_rollout_ref.actor.loss_agg_mode = token-mean"));
}

TEST_CASE("YAML config files read with yaml-cpp: anchors, merge keys, flow maps, multi-line scalars, documents",
          "[config][yaml]") {
  TrainerConfig c;
  c.apply_text(R"(actor_rollout_ref:
  actor:
    optim: &optim {lr: 2.0e-3, weight_decay: 0.0}
critic:
  optim: *optim
trainer:
  experiment_name: >-
    folded
    name
  project_name: |-
    literal
---
data: {train_batch_size: 64, max_prompt_length: 7}
)",
               "yaml", "anchors.yaml");
  CHECK(c.actor_rollout_ref.actor.optim.lr == 2.0e-3);
  CHECK(c.critic.optim.lr == 2.0e-3);
  CHECK(c.critic.optim.weight_decay == 0.0);
  CHECK(c.trainer.experiment_name.view() == "folded name");
  CHECK(c.trainer.project_name.view() == "literal");
  CHECK(c.data.train_batch_size == 64);
  CHECK(c.data.max_prompt_length == 7);

  // '<<' merge keys: the map's own keys win wherever they are written; of several merged maps the first wins
  TrainerConfig m;
  m.apply_text(R"(actor_rollout_ref:
  actor:
    optim: &base {lr: 1.0e-4, weight_decay: 0.5, min_lr_ratio: 0.25}
critic:
  optim:
    lr: 3.0e-5
    <<: *base
)",
               "yaml", "merge.yaml");
  CHECK(m.critic.optim.lr == 3.0e-5);
  CHECK(m.critic.optim.weight_decay == 0.5);
  CHECK(m.critic.optim.min_lr_ratio == 0.25);
  auto const e = rlflow::detail::parse_yaml_flat("a: &a {x: 1, y: 1}\nb: &b {y: 2, z: 2}\nc:\n  <<: [*a, *b]\n  w: 3\n");
  std::map<std::string, std::string> last;  // what apply_entries ends with: the last entry of a key wins
  for (auto const& f : e) last[f.key] = f.text;
  CHECK(last.at("c.x") == "1");
  CHECK(last.at("c.y") == "1");
  CHECK(last.at("c.z") == "2");
  CHECK(last.at("c.w") == "3");
  CHECK_THROWS_WITH(rlflow::detail::parse_yaml_flat("c:\n  <<: 5\n", "merge.yaml"),
                    Catch::Contains("merge.yaml:2") && Catch::Contains("map"));

  // block lists, quoted 'null', line numbers of values written after an alias and a folded scalar
  auto const l = rlflow::detail::parse_yaml_flat("a: &v [1, 2]\nb: *v\nc:\n  - 'null'\n  - ~\nd: >\n  x\n  y\ne: 1\n");
  REQUIRE(l.size() == 5);
  CHECK(l[1].items == std::vector<std::string>{"1", "2"});
  CHECK(l[2].items == std::vector<std::string>{"null", ""});
  CHECK(l[3].text == "x y\n");
  CHECK(l[4].line == 9);
}

namespace {
//! Runs 'f' and returns the rlflow::config_error message it throws ("" if none or another type).
template <class F>
std::string config_error_of(F&& f) {
  try {
    f();
  } catch (rlflow::config_error const& e) {
    return e.what();
  } catch (...) {
    return "<another exception>";
  }
  return "<no exception>";
}
}  // namespace

TEST_CASE("hostile YAML: each guard is a config_error naming the file, line, limit and fix, before yaml-cpp recurses",
          "[config][yaml]") {
  using rlflow::detail::parse_yaml_flat;
  // size
  std::string big = "a: 1\n";
  while (big.size() <= rlflow::detail::yaml_max_bytes) big += "# " + std::string(78, 'x') + "\n";
  auto m = config_error_of([&] { parse_yaml_flat(big, "big.yaml"); });
  auto const big_line = 1 + std::count(big.begin(), big.begin() + static_cast<std::ptrdiff_t>(rlflow::detail::yaml_max_bytes), '\n');
  CHECK_THAT(m, Catch::Contains("big.yaml:" + std::to_string(big_line) + ":") && Catch::Contains("1048576") && Catch::Contains("data.train_files"));
  // flow nesting (counted everywhere, even inside quotes)
  m = config_error_of([] { parse_yaml_flat("a: 1\nb: " + std::string(300, '[') + std::string(300, ']') + "\n", "deep.yaml"); });
  CHECK_THAT(m, Catch::Contains("deep.yaml:2:") && Catch::Contains("256") && Catch::Contains("indented blocks"));
  m = config_error_of([] { parse_yaml_flat("a: '" + std::string(300, '{') + "'\n", "quoted.yaml"); });
  CHECK_THAT(m, Catch::Contains("quoted.yaml:1:") && Catch::Contains("256"));
  // block nesting by indentation
  std::string nested;
  for (int i = 0; i < 70; ++i) nested += std::string(static_cast<std::size_t>(2 * i), ' ') + "k" + std::to_string(i) + ":\n";
  m = config_error_of([&] { parse_yaml_flat(nested, "indent.yaml"); });
  CHECK_THAT(m, Catch::Contains("indent.yaml:66:") && Catch::Contains("128 spaces") && Catch::Contains("un-indent"));
  // compact nested block collections nest without indentation
  std::string dashes;
  for (int i = 0; i < 100; ++i) dashes += "- ";
  m = config_error_of([&] { parse_yaml_flat("a:\n" + dashes + "x\n", "dash.yaml"); });
  CHECK_THAT(m, Catch::Contains("dash.yaml:2:") && Catch::Contains("64") && Catch::Contains("one list item per line"));
  // aliases that multiply the values (a 'billion laughs' document), also through empty maps
  for (std::string leaf : {"{x: 1, y: 2}", "{x: {}, y: {}}"}) {
    std::string bomb = "l0: &l0 " + leaf + "\n";
    for (int i = 1; i <= 40; ++i)
      bomb += rlflow::msg("l", i, ": &l", i, " {p: *l", i - 1, ", q: *l", i - 1, "}\n");
    m = config_error_of([&] { parse_yaml_flat(bomb, "bomb.yaml"); });
    CHECK_THAT(m, Catch::Contains("bomb.yaml:") && Catch::Contains("100000") && Catch::Contains("alias each section once"));
  }
  // aliases that nest deeper than the bound in a few lines, and an alias inside its own anchor
  std::string chain = "m0: &m0 {x: 1}\n";
  for (int i = 1; i <= 80; ++i) chain += rlflow::msg("m", i, ": &m", i, " {y: *m", i - 1, "}\n");
  m = config_error_of([&] { parse_yaml_flat(chain, "chain.yaml"); });
  CHECK_THAT(m, Catch::Contains("chain.yaml:") && Catch::Contains("deeper than the limit of 64"));
  m = config_error_of([] { parse_yaml_flat("a:\n  b: &s\n    c: *s\n", "cycle.yaml"); });
  CHECK_THAT(m, Catch::Contains("cycle.yaml:") && Catch::Contains("deeper than the limit of 64") && Catch::Contains("alias inside its own anchor") &&
                    Catch::Contains("remove the alias"));
  // documents just inside the bounds read
  std::string ok_flow = "a: [";
  for (int i = 0; i < 255; ++i) ok_flow += "[";
  CHECK_THROWS_WITH(parse_yaml_flat(ok_flow + "\n", "ok.yaml"), Catch::Contains("invalid YAML"));  // a syntax error, not a limit
  std::string six = "a:\n  b:\n    c:\n      d:\n        e:\n          f: 1\n";
  CHECK(parse_yaml_flat(six).at(0).key == "a.b.c.d.e.f");

  // yaml-cpp 0.7's LoadAll loops forever, allocating, where the parser stops advancing (jbeder/yaml-cpp#1319);
  // these were hangs found by fuzz.config. Now each is a format_error naming the line.
  CHECK_THROWS_WITH(parse_yaml_flat(",\n", "comma.yaml"), Catch::Contains("comma.yaml:1: invalid YAML"));
  CHECK_THROWS_WITH(parse_yaml_flat("a: 1\n---\n,\n", "second.yaml"), Catch::Contains("second.yaml:3: invalid YAML"));
  CHECK_THROWS_AS(parse_yaml_flat(", \xff: [line\n  two1, 2]}\ne: *x\ne: |\n  line\n  two\n", "fuzz.yaml"),
                  rlflow::format_error);
  // tabs stay a format_error (YAML forbids them), as do lists of maps and non-scalar keys
  CHECK_THROWS_AS(parse_yaml_flat("a:\n\tb: 1\n"), rlflow::format_error);
  CHECK_THROWS_WITH(parse_yaml_flat("a:\n  - {b: 1}\n", "lom.yaml"), Catch::Contains("lom.yaml:2") && Catch::Contains("nested lists or maps"));
  CHECK_THROWS_WITH(parse_yaml_flat("? [a, b]\n: 1\n", "key.yaml"), Catch::Contains("key.yaml:1") && Catch::Contains("plain name"));
}

TEST_CASE("the YAML reader flattens nested maps and lists", "[config][yaml]") {
  auto const e = rlflow::detail::parse_yaml_flat("a:\n  b:\n    c: 1\n  d: 'x # y'\n  e:\n  f: [1, \"2\"]\ng: null\n---\n");
  REQUIRE(e.size() == 5);
  CHECK(e[0].key == "a.b.c");
  CHECK(e[0].text == "1");
  CHECK(e[0].line == 3);
  CHECK(e[1].key == "a.d");
  CHECK(e[1].text == "x # y");
  CHECK(e[1].quoted);
  CHECK(e[2].key == "a.e");
  CHECK(e[2].is_null);
  CHECK(e[3].key == "a.f");
  CHECK(e[3].is_list);
  CHECK(e[3].items == std::vector<std::string>{"1", "2"});
  CHECK(e[4].key == "g");
  CHECK(e[4].is_null);
}

// ---- validation -------------------------------------------------------------------------------

namespace {

//! Independent reference of the batch-sizing checks (verl's batch sizing and start-up asserts), plain integer math.
std::set<std::string> reference_batch_violations(TrainerConfig const& c) {
  std::set<std::string> v;
  long long const B = c.data.train_batch_size, n = c.actor_rollout_ref.rollout.n,
                  M = c.actor_rollout_ref.actor.ppo_mini_batch_size, sp = c.actor_rollout_ref.actor.ulysses_sequence_parallel_size,
                  world = c.trainer.nnodes * c.trainer.n_gpus_per_node;
  auto const& a = c.actor_rollout_ref.actor;
  long long const dp = world / sp;
  if ((B * n) % world != 0) v.insert("real_batch_divisible_by_world");
  if (world % sp != 0) v.insert("sequence_parallel_divides_world");
  if (a.ppo_micro_batch_size.has_value && a.ppo_micro_batch_size_per_gpu.has_value) v.insert("actor_micro_exclusive");
  if (!a.ppo_micro_batch_size.has_value && !a.ppo_micro_batch_size_per_gpu.has_value) v.insert("actor_micro_required");
  if (B < M) v.insert("actor_mini_le_train");
  if (B % M != 0 && B >= M) v.insert("actor_train_divisible_by_mini");
  if ((M * n) % dp != 0) v.insert("actor_mini_divisible_by_dp");
  if (a.ppo_micro_batch_size_per_gpu.has_value && ((M * n) / dp) % a.ppo_micro_batch_size_per_gpu.stored != 0)
    v.insert("actor_mini_divisible_by_micro");
  if (a.ppo_micro_batch_size.has_value &&
      (M % a.ppo_micro_batch_size.stored != 0 || a.ppo_micro_batch_size.stored * sp < world))
    v.insert("actor_deprecated_micro");
  return v;
}

TrainerConfig random_batch_config(std::mt19937& rng) {
  auto pick = [&](std::vector<long long> const& xs) { return xs[std::uniform_int_distribution<std::size_t>(0, xs.size() - 1)(rng)]; };
  TrainerConfig c = valid_config();
  c.algorithm.adv_estimator = "grpo";  // no critic: the actor checks only
  c.data.train_batch_size = pick({8, 12, 16, 60, 64, 96, 100, 128, 256, 1000, 1024});
  c.actor_rollout_ref.rollout.n = pick({1, 2, 3, 4, 5, 8});
  c.actor_rollout_ref.actor.ppo_mini_batch_size = pick({4, 8, 16, 32, 48, 64, 256});
  c.trainer.nnodes = pick({1, 2});
  c.trainer.n_gpus_per_node = pick({1, 2, 3, 4, 6, 8});
  c.actor_rollout_ref.actor.ulysses_sequence_parallel_size = pick({1, 1, 2, 4});
  c.actor_rollout_ref.rollout.tensor_model_parallel_size = 1;
  auto const micro = pick({0, 1, 2, 3, 4, 8, 16});
  auto const global = pick({0, 0, 0, 8, 16});
  c.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = micro > 0 ? rlflow::nullable<std::int64_t>(micro) : rlflow::null;
  c.actor_rollout_ref.actor.ppo_micro_batch_size = global > 0 ? rlflow::nullable<std::int64_t>(global) : rlflow::null;
  return c;
}

}  // namespace

TEST_CASE("the default config with micro-batches set is valid, with verl's null micro-batches it is not",
          "[config][validate]") {
  CHECK(rlflow::validate(valid_config()).empty());
  CHECK(rlflow::is_valid(valid_config()));
  auto const fails = rlflow::failed_checks(TrainerConfig{});
  CHECK(has(fails, "actor_micro_required"));
  CHECK(has(fails, "critic_micro_required"));
  CHECK(has(fails, "rollout_log_prob_micro"));
  CHECK(fails.size() == 3);
  CHECK_THROWS_AS(rlflow::check(TrainerConfig{}), rlflow::config_error);
  CHECK_THROWS_WITH(rlflow::check(TrainerConfig{}),
                    Catch::Contains("3 problems") && Catch::Contains("ppo_micro_batch_size_per_gpu"));
  CHECK_NOTHROW(rlflow::check(valid_config()));
}

TEST_CASE("batch-sizing checks match the spec's formulas over random configs", "[config][validate]") {
  std::mt19937 rng(12345);
  std::set<std::string> const batch_checks{
      "real_batch_divisible_by_world", "sequence_parallel_divides_world", "actor_micro_exclusive",
      "actor_micro_required",          "actor_mini_le_train",             "actor_train_divisible_by_mini",
      "actor_mini_divisible_by_dp",    "actor_mini_divisible_by_micro",   "actor_deprecated_micro"};
  int invalid = 0;
  for (int it = 0; it < 3000; ++it) {
    auto const c = random_batch_config(rng);
    if (c.world_size() % c.actor_rollout_ref.actor.ulysses_sequence_parallel_size != 0) continue;  // dp undefined
    auto const expected = reference_batch_violations(c);
    std::set<std::string> actual;
    for (auto name : rlflow::failed_checks(c))
      if (batch_checks.count(std::string(name))) actual.insert(std::string(name));
    INFO("B=" << c.data.train_batch_size << " n=" << c.actor_rollout_ref.rollout.n << " M="
              << c.actor_rollout_ref.actor.ppo_mini_batch_size << " world=" << c.world_size() << " sp="
              << c.actor_rollout_ref.actor.ulysses_sequence_parallel_size << " micro="
              << c.get("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu") << " global="
              << c.get("actor_rollout_ref.actor.ppo_micro_batch_size"));
    REQUIRE(actual == expected);
    // the constexpr predicate agrees with the run-time list
    REQUIRE(rlflow::is_valid(c) == rlflow::validate(c).empty());
    invalid += expected.empty() ? 0 : 1;
  }
  CHECK(invalid > 500);  // the generator explores both sides
}

TEST_CASE("worked message: train batch not divisible by the device count", "[config][validate]") {
  auto c = valid_config();
  c.data.train_batch_size = 1020;
  c.actor_rollout_ref.actor.ppo_mini_batch_size = 255;
  c.algorithm.adv_estimator = "grpo";
  auto const v = rlflow::validate(c);
  auto const text = joined(v);
  CHECK_THAT(text, Catch::Contains("data.train_batch_size=1020 * actor_rollout_ref.rollout.n=1 = 1020 rows must be "
                                   "divisible by trainer.nnodes=1 * trainer.n_gpus_per_node=8 = 8 devices"));
  CHECK_THAT(text, Catch::Contains("set data.train_batch_size to a multiple of 8 (e.g. 1016 or 1024)"));
  // the suggested batch sizes are reachable: B' * n divides by the devices, for random B, n, devices
  std::mt19937 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    auto d = valid_config();
    std::int64_t const W = std::uniform_int_distribution<std::int64_t>(2, 12)(rng);
    std::int64_t const n = std::uniform_int_distribution<std::int64_t>(1, 16)(rng);
    std::int64_t const B = std::uniform_int_distribution<std::int64_t>(1, 400)(rng);
    if (B * n % W == 0) continue;
    d.trainer.n_gpus_per_node = W;
    d.actor_rollout_ref.rollout.n = n;
    d.data.train_batch_size = B;
    auto const t = joined(rlflow::validate(d));
    auto const at = t.find("set data.train_batch_size to a multiple of ");
    REQUIRE(at != std::string::npos);
    std::int64_t step = 0, a = 0, b = 0;
    REQUIRE(std::sscanf(t.c_str() + at, "set data.train_batch_size to a multiple of %ld (e.g. %ld or %ld)", &step, &a, &b) == 3);
    INFO("B " << B << " n " << n << " W " << W);
    CHECK(a > 0);
    CHECK(b > a);
    CHECK(a * n % W == 0);
    CHECK(b * n % W == 0);
    CHECK(step == W / std::gcd(W, n));
  }
}

TEST_CASE("each start-up check fires alone with the keys, values and a fix", "[config][validate]") {
  struct Case {
    char const* check;
    std::vector<std::string> overrides;
    std::vector<std::string> words;  // must appear in the message
  };
  std::vector<Case> const cases{
      {"trainer_world_positive", {"trainer.n_gpus_per_node=0"}, {"trainer.n_gpus_per_node=0"}},
      {"batch_sizes_positive", {"actor_rollout_ref.rollout.n=0"}, {"actor_rollout_ref.rollout.n=0"}},
      {"lengths_positive", {"data.max_response_length=0"}, {"data.max_response_length=0"}},
      // only reachable alone with sequence parallelism: DP = 6 / 2 = 3 divides M*n = 3, the 6 devices do not divide B*n = 3
      {"real_batch_divisible_by_world", {"trainer.n_gpus_per_node=6", "actor_rollout_ref.actor.ulysses_sequence_parallel_size=2", "data.train_batch_size=3", "actor_rollout_ref.actor.ppo_mini_batch_size=3", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1", "algorithm.adv_estimator=grpo"}, {"= 3 rows", "= 6 devices"}},
      {"sequence_parallel_divides_world", {"algorithm.adv_estimator=grpo", "actor_rollout_ref.actor.ulysses_sequence_parallel_size=3"}, {"= 8 devices", "ulysses_sequence_parallel_size=3"}},
      {"actor_tensor_parallel_divides", {"actor_rollout_ref.actor.megatron.tensor_model_parallel_size=8"}, {"tensor_model_parallel_size=8", "= 8 devices", "n_head=4", "e.g. 4"}},
      {"actor_micro_exclusive", {"actor_rollout_ref.actor.ppo_micro_batch_size=64"}, {"ppo_micro_batch_size=64", "ppo_micro_batch_size_per_gpu=8", "both set"}},
      {"actor_micro_required", {"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=null"}, {"use_dynamic_bsz=false", "set actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"}},
      {"actor_micro_positive", {"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=0"}, {"ppo_micro_batch_size_per_gpu=0"}},
      {"actor_mini_le_train", {"data.train_batch_size=128", "critic.ppo_mini_batch_size=128"}, {"data.train_batch_size=128", "ppo_mini_batch_size=256"}},
      {"actor_train_divisible_by_mini", {"actor_rollout_ref.actor.ppo_mini_batch_size=384", "critic.ppo_mini_batch_size=256", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16"}, {"data.train_batch_size=1024", "ppo_mini_batch_size=384"}},
      {"actor_mini_divisible_by_dp", {"trainer.n_gpus_per_node=16", "actor_rollout_ref.actor.ppo_mini_batch_size=8", "critic.ppo_mini_batch_size=256", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=null", "actor_rollout_ref.actor.use_dynamic_bsz=true", "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=true"}, {"ppo_mini_batch_size=8", "data-parallel size 16"}},
      {"actor_mini_divisible_by_micro", {"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=5"}, {"= 32 rows", "ppo_micro_batch_size_per_gpu=5"}},
      {"actor_deprecated_micro", {"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=null", "actor_rollout_ref.actor.ppo_micro_batch_size=4"}, {"ppo_micro_batch_size=4", "device count 8"}},
      {"clip_ratio_c_above_one", {"actor_rollout_ref.actor.clip_ratio_c=1.0"}, {"clip_ratio_c=1", "3.0"}},
      {"clip_ratios_in_range", {"actor_rollout_ref.actor.clip_ratio_low=1.5"}, {"clip_ratio_low=1.5"}},
      {"policy_loss_parameters", {"actor_rollout_ref.actor.policy_loss.loss_mode=dro"}, {"dro_beta > 0", "got null"}},
      {"kl_ctrl_adaptive_parameters", {"algorithm.kl_ctrl.type=adaptive", "algorithm.kl_ctrl.horizon=0"}, {"horizon=0"}},
      {"critic_for_gae", {"critic.enable=false"}, {"algorithm.adv_estimator=gae", "critic.enable=false"}},
      {"critic_micro_exclusive", {"critic.ppo_micro_batch_size=64"}, {"critic.ppo_micro_batch_size=64"}},
      {"critic_micro_required", {"critic.ppo_micro_batch_size_per_gpu=null"}, {"set critic.ppo_micro_batch_size_per_gpu"}},
      {"critic_sizes_positive", {"critic.ppo_epochs=0"}, {"critic.ppo_epochs=0"}},
      {"critic_mini_le_train", {"critic.ppo_mini_batch_size=2048"}, {"critic.ppo_mini_batch_size=2048"}},
      {"critic_train_divisible_by_mini", {"critic.ppo_mini_batch_size=384", "critic.ppo_micro_batch_size_per_gpu=16"}, {"critic.ppo_mini_batch_size=384"}},
      {"critic_mini_divisible_by_dp", {"critic.ppo_mini_batch_size=4", "critic.use_dynamic_bsz=true", "critic.ppo_micro_batch_size_per_gpu=null"}, {"critic.ppo_mini_batch_size=4", "data-parallel size 8"}},
      {"critic_mini_divisible_by_micro", {"critic.ppo_micro_batch_size_per_gpu=5"}, {"critic.ppo_micro_batch_size_per_gpu=5"}},
      {"ref_log_prob_micro", {"actor_rollout_ref.actor.use_kl_loss=true", "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=null"}, {"use_kl_loss=true", "set actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu"}},
      {"rollout_log_prob_micro", {"actor_rollout_ref.rollout.log_prob_micro_batch_size=64"}, {"log_prob_micro_batch_size=64"}},
      {"dynamic_bsz_consistent", {"actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=true"}, {"use_dynamic_bsz=false", "log_prob_use_dynamic_bsz=true"}},
      {"dynamic_bsz_budget_fits", {"actor_rollout_ref.actor.use_dynamic_bsz=true", "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=true", "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=100"}, {"actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=100", "data.max_prompt_length=", "set actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu="}},
      {"val_sampling_temperature", {"actor_rollout_ref.rollout.val_kwargs.do_sample=true"}, {"val_kwargs.temperature > 0, got 0"}},
      {"sampling_ranges", {"actor_rollout_ref.rollout.top_p=0"}, {"top_p=0"}},
      {"multi_turn_ranges", {"actor_rollout_ref.rollout.multi_turn.max_assistant_turns=0"}, {"max_assistant_turns=0", "null (no limit) or >= 1"}},
      {"otb_sum_pi_squared", {"algorithm.adv_estimator=optimal_token_baseline"}, {"calculate_sum_pi_squared=true"}},
      {"passk_group_size", {"algorithm.adv_estimator=grpo_passk"}, {"rollout.n=1"}},
      {"gen_batch_divides_train", {"data.gen_batch_size=100"}, {"data.gen_batch_size=100", "data.train_batch_size=1024"}},
      {"separate_async_sync_step", {"trainer.v1.trainer_mode=separate_async", "actor_rollout_ref.rollout.nnodes=1", "actor_rollout_ref.rollout.checkpoint_engine.backend=nccl", "trainer.v1.separate_async.parameter_sync_step=2"}, {"1024 != 2 * 256 = 512", "data.train_batch_size=512", "parameter_sync_step=4"}},
      {"separate_async_rollout_pool", {"trainer.v1.trainer_mode=separate_async", "actor_rollout_ref.rollout.checkpoint_engine.backend=nccl"}, {"actor_rollout_ref.rollout.nnodes=0"}},
      {"separate_async_transport", {"trainer.v1.trainer_mode=separate_async", "actor_rollout_ref.rollout.nnodes=1"}, {"backend=naive", "backend=nccl"}},
      {"separate_async_reward_pool", {"trainer.v1.trainer_mode=separate_async", "actor_rollout_ref.rollout.nnodes=1", "actor_rollout_ref.rollout.checkpoint_engine.backend=nccl", "reward.reward_model.enable=true"}, {"enable_resource_pool=true"}},
      {"rollout_replica_fits", {"actor_rollout_ref.rollout.tensor_model_parallel_size=8", "actor_rollout_ref.rollout.data_parallel_size=2", "trainer.nnodes=1"}, {"= 16 devices", "rollout has 8"}},
      {"rollout_replica_node_shape", {"trainer.nnodes=3", "trainer.n_gpus_per_node=4", "data.train_batch_size=1200", "actor_rollout_ref.actor.ppo_mini_batch_size=240", "critic.ppo_mini_batch_size=240", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4", "critic.ppo_micro_batch_size_per_gpu=4", "actor_rollout_ref.rollout.tensor_model_parallel_size=6"}, {"TP*DP*PP = 6", "n_gpus_per_node=4"}},
      {"reward_pool_shape", {"reward.reward_model.enable=true", "reward.reward_model.enable_resource_pool=true"}, {"nnodes=0"}},
      {"max_colocate_count_positive", {"max_colocate_count=0"}, {"max_colocate_count=0"}},
      {"sampler_threshold_positive", {"trainer.v1.sampler.max_off_policy_threshold=0"}, {"max_off_policy_threshold=0"}},
      {"resume_path_given", {"trainer.resume_mode=resume_path"}, {"trainer.resume_from_path"}},
      {"discount_in_range", {"algorithm.lam=1.5"}, {"algorithm.lam=1.5"}},
      {"hybrid_engine_on", {"actor_rollout_ref.hybrid_engine=false"}, {"hybrid_engine=false"}},
      {"model_shape", {"actor_rollout_ref.model.n_embd=66"}, {"n_embd=66", "n_head=4"}},
      {"training_length", {"trainer.total_training_steps=0"}, {"total_training_steps=0"}},
      {"logging_ranges", {"trainer.log_freq=0"}, {"trainer.log_freq=0"}},
      {"optimizer_ranges", {"critic.optim.betas=[0.9,1.0]"}, {"betas=[0.9, 1]"}},
      {"lora_settings", {"actor_rollout_ref.model.lora_rank=-2"}, {"lora_rank=-2", "lora_rank in [1, 65536]"}},
  };
  std::set<std::string> covered;
  for (auto const& cs : cases) {
    INFO(cs.check);
    auto c = valid_config();
    c.apply_overrides(cs.overrides);
    auto const fails = rlflow::failed_checks(c);
    REQUIRE(fails.size() == 1);
    CHECK(fails[0] == cs.check);
    auto const v = rlflow::validate(c);
    REQUIRE(v.size() == 1);
    for (auto const& w : cs.words) CHECK_THAT(v[0], Catch::Contains(w));
    CHECK_THAT(v[0], Catch::Contains("set") || Catch::Contains("fix") || Catch::Contains("use") ||
                         Catch::Contains("make") || Catch::Contains("lower") || Catch::Contains("pick") ||
                         Catch::Contains("change"));
    CHECK(!rlflow::is_valid(c));
    covered.insert(cs.check);
  }
  // every check in the table has a case here
  for (auto const& row : rlflow::detail::config_check_rows) {
    INFO(row.name);
    CHECK(covered.count(std::string(row.name)) == 1);
  }
}

TEST_CASE("training TP: the degree divides the devices and the heads", "[config][validate]") {
  auto ok = valid_config();  // 8 devices, n_head 4
  for (int tp : {1, 2, 4}) {
    ok.actor_rollout_ref.actor.megatron.tensor_model_parallel_size = tp;
    CHECK(rlflow::validate(ok).empty());
  }
  for (int tp : {0, -1, 3, 8, 16}) {
    INFO("TP " << tp);
    auto c = valid_config();
    c.actor_rollout_ref.actor.megatron.tensor_model_parallel_size = tp;
    auto const fails = rlflow::failed_checks(c);
    REQUIRE(fails.size() == 1);
    CHECK(fails[0] == "actor_tensor_parallel_divides");
  }
  auto c = valid_config();
  c.trainer.n_gpus_per_node = 6;  // 6 devices, 4 heads: the largest common divisor is 2
  c.data.train_batch_size = 1200;
  c.actor_rollout_ref.actor.megatron.tensor_model_parallel_size = 4;
  auto const v = rlflow::validate(c);
  REQUIRE(!v.empty());
  CHECK_THAT(v[0], Catch::Contains("tensor_model_parallel_size=4") && Catch::Contains("= 6 devices") && Catch::Contains("e.g. 2"));
}

TEST_CASE("string keys are checked against their choices", "[config][validate]") {
  auto c = valid_config();
  c.actor_rollout_ref.actor.loss_agg_mode = "token_mean";  // bypasses set(): validate must catch it
  c.trainer.v1.trainer_mode = "seperate_async";
  auto const v = rlflow::validate(c);
  REQUIRE(v.size() == 2);
  CHECK_THAT(joined(v), Catch::Contains("loss_agg_mode' = 'token_mean'") && Catch::Contains("did you mean 'token-mean'"));
  CHECK_THAT(joined(v), Catch::Contains("did you mean 'separate_async'"));
  CHECK(!rlflow::is_valid(c));
  for (auto mode : {"token-mean", "token-sum", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"}) {
    c = valid_config();
    c.set("actor_rollout_ref.actor.loss_agg_mode", mode);
    CHECK(rlflow::validate(c).empty());
  }
}

TEST_CASE("warnings: KL in reward and in loss, idle rollout devices", "[config][validate]") {
  auto c = valid_config();
  CHECK(rlflow::warnings(c).empty());
  c.algorithm.use_kl_in_reward = true;
  c.actor_rollout_ref.actor.use_kl_loss = true;
  auto w = rlflow::warnings(c);
  REQUIRE(w.size() == 1);
  CHECK_THAT(w[0], Catch::Contains("use_kl_in_reward=true") && Catch::Contains("use_kl_loss=true"));
  CHECK(rlflow::validate(c).empty());  // a warning, not an error (verl warns)
  c = valid_config();
  c.actor_rollout_ref.rollout.tensor_model_parallel_size = 3;
  w = rlflow::warnings(c);
  REQUIRE(w.size() == 1);
  CHECK_THAT(w[0], Catch::Contains("2 of 8 rollout devices stay idle"));
}

// ---- compile time -----------------------------------------------------------------------------

namespace {
constexpr TrainerConfig grpo_config = [] {
  TrainerConfig c;
  c.algorithm.adv_estimator = "grpo";
  c.actor_rollout_ref.rollout.n = 4;
  c.data.train_batch_size = 512;
  c.actor_rollout_ref.actor.ppo_mini_batch_size = 128;
  c.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 16;
  c.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 32;
  return c;
}();
constexpr auto const& checked_grpo = rlflow::checked<grpo_config>;
static_assert(rlflow::is_valid(grpo_config));
static_assert(checked_grpo.data.train_batch_size == 512);
static_assert(!rlflow::is_valid(TrainerConfig{}));  // verl's null micro-batches
static_assert(rlflow::config_checks::real_batch_divisible_by_world(grpo_config));
}  // namespace

TEST_CASE("a constexpr config is checked at compile time", "[config][static]") {
  CHECK(checked_grpo.actor_rollout_ref.rollout.n == 4);
  CHECK(rlflow::validate(grpo_config).empty());
  rlflow::checked_config<grpo_config> ok{};
  (void)ok;
}

// ---- docs -------------------------------------------------------------------------------------

TEST_CASE("docs/configuration.md lists every key with its default and every check", "[config][docs]") {
  std::ifstream in(std::string(RLFLOW_SOURCE_DIR) + "/docs/configuration.md");
  REQUIRE(in.good());
  std::string const doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  TrainerConfig const d{};
  for (auto const& k : rlflow::detail::config_keys) {
    INFO(k.name);
    auto const v = d.get(k.name);
    CHECK_THAT(doc, Catch::Contains(std::string("| `") + std::string(k.name) + "` | " +
                                    (v.empty() ? std::string("(empty)") : "`" + v + "`") + " |"));
  }
  for (auto const& row : rlflow::detail::config_check_rows) {
    INFO(row.name);
    CHECK_THAT(doc, Catch::Contains(std::string("`") + std::string(row.name) + "`"));
  }
}

TEST_CASE("an unterminated quote is a format_error at the line where it opens", "[config][files]") {
  using rlflow::detail::parse_yaml_flat;
  auto const err = [](std::string const& text) {
    try {
      parse_yaml_flat(text, "q.yaml");
    } catch (rlflow::format_error const& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  // block style: a value, a key, a list item, after an anchor; double and single quotes
  CHECK_THAT(err("a: 1\nb: \"text\nc: 3\nd: 4\n"), Catch::Contains("q.yaml:2:") && Catch::Contains("unterminated"));
  CHECK_THAT(err("a: 1\nb: 'text\nc: 3\n"), Catch::Contains("q.yaml:2:") && Catch::Contains("unterminated"));
  CHECK_THAT(err("a: 1\n\"b: 2\nc: 3\n"), Catch::Contains("q.yaml:2:") && Catch::Contains("unterminated"));
  CHECK_THAT(err("a:\n  x: 1\n  'y: 2\n"), Catch::Contains("q.yaml:3:") && Catch::Contains("unterminated"));
  CHECK_THAT(err("a:\n  - ok\n  - \"x\n  - y\n"), Catch::Contains("q.yaml:3:") && Catch::Contains("unterminated"));
  CHECK_THAT(err("a: &v \"x\nb: 1\n"), Catch::Contains("q.yaml:1:") && Catch::Contains("unterminated"));
  CHECK_THAT(err("a: \"x\n"), Catch::Contains("q.yaml:1:") && Catch::Contains("unterminated"));
  // an escaped quote does not close the scalar
  CHECK_THAT(err("a: \"x\\\"\nb: 1\n"), Catch::Contains("q.yaml:1:") && Catch::Contains("unterminated double"));
  CHECK_THAT(err("a: 'it''\nb: 1\n"), Catch::Contains("q.yaml:1:") && Catch::Contains("unterminated single"));
  // flow style: a value and a key (yaml-cpp itself reports the end of input, one line later)
  CHECK_THAT(err("a: 1\nb: [1, 'x]\nc: 3\n"), Catch::Contains("q.yaml:2:") && Catch::Contains("unterminated"));
  CHECK_THAT(err("a: 1\nb: {\"k: 1}\nc: 3\n"), Catch::Contains("q.yaml:2:") && Catch::Contains("unterminated"));
  // closed quotes, escapes and multi-line quoted scalars still read as before
  auto const ok = parse_yaml_flat("a: \"multi\n  line\"\nb: 'it''s'\nc: \"x\\\"y\"\nd: it's\ne: [\"p\", 'q']\n", "q.yaml");
  REQUIRE(ok.size() == 5);
  CHECK(ok[0].text == "multi line");
  CHECK(ok[1].text == "it's");
  CHECK(ok[2].text == "x\"y");
  CHECK(ok[3].text == "it's");
  CHECK(ok[4].items == std::vector<std::string>{"p", "q"});
  // through the config: the later keys are not swallowed silently
  TrainerConfig c;
  CHECK_THROWS_AS(c.apply_text("data:\n  prompt_key: \"question\n  train_batch_size: 3\n", "yaml", "x.yaml"),
                  rlflow::format_error);
  CHECK_THROWS_WITH(c.apply_text("data:\n  prompt_key: \"question\n  train_batch_size: 3\n", "yaml", "x.yaml"),
                    Catch::Contains("x.yaml:2:"));
}

}  // namespace test_trainer_config
