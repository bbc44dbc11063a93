// BM_GRPOStep: one step of the demo's GRPO trainer (32 prompts x 8 samples, 2-layer GPT, two DP
// workers), with the time of each stage (verl's timing_s/* keys) as counters, in seconds per
// step. The trainer is built once and warmed by two steps before timing, so buffers are reused.
// BM_GRPOStepSideBySide/workers:W: one GRPO step (verl's order: gen, reward, old_log_prob, ref,
// adv, update_actor, update_weights) on the shapes of the comparison with a plain PyTorch
// eager step (tools/torch_grpo_step.py restates that step and runs this benchmark in the same run):
// a 4-layer GPT, n_embd 128, 4 heads, character vocabulary (26 letters + '=' + specials),
// 64 prompts x 8 samples, prompts of 16 tokens (BOS + 14 letters + '='), up to 32 new tokens,
// KL loss against the reference (low_var_kl, 0.001), 4 mini-batches of 128 rows (one micro-batch
// each), log-prob passes in micro-batches of 128 rows. W DP workers (threads); the threads each
// worker uses come from OMP_NUM_THREADS / OPENBLAS_NUM_THREADS (PyTorch's "same threads": W = 1,
// both set to 2). Counters: each stage's seconds per step (timing_s/*), tokens/s and the mean
// response length (the rows stop at EOS, as in PyTorch's step).
#include <benchmark/benchmark.h>

#include <map>
#include <string>

#include <rlflow/trainer/trainer.hpp>

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

rlflow::TrainerConfig side_by_side_config(int workers) {
  rlflow::TrainerConfig c = rlflow::examples::grpo_reverse_config();
  c.data.max_prompt_length = 16;
  c.data.max_response_length = 32;
  c.data.train_batch_size = 64;
  c.actor_rollout_ref.model.n_layer = 4;
  c.actor_rollout_ref.model.n_head = 4;
  c.actor_rollout_ref.model.n_embd = 128;
  c.actor_rollout_ref.rollout.n = 8;
  c.actor_rollout_ref.actor.ppo_mini_batch_size = 16;  // 4 mini-batches of 16 x 8 rows
  c.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 128;
  c.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 128;
  c.actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu = 128;
  c.actor_rollout_ref.actor.use_kl_loss = true;
  c.actor_rollout_ref.actor.kl_loss_coef = 0.001;
  c.actor_rollout_ref.actor.kl_loss_type = "low_var_kl";
  c.actor_rollout_ref.actor.optim.lr = 1e-6;
  c.trainer.n_gpus_per_node = workers;
  c.trainer.total_training_steps = 1000000;
  c.trainer.default_local_dir = "/tmp/rlflow_bench_grpo_side_by_side";
  return c;
}

void BM_GRPOStepSideBySide(benchmark::State& state) {
  int const workers = static_cast<int>(state.range(0));
  rlflow::tasks::StringTask task;
  task.alphabet = "abcdefghijklmnopqrstuvwxyz";
  task.min_len = task.max_len = 14;
  rlflow::TrainerOptions opts;
  opts.console = false;
  GRPOTrainer t(side_by_side_config(workers), task.make_dataset(4096, 1), task.charset(), opts);
  t.step();  // warm-up: buffers sized, caches filled
  std::map<std::string, double> stage;
  double tokens = 0, resp = 0;
  for (auto _ : state) {
    auto m = t.step();
    for (auto const& [k, v] : m)
      if (k.rfind("timing_s/", 0) == 0) stage[k.substr(9)] += v;
    tokens += m["perf/total_num_tokens"];
    resp += m["response_length/mean"];
  }
  double const n = static_cast<double>(state.iterations());
  for (auto const& [k, v] : stage) state.counters[k] = v / n;
  state.counters["response_length"] = resp / n;
  state.counters["tokens/s"] = benchmark::Counter(tokens, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_GRPOStepSideBySide)->ArgName("workers")->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
}  // namespace

BENCHMARK_MAIN();
