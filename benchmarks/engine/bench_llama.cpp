// benchmarks/engine/bench_llama.cpp: the Llama family on the CPU engines at Qwen2.5-0.5B's layer
// shapes (hidden 896, 14 heads, 2 KV heads, head_dim 64, intermediate 4864; two layers):
//   BM_ModelForward/arch:qwen2 vs BM_SgemmSameShapes/arch:qwen2: the trunk forward's FLOP/s next
//     to OpenBLAS sgemm FLOP/s on exactly the forward's matrix products (q|k|v, o_proj, gate|up,
//     down), in the same run; counter FLOP/s (matmuls only).
//   BM_RolloutDecode/arch:qwen2: tokens/s of generate (B = 8 prompts of 32 tokens, 32 new tokens,
//     KV cache) on the same two layers with a small vocabulary (the trunk's cost).
//   BM_RolloutDecode/arch:qwen2/stable:off: the same with BLAS products only (the batch-invariant
//     kernels switched off).
//   BM_InvariantDecode/arch:qwen2[/stable:off]: the same workload through the paged engine with
//     batch_invariant on, with the batch-invariant products or one BLAS call per row.
//   BM_StableProduct/layout:0|1/M:m/impl:1|0: one decode product (0: gate|up, nt; 1: down, nn) by
//     the batch-invariant kernel (impl:1) and by sgemm (impl:0).
//   BM_LMHead/arch:qwen2: the LM head and sampling at V = 151,936 (one decode step's head for
//     B = 8 rows: the (8, 896) x (896, 151936) product and a top-k 50 draw), tokens/s.
// Run: ./build/benchmarks/engine/bench_llama (one thread: OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1)
#include <benchmark/benchmark.h>

#include <cblas.h>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <rlflow/engine/paged_engine.hpp>
#include <rlflow/engine/rollout_engine.hpp>
#include <rlflow/engine/sampling.hpp>
#include <rlflow/model/gpt.hpp>
#include <rlflow/model/published_models.hpp>
#include <rlflow/model/stable_products.hpp>

using rlflow::DType;
using rlflow::Shape;
using rlflow::Tensor;
using rlflow::model::GPTConfig;

namespace {

//! Qwen2.5-0.5B's layer shapes, two layers; vocabulary 'V'.
GPTConfig qwen2_half_b(int V, int positions) {
  GPTConfig c = rlflow::model::published_model("qwen2.5-0.5b").config;
  c.vocab_size = V;
  c.max_seq_len = positions;
  c.n_layer = 2;
  c.validate();
  return c;
}

constexpr int fwd_B = 2, fwd_T = 64;

//! FLOPs of the trunk's products per forward: per layer 2 N C (QKV + Q) + 2 N C 3F.
double forward_flops(GPTConfig const& c) {
  double const N = double(fwd_B) * fwd_T, C = c.n_embd, F = c.intermediate_size;
  return c.n_layer * (2.0 * N * C * (c.qkv_dim() + c.attn_dim()) + 2.0 * N * C * 3.0 * F);
}

void BM_ModelForward(benchmark::State& state) {
  GPTConfig const c = qwen2_half_b(64, fwd_T);
  rlflow::model::GPT model(c);
  std::mt19937 g(3);
  std::vector<std::int32_t> ids(std::size_t(fwd_B) * fwd_T), mask(ids.size(), 1);
  for (auto& x : ids) x = std::int32_t(g() % 64u);
  for (auto _ : state) {
    model.forward(ids.data(), mask.data(), fwd_B, fwd_T);
    benchmark::ClobberMemory();
  }
  state.counters["FLOP/s"] = benchmark::Counter(forward_flops(c), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel("trunk forward B=2 T=64, Qwen2.5-0.5B layers x2 (FLOPs counted: matmuls only)");
}
BENCHMARK(BM_ModelForward)->Name("BM_ModelForward/arch:qwen2")->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_SgemmSameShapes(benchmark::State& state) {
  GPTConfig const c = qwen2_half_b(64, fwd_T);
  int const N = fwd_B * fwd_T, C = c.n_embd, QKV = c.qkv_dim(), Q = c.attn_dim(), F = c.intermediate_size;
  std::vector<float> x(std::size_t(N) * 2 * F, 0.01f), w(std::size_t(2) * F * C, 0.02f), y(std::size_t(N) * 2 * F);
  for (auto _ : state) {
    for (int l = 0; l < c.n_layer; ++l) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, QKV, C, 1.0f, x.data(), C, w.data(), C, 1.0f, y.data(), QKV);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, Q, 1.0f, x.data(), Q, w.data(), C, 1.0f, y.data(), C);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, 2 * F, C, 1.0f, x.data(), C, w.data(), C, 1.0f, y.data(), 2 * F);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, F, 1.0f, x.data(), F, w.data(), C, 1.0f, y.data(), C);
    }
    benchmark::ClobberMemory();
  }
  state.counters["FLOP/s"] = benchmark::Counter(forward_flops(c), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel("the same sgemm calls alone");
}
BENCHMARK(BM_SgemmSameShapes)->Name("BM_SgemmSameShapes/arch:qwen2")->Unit(benchmark::kMillisecond)->UseRealTime();

//! The decode benchmarks' batch: B prompts of P tokens, R new tokens each.
constexpr int dec_B = 8, dec_P = 32, dec_R = 32;

//! Switches the batch-invariant products (model/stable_products.hpp) on or off for one benchmark
//! and back to what they were after it.
struct StableProducts {
  bool const was = rlflow::model::stable::available();
  explicit StableProducts(bool on) { rlflow::model::stable::set_enabled(on); }
  ~StableProducts() { rlflow::model::stable::set_enabled(was); }
  StableProducts(StableProducts const&) = delete;
  StableProducts& operator=(StableProducts const&) = delete;
  //! 'label', marked when the products are BLAS only.
  static std::string label(std::string label) {
    return rlflow::model::stable::available() ? label : label + "; BLAS products";
  }
};

//! BM_RolloutDecode/arch:qwen2[/stable:off]: the decode with the batch-invariant products
//! (where the CPU has them) or BLAS only.
template <bool Stable>
void BM_RolloutDecode(benchmark::State& state) {
  StableProducts const sw(Stable);
  int const B = dec_B, P = dec_P, R = dec_R;
  GPTConfig const c = qwen2_half_b(64, P + R);
  rlflow::engine::RolloutEngine ro(c);
  std::mt19937 g(1);
  std::vector<std::int32_t> ids(std::size_t(B) * P), mask(ids.size(), 1);
  for (auto& x : ids) x = std::int32_t(g() % 64u);
  Tensor const ti = Tensor::from(ids, Shape{B, P}), tm = Tensor::from(mask, Shape{B, P});
  std::vector<std::uint64_t> seeds(B);
  for (int b = 0; b < B; ++b) seeds[std::size_t(b)] = std::uint64_t(b) + 1;
  rlflow::engine::SamplingParams sp;
  sp.max_new_tokens = R;
  for (auto _ : state) {
    auto r = ro.generate(ti, tm, sp, seeds);
    benchmark::DoNotOptimize(r.log_probs.data<float>());
  }
  state.counters["tokens/s"] = benchmark::Counter(double(B) * R, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(StableProducts::label("B=8 P=32 R=32, Qwen2.5-0.5B layers x2, KV cache"));
}
BENCHMARK(BM_RolloutDecode<true>)->Name("BM_RolloutDecode/arch:qwen2")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_RolloutDecode<false>)->Name("BM_RolloutDecode/arch:qwen2/stable:off")->Unit(benchmark::kMillisecond)->UseRealTime();

//! BM_InvariantDecode/arch:qwen2[/stable:off]: BM_RolloutDecode's workload through the paged engine
//! with batch_invariant on (the agent loop's mode: each row's bits independent of the batch), with
//! the batch-invariant products or with one BLAS call per row.
template <bool Stable>
void BM_InvariantDecode(benchmark::State& state) {
  StableProducts const sw(Stable);
  int const B = dec_B, P = dec_P, R = dec_R;
  GPTConfig const c = qwen2_half_b(64, P + R);
  std::vector<float> w(rlflow::model::param_count(c));
  rlflow::model::init_params(c, w);
  rlflow::engine::PagedEngineConfig pc;
  pc.batch_invariant = true;
  pc.enable_prefix_caching = false;
  rlflow::engine::PagedEngine e(c, pc);
  e.load_weights(w);
  std::mt19937 g(1);
  std::vector<std::vector<std::int32_t>> prompts(B, std::vector<std::int32_t>(P));
  std::vector<rlflow::engine::RequestParams> params(B);
  for (int b = 0; b < B; ++b) {
    for (auto& x : prompts[std::size_t(b)]) x = std::int32_t(g() % 64u);
    params[std::size_t(b)].max_tokens = R;
    params[std::size_t(b)].seed = std::uint64_t(b) + 1;
  }
  for (auto _ : state) benchmark::DoNotOptimize(e.generate(prompts, params).data());
  state.counters["tokens/s"] = benchmark::Counter(double(B) * R, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(StableProducts::label("paged, batch_invariant, B=8 P=32 R=32"));
}
BENCHMARK(BM_InvariantDecode<true>)->Name("BM_InvariantDecode/arch:qwen2")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_InvariantDecode<false>)->Name("BM_InvariantDecode/arch:qwen2/stable:off")->Unit(benchmark::kMillisecond)->UseRealTime();

//! BM_StableProduct/layout:nt|nn/M:m/impl:stable|sgemm: one product of a decode step at
//! Qwen2.5-0.5B's shapes (nt: gate|up, (M, 896) x (896, 9728); nn: down, (M, 4864) x (4864, 896)),
//! the batch-invariant kernel against OpenBLAS sgemm of the same product; counter GB/s of weights.
void BM_StableProduct(benchmark::State& state) {
  bool const nt = state.range(0) == 0, stable = state.range(2) != 0;
  int const M = int(state.range(1)), K = nt ? 896 : 4864, N = nt ? 9728 : 896;
  if (stable && !rlflow::model::stable::available()) {
    state.SkipWithError("no AVX-512F on this CPU: the stable products run their plain reference");
    return;
  }
  std::mt19937 g(4);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  std::vector<float> x(std::size_t(M) * K), w(std::size_t(N) * K), out(std::size_t(M) * N);
  for (auto& v : x) v = nd(g) * 50.0f;
  for (auto& v : w) v = nd(g);
  for (auto _ : state) {
    if (stable && nt) rlflow::model::stable::nt(out.data(), x.data(), w.data(), nullptr, M, K, N);
    else if (stable) rlflow::model::stable::nn(out.data(), x.data(), w.data(), nullptr, M, K, N);
    else if (nt) rlflow::model::layers::linear_nt_forward(out.data(), x.data(), w.data(), nullptr, M, K, N);
    else rlflow::model::layers::linear_nn_forward(out.data(), x.data(), w.data(), nullptr, M, K, N);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GB/s"] = benchmark::Counter(double(N) * K * sizeof(float) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_StableProduct)
    ->ArgNames({"layout", "M", "impl"})
    ->ArgsProduct({{0, 1}, {1, 8, 32}, {1, 0}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

void BM_LMHead(benchmark::State& state) {
  int const B = 8, C = 896, V = 151936;
  std::mt19937 g(2);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  std::vector<float> h(std::size_t(B) * C), w(std::size_t(V) * C), logits(std::size_t(B) * V);
  for (auto& x : h) x = nd(g) * 50.0f;
  for (auto& x : w) x = nd(g);
  rlflow::engine::SamplingParams sp;
  sp.top_k = 50;
  std::uint64_t step = 0;
  std::vector<std::int32_t> idx(V);
  std::vector<double> wk(V);
  for (auto _ : state) {
    rlflow::engine::detail::products_nt(false, logits.data(), h.data(), w.data(), nullptr, B, C, V);  // as the engines
    for (int b = 0; b < B; ++b)
      benchmark::DoNotOptimize(rlflow::engine::sample_token(logits.data() + std::size_t(b) * V, V, sp, std::uint64_t(b) + 1, step,
                                                            idx.data(), wk.data()));
    ++step;
  }
  state.counters["tokens/s"] = benchmark::Counter(double(B), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel("B=8 rows: (8, 896) x (896, 151936) and a top-k 50 draw per row");
}
BENCHMARK(BM_LMHead)->Name("BM_LMHead/arch:qwen2")->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
