// The Trainer's boundaries: resume and metrics (class 1), trainer_state.json fields
// (class 2), sizes and overflow (class 3), a reward role returning misshaped scores (class 4),
// config keys accepted but not honoured (class 5), and kill -9 at random moments (byte-equal
// metrics and bit-equal weights after resuming, no temporary folder left).
#include <catch2/catch.hpp>

#include <rlflow/trainer/trainer.hpp>

#include <chrono>
#include <csignal>
#include <fstream>
#include <random>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "trainer/trainer_fixtures.hpp"

using namespace rlflow;
namespace fs = std::filesystem;

namespace {
using namespace rlflow::testing;
using rlflow::testing::task;
PromptDataset dataset() { return task.make_dataset(64, 3); }

std::string slurp(fs::path const& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
void put(fs::path const& p, std::string const& s) { std::ofstream(p, std::ios::binary | std::ios::trunc) << s; }

//! Rewrites a checkpoint's trainer_state.json through a JSON edit and re-seals its manifest (so
//! the edit reaches the field checks rather than the CRC check).
template <class F>
void edit_state(fs::path const& ckpt, F&& f) {
  auto st = nlohmann::json::parse(slurp(ckpt / "trainer_state.json"));
  f(st);
  std::string const text = st.dump(2);
  put(ckpt / "trainer_state.json", text);
  auto m = nlohmann::json::parse(slurp(ckpt / "MANIFEST.json"));
  m["files"]["trainer_state.json"] = {{"size", text.size()}, {"crc32", rlflow::detail::crc32(text.data(), text.size())}};
  put(ckpt / "MANIFEST.json", m.dump(2));
}

//! metrics.jsonl without the wall-clock fields, one re-dumped line per step.
std::string metrics_without_timing(fs::path const& p) {
  std::istringstream in(slurp(p));
  std::string line, out;
  while (std::getline(in, line)) {
    auto j = nlohmann::ordered_json::parse(line);
    for (auto const* k : {"perf/throughput", "perf/time_per_step"}) j.erase(k);
    for (auto it = j.begin(); it != j.end();) {
      if (it.key().rfind("timing_s/", 0) == 0) it = j.erase(it);
      else ++it;
    }
    out += j.dump() + "\n";
  }
  return out;
}
std::vector<std::int64_t> logged_steps(fs::path const& p) {
  std::istringstream in(slurp(p));
  std::string line;
  std::vector<std::int64_t> out;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line).at("step").get<std::int64_t>());
  return out;
}
bool has_temp_entries(fs::path const& root) {
  for (auto const& e : fs::recursive_directory_iterator(root)) {
    auto const n = e.path().filename().string();
    if (n.find(".tmp") != std::string::npos) return true;
  }
  return false;
}

//! A reward role that returns scores of the wrong shape (Rows, Cols: added to the right shape).
template <int ExtraRows, int ExtraCols>
struct MisshapedReward {
  using role_tag = reward_tag;
  static constexpr std::string_view role_name = "reward";
  MisshapedReward(WorkerContext const&, roles::RoleSetup) {}
  DataProto compute_rm_score(DataProto const& data) {
    std::int64_t const b = data.size(), R = data.tensor("responses").dim(1);
    return DataProto::from_dict({{"token_level_scores", Tensor::zeros(DType::float32, Shape{b + ExtraRows, R + ExtraCols})}});
  }
  using methods = rlflow::methods<rlflow::method<&MisshapedReward::compute_rm_score, dispatch::DPComputeProto>>;
};
}  // namespace

TEST_CASE("a reward role returning misshaped scores is a shape_error and the batch is not consumed", "[hardening][trainer]") {
  auto dir = fresh_dir("misshaped");
  auto cfg = tiny_config(dir);
  {
    Trainer<GRPO, MisshapedReward<0, 3>> t(cfg, dataset(), task.charset(), quiet());
    auto const pos = t.data_position();
    REQUIRE_THROWS_AS(t.step(), shape_error);
    REQUIRE_THROWS_WITH(t.step(), Catch::Contains("token_level_scores") && Catch::Contains("32 rows x 4 response tokens"));
    REQUIRE(t.data_position() == pos);  // a failed step does not consume its batch
    REQUIRE(t.global_step() == 0);
  }
  {
    Trainer<GRPO, MisshapedReward<0, -3>> t(cfg, dataset(), task.charset(), quiet());
    REQUIRE_THROWS_AS(t.step(), shape_error);
  }
  {
    // one row too many per rank: the dispatch's row-count check names the method, rank and counts
    Trainer<GRPO, MisshapedReward<1, 0>> t(cfg, dataset(), task.charset(), quiet());
    auto const pos = t.data_position();
    REQUIRE_THROWS_AS(t.step(), worker_error);
    REQUIRE_THROWS_WITH(t.step(), Catch::Contains("compute_rm_score") && Catch::Contains("returned 17 rows for its 16-row input chunk"));
    REQUIRE(t.data_position() == pos);
  }
  fs::remove_all(dir);
}

TEST_CASE("resume: trainer_state.json fields are validated before anything is loaded", "[hardening][trainer][checkpoint]") {
  auto dir = fresh_dir("state");
  auto cfg = tiny_config(dir);
  cfg.trainer.total_training_steps = 2;
  cfg.trainer.save_freq = 2;
  {
    GRPOTrainer t(cfg, dataset(), task.charset(), quiet());
    t.fit();
  }
  auto const ckpt = dir / "global_step_2";
  auto const original = slurp(ckpt / "trainer_state.json");
  auto const original_manifest = slurp(ckpt / "MANIFEST.json");
  cfg.trainer.resume_mode = "auto";
  cfg.trainer.total_training_steps = 4;
  struct Case {
    const char* what;
    std::function<void(nlohmann::json&)> edit;
    const char* expect;
  };
  std::vector<Case> cases = {
      {"float step", [](auto& j) { j["global_step"] = 2.5; }, "'global_step' must be an integer"},
      {"huge float step", [](auto& j) { j["global_step"] = 1e300; }, "'global_step' must be an integer"},
      {"step differs from the manifest", [](auto& j) { j["global_step"] = 3; }, "MANIFEST.json records step 2"},
      {"negative index", [](auto& j) { j["data_position"]["index"] = -8; }, "'index' = -8 is out of range"},
      {"index past the dataset", [](auto& j) { j["data_position"]["index"] = 65; }, "'index' = 65 is out of range [0, 64]"},
      {"float epoch", [](auto& j) { j["data_position"]["epoch"] = 0.5; }, "'epoch' must be an integer"},
      {"no data position", [](auto& j) { j.erase("data_position"); }, "lacks the field 'data_position'"},
      {"kl_coef as a string", [](auto& j) { j["kl_coef"] = "0.1"; }, "'kl_coef' must be a finite number"},
      {"config not an object", [](auto& j) { j["config"] = 3; }, "'config' must be an object"},
      {"state is a list", [](auto& j) { j = nlohmann::json::array(); }, "expected a JSON object"},
  };
  for (auto const& c : cases) {
    INFO(c.what);
    put(ckpt / "trainer_state.json", original);
    put(ckpt / "MANIFEST.json", original_manifest);
    edit_state(ckpt, c.edit);
    REQUIRE_THROWS_AS((GRPOTrainer(cfg, dataset(), task.charset(), quiet())), format_error);
    REQUIRE_THROWS_WITH((GRPOTrainer(cfg, dataset(), task.charset(), quiet())),
                        Catch::Contains("trainer_state.json") && Catch::Contains(c.expect));
  }
  // the untouched checkpoint still resumes
  put(ckpt / "trainer_state.json", original);
  put(ckpt / "MANIFEST.json", original_manifest);
  GRPOTrainer t(cfg, dataset(), task.charset(), quiet());
  REQUIRE(t.global_step() == 2);
  fs::remove_all(dir);
}

TEST_CASE("resume with a different config: shape keys are errors, other differences one warning", "[hardening][trainer][checkpoint]") {
  auto dir = fresh_dir("resumecfg");
  auto cfg = tiny_config(dir);
  cfg.trainer.total_training_steps = 2;
  cfg.trainer.save_freq = 2;
  {
    GRPOTrainer t(cfg, dataset(), task.charset(), quiet());
    t.fit();
  }
  cfg.trainer.resume_mode = "auto";
  cfg.trainer.total_training_steps = 5;  // extending the run is expected: no warning
  cfg.trainer.save_freq = 1;
  {
    GRPOTrainer t(cfg, dataset(), task.charset(), quiet());
    REQUIRE(t.global_step() == 2);
    REQUIRE(t.startup_warnings().empty());
  }
  auto changed = cfg;
  changed.seed = 7;
  changed.actor_rollout_ref.actor.optim.lr = 1e-4;
  {
    GRPOTrainer t(changed, dataset(), task.charset(), quiet());
    REQUIRE(t.global_step() == 2);
    REQUIRE(t.startup_warnings().size() == 1);
    auto const& w = t.startup_warnings().front();
    REQUIRE_THAT(w, Catch::Contains("seed: checkpoint 1, now 7") && Catch::Contains("actor_rollout_ref.actor.optim.lr"));
    REQUIRE_THAT(w, !Catch::Contains("total_training_steps"));
  }
  auto shape = cfg;
  shape.actor_rollout_ref.model.n_layer = 3;
  shape.data.max_response_length = 5;
  REQUIRE_THROWS_AS((GRPOTrainer(shape, dataset(), task.charset(), quiet())), config_error);
  REQUIRE_THROWS_WITH((GRPOTrainer(shape, dataset(), task.charset(), quiet())),
                      Catch::Contains("actor_rollout_ref.model.n_layer: checkpoint 2, now 3") &&
                          Catch::Contains("data.max_response_length: checkpoint 4, now 5"));
  fs::remove_all(dir);
}

TEST_CASE("metrics.jsonl: a fresh run truncates it, a resumed run never repeats a step", "[hardening][trainer][metrics]") {
  auto dir = fresh_dir("metrics");
  auto cfg = tiny_config(dir);
  cfg.trainer.total_training_steps = 4;
  cfg.trainer.save_freq = 2;
  {
    GRPOTrainer t(cfg, dataset(), task.charset(), quiet());
    t.fit();
  }
  REQUIRE(logged_steps(dir / "metrics.jsonl") == std::vector<std::int64_t>{1, 2, 3, 4});
  // a resumed run from step 2 (the tracker moved back, as after a kill between steps 3 and 4)
  put(dir / checkpoint_tracker_file, "2\n");
  // damaged lines whose step is not an integer (1e300 read as an int64 would be undefined
  // behaviour) or beyond int64: dropped, never converted
  put(dir / "metrics.jsonl", slurp(dir / "metrics.jsonl") + "{\"step\": 1e300}\n{\"step\": -1e300}\n{\"step\": 1.5}\n"
                             "{\"step\": 18446744073709551615}\n[1]\n{\"step\": \"2\"}\n");
  cfg.trainer.resume_mode = "auto";
  {
    GRPOTrainer t(cfg, dataset(), task.charset(), quiet());
    REQUIRE(t.global_step() == 2);
    REQUIRE(logged_steps(dir / "metrics.jsonl") == std::vector<std::int64_t>{1, 2});
    t.fit();
  }
  REQUIRE(logged_steps(dir / "metrics.jsonl") == std::vector<std::int64_t>{1, 2, 3, 4});
  // a fresh run into the same folder: the old lines go at once, even before its first step
  cfg.trainer.resume_mode = "disable";
  {
    GRPOTrainer t(cfg, dataset(), task.charset(), quiet());
    REQUIRE(logged_steps(dir / "metrics.jsonl").empty());
    t.step();
  }
  REQUIRE(logged_steps(dir / "metrics.jsonl") == std::vector<std::int64_t>{1});
  fs::remove_all(dir);
}

TEST_CASE("a killed writer's temporary folders go when a Trainer starts, and old checkpoints are pruned", "[hardening][trainer][checkpoint]") {
  auto dir = fresh_dir("temps");
  fs::create_directories(dir);
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  int status = 0;
  ::waitpid(dead, &status, 0);
  fs::create_directories(dir / (".tmp_global_step_3_" + std::to_string(dead)));
  put(dir / (".tmp_global_step_3_" + std::to_string(dead)) / "actor.safetensors", "half");
  put(dir / ("metrics.jsonl.tmp." + std::to_string(dead)), "half");
  auto cfg = tiny_config(dir);
  cfg.trainer.total_training_steps = 4;
  cfg.trainer.save_freq = 1;
  cfg.trainer.max_actor_ckpt_to_keep = 2;
  GRPOTrainer t(cfg, dataset(), task.charset(), quiet());
  REQUIRE_FALSE(has_temp_entries(dir));
  t.fit();
  REQUIRE(checkpoint_steps(dir) == std::vector<std::int64_t>{3, 4});
  REQUIRE_FALSE(has_temp_entries(dir));
  fs::remove_all(dir);
}

TEST_CASE("config keys the Trainer does not honour are errors or warnings naming them", "[hardening][trainer][config]") {
  auto dir = fresh_dir("honour");
  auto const rejects = [&](std::string const& key_value, std::string const& key, std::string const& why) {
    INFO(key_value);
    auto cfg = tiny_config(dir);
    cfg.apply_overrides({key_value});
    REQUIRE_THROWS_AS((GRPOTrainer(cfg, dataset(), task.charset(), quiet())), config_error);
    REQUIRE_THROWS_WITH((GRPOTrainer(cfg, dataset(), task.charset(), quiet())), Catch::Contains(key) && Catch::Contains(why));
  };
  // keys only Trainer(cfg) reads (model and data from files) are errors on the alphabet constructor
  rejects("actor_rollout_ref.model.path=/models/qwen", "actor_rollout_ref.model.path", "use Trainer(cfg)");
  rejects("data.train_files=train.parquet", "data.train_files", "use the Trainer(cfg) constructor");
  rejects("trainer.test_freq=5", "trainer.test_freq", "no validation set");
  rejects("trainer.v1.trainer_mode=separate_async", "trainer.v1.trainer_mode=separate_async", "rlflow::SeparateAsync");
  rejects("actor_rollout_ref.model.vocab_size=1000", "actor_rollout_ref.model.vocab_size", "not honoured");
  {
    auto cfg = tiny_config(dir);
    cfg.trainer.max_actor_ckpt_to_keep = -1;
    REQUIRE_THROWS_WITH((GRPOTrainer(cfg, dataset(), task.charset(), quiet())), Catch::Contains("max_actor_ckpt_to_keep=-1"));
  }
  {
    auto cfg = tiny_config(dir);
    cfg.trainer.device = "cuda";
    cfg.data.val_files = "val.parquet";
    GRPOTrainer t(cfg, dataset(), task.charset(), quiet());
    REQUIRE(t.startup_warnings().size() == 2);
    REQUIRE_THAT(t.startup_warnings()[0], Catch::Contains("data.val_files") && Catch::Contains("Trainer(cfg)"));
    REQUIRE_THAT(t.startup_warnings()[1], Catch::Contains("trainer.device=cuda is ignored"));
    REQUIRE(t.config().trainer.device == "cpu");
  }
  // --help: each unhonoured key's entry carries the mark, an honoured key's does not
  auto const help = config_help();
  auto const entry = [&](std::string_view key) {
    auto const at = help.find("\n  " + std::string(key) + " = ");
    REQUIRE(at != std::string::npos);
    auto end = at + 1;
    while (true) {  // up to the next line that starts a key (two spaces, then a non-space)
      end = help.find('\n', end);
      if (end == std::string::npos || (help.compare(end, 3, "\n  ") == 0 && help[end + 3] != ' ')) break;
      ++end;
    }
    return help.substr(at, end == std::string::npos ? std::string::npos : end - at);
  };
  for (auto const& u : rlflow::detail::trainer_unhonoured_keys) {
    INFO(u.key);
    REQUIRE_THAT(entry(u.key), Catch::Contains("[not honoured]") && Catch::Contains(std::string(u.instead)));
  }
  REQUIRE_THAT(entry("data.train_batch_size"), !Catch::Contains("[not honoured]"));
  REQUIRE_THAT(entry("trainer.max_actor_ckpt_to_keep"), !Catch::Contains("[not honoured]"));
  fs::remove_all(dir);
}

TEST_CASE("sizes: int narrowing, overflowing products and memory bounds are config_errors before allocation", "[hardening][trainer][config]") {
  auto dir = fresh_dir("sizes");
  auto cfg = tiny_config(dir);
  auto const rejects = [&](TrainerConfig const& c, std::vector<std::string> const& parts) {
    try {
      GRPOTrainer t(c, dataset(), task.charset(), quiet());
      FAIL("accepted");
    } catch (config_error const& e) {
      for (auto const& p : parts) REQUIRE_THAT(e.what(), Catch::Contains(p));
    }
  };
  auto c = cfg;
  c.actor_rollout_ref.model.n_layer = (std::int64_t{1} << 32) + 1;  // would have trained 1 layer
  rejects(c, {"actor_rollout_ref.model.n_layer=4294967297", "exceeds 2147483647"});
  c = cfg;
  c.actor_rollout_ref.model.n_embd = std::int64_t{1} << 20;
  c.actor_rollout_ref.model.n_head = 4;
  rejects(c, {"model state", "n_embd=1048576", "bytes", "GiB", "lower actor_rollout_ref.model.n_layer"});
  c = cfg;
  c.data.max_response_length = std::int64_t{1} << 40;
  rejects(c, {"data.max_response_length=1099511627776", "exceeds"});
  c = cfg;
  c.data.max_response_length = std::int64_t{1} << 24;
  rejects(c, {"data.max_response_length", "bytes", "more than this machine's"});
  c = cfg;
  c.trainer.total_training_steps = null;
  c.trainer.total_epochs = std::int64_t{1} << 62;
  rejects(c, {"trainer.total_epochs=4611686018427387904", "overflow"});
  c = cfg;
  c.trainer.total_training_steps = std::int64_t{1} << 62;
  rejects(c, {"optimizer steps", "overflow"});
  // the bound itself: the same config passes with enough memory and fails with too little
  REQUIRE_NOTHROW(check_size_limits(cfg, 16, 64, false, std::uint64_t{1} << 34));
  REQUIRE_THROWS_WITH(check_size_limits(cfg, 16, 64, false, 1000), Catch::Contains("more than this machine's 1000 bytes"));
  // with the engines on a GPU (Backend<cuda::tag>) host memory bounds the batch and the critic's
  // state alone: a 13B-parameter model passes the host check (the device check bounds it) ...
  c = cfg;
  c.actor_rollout_ref.model.n_layer = 64;
  c.actor_rollout_ref.model.n_head = 32;
  c.actor_rollout_ref.model.n_embd = 4096;
  std::uint64_t const host = std::uint64_t{64} << 30;
  REQUIRE_THROWS_WITH(check_size_limits(c, 16, 64, false, host), Catch::Contains("the model state") && Catch::Contains("x6 copies"));
  REQUIRE_NOTHROW(check_size_limits(c, 16, 64, false, host, true));
  // ... while its critic, on the CPU engine, still counts (4 copies: weights, gradients, moments)
  REQUIRE_THROWS_WITH(check_size_limits(c, 16, 64, true, host, true), Catch::Contains("the model state") && Catch::Contains("x4 copies"));
  // and the batch is host memory either way
  c = cfg;
  c.data.max_response_length = std::int64_t{1} << 24;
  REQUIRE_THROWS_WITH(check_size_limits(c, 16, 64, false, std::uint64_t{1} << 30, true), Catch::Contains("the step's batch"));
  fs::remove_all(dir);
}

TEST_CASE("kill -9 at random moments, resume: metrics.jsonl and weights equal an uninterrupted run", "[hardening][trainer][kill]") {
  // Six steps of PPO (actor + critic), a checkpoint every two. Each killed run is SIGKILLed at a
  // random moment of an uninterrupted run's duration (during a step, a checkpoint write or the
  // metrics rewrite), then resumed to the end in this process.
  auto cfg = tiny_config(fresh_dir("unused"));
  cfg.trainer.total_training_steps = 6;
  cfg.trainer.save_freq = 2;
  cfg.trainer.resume_mode = "auto";
  auto const straight_dir = fresh_dir("kill_straight");
  std::vector<float> ref_actor, ref_critic;
  double duration = 0;
  {
    auto scfg = cfg;
    scfg.trainer.default_local_dir = straight_dir.string().c_str();
    auto const t0 = std::chrono::steady_clock::now();
    PPOTrainer t(scfg, dataset(), task.charset(), quiet());
    t.fit();
    duration = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ref_actor = t.actor_weights();
    ref_critic = t.critic_weights();
  }
  std::string const ref_metrics = metrics_without_timing(straight_dir / "metrics.jsonl");
  REQUIRE(logged_steps(straight_dir / "metrics.jsonl").size() == 6);
  std::mt19937_64 rng(20261130);
  std::uniform_real_distribution<double> when(0.02, 1.0);
  int killed = 0, attempts = 0;
  while (killed < 5 && attempts < 40) {
    ++attempts;
    auto const dir = fresh_dir("kill_" + std::to_string(attempts));
    auto kcfg = cfg;
    kcfg.trainer.default_local_dir = dir.string().c_str();
    double const at = when(rng) * duration;
    int exit_status = 0;
    bool const was_killed = run_killed_after(
        at, [&] { PPOTrainer(kcfg, dataset(), task.charset(), quiet()).fit(); }, exit_status);
    if (was_killed) ++killed;
    else REQUIRE(exit_status == 0);  // finished before the kill: still a valid comparison
    INFO("attempt " << attempts << ": killed at " << at << " s of " << duration << " s, last checkpoint "
                    << latest_checkpoint_step(dir).value_or(-1));
    PPOTrainer t(kcfg, dataset(), task.charset(), quiet());
    t.fit();
    REQUIRE(metrics_without_timing(dir / "metrics.jsonl") == ref_metrics);
    REQUIRE(t.actor_weights() == ref_actor);
    REQUIRE(t.critic_weights() == ref_critic);
    REQUIRE_FALSE(has_temp_entries(dir));
    fs::remove_all(dir);
  }
  REQUIRE(killed >= 5);
  fs::remove_all(straight_dir);
}
