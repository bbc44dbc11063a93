// Tests for rlflow/trainer/trainer.hpp: the step runs for every algorithm, bit-identical resume after a
// killed run, determinism, start-up validation, bad rewards and throwing workers, colocation's
// sleep/wake. Learning itself is tested in test_trainer_learning.cpp.
#include <catch2/catch.hpp>

#include <rlflow/trainer/trainer.hpp>

#include <atomic>
#include <cmath>
#include <csignal>
#include <fstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "trainer/trainer_fixtures.hpp"

namespace test_trainer {

using namespace rlflow;
namespace fs = std::filesystem;

namespace {
using namespace rlflow::testing;

using rlflow::testing::task;
PromptDataset dataset() { return task.make_dataset(256, 3); }


std::vector<Metrics> read_jsonl(fs::path const& p) {
  std::vector<Metrics> out;
  std::ifstream in(p);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    Metrics m;
    for (auto const& [k, v] : j.items())
      if (k != "step") m[k] = v.is_null() ? std::nan("") : v.get<double>();
    out.push_back(deterministic_part(m));
  }
  return out;
}

void require_same_metrics(Metrics const& a, Metrics const& b) {
  REQUIRE(a.size() == b.size());
  for (auto const& [k, v] : a) {
    INFO("metric " << k);
    REQUIRE(b.count(k) == 1);
    if (std::isnan(v)) REQUIRE(std::isnan(b.at(k)));
    else REQUIRE(v == b.at(k));
  }
}

}  // namespace

TEST_CASE("Trainer sorts its options and describes itself", "[trainer]") {
  STATIC_REQUIRE(std::is_same_v<GRPOTrainer::algorithm, GRPO>);
  STATIC_REQUIRE(std::is_same_v<PPOTrainer::placement, Colocate<3>>);
  STATIC_REQUIRE(std::is_same_v<PPOTrainer::critic_role, roles::ValueCritic>);
  STATIC_REQUIRE(std::is_same_v<GRPOTrainer::parallel, TP<1>>);
  STATIC_REQUIRE(!GRPOTrainer::has_critic);
  STATIC_REQUIRE(PPOTrainer::has_critic);
  REQUIRE(describe<PPOTrainer>() == "Trainer<PPO, Colocate<3>, TP<1>> backend=cpu roles=actor_rollout_ref,critic,reward");
}

TEST_CASE("GRPO step emits verl's metrics and the rollout sleeps during training", "[trainer]") {
  auto dir = fresh_dir("metrics");
  auto cfg = tiny_config(dir);
  cfg.trainer.total_training_steps = 2;
  GRPOTrainer t(cfg, dataset(), task.charset(), quiet());
  Metrics m = t.step();
  for (auto key : {"timing_s/gen", "timing_s/reward", "timing_s/old_log_prob", "timing_s/adv", "timing_s/update_actor",
                   "timing_s/update_weights", "timing_s/step", "actor/pg_loss", "actor/pg_clipfrac", "actor/ppo_kl",
                   "actor/entropy", "actor/grad_norm", "actor/lr", "critic/score/mean", "critic/score/max",
                   "critic/score/min", "critic/rewards/mean", "critic/advantages/mean", "critic/returns/mean",
                   "response_length/mean", "response_length/max", "response_length/clip_ratio", "perf/throughput",
                   "training/global_step"}) {
    INFO(key);
    REQUIRE(m.count(key) == 1);
    REQUIRE(std::isfinite(m.at(key)));
  }
  REQUIRE(m.count("timing_s/ref") == 0);  // no KL: no reference pass
  REQUIRE(m["actor/lr"] == Approx(3e-3));
  REQUIRE(m["critic/score/mean"] >= 0.0);
  REQUIRE(m["critic/score/mean"] <= 1.0);
  REQUIRE(m["response_length/max"] <= 4.0);
  REQUIRE(t.global_step() == 1);
  // free_cache_engine: the rollout's cache was released after generation and is re-acquired lazily.
  auto mem = t.actor_rollout_wg().call<&roles::ActorRolloutRef::rollout_memory_bytes>();
  for (auto b : mem) REQUIRE(b == 0);
  cfg.actor_rollout_ref.rollout.free_cache_engine = false;
  cfg.trainer.default_local_dir = (dir / "b").string().c_str();
  GRPOTrainer t2(cfg, dataset(), task.charset(), quiet());
  t2.step();
  for (auto b : t2.actor_rollout_wg().call<&roles::ActorRolloutRef::rollout_memory_bytes>()) REQUIRE(b > 0);
  fs::remove_all(dir);
}

TEST_CASE("every algorithm runs with its roles and KL options", "[trainer]") {
  auto dir = fresh_dir("algos");
  auto cfg = tiny_config(dir);
  cfg.trainer.total_training_steps = 2;
  SECTION("RLOO") {
    Trainer<RLOO, roles::RuleReward<Score>> t(cfg, dataset(), task.charset(), quiet());
    auto m = t.fit();
    REQUIRE(std::isfinite(m.at("actor/pg_loss")));
  }
  SECTION("REINFORCE++ with KL in the reward (adaptive controller)") {
    cfg.algorithm.use_kl_in_reward = true;
    cfg.algorithm.kl_ctrl.type = "adaptive";
    Trainer<ReinforcePlusPlus, roles::RuleReward<Score>> t(cfg, dataset(), task.charset(), quiet());
    auto m = t.fit();
    REQUIRE(m.count("timing_s/ref") == 1);
    REQUIRE(m.count("actor/reward_kl_penalty") == 1);
    REQUIRE(m.at("actor/reward_kl_penalty_coeff") > 0.0);
  }
  SECTION("ReMax") {
    Trainer<ReMax, roles::RuleReward<Score>> t(cfg, dataset(), task.charset(), quiet());
    auto m = t.fit();
    REQUIRE(m.count("timing_s/gen_max") == 1);
    REQUIRE(std::isfinite(m.at("critic/advantages/mean")));
  }
  SECTION("GRPO with the KL loss and an entropy bonus") {
    cfg.actor_rollout_ref.actor.use_kl_loss = true;
    cfg.actor_rollout_ref.actor.kl_loss_type = "low_var_kl";
    cfg.actor_rollout_ref.actor.entropy_coeff = 0.01;
    GRPOTrainer t(cfg, dataset(), task.charset(), quiet());
    auto m = t.fit();
    REQUIRE(m.count("actor/kl_loss") == 1);
    REQUIRE(m.count("actor/entropy_loss") == 1);
    REQUIRE(m.at("actor/kl_coef") == Approx(0.001));
  }
  SECTION("PPO with a critic, warm-up first") {
    cfg.trainer.critic_warmup = 1;
    PPOTrainer t(cfg, dataset(), task.charset(), quiet());
    auto w0 = t.actor_weights();
    auto m1 = t.step();
    REQUIRE(m1.count("timing_s/update_actor") == 0);  // warm-up step: critic only
    REQUIRE(m1.count("critic/vf_loss") == 1);
    REQUIRE(t.actor_weights() == w0);
    auto m2 = t.step();
    REQUIRE(m2.count("timing_s/update_actor") == 1);
    REQUIRE(m2.count("critic/vf_explained_var") == 1);
    REQUIRE(t.actor_weights() != w0);
  }
  fs::remove_all(dir);
}

TEST_CASE("the same config and seed give the same metrics and weights", "[trainer]") {
  auto dir = fresh_dir("determinism");
  auto cfg = tiny_config(dir);
  auto run = [&] {
    GRPOTrainer t(cfg, dataset(), task.charset(), quiet());
    std::vector<Metrics> ms;
    for (int i = 0; i < 3; ++i) ms.push_back(deterministic_part(t.step()));
    return std::pair(ms, t.actor_weights());
  };
  auto [m1, w1] = run();
  auto [m2, w2] = run();
  for (std::size_t i = 0; i < m1.size(); ++i) require_same_metrics(m1[i], m2[i]);
  REQUIRE(w1 == w2);
  fs::remove_all(dir);
}

TEST_CASE("the paged rollout engine trains to the static engine's weights under any schedule", "[trainer][paged]") {
  // The static KV-cache engine (TrainerOptions::static_rollout) is the reference: the same seeds
  // give the same tokens and log-probs (sampled, and greedy for ReMax's baseline), so three steps
  // end at the same weights, whatever the paged engine's prefix caching, sequence limit, chunk
  // size or pool size (a pool of two sequences preempts).
  auto dir = fresh_dir("paged_vs_static");
  auto check = [&]<class Tr>(std::type_identity<Tr>) {
    auto run = [&](TrainerConfig cfg, bool static_rollout) {
      auto o = quiet();
      o.static_rollout = static_rollout;
      Tr t(cfg, dataset(), task.charset(), o);
      std::vector<Metrics> ms;
      for (int i = 0; i < 3; ++i) ms.push_back(t.step());
      return std::pair(ms, t.actor_weights());
    };
    auto const base = tiny_config(dir);
    auto const [ms_ref, w_ref] = run(base, true);
    REQUIRE(w_ref != Tr(base, dataset(), task.charset(), quiet()).actor_weights());  // the steps train
    for (auto const& m : ms_ref) REQUIRE(m.count("perf/rollout/prefix_cache_hit_rate") == 0);  // the static engine has none
    std::int64_t const positions = base.data.max_prompt_length + base.data.max_response_length;
    std::int64_t const block_bytes = base.actor_rollout_ref.model.n_layer * 2 * base.actor_rollout_ref.model.n_embd * 4 * 4;
    for (int variant = 0; variant < 5; ++variant) {
      INFO("variant " << variant);
      auto c = base;
      auto& r = c.actor_rollout_ref.rollout;
      if (variant == 1) r.enable_prefix_caching = false;
      if (variant == 2) r.max_num_seqs = 3;  // fewer than a group's n = 4: groups split, continuous batching
      if (variant == 3) {
        r.max_num_batched_tokens = 7;  // prefills in chunks
        r.block_size = 4;
      }
      if (variant == 4) {
        r.block_size = 4;
        r.kv_cache_bytes = (2 * ((positions + 3) / 4) + 1) * block_bytes;  // two sequences' blocks
      }
      auto const [ms, w] = run(c, false);
      REQUIRE(w == w_ref);
      double preempted = 0;
      for (std::size_t i = 0; i < ms.size(); ++i) {
        Metrics const& m = ms[i];
        REQUIRE(m.count("perf/rollout/prefix_cache_hit_rate") == 1);
        // every generated token of the step's batch counted once
        double const rows = double(base.data.train_batch_size) * double(base.actor_rollout_ref.rollout.n);
        REQUIRE(m.at("perf/rollout/generation_tokens") == Approx(m.at("response_length/mean") * rows).margin(0.5));
        // one prefill per group (unless a group is split or a sample recomputed after preemption)
        if (variant != 2 && variant != 4)
          REQUIRE(m.at("perf/rollout/prompt_tokens") <= double(base.data.train_batch_size * base.data.max_prompt_length));
        REQUIRE(m.at("perf/rollout/prefix_cache_hits") <= m.at("perf/rollout/prefix_cache_queries"));
        preempted += m.at("perf/rollout/num_preemptions");
        require_same_metrics(deterministic_part(m), deterministic_part(ms_ref[i]));
      }
      if (variant == 4) REQUIRE(preempted > 0);
      else REQUIRE(preempted == 0);
    }
  };
  SECTION("GRPO, sampled") { check(std::type_identity<GRPOTrainer>{}); }
  SECTION("ReMax, whose baseline is a greedy rollout") { check(std::type_identity<Trainer<ReMax, roles::RuleReward<Score>>>{}); }
  fs::remove_all(dir);
}

TEST_CASE("a killed run resumes bit-identically from its last checkpoint", "[trainer][checkpoint]") {
  // A child process trains PPO (actor + critic) with save_freq 3 and is SIGKILLed at a random
  // moment once a checkpoint exists (possibly in the middle of writing the next one). The parent
  // resumes from the last complete checkpoint S and runs 3 more steps. A straight run of S + 3
  // steps must give the same weights and every non-timing metric.
  auto straight_dir = fresh_dir("straight");
  auto killed_dir = fresh_dir("killed");
  auto cfg = tiny_config(killed_dir);
  cfg.trainer.save_freq = 3;
  cfg.trainer.resume_mode = "auto";
  cfg.trainer.total_training_steps = 100000;  // would run for long; it is killed first
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    try {
      PPOTrainer t(cfg, dataset(), task.charset(), quiet());
      t.fit();
    } catch (...) {
    }
    ::_exit(0);
  }
  bool saved = false;
  for (int i = 0; i < 30000 && !saved; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    saved = latest_checkpoint_step(killed_dir).has_value();
  }
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(saved);
  REQUIRE(WIFSIGNALED(status));  // killed, not finished
  std::int64_t const S = *latest_checkpoint_step(killed_dir);
  REQUIRE(S % 3 == 0);
  std::vector<Metrics> before = read_jsonl(killed_dir / "metrics.jsonl");
  REQUIRE(static_cast<std::int64_t>(before.size()) >= S);

  cfg.trainer.total_training_steps = S + 3;
  PPOTrainer resumed(cfg, dataset(), task.charset(), quiet());
  REQUIRE(resumed.global_step() == S);
  REQUIRE(resumed.data_position().index > 0);
  std::vector<Metrics> after;
  for (int i = 0; i < 3; ++i) after.push_back(deterministic_part(resumed.step()));

  auto scfg = cfg;
  scfg.trainer.default_local_dir = straight_dir.string().c_str();
  scfg.trainer.resume_mode = "disable";
  PPOTrainer straight(scfg, dataset(), task.charset(), quiet());
  std::vector<Metrics> ref;
  for (std::int64_t i = 0; i < S + 3; ++i) ref.push_back(deterministic_part(straight.step()));
  for (std::int64_t i = 0; i < S; ++i) require_same_metrics(ref[static_cast<std::size_t>(i)], before[static_cast<std::size_t>(i)]);
  for (std::size_t i = 0; i < 3; ++i) require_same_metrics(ref[static_cast<std::size_t>(S) + i], after[i]);
  REQUIRE(resumed.actor_weights() == straight.actor_weights());
  REQUIRE(resumed.critic_weights() == straight.critic_weights());
  fs::remove_all(straight_dir);
  fs::remove_all(killed_dir);
}

TEST_CASE("a corrupt checkpoint is reported and never loaded", "[trainer][checkpoint]") {
  auto dir = fresh_dir("corrupt");
  auto cfg = tiny_config(dir);
  cfg.trainer.total_training_steps = 2;
  cfg.trainer.save_freq = 1;
  {
    GRPOTrainer t(cfg, dataset(), task.charset(), quiet());
    t.fit();
  }
  REQUIRE(latest_checkpoint_step(dir) == 2);
  auto f = dir / "global_step_2" / "actor.safetensors";
  auto bytes = rlflow::detail::read_all(f);
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x55);
  rlflow::detail::write_all(f, bytes.data(), bytes.size());
  cfg.trainer.resume_mode = "auto";
  REQUIRE_THROWS_WITH((GRPOTrainer(cfg, dataset(), task.charset(), quiet())), Catch::Contains("actor.safetensors"));
  fs::remove_all(dir);
}

namespace {
std::atomic<int> score_calls{0};
//! Returns NaN after 100 calls (during the third step of tiny_config).
struct NaNAfter100 {
  static double score(std::string_view r, std::string_view t) {
    return ++score_calls > 100 ? std::nan("") : examples::ReverseScore::score(r, t);
  }
};
//! Throws after 100 calls.
struct ThrowAfter100 {
  static double score(std::string_view r, std::string_view t) {
    if (++score_calls > 100) throw std::runtime_error("reward service unavailable");
    return examples::ReverseScore::score(r, t);
  }
};
}  // namespace

TEST_CASE("a NaN reward fails the step naming the sample and the last checkpoint stays intact", "[trainer]") {
  auto dir = fresh_dir("nan");
  auto cfg = tiny_config(dir);
  cfg.trainer.save_freq = 1;
  score_calls = 0;
  Trainer<GRPO, roles::RuleReward<NaNAfter100>> t(cfg, dataset(), task.charset(), quiet());
  t.step();  // 32 rows per step: calls 1..32
  t.step();
  REQUIRE(score_calls == 64);
  t.step();  // calls 65..96; the 4th step reaches call 101
  REQUIRE_THROWS_WITH(t.step(), Catch::Contains("reward") && Catch::Contains("compute_rm_score") &&
                                    Catch::Contains("uid") && Catch::Contains("finite"));
  REQUIRE(latest_checkpoint_step(dir).has_value());
  REQUIRE_NOTHROW(verify_checkpoint(dir / ("global_step_" + std::to_string(*latest_checkpoint_step(dir)))));
  fs::remove_all(dir);
}

TEST_CASE("a throwing worker fails the step with role, method and rank", "[trainer]") {
  auto dir = fresh_dir("throw");
  auto cfg = tiny_config(dir);
  score_calls = 0;
  Trainer<GRPO, roles::RuleReward<ThrowAfter100>> t(cfg, dataset(), task.charset(), quiet());
  t.step();
  t.step();
  t.step();
  try {
    t.step();
    FAIL("no throw");
  } catch (worker_error const& e) {
    std::string w = e.what();
    REQUIRE(w.find("reward::compute_rm_score") != std::string::npos);
    REQUIRE(w.find("rank") != std::string::npos);
    REQUIRE(w.find("reward service unavailable") != std::string::npos);
  }
  fs::remove_all(dir);
}

TEST_CASE("start-up validation rejects bad configurations before any work", "[trainer][config]") {
  auto dir = fresh_dir("validation");
  auto cfg = tiny_config(dir);
  SECTION("conflicting estimator") {
    cfg.algorithm.adv_estimator = "rloo";
    REQUIRE_THROWS_WITH((GRPOTrainer(cfg, dataset(), task.charset(), quiet())),
                        Catch::Contains("algorithm.adv_estimator=rloo"));
  }
  SECTION("batch sizes that do not divide") {
    cfg.data.train_batch_size = 6;
    REQUIRE_THROWS_AS((GRPOTrainer(cfg, dataset(), task.charset(), quiet())), config_error);
  }
  SECTION("prompts over max_prompt_length: error, or truncated and counted") {
    cfg.data.max_prompt_length = 4;  // 'abc=' + BOS is 5 tokens
    REQUIRE_THROWS_WITH((GRPOTrainer(cfg, dataset(), task.charset(), quiet())),
                        Catch::Contains("data.max_prompt_length=4") && Catch::Contains("data.truncation"));
    REQUIRE_FALSE(fs::exists(dir / "metrics.jsonl"));
    cfg.data.truncation = "left";
    cfg.trainer.default_local_dir = (dir / "truncated").string().c_str();
    GRPOTrainer t(cfg, dataset(), task.charset(), quiet());
    auto m = t.step();
    REQUIRE(m.at("data/truncated_prompts") > 0);
    REQUIRE(m.at("prompt_length/max") == 4.0);
  }
  SECTION("a dataset smaller than one batch") {
    REQUIRE_THROWS_AS((GRPOTrainer(cfg, task.make_dataset(4, 1), task.charset(), quiet())), config_error);
  }
  SECTION("the rollout engine's keys") {
    auto& r = cfg.actor_rollout_ref.rollout;
    auto refused = [&](char const* key) {
      REQUIRE_THROWS_WITH((GRPOTrainer(cfg, dataset(), task.charset(), quiet())),
                          Catch::Contains(std::string("actor_rollout_ref.rollout.") + key + "=") && Catch::Contains("is invalid"));
    };
    auto const base = r;
    r.block_size = 0;
    refused("block_size");
    r = base;
    r.max_num_seqs = 0;
    refused("max_num_seqs");
    r = base;
    r.max_num_batched_tokens = -3;
    refused("max_num_batched_tokens");
    r = base;
    r.kv_cache_bytes = -1;
    refused("kv_cache_bytes");
    r = base;
    r.gpu_memory_utilization = 1.5;
    refused("gpu_memory_utilization");
    r.gpu_memory_utilization = 0.0;
    refused("gpu_memory_utilization");
  }
  REQUIRE_FALSE(fs::exists(dir / "metrics.jsonl"));
  fs::remove_all(dir);
}

}  // namespace test_trainer
