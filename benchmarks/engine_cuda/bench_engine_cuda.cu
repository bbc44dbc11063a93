// benchmarks/engine_cuda/bench_engine_cuda.cu <-> include/rlflow/engine/cuda/{rollout,training,paged}_engine.cuh.
// BM_Decode/kv:1|0: tokens/s of the CUDA rollout engine generating 128 tokens for 64 prompts with
// and without the KV cache (kv:0 recomputes the whole sequence per token; same tokens).
// BM_Forward: the CUDA training engine's forward (compute_log_prob, B=32, T=256) in FLOP/s
// (matrix products + attention + LM head), and BM_Sgemm: cuBLAS sgemm of the same matrix shapes
// in the same run, in FLOP/s of those products; the ratio Forward / Sgemm is what gpu_check.sh
// reports (target >= 50%).
// BM_GenerateGroups/engine:static and /engine:paged: the GPU twin of engine/bench_paged.cpp's
// GRPO-shaped rollout (engine/paged_workload.hpp: 64 prompts x n = 8, P = 256, responses
// heavy-tailed up to R = 512; RLFLOW_BENCH_PAGED="G,n,P,R" replaces them). The static CUDA engine
// takes all G n rows in one generate; the CUDA paged engine G requests of n samples with a pool of
// 40% of the static slab (kv_cache_bytes set, not sized from gpu_memory_utilization). One warm-up
// generate, then 3 timed ones; the paged engine's prefix cache is dropped between them (untimed),
// so every one prefills its prompts. Counters: tokens/s (generated), tokens, kv_peak_bytes
// (static: its (B, P + R) slab; paged: the most blocks held at once), and for the paged engine
// kv_pool_bytes, preemptions and prompt_tokens (prefilled). gpu_check.sh reports paged / static
// tokens/s (target >= 2x) and peak KV bytes (target <= 40%); it runs each engine apart (Google
// Benchmark's CSV writer needs the same counters in every row) and the labels hold no comma.
// BM_BatchedBench/engine:static|paged/PP:../TG:../B:..: llama.cpp's batched-bench on the two CUDA
// engines (engine/paged_workload.hpp's batched_bench, the CPU benchmark's own): S_PP and S_TG
// tokens/s; gpu_check.sh keeps them in bench_batched.csv and prints them.
// Needs a GPU; without one every benchmark reports 'no CUDA device'.
#include <benchmark/benchmark.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <rlflow/engine/cuda/paged_engine.cuh>
#include <rlflow/engine/cuda/rollout_engine.cuh>
#include <rlflow/engine/cuda/training_engine.cuh>

#include <cstdint>
#include <vector>

#include "engine/paged_workload.hpp"  // the GRPO-shaped workload shared with engine/bench_paged.cpp

namespace {

namespace E = rlflow::engine;
using rlflow::Shape;
using rlflow::Tensor;

bool no_gpu(benchmark::State& st) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    cudaGetLastError();
    st.SkipWithError("no CUDA device");
    return true;
  }
  return false;
}

rlflow::model::GPTConfig model_config() {
  return {.vocab_size = 64, .max_seq_len = 512, .n_layer = 4, .n_head = 8, .n_embd = 256};
}

void BM_Decode(benchmark::State& st) {
  if (no_gpu(st)) return;
  bool const kv = st.range(0) != 0;
  E::cuda::RolloutEngine r(model_config());
  r.set_use_kv_cache(kv);
  int const B = 64, P = 16;
  Tensor ids = Tensor::full(Shape{B, P}, std::int32_t(5));
  Tensor am = Tensor::full(Shape{B, P}, std::int32_t(1));
  E::SamplingParams sp;
  sp.max_new_tokens = 128;
  sp.eos_id = -1;  // every row generates all 128 tokens
  std::vector<std::uint64_t> seeds(B);
  for (int i = 0; i < B; ++i) seeds[std::size_t(i)] = std::uint64_t(i) * 7919u + 1u;
  r.generate(ids, am, sp, seeds);  // warm-up: buffers allocated once
  std::int64_t tokens = 0;
  for (auto _ : st) {
    auto out = r.generate(ids, am, sp, seeds);
    tokens += B * sp.max_new_tokens;
    benchmark::DoNotOptimize(out.responses.data<std::int32_t>());
  }
  st.counters["tokens/s"] = benchmark::Counter(double(tokens), benchmark::Counter::kIsRate);
}

// matrix-product shapes of one forward (M, K, N): per layer qkv, proj, fc, fc-proj, then the LM head
struct Shape3 {
  int M, K, N;
};
std::vector<Shape3> forward_gemms(rlflow::model::GPTConfig const& m, int B, int T, int R) {
  std::vector<Shape3> s;
  int const N = B * T, C = m.n_embd;
  for (int l = 0; l < m.n_layer; ++l) {
    s.push_back({N, C, 3 * C});
    s.push_back({N, C, C});
    s.push_back({N, C, 4 * C});
    s.push_back({N, 4 * C, C});
  }
  s.push_back({B * R, C, m.vocab_size});
  return s;
}
double gemm_flops(std::vector<Shape3> const& s) {
  double f = 0;
  for (auto const& x : s) f += 2.0 * x.M * x.K * x.N;
  return f;
}

constexpr int fB = 32, fT = 256, fR = 128;

void BM_Forward(benchmark::State& st) {
  if (no_gpu(st)) return;
  auto const m = model_config();
  E::cuda::TrainingEngine t(m);
  Tensor ids = Tensor::full(Shape{fB, fT}, std::int32_t(3));
  Tensor am = Tensor::full(Shape{fB, fT}, std::int32_t(1));
  t.compute_log_prob(ids, am, fR, 1.0f, true);  // warm-up
  for (auto _ : st) {
    auto r = t.compute_log_prob(ids, am, fR, 1.0f, true);
    benchmark::DoNotOptimize(r.log_probs.data<float>());
  }
  // attention: scores and weighted sum, 2 * 2 * B * T * T * C (full T x T, as the kernel computes)
  double const attn = 4.0 * fB * double(fT) * fT * m.n_embd * m.n_layer;
  double const flops = gemm_flops(forward_gemms(m, fB, fT, fR)) + attn;
  st.counters["FLOP/s"] = benchmark::Counter(flops * double(st.iterations()), benchmark::Counter::kIsRate);
}

void BM_Sgemm(benchmark::State& st) {
  if (no_gpu(st)) return;
  auto const m = model_config();
  auto const shapes = forward_gemms(m, fB, fT, fR);
  std::size_t big = 0;
  for (auto const& x : shapes) big = std::max({big, std::size_t(x.M) * x.K, std::size_t(x.K) * x.N, std::size_t(x.M) * x.N});
  float *a, *b, *c;
  cudaMalloc(&a, big * 4);
  cudaMalloc(&b, big * 4);
  cudaMalloc(&c, big * 4);
  cudaMemset(a, 0, big * 4);
  cudaMemset(b, 0, big * 4);
  cublasHandle_t h;
  cublasCreate(&h);
  float const one = 1.0f, zero = 0.0f;
  auto run = [&] {
    for (auto const& x : shapes) cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, x.N, x.M, x.K, &one, b, x.K, a, x.K, &zero, c, x.N);
    cudaDeviceSynchronize();
  };
  run();
  for (auto _ : st) run();
  st.counters["FLOP/s"] = benchmark::Counter(gemm_flops(shapes) * double(st.iterations()), benchmark::Counter::kIsRate);
  cublasDestroy(h);
  cudaFree(a), cudaFree(b), cudaFree(c);
}

// ---- the GRPO-shaped rollout of engine/bench_paged.cpp on the GPU -------------------------------
namespace W = rlflow_bench::paged;

constexpr int kGroupsIterations = 3;

void BM_GenerateGroupsStatic(benchmark::State& st) {
  if (no_gpu(st)) return;
  W::Workload const wl = W::workload();
  auto const c = W::model_cfg(wl.P + wl.R);
  E::cuda::RolloutEngine ro(c);
  ro.load_weights(W::model_weights(c));
  W::StaticBatch const sb = W::static_batch(wl, W::make_groups(wl));
  Tensor const ti = Tensor::from(sb.ids, Shape{sb.B, sb.P}), tm = Tensor::from(sb.mask, Shape{sb.B, sb.P});
  E::SamplingParams const sp = W::sampling(wl.R);
  ro.generate(ti, tm, sp, sb.seeds);  // warm-up: the slab and the activations allocated once
  double tokens = 0;
  for (auto _ : st) {
    auto r = ro.generate(ti, tm, sp, sb.seeds);
    tokens = 0;
    for (auto m : r.response_mask.span<std::int32_t const>()) tokens += m;
  }
  st.counters["tokens/s"] = benchmark::Counter(tokens, benchmark::Counter::kIsIterationInvariantRate);
  st.counters["tokens"] = tokens;
  st.counters["kv_peak_bytes"] = double(W::static_kv_bytes(c, sb.B, wl.P + wl.R));
  st.SetLabel(W::workload_label(wl) + "; one batch of G n rows");
}

void BM_GenerateGroupsPaged(benchmark::State& st) {
  if (no_gpu(st)) return;
  W::Workload const wl = W::workload();
  auto const c = W::model_cfg(wl.P + wl.R);
  E::cuda::PagedEngine pe(c, W::paged_config(c, wl));
  std::vector<float> const w = W::model_weights(c);
  pe.load_weights(w);
  W::Groups const gs = W::make_groups(wl);
  std::vector<E::RequestParams> const ps = W::request_params(wl, gs);
  pe.generate(gs.prompts, ps);  // warm-up: the block pool and the activations allocated once
  double tokens = 0;
  E::PagedMetrics m;
  for (auto _ : st) {
    st.PauseTiming();
    pe.load_weights(w);  // drops the prefix cache: every generate prefills its prompts
    pe.reset_metrics();
    st.ResumeTiming();
    auto out = pe.generate(gs.prompts, ps);
    m = pe.metrics();
    tokens = double(m.generation_tokens);
    benchmark::DoNotOptimize(out.data());
  }
  st.counters["tokens/s"] = benchmark::Counter(tokens, benchmark::Counter::kIsIterationInvariantRate);
  st.counters["tokens"] = tokens;
  st.counters["kv_peak_bytes"] = double(m.peak_kv_bytes());
  st.counters["kv_pool_bytes"] = double(pe.pool().bytes());
  st.counters["preemptions"] = double(m.preemptions);
  st.counters["prompt_tokens"] = double(m.prompt_tokens_prefilled);
  st.SetLabel(W::workload_label(wl) + "; block 16; max_num_seqs 256; max_num_batched_tokens 8192; pool 40% of static");
}

// llama.cpp's batched-bench on the CUDA engines (engine/paged_workload.hpp's batched_bench)
template <class Engine, bool Paged>
void BM_BatchedBench(benchmark::State& st) {
  if (no_gpu(st)) return;
  W::batched_bench<Engine, Paged>(st);
}

}  // namespace

BENCHMARK(BM_Decode)->ArgName("kv")->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Forward)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Sgemm)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_GenerateGroupsStatic)->Name("BM_GenerateGroups/engine:static")->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(kGroupsIterations);
BENCHMARK(BM_GenerateGroupsPaged)->Name("BM_GenerateGroups/engine:paged")->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(kGroupsIterations);
BENCHMARK_TEMPLATE2(BM_BatchedBench, E::cuda::RolloutEngine, false)->Name("BM_BatchedBench/engine:static")->Apply(W::batched_args)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
BENCHMARK_TEMPLATE2(BM_BatchedBench, E::cuda::PagedEngine, true)->Name("BM_BatchedBench/engine:paged")->Apply(W::batched_args)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
BENCHMARK_MAIN();
