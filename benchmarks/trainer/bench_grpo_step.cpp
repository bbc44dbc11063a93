// BM_GRPOStep: one step of the demo's GRPO trainer (32 prompts x 8 samples, 2-layer GPT, two DP
// workers), with the time of each stage (verl's timing_s/* keys) as counters, in seconds per
// step. The trainer is built once and warmed by two steps before timing, so buffers are reused.
#include <benchmark/benchmark.h>

#include <map>
#include <string>

#include <rlflow/trainer.hpp>

#include "common/reverse_task.hpp"

namespace {
using GRPOTrainer = rlflow::Trainer<rlflow::GRPO, rlflow::Colocate<3>, rlflow::roles::RuleReward<rlflow::examples::ReverseScore>>;

void BM_GRPOStep(benchmark::State& state) {
  rlflow::TrainerConfig cfg = rlflow::examples::grpo_reverse_config();
  cfg.trainer.total_training_steps = 1000000;
  cfg.trainer.default_local_dir = "/tmp/rlflow_bench_grpo_step";
  rlflow::tasks::StringTask task;
  rlflow::TrainerOptions opts;
  opts.console = false;
  GRPOTrainer t(cfg, task.make_dataset(4096, 1), task.charset(), opts);
  t.step();
  t.step();
  std::map<std::string, double> stage;
  double tokens = 0;
  for (auto _ : state) {
    auto m = t.step();
    for (auto const& [k, v] : m)
      if (k.rfind("timing_s/", 0) == 0) stage[k.substr(9)] += v;
    tokens += m["perf/total_num_tokens"];
  }
  double const n = static_cast<double>(state.iterations());
  for (auto const& [k, v] : stage) state.counters[k] = v / n;
  state.counters["tokens/s"] = benchmark::Counter(tokens, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_GRPOStep)->Unit(benchmark::kMillisecond)->UseRealTime();
}  // namespace

BENCHMARK_MAIN();
