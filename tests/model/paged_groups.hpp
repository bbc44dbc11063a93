// tests/model/paged_groups.hpp: the GRPO-shaped requests the paged-engine tests send (CPU and
// CUDA): groups of n samples of one random prompt, their RequestParams and prompts, and the
// one-prefill-per-group check both engines pass.
#pragma once
#include <catch2/catch.hpp>

#include <cstdint>
#include <algorithm>
#include <random>
#include <utility>
#include <vector>

#include <rlflow/engine/paged_core.hpp>  // RequestParams
#include <rlflow/engine/sampling.hpp>    // SamplingParams
#include <rlflow/model/gpt.hpp>          // GPTConfig

namespace paged_groups {

struct Group {
  std::vector<std::int32_t> prompt;
  std::vector<std::uint64_t> seeds;
};

//! 'G' groups of n samples, prompts of random lengths in [lo, hi], tokens >= 3 (0..2 special).
inline std::vector<Group> random_groups(int G, int n, int V, unsigned seed, int lo = 1, int hi = 30) {
  std::mt19937 g(seed);
  std::vector<Group> out(static_cast<std::size_t>(G));
  for (auto& gr : out) {
    int const len = lo + int(g() % unsigned(hi - lo + 1));
    for (int t = 0; t < len; ++t) gr.prompt.push_back(3 + std::int32_t(g() % unsigned(V - 3)));
    for (int k = 0; k < n; ++k) gr.seeds.push_back(std::uint64_t(g()) * 2654435761ull + 17);
  }
  return out;
}

//! One request per group: the static engine's filters, sample k seeded with the group's seeds[k].
inline std::vector<rlflow::engine::RequestParams> params_of(std::vector<Group> const& gs, rlflow::engine::SamplingParams const& sp) {
  std::vector<rlflow::engine::RequestParams> ps;
  for (auto const& g : gs) ps.push_back(rlflow::engine::RequestParams::from_static(sp, g.seeds));
  return ps;
}
inline std::vector<std::vector<std::int32_t>> prompts_of(std::vector<Group> const& gs) {
  std::vector<std::vector<std::int32_t>> p;
  for (auto const& g : gs) p.push_back(g.prompt);
  return p;
}

//! A fresh 'Engine' (a paged engine) of config 'cfg', 'pc' and weights 'w' runs the groups to
//! completion, in order or reversed (the outputs come back in group order either way); checks
//! that no block stays held, no sequence is left running or waiting and no step went over
//! max_num_batched_tokens; 'm' (optional) gets the engine's metrics.
template <class Engine>
std::vector<rlflow::engine::RequestOutput> run_groups(rlflow::model::GPTConfig const& cfg, rlflow::engine::PagedEngineConfig const& pc,
                                                      std::vector<float> const& w, std::vector<Group> const& gs,
                                                      rlflow::engine::SamplingParams const& sp, bool reversed,
                                                      rlflow::engine::PagedMetrics* m = nullptr) {
  Engine pe(cfg, pc);
  pe.load_weights(w);
  auto prompts = prompts_of(gs);
  auto params = params_of(gs, sp);
  if (reversed) {
    std::reverse(prompts.begin(), prompts.end());
    std::reverse(params.begin(), params.end());
  }
  auto outs = pe.generate(prompts, params);
  if (reversed) std::reverse(outs.begin(), outs.end());
  REQUIRE(pe.pool().num_used() == 0);
  auto const met = pe.metrics();
  REQUIRE(met.max_step_tokens <= std::uint64_t(pc.max_num_batched_tokens));
  REQUIRE(met.running == 0);
  REQUIRE(met.waiting == 0);
  if (m) *m = met;
  return outs;
}

//! Runs group 'g' (n samples of its prompt, P positions) to completion on the idle engine 'pe'
//! (block size bs) with 'sp' (no stop token, so every sample runs sp.max_new_tokens = R tokens)
//! and checks the laws of a shared prompt: P prompt positions computed (not n P), n R tokens, at
//! most ceil(P / bs) + n ceil(R / bs) + n blocks held at once, no preemption, every block back in
//! the pool. Returns the request's output.
template <class Engine>
rlflow::engine::RequestOutput run_group_once(Engine& pe, Group const& g, int bs, rlflow::engine::SamplingParams sp) {
  sp.eos_id = -1;
  int const n = int(g.seeds.size()), P = int(g.prompt.size()), R = sp.max_new_tokens;
  auto out = pe.generate(prompts_of({g}), params_of({g}, sp));
  auto const m = pe.metrics();
  REQUIRE(m.prompt_tokens_prefilled == std::uint64_t(P));
  REQUIRE(m.generation_tokens == std::uint64_t(n) * R);
  auto cdiv = [](int a, int b) { return (a + b - 1) / b; };
  REQUIRE(m.peak_blocks_used <= cdiv(P, bs) + n * cdiv(R, bs) + n);
  REQUIRE(m.preemptions == 0);
  REQUIRE(pe.pool().num_used() == 0);
  for (auto const& s : out[0].samples) REQUIRE(int(s.tokens.size()) == R);
  return std::move(out[0]);
}

}  // namespace paged_groups
