// benchmarks/engine/bench_paged.cpp: the paged rollout engine (engine/paged_engine.hpp) against
// the static KV-cache engine (engine/rollout_engine.hpp), same model, same threads, same tokens:
//   BM_GenerateGroups/engine:static and /engine:paged: a GRPO-shaped rollout, G prompts x n
//     samples, prompt length P, response lengths heavy-tailed up to R (defaults: the issue's 64 x 8,
//     P = 256, R = 512). The static engine runs all G n rows in one generate (the trainer's road);
//     the paged engine takes G requests of n samples. Counters: tokens/s (generated), tokens,
//     kv_peak_bytes (static: its (B, P + R) slab; paged: the most blocks held at once), and for the
//     paged engine preemptions and prefilled prompt tokens.
//   BM_BatchedBench/engine:{static,paged}/PP:../TG:../B:..: llama.cpp's batched-bench: B sequences of
//     PP prompt tokens then TG generated ones; S_PP (prompt tokens/s: the prefill and first token)
//     and S_TG (generated tokens/s after it), no EOS.
// The model: Llama-shaped, two layers (hidden 128, 8 heads, 2 KV heads, head_dim 16, MLP 384,
// vocabulary 128) whose attention and MLP outputs are zeroed (o_proj, down_proj = 0: the same
// products and attention run, their sum is 0), so the residual stream is the token's embedding
// and the next token depends on the current one only: token s continues as s with probability
// 1 - h_s or ends (EOS = 0) with h_s, the hazards log-uniform in [1/600, 1/8] - a mixture of
// geometric lengths, heavy-tailed; each group's prompt ends in its own state.
// Scale: RLFLOW_BENCH_PAGED="G,n,P,R" replaces the defaults (e.g. "16,8,128,256" on a small box).
// Run: OPENBLAS_NUM_THREADS=1 ./build/benchmarks/engine/bench_paged --benchmark_filter=GenerateGroups
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <rlflow/engine/paged_engine.hpp>
#include <rlflow/engine/rollout_engine.hpp>
#include <rlflow/model/gpt.hpp>

using rlflow::Shape;
using rlflow::Tensor;
using rlflow::model::GPTConfig;

namespace {

struct Workload {
  int G = 64, n = 8, P = 256, R = 512;
};
Workload workload() {
  Workload w;
  if (char const* e = std::getenv("RLFLOW_BENCH_PAGED")) {
    if (std::sscanf(e, "%d,%d,%d,%d", &w.G, &w.n, &w.P, &w.R) != 4 || w.G < 1 || w.n < 1 || w.P < 1 || w.R < 1) {
      std::fprintf(stderr, "RLFLOW_BENCH_PAGED='%s': expected G,n,P,R (four positive integers, e.g. 16,8,128,256)\n", e);
      std::exit(2);
    }
  }
  return w;
}

constexpr int kV = 128, kC = 128;

GPTConfig model_cfg(int positions) {
  GPTConfig c;
  c.arch = rlflow::model::Arch::llama;
  c.vocab_size = kV;
  c.max_seq_len = positions;
  c.n_layer = 2;
  c.n_head = 8;
  c.n_kv_head = 2;
  c.n_embd = kC;
  c.intermediate_size = 3 * kC;
  c.tie_word_embeddings = false;
  c.validate();
  return c;
}

// the weights described above: one-hot embeddings, zeroed attention / MLP outputs, an LM head
// holding the token-to-token log-probabilities
std::vector<float> model_weights(GPTConfig const& c) {
  rlflow::model::ParamLayout const lay(c);
  std::vector<float> w(lay.size());
  rlflow::model::init_params(c, w);
  for (auto const& L : lay.layers) {
    std::fill_n(w.begin() + std::ptrdiff_t(L.proj_w), std::size_t(c.attn_dim()) * c.n_embd, 0.0f);
    std::fill_n(w.begin() + std::ptrdiff_t(L.fcproj_w), std::size_t(c.ff_dim()) * c.n_embd, 0.0f);
  }
  std::fill_n(w.begin() + std::ptrdiff_t(lay.wte), std::size_t(kV) * kC, 0.0f);
  for (int s = 0; s < kV; ++s) w[lay.wte + std::size_t(s) * kC + std::size_t(s)] = 1.0f;
  std::fill_n(w.begin() + std::ptrdiff_t(lay.lnf_w), kC, 1.0f);
  float const root = std::sqrt(float(kC));  // RMSNorm(e_s) = sqrt(C) e_s
  std::fill_n(w.begin() + std::ptrdiff_t(lay.lm_head), std::size_t(kV) * kC, -40.0f / root);
  double const lo = std::log(1.0 / 600), hi = std::log(1.0 / 8);
  for (int s = 1; s < kV; ++s) {
    double const h = std::exp(lo + (hi - lo) * double(s - 1) / double(kV - 2));
    w[lay.lm_head + std::size_t(0) * kC + std::size_t(s)] = float(std::log(h)) / root;        // EOS
    w[lay.lm_head + std::size_t(s) * kC + std::size_t(s)] = float(std::log(1.0 - h)) / root;  // stay
  }
  w[lay.lm_head + 0] = 0.0f;  // after EOS (never fed back)
  return w;
}

struct Groups {
  std::vector<std::vector<std::int32_t>> prompts;
  std::vector<std::vector<std::uint64_t>> seeds;
};
Groups make_groups(Workload const& wl) {
  std::mt19937 g(7);
  Groups gs;
  for (int i = 0; i < wl.G; ++i) {
    std::vector<std::int32_t> p(std::size_t(wl.P));
    for (auto& t : p) t = 1 + std::int32_t(g() % unsigned(kV - 1));
    gs.prompts.push_back(p);
    std::vector<std::uint64_t> s(std::size_t(wl.n));
    for (auto& x : s) x = g();
    gs.seeds.push_back(s);
  }
  return gs;
}

rlflow::engine::SamplingParams sampling(int R) {
  rlflow::engine::SamplingParams sp;
  sp.temperature = 1.0f;
  sp.max_new_tokens = R;
  sp.eos_id = 0;
  return sp;
}

std::size_t static_kv_bytes(GPTConfig const& c, int B, int S) {
  return std::size_t(c.n_layer) * 2 * std::size_t(B) * c.kv_heads() * std::size_t(S) * c.head_dim() * sizeof(float);
}

void BM_GenerateGroupsStatic(benchmark::State& state) {
  Workload const wl = workload();
  GPTConfig const c = model_cfg(wl.P + wl.R);
  rlflow::engine::RolloutEngine ro(c);
  ro.load_weights(model_weights(c));
  Groups const gs = make_groups(wl);
  int const B = wl.G * wl.n;
  std::vector<std::int32_t> ids, mask(std::size_t(B) * wl.P, 1);
  std::vector<std::uint64_t> seeds;
  for (int i = 0; i < wl.G; ++i)
    for (int k = 0; k < wl.n; ++k) {
      ids.insert(ids.end(), gs.prompts[std::size_t(i)].begin(), gs.prompts[std::size_t(i)].end());
      seeds.push_back(gs.seeds[std::size_t(i)][std::size_t(k)]);
    }
  Tensor const ti = Tensor::from(ids, Shape{B, wl.P}), tm = Tensor::from(mask, Shape{B, wl.P});
  double tokens = 0;
  for (auto _ : state) {
    auto r = ro.generate(ti, tm, sampling(wl.R), seeds);
    tokens = 0;
    for (auto m : r.response_mask.span<std::int32_t const>()) tokens += m;
  }
  state.counters["tokens/s"] = benchmark::Counter(tokens, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["tokens"] = tokens;
  state.counters["kv_peak_bytes"] = double(static_kv_bytes(c, B, wl.P + wl.R));
  state.SetLabel("G=" + std::to_string(wl.G) + " n=" + std::to_string(wl.n) + " P=" + std::to_string(wl.P) +
                 " R<=" + std::to_string(wl.R) + ", one batch of G n rows");
}

void BM_GenerateGroupsPaged(benchmark::State& state) {
  Workload const wl = workload();
  GPTConfig const c = model_cfg(wl.P + wl.R);
  rlflow::engine::PagedEngineConfig pc;  // verl's defaults but max_num_seqs (vLLM's 256)
  pc.block_size = 16;
  pc.max_num_seqs = 256;
  pc.max_num_batched_tokens = 8192;
  pc.kv_cache_bytes = static_kv_bytes(c, wl.G * wl.n, wl.P + wl.R) * 2 / 5;  // 40% of the static slab
  rlflow::engine::PagedEngine pe(c, pc);
  pe.load_weights(model_weights(c));
  Groups const gs = make_groups(wl);
  std::vector<rlflow::engine::RequestParams> ps;
  for (auto const& s : gs.seeds) ps.push_back(rlflow::engine::RequestParams::from_static(sampling(wl.R), s));
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
  state.SetLabel("G=" + std::to_string(wl.G) + " n=" + std::to_string(wl.n) + " P=" + std::to_string(wl.P) + " R<=" +
                 std::to_string(wl.R) + ", block 16, max_num_seqs 256, max_num_batched_tokens 8192, pool 40% of static");
}

// batched-bench: args PP, TG, B
template <bool Paged>
void BM_BatchedBench(benchmark::State& state) {
  int const PP = int(state.range(0)), TG = int(state.range(1)), B = int(state.range(2));
  GPTConfig const c = model_cfg(PP + TG);
  auto const w = model_weights(c);
  std::mt19937 g(3);
  std::vector<std::vector<std::int32_t>> prompts(static_cast<std::size_t>(B), std::vector<std::int32_t>(static_cast<std::size_t>(PP)));
  for (auto& p : prompts)
    for (auto& t : p) t = 1 + std::int32_t(g() % unsigned(kV - 1));
  std::vector<std::uint64_t> seeds(static_cast<std::size_t>(B));
  for (auto& s : seeds) s = g();
  auto sp = [&](int R) {
    auto s = sampling(R);
    s.eos_id = -1;  // every sequence runs TG tokens
    return s;
  };
  std::function<void(int)> run;
  std::unique_ptr<rlflow::engine::RolloutEngine> ro;
  std::unique_ptr<rlflow::engine::PagedEngine> pe;
  if constexpr (Paged) {
    rlflow::engine::PagedEngineConfig pc;
    pc.max_num_seqs = std::max(B, 1);
    pe = std::make_unique<rlflow::engine::PagedEngine>(c, pc);
    pe->load_weights(w);
    run = [&](int R) {
      std::vector<rlflow::engine::RequestParams> ps;
      for (int b = 0; b < B; ++b) ps.push_back(rlflow::engine::RequestParams::from_static(sp(R), std::span(&seeds[std::size_t(b)], 1)));
      benchmark::DoNotOptimize(pe->generate(prompts, ps).data());
    };
  } else {
    ro = std::make_unique<rlflow::engine::RolloutEngine>(c);
    ro->load_weights(w);
    std::vector<std::int32_t> ids, mask(std::size_t(B) * PP, 1);
    for (auto const& p : prompts) ids.insert(ids.end(), p.begin(), p.end());
    Tensor const ti = Tensor::from(ids, Shape{B, PP}), tm = Tensor::from(mask, Shape{B, PP});
    run = [&, ti, tm](int R) {
      auto r = ro->generate(ti, tm, sp(R), seeds);
      benchmark::DoNotOptimize(r.generated);
    };
  }
  double t_pp = 0, t_all = 0;
  for (auto _ : state) {
    auto const t0 = std::chrono::steady_clock::now();
    run(1);
    auto const t1 = std::chrono::steady_clock::now();
    run(TG);
    auto const t2 = std::chrono::steady_clock::now();
    t_pp += std::chrono::duration<double>(t1 - t0).count();
    t_all += std::chrono::duration<double>(t2 - t1).count();
  }
  double const it = double(state.iterations());
  state.counters["S_PP"] = double(B) * PP * it / t_pp;
  state.counters["S_TG"] = double(B) * (TG - 1) * it / std::max(t_all - t_pp, 1e-9);
}

void batched_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"PP", "TG", "B"});
  for (int pp : {128, 256})
    for (int bb : {1, 8, 32}) b->Args({pp, 128, bb});
}

}  // namespace

BENCHMARK(BM_GenerateGroupsStatic)->Name("BM_GenerateGroups/engine:static")->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1);
BENCHMARK(BM_GenerateGroupsPaged)->Name("BM_GenerateGroups/engine:paged")->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1);
BENCHMARK_TEMPLATE(BM_BatchedBench, false)->Name("BM_BatchedBench/engine:static")->Apply(batched_args)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
BENCHMARK_TEMPLATE(BM_BatchedBench, true)->Name("BM_BatchedBench/engine:paged")->Apply(batched_args)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

BENCHMARK_MAIN();
