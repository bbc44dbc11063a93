// Agent rollouts in the Trainer: a task loop that calls a sleeping tool (conversations in flight on
// the paged engine, tools on the agent.num_workers pool) gives the same metrics and weights with
// any tool pool size, max_num_seqs and block size, and on separate_async with standalone rollout
// pools of 1 and 2 workers; with 1 and 2 hybrid workers the first step's rollout is the same bit
// for bit (later steps differ by the update's data-parallel rounding). A run saved at step k and
// resumed (sync, colocate_async and separate_async, with batches generated ahead) ends bit for bit
// at the uninterrupted run's weights and metrics.
#include <catch2/catch.hpp>

#include <rlflow/trainer/trainer.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "trainer/trainer_fixtures.hpp"

namespace test_agent_trainer {

using namespace rlflow;
namespace fs = std::filesystem;

namespace {
using namespace rlflow::testing;
using agent::json;

using rlflow::testing::task;
PromptDataset dataset() { return task.make_dataset(256, 3); }

std::atomic<int> tool_calls{0};

//! 'sleepy': sleeps up to a millisecond (its own RNG: the timing varies run to run), answers x b's.
agent::Tool sleepy_tool() {
  agent::Tool t;
  t.schema.name = "sleepy";
  t.schema.description = "sleeps, then answers x letters b";
  t.fn = [](json const& args, json const&) {
    thread_local std::mt19937 rng(std::random_device{}());
    std::this_thread::sleep_for(std::chrono::microseconds(std::uniform_int_distribution<int>(0, 1000)(rng)));
    ++tool_calls;
    agent::ToolResult r;
    r.text = std::string(std::size_t(std::clamp(args.value("x", 1), 1, 3)), 'b');
    return r;
  };
  return t;
}

//! The task's loop: turns of at most two sampled tokens; a turn with a 'd' calls 'sleepy' (x: the
//! turn's 'a' count + 1) on the tool pool, whose answer joins the response with mask 0 (at most
//! three calls); ends at EOS or the response budget. verl: a ToolAgentLoop with a task parser.
struct CallLoop {
  agent::AgentLoopOutput run(agent::AgentContext const& ctx, agent::AgentRow const& row, engine::SamplingParams const& sp0) const {
    agent::AgentLoopOutput out;
    out.prompt_ids = ctx.chat.encode(ctx.chat.render(row.messages, nullptr, true));
    std::vector<std::int32_t> ids = out.prompt_ids;
    std::size_t const R = std::size_t(ctx.config.response_length);
    int assistant = 0, user = 0;
    out.metrics["agent/tool_calls"] = 0;
    out.metrics["agent/tool_errors"] = 0;
    while (out.response_ids.size() < R) {
      engine::SamplingParams sp = sp0;
      sp.max_new_tokens = int(std::min<std::size_t>(2, R - out.response_ids.size()));
      agent::GenerateOutput g = ctx.generate(row.request_id, ids, sp);
      if (g.token_ids.empty()) break;
      g.logprobs.resize(g.token_ids.size(), 0.0f);
      ++assistant;
      ids.insert(ids.end(), g.token_ids.begin(), g.token_ids.end());
      out.response_ids.insert(out.response_ids.end(), g.token_ids.begin(), g.token_ids.end());
      out.response_mask.insert(out.response_mask.end(), g.token_ids.size(), 1);
      out.response_logprobs.insert(out.response_logprobs.end(), g.logprobs.begin(), g.logprobs.end());
      if (g.token_ids.back() == sp0.eos_id) break;
      std::string const text = ctx.chat.decode(g.token_ids);
      if (text.find('d') == std::string::npos || user >= 3) continue;
      agent::ToolCall call;
      call.name = "sleepy";
      call.arguments = {{"x", 1 + int(std::count(text.begin(), text.end(), 'a'))}};
      agent::ToolResult r;
      std::vector<std::function<void()>> job{[&] { r = ctx.tools->call(call, nullptr); }};
      if (ctx.tool_pool) ctx.tool_pool->run_all(job);
      else job[0]();
      out.metrics["agent/tool_calls"] += 1;
      std::vector<std::int32_t> const add = ctx.chat.encode(r.text);
      if (out.response_ids.size() + add.size() >= R) break;
      ids.insert(ids.end(), add.begin(), add.end());
      out.response_ids.insert(out.response_ids.end(), add.begin(), add.end());
      out.response_mask.insert(out.response_mask.end(), add.size(), 0);
      out.response_logprobs.insert(out.response_logprobs.end(), add.size(), 0.0f);
      ++user;
    }
    out.num_turns = assistant + user + 1;
    return out;
  }
};

//! 'c' on trainer_mode 'mode': sync, colocate_async or separate_async (a standalone pool of
//! 'rollout_workers'), one batch generated ahead, one actor update per step.
TrainerConfig on_mode(TrainerConfig c, std::string const& mode, std::int64_t rollout_workers = 1) {
  c.trainer.v1.trainer_mode = mode.c_str();
  if (mode == "sync") return c;
  c.actor_rollout_ref.actor.ppo_mini_batch_size = 8;  // one update per step (parameter_sync_step 1)
  c.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 16;
  if (mode == "colocate_async") {
    c.trainer.v1.colocate_async.num_warmup_batches = 1;
    return c;
  }
  c.trainer.v1.separate_async.parameter_sync_step = 1;
  c.trainer.v1.separate_async.num_warmup_batches = 1;
  c.actor_rollout_ref.rollout.nnodes = 1;
  c.actor_rollout_ref.rollout.n_gpus_per_node = rollout_workers;
  c.actor_rollout_ref.rollout.checkpoint_engine.backend = "nccl";
  return c;
}

void install_task_loop() {
  auto& setup = roles::agent_rollout_setup();
  if (!setup.loops.contains("call_loop")) {
    setup.loops.add<CallLoop>("call_loop");
    auto tools = std::make_shared<agent::ToolSet>();
    tools->add(sleepy_tool());
    setup.tools = tools;
  }
}

TrainerConfig agent_trainer_config(fs::path const& dir) {
  TrainerConfig c = tiny_config(dir);
  c.data.max_response_length = 12;
  c.actor_rollout_ref.rollout.multi_turn.enable = true;
  c.actor_rollout_ref.rollout.agent.default_agent_loop = "call_loop";
  c.actor_rollout_ref.rollout.agent.num_workers = 2;
  return c;
}

//! Every metric but the async bookkeeping (timings, buffer depth) is equal; 'skip_update': also
//! the actor update's own (actor/*: per-rank gradient norms and losses over a rank's micro-batches).
void require_same_metrics(Metrics const& a, Metrics const& b, bool skip_update = false) {
  REQUIRE(a.size() == b.size());
  for (auto const& [k, v] : a) {
    if (k.starts_with("colocate_async/") || k.starts_with("separate_async/") || k.starts_with("training/off_policy/") || (skip_update && k.starts_with("actor/"))) continue;
    INFO("metric " << k);
    REQUIRE(b.count(k) == 1);
    if (std::isnan(v)) CHECK(std::isnan(b.at(k)));
    else CHECK(v == b.at(k));
  }
}

struct Run {
  std::vector<Metrics> metrics;
  std::vector<float> weights;
};

using SepTrainer = Trainer<GRPO, SeparateAsync, roles::RuleReward<Score>>;

//! 'steps' steps of a GRPO trainer (SeparateAsync's on separate_async); in an async mode with
//! lockstep hooks of bound 'k' (a schedule that does not depend on timing).
template <class T>
Run run_steps_on(TrainerConfig const& cfg, int steps, std::int64_t k) {
  auto holder = std::make_shared<T*>(nullptr);
  TrainerOptions o = quiet();
  if (k >= 0) o.async_hooks = lockstep_hooks(holder, k);
  T t(cfg, dataset(), task.charset(), o);
  *holder = &t;
  Run r;
  for (int i = 0; i < steps; ++i) r.metrics.push_back(deterministic_part(t.step()));
  r.weights = t.actor_weights();
  return r;
}
Run run_steps(TrainerConfig const& cfg, int steps, std::int64_t k = -1) {
  return cfg.is_separate_async() ? run_steps_on<SepTrainer>(cfg, steps, k) : run_steps_on<GRPOTrainer>(cfg, steps, k);
}

}  // namespace

TEST_CASE("agent rollouts: any tool pool and engine limits give the same run, 1 and 2 workers the same rollout",
          "[agent][trainer]") {
  install_task_loop();
  auto const dir = fresh_dir("agent_workers");
  TrainerConfig const base = agent_trainer_config(dir);
  int const calls0 = tool_calls.load();
  Run const two = run_steps(base, 3);
  CHECK(tool_calls.load() > calls0);  // the loop called the tool
  REQUIRE(two.metrics.back().count("num_turns/mean") == 1);
  CHECK(two.metrics.back().at("num_turns/max") > 2);
  CHECK(two.weights != GRPOTrainer(base, dataset(), task.charset(), quiet()).actor_weights());  // the steps train
  SECTION("one tool thread, a small max_num_seqs and block size") {
    TrainerConfig c = base;
    c.actor_rollout_ref.rollout.agent.num_workers = 1;
    c.actor_rollout_ref.rollout.max_num_seqs = 3;
    c.actor_rollout_ref.rollout.block_size = 4;
    Run const r = run_steps(c, 3);
    for (std::size_t i = 0; i < r.metrics.size(); ++i) require_same_metrics(r.metrics[i], two.metrics[i]);
    CHECK(r.weights == two.weights);
  }
  SECTION("one worker: the first step's rollout, rewards and advantages are the two workers' bit for bit") {
    // the training update itself rounds differently with 1 and 2 data-parallel ranks (the
    // gradient all-reduce), so only the first step, whose rollout both runs draw from the same
    // weights, compares; the separate_async case below keeps the trainer and changes the rollout
    TrainerConfig c = base;
    c.trainer.n_gpus_per_node = 1;
    Run const one = run_steps(c, 1);
    require_same_metrics(one.metrics[0], two.metrics[0], true);
  }
  fs::remove_all(dir);
}

TEST_CASE("agent rollouts on separate_async: rollout pools of 1 and 2 workers give the same run bit for bit",
          "[agent][trainer][async]") {
  install_task_loop();
  auto run = [&](std::int64_t rollout_workers) {
    auto const dir = fresh_dir("agent_separate_" + std::to_string(rollout_workers));
    TrainerConfig const c = on_mode(agent_trainer_config(dir), "separate_async", rollout_workers);
    Run r = run_steps(c, 3, 1);
    fs::remove_all(dir);
    return r;
  };
  Run const one = run(1), two = run(2);
  for (std::size_t i = 0; i < one.metrics.size(); ++i) {
    INFO("step " << i + 1);
    require_same_metrics(one.metrics[i], two.metrics[i]);
  }
  CHECK(one.weights == two.weights);
  CHECK(one.metrics.back().at("num_turns/max") > 2);  // agent rollouts ran on the standalone pool
}

TEST_CASE("agent rollouts resume exactly: saved at step 2, resumed, equal to the uninterrupted run, in every mode",
          "[agent][trainer][resume]") {
  install_task_loop();
  for (char const* mode : {"sync", "colocate_async", "separate_async"}) {
    INFO("trainer_mode " << mode);
    auto const straight_dir = fresh_dir(std::string("agent_straight_") + mode);
    auto const cut_dir = fresh_dir(std::string("agent_cut_") + mode);
    TrainerConfig cfg = on_mode(agent_trainer_config(straight_dir), mode);
    cfg.trainer.total_training_steps = 4;
    cfg.trainer.save_freq = 2;
    cfg.trainer.resume_mode = "disable";
    std::int64_t const k = std::string(mode) == "sync" ? -1 : 1;
    Run const straight = run_steps(cfg, 4, k);
    CHECK(straight.metrics.back().at("num_turns/max") > 2);  // the agent loop ran

    TrainerConfig cut = cfg;
    cut.trainer.default_local_dir = cut_dir.string().c_str();
    cut.trainer.resume_mode = "auto";
    run_steps(cut, 2, k);  // saves at step 2 (async: with the batch of step 3 generated ahead), then stops
    REQUIRE(latest_checkpoint_step(cut_dir) == std::optional<std::int64_t>(2));
    Run const after = run_steps(cut, 2, k);  // resumes at step 2
    for (std::size_t i = 0; i < 2; ++i) require_same_metrics(after.metrics[i], straight.metrics[2 + i]);
    CHECK(after.weights == straight.weights);
    CHECK(after.weights != run_steps(cfg, 2, k).weights);  // the resumed steps trained
    fs::remove_all(straight_dir);
    fs::remove_all(cut_dir);
  }
}

}  // namespace test_agent_trainer
