// Tests of rlflow/config/planner.hpp: the mission's two worked accounting groups, separate_async
// violations, the per-worker micro-batch accounting against plain formulas over random configs,
// and the table / JSON / command-line output.
#include <catch2/catch.hpp>

#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <rlflow/config/planner.hpp>

namespace test_planner {

using rlflow::TrainerConfig;

namespace {
std::string joined(std::vector<std::string> const& v) {
  std::string s;
  for (auto const& x : v) s += x + "\n";
  return s;
}

TrainerConfig with_micro(TrainerConfig c) {
  c.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 8;
  c.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 8;
  c.critic.ppo_micro_batch_size_per_gpu = 8;
  return c;
}

int run_plan(std::vector<char const*> args, std::string& out, std::string& err) {
  args.insert(args.begin(), "rlflow_plan");
  std::ostringstream o, e;
  int const rc = rlflow::plan_main(static_cast<int>(args.size()), args.data(), o, e);
  out = o.str();
  err = e.str();
  return rc;
}
}  // namespace

TEST_CASE("worked group 1: colocate, B=1024 M=256 n=1, 8 devices, TP=2", "[config][planner]") {
  auto const p = rlflow::plan(with_micro(TrainerConfig{}));  // verl's defaults
  CHECK(p.trainer_mode == "sync");
  CHECK(p.samples_per_step == 1024);
  CHECK(p.updates_per_step == 4);
  CHECK(p.rollout_replicas == 4);
  CHECK(p.total_devices == 8);
  CHECK(p.weight_syncs_per_step == 1);
  CHECK(p.weight_sync_scope == "in-pool");
  CHECK(p.weight_sync_backend == "naive");
  CHECK(p.device_share_per_worker == Approx(1.0 / 3.0));
  CHECK(p.violations.empty());
  // per worker: 1024 rows / 8 DP = 128; mini-batch 256 / 8 = 32 rows; micro 8 -> 4 accumulation steps
  CHECK(p.actor.dp_size == 8);
  CHECK(p.actor.rows_per_worker == 128);
  CHECK(p.actor.mini_batch_rows_per_worker == 32);
  CHECK(p.actor.grad_accumulation_steps == 4);
  CHECK(p.actor.micro_batches_per_step == 16);
  CHECK(p.critic.enabled);  // gae by default
  CHECK(p.critic.updates_per_step == 4);
  CHECK(p.log_prob_micro_batches_per_worker == 16);
  CHECK(p.trainer_pool_roles == std::vector<std::string>{"actor_rollout", "critic"});
}

TEST_CASE("worked group 2: separate_async, n=8, 8 train + 4 rollout devices", "[config][planner]") {
  auto c = with_micro(TrainerConfig{});
  c.apply_overrides({"trainer.v1.trainer_mode=separate_async", "actor_rollout_ref.rollout.n=8",
                     "actor_rollout_ref.rollout.nnodes=1", "actor_rollout_ref.rollout.n_gpus_per_node=4",
                     "actor_rollout_ref.rollout.checkpoint_engine.backend=nccl", "algorithm.adv_estimator=grpo"});
  auto const p = rlflow::plan(c);
  CHECK(p.samples_per_step == 8192);
  CHECK(p.updates_per_step == 4);  // n cancels: (1024*8)/(256*8)
  CHECK(p.rollout_replicas == 2);  // 4 / TP 2
  CHECK(p.train_devices == 8);
  CHECK(p.standalone_rollout_devices == 4);
  CHECK(p.total_devices == 12);
  CHECK(p.weight_syncs_per_step == 1);
  CHECK(p.weight_sync_scope == "cross-pool");
  CHECK(p.weight_sync_backend == "nccl");
  CHECK(p.parameter_sync_step == 4);
  CHECK(p.rollout_device_share_per_worker == 0.5);
  CHECK(p.samples_per_replica == 4096);
  CHECK(p.rollout_pool_roles == std::vector<std::string>{"rollout"});
  INFO(joined(p.violations));
  CHECK(p.violations.empty());
  // per worker: 8192 / 8 = 1024 rows; mini 256*8/8 = 256 rows; / 8 = 32 accumulation steps
  CHECK(p.actor.mini_batch_rows_per_worker == 256);
  CHECK(p.actor.grad_accumulation_steps == 32);
}

TEST_CASE("separate_async violations name the keys, values and fix", "[config][planner]") {
  auto c = with_micro(TrainerConfig{});
  c.apply_overrides({"trainer.v1.trainer_mode=separate_async", "algorithm.adv_estimator=grpo",
                     "data.train_batch_size=768", "reward.reward_model.enable=true"});
  auto const p = rlflow::plan(c);
  auto const text = joined(p.violations);
  INFO(text);
  CHECK(p.violations.size() == 4);
  CHECK_THAT(text, Catch::Contains("data.train_batch_size == trainer.v1.separate_async.parameter_sync_step * "
                                   "actor_rollout_ref.actor.ppo_mini_batch_size, but 768 != 4 * 256 = 1024") &&
                       Catch::Contains("set data.train_batch_size=1024 or trainer.v1.separate_async.parameter_sync_step=3"));
  CHECK_THAT(text, Catch::Contains("actor_rollout_ref.rollout.nnodes=0") &&
                       Catch::Contains("set e.g. actor_rollout_ref.rollout.nnodes=1"));
  CHECK_THAT(text, Catch::Contains("checkpoint_engine.backend=naive") && Catch::Contains("backend=nccl"));
  CHECK_THAT(text, Catch::Contains("reward.reward_model.enable_resource_pool=true"));
  CHECK(p.rollout_replicas == 0);  // no standalone fleet: nothing to cut replicas from
  CHECK(p.total_devices == 8);

  // the mission's constraint holds exactly at verl's defaults: 1024 == 4 * 256
  auto ok = with_micro(TrainerConfig{});
  ok.apply_overrides({"trainer.v1.trainer_mode=separate_async", "algorithm.adv_estimator=grpo",
                      "actor_rollout_ref.rollout.nnodes=1", "actor_rollout_ref.rollout.checkpoint_engine.backend=nccl"});
  CHECK(rlflow::plan(ok).violations.empty());
  CHECK(rlflow::plan(ok).total_devices == 16);  // rollout.n_gpus_per_node inherits 8
}

TEST_CASE("plan quantities match the accounting formulas over random configs", "[config][planner]") {
  std::mt19937 rng(7);
  auto pick = [&](std::vector<long long> const& xs) {
    return xs[std::uniform_int_distribution<std::size_t>(0, xs.size() - 1)(rng)];
  };
  for (int it = 0; it < 2000; ++it) {
    TrainerConfig c;
    long long const B = pick({64, 128, 256, 512, 1024}), n = pick({1, 2, 4, 8}), M = pick({16, 32, 64, 128}),
                    E = pick({1, 2, 3}), nodes = pick({1, 2}), gpn = pick({1, 2, 4, 8}), tp = pick({1, 2, 4}),
                    dp = pick({1, 2}), pp = pick({1, 2}), mcc = pick({1, 2, 3, 4}), micro = pick({1, 2, 4, 8});
    bool const separate = pick({0, 1}) == 1;
    long long const rnodes = pick({0, 1, 2}), rgpn = pick({2, 4, 8});
    c.data.train_batch_size = B;
    c.actor_rollout_ref.rollout.n = n;
    c.actor_rollout_ref.actor.ppo_mini_batch_size = M;
    c.actor_rollout_ref.actor.ppo_epochs = E;
    c.trainer.nnodes = nodes;
    c.trainer.n_gpus_per_node = gpn;
    c.actor_rollout_ref.rollout.tensor_model_parallel_size = tp;
    c.actor_rollout_ref.rollout.data_parallel_size = dp;
    c.actor_rollout_ref.rollout.pipeline_model_parallel_size = pp;
    c.max_colocate_count = mcc;
    c.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = micro;
    if (separate) {
      c.trainer.v1.trainer_mode = "separate_async";
      c.actor_rollout_ref.rollout.nnodes = rnodes;
      c.actor_rollout_ref.rollout.n_gpus_per_node = rgpn;
    }
    auto const p = rlflow::plan(c);
    long long const world = nodes * gpn, rollout_dev = separate ? rnodes * rgpn : world;
    INFO("B=" << B << " n=" << n << " M=" << M << " E=" << E << " world=" << world << " rollout=" << rollout_dev);
    REQUIRE(p.samples_per_step == B * n);
    REQUIRE(p.updates_per_step == (B * n + M * n - 1) / (M * n) * E);
    REQUIRE(p.train_devices == world);
    REQUIRE(p.total_devices == world + (separate ? rnodes * rgpn : 0));
    REQUIRE(p.rollout_replicas == rollout_dev / (tp * dp * pp));
    REQUIRE(p.idle_rollout_devices == rollout_dev % (tp * dp * pp));
    REQUIRE(p.weight_syncs_per_step == 1);
    REQUIRE(p.weight_sync_scope == (separate ? "cross-pool" : "in-pool"));
    REQUIRE(p.device_share_per_worker == Approx(1.0 / static_cast<double>(mcc)));
    REQUIRE(p.actor.rows_per_worker == B * n / world);
    REQUIRE(p.actor.mini_batch_rows_per_worker == M * n / world);
    REQUIRE(p.actor.grad_accumulation_steps == (M * n / world + micro - 1) / micro);
    REQUIRE(p.actor.micro_batches_per_step == p.actor.grad_accumulation_steps * p.updates_per_step);
    REQUIRE(p.violations == rlflow::validate(c));
  }
}

TEST_CASE("plan with a broken config does not throw and reports zeros", "[config][planner]") {
  TrainerConfig c;
  c.trainer.n_gpus_per_node = 0;
  c.actor_rollout_ref.rollout.tensor_model_parallel_size = 0;
  c.max_colocate_count = 0;
  c.actor_rollout_ref.actor.ppo_mini_batch_size = 0;
  c.actor_rollout_ref.actor.ulysses_sequence_parallel_size = 0;
  rlflow::Plan p;
  REQUIRE_NOTHROW(p = rlflow::plan(c));
  CHECK(p.rollout_replicas == 0);
  CHECK(p.device_share_per_worker == 0.0);
  CHECK(p.updates_per_step == 0);
  CHECK(!p.violations.empty());
  CHECK_NOTHROW(p.to_table());
  CHECK_NOTHROW(p.to_json());
}

TEST_CASE("table and JSON output carry the required fields", "[config][planner]") {
  auto const p = rlflow::plan(with_micro(TrainerConfig{}));
  auto const j = nlohmann::json::parse(p.to_json());
  for (auto key : {"samples_per_step", "updates_per_step", "rollout_replicas", "total_devices", "weight_syncs_per_step",
                   "weight_sync_scope", "device_share_per_worker", "violations"}) {
    INFO(key);
    CHECK(j.contains(key));
  }
  CHECK(j["samples_per_step"] == 1024);
  CHECK(j["violations"].is_array());
  CHECK(j["actor"]["grad_accumulation_steps"] == 4);
  auto const t = p.to_table();
  CHECK_THAT(t, Catch::Contains("samples per step") && Catch::Contains("1024 x 1 = 1024") &&
                    Catch::Contains("8/2 = 4") && Catch::Contains("0.333 (1/3)") && Catch::Contains("violations: none"));
}

TEST_CASE("plan_main: the rlflow_plan command line", "[config][planner]") {
  std::string out, err;
  CHECK(run_plan({"--json", "actor_rollout_ref.rollout.n=8", "data.train_batch_size=512"}, out, err) == 0);
  auto const j = nlohmann::json::parse(out);
  CHECK(j["samples_per_step"] == 4096);
  CHECK(j["updates_per_step"] == 2);
  CHECK(j["violations"].size() == 3);  // verl's null micro-batches
  CHECK(run_plan({"trainer.v1.trainer_mode=separate_async"}, out, err) == 0);
  CHECK_THAT(out, Catch::Contains("cross-pool") && Catch::Contains("violations (") &&
                      Catch::Contains("actor_rollout_ref.rollout.nnodes=0"));
  CHECK(run_plan({"data.train_bach_size=3"}, out, err) == 2);
  CHECK_THAT(err, Catch::Contains("did you mean 'data.train_batch_size'"));
  CHECK(run_plan({"--help"}, out, err) == 0);
  CHECK_THAT(out, Catch::Contains("usage: rlflow_plan") && Catch::Contains("trainer.v1.trainer_mode = sync"));
}

TEST_CASE("training TP: the plan's DP size is world / TP, and so are the rows per worker", "[config][planner]") {
  auto c = with_micro(TrainerConfig{});  // verl's defaults: 8 devices, B = 1024, M = 256, n = 1
  for (long long tp : {1, 2, 4, 8}) {
    INFO("training TP " << tp);
    c.actor_rollout_ref.actor.megatron.tensor_model_parallel_size = tp;
    auto const p = rlflow::plan(c);
    long long const dp = 8 / tp;
    CHECK(p.actor.dp_size == dp);
    CHECK(p.critic.dp_size == dp);  // the critic is sharded with the actor's TP degree
    CHECK(p.actor.rows_per_worker == 1024 / dp);  // a TP group's ranks hold the same rows
    CHECK(p.actor.mini_batch_rows_per_worker == 256 / dp);
    CHECK(p.updates_per_step == 4);
  }
  c.actor_rollout_ref.actor.megatron.tensor_model_parallel_size = 3;  // does not divide 8: reported, no DP size
  auto const p = rlflow::plan(c);
  CHECK(p.actor.dp_size == 0);
  std::string all;
  for (auto const& v : p.violations) all += v + "\n";
  CHECK_THAT(all, Catch::Contains("tensor_model_parallel_size=3"));
}

}  // namespace test_planner
