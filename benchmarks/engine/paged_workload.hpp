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
// geometric lengths, heavy-tailed; each group's prompt ends in its own state.
// Header-only and free of CUDA, so that g++ and nvcc translation units both include it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
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

}  // namespace rlflow_bench::paged
