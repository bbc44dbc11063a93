// BM_TrainerStep/mode:{sync,colocate_async,separate_async}: one GRPO step of the reverse task on
// a generation-heavy configuration: 4 prompts x 4 samples over a 62-character alphabet, responses
// up to 64 tokens sampled at temperature 4 from a policy that does not move (learning rate 1e-9, so every step generates
// about the same amount; at temperature 4 the tiny GPT rarely hits EOS early), bypass mode (old
// log-probs = rollout log-probs: no old-log-prob forward), no reference, one actor update a step
// (one mini-batch of 16 rows). Few rows and long responses make generation's
// token-by-token latency outweigh the update's one forward + backward pass. Two role worker
// threads in every mode: sync and colocate_async on a 2-device pool (colocate_async adds a rollout
// worker per device that time-shares it), separate_async on a 1-device trainer pool and a
// 1-device standalone rollout pool. One BLAS thread each (run with OPENBLAS_NUM_THREADS=1).
// Counters, seconds per step: gen (generation of one batch: sync's timing_s/gen, the async modes'
// <mode>/generate_s), train (the step minus the trainer's wait for its batch), step (wall time of
// a step), and overlap = (gen + train) / step, the overlap efficiency of docs/trainer.md (1 for
// sync by construction). RLFLOW_BENCH_RESPONSE_LENGTH overrides the 64.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include <rlflow/trainer/trainer.hpp>

#include "common/reverse_task.hpp"

namespace {
using Reward = rlflow::roles::RuleReward<rlflow::examples::ReverseScore>;

rlflow::TrainerConfig heavy_config(std::string const& mode) {
  rlflow::TrainerConfig c = rlflow::examples::grpo_reverse_config();
  char const* len = std::getenv("RLFLOW_BENCH_RESPONSE_LENGTH");
  c.data.max_response_length = len ? std::atoll(len) : 64;
  c.algorithm.rollout_correction.bypass_mode = true;  // no old-log-prob forward in the update
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
  // 62 letters and digits: at temperature 4 the untrained policy is near uniform over ~65 tokens,
  // so a response runs ~40 tokens on average before EOS (capped at 64) instead of ~6 with "abcd"
  task.alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  rlflow::TrainerOptions opts;
  opts.console = false;
  T t(heavy_config(mode), task.make_dataset(4096, 1), task.charset(), opts);
  t.step();
  t.step();
  double gen = 0, train = 0, step = 0, resp = 0;
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
    resp += m["response_length/mean"];
    if (std::getenv("RLFLOW_BENCH_TIMINGS"))  // diagnosis: every timing of the step
      for (auto const& [k, v] : m)
        if (k.starts_with("timing_s/") || k.ends_with("_s")) std::fprintf(stderr, "%s %s %.4f\n", mode.c_str(), k.c_str(), v);
  }
  double const n = static_cast<double>(state.iterations());
  state.counters["gen"] = gen / n;
  state.counters["train"] = train / n;
  state.counters["step"] = step / n;
  state.counters["overlap"] = (gen + train) / step;
  state.counters["response_length"] = resp / n;  // mean response tokens per row
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
