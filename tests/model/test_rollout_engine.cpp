// tests/model/test_rollout_engine.cpp <-> include/rlflow/engine/rollout_engine.hpp, sampling.hpp:
// KV-cache logits against a full forward, rollout log-probs against the training engine,
// EOS handling, batch independence of seeded sampling, exact top-k / top-p support, sleep / wake.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include <rlflow/engine/rollout_engine.hpp>
#include <rlflow/engine/training_engine.hpp>

#include "fixtures.hpp"

namespace test_rollout_engine {

using rlflow::DType;
using rlflow::Shape;
using rlflow::Tensor;
using rlflow::engine::RolloutEngine;
using rlflow::engine::SamplingParams;
using rlflow::engine::TrainingEngine;
using rlflow::model::GPTConfig;

namespace {

GPTConfig small() { return {.vocab_size = 11, .max_seq_len = 24, .n_layer = 2, .n_head = 2, .n_embd = 16, .seed = 5}; }

// A trained-looking model: perturbed weights so distributions are far from uniform.
std::vector<float> weights(GPTConfig const& c, unsigned seed) { return fixtures::perturbed_weights(c, seed, 0.3f); }

// Left-padded prompts of the given lengths (tokens >= 3, so 0..2 stay special).
struct Prompts {
  int B, P;
  std::vector<std::int32_t> ids, mask;
  Tensor tids() const { return Tensor::from(ids, Shape{B, P}); }
  Tensor tmask() const { return Tensor::from(mask, Shape{B, P}); }
};
Prompts make_prompts(std::vector<std::vector<std::int32_t>> const& rows) {
  int P = 0;
  for (auto const& r : rows) P = std::max(P, int(r.size()));
  Prompts p{int(rows.size()), P, {}, {}};
  for (auto const& r : rows) {
    for (int t = 0; t < P - int(r.size()); ++t) { p.ids.push_back(0); p.mask.push_back(0); }
    for (auto x : r) { p.ids.push_back(x); p.mask.push_back(1); }
  }
  return p;
}
std::vector<std::vector<std::int32_t>> random_rows(int B, int V, unsigned seed, int min_len = 1, int max_len = 6) {
  std::mt19937 g(seed);
  std::vector<std::vector<std::int32_t>> rows(static_cast<std::size_t>(B));
  for (auto& r : rows) {
    int const len = min_len + int(g() % unsigned(max_len - min_len + 1));
    for (int t = 0; t < len; ++t) r.push_back(3 + std::int32_t(g() % unsigned(V - 3)));
  }
  return rows;
}

// prompt + response as one training batch: ids (B, P + R), mask = prompt mask | response mask
std::pair<Tensor, Tensor> join(Prompts const& p, rlflow::engine::RolloutResult const& r) {
  int const R = int(r.responses.dim(1)), T = p.P + R;
  std::vector<std::int32_t> ids, mask;
  for (int b = 0; b < p.B; ++b) {
    for (int t = 0; t < p.P; ++t) { ids.push_back(p.ids[std::size_t(b) * p.P + t]); mask.push_back(p.mask[std::size_t(b) * p.P + t]); }
    for (int j = 0; j < R; ++j) { ids.push_back(r.responses.at<std::int32_t>(b, j)); mask.push_back(r.response_mask.at<std::int32_t>(b, j)); }
  }
  return {Tensor::from(ids, Shape{p.B, T}), Tensor::from(mask, Shape{p.B, T})};
}

std::vector<std::uint64_t> seeds_for(int B, std::uint64_t base = 1000) {
  std::vector<std::uint64_t> s(static_cast<std::size_t>(B));
  for (int b = 0; b < B; ++b) s[std::size_t(b)] = base + std::uint64_t(b) * 7919;
  return s;
}

}  // namespace

TEST_CASE("KV-cache decoding gives the logits of a full forward", "[engine][rollout]") {
  GPTConfig const cfg = small();
  auto w = weights(cfg, 1);
  RolloutEngine ro(cfg);
  ro.load_weights(w);
  TrainingEngine tr(cfg);
  tr.load_weights(w);
  bool const cached = GENERATE(true, false);
  ro.set_use_kv_cache(cached);
  Prompts const p = make_prompts(random_rows(4, cfg.vocab_size, 3));
  int const R = 6, V = cfg.vocab_size, B = p.B;
  // a fixed continuation per row, fed step by step
  std::vector<std::vector<std::int32_t>> cont(static_cast<std::size_t>(B));
  std::mt19937 g(9);
  for (auto& c : cont)
    for (int j = 0; j < R; ++j) c.push_back(std::int32_t(g() % unsigned(V)));
  std::vector<std::vector<float>> step_logits;
  auto lg = ro.prefill(p.tids(), p.tmask(), R);
  step_logits.emplace_back(lg.begin(), lg.end());
  for (int j = 0; j < R - 1; ++j) {
    std::vector<std::int32_t> tok(static_cast<std::size_t>(B));
    for (int b = 0; b < B; ++b) tok[std::size_t(b)] = cont[std::size_t(b)][std::size_t(j)];
    lg = ro.decode(tok);
    step_logits.emplace_back(lg.begin(), lg.end());
  }
  // the full sequences through the training engine
  int const T = p.P + R;
  std::vector<std::int32_t> ids, mask;
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < p.P; ++t) { ids.push_back(p.ids[std::size_t(b) * p.P + t]); mask.push_back(p.mask[std::size_t(b) * p.P + t]); }
    for (int j = 0; j < R; ++j) { ids.push_back(cont[std::size_t(b)][std::size_t(j)]); mask.push_back(1); }
  }
  auto full = tr.compute_logits(Tensor::from(ids, Shape{B, T}), Tensor::from(mask, Shape{B, T}));
  double worst = 0;
  for (int j = 0; j < R; ++j)
    for (int b = 0; b < B; ++b)
      for (int v = 0; v < V; ++v) {
        float const ref = full.span<float>()[(std::size_t(b) * T + p.P - 1 + j) * V + v];
        float const got = step_logits[std::size_t(j)][std::size_t(b) * V + v];
        worst = std::max(worst, std::abs(double(got) - ref) / std::max(1.0, std::abs(double(ref))));
      }
  INFO("worst relative difference " << worst);
  REQUIRE(worst <= 1e-5);
}

TEST_CASE("rollout log-probs equal the training engine's log-probs of the same sequences", "[engine][rollout]") {
  GPTConfig const cfg = small();
  auto w = weights(cfg, 2);
  RolloutEngine ro(cfg);
  ro.load_weights(w);
  TrainingEngine tr(cfg);
  tr.load_weights(w);
  SamplingParams sp;
  sp.temperature = GENERATE(1.0f, 0.7f);
  sp.top_k = GENERATE(0, 4);
  sp.top_p = 0.9f;
  sp.max_new_tokens = 8;
  sp.eos_id = 2;
  Prompts const p = make_prompts(random_rows(16, cfg.vocab_size, 4));
  auto r = ro.generate(p.tids(), p.tmask(), sp, seeds_for(p.B));
  auto [ids, mask] = join(p, r);
  auto lp = tr.compute_log_prob(ids, mask, sp.max_new_tokens, sp.temperature);
  int masked = 0;
  for (int b = 0; b < p.B; ++b)
    for (int j = 0; j < sp.max_new_tokens; ++j) {
      if (!r.response_mask.at<std::int32_t>(b, j)) { ++masked; continue; }
      INFO("row " << b << " token " << j);
      REQUIRE(r.log_probs.at<float>(b, j) == Approx(lp.log_probs.at<float>(b, j)).margin(1e-5));
    }
  (void)masked;
}

TEST_CASE("EOS stops a sequence: PAD and mask 0 after it", "[engine][rollout]") {
  GPTConfig const cfg = small();
  RolloutEngine ro(cfg);
  ro.load_weights(weights(cfg, 3));
  Prompts const p = make_prompts(random_rows(24, cfg.vocab_size, 5));
  SamplingParams sp;
  sp.max_new_tokens = 10;
  sp.pad_id = 0;
  // pick as EOS the token that is sampled most often when nothing stops
  auto free_run = ro.generate(p.tids(), p.tmask(), sp, seeds_for(p.B));
  std::map<int, int> freq;
  for (auto t : free_run.responses.span<std::int32_t>()) ++freq[t];
  REQUIRE(std::all_of(free_run.response_mask.span<std::int32_t>().begin(), free_run.response_mask.span<std::int32_t>().end(),
                      [](std::int32_t m) { return m == 1; }));
  sp.eos_id = std::max_element(freq.begin(), freq.end(), [](auto& a, auto& b) { return a.second < b.second; })->first;
  auto r = ro.generate(p.tids(), p.tmask(), sp, seeds_for(p.B));
  int stopped = 0;
  for (int b = 0; b < p.B; ++b) {
    bool done = false;
    for (int j = 0; j < sp.max_new_tokens; ++j) {
      std::int32_t const tok = r.responses.at<std::int32_t>(b, j);
      if (done) {
        REQUIRE(tok == sp.pad_id);
        REQUIRE(r.response_mask.at<std::int32_t>(b, j) == 0);
        REQUIRE(r.log_probs.at<float>(b, j) == 0.0f);
      } else {
        REQUIRE(r.response_mask.at<std::int32_t>(b, j) == 1);
        // until a row stops, its tokens are those of the free run (same seed, same counter)
        REQUIRE(tok == free_run.responses.at<std::int32_t>(b, j));
        if (tok == sp.eos_id) { done = true; ++stopped; }
      }
    }
  }
  REQUIRE(stopped > 0);
}

TEST_CASE("the same seed gives the same tokens whatever the batch size or order", "[engine][rollout]") {
  GPTConfig const cfg = small();
  RolloutEngine ro(cfg);
  ro.load_weights(weights(cfg, 4));
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_p = 0.95f;
  sp.max_new_tokens = 8;
  sp.eos_id = 2;
  auto rows = random_rows(6, cfg.vocab_size, 6, 1, 7);
  auto seeds = seeds_for(6, 42);
  Prompts const all = make_prompts(rows);
  auto ref = ro.generate(all.tids(), all.tmask(), sp, seeds);
  // one at a time (no padding at all)
  for (int b = 0; b < 6; ++b) {
    Prompts const one = make_prompts({rows[std::size_t(b)]});
    auto r = ro.generate(one.tids(), one.tmask(), sp, std::vector<std::uint64_t>{seeds[std::size_t(b)]});
    for (int j = 0; j < sp.max_new_tokens; ++j) {
      REQUIRE(r.responses.at<std::int32_t>(0, j) == ref.responses.at<std::int32_t>(b, j));
      REQUIRE(r.log_probs.at<float>(0, j) == Approx(ref.log_probs.at<float>(b, j)).margin(1e-5));
    }
  }
  // reversed order, each prompt twice, wider padding
  std::vector<std::vector<std::int32_t>> rev;
  std::vector<std::uint64_t> rev_seeds;
  for (int b = 5; b >= 0; --b)
    for (int k = 0; k < 2; ++k) { rev.push_back(rows[std::size_t(b)]); rev_seeds.push_back(seeds[std::size_t(b)]); }
  rev.push_back(std::vector<std::int32_t>(12, 4));  // a long prompt widens everyone's padding
  rev_seeds.push_back(1);
  Prompts const pr = make_prompts(rev);
  auto r = ro.generate(pr.tids(), pr.tmask(), sp, rev_seeds);
  for (int i = 0; i < 12; ++i)
    for (int j = 0; j < sp.max_new_tokens; ++j)
      REQUIRE(r.responses.at<std::int32_t>(i, j) == ref.responses.at<std::int32_t>(5 - i / 2, j));
  // a different seed gives a different continuation somewhere
  auto other = ro.generate(all.tids(), all.tmask(), sp, seeds_for(6, 43));
  REQUIRE_FALSE(bit_equal(other.responses, ref.responses));
}

TEST_CASE("temperature 0 and temperature -> 0 give the argmax", "[engine][sampling]") {
  GPTConfig const cfg = small();
  auto w = weights(cfg, 5);
  RolloutEngine ro(cfg);
  ro.load_weights(w);
  TrainingEngine tr(cfg);
  tr.load_weights(w);
  Prompts const p = make_prompts(random_rows(8, cfg.vocab_size, 7));
  SamplingParams sp;
  sp.max_new_tokens = 6;
  sp.temperature = 0.0f;
  auto greedy = ro.generate(p.tids(), p.tmask(), sp, seeds_for(p.B));
  auto [ids, mask] = join(p, greedy);
  auto logits = tr.compute_logits(ids, mask);
  int const T = int(ids.dim(1)), V = cfg.vocab_size;
  for (int b = 0; b < p.B; ++b)
    for (int j = 0; j < sp.max_new_tokens; ++j) {
      float const* row = logits.data<float>() + (std::size_t(b) * T + p.P - 1 + j) * V;
      REQUIRE(greedy.responses.at<std::int32_t>(b, j) == int(std::max_element(row, row + V) - row));
    }
  sp.temperature = 1e-4f;
  auto cold = ro.generate(p.tids(), p.tmask(), sp, seeds_for(p.B, 77));
  REQUIRE(bit_equal(cold.responses, greedy.responses));
}

TEST_CASE("top-k and top-p restrict the support exactly", "[engine][sampling]") {
  int const V = 12;
  std::vector<float> logits{0.3f, 2.0f, -1.0f, 1.5f, 0.9f, 2.0f, -0.2f, 0.0f, 1.1f, -3.0f, 0.5f, 1.4f};
  std::vector<std::int32_t> idx(V);
  std::vector<double> w(V);
  // independent reference: probabilities of softmax(l / T), ranked
  auto ranked = [&](float temp) {
    std::vector<std::pair<double, int>> pr;
    double z = 0;
    for (int v = 0; v < V; ++v) z += std::exp(double(logits[std::size_t(v)]) / temp);
    for (int v = 0; v < V; ++v) pr.push_back({std::exp(double(logits[std::size_t(v)]) / temp) / z, v});
    std::stable_sort(pr.begin(), pr.end(), [](auto& a, auto& b) { return a.first > b.first; });
    return pr;
  };
  struct Case { float temp; int k; float p; };
  for (Case const c : {Case{1.0f, 3, 1.0f}, Case{0.8f, 0, 0.6f}, Case{1.3f, 5, 0.7f}, Case{1.0f, 1, 1.0f}, Case{2.0f, 0, 1.0f}}) {
    auto pr = ranked(c.temp);
    int kept = c.k > 0 ? c.k : V;
    double mass = 0;
    for (int i = 0; i < kept; ++i) mass += pr[std::size_t(i)].first;
    if (c.p < 1.0f) {
      double cum = 0;
      int i = 0;
      while (i < kept) { cum += pr[std::size_t(i++)].first; if (cum >= double(c.p) * mass) break; }
      kept = i;
    }
    std::set<int> support;
    double kept_mass = 0;
    for (int i = 0; i < kept; ++i) { support.insert(pr[std::size_t(i)].second); kept_mass += pr[std::size_t(i)].first; }
    SamplingParams sp;
    sp.temperature = c.temp;
    sp.top_k = c.k;
    sp.top_p = c.p;
    std::map<int, int> hits;
    int const n = 20000;
    for (int i = 0; i < n; ++i) ++hits[rlflow::engine::sample_token(logits.data(), V, sp, 99, std::uint64_t(i), idx.data(), w.data())];
    INFO("temperature " << c.temp << " top_k " << c.k << " top_p " << c.p);
    std::set<int> seen;
    for (auto [t, h] : hits) seen.insert(t);
    REQUIRE(seen == support);
    for (int i = 0; i < kept; ++i) {  // frequencies match the renormalised probabilities (5 sigma)
      double const q = pr[std::size_t(i)].first / kept_mass;
      double const sd = std::sqrt(q * (1 - q) / n);
      CHECK(std::abs(hits[pr[std::size_t(i)].second] / double(n) - q) <= 5 * sd + 1e-9);
    }
  }
  // ties at the top-k boundary break by the lower id (tokens 1 and 5 share the top logit)
  SamplingParams one;
  one.top_k = 1;
  for (int i = 0; i < 50; ++i) REQUIRE(rlflow::engine::sample_token(logits.data(), V, one, 3, std::uint64_t(i), idx.data(), w.data()) == 1);
  SamplingParams bad;
  bad.top_p = 0.0f;
  REQUIRE_THROWS_AS(bad.validate(V), rlflow::config_error);
  bad = SamplingParams{};
  bad.temperature = -1.0f;
  REQUIRE_THROWS_AS(bad.validate(V), rlflow::config_error);
}

TEST_CASE("recompute mode (no KV cache) generates the same tokens", "[engine][rollout]") {
  GPTConfig const cfg = small();
  RolloutEngine ro(cfg);
  ro.load_weights(weights(cfg, 6));
  Prompts const p = make_prompts(random_rows(5, cfg.vocab_size, 8));
  SamplingParams sp;
  sp.max_new_tokens = 7;
  sp.eos_id = 2;
  auto a = ro.generate(p.tids(), p.tmask(), sp, seeds_for(p.B));
  ro.set_use_kv_cache(false);
  auto b = ro.generate(p.tids(), p.tmask(), sp, seeds_for(p.B));
  REQUIRE(bit_equal(a.responses, b.responses));
  REQUIRE(bit_equal(a.response_mask, b.response_mask));
  for (std::size_t i = 0; i < a.log_probs.span<float>().size(); ++i)
    REQUIRE(a.log_probs.span<float>()[i] == Approx(b.log_probs.span<float>()[i]).margin(1e-5));
}

TEST_CASE("sleep releases the cache, wake re-acquires it, weights update in place", "[engine][rollout]") {
  GPTConfig const cfg = small();
  RolloutEngine ro(cfg);
  auto w = weights(cfg, 7);
  float const* where = ro.weights().data();
  ro.load_weights(w);
  REQUIRE(ro.weights().data() == where);
  REQUIRE(std::equal(w.begin(), w.end(), ro.weights().begin()));
  Prompts const p = make_prompts(random_rows(8, cfg.vocab_size, 9));
  SamplingParams sp;
  sp.max_new_tokens = 5;
  auto before = ro.generate(p.tids(), p.tmask(), sp, seeds_for(p.B));
  REQUIRE(ro.memory_bytes() > 0);
  ro.sleep();
  REQUIRE(ro.is_sleeping());
  REQUIRE(ro.memory_bytes() == 0);
  REQUIRE_THROWS_WITH(ro.generate(p.tids(), p.tmask(), sp, seeds_for(p.B)), Catch::Contains("wake()"));
  ro.wake();
  REQUIRE_FALSE(ro.is_sleeping());
  auto after = ro.generate(p.tids(), p.tmask(), sp, seeds_for(p.B));
  REQUIRE(bit_equal(before.responses, after.responses));
  REQUIRE(bit_equal(before.log_probs, after.log_probs));
  // new weights change the output; the old ones bring it back
  auto w2 = weights(cfg, 8);
  ro.load_weights(w2);
  auto other = ro.generate(p.tids(), p.tmask(), sp, seeds_for(p.B));
  REQUIRE_FALSE(bit_equal(other.log_probs, before.log_probs));
  REQUIRE_THROWS_AS(ro.load_weights(std::vector<float>(10)), rlflow::shape_error);
}

TEST_CASE("rollout input errors name the problem", "[engine][rollout]") {
  GPTConfig const cfg = small();
  RolloutEngine ro(cfg);
  SamplingParams sp;
  sp.max_new_tokens = 4;
  std::vector<std::int32_t> ids{3, 4, 5, 6}, right_padded{1, 1, 1, 0};
  REQUIRE_THROWS_WITH(ro.generate(Tensor::from(ids, Shape{1, 4}), Tensor::from(right_padded, Shape{1, 4}), sp,
                                  std::vector<std::uint64_t>{1}),
                      Catch::Contains("left-padded"));
  std::vector<std::int32_t> ones{1, 1, 1, 1};
  REQUIRE_THROWS_AS(ro.generate(Tensor::from(ids, Shape{1, 4}), Tensor::from(ones, Shape{1, 4}), sp, std::vector<std::uint64_t>{1, 2}),
                    rlflow::shape_error);
  sp.max_new_tokens = 30;
  REQUIRE_THROWS_WITH(ro.generate(Tensor::from(ids, Shape{1, 4}), Tensor::from(ones, Shape{1, 4}), sp, std::vector<std::uint64_t>{1}),
                      Catch::Contains("max_seq_len"));
}

}  // namespace test_rollout_engine
