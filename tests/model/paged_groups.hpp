// tests/model/paged_groups.hpp: the GRPO-shaped requests the paged-engine tests send (CPU and
// CUDA): groups of n samples of one random prompt, their RequestParams and prompts.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include <rlflow/engine/paged_core.hpp>  // RequestParams
#include <rlflow/engine/sampling.hpp>    // SamplingParams

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

}  // namespace paged_groups
