// benchmarks/engine/paged_workload.hpp: the GRPO-shaped rollout workload that the paged and the
// static engines share, on the CPU (engine/bench_paged.cpp) and on the GPU
// (engine_cuda/bench_engine_cuda.cu): G prompts x n samples, prompt length P, response lengths
// heavy-tailed up to R (defaults 64 x 8, P = 256, R = 512; RLFLOW_BENCH_PAGED="G,n,P,R" replaces
// them).
// The model: Llama-shaped, two layers (hidden 128, 8 heads, 2 KV heads, head_dim 16, MLP 384,
// vocabulary 128) whose attention and MLP outputs are zeroed (o_proj, down_proj = 0: the same
// products and attention run, their sum is 0), so the residual stream is the token's embedding
// and the next token depends on the current one only: token s continues as s with probability
// 1 - h_s or ends (EOS = 0) with h_s, the hazards log-uniform in [1/600, 1/8] - a mixture of
// geometric lengths, heavy-tailed; each group's prompt ends in its own state. Also batched_bench,
// llama.cpp's batched-bench over any static or paged engine.
// Header-only and free of CUDA, so that g++ and nvcc translation units both include it.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <rlflow/engine/paged_core.hpp>  // PagedEngineConfig, RequestParams
#include <rlflow/engine/sampling.hpp>    // SamplingParams
#include <rlflow/model/gpt.hpp>          // GPTConfig, ParamLayout, init_params

namespace rlflow_bench::paged {

struct Workload {
  int G = 64, n = 8, P = 256, R = 512;
};

//! The defaults, or RLFLOW_BENCH_PAGED="G,n,P,R" (exits with status 2 on a malformed value).
inline Workload workload() {
  Workload w;
  if (char const* e = std::getenv("RLFLOW_BENCH_PAGED")) {
    if (std::sscanf(e, "%d,%d,%d,%d", &w.G, &w.n, &w.P, &w.R) != 4 || w.G < 1 || w.n < 1 || w.P < 1 || w.R < 1) {
      std::fprintf(stderr, "RLFLOW_BENCH_PAGED='%s': expected G,n,P,R (four positive integers, e.g. 16,8,128,256)\n", e);
      std::exit(2);
    }
  }
  return w;
}

//! "G=.. n=.. P=.. R<=..": the start of the benchmarks' labels (no comma: CSV readers split on it).
inline std::string workload_label(Workload const& wl) {
  return "G=" + std::to_string(wl.G) + " n=" + std::to_string(wl.n) + " P=" + std::to_string(wl.P) +
         " R<=" + std::to_string(wl.R);
}

inline constexpr int kV = 128, kC = 128;

inline rlflow::model::GPTConfig model_cfg(int positions) {
  rlflow::model::GPTConfig c;
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

//! The weights described above: one-hot embeddings, zeroed attention / MLP outputs, an LM head
//! holding the token-to-token log-probabilities.
inline std::vector<float> model_weights(rlflow::model::GPTConfig const& c) {
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

//! G prompts of P tokens (1..V-1) and n seeds each, from a fixed generator.
struct Groups {
  std::vector<std::vector<std::int32_t>> prompts;
  std::vector<std::vector<std::uint64_t>> seeds;
};
inline Groups make_groups(Workload const& wl) {
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

inline rlflow::engine::SamplingParams sampling(int R) {
  rlflow::engine::SamplingParams sp;
  sp.temperature = 1.0f;
  sp.max_new_tokens = R;
  sp.eos_id = 0;
  return sp;
}

//! Bytes of a static engine's KV slab: keys and values of B rows x S positions in every layer.
inline std::size_t static_kv_bytes(rlflow::model::GPTConfig const& c, int B, int S) {
  return std::size_t(c.n_layer) * 2 * std::size_t(B) * c.kv_heads() * std::size_t(S) * c.head_dim() * sizeof(float);
}

//! The static engine's input: the G n rows (each group's prompt n times, no padding), row-major
//! [G n, P] ids and mask, one seed per row.
struct StaticBatch {
  int B = 0, P = 0;
  std::vector<std::int32_t> ids, mask;
  std::vector<std::uint64_t> seeds;
};
inline StaticBatch static_batch(Workload const& wl, Groups const& gs) {
  StaticBatch b;
  b.B = wl.G * wl.n;
  b.P = wl.P;
  b.mask.assign(std::size_t(b.B) * std::size_t(wl.P), 1);
  for (int i = 0; i < wl.G; ++i)
    for (int k = 0; k < wl.n; ++k) {
      b.ids.insert(b.ids.end(), gs.prompts[std::size_t(i)].begin(), gs.prompts[std::size_t(i)].end());
      b.seeds.push_back(gs.seeds[std::size_t(i)][std::size_t(k)]);
    }
  return b;
}

//! The paged engine's scheduling: verl's defaults but max_num_seqs (vLLM's 256), block 16, and a
//! pool of 40% of the static slab (kv_cache_bytes set, so a device engine does not size it from
//! gpu_memory_utilization).
inline rlflow::engine::PagedEngineConfig paged_config(rlflow::model::GPTConfig const& c, Workload const& wl) {
  rlflow::engine::PagedEngineConfig pc;
  pc.block_size = 16;
  pc.max_num_seqs = 256;
  pc.max_num_batched_tokens = 8192;
  pc.kv_cache_bytes = static_kv_bytes(c, wl.G * wl.n, wl.P + wl.R) * 2 / 5;  // 40% of the static slab
  return pc;
}

//! One request per group: n samples with the group's seeds.
inline std::vector<rlflow::engine::RequestParams> request_params(Workload const& wl, Groups const& gs) {
  std::vector<rlflow::engine::RequestParams> ps;
  for (auto const& s : gs.seeds) ps.push_back(rlflow::engine::RequestParams::from_static(sampling(wl.R), s));
  return ps;
}

//! llama.cpp's batched-bench on one engine: B sequences of PP random prompt tokens, then TG
//! tokens each (no EOS). Counters: S_PP, prompt tokens/s of a generate of one token (the prefill
//! and the first token); S_TG, tokens/s of the other TG - 1 tokens of a generate of TG tokens
//! past that time. 'Engine' is a static engine (one (B, PP) batch) or, with Paged, a paged one
//! (B requests, prefix caching off so both generates prefill). One untimed warm-up generate
//! first (buffers and pools allocated). Args: PP, TG, B (batched_args).
template <class Engine, bool Paged>
void batched_bench(benchmark::State& state) {
  int const PP = int(state.range(0)), TG = int(state.range(1)), B = int(state.range(2));
  rlflow::model::GPTConfig const c = model_cfg(PP + TG);
  std::mt19937 g(3);
  std::vector<std::vector<std::int32_t>> prompts(static_cast<std::size_t>(B), std::vector<std::int32_t>(static_cast<std::size_t>(PP)));
  for (auto& p : prompts)
    for (auto& t : p) t = 1 + std::int32_t(g() % unsigned(kV - 1));
  std::vector<std::uint64_t> seeds(static_cast<std::size_t>(B));
  for (auto& s : seeds) s = g();
  auto sp = [](int R) {
    auto s = sampling(R);
    s.eos_id = -1;  // every sequence runs R tokens
    return s;
  };
  std::unique_ptr<Engine> e;
  if constexpr (Paged) {
    rlflow::engine::PagedEngineConfig pc;
    pc.max_num_seqs = std::max(B, 1);
    pc.enable_prefix_caching = false;
    e = std::make_unique<Engine>(c, pc);
  } else {
    e = std::make_unique<Engine>(c);
  }
  e->load_weights(model_weights(c));
  std::vector<std::int32_t> ids, mask(std::size_t(B) * std::size_t(PP), 1);
  for (auto const& p : prompts) ids.insert(ids.end(), p.begin(), p.end());
  rlflow::Tensor const ti = rlflow::Tensor::from(ids, rlflow::Shape{B, PP}), tm = rlflow::Tensor::from(mask, rlflow::Shape{B, PP});
  auto run = [&](int R) {  // seconds of one generate of R tokens per sequence
    std::vector<rlflow::engine::RequestParams> ps;
    if constexpr (Paged)
      for (int b = 0; b < B; ++b) ps.push_back(rlflow::engine::RequestParams::from_static(sp(R), std::span(&seeds[std::size_t(b)], 1)));
    auto const t0 = std::chrono::steady_clock::now();
    if constexpr (Paged) {
      benchmark::DoNotOptimize(e->generate(prompts, ps).data());
    } else {
      auto r = e->generate(ti, tm, sp(R), seeds);
      benchmark::DoNotOptimize(r.generated);
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  run(1);
  double t_pp = 0, t_all = 0;
  for (auto _ : state) {
    t_pp += run(1);
    t_all += run(TG);
  }
  double const it = double(state.iterations());
  state.counters["S_PP"] = double(B) * PP * it / t_pp;
  state.counters["S_TG"] = double(B) * (TG - 1) * it / std::max(t_all - t_pp, 1e-9);
}

//! batched_bench's configurations: PP 128 and 256, TG 128, B 1, 8 and 32.
inline void batched_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"PP", "TG", "B"});
  for (int pp : {128, 256})
    for (int bb : {1, 8, 32}) b->Args({pp, 128, bb});
}

}  // namespace rlflow_bench::paged
