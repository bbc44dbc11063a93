// BM_TrainerStep/mode:{sync,colocate_async,separate_async}: one GRPO step of the reverse task on
// a generation-heavy configuration (4 prompts x 4 samples, responses up to 24 tokens sampled at
// temperature 4: few rows, so generation's token-by-token latency outweighs the one-pass update;
// one actor update a step, a learning rate too small to move the policy so that every step generates the
// same amount), two worker threads for the roles in every mode: sync and colocate_async on a
// 2-device pool (colocate_async adds a rollout worker per device that time-shares it),
// separate_async on a 1-device trainer pool and a 1-device standalone rollout pool. One BLAS
// thread each (run with OPENBLAS_NUM_THREADS=1). Counters, seconds per step: gen (generation
// of one batch: sync's timing_s/gen, the async modes' <mode>/generate_s), train (the step minus
// the trainer's wait for its batch), step (wall time of a step), and overlap = (gen + train) /
// step, the overlap efficiency of docs/trainer.md (1 for sync by construction).
#include <benchmark/benchmark.h>

#include <map>
#include <string>

#include <rlflow/trainer.hpp>

#include "common/reverse_task.hpp"

namespace {
using Reward = rlflow::roles::RuleReward<rlflow::examples::ReverseScore>;

rlflow::TrainerConfig heavy_config(std::string const& mode) {
  rlflow::TrainerConfig c = rlflow::examples::grpo_reverse_config();
  c.data.max_response_length = 24;
  c.actor_rollout_ref.rollout.temperature = 4.0;  // a flatter policy: fewer early EOS, longer responses
  c.data.train_batch_size = 4;
  c.actor_rollout_ref.actor.ppo_mini_batch_size = 4;
  c.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 8;
  c.actor_rollout_ref.actor.optim.lr = 1e-9;
  c.actor_rollout_ref.rollout.n = 4;
  c.trainer.total_training_steps = 1000000;
  c.trainer.default_local_dir = ("/tmp/rlflow_bench_trainer_" + mode).c_str();
  c.trainer.v1.trainer_mode = rlflow::config_string(mode);
  if (mode == "colocate_async") c.trainer.v1.colocate_async.num_warmup_batches = 1;
  if (mode == "separate_async") {
    c.trainer.n_gpus_per_node = 1;
    c.trainer.v1.separate_async.parameter_sync_step = 1;
    c.trainer.v1.separate_async.num_warmup_batches = 1;
    c.actor_rollout_ref.rollout.nnodes = 1;
    c.actor_rollout_ref.rollout.n_gpus_per_node = 1;
    c.actor_rollout_ref.rollout.checkpoint_engine.backend = "nccl";
  }
  return c;
}

template <class T>
void run_steps(benchmark::State& state, std::string const& mode) {
  rlflow::tasks::StringTask task;
  rlflow::TrainerOptions opts;
  opts.console = false;
  T t(heavy_config(mode), task.make_dataset(4096, 1), task.charset(), opts);
  t.step();
  t.step();
  double gen = 0, train = 0, step = 0;
  std::string const p = mode + "/";
  for (auto _ : state) {
    auto m = t.step();
    double const s = m["timing_s/step"];
    if (mode == "sync") {
      gen += m["timing_s/gen"];
      train += s - m["timing_s/gen"];
    } else {
      gen += m[p + "generate_s"];
      train += s - m["timing_s/gen"];  // timing_s/gen is the wait for the batch in the async modes
    }
    step += s;
  }
  double const n = static_cast<double>(state.iterations());
  state.counters["gen"] = gen / n;
  state.counters["train"] = train / n;
  state.counters["step"] = step / n;
  state.counters["overlap"] = (gen + train) / step;
}

void BM_Sync(benchmark::State& s) { run_steps<rlflow::Trainer<rlflow::GRPO, rlflow::Colocate<3>, Reward>>(s, "sync"); }
void BM_ColocateAsync(benchmark::State& s) {
  run_steps<rlflow::Trainer<rlflow::GRPO, rlflow::Colocate<3>, Reward>>(s, "colocate_async");
}
void BM_SeparateAsync(benchmark::State& s) {
  run_steps<rlflow::Trainer<rlflow::GRPO, rlflow::SeparateAsync, Reward>>(s, "separate_async");
}
// the names are fixed by the issue: BM_TrainerStep/mode:<trainer_mode>
[[maybe_unused]] bool const registered = [] {
  benchmark::RegisterBenchmark("BM_TrainerStep/mode:sync", BM_Sync)->Unit(benchmark::kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("BM_TrainerStep/mode:colocate_async", BM_ColocateAsync)->Unit(benchmark::kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("BM_TrainerStep/mode:separate_async", BM_SeparateAsync)->Unit(benchmark::kMillisecond)->UseRealTime();
  return true;
}();
}  // namespace

BENCHMARK_MAIN();
