// tests/model/test_paged_engine.cpp <-> include/rlflow/engine/paged_engine.hpp, block_pool.hpp:
// the paged engine's tokens and log-probs against the static RolloutEngine (GPT-2 and the Llama
// family), their invariance under the schedule (max_num_seqs, block_size, chunk size, arrival
// order, preemption), chunked against one-shot prefill logits, prompt sharing within a group,
// prefix caching across requests, the pool's bookkeeping (no leak after runs, aborts and an
// exception), min-p, resumption, input errors, and tensor parallelism with either LM head
// (replicated, or vocabulary-parallel against the static engine's).
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <rlflow/engine/paged_engine.hpp>
#include <rlflow/engine/rollout_engine.hpp>

#include "fixtures.hpp"
#include "paged_groups.hpp"  // Group, random_groups, params_of, prompts_of

namespace test_paged_engine {

using rlflow::Shape;
using rlflow::Tensor;
using rlflow::engine::GenerateControl;
using rlflow::engine::PagedEngine;
using rlflow::engine::PagedEngineConfig;
using rlflow::engine::RequestOutput;
using rlflow::engine::RequestParams;
using rlflow::engine::RolloutEngine;
using rlflow::engine::SamplingParams;
using rlflow::model::Arch;
using rlflow::model::GPTConfig;

namespace {

using paged_groups::Group;
using paged_groups::params_of;
using paged_groups::prompts_of;
using paged_groups::random_groups;

GPTConfig model_of(Arch arch) {
  GPTConfig c;
  c.arch = arch;
  c.vocab_size = 41;
  c.max_seq_len = 64;
  c.n_layer = 2;
  c.seed = 7;
  if (arch == Arch::gpt2) {
    c.n_head = 2;
    c.n_embd = 16;
  } else {  // grouped heads, an explicit head_dim (Qwen3) and q/k norm
    c.n_head = 4;
    c.n_kv_head = 2;
    c.n_embd = 24;
    c.head_size = arch == Arch::qwen3 ? 10 : 0;
    c.intermediate_size = 30;
    c.qk_norm = arch == Arch::qwen3;
    c.tie_word_embeddings = arch != Arch::llama;
  }
  c.validate();
  return c;
}

struct Sample {
  std::vector<std::int32_t> tokens;
  std::vector<float> logprobs;
};

// the static engine, one group at a time (n copies of the prompt, no padding), cut at the mask
std::vector<Sample> static_group(RolloutEngine& ro, Group const& gr, SamplingParams const& sp) {
  int const n = int(gr.seeds.size()), P = int(gr.prompt.size());
  std::vector<std::int32_t> ids, mask(std::size_t(n) * P, 1);
  for (int k = 0; k < n; ++k) ids.insert(ids.end(), gr.prompt.begin(), gr.prompt.end());
  auto r = ro.generate(Tensor::from(ids, Shape{n, P}), Tensor::from(mask, Shape{n, P}), sp, gr.seeds);
  std::vector<Sample> out(static_cast<std::size_t>(n));
  for (int k = 0; k < n; ++k)
    for (int j = 0; j < sp.max_new_tokens && r.response_mask.at<std::int32_t>(k, j); ++j) {
      out[std::size_t(k)].tokens.push_back(r.responses.at<std::int32_t>(k, j));
      out[std::size_t(k)].logprobs.push_back(r.log_probs.at<float>(k, j));
    }
  return out;
}

void require_same(RequestOutput const& a, RequestOutput const& b) {
  REQUIRE(a.samples.size() == b.samples.size());
  for (std::size_t k = 0; k < a.samples.size(); ++k) {
    REQUIRE(a.samples[k].tokens == b.samples[k].tokens);
    REQUIRE(a.samples[k].logprobs.size() == b.samples[k].logprobs.size());
    for (std::size_t j = 0; j < a.samples[k].logprobs.size(); ++j)
      REQUIRE(a.samples[k].logprobs[j] == Approx(b.samples[k].logprobs[j]).margin(2e-5));
  }
}

SamplingParams sampled(int R) {
  SamplingParams sp;
  sp.temperature = 0.9f;
  sp.top_k = 20;
  sp.top_p = 0.95f;
  sp.max_new_tokens = R;
  sp.eos_id = 2;
  return sp;
}

// the tensor-parallel cases' reference: one unsharded paged engine with weights w
std::vector<RequestOutput> one_rank(GPTConfig const& cfg, PagedEngineConfig const& pc, std::vector<float> const& w,
                                    std::vector<std::vector<std::int32_t>> const& prompts, std::vector<RequestParams> const& params) {
  PagedEngine one(cfg, pc);
  one.load_weights(w);
  return one.generate(prompts, params);
}

}  // namespace

TEST_CASE("outputs equal the static engine's, greedy and sampled", "[engine][paged]") {
  auto const arch = GENERATE(Arch::gpt2, Arch::llama, Arch::qwen3);
  auto const greedy = GENERATE(true, false);
  GPTConfig const cfg = model_of(arch);
  auto const w = fixtures::perturbed_weights(cfg, 3, 0.3f);
  RolloutEngine ro(cfg);
  ro.load_weights(w);
  PagedEngineConfig pc;
  pc.block_size = 4;
  PagedEngine pe(cfg, pc);
  pe.load_weights(w);
  SamplingParams sp = sampled(20);
  if (greedy) sp.temperature = 0.0f;
  auto const gs = random_groups(5, 3, cfg.vocab_size, 11 + unsigned(greedy));
  auto const outs = pe.generate(prompts_of(gs), params_of(gs, sp));
  int stopped = 0;
  for (std::size_t i = 0; i < gs.size(); ++i) {
    auto const ref = static_group(ro, gs[i], sp);
    REQUIRE(outs[i].samples.size() == ref.size());
    for (std::size_t k = 0; k < ref.size(); ++k) {
      auto const& s = outs[i].samples[k];
      REQUIRE(s.tokens == ref[k].tokens);
      for (std::size_t j = 0; j < s.tokens.size(); ++j) REQUIRE(s.logprobs[j] == Approx(ref[k].logprobs[j]).margin(2e-5));
      stopped += s.finish == rlflow::engine::FinishReason::stop;
    }
  }
  INFO("samples that stopped at EOS: " << stopped);
  REQUIRE(pe.pool().num_used() == 0);
  REQUIRE(pe.metrics().prompt_tokens_prefilled == [&] {
    std::uint64_t s = 0;
    for (auto const& g : gs) s += g.prompt.size();
    return s;
  }());
}

TEST_CASE("outputs do not depend on the schedule", "[engine][paged]") {
  auto const arch = GENERATE(Arch::gpt2, Arch::qwen3);
  GPTConfig const cfg = model_of(arch);
  auto const w = fixtures::perturbed_weights(cfg, 5, 0.3f);
  SamplingParams const sp = sampled(24);
  auto const gs = random_groups(7, 3, cfg.vocab_size, 21, 1, 36);
  auto run = [&](PagedEngineConfig pc, bool reversed, rlflow::engine::PagedMetrics* m = nullptr) {
    return paged_groups::run_groups<PagedEngine>(cfg, pc, w, gs, sp, reversed, m);
  };
  auto const ref = run(PagedEngineConfig{}, false);
  auto check = [&](std::vector<RequestOutput> const& o) {
    for (std::size_t i = 0; i < gs.size(); ++i) require_same(o[i], ref[i]);
  };
  SECTION("max_num_seqs") {
    for (int s : {3, 4, 7}) {
      PagedEngineConfig pc;
      pc.max_num_seqs = s;
      rlflow::engine::PagedMetrics m;
      check(run(pc, false, &m));
    }
  }
  SECTION("block_size") {
    for (int b : {1, 3, 8, 64}) {
      PagedEngineConfig pc;
      pc.block_size = b;
      check(run(pc, false));
    }
  }
  SECTION("chunk size") {
    for (int c : {1, 5, 13}) {
      PagedEngineConfig pc;
      pc.max_num_batched_tokens = c;
      pc.block_size = 4;
      rlflow::engine::PagedMetrics m;
      check(run(pc, false, &m));
      REQUIRE(m.max_step_tokens == std::uint64_t(c));  // prefills fill the budget
    }
  }
  SECTION("arrival order") { check(run(PagedEngineConfig{}, true)); }
  SECTION("without prefix caching or chunked prefill") {
    PagedEngineConfig pc;
    pc.enable_prefix_caching = false;
    pc.enable_chunked_prefill = false;
    pc.max_num_batched_tokens = 64;
    check(run(pc, false));
  }
  SECTION("forced preemption in a tiny pool") {
    for (int b : {4, 8}) {
      PagedEngineConfig pc;
      pc.block_size = b;
      int const blocks = (36 + 24 + b - 1) / b + 2;  // one longest sample and a little more
      pc.kv_cache_bytes = std::size_t(blocks) * rlflow::engine::BlockPool::Shape{cfg.n_layer, cfg.kv_heads(), cfg.head_dim(), b}
                                                    .bytes_per_block();
      rlflow::engine::PagedMetrics m;
      check(run(pc, false, &m));
      REQUIRE(m.num_blocks == blocks);
      REQUIRE(m.preemptions > 0);
      REQUIRE(m.peak_blocks_used <= blocks);
    }
  }
}

TEST_CASE("chunked prefill gives the one-shot prefill's logits", "[engine][paged]") {
  auto const arch = GENERATE(Arch::gpt2, Arch::llama, Arch::qwen3);
  GPTConfig const cfg = model_of(arch);
  auto const w = fixtures::perturbed_weights(cfg, 8, 0.3f);
  auto const gs = random_groups(4, 1, cfg.vocab_size, 31, 20, 50);
  SamplingParams sp = sampled(3);
  sp.temperature = 0.0f;
  auto logits_of = [&](int chunk) {
    PagedEngineConfig pc;
    pc.max_num_batched_tokens = chunk;
    pc.block_size = 4;
    PagedEngine pe(cfg, pc);
    pe.load_weights(w);
    std::map<std::string, std::vector<float>> first;
    pe.set_logits_observer([&](std::string_view id, int, int index, std::span<float const> lg) {
      if (index == 0) first[std::string(id)].assign(lg.begin(), lg.end());
    });
    pe.generate(prompts_of(gs), params_of(gs, sp));
    return first;
  };
  auto const one = logits_of(4096);
  for (int chunk : {1, 6, 17}) {
    auto const ch = logits_of(chunk);
    REQUIRE(ch.size() == gs.size());
    for (auto const& [id, lg] : one) {
      auto const& o = ch.at(id);  // relative to the row's scale: sgemm's blocking differs with the batch's rows
      double diff = 0, scale = 0;
      for (std::size_t v = 0; v < lg.size(); ++v) {
        diff = std::max(diff, std::abs(double(o[v]) - double(lg[v])));
        scale = std::max(scale, std::abs(double(lg[v])));
      }
      INFO("chunk " << chunk << ", request " << id << ": max |diff| " << diff << ", max |logit| " << scale);
      REQUIRE(scale > 0.1);
      REQUIRE(diff <= 1e-5 * scale);
    }
  }
}

TEST_CASE("a group prefills its prompt once and shares its blocks", "[engine][paged]") {
  GPTConfig const cfg = model_of(Arch::qwen3);
  auto const w = fixtures::perturbed_weights(cfg, 9, 0.3f);
  int const n = GENERATE(1, 4, 8);
  int const P = GENERATE(5, 16, 37);
  int const bs = 8, R = 20;
  auto gs = random_groups(1, n, cfg.vocab_size, 41);
  gs[0].prompt.resize(std::size_t(P), 5);
  PagedEngineConfig pc;
  pc.block_size = bs;
  PagedEngine pe(cfg, pc);
  pe.load_weights(w);
  SamplingParams sp = sampled(R);
  sp.eos_id = -1;  // every sample runs R tokens
  auto const out = paged_groups::run_group_once(pe, gs[0], bs, sp);
  // and the samples equal the static engine's rows
  RolloutEngine ro(cfg);
  ro.load_weights(w);
  auto const ref = static_group(ro, gs[0], sp);
  for (int k = 0; k < n; ++k) REQUIRE(out.samples[std::size_t(k)].tokens == ref[std::size_t(k)].tokens);
}

TEST_CASE("prefix caching reuses full blocks across requests", "[engine][paged]") {
  GPTConfig const cfg = model_of(Arch::llama);
  auto const w = fixtures::perturbed_weights(cfg, 12, 0.3f);
  int const bs = 4;
  auto const gs = random_groups(1, 2, cfg.vocab_size, 51, 23, 23);
  SamplingParams const sp = sampled(10);
  for (bool caching : {true, false}) {
    PagedEngineConfig pc;
    pc.block_size = bs;
    pc.enable_prefix_caching = caching;
    PagedEngine pe(cfg, pc);
    pe.load_weights(w);
    auto const first = pe.generate(prompts_of(gs), params_of(gs, sp));
    auto const m1 = pe.metrics();
    REQUIRE(m1.prefix_cache_hits == 0);
    auto const second = pe.generate(prompts_of(gs), params_of(gs, sp));
    auto const m2 = pe.metrics();
    require_same(second[0], first[0]);
    std::uint64_t const hits = caching ? std::uint64_t((23 - 1) / bs * bs) : 0;
    REQUIRE(m2.prefix_cache_hits == hits);
    REQUIRE(m2.prompt_tokens_prefilled - m1.prompt_tokens_prefilled == 23 - hits);
    REQUIRE(m2.prefix_cache_hit_rate() == Approx(double(hits) / (2 * 23)));
    auto const nv = m2.named();
    std::map<std::string, double> const named(nv.begin(), nv.end());
    REQUIRE(named.at("prefix_cache_hits") == double(hits));
    REQUIRE(named.at("prefix_cache_queries") == 2 * 23);
    REQUIRE(named.at("generation_tokens") == double(m2.generation_tokens));
    REQUIRE(named.at("kv_cache_usage_perc") == 0.0);  // idle: every block free
    // a longer prompt sharing the first blocks hits them too
    auto longer = prompts_of(gs);
    std::int32_t fresh = 3;  // a next token no sample generated first, so only the prompt's full blocks match
    auto taken = [&](std::int32_t t) {
      return std::any_of(first[0].samples.begin(), first[0].samples.end(), [t](auto const& s) { return s.tokens[0] == t; });
    };
    while (taken(fresh)) ++fresh;
    for (auto const& s : first[0].samples) REQUIRE(s.tokens[0] != fresh);
    longer[0].insert(longer[0].end(), {fresh, 6, 7, 8, 9});
    pe.generate(longer, params_of(gs, sp));
    REQUIRE(pe.metrics().prefix_cache_hits - m2.prefix_cache_hits == (caching ? std::uint64_t(23 / bs * bs) : 0));
    REQUIRE(pe.pool().num_used() == 0);
  }
}

TEST_CASE("the pool never leaks: aborts, sleep and an exception free every block", "[engine][paged]") {
  GPTConfig const cfg = model_of(Arch::gpt2);
  auto const w = fixtures::perturbed_weights(cfg, 13, 0.3f);
  auto const gs = random_groups(6, 3, cfg.vocab_size, 61);
  SamplingParams sp = sampled(20);
  sp.eos_id = -1;
  PagedEngineConfig pc;
  pc.block_size = 4;
  pc.max_num_seqs = 9;  // some requests wait
  PagedEngine pe(cfg, pc);
  pe.load_weights(w);
  auto const params = params_of(gs, sp);
  auto const ref = pe.generate(prompts_of(gs), params);
  SECTION("aborts of running, waiting and unknown requests") {
    for (std::size_t i = 0; i < gs.size(); ++i) pe.add_request("r" + std::to_string(i), gs[i].prompt, params[i]);
    for (int s = 0; s < 4; ++s) REQUIRE(pe.step().empty());
    REQUIRE(pe.metrics().waiting > 0);
    REQUIRE(pe.pool().num_used() > 0);
    auto const a = pe.abort("r0");  // running
    REQUIRE(a.has_value());
    REQUIRE(a->aborted);
    for (std::size_t k = 0; k < 3; ++k) {
      auto const& got = a->samples[k].tokens;
      REQUIRE(a->samples[k].finish == rlflow::engine::FinishReason::abort);
      REQUIRE(std::equal(got.begin(), got.end(), ref[0].samples[k].tokens.begin()));  // a prefix of the full run
    }
    REQUIRE(pe.abort("r5").has_value());  // waiting
    REQUIRE_FALSE(pe.abort("nope").has_value());
    std::vector<RequestOutput> rest;
    while (pe.has_unfinished())
      for (auto& o : pe.step()) rest.push_back(std::move(o));
    REQUIRE(rest.size() == 4);
    for (auto const& o : rest) require_same(o, ref[std::size_t(std::stoi(o.request_id.substr(1)))]);
    REQUIRE(pe.pool().num_used() == 0);
    for (std::size_t i = 0; i < gs.size(); ++i) pe.add_request("q" + std::to_string(i), gs[i].prompt, params[i]);
    pe.step();
    pe.abort_all();
    REQUIRE(pe.pool().num_used() == 0);
  }
  SECTION("sleep frees the pool's storage; the next run takes it again") {
    pe.add_request("x", gs[0].prompt, params[0]);
    REQUIRE_THROWS_WITH(pe.sleep(), Catch::Contains("1 requests are in flight"));
    pe.abort("x");
    REQUIRE(pe.has_kv_storage());
    pe.sleep();
    REQUIRE_FALSE(pe.has_kv_storage());
    auto const again = pe.generate(prompts_of(gs), params);
    REQUIRE(pe.has_kv_storage());
    for (std::size_t i = 0; i < gs.size(); ++i) require_same(again[i], ref[i]);
  }
  SECTION("an exception from sampling") {
    int calls = 0;
    pe.set_logits_observer([&](std::string_view, int, int index, std::span<float const>) {
      if (index == 5 && ++calls == 4) throw std::runtime_error("observer fails");
    });
    for (std::size_t i = 0; i < gs.size(); ++i) pe.add_request("r" + std::to_string(i), gs[i].prompt, params[i]);
    REQUIRE_THROWS_WITH([&] {
      while (pe.has_unfinished()) pe.step();
    }(), "observer fails");
    REQUIRE_FALSE(pe.has_unfinished());
    REQUIRE(pe.pool().num_used() == 0);
    pe.set_logits_observer(nullptr);
    auto const again = pe.generate(prompts_of(gs), params);  // still usable
    for (std::size_t i = 0; i < gs.size(); ++i) require_same(again[i], ref[i]);
  }
}

TEST_CASE("min_p keeps only tokens with p >= min_p * p_max", "[engine][paged]") {
  GPTConfig const cfg = model_of(Arch::qwen3);
  auto const w = fixtures::perturbed_weights(cfg, 14, 0.6f);
  PagedEngine pe(cfg);
  pe.load_weights(w);
  float const T = 1.3f, min_p = 0.2f;
  std::map<std::pair<std::string, std::pair<int, int>>, std::vector<float>> seen;
  pe.set_logits_observer([&](std::string_view id, int k, int index, std::span<float const> lg) {
    seen[{std::string(id), {k, index}}].assign(lg.begin(), lg.end());
  });
  auto const gs = random_groups(6, 4, cfg.vocab_size, 71);
  RequestParams p;
  p.n = 4;
  p.temperature = T;
  p.min_p = min_p;
  p.max_tokens = 30;
  p.seed = 99;
  auto const out = pe.generate(prompts_of(gs), {p});
  int checked = 0, below_unfiltered = 0;
  for (auto const& o : out)
    for (int k = 0; k < 4; ++k)
      for (std::size_t j = 0; j < o.samples[std::size_t(k)].tokens.size(); ++j) {
        auto const& lg = seen.at({o.request_id, {k, int(j)}});
        float const m = *std::max_element(lg.begin(), lg.end());
        int const tok = o.samples[std::size_t(k)].tokens[j];
        REQUIRE(std::exp((double(lg[std::size_t(tok)]) - m) / T) >= min_p * (1 - 1e-6));
        ++checked;
        for (float z : lg) below_unfiltered += std::exp((double(z) - m) / T) < min_p;
      }
  REQUIRE(checked == 6 * 4 * 30);
  REQUIRE(below_unfiltered > 0);  // the filter had something to remove
}

TEST_CASE("a resumed request continues the same tokens", "[engine][paged]") {
  GPTConfig const cfg = model_of(Arch::gpt2);
  auto const w = fixtures::perturbed_weights(cfg, 15, 0.3f);
  PagedEngine pe(cfg);
  pe.load_weights(w);
  auto const gs = random_groups(3, 1, cfg.vocab_size, 81);
  SamplingParams sp = sampled(16);
  sp.eos_id = -1;
  auto const full = pe.generate(prompts_of(gs), params_of(gs, sp));
  for (std::size_t i = 0; i < gs.size(); ++i) {
    int const cut = 5 + int(i);
    auto const& toks = full[i].samples[0].tokens;
    std::vector<std::int32_t> prompt = gs[i].prompt;
    prompt.insert(prompt.end(), toks.begin(), toks.begin() + cut);
    RequestParams p = RequestParams::from_static(sp, gs[i].seeds);
    p.first_token = std::uint64_t(cut);
    p.max_tokens = 16 - cut;
    auto const rest = pe.generate({prompt}, {p});
    REQUIRE(rest[0].samples[0].tokens == std::vector<std::int32_t>(toks.begin() + cut, toks.end()));
  }
}

TEST_CASE("input errors name the problem", "[engine][paged]") {
  GPTConfig const cfg = model_of(Arch::gpt2);
  PagedEngineConfig pc;
  pc.max_num_seqs = 4;
  PagedEngine pe(cfg, pc);
  RequestParams p;
  p.max_tokens = 4;
  pe.add_request("a", {3, 4}, p);
  REQUIRE_THROWS_WITH(pe.add_request("a", {3}, p), Catch::Contains("'a' is already in flight"));
  REQUIRE_THROWS_WITH(pe.add_request("b", {}, p), Catch::Contains("empty prompt"));
  REQUIRE_THROWS_WITH(pe.add_request("b", {3, 41}, p), Catch::Contains("token 41 at position 1 is outside the vocabulary [0, 41)"));
  RequestParams q = p;
  q.max_tokens = 60;
  REQUIRE_THROWS_WITH(pe.add_request("b", {3, 4, 5, 6, 7}, q), Catch::Contains("prompt 5 + max_tokens 60 = 65 exceeds max_seq_len = 64"));
  q = p;
  q.n = 5;
  REQUIRE_THROWS_WITH(pe.add_request("b", {3}, q), Catch::Contains("n = 5 must be in [1, max_num_seqs = 4]"));
  q.n = 2;
  q.seeds = {1, 2, 3};
  REQUIRE_THROWS_WITH(pe.add_request("b", {3}, q), Catch::Contains("3 seeds for n = 2 samples"));
  q = p;
  q.stop_token_ids = {50};
  REQUIRE_THROWS_WITH(pe.add_request("b", {3}, q), Catch::Contains("stop token 50"));
  q = p;
  q.min_p = 1.5f;
  REQUIRE_THROWS_WITH(pe.add_request("b", {3}, q), Catch::Contains("min_p = 1.5"));
  q = p;
  q.temperature = -1;
  REQUIRE_THROWS_WITH(pe.add_request("b", {3}, q), Catch::Contains("temperature"));
  REQUIRE_THROWS_WITH(pe.generate({{3}}, {p}), Catch::Contains("requests are in flight"));
  REQUIRE(pe.has_unfinished());  // the bad requests changed nothing
  REQUIRE(pe.num_unfinished() == 1);
  PagedEngineConfig tiny;
  tiny.block_size = 4;
  tiny.kv_cache_bytes = 3 * rlflow::engine::BlockPool::Shape{cfg.n_layer, cfg.kv_heads(), cfg.head_dim(), 4}.bytes_per_block();
  PagedEngine small(cfg, tiny);
  REQUIRE_THROWS_WITH(small.add_request("b", std::vector<std::int32_t>(10, 3), p), Catch::Contains("needs 4 blocks of 4 and the pool holds 3"));
  PagedEngineConfig bad;
  bad.block_size = 0;
  REQUIRE_THROWS_WITH(PagedEngine(cfg, bad), Catch::Contains("block_size = 0"));
  bad = {};
  bad.kv_cache_bytes = 16;
  REQUIRE_THROWS_WITH(PagedEngine(cfg, bad), Catch::Contains("holds no block"));
  bad = {};
  bad.enable_chunked_prefill = false;
  bad.max_num_batched_tokens = 8;
  PagedEngine nochunk(cfg, bad);
  REQUIRE_THROWS_WITH(nochunk.add_request("b", {3, 4, 5, 6, 7}, p), Catch::Contains("9 positions exceed max_num_batched_tokens = 8"));
}

TEST_CASE("tensor-parallel ranks hold their heads' share of the blocks and agree with one rank", "[engine][paged][tp]") {
  auto const arch = GENERATE(Arch::gpt2, Arch::qwen3);
  GPTConfig const cfg = model_of(arch);
  auto const w = fixtures::perturbed_weights(cfg, 16, 0.3f);
  auto const gs = random_groups(4, 2, cfg.vocab_size, 91);
  SamplingParams const sp = sampled(12);
  PagedEngineConfig pc;
  pc.block_size = 4;
  pc.max_num_batched_tokens = 9;  // chunked prefills mixed with decodes
  auto const ref = one_rank(cfg, pc, w, prompts_of(gs), params_of(gs, sp));
  auto const outs = fixtures::on_ranks(2, [&](int r, rlflow::comm::LocalCommunicator& comm) {
    PagedEngine eng(cfg, pc, rlflow::model::TPRank{r, 2}, &comm);
    eng.load_weights(w);
    REQUIRE(eng.pool().shape().kv_heads == cfg.kv_heads() / 2);
    auto o = eng.generate(prompts_of(gs), params_of(gs, sp));
    REQUIRE(eng.pool().num_used() == 0);
    return o;
  });
  for (int r = 0; r < 2; ++r)
    for (std::size_t i = 0; i < gs.size(); ++i) require_same(outs[std::size_t(r)][i], ref[i]);
}

TEST_CASE("a tensor-parallel engine given its communicator after construction agrees with one rank", "[engine][paged][tp]") {
  auto const arch = GENERATE(Arch::gpt2, Arch::llama);
  GPTConfig const cfg = model_of(arch);
  auto const w = fixtures::perturbed_weights(cfg, 18, 0.3f);
  auto const gs = random_groups(3, 2, cfg.vocab_size, 97);
  SamplingParams const sp = sampled(10);
  PagedEngineConfig pc;
  pc.block_size = 4;
  pc.max_num_batched_tokens = 11;
  auto const ref = one_rank(cfg, pc, w, prompts_of(gs), params_of(gs, sp));
  auto wrong_size = rlflow::comm::LocalCommunicator::make_group(3);
  auto wrong_rank = rlflow::comm::LocalCommunicator::make_group(2);
  auto const outs = fixtures::on_ranks(2, [&](int r, rlflow::comm::LocalCommunicator& comm) {
    PagedEngine eng(cfg, pc, rlflow::model::TPRank{r, 2});  // the roles split the mesh later
    eng.load_weights(w);
    // no communicator yet: refused before any request is queued, naming the fix
    REQUIRE_THROWS_WITH(eng.generate(prompts_of(gs), params_of(gs, sp)), Catch::Contains("set_tp_communicator"));
    REQUIRE_FALSE(eng.has_unfinished());
    REQUIRE_THROWS_WITH(eng.set_tp_communicator(nullptr), Catch::Contains("got none"));
    REQUIRE_THROWS_WITH(eng.set_tp_communicator(wrong_size[std::size_t(r)].get()), Catch::Contains("got size 3"));
    REQUIRE_THROWS_WITH(eng.set_tp_communicator(wrong_rank[std::size_t(1 - r)].get()), Catch::Contains(rlflow::msg("got size 2, rank ", 1 - r)));
    eng.set_tp_communicator(&comm);
    auto o = eng.generate(prompts_of(gs), params_of(gs, sp));
    REQUIRE(eng.pool().num_used() == 0);
    return o;
  });
  for (int r = 0; r < 2; ++r)
    for (std::size_t i = 0; i < gs.size(); ++i) require_same(outs[std::size_t(r)][i], ref[i]);
  // a wrong communicator given at construction is refused the same way
  REQUIRE_THROWS_WITH(PagedEngine(cfg, pc, rlflow::model::TPRank{0, 2}, wrong_size[0].get()), Catch::Contains("needs its TP group's communicator"));
}

namespace {
// the largest |a - b| over the log-probs of equal token sequences (tokens checked by the caller)
double worst_logprob_gap(std::vector<RequestOutput> const& a, std::vector<RequestOutput> const& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t k = 0; k < a[i].samples.size(); ++k)
      for (std::size_t j = 0; j < a[i].samples[k].logprobs.size(); ++j)
        worst = std::max(worst, std::fabs(double(a[i].samples[k].logprobs[j]) - double(b[i].samples[k].logprobs[j])));
  return worst;
}
std::vector<std::vector<std::vector<std::int32_t>>> tokens_of(std::vector<RequestOutput> const& o) {
  std::vector<std::vector<std::vector<std::int32_t>>> t;
  for (auto const& r : o) {
    t.emplace_back();
    for (auto const& s : r.samples) t.back().push_back(s.tokens);
  }
  return t;
}
}  // namespace

TEST_CASE("the vocabulary-parallel LM head at TP 2: the static engine's tokens, the one-rank log-probs", "[engine][paged][tp][vocab_parallel]") {
  // V = 301 >= vocab_parallel_min_vocab: both engines default to the vocabulary-parallel head at
  // TP 2, each rank holding 150 or 151 of wte's rows (uneven slices). The draws share one sampler
  // (detail::VocabParallelSampler), so the two engines' tokens are equal whenever their logits
  // are; those differ from one rank's only by the rounding of the row-parallel all-reduces and of
  // BLAS over different batch shapes (a few float ulps of logits of order 1 to 10), and the
  // log-sum-exp is summed in double over the ranks: the log-probs are compared within 2e-5, the
  // bound of the replicated TP cases above.
  auto const arch = GENERATE(Arch::gpt2, Arch::llama);
  auto const mode = GENERATE(0, 1, 2, 3);  // greedy, top-k + top-p, plain temperature, top-p alone
  INFO("arch " << int(arch) << " mode " << mode);
  GPTConfig cfg = model_of(arch);
  cfg.vocab_size = 301;
  cfg.validate();
  auto const w = fixtures::perturbed_weights(cfg, 31 + unsigned(mode), 0.3f);
  auto const gs = random_groups(4, 3, cfg.vocab_size, 131 + unsigned(mode), 2, 20);
  SamplingParams sp = sampled(12);
  if (mode == 0) sp.temperature = 0.0f;
  if (mode == 2) { sp.top_k = 0; sp.top_p = 1.0f; sp.temperature = 1.1f; }
  if (mode == 3) { sp.top_k = 0; sp.top_p = 0.8f; }
  PagedEngineConfig pc;
  pc.block_size = 4;
  pc.max_num_batched_tokens = 13;  // chunked prefills mixed with decodes
  auto const ref = one_rank(cfg, pc, w, prompts_of(gs), params_of(gs, sp));
  struct Rank {
    std::vector<RequestOutput> out;
    std::vector<std::vector<Sample>> stat;  // the static engine's samples, group by group
    rlflow::model::LMHead paged_head{}, static_head{};
    int v0 = 0, v1 = 0, used = -1;
  };
  auto const ranks = fixtures::on_ranks(2, [&](int r, rlflow::comm::LocalCommunicator& comm) {
    Rank k;
    RolloutEngine ro(cfg, rlflow::model::TPRank{r, 2}, &comm);
    ro.load_weights(w);
    k.static_head = ro.lm_head();
    for (auto const& g : gs) k.stat.push_back(static_group(ro, g, sp));
    PagedEngine eng(cfg, pc, rlflow::model::TPRank{r, 2}, &comm);
    eng.load_weights(w);
    k.paged_head = eng.lm_head();
    k.v0 = eng.vocab_begin();
    k.v1 = eng.vocab_end();
    k.out = eng.generate(prompts_of(gs), params_of(gs, sp));
    k.used = eng.pool().num_used();
    return k;
  });
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    auto const& k = ranks[std::size_t(r)];
    REQUIRE(k.paged_head == rlflow::model::LMHead::vocab_parallel);
    REQUIRE(k.static_head == rlflow::model::LMHead::vocab_parallel);
    REQUIRE(k.v0 == cfg.vocab_size * r / 2);
    REQUIRE(k.v1 == cfg.vocab_size * (r + 1) / 2);
    REQUIRE(k.used == 0);
    // the same tokens as the static engine with the same head, and as one rank
    REQUIRE(tokens_of(k.out) == tokens_of(ref));
    for (std::size_t i = 0; i < gs.size(); ++i)
      for (std::size_t s = 0; s < gs[i].seeds.size(); ++s) {
        REQUIRE(k.out[i].samples[s].tokens == k.stat[i][s].tokens);
        for (std::size_t j = 0; j < k.stat[i][s].logprobs.size(); ++j)
          REQUIRE(k.out[i].samples[s].logprobs[j] == Approx(k.stat[i][s].logprobs[j]).margin(2e-5));
      }
    double const gap = worst_logprob_gap(k.out, ref);
    INFO("largest log-prob difference from one rank " << gap);
    REQUIRE(gap <= 2e-5);
  }
  REQUIRE(tokens_of(ranks[0].out) == tokens_of(ranks[1].out));
}

TEST_CASE("the vocabulary-parallel head with per-request filters, min-p and vocab_limit in one step equals one rank",
          "[engine][paged][tp][vocab_parallel]") {
  // requests with different filters run batched in the same steps: the sampler's greedy, plain,
  // top-k and top-p draws side by side, min-p's cut and a vocabulary limit on the slices
  auto const arch = GENERATE(Arch::gpt2, Arch::qwen3);
  GPTConfig cfg = model_of(arch);
  cfg.vocab_size = 280;
  cfg.validate();
  auto const w = fixtures::perturbed_weights(cfg, 41, 0.3f);
  auto const gs = random_groups(6, 2, cfg.vocab_size, 141, 2, 16);
  std::vector<RequestParams> ps = params_of(gs, sampled(10));
  ps[0].temperature = 0.0f;                              // greedy
  ps[1].top_k = 0; ps[1].top_p = 1.0f;                   // plain
  ps[2].top_k = 0; ps[2].top_p = 0.7f;                   // top-p alone
  ps[3].min_p = 0.05f;                                   // top-k, top-p and min-p
  ps[4].top_k = 0; ps[4].top_p = 1.0f; ps[4].min_p = 0.1f;  // min-p alone
  ps[5].vocab_limit = 200;                               // ids >= 200 never drawn (on rank 1's slice)
  ps[5].top_k = 0;
  PagedEngineConfig pc;
  pc.block_size = 4;
  auto const ref = one_rank(cfg, pc, w, prompts_of(gs), ps);
  auto const outs = fixtures::on_ranks(2, [&](int r, rlflow::comm::LocalCommunicator& comm) {
    PagedEngine eng(cfg, pc, rlflow::model::TPRank{r, 2}, &comm);
    eng.load_weights(w);
    return eng.generate(prompts_of(gs), ps);
  });
  for (int r = 0; r < 2; ++r) {
    REQUIRE(tokens_of(outs[std::size_t(r)]) == tokens_of(ref));
    REQUIRE(worst_logprob_gap(outs[std::size_t(r)], ref) <= 2e-5);
  }
  for (auto const& s : outs[0][5].samples)
    for (auto t : s.tokens) REQUIRE(t < 200);
}

TEST_CASE("the paged engine's LM head choice: defaults, set_lm_head and its errors", "[engine][paged][tp][vocab_parallel]") {
  GPTConfig big = model_of(Arch::llama);  // untied: the embedding stays whole, the head is split
  big.vocab_size = rlflow::engine::vocab_parallel_min_vocab;
  big.validate();
  GPTConfig const small = model_of(Arch::llama);
  PagedEngineConfig pc;
  pc.block_size = 4;
  REQUIRE(PagedEngine(small, pc, rlflow::model::TPRank{0, 2}).lm_head() == rlflow::model::LMHead::replicated);
  REQUIRE(PagedEngine(big, pc).lm_head() == rlflow::model::LMHead::replicated);  // TP 1
  GPTConfig tiny = model_of(Arch::gpt2);
  tiny.n_head = 4;
  tiny.vocab_size = 3;  // fewer vocabulary rows than TP ranks
  tiny.validate();
  PagedEngine few_rows(tiny, pc, rlflow::model::TPRank{1, 4});
  REQUIRE_THROWS_WITH(few_rows.set_lm_head(rlflow::model::LMHead::vocab_parallel),
                      Catch::Contains("needs vocab_size (3) >= the TP size (4)") && Catch::Contains("LMHead::replicated"));
  REQUIRE(few_rows.lm_head() == rlflow::model::LMHead::replicated);
  auto const w = fixtures::perturbed_weights(big, 43, 0.3f);
  auto const gs = random_groups(3, 2, big.vocab_size, 151, 2, 12);
  auto const ps = params_of(gs, sampled(8));
  auto const ref = one_rank(big, pc, w, prompts_of(gs), ps);
  struct Rank {
    std::vector<RequestOutput> out;
    std::string refused_replicated, refused_abort;
    bool default_vp = false, replicated_whole = false;
  };
  auto const ranks = fixtures::on_ranks(2, [&](int r, rlflow::comm::LocalCommunicator& comm) {
    Rank k;
    {  // the default, and the replicated head chosen before the load: wte whole, one rank's tokens
      PagedEngine eng(big, pc, rlflow::model::TPRank{r, 2}, &comm);
      k.default_vp = eng.lm_head() == rlflow::model::LMHead::vocab_parallel && eng.vocab_end() - eng.vocab_begin() == big.vocab_size / 2;
      eng.set_lm_head(rlflow::model::LMHead::replicated);
      k.replicated_whole = eng.vocab_begin() == 0 && eng.vocab_end() == big.vocab_size &&
                           eng.weights().size() == rlflow::model::ShardLayout(big, rlflow::model::TPRank{r, 2}).size();
      eng.load_weights(w);
      k.out = eng.generate(prompts_of(gs), ps);
      // to vocab_parallel after a load: the rank keeps its rows; back to replicated is refused
      eng.set_lm_head(rlflow::model::LMHead::vocab_parallel);
      try {
        eng.set_lm_head(rlflow::model::LMHead::replicated);
      } catch (rlflow::config_error const& e) {
        k.refused_replicated = e.what();
      }
      // an abortable generation needs the replicated head
      std::atomic<bool> stop{false};
      GenerateControl ctl;
      ctl.abort = &stop;
      try {
        Tensor const ids = Tensor::from(std::vector<std::int32_t>{3, 4}, Shape{1, 2});
        Tensor const mask = Tensor::from(std::vector<std::int32_t>{1, 1}, Shape{1, 2});
        std::vector<std::uint64_t> const seeds{1};
        eng.generate(ids, mask, sampled(4), seeds, ctl);
      } catch (rlflow::value_error const& e) {
        k.refused_abort = e.what();
      }
    }
    return k;
  });
  for (auto const& k : ranks) {
    REQUIRE(k.default_vp);
    REQUIRE(k.replicated_whole);
    REQUIRE(tokens_of(k.out) == tokens_of(ref));
    REQUIRE(worst_logprob_gap(k.out, ref) <= 2e-5);
    REQUIRE_THAT(k.refused_replicated, Catch::Contains("before load_weights") && Catch::Contains("lm_head"));
    REQUIRE_THAT(k.refused_abort, Catch::Contains("needs the replicated LM head"));
  }
}

TEST_CASE("the static engine's batch contract: left-padded rows, groups of repeated prompts", "[engine][paged]") {
  auto const arch = GENERATE(Arch::gpt2, Arch::llama);
  GPTConfig const cfg = model_of(arch);
  auto const w = fixtures::perturbed_weights(cfg, 17, 0.3f);
  // 4 prompts x n = 3, repeated interleaved, of different lengths (left padding), plus a lone row
  auto const gs = random_groups(4, 3, cfg.vocab_size, 101, 2, 20);
  std::vector<std::vector<std::int32_t>> rows;
  std::vector<std::uint64_t> seeds;
  for (auto const& g : gs)
    for (auto s : g.seeds) {
      rows.push_back(g.prompt);
      seeds.push_back(s);
    }
  rows.push_back(gs[0].prompt);  // the same prompt again, not adjacent: its own request
  seeds.push_back(5);
  int P = 0;
  for (auto const& r : rows) P = std::max(P, int(r.size()));
  int const B = int(rows.size());
  std::vector<std::int32_t> ids, mask;
  for (auto const& r : rows) {
    for (int t = int(r.size()); t < P; ++t) { ids.push_back(0); mask.push_back(0); }
    for (auto x : r) { ids.push_back(x); mask.push_back(1); }
  }
  Tensor const ti = Tensor::from(ids, Shape{B, P}), tm = Tensor::from(mask, Shape{B, P});
  SamplingParams const sp = sampled(16);
  RolloutEngine ro(cfg);
  ro.load_weights(w);
  auto const ref = ro.generate(ti, tm, sp, seeds);
  for (int max_seqs : {256, 2}) {  // 2: the groups of 3 split into requests of at most 2
    PagedEngineConfig pc;
    pc.max_num_seqs = max_seqs;
    PagedEngine pe(cfg, pc);
    pe.load_weights(w);
    auto const got = pe.generate(ti, tm, sp, seeds);
    REQUIRE(bit_equal(got.responses, ref.responses));
    REQUIRE(bit_equal(got.response_mask, ref.response_mask));
    for (int b = 0; b < B; ++b)
      for (int j = 0; j < sp.max_new_tokens; ++j) REQUIRE(got.log_probs.at<float>(b, j) == Approx(ref.log_probs.at<float>(b, j)).margin(2e-5));
    if (max_seqs == 256) REQUIRE(pe.metrics().prompt_tokens_prefilled == [&] {
      std::uint64_t s = gs[0].prompt.size();
      for (auto const& g : gs) s += g.prompt.size();
      return s;
    }());
    REQUIRE_THROWS_WITH(pe.generate(ti, tm, sp, std::vector<std::uint64_t>(3, 1)), Catch::Contains("3 seeds for 13 prompts"));
  }
}

TEST_CASE("an aborted batch call returns each row's tokens so far, and continuing them gives the uninterrupted rows",
          "[engine][paged]") {
  // The async roads' partial rollout: GenerateControl::abort stops the call after the step that
  // sampled a token; with max_num_seqs 2 some requests are still waiting then (0 tokens), so the
  // unfinished rows hold different counts.
  GPTConfig const cfg = model_of(Arch::llama);
  auto const w = fixtures::perturbed_weights(cfg, 23, 0.3f);
  auto const gs = random_groups(3, 2, cfg.vocab_size, 211, 2, 12);
  std::vector<std::vector<std::int32_t>> rows;
  std::vector<std::uint64_t> seeds;
  for (auto const& g : gs)
    for (auto s : g.seeds) {
      rows.push_back(g.prompt);
      seeds.push_back(s);
    }
  int P = 0;
  for (auto const& r : rows) P = std::max(P, int(r.size()));
  int const B = int(rows.size());
  auto left_padded = [](std::vector<std::vector<std::int32_t>> const& rs, int width) {
    std::vector<std::int32_t> ids, mask;
    for (auto const& r : rs) {
      for (int t = int(r.size()); t < width; ++t) { ids.push_back(0); mask.push_back(0); }
      for (auto x : r) { ids.push_back(x); mask.push_back(1); }
    }
    auto const n = std::int64_t(rs.size());
    return std::pair(Tensor::from(ids, Shape{n, width}), Tensor::from(mask, Shape{n, width}));
  };
  auto const [ti, tm] = left_padded(rows, P);
  SamplingParams const sp = sampled(10);
  PagedEngineConfig pc;
  pc.max_num_seqs = 2;
  PagedEngine pe(cfg, pc);
  pe.load_weights(w);
  auto const ref = pe.generate(ti, tm, sp, seeds);
  REQUIRE(ref.unfinished.empty());
  std::atomic<bool> stop{true};
  GenerateControl ctl;
  ctl.abort = &stop;
  auto const part = pe.generate(ti, tm, sp, seeds, ctl);
  REQUIRE(pe.pool().num_used() == 0);  // the aborted requests freed their blocks
  REQUIRE(part.unfinished.size() == part.unfinished_generated.size());
  REQUIRE(!part.unfinished.empty());
  std::vector<int> count(std::size_t(B), -1);
  for (std::size_t u = 0; u < part.unfinished.size(); ++u) count[std::size_t(part.unfinished[u])] = part.unfinished_generated[u];
  REQUIRE(std::count(count.begin(), count.end(), 0) > 0);  // rows never admitted
  REQUIRE(std::count_if(count.begin(), count.end(), [](int c) { return c > 0; }) > 0);
  int const R = sp.max_new_tokens;
  for (int b = 0; b < B; ++b) {
    INFO("row " << b << " holds " << count[std::size_t(b)]);
    int held = 0;
    for (int j = 0; j < R; ++j) held += part.response_mask.at<std::int32_t>(b, j);
    if (count[std::size_t(b)] >= 0) REQUIRE(held == count[std::size_t(b)]);
    for (int j = 0; j < held; ++j) REQUIRE(part.responses.at<std::int32_t>(b, j) == ref.responses.at<std::int32_t>(b, j));
    if (count[std::size_t(b)] < 0) {  // finished in the first step
      for (int j = 0; j < R; ++j) REQUIRE(part.response_mask.at<std::int32_t>(b, j) == ref.response_mask.at<std::int32_t>(b, j));
      continue;
    }
    // continue the row: its tokens so far join the prompt, the counter goes on at their count
    std::vector<std::int32_t> row = rows[std::size_t(b)];
    for (int j = 0; j < held; ++j) row.push_back(part.responses.at<std::int32_t>(b, j));
    auto const [ci, cm] = left_padded({row}, int(row.size()));
    SamplingParams sp2 = sp;
    sp2.max_new_tokens = R - held;
    GenerateControl go;
    go.first_token = std::uint64_t(held);
    auto const rest = pe.generate(ci, cm, sp2, std::span<std::uint64_t const>(&seeds[std::size_t(b)], 1), go);
    for (int j = 0; j < R - held; ++j) {
      REQUIRE(rest.response_mask.at<std::int32_t>(0, j) == ref.response_mask.at<std::int32_t>(b, held + j));
      if (!rest.response_mask.at<std::int32_t>(0, j)) continue;
      REQUIRE(rest.responses.at<std::int32_t>(0, j) == ref.responses.at<std::int32_t>(b, held + j));
      REQUIRE(rest.log_probs.at<float>(0, j) == Approx(ref.log_probs.at<float>(b, held + j)).margin(2e-5));
    }
  }
}

TEST_CASE("new weights drop the prefix cache: a repeated prompt gives the new weights' tokens", "[engine][paged]") {
  GPTConfig const cfg = model_of(Arch::llama);
  auto const w0 = fixtures::perturbed_weights(cfg, 31, 0.3f), w1 = fixtures::perturbed_weights(cfg, 32, 0.3f);
  auto const gs = random_groups(2, 2, cfg.vocab_size, 61, 17, 25);
  SamplingParams const sp = sampled(8);
  PagedEngineConfig pc;
  pc.block_size = 4;
  PagedEngine pe(cfg, pc);
  pe.load_weights(w0);
  auto const old_out = pe.generate(prompts_of(gs), params_of(gs, sp));
  auto const before = pe.metrics().prefix_cache_hits;
  pe.load_weights(w1);  // the trainer's weight sync
  auto const got = pe.generate(prompts_of(gs), params_of(gs, sp));
  REQUIRE(pe.metrics().prefix_cache_hits == before);  // nothing cached under the old weights is taken
  PagedEngine fresh(cfg, pc);
  fresh.load_weights(w1);
  auto const want = fresh.generate(prompts_of(gs), params_of(gs, sp));
  for (std::size_t i = 0; i < gs.size(); ++i) require_same(got[i], want[i]);
  bool differs = false;  // the check can fail: the old weights give other tokens
  for (std::size_t i = 0; i < gs.size(); ++i)
    for (std::size_t k = 0; k < got[i].samples.size(); ++k) differs = differs || got[i].samples[k].tokens != old_out[i].samples[k].tokens;
  REQUIRE(differs);
  // load_shard too (the same shard layout at TP 1)
  pe.generate(prompts_of(gs), params_of(gs, sp));
  auto const hits = pe.metrics().prefix_cache_hits;
  REQUIRE(hits > before);  // the same weights: the cache is used
  pe.load_shard(std::span<float const>(w0));
  pe.generate(prompts_of(gs), params_of(gs, sp));
  REQUIRE(pe.metrics().prefix_cache_hits == hits);
}

}  // namespace test_paged_engine
