// benchmarks/engine/bench_lora.cpp: LoRA (actor_rollout_ref.model.lora_rank) in the training
// engine's update, and merged against on-the-fly adapters for the rollout.
//   BM_Update/lora:0|16: one update (forward + backward of the log-probs and entropy of B = 2 rows
//     of T = 64 tokens, then AdamW) on the Qwen2.5-0.5B shape (V 151936, C 896, 24 layers, 14 / 2
//     heads, MLP 4864, tied; about 494 M parameters), lora:16 with r = 16, alpha 32 on all-linear.
//     Counters: the engine's parameter, gradient, optimizer-state and activation bytes, their sum
//     (engine_MB) and the process's peak resident set (peak_rss_MB: run each variant in its own
//     process, --benchmark_filter, for a per-variant figure). RLFLOW_BENCH_LORA_SMALL=1 runs a
//     4-layer, C = 256 shape of the same family instead (machines with little memory).
//   BM_LoraForward/merged|on_the_fly/rows:M: one forward of M rows (8: a decode step of 8
//     sequences; 512: a prefill) on a Qwen2 of L = 4, C = 256, V = 512 with r = 16 adapters on
//     all-linear, either merged into the weights or applied per linear; BM_LoraMerge: one merge
//     (W += s B A for every module) of that model, what a weight sync adds when merging.
// Run: ./build/benchmarks/engine/bench_lora --benchmark_filter='BM_Update/lora:0'  (then lora:16)
#include <benchmark/benchmark.h>

#include <sys/resource.h>

#include <cstdlib>
#include <random>
#include <vector>

#include <rlflow/engine/training_engine.hpp>

using rlflow::DType;
using rlflow::Shape;
using rlflow::Tensor;
using rlflow::engine::TrainingEngine;
using rlflow::model::Arch;
using rlflow::model::GPTConfig;

namespace {

GPTConfig qwen25_05b() {
  GPTConfig c{.vocab_size = 151936, .max_seq_len = 128, .n_layer = 24, .n_head = 14, .n_embd = 896};
  if (std::getenv("RLFLOW_BENCH_LORA_SMALL")) c = GPTConfig{.vocab_size = 4096, .max_seq_len = 128, .n_layer = 4, .n_head = 4, .n_embd = 256};
  c.arch = Arch::qwen2;
  c.n_kv_head = 2;
  c.intermediate_size = c.n_embd == 896 ? 4864 : 3 * c.n_embd;
  c.qkv_bias = true;
  c.rope_theta = 1000000.0;
  c.tie_word_embeddings = true;
  return c;
}

rlflow::model::LoraConfig lora16() {
  rlflow::model::LoraConfig lc;
  lc.rank = 16;
  lc.alpha = 32;
  return lc;
}

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;  // KiB on Linux
}

void BM_Update(benchmark::State& state, int rank) {
  rlflow::model::layers::set_worker_threads(1);
  GPTConfig const cfg = qwen25_05b();
  int const B = 2, T = 64, R = 32;
  TrainingEngine eng(cfg);
  if (rank > 0) {
    auto lc = lora16();
    lc.rank = rank;
    eng.enable_lora(lc);
  }
  std::mt19937 g(3);
  Tensor ids = Tensor::empty(DType::int32, Shape{B, T}), mask = Tensor::empty(DType::int32, Shape{B, T});
  for (int i = 0; i < B * T; ++i) ids.data<std::int32_t>()[i] = int(g() % unsigned(cfg.vocab_size)), mask.data<std::int32_t>()[i] = 1;
  Tensor dl = Tensor::empty(DType::float32, Shape{B, R}), de = Tensor::empty(DType::float32, Shape{B, R});
  for (int i = 0; i < B * R; ++i) dl.data<float>()[i] = -1.0f / float(B * R), de.data<float>()[i] = 1e-3f;
  for (auto _ : state) {
    eng.zero_grad();
    eng.forward(ids, mask, R, 1.0f, true);
    eng.backward(dl, de);
    benchmark::DoNotOptimize(eng.optimizer_step());
  }
  double const mb = 1.0 / (1024.0 * 1024.0);
  double const params = double(eng.params().size() + (rank > 0 ? eng.trainable().size() : 0)) * 4;
  double const grads = double(eng.grads().size()) * 4, opt = double(eng.optimizer().m().size() + eng.optimizer().v().size()) * 4;
  double const acts = double(eng.model().workspace_bytes());
  state.counters["params_MB"] = params * mb;
  state.counters["grads_MB"] = grads * mb;
  state.counters["optimizer_state_MB"] = opt * mb;
  state.counters["activations_MB"] = acts * mb;
  state.counters["engine_MB"] = (params + grads + opt + acts) * mb;
  state.counters["trainable_params"] = double(eng.trainable().size());
  state.counters["peak_rss_MB"] = peak_rss_mb();
}
BENCHMARK_CAPTURE(BM_Update, lora0, 0)->Name("BM_Update/lora:0")->Unit(benchmark::kSecond)->UseRealTime()->Iterations(2);
BENCHMARK_CAPTURE(BM_Update, lora16, 16)->Name("BM_Update/lora:16")->Unit(benchmark::kSecond)->UseRealTime()->Iterations(2);

GPTConfig small_qwen2() {
  GPTConfig c{.vocab_size = 512, .max_seq_len = 512, .n_layer = 4, .n_head = 4, .n_embd = 256};
  c.arch = Arch::qwen2;
  c.n_kv_head = 2;
  c.intermediate_size = 768;
  c.qkv_bias = true;
  return c;
}

void BM_LoraForward(benchmark::State& state, bool merged) {
  rlflow::model::layers::set_worker_threads(1);
  int const rows = int(state.range(0));
  GPTConfig const cfg = small_qwen2();
  TrainingEngine lora(cfg), plain(cfg);
  lora.enable_lora(lora16());
  std::mt19937 g(5);
  std::normal_distribution<float> n(0.0f, 0.02f);
  for (auto& x : lora.trainable()) x = n(g);
  std::vector<float> full(lora.layout().size());
  lora.policy_weights(full);
  plain.load_weights(full);
  rlflow::model::GPT& m = merged ? plain.model() : lora.model();
  int const B = 8, T = rows / B;
  std::vector<std::int32_t> ids(static_cast<std::size_t>(rows)), mask(static_cast<std::size_t>(rows), 1);
  for (auto& t : ids) t = std::int32_t(g() % 512u);
  for (auto _ : state) m.forward(ids.data(), mask.data(), B, T);
  state.counters["rows/s"] = benchmark::Counter(double(rows), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK_CAPTURE(BM_LoraForward, merged, true)->Name("BM_LoraForward/merged")->Arg(8)->Arg(512)->ArgName("rows")->UseRealTime();
BENCHMARK_CAPTURE(BM_LoraForward, on_the_fly, false)->Name("BM_LoraForward/on_the_fly")->Arg(8)->Arg(512)->ArgName("rows")->UseRealTime();

void BM_LoraMerge(benchmark::State& state) {
  rlflow::model::layers::set_worker_threads(1);
  GPTConfig const cfg = small_qwen2();
  TrainingEngine lora(cfg);
  lora.enable_lora(lora16());
  std::vector<float> full(lora.layout().size());
  for (auto _ : state) lora.policy_weights(full);  // copy of the base + the merge, as a sync does
}
BENCHMARK(BM_LoraMerge)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
