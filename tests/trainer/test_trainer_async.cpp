// Tests for the async roads of the Trainer (trainer_async.hpp): SeparateAsync and
// trainer_mode=colocate_async with staleness bound 0 give exactly the colocated sync trainer's
// weights and metrics on the same seeds and trainer-pool size; under random delays injected
// into generation and training the staleness bound holds, every batch is used once and in
// order, and the buffer stays bounded; a rollout worker that throws or a failing weight sync
// fails the step with an error naming the pool, the role and the rank (no hang); the start-up
// errors of separate_async come before any work.
#include <catch2/catch.hpp>

#include <rlflow/config/planner.hpp>
#include <rlflow/trainer/trainer.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#if defined(_OPENMP)
#include <omp.h>  // omp_get_max_threads (the rollout workers' team)
#endif

#include "trainer_fixtures.hpp"  // run_killed_after

#include "common/reverse_task.hpp"

namespace test_trainer_async {

using namespace rlflow;
using rlflow::testing::lockstep_hooks;
namespace fs = std::filesystem;

namespace {
using Reward = roles::RuleReward<examples::ReverseScore>;
using SyncTrainer = Trainer<GRPO, Colocate<3>, Reward>;
using SepTrainer = Trainer<GRPO, SeparateAsync, Reward>;

using rlflow::testing::task;

PromptDataset async_dataset() { return task.make_dataset(256, 7); }

using rlflow::testing::quiet;

//! 8 prompts x 4 samples a step, one actor update a step (parameter_sync_step 1), 2 trainer workers.
TrainerConfig base_config(char const* name, std::int64_t steps = 6) {
  TrainerConfig c = examples::reverse_base_config();
  c.data.train_batch_size = 8;
  c.actor_rollout_ref.actor.ppo_mini_batch_size = 8;
  c.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 16;
  c.actor_rollout_ref.actor.optim.lr = 3e-3;
  c.actor_rollout_ref.rollout.n = 4;
  c.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 16;
  c.actor_rollout_ref.model.n_embd = 32;
  c.trainer.total_training_steps = steps;
  auto dir = fs::temp_directory_path() / (std::string("rlflow_async_") + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  c.trainer.default_local_dir = dir.string().c_str();
  return c;
}

//! separate_async on a standalone rollout pool of 'rollout_devices' devices, bound K.
TrainerConfig separate_config(char const* name, int rollout_devices, std::int64_t k, std::int64_t steps = 6) {
  TrainerConfig c = base_config(name, steps);
  c.trainer.v1.trainer_mode = "separate_async";
  c.trainer.v1.separate_async.parameter_sync_step = 1;
  c.trainer.v1.separate_async.num_warmup_batches = k;
  c.actor_rollout_ref.rollout.nnodes = 1;
  c.actor_rollout_ref.rollout.n_gpus_per_node = rollout_devices;
  c.actor_rollout_ref.rollout.checkpoint_engine.backend = "nccl";
  return c;
}

std::vector<Metrics> run(auto& t) {
  std::vector<Metrics> ms;
  while (t.global_step() < t.total_steps()) ms.push_back(t.step());
  return ms;
}

//! Every metric that is not a timing, a throughput or an async bookkeeping value is equal.
void require_same_metrics(std::vector<Metrics> const& a, std::vector<Metrics> const& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t s = 0; s < a.size(); ++s)
    for (auto const& [k, v] : a[s]) {
      if (k.starts_with("timing_s/") || k.starts_with("perf/") || k.starts_with("separate_async/") ||
          k.starts_with("colocate_async/") || k.starts_with("training/off_policy/"))
        continue;
      INFO("step " << s + 1 << " metric " << k);
      REQUIRE(b[s].count(k) == 1);
      REQUIRE(b[s].at(k) == v);
    }
}

//! The per-step value of metric 'key' in a metrics.jsonl, in file order.
std::vector<std::pair<std::int64_t, double>> logged(fs::path const& file, std::string const& key) {
  std::ifstream in(file);
  std::vector<std::pair<std::int64_t, double>> out;
  for (std::string line; std::getline(in, line);) {
    auto const j = nlohmann::json::parse(line);
    out.emplace_back(j.at("step").get<std::int64_t>(), j.at(key).get<double>());
  }
  return out;
}
}  // namespace

TEST_CASE("SeparateAsync with staleness bound 0 gives the sync trainer's weights exactly", "[trainer][async]") {
  auto const sc = base_config("sync");
  SyncTrainer sync(sc, async_dataset(), task.charset(), quiet());
  auto const ms = run(sync);
  auto const ws = sync.actor_weights();
  for (int rollout_devices : {2, 1}) {
    INFO("rollout devices " << rollout_devices);
    SepTrainer sep(separate_config("sep0", rollout_devices, 0), async_dataset(), task.charset(), quiet());
    REQUIRE(sep.config().is_separate_async());
    REQUIRE(sep.rollout_replicas() == rollout_devices);
    REQUIRE(sep.async_rollout() != nullptr);
    REQUIRE(sep.async_rollout()->workers().world_size() == rollout_devices);
    auto const ma = run(sep);
    REQUIRE(sep.actor_weights() == ws);
    require_same_metrics(ms, ma);
    for (auto const& m : ma) {
      REQUIRE(m.at("training/off_policy/trajectory_staleness/max") == 0);
      REQUIRE(m.at("separate_async/weight_sync_bytes") == double(ws.size() * sizeof(float) * rollout_devices));
      REQUIRE(m.count("timing_s/update_weights") == 1);
    }
    // after the last step the rollout pool holds the weights of the step before it (version total-1)
    REQUIRE(sep.async_rollout()->max_buffer_depth() <= 1);
  }
  // the comparison can fail: one-step-off (K = 1, the rollout generates step 2 with version 0)
  // trains on other samples and ends elsewhere
  auto hooks = std::make_shared<AsyncHooks>();
  hooks->before_train = [](std::int64_t, DataProto const&) { std::this_thread::sleep_for(std::chrono::milliseconds(20)); };
  SepTrainer one_off(separate_config("sep1", 1, 1), async_dataset(), task.charset(), quiet(hooks));
  auto const m1 = run(one_off);
  REQUIRE(m1[1].at("training/off_policy/trajectory_staleness/max") == 1);
  REQUIRE(one_off.actor_weights() != ws);
}

TEST_CASE("colocate_async with staleness bound 0 gives the sync trainer's weights exactly", "[trainer][async]") {
  auto const sc = base_config("sync_c");
  SyncTrainer sync(sc, async_dataset(), task.charset(), quiet());
  auto const ms = run(sync);
  auto c = base_config("coloc0");
  c.trainer.v1.trainer_mode = "colocate_async";
  c.trainer.v1.colocate_async.num_warmup_batches = 0;
  SyncTrainer co(c, async_dataset(), task.charset(), quiet());
  REQUIRE(co.async_rollout() != nullptr);
  auto const ma = run(co);
  REQUIRE(co.actor_weights() == sync.actor_weights());
  require_same_metrics(ms, ma);
  REQUIRE(ma.back().count("colocate_async/staleness_bound") == 1);
}

TEST_CASE("the staleness bound holds under random delays, every batch is used once, in order, the buffer is bounded",
          "[trainer][async]") {
  for (std::int64_t k : {1, 2}) {
    for (bool separate : {true, false}) {
      INFO("K=" << k << (separate ? " separate_async" : " colocate_async"));
      auto hooks = std::make_shared<AsyncHooks>();
      std::mutex mu;
      std::mt19937 rng(static_cast<unsigned>(k * 10 + separate));
      auto delay = [&](int max_ms) {
        int ms;
        {
          std::lock_guard lk(mu);
          ms = std::uniform_int_distribution<int>(0, max_ms)(rng);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      };
      std::vector<std::int64_t> steps_seen;
      std::vector<std::vector<std::string>> prompts_seen;
      hooks->in_generate = [&](std::int64_t, int) { delay(15); };
      hooks->before_train = [&](std::int64_t step, DataProto const& b) {
        steps_seen.push_back(step);
        std::vector<std::string> p;
        for (std::int64_t i = 0; i < b.size(); ++i) {
          REQUIRE(b.non_tensor("uid")[static_cast<std::size_t>(i)].as_string() ==
                  "step" + std::to_string(step) + "-prompt" + std::to_string(i / 4));
          p.push_back(b.non_tensor("raw_prompt")[static_cast<std::size_t>(i)].as_string());
        }
        prompts_seen.push_back(p);
        delay(25);
      };
      std::int64_t const steps = 10;
      TrainerConfig c;
      if (separate) {
        c = separate_config("delays", 1, k, steps);
      } else {
        c = base_config("delays_c", steps);
        c.trainer.v1.trainer_mode = "colocate_async";
        c.trainer.v1.colocate_async.num_warmup_batches = k;
      }
      auto check = [&](auto& t) {
        auto const ms = run(t);
        std::string const p = separate ? "separate_async/" : "colocate_async/";
        double worst = 0;
        for (auto const& m : ms) {
          double const st = m.at("training/off_policy/trajectory_staleness/max");
          REQUIRE(st >= 0);
          REQUIRE(st <= double(k));
          worst = std::max(worst, st);
          REQUIRE(m.at(p + "buffer_depth") <= double(k + 1));
          REQUIRE(m.at(p + "buffer_capacity") == double(k + 1));
          REQUIRE(m.at(p + "policy_version") == m.at("training/global_step") - 1 - st);
        }
        REQUIRE(worst >= 1);  // training is slower than generation here: the workers ran ahead
        REQUIRE(t.async_rollout()->max_buffer_depth() <= std::size_t(k + 1));
      };
      if (separate) {
        SepTrainer t(c, async_dataset(), task.charset(), quiet(hooks));
        check(t);
      } else {
        SyncTrainer t(c, async_dataset(), task.charset(), quiet(hooks));
        check(t);
      }
      // every step once, in order, with the dataset's prompts in order (none lost, none twice)
      REQUIRE(steps_seen.size() == std::size_t(steps));
      for (std::size_t i = 0; i < steps_seen.size(); ++i) REQUIRE(steps_seen[i] == std::int64_t(i + 1));
      PromptDataset d = async_dataset();
      DataPosition pos;
      for (auto const& p : prompts_seen) {
        auto items = d.next_batch(pos, 8);
        REQUIRE(p.size() == 32);
        for (std::size_t r = 0; r < p.size(); ++r) REQUIRE(p[r] == items[r / 4].prompt);
      }
    }
  }
}

TEST_CASE("a rollout worker that throws fails the step with the pool, role and rank, no hang", "[trainer][async]") {
  auto hooks = std::make_shared<AsyncHooks>();
  hooks->in_generate = [](std::int64_t step, int rank) {
    if (step == 3 && rank == 1) throw std::runtime_error("injected generation failure");
  };
  SepTrainer t(separate_config("throw", 2, 1), async_dataset(), task.charset(), quiet(hooks));
  t.step();
  t.step();
  try {
    t.step();
    FAIL("step 3 did not fail");
  } catch (worker_error const& e) {
    std::string const w = e.what();
    INFO(w);
    REQUIRE_THAT(w, Catch::Contains("step 3") && Catch::Contains("rollout_pool") && Catch::Contains("rollout::generate_sequences") &&
                        Catch::Contains("rank 1") && Catch::Contains("injected generation failure"));
  }
  REQUIRE(t.global_step() == 2);
}  // the destructor joins the producer (it stopped at the failure)

TEST_CASE("a failing weight sync fails a step with the pool and the version, no hang", "[trainer][async]") {
  auto hooks = std::make_shared<AsyncHooks>();
  hooks->on_sync = [](std::int64_t version) {
    if (version == 2) throw std::runtime_error("injected sync failure");
  };
  SepTrainer t(separate_config("syncfail", 1, 1), async_dataset(), task.charset(), quiet(hooks));
  try {
    t.fit();
    FAIL("no step failed");
  } catch (worker_error const& e) {
    std::string const w = e.what();
    INFO(w);
    REQUIRE_THAT(w, Catch::Contains("rollout_pool") && Catch::Contains("role rollout") &&
                        Catch::Contains("weight sync of policy version 2") && Catch::Contains("injected sync failure"));
  }
  // the batch of step 3 may have been generated with version 1 (K = 1) before version 2 arrived
  REQUIRE((t.global_step() == 2 || t.global_step() == 3));
}

TEST_CASE("a failed async step leaves a trainer that fails again at once, joins its producer, and resumes from its checkpoint",
          "[trainer][async][resume]") {
  // bound 0: a schedule that does not depend on timing, so the resumed run must end with the
  // uninterrupted run's weights exactly (which equal the sync trainer's)
  auto const full_cfg = separate_config("fail_full", 2, 0, 5);
  SepTrainer full(full_cfg, async_dataset(), task.charset(), quiet());
  run(full);
  auto const want = full.actor_weights();
  for (std::string const kind : {"generate", "update_weights"}) {
    for (bool const colocate : {false, true}) {
      INFO(kind << (colocate ? " colocate_async" : " separate_async"));
      auto cfg = separate_config(colocate ? "fail_c" : "fail_s", 2, 0, 5);
      if (colocate) {
        cfg.trainer.v1.trainer_mode = "colocate_async";
        cfg.trainer.v1.colocate_async.num_warmup_batches = 0;
      }
      cfg.trainer.save_freq = 1;
      cfg.trainer.resume_mode = "auto";
      auto hooks = std::make_shared<AsyncHooks>();
      std::atomic<int> loads_rank1{0};
      if (kind == "generate")
        hooks->in_generate = [](std::int64_t step, int rank) {
          if (step == 3 && rank == 1) throw std::runtime_error("injected generation failure");
        };
      else  // rank 1's third load: version 2 (versions 0, 1, 2 are loaded before steps 1, 2, 3)
        hooks->in_update_weights = [&loads_rank1](int rank) {
          if (rank == 1 && ++loads_rank1 == 3) throw std::runtime_error("injected load failure");
        };
      auto const make = [&](std::shared_ptr<AsyncHooks const> h) -> std::unique_ptr<SepTrainer> {
        return std::make_unique<SepTrainer>(cfg, async_dataset(), task.charset(), quiet(std::move(h)));
      };
      std::string first_error;
      {
        std::unique_ptr<SepTrainer> sep;
        std::unique_ptr<SyncTrainer> co;
        if (colocate) co = std::make_unique<SyncTrainer>(cfg, async_dataset(), task.charset(), quiet(hooks));
        else sep = make(hooks);
        auto fail_step = [&]() -> std::string {
          try {
            if (colocate) co->step();
            else sep->step();
          } catch (worker_error const& e) {
            return e.what();
          }
          return "";
        };
        auto gstep = [&] { return colocate ? co->global_step() : sep->global_step(); };
        auto producer = [&] { return colocate ? co->async_rollout()->producer_running() : sep->async_rollout()->producer_running(); };
        REQUIRE(fail_step().empty());
        REQUIRE(fail_step().empty());
        REQUIRE(producer());
        first_error = fail_step();
        INFO(first_error);
        std::string const pool = colocate ? "'global_pool/rollout'" : "'rollout_pool'";
        REQUIRE_THAT(first_error, Catch::Contains("step 3") && Catch::Contains(pool) && Catch::Contains("role rollout") &&
                                      Catch::Contains("rank 1 of 2"));
        if (kind == "generate")
          REQUIRE_THAT(first_error, Catch::Contains("rollout::generate_sequences") && Catch::Contains("injected generation failure"));
        else
          REQUIRE_THAT(first_error, Catch::Contains("weight sync of policy version 2") &&
                                        Catch::Contains("rollout::update_weights") && Catch::Contains("injected load failure"));
        REQUIRE(gstep() == 2);
        REQUIRE_FALSE(producer());  // joined by the failed step
        // a further step fails the same way at once (no hang, no half-done step)
        auto const t0 = std::chrono::steady_clock::now();
        REQUIRE(fail_step() == first_error);
        REQUIRE(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
        REQUIRE(gstep() == 2);
      }  // destroyed cleanly
      // a new trainer resumes from the step-2 checkpoint and ends with the uninterrupted weights
      std::vector<float> got;
      if (colocate) {
        SyncTrainer co(cfg, async_dataset(), task.charset(), quiet());
        REQUIRE(co.global_step() == 2);
        run(co);
        got = co.actor_weights();
      } else {
        auto sep = make(nullptr);
        REQUIRE(sep->global_step() == 2);
        run(*sep);
        got = sep->actor_weights();
      }
      REQUIRE(got == want);
      fs::remove_all(std::string(cfg.trainer.default_local_dir.view()));
    }
  }
  fs::remove_all(std::string(full_cfg.trainer.default_local_dir.view()));
}

TEST_CASE("a driver-side failure after an async step took its batch fails every later step at once, the run resumes "
          "from its checkpoint",
          "[trainer][async][resume]") {
  // The after_advantage hook throws at step 3, after the batch left the replay buffer. Without the
  // check, a second step() at bound 0 waits forever for version 3; with bound 1 it would train on
  // step 4's batch with step 3's prompts lost. Both modes, bounds 0 and 1.
  for (std::int64_t const k : {0, 1}) {
    for (bool const colocate : {false, true}) {
      INFO((colocate ? "colocate_async" : "separate_async") << " bound " << k);
      auto cfg = separate_config(colocate ? "drv_c" : "drv_s", 2, k, 5);
      if (colocate) {
        cfg.trainer.v1.trainer_mode = "colocate_async";
        cfg.trainer.v1.colocate_async.num_warmup_batches = k;
      }
      cfg.trainer.save_freq = 1;
      cfg.trainer.resume_mode = "auto";
      std::string const dir(cfg.trainer.default_local_dir.view());
      auto const options = [](bool failing) {
        auto o = quiet();
        if (failing)
          o.after_advantage = [](std::int64_t step, DataProto const&) {
            if (step == 3) throw std::runtime_error("injected driver failure");
          };
        return o;
      };
      auto const make = [&](bool failing) { return std::make_unique<SepTrainer>(cfg, async_dataset(), task.charset(), options(failing)); };
      auto const make_co = [&](bool failing) { return std::make_unique<SyncTrainer>(cfg, async_dataset(), task.charset(), options(failing)); };
      // the uninterrupted run (same config, its own directory); bound 0 makes the schedule, and so
      // the weights, independent of timing (with bound 1 the resumed run is checked to finish)
      std::vector<float> want;
      if (k == 0) {
        auto full_cfg = cfg;
        full_cfg.trainer.save_freq = -1;
        full_cfg.trainer.resume_mode = "disable";
        full_cfg.trainer.default_local_dir = (dir + "_full").c_str();
        if (colocate) {
          SyncTrainer t(full_cfg, async_dataset(), task.charset(), quiet());
          run(t);
          want = t.actor_weights();
        } else {
          SepTrainer t(full_cfg, async_dataset(), task.charset(), quiet());
          run(t);
          want = t.actor_weights();
        }
        fs::remove_all(dir + "_full");
      }
      {
        auto sep = colocate ? nullptr : make(true);
        auto co = colocate ? make_co(true) : nullptr;
        auto step = [&] { return colocate ? co->step() : sep->step(); };
        auto gstep = [&] { return colocate ? co->global_step() : sep->global_step(); };
        auto producer = [&] { return colocate ? co->async_rollout()->producer_running() : sep->async_rollout()->producer_running(); };
        step();
        step();
        REQUIRE_THROWS_WITH(step(), "injected driver failure");
        REQUIRE(gstep() == 2);
        // every later step fails at once, names the failed step and the fix, and joins the producer
        for (int again = 0; again < 2; ++again) {
          auto const t0 = std::chrono::steady_clock::now();
          std::string what;
          try {
            step();
          } catch (rlflow::error const& e) {
            what = e.what();
          }
          INFO(what);
          REQUIRE_THAT(what, Catch::Contains("step 3 cannot run") && Catch::Contains("step 3 failed after taking") &&
                                 Catch::Contains("trainer.resume_mode=auto"));
          REQUIRE(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
          REQUIRE(gstep() == 2);
          REQUIRE_FALSE(producer());
        }
      }  // destroyed cleanly
      // a new trainer resumes from the step-2 checkpoint and ends with the uninterrupted weights
      std::vector<float> got;
      std::int64_t last = 0;
      if (colocate) {
        auto co = make_co(false);
        REQUIRE(co->global_step() == 2);
        run(*co);
        got = co->actor_weights();
        last = co->global_step();
      } else {
        auto sep = make(false);
        REQUIRE(sep->global_step() == 2);
        run(*sep);
        got = sep->actor_weights();
        last = sep->global_step();
      }
      REQUIRE(last == 5);
      if (k == 0) REQUIRE(got == want);
      fs::remove_all(dir);
    }
  }
}

#if defined(_OPENMP)
TEST_CASE("the async modes' rollout workers run with TrainerOptions::threads_per_worker threads, like the trainer's",
          "[trainer][async][threads]") {
  // in_generate runs on each rollout worker's thread: its OpenMP team is the one the engine's
  // products split across (model::layers::set_worker_threads); the tests run with
  // OMP_NUM_THREADS=1, so without the layout the team would be 1
  for (bool const colocate : {false, true}) {
    for (int const threads : {2, 3}) {
      INFO((colocate ? "colocate_async" : "separate_async") << ", threads_per_worker " << threads);
      auto cfg = separate_config(colocate ? "thr_c" : "thr_s", 2, 1, 2);
      if (colocate) {
        cfg.trainer.v1.trainer_mode = "colocate_async";
        cfg.trainer.v1.colocate_async.num_warmup_batches = 1;
      }
      std::mutex mu;
      std::map<int, std::set<int>> seen;  // rank -> teams seen
      auto hooks = std::make_shared<AsyncHooks>();
      hooks->in_generate = [&](std::int64_t, int rank) {
        int const team = omp_get_max_threads();
        std::lock_guard lk(mu);
        seen[rank].insert(team);
      };
      auto o = quiet(hooks);
      o.threads_per_worker = threads;
      if (colocate) {
        SyncTrainer t(cfg, async_dataset(), task.charset(), std::move(o));
        run(t);
      } else {
        SepTrainer t(cfg, async_dataset(), task.charset(), std::move(o));
        run(t);
      }
      REQUIRE(seen.size() == 2);  // both rollout ranks generated
      for (auto const& [rank, teams] : seen) {
        INFO("rollout rank " << rank);
        REQUIRE(teams == std::set<int>{threads});
      }
      fs::remove_all(std::string(cfg.trainer.default_local_dir.view()));
    }
  }
}
#endif

TEST_CASE("ReMax in the async modes: bound 0 gives the sync ReMax trainer's weights, the greedy baseline comes from the "
          "batch's weights and is checkpointed with it",
          "[trainer][async][remax]") {
  using SyncRemax = Trainer<ReMax, Colocate<3>, Reward>;
  using SepRemax = Trainer<ReMax, SeparateAsync, Reward>;
  SyncRemax sync(base_config("remax_sync", 4), async_dataset(), task.charset(), quiet());
  auto const ms = run(sync);
  for (bool const separate : {true, false}) {
    INFO((separate ? "separate_async" : "colocate_async"));
    auto cfg = separate ? separate_config("remax_sep0", 2, 0, 4) : base_config("remax_co0", 4);
    if (!separate) {
      cfg.trainer.v1.trainer_mode = "colocate_async";
      cfg.trainer.v1.colocate_async.num_warmup_batches = 0;
    }
    std::vector<Metrics> ma;
    std::vector<float> w;
    if (separate) {
      SepRemax t(cfg, async_dataset(), task.charset(), quiet());
      ma = run(t);
      w = t.actor_weights();
    } else {
      SyncRemax t(cfg, async_dataset(), task.charset(), quiet());
      ma = run(t);
      w = t.actor_weights();
    }
    REQUIRE(w == sync.actor_weights());
    require_same_metrics(ms, ma);
    for (auto const& m : ma) REQUIRE(m.count("timing_s/gen_max") == 1);
    fs::remove_all(std::string(cfg.trainer.default_local_dir.view()));
  }
  // K = 1 under the lockstep schedule: the batch of step 4 is generated with version 2 while the
  // trainer holds version 3. The step-3 checkpoint saves it with its greedy rollout, which must be
  // the greedy generation of version 2 (the weights of the step-2 checkpoint), not of version 3.
  auto cfg = separate_config("remax_sep1", 1, 1, 6);
  cfg.trainer.save_freq = 1;
  std::vector<float> w_full;
  std::vector<Metrics> m_full;
  auto const run_lockstep = [](TrainerConfig const& c, std::vector<float>& w, std::vector<Metrics>& out) {
    auto holder = std::make_shared<SepRemax*>(nullptr);
    SepRemax t(c, async_dataset(), task.charset(), quiet(lockstep_hooks(holder, 1)));
    *holder = &t;
    out = run(t);
    w = t.actor_weights();
    return t.startup_warnings();
  };
  run_lockstep(cfg, w_full, m_full);
  for (std::size_t i = 0; i < m_full.size(); ++i)
    REQUIRE(m_full[i].at("separate_async/policy_version") == double(std::max<std::int64_t>(0, std::int64_t(i) - 1)));
  auto const dir = fs::path(std::string(cfg.trainer.default_local_dir.view()));
  auto const ck3 = dir / "global_step_3";
  auto const st = nlohmann::json::parse(std::ifstream(ck3 / "trainer_state.json"));
  REQUIRE(st.at("replay_buffer").size() >= 1);
  auto const& e = st["replay_buffer"][0];
  REQUIRE(e["step"] == 4);
  REQUIRE(e["policy_version"] == 2);
  REQUIRE(e.contains("greedy_file"));
  DataProto const greedy = DataProto::load(ck3 / e["greedy_file"].get<std::string>());
  REQUIRE(greedy.size() == 8);  // one row per prompt
  // regenerate it greedily on the hybrid rollout of a sync trainer holding version v
  auto const regenerate = [&](std::int64_t v) {
    auto rc = base_config("remax_regen", 6);
    rc.trainer.resume_mode = "resume_path";
    rc.trainer.resume_from_path = (dir / ("global_step_" + std::to_string(v))).string().c_str();
    SyncRemax t(rc, async_dataset(), task.charset(), quiet());
    REQUIRE(t.global_step() == v);
    Tensor const& p = greedy.tensor("prompts");
    Tensor const& am = greedy.tensor("attention_mask");
    Tensor am_p = Tensor::empty(DType::int32, Shape{p.dim(0), p.dim(1)});
    for (std::int64_t r = 0; r < p.dim(0); ++r)
      for (std::int64_t c = 0; c < p.dim(1); ++c) am_p.at<std::int32_t>(r, c) = am.at<std::int32_t>(r, c);
    DataProto in = DataProto::from_dict({{"input_ids", p.clone()}, {"attention_mask", am_p}, {"rollout_seed", greedy.tensor("rollout_seed").clone()}},
                                        greedy.non_tensors());
    in.meta_info().set("do_sample", false);
    DataProto out = t.actor_rollout_wg().template call<&SyncRemax::actor_role::generate_sequences>(in);
    fs::remove_all(std::string(rc.trainer.default_local_dir.view()));
    return out;
  };
  auto const max_diff = [&](DataProto const& o) {
    REQUIRE(o.tensor("responses").span<std::int32_t>().size() == greedy.tensor("responses").span<std::int32_t>().size());
    auto const a = o.tensor("rollout_log_probs").span<float>();
    auto const b = greedy.tensor("rollout_log_probs").span<float>();
    double d = 0;
    for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, double(std::abs(a[i] - b[i])));
    return d;
  };
  DataProto const v2 = regenerate(2);
  REQUIRE(std::ranges::equal(v2.tensor("responses").span<std::int32_t>(), greedy.tensor("responses").span<std::int32_t>()));
  REQUIRE(max_diff(v2) < 1e-5);
  // the check can fail: version 3 (the trainer's weights when step 4 trains) gives other log-probs
  REQUIRE(max_diff(regenerate(3)) > 1e-4);
  // resumed from the step-3 checkpoint: the saved greedy rollout is used, bit for bit the same run
  auto rcfg = cfg;
  auto const rdir = fs::temp_directory_path() / ("rlflow_async_remax_resumed_" + std::to_string(::getpid()));
  fs::remove_all(rdir);
  rcfg.trainer.default_local_dir = rdir.string().c_str();
  rcfg.trainer.resume_mode = "resume_path";
  rcfg.trainer.resume_from_path = ck3.string().c_str();
  std::vector<float> w_res;
  std::vector<Metrics> m_res;
  REQUIRE(run_lockstep(rcfg, w_res, m_res).empty());
  REQUIRE(w_res == w_full);
  require_same_metrics(std::vector<Metrics>(m_full.begin() + 3, m_full.end()), m_res);
  fs::remove_all(rdir);
  fs::remove_all(dir);
}

TEST_CASE("a trainer destroyed with the buffer full and the producer waiting joins it", "[trainer][async]") {
  auto hooks = std::make_shared<AsyncHooks>();
  SepTrainer t(separate_config("early", 1, 2, 8), async_dataset(), task.charset(), quiet(hooks));
  t.step();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the producer fills the buffer and waits
  REQUIRE(t.async_rollout()->max_buffer_depth() >= 1);
}

TEST_CASE("separate_async start-up errors come before any work and name the key and the fix", "[trainer][async][config]") {
  auto const rejects = [](TrainerConfig const& c, std::vector<std::string> const& parts, bool separate = true) {
    try {
      if (separate) SepTrainer t(c, async_dataset(), task.charset(), quiet());
      else SyncTrainer t(c, async_dataset(), task.charset(), quiet());
      FAIL("accepted");
    } catch (config_error const& e) {
      for (auto const& p : parts) REQUIRE_THAT(e.what(), Catch::Contains(p));
    }
  };
  auto c = separate_config("errors", 1, 1);
  c.actor_rollout_ref.rollout.checkpoint_engine.backend = "naive";
  rejects(c, {"checkpoint_engine.backend=naive", "backend=nccl"});
  c = separate_config("errors", 1, 1);
  c.actor_rollout_ref.rollout.nnodes = 0;
  rejects(c, {"standalone rollout pool", "nnodes"});
  c = separate_config("errors", 1, 1);
  c.trainer.v1.separate_async.parameter_sync_step = 2;
  rejects(c, {"parameter_sync_step", "train_batch_size"});
  c = separate_config("errors", 1, 1);
  c.trainer.v1.separate_async.num_warmup_batches = -1;
  rejects(c, {"num_warmup_batches=-1"});
  c = separate_config("errors", 1, 1);
  c.trainer.v1.trainer_mode = "colocate_async";
  rejects(c, {"colocate_async contradicts the SeparateAsync placement"});
  c = separate_config("errors", 1, 1);
  rejects(c, {"trainer_mode=separate_async", "rlflow::SeparateAsync"}, /*separate=*/false);
  // a reward model needs its own pool in separate_async (verl's rule, check(cfg)) ...
  c = separate_config("errors", 1, 1);
  c.reward.reward_model.enable = true;
  rejects(c, {"reward.reward_model.enable_resource_pool=true"});
  // ... and with one, rlflow has no reward-model worker to put there
  c.reward.reward_model.enable_resource_pool = true;
  c.reward.reward_model.nnodes = 1;
  c.reward.reward_model.n_gpus_per_node = 2;
  rejects(c, {"reward.reward_model.enable=true", "nnodes=1 x n_gpus_per_node=2", "'global_pool'",
              "reward.reward_model.enable=false"});
  // partial rollout needs an async mode
  c = base_config("errors");
  c.async_training.partial_rollout = true;
  rejects(c, {"async_training.partial_rollout=true needs an async mode", "trainer.v1.trainer_mode=colocate_async"},
          /*separate=*/false);
}

TEST_CASE("SeparateAsync's pools follow the planner's accounting (the mission's group B shape: 8 train + 4 rollout, TP 2)",
          "[trainer][async][planner]") {
  // group B's pools (8 trainer devices, a standalone rollout pool of 4, TP 2) with the tiny model
  // and a small batch; the planner's numbers for the same config are the Trainer's
  auto c = separate_config("groupb", 4, 1, 2);
  c.trainer.n_gpus_per_node = 8;
  c.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 4;
  c.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 4;
  using T = Trainer<GRPO, SeparateAsync, TP<2>, Reward>;
  T t(c, async_dataset(), task.charset(), quiet());
  auto const p = plan(t.config());
  REQUIRE(p.train_devices == 8);
  REQUIRE(p.standalone_rollout_devices == 4);
  REQUIRE(p.total_devices == 12);
  REQUIRE(p.rollout_replicas == 2);
  REQUIRE(t.rollout_replicas() == p.rollout_replicas);
  REQUIRE(t.workers().world_size() == p.train_devices);
  REQUIRE(t.async_rollout()->workers().world_size() == p.standalone_rollout_devices);
  auto const m = t.step();  // the version-0 sync before the first batch
  REQUIRE(m.at("separate_async/weight_sync_bytes") == double(t.actor_weights().size() * sizeof(float) * 4));
  t.step();  // the last step: the producer has made its last call on the rollout group
  // every rollout rank holds its TP shard of the weights of the version it generated with
  auto const shards = t.async_rollout()->workers().template call<&AsyncRollout<cpu::tag, 2>::role::rollout_weights>();
  REQUIRE(shards.size() == 4);
  REQUIRE(shards[0] == shards[2]);  // replica 0 and replica 1, TP rank 0
  REQUIRE(shards[1] == shards[3]);
  REQUIRE(shards[0] != shards[1]);
  // the rollout workers' LM head: auto gives the replicated head on this small vocabulary, and
  // actor_rollout_ref.model.lm_head=vocab_parallel reaches every rollout rank
  using AR = AsyncRollout<cpu::tag, 2>;
  for (auto h : t.async_rollout()->workers().template call<&AR::role::lm_head>()) REQUIRE(h == 0);
  {
    auto v = c;
    v.actor_rollout_ref.model.lm_head = "vocab_parallel";
    T tv(v, async_dataset(), task.charset(), quiet());
    auto const heads = tv.async_rollout()->workers().template call<&AR::role::lm_head>();
    REQUIRE(heads.size() == 4);
    for (auto h : heads) REQUIRE(h == 1);
  }
  // partial rollout needs rollout TP 1: an error before work
  c.async_training.partial_rollout = true;
  REQUIRE_THROWS_WITH(T(c, async_dataset(), task.charset(), quiet()),
                      Catch::Contains("async_training.partial_rollout=true needs rollout TP 1") && Catch::Contains("TP<1>"));
}

TEST_CASE("separate_async resumes from a checkpoint: exact with bound 0, from the saved buffer with bound 1", "[trainer][async][resume]") {
  // uninterrupted: 6 steps
  auto full_cfg = separate_config("resume_full", 1, 0, 6);
  SepTrainer full(full_cfg, async_dataset(), task.charset(), quiet());
  run(full);
  // interrupted: 3 steps, a checkpoint at step 3, a new trainer resumes and runs to 6
  auto cfg = separate_config("resume", 1, 0, 6);
  cfg.trainer.save_freq = 3;
  cfg.trainer.resume_mode = "auto";
  {
    SepTrainer first(cfg, async_dataset(), task.charset(), quiet());
    for (int i = 0; i < 3; ++i) first.step();
  }  // destroyed with the producer waiting for version 3
  SepTrainer second(cfg, async_dataset(), task.charset(), quiet());
  REQUIRE(second.global_step() == 3);
  REQUIRE(second.data_position().index == 24);
  run(second);
  REQUIRE(second.actor_weights() == full.actor_weights());
  // bound 1: the checkpoint holds the batch (or batches) generated ahead; step 4 trains on the
  // saved batch of step 4, with the version that generated it (2 or 3: timing decides here)
  auto cfg1 = separate_config("resume1", 1, 1, 6);
  cfg1.trainer.save_freq = 3;
  cfg1.trainer.resume_mode = "auto";
  {
    SepTrainer first(cfg1, async_dataset(), task.charset(), quiet());
    for (int i = 0; i < 3; ++i) first.step();
  }
  SepTrainer second1(cfg1, async_dataset(), task.charset(), quiet());
  REQUIRE(second1.global_step() == 3);
  auto const ms = run(second1);
  auto const st = nlohmann::json::parse(std::ifstream(fs::path(std::string(cfg1.trainer.default_local_dir.view())) /
                                                     "global_step_3" / "trainer_state.json"));
  REQUIRE(st.at("replay_buffer").size() >= 1);
  REQUIRE(st["replay_buffer"][0]["step"] == 4);
  REQUIRE(ms.front().at("separate_async/policy_version") == st["replay_buffer"][0]["policy_version"].get<double>());
  for (auto const& m : ms) REQUIRE(m.at("training/off_policy/trajectory_staleness/max") <= 1);
}

TEST_CASE("separate_async with parameter_sync_step 2: two actor updates per sync, old log-probs of the cycle's start",
          "[trainer][async]") {
  // train_batch_size = parameter_sync_step x ppo_mini_batch_size = 2 x 4: two optimizer steps per
  // step and one weight sync; with bound 0 it is the sync trainer with two mini-batches per step
  auto sc = base_config("pss_sync", 4);
  sc.actor_rollout_ref.actor.ppo_mini_batch_size = 4;
  sc.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 8;
  SyncTrainer sync(sc, async_dataset(), task.charset(), quiet());
  auto const ms = run(sync);
  auto c = separate_config("pss", 1, 0, 4);
  c.actor_rollout_ref.actor.ppo_mini_batch_size = 4;
  c.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 8;
  c.trainer.v1.separate_async.parameter_sync_step = 2;
  SepTrainer sep(c, async_dataset(), task.charset(), quiet());
  auto const ma = run(sep);
  REQUIRE(sep.actor_weights() == sync.actor_weights());
  require_same_metrics(ms, ma);
  // the second mini-batch sees a moved policy against the cycle-start old log-probs
  bool moved = false;
  for (auto const& m : ma) moved = moved || m.at("actor/ppo_kl") != 0;
  REQUIRE(moved);
}

TEST_CASE("async resume with batches in the buffer is exact: the resumed run equals the uninterrupted one bit for bit",
          "[trainer][async][resume]") {
  for (std::int64_t k : {1, 2}) {
    for (bool separate : {true, false}) {
      INFO("K=" << k << (separate ? " separate_async" : " colocate_async"));
      std::string const tag = std::string(separate ? "sep" : "co") + std::to_string(k);
      TrainerConfig cfg = separate ? separate_config(("xr_" + tag).c_str(), 1, k, 8) : base_config(("xr_" + tag).c_str(), 8);
      if (!separate) {
        cfg.trainer.v1.trainer_mode = "colocate_async";
        cfg.trainer.v1.colocate_async.num_warmup_batches = k;
      }
      cfg.trainer.save_freq = 3;
      // uninterrupted: 8 steps, checkpoints at 3 and 6 (each saves the replay buffer)
      auto const full_dir = fs::path(std::string(cfg.trainer.default_local_dir.view()));
      std::vector<float> w_full;
      std::vector<Metrics> m_full;
      auto run_lockstep = [&](TrainerConfig const& c, std::vector<float>& w, std::vector<Metrics>& ms, std::int64_t bound) {
        auto go = [&]<class T>() {
          auto holder = std::make_shared<T*>(nullptr);
          T t(c, async_dataset(), task.charset(), quiet(lockstep_hooks(holder, bound)));
          *holder = &t;
          ms = run(t);
          w = t.actor_weights();
          return t.startup_warnings();
        };
        return separate ? go.template operator()<SepTrainer>() : go.template operator()<SyncTrainer>();
      };
      run_lockstep(cfg, w_full, m_full, k);
      // the schedule: the batch of step s comes from version max(0, s - 1 - K)
      for (std::size_t i = 0; i < m_full.size(); ++i) {
        std::int64_t const s = static_cast<std::int64_t>(i) + 1;
        REQUIRE(m_full[i].at((separate ? "separate_async" : "colocate_async") + std::string("/policy_version")) ==
                double(std::max<std::int64_t>(0, s - 1 - k)));
      }
      // the checkpoint of step 3 holds the batches of steps 4.. generated with versions 2, 3 (K=1) / 1, 2, 3 (K=2)
      auto const ck = full_dir / "global_step_3";
      auto const st = nlohmann::json::parse(std::ifstream(ck / "trainer_state.json"));
      REQUIRE(st.contains("replay_buffer"));
      auto const& rb = st["replay_buffer"];
      REQUIRE(static_cast<std::int64_t>(rb.size()) >= k);
      REQUIRE(static_cast<std::int64_t>(rb.size()) <= k + 1);
      for (std::size_t i = 0; i < rb.size(); ++i) {
        REQUIRE(rb[i]["step"] == 4 + static_cast<std::int64_t>(i));
        REQUIRE(rb[i]["policy_version"] == 3 + static_cast<std::int64_t>(i) - k);
        REQUIRE(fs::exists(ck / rb[i]["file"].get<std::string>()));
      }
      // resumed from step 3 in another folder: the same weights and metrics, bit for bit
      auto rcfg = cfg;
      auto const rdir = fs::temp_directory_path() / ("rlflow_async_xr_resumed_" + tag + "_" + std::to_string(::getpid()));
      fs::remove_all(rdir);
      rcfg.trainer.default_local_dir = rdir.string().c_str();
      rcfg.trainer.resume_mode = "resume_path";
      rcfg.trainer.resume_from_path = ck.string().c_str();
      std::vector<float> w_res;
      std::vector<Metrics> m_res;
      auto const warns = run_lockstep(rcfg, w_res, m_res, k);
      REQUIRE(warns.empty());
      REQUIRE(w_res == w_full);
      REQUIRE(m_res.size() == 5);
      require_same_metrics(std::vector<Metrics>(m_full.begin() + 3, m_full.end()), m_res);
      for (std::size_t i = 0; i < m_res.size(); ++i)
        REQUIRE(m_res[i].at((separate ? "separate_async" : "colocate_async") + std::string("/policy_version")) ==
                m_full[i + 3].at((separate ? "separate_async" : "colocate_async") + std::string("/policy_version")));
      // the comparison can fail: a resume with bound 0 cannot use the buffered batches (a
      // warning says so), regenerates them with version 3, and ends elsewhere
      auto zcfg = rcfg;
      (separate ? zcfg.trainer.v1.separate_async.num_warmup_batches : zcfg.trainer.v1.colocate_async.num_warmup_batches) = 0;
      fs::remove_all(rdir);
      std::vector<float> w_zero;
      std::vector<Metrics> m_zero;
      auto const zwarns = run_lockstep(zcfg, w_zero, m_zero, 0);
      bool named = false;
      for (auto const& w : zwarns) named = named || w.find("replay buffer holds") != std::string::npos;
      REQUIRE(named);
      REQUIRE(w_zero != w_full);
      fs::remove_all(rdir);
      if (!separate) {  // the sync mode resumes the colocate_async checkpoint without its buffer, saying so
        auto scfg = rcfg;
        scfg.trainer.v1.trainer_mode = "sync";
        SyncTrainer st_sync(scfg, async_dataset(), task.charset(), quiet());
        REQUIRE(st_sync.global_step() == 3);
        bool said = false;
        for (auto const& w : st_sync.startup_warnings()) said = said || w.find("no batches generated ahead") != std::string::npos;
        REQUIRE(said);
        fs::remove_all(rdir);
      }
      fs::remove_all(full_dir);
    }
  }
}

TEST_CASE("separate_async (K = 1) killed with -9 at random moments, then resumed, ends with the uninterrupted run's weights",
          "[trainer][async][resume][kill]") {
  auto cfg = separate_config("kill_ref", 1, 1, 6);
  cfg.trainer.save_freq = 2;
  cfg.trainer.resume_mode = "auto";
  auto const lockstep_run = [&](TrainerConfig const& c) {
    auto holder = std::make_shared<SepTrainer*>(nullptr);
    SepTrainer t(c, async_dataset(), task.charset(), quiet(lockstep_hooks(holder, 1)));
    *holder = &t;
    t.fit();
    return t.actor_weights();
  };
  auto const ref_dir = fs::path(std::string(cfg.trainer.default_local_dir.view()));
  double duration = 0;
  std::vector<float> ref;
  {
    auto const t0 = std::chrono::steady_clock::now();
    ref = lockstep_run(cfg);
    duration = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  auto const ref_scores = logged(ref_dir / "metrics.jsonl", "critic/score/mean");
  REQUIRE(ref_scores.size() == 6);
  std::mt19937_64 rng(20261130);
  std::uniform_real_distribution<double> when(0.05, 1.0);
  int killed = 0, attempts = 0, with_buffer = 0;
  // until 4 kills, one of them after a checkpoint with buffered batches (where a kill lands
  // depends on the machine's load: the times are fractions of the reference run's duration)
  while ((killed < 4 || with_buffer < 1) && attempts < 30) {
    ++attempts;
    auto kcfg = cfg;
    auto const dir = fs::temp_directory_path() / ("rlflow_async_kill_" + std::to_string(attempts) + "_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    kcfg.trainer.default_local_dir = dir.string().c_str();
    double const at = when(rng) * duration;
    int exit_status = 0;
    if (rlflow::testing::run_killed_after(at, [&] { (void)lockstep_run(kcfg); }, exit_status)) ++killed;
    else REQUIRE(exit_status == 0);  // finished before the kill: still a valid comparison
    auto const last = latest_checkpoint_step(dir);
    INFO("attempt " << attempts << ": killed at " << at << " s of " << duration << " s, last checkpoint " << last.value_or(-1));
    if (last) {  // what is visible is whole: every file of the manifest present and intact
      auto const ck = dir / ("global_step_" + std::to_string(*last));
      REQUIRE_NOTHROW(verify_checkpoint(ck));
      if (*last < 6 && nlohmann::json::parse(std::ifstream(ck / "trainer_state.json")).at("replay_buffer").size() > 0) ++with_buffer;
    }
    REQUIRE(lockstep_run(kcfg) == ref);
    auto const scores = logged(dir / "metrics.jsonl", "critic/score/mean");
    REQUIRE(scores == ref_scores);  // each step logged once, with the uninterrupted run's values
    for (auto const& e : fs::directory_iterator(dir)) REQUIRE_FALSE(e.path().filename().string().starts_with(".tmp"));
    fs::remove_all(dir);
  }
  REQUIRE(killed >= 4);
  REQUIRE(with_buffer >= 1);  // at least one resume restored batches from the buffer
  fs::remove_all(ref_dir);
}

namespace {
//! The prompts (input_ids, attention_mask, rollout_seed) of a generated batch, rebuilt from its
//! 'prompts' (left-padded) and attention mask.
DataProto prompts_of(DataProto const& batch) {
  Tensor const& p = batch.tensor("prompts");
  Tensor const& am = batch.tensor("attention_mask");
  std::int64_t const B = p.dim(0), P = p.dim(1);
  Tensor ids = Tensor::empty(DType::int32, Shape{B, P});
  Tensor m = Tensor::empty(DType::int32, Shape{B, P});
  for (std::int64_t i = 0; i < B; ++i)
    for (std::int64_t t = 0; t < P; ++t) {
      ids.at<std::int32_t>(i, t) = p.at<std::int32_t>(i, t);
      m.at<std::int32_t>(i, t) = am.at<std::int32_t>(i, t);
    }
  return DataProto::from_dict({{"input_ids", ids}, {"attention_mask", m}, {"rollout_seed", batch.tensor("rollout_seed")}},
                              batch.non_tensors());
}
template <class T>
std::vector<T> values(DataProto const& d, char const* key) {
  auto s = d.tensor(key).span<T>();
  return {s.begin(), s.end()};
}
bool any_unfinished(DataProto const& d) {
  for (auto x : values<std::int32_t>(d, "partial_rollout_len"))
    if (x >= 0) return true;
  return false;
}
}  // namespace

TEST_CASE("partial rollout: aborted after every token and continued, a generation equals the uninterrupted one",
          "[trainer][async][partial]") {
  // A one-step run: its producer generates one batch and ends, after which the test drives the
  // rollout workers (2 ranks, DP chunks) itself with the shared abort flag.
  auto c = separate_config("partial_law", 2, 1, 1);
  c.data.max_response_length = 12;
  c.actor_rollout_ref.rollout.temperature = 1.5;
  auto o = quiet();
  o.partial_rollout = true;
  DataProto step_batch;
  auto hooks = std::make_shared<AsyncHooks>();
  hooks->before_train = [&](std::int64_t, DataProto const& b) { step_batch = b; };
  o.async_hooks = hooks;
  SepTrainer t(c, async_dataset(), task.charset(), o);
  t.step();
  auto* a = t.async_rollout();
  using Role = std::remove_reference_t<decltype(*a)>::role;
  auto& g = a->workers();
  DataProto const prompts = prompts_of(step_batch);
  a->control().abort = false;
  DataProto const full = g.call<&Role::generate_sequences>(prompts);
  REQUIRE_FALSE(any_unfinished(full));
  REQUIRE(values<std::int32_t>(full, "responses") == values<std::int32_t>(step_batch, "responses"));  // the producer's batch
  // every call stops after one token (the flag stays raised) and the next one continues
  a->control().abort = true;
  DataProto part = g.call<&Role::generate_sequences>(prompts);
  int calls = 1;
  REQUIRE(any_unfinished(part));
  while (any_unfinished(part)) {
    auto const len = values<std::int32_t>(part, "partial_rollout_len");
    for (auto x : len) REQUIRE((x == -1 || x == calls));  // one more token per call
    part = g.call<&Role::generate_sequences>(part);
    ++calls;
  }
  REQUIRE(calls > 2);
  for (char const* k : {"responses", "response_mask", "input_ids", "attention_mask", "prompts"}) {
    INFO(k);
    REQUIRE(values<std::int32_t>(part, k) == values<std::int32_t>(full, k));
  }
  auto const lp_full = values<float>(full, "rollout_log_probs"), lp_part = values<float>(part, "rollout_log_probs");
  REQUIRE(lp_part.size() == lp_full.size());
  for (std::size_t i = 0; i < lp_full.size(); ++i) REQUIRE(lp_part[i] == Approx(lp_full[i]).margin(1e-5));
  REQUIRE(part.non_tensor("uid") == full.non_tensor("uid"));
  // the comparison can fail: new weights after the first token change the rest of the rows
  a->control().abort = true;
  DataProto first = g.call<&Role::generate_sequences>(prompts);
  auto w = t.actor_weights();
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 0.5f);
  for (auto& x : w) x += nd(rng);
  g.call<&Role::update_weights>(std::make_shared<std::vector<float> const>(w));
  a->control().abort = false;
  DataProto mixed = g.call<&Role::generate_sequences>(first);
  REQUIRE_FALSE(any_unfinished(mixed));
  auto const rf = values<std::int32_t>(full, "responses"), rm = values<std::int32_t>(mixed, "responses");
  std::int64_t const R = full.tensor("responses").dim(1);
  for (std::size_t r = 0; r < rf.size() / static_cast<std::size_t>(R); ++r)  // the first token is the old weights'
    REQUIRE(rm[r * R] == rf[r * R]);
  REQUIRE(rm != rf);
}

TEST_CASE("partial rollout in separate_async: a weight sync aborts the batch in flight, which finishes with the new version",
          "[trainer][async][partial]") {
  // in_generate of step s waits until version s - 1 is published (its abort flag raised), so every
  // batch from step 2 on is generated: first token with version s - 2, the rest with s - 1.
  auto c = separate_config("partial_run", 1, 1, 6);
  c.data.max_response_length = 8;
  auto holder = std::make_shared<std::atomic<SepTrainer*>>(nullptr);
  auto hooks = std::make_shared<AsyncHooks>();
  hooks->in_generate = [holder](std::int64_t s, int) {  // the producer may start before the holder is set
    while (holder->load() == nullptr || holder->load()->async_rollout()->published_version() < s - 1)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
  };
  c.async_training.partial_rollout = true;  // the config key (the first test uses TrainerOptions::partial_rollout)
  SepTrainer t(c, async_dataset(), task.charset(), quiet(hooks));
  *holder = &t;
  auto const ms = run(t);
  REQUIRE(ms.size() == 6);
  for (std::size_t i = 0; i < ms.size(); ++i) {
    auto const& m = ms[i];
    std::int64_t const s = static_cast<std::int64_t>(i) + 1;
    INFO("step " << s);
    REQUIRE(m.at("separate_async/policy_version") == double(std::max<std::int64_t>(0, s - 2)));
    REQUIRE(m.at("separate_async/partial_rollout_resumes") == (s >= 2 ? 1.0 : 0.0));
    REQUIRE(m.at("training/off_policy/trajectory_staleness/max") == (s >= 2 ? 1.0 : 0.0));
    REQUIRE(m.at("training/off_policy/trajectory_staleness/min") == 0.0);
    REQUIRE(std::isfinite(m.at("actor/pg_loss")));
    REQUIRE(m.at("response_length/mean") >= 1.0);
  }
  // without partial rollout the same schedule gives other samples (the batch of step s is all version s - 2)
  auto holder2 = std::make_shared<std::atomic<SepTrainer*>>(nullptr);
  auto hooks2 = std::make_shared<AsyncHooks>();
  hooks2->in_generate = [holder2](std::int64_t s, int) {  // the producer may start before the holder is set
    while (holder2->load() == nullptr || holder2->load()->async_rollout()->published_version() < s - 1)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
  };
  auto c2 = separate_config("partial_off", 1, 1, 6);
  c2.data.max_response_length = 8;
  SepTrainer t2(c2, async_dataset(), task.charset(), quiet(hooks2));
  *holder2 = &t2;
  auto const m2 = run(t2);
  for (std::size_t i = 0; i < m2.size(); ++i) {
    REQUIRE(m2[i].at("separate_async/policy_version") == double(std::max<std::int64_t>(0, std::int64_t(i) - 1)));
    REQUIRE(m2[i].count("separate_async/partial_rollout_resumes") == 0);
  }
  REQUIRE(t2.actor_weights() != t.actor_weights());
}

TEST_CASE("colocate_async puts its rollout workers to sleep when idle: the KV cache is released and re-acquired",
          "[trainer][async][sleep]") {
  auto c = base_config("sleep", 6);
  c.trainer.v1.trainer_mode = "colocate_async";
  c.trainer.v1.colocate_async.num_warmup_batches = 1;
  SyncTrainer t(c, async_dataset(), task.charset(), quiet());
  auto const ms = run(t);
  double released = 0;
  for (auto const& m : ms) released += m.at("colocate_async/rollout_memory_released_bytes");
  REQUIRE(released > 0);
  // the producer ended after the last batch and released everything
  using Role = std::remove_reference_t<decltype(*t.async_rollout())>::role;
  for (auto b : t.async_rollout()->workers().call<&Role::memory_bytes>()) REQUIRE(b == 0);
  // separate_async keeps its cache (own devices): no such metric
  SepTrainer sep(separate_config("nosleep", 1, 1, 2), async_dataset(), task.charset(), quiet());
  auto const m2 = run(sep);
  REQUIRE(m2.back().count("separate_async/rollout_memory_released_bytes") == 0);
  using SRole = std::remove_reference_t<decltype(*sep.async_rollout())>::role;
  REQUIRE(sep.async_rollout()->workers().call<&SRole::memory_bytes>()[0] > 0);
}

}  // namespace test_trainer_async
