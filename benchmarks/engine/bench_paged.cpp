// benchmarks/engine/bench_paged.cpp: the paged rollout engine (engine/paged_engine.hpp) against
// the static KV-cache engine (engine/rollout_engine.hpp), same model, same threads, same tokens:
//   BM_GenerateGroups/engine:static and /engine:paged: a GRPO-shaped rollout, G prompts x n
//     samples, prompt length P, response lengths heavy-tailed up to R (defaults: 64 x 8,
//     P = 256, R = 512). The static engine runs all G n rows in one generate (the trainer's road);
//     the paged engine takes G requests of n samples. Counters: tokens/s (generated), tokens,
//     kv_peak_bytes (static: its (B, P + R) slab; paged: the most blocks held at once), and for the
//     paged engine preemptions and prefilled prompt tokens.
//   BM_BatchedBench/engine:{static,paged}/PP:../TG:../B:..: llama.cpp's batched-bench: B sequences of
//     PP prompt tokens then TG generated ones; S_PP (prompt tokens/s: the prefill and first token)
//     and S_TG (generated tokens/s after it), no EOS (engine/paged_workload.hpp's batched_bench,
//     which the GPU benchmark runs on the CUDA engines too).
// The workload and the model (Llama-shaped, two layers, zeroed attention and MLP outputs, so the
// next token follows a per-token EOS hazard: heavy-tailed lengths) are in engine/paged_workload.hpp,
// shared with the GPU twin BM_GenerateGroups of engine_cuda/bench_engine_cuda.cu.
// Scale: RLFLOW_BENCH_PAGED="G,n,P,R" replaces the defaults (e.g. "16,8,128,256" on a small box).
// Run: OPENBLAS_NUM_THREADS=1 ./build/benchmarks/engine/bench_paged --benchmark_filter=GenerateGroups
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <rlflow/engine/paged_engine.hpp>
#include <rlflow/engine/rollout_engine.hpp>
#include <rlflow/model/gpt.hpp>

#include "engine/paged_workload.hpp"  // Workload, model_cfg, model_weights, make_groups, ...

using rlflow::Shape;
using rlflow::Tensor;
using rlflow::model::GPTConfig;

namespace {

using namespace rlflow_bench::paged;

void BM_GenerateGroupsStatic(benchmark::State& state) {
  Workload const wl = workload();
  GPTConfig const c = model_cfg(wl.P + wl.R);
  rlflow::engine::RolloutEngine ro(c);
  ro.load_weights(model_weights(c));
  StaticBatch const sb = static_batch(wl, make_groups(wl));
  int const B = sb.B;
  Tensor const ti = Tensor::from(sb.ids, Shape{B, wl.P}), tm = Tensor::from(sb.mask, Shape{B, wl.P});
  double tokens = 0;
  for (auto _ : state) {
    auto r = ro.generate(ti, tm, sampling(wl.R), sb.seeds);
    tokens = 0;
    for (auto m : r.response_mask.span<std::int32_t const>()) tokens += m;
  }
  state.counters["tokens/s"] = benchmark::Counter(tokens, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["tokens"] = tokens;
  state.counters["kv_peak_bytes"] = double(static_kv_bytes(c, B, wl.P + wl.R));
  state.SetLabel(workload_label(wl) + ", one batch of G n rows");
}

void BM_GenerateGroupsPaged(benchmark::State& state) {
  Workload const wl = workload();
  GPTConfig const c = model_cfg(wl.P + wl.R);
  rlflow::engine::PagedEngine pe(c, paged_config(c, wl));
  pe.load_weights(model_weights(c));
  Groups const gs = make_groups(wl);
  std::vector<rlflow::engine::RequestParams> const ps = request_params(wl, gs);
  double tokens = 0;
  rlflow::engine::PagedMetrics m;
  for (auto _ : state) {
    pe.reset_metrics();
    auto out = pe.generate(gs.prompts, ps);
    m = pe.metrics();
    tokens = double(m.generation_tokens);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["tokens/s"] = benchmark::Counter(tokens, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["tokens"] = tokens;
  state.counters["kv_peak_bytes"] = double(m.peak_kv_bytes());
  state.counters["kv_pool_bytes"] = double(pe.pool().bytes());
  state.counters["preemptions"] = double(m.preemptions);
  state.counters["prompt_tokens"] = double(m.prompt_tokens_prefilled);
  state.SetLabel(workload_label(wl) + ", block 16, max_num_seqs 256, max_num_batched_tokens 8192, pool 40% of static");
}

}  // namespace

BENCHMARK(BM_GenerateGroupsStatic)->Name("BM_GenerateGroups/engine:static")->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1);
BENCHMARK(BM_GenerateGroupsPaged)->Name("BM_GenerateGroups/engine:paged")->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1);
BENCHMARK_TEMPLATE2(batched_bench, rlflow::engine::RolloutEngine, false)->Name("BM_BatchedBench/engine:static")->Apply(batched_args)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
BENCHMARK_TEMPLATE2(batched_bench, rlflow::engine::PagedEngine, true)->Name("BM_BatchedBench/engine:paged")->Apply(batched_args)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

BENCHMARK_MAIN();
