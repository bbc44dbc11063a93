// tests/model/test_rollout_tp.cpp <-> include/rlflow/model/tensor_parallel.hpp and the
// tensor-parallel path of include/rlflow/engine/rollout_engine.hpp: the shard layout's coverage
// law, the errors before work, and TP = 2 / 4 (/ 8) replicas (one thread per rank, an in-process
// TP communicator) against the unsharded engine on random models and batches: prefill and
// decode logits, log-probs and entropies within 1e-5 relative, greedy and sampled tokens identical.
#include <catch2/catch.hpp>

#include <algorithm>
#include <barrier>
#include <cstdio>
#include <cmath>
#include <exception>
#include <random>
#include <thread>
#include <vector>

#include <rlflow/engine/rollout_engine.hpp>
#include <rlflow/model/tensor_parallel.hpp>

#include "fixtures.hpp"

namespace test_rollout_tp {

using rlflow::DType;
using rlflow::Shape;
using rlflow::Tensor;
using rlflow::engine::RolloutEngine;
using rlflow::engine::RolloutResult;
using rlflow::engine::SamplingParams;
using rlflow::model::GPTConfig;
using rlflow::model::ShardLayout;
using rlflow::model::TPRank;

namespace {

GPTConfig model_cfg(int n_head, int n_embd, std::uint64_t seed) {
  return {.vocab_size = 13, .max_seq_len = 24, .n_layer = 2, .n_head = n_head, .n_embd = n_embd, .seed = seed};
}

//! Random full weights, far from the initialisation (biases and layer norms included).
std::vector<float> random_weights(GPTConfig const& c, unsigned seed) { return fixtures::perturbed_weights(c, seed, 0.25f); }

struct Batch {
  Tensor ids, mask;
  std::vector<std::uint64_t> seeds;
};
//! B left-padded random prompts of width P (lengths 1..P), tokens in [3, V).
Batch random_batch(int B, int P, int V, unsigned seed) {
  std::mt19937 g(seed);
  Batch b{Tensor::zeros(DType::int32, Shape{B, P}), Tensor::zeros(DType::int32, Shape{B, P}), {}};
  for (int i = 0; i < B; ++i) {
    int const len = 1 + int(g() % unsigned(P));
    for (int t = P - len; t < P; ++t) {
      b.ids.at<std::int32_t>(i, t) = 3 + int(g() % unsigned(V - 3));
      b.mask.at<std::int32_t>(i, t) = 1;
    }
    b.seeds.push_back(g());
  }
  return b;
}

//! Runs f(engine) on the N ranks of one TP replica (a thread each) and returns rank 0's result,
//! after checking every rank returned the same.
template <class F>
auto on_replica(GPTConfig const& cfg, int N, std::vector<float> const& full, F&& f) {
  auto const out = fixtures::on_ranks(N, [&](int r, rlflow::comm::LocalCommunicator& comm) {
    RolloutEngine eng(cfg, TPRank{r, N}, &comm);
    eng.load_weights(full);
    return f(eng);
  });
  for (int r = 1; r < N; ++r) REQUIRE(out[static_cast<std::size_t>(r)] == out[0]);  // the ranks agree bit for bit
  return out[0];
}

//! |a - b| <= 1e-5 * max(|b|, 1) element-wise: relative for values of magnitude >= 1 (logits,
//! log-probs and entropies here are mostly of order 1), absolute 1e-5 below, where a relative
//! bound would only measure float cancellation.
void require_close(std::vector<float> const& a, std::vector<float> const& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO("element " << i << ": " << a[i] << " vs " << b[i]);
    double const err = std::abs(double(a[i]) - b[i]) / std::max(std::abs(double(b[i])), 1.0);
    worst = std::max(worst, err);
    REQUIRE(err <= 1e-5);
  }
  UNSCOPED_INFO("largest error " << worst);
}

//! Logits of prefill then 'steps' decodes with fixed tokens, concatenated, plus the log-prob and
//! entropy of every row's next fixed token under each step's logits.
struct Trace {
  std::vector<float> logits, logp, entropy;
  bool operator==(Trace const&) const = default;
};
Trace trace(RolloutEngine& eng, Batch const& b, int steps, int V) {
  Trace t;
  int const B = int(b.ids.dim(0));
  auto take = [&](std::span<float const> lg, int step) {
    t.logits.insert(t.logits.end(), lg.begin(), lg.end());
    for (int i = 0; i < B; ++i) {
      std::int32_t const target = (i * 7 + step * 3) % V;
      auto row = rlflow::model::layers::logprob_forward_row(lg.data() + std::size_t(i) * V, V, target, 1.0f / 0.8f);
      t.logp.push_back(row.log_prob);
      t.entropy.push_back(row.entropy);
    }
  };
  take(eng.prefill(b.ids, b.mask, steps), 0);
  for (int s = 1; s <= steps; ++s) {
    std::vector<std::int32_t> tok(static_cast<std::size_t>(B));
    for (int i = 0; i < B; ++i) tok[static_cast<std::size_t>(i)] = 3 + (i + s) % (V - 3);
    take(eng.decode(tok), s);
  }
  return t;
}

struct Gen {
  std::vector<std::int32_t> tokens, mask;
  std::vector<float> logp;
  bool operator==(Gen const&) const = default;
};
Gen generate(RolloutEngine& eng, Batch const& b, SamplingParams const& sp) {
  RolloutResult r = eng.generate(b.ids, b.mask, sp, b.seeds);
  auto tk = r.responses.span<std::int32_t>();
  auto mk = r.response_mask.span<std::int32_t>();
  auto lp = r.log_probs.span<float>();
  return Gen{{tk.begin(), tk.end()}, {mk.begin(), mk.end()}, {lp.begin(), lp.end()}};
}

}  // namespace

TEST_CASE("ShardLayout: tp = 1 is the ParamLayout, the shards cover every parameter", "[model][tp]") {
  for (auto [nh, C] : {std::pair{4, 32}, std::pair{8, 64}}) {
    GPTConfig const cfg = model_cfg(nh, C, 1);
    rlflow::model::ParamLayout const full(cfg);
    ShardLayout const one(cfg, TPRank{0, 1});
    REQUIRE(one.size() == full.size());
    REQUIRE(one.segments().size() == 1);
    REQUIRE(one.layers[1].fc_w == full.layers[1].fc_w);
    REQUIRE(ShardLayout(cfg, TPRank{0, 1}, true).size() == full.size());  // nothing to split at tp = 1
    int const V = cfg.vocab_size;
    auto const w = random_weights(cfg, 31);
    for (bool split_vocab : {false, true})
      for (int N = 2; N <= nh; N *= 2) {
        INFO("tp " << N << (split_vocab ? ", wte split by vocabulary rows" : ", wte whole"));
        // every full float is copied by exactly one rank (sharded) or by all N (replicated)
        std::vector<int> hits(full.size(), 0);
        std::size_t total = 0;
        int const Vw = (V + N - 1) / N;  // the widest vocabulary slice: every split wte is padded to it
        std::vector<float> gathered;
        for (int r = 0; r < N; ++r) {
          ShardLayout const s(cfg, TPRank{r, N}, split_vocab);
          REQUIRE(s.local_heads() == nh / N);
          REQUIRE(s.split_vocab() == split_vocab);
          int const v0 = split_vocab ? V * r / N : 0, v1 = split_vocab ? V * (r + 1) / N : V;
          REQUIRE(s.vocab_begin() == v0);
          REQUIRE(s.vocab_end() == v1);
          REQUIRE(s.vocab_rows() == (split_vocab ? Vw : V));
          std::size_t const pad = std::size_t(s.vocab_rows() - (v1 - v0)) * std::size_t(C);
          std::size_t sum = 0;
          for (auto const& seg : s.segments()) {
            for (std::size_t i = 0; i < seg.count; ++i) ++hits[seg.src + i];
            if (seg.dst != sum) {  // the only gap: the split wte's padding rows, right after them
              REQUIRE(split_vocab);
              REQUIRE(seg.dst == s.wte + std::size_t(v1 - v0) * std::size_t(C) + pad);
              sum += pad;
            }
            REQUIRE(seg.dst == sum);  // segments fill the shard in order
            sum += seg.count;
          }
          REQUIRE(sum == s.size());
          total += s.size();
          // load: the rank's slice, its padding rows zero whatever the buffer held before
          std::vector<float> shard(s.size(), 7.0f);
          s.load(w, shard);
          for (std::size_t i = 0; i < pad; ++i) REQUIRE(shard[s.wte + std::size_t(v1 - v0) * std::size_t(C) + i] == 0.0f);
          for (int v = v0; v < v1; ++v)
            for (int c = 0; c < C; ++c)
              REQUIRE(shard[s.wte + std::size_t(v - v0) * C + c] == w[full.wte + std::size_t(v) * C + c]);
          gathered.insert(gathered.end(), shard.begin(), shard.end());
        }
        // every rank's buffer has one size (the all-gathers need it), and unshard inverts load
        REQUIRE(gathered.size() == std::size_t(N) * ShardLayout(cfg, TPRank{0, N}, split_vocab).size());
        std::vector<float> back(full.size(), -1.0f);
        rlflow::model::unshard(cfg, N, split_vocab, gathered, back);
        REQUIRE(back == w);
        std::size_t replicated = 0, padding = 0;
        for (auto const& t : full.tensors()) {
          bool const sharded = t.name.ends_with("c_attn.weight") || t.name.ends_with("c_attn.bias") ||
                               t.name.ends_with("c_proj.weight") || t.name.ends_with("c_fc.weight") ||
                               t.name.ends_with("c_fc.bias") || (split_vocab && t.name == "wte");
          for (std::size_t i = 0; i < t.numel; ++i) REQUIRE(hits[t.offset + i] == (sharded ? 1 : N));
          if (!sharded) replicated += t.numel;
        }
        if (split_vocab) padding = (std::size_t(N) * std::size_t(Vw) - std::size_t(V)) * std::size_t(C);
        REQUIRE(total == full.size() + std::size_t(N - 1) * replicated + padding);
      }
  }
}

TEST_CASE("tensor-parallel sizes the heads cannot take are errors before work", "[model][tp]") {
  GPTConfig const cfg = model_cfg(4, 32, 1);
  REQUIRE_THROWS_WITH(ShardLayout(cfg, TPRank{0, 8}), Catch::Contains("8") && Catch::Contains("more ranks than") &&
                                                          Catch::Contains("n_head = 4"));
  GPTConfig c6 = model_cfg(6, 48, 1);
  REQUIRE_THROWS_WITH(ShardLayout(c6, TPRank{0, 4}), Catch::Contains("does not divide n_head = 6"));
  RolloutEngine lone(cfg, TPRank{0, 2});
  Batch const b = random_batch(2, 3, cfg.vocab_size, 1);
  REQUIRE_THROWS_WITH(lone.prefill(b.ids, b.mask, 2), Catch::Contains("no TP communicator"));
  auto one = rlflow::comm::LocalCommunicator::make_group(1);
  REQUIRE_THROWS_WITH(lone.set_tp_communicator(one[0].get()), Catch::Contains("size 2") && Catch::Contains("size 1"));
}

TEST_CASE("TP = 2 and 4 prefill / decode logits, log-probs and entropies equal TP = 1 within 1e-5", "[model][tp]") {
  for (auto [nh, C, seed] : {std::tuple{4, 32, 1u}, std::tuple{8, 64, 2u}, std::tuple{4, 16, 3u}}) {
    GPTConfig const cfg = model_cfg(nh, C, seed);
    auto const full = random_weights(cfg, seed * 17);
    for (int trial = 0; trial < 2; ++trial) {
      Batch const b = random_batch(5 + trial, 6, cfg.vocab_size, seed * 31 + unsigned(trial));
      RolloutEngine ref(cfg);
      ref.load_weights(full);
      Trace const want = trace(ref, b, 6, cfg.vocab_size);
      for (int N = 2; N <= std::min(nh, 8); N *= 2) {
        INFO("heads " << nh << " width " << C << " tp " << N << " trial " << trial);
        Trace const got = on_replica(cfg, N, full, [&](RolloutEngine& e) { return trace(e, b, 6, cfg.vocab_size); });
        require_close(got.logits, want.logits);
        require_close(got.logp, want.logp);
        require_close(got.entropy, want.entropy);
      }
    }
  }
}

TEST_CASE("TP replicas generate the same greedy and sampled tokens as TP = 1", "[model][tp]") {
  GPTConfig const cfg = model_cfg(8, 64, 4);
  auto const full = random_weights(cfg, 99);
  Batch const b = random_batch(12, 6, cfg.vocab_size, 7);
  for (int mode = 0; mode < 3; ++mode) {
    SamplingParams sp;
    sp.max_new_tokens = 10;
    sp.eos_id = 1;
    sp.pad_id = 0;
    if (mode == 0) sp.temperature = 0.0f;  // greedy
    if (mode == 1) sp.temperature = 1.0f;  // plain sampling
    if (mode == 2) { sp.temperature = 0.7f; sp.top_k = 5; sp.top_p = 0.9f; }
    RolloutEngine ref(cfg);
    ref.load_weights(full);
    Gen const want = generate(ref, b, sp);
    for (int N : {2, 4, 8}) {
      INFO("mode " << mode << " tp " << N);
      Gen const got = on_replica(cfg, N, full, [&](RolloutEngine& e) { return generate(e, b, sp); });
      REQUIRE(got.tokens == want.tokens);
      REQUIRE(got.mask == want.mask);
      require_close(got.logp, want.logp);
    }
  }
}

TEST_CASE("a TP rank's weights are its slice of the full weights after load_weights, bit for bit", "[model][tp]") {
  GPTConfig const cfg = model_cfg(4, 32, 6);
  auto const full = random_weights(cfg, 5);
  rlflow::model::ParamLayout const lay(cfg);
  int const hs = cfg.head_dim();
  for (int N : {1, 2, 4}) {
    auto w = on_replica(cfg, N, full, [&](RolloutEngine& e) {
      // independent check per rank (ranks differ, so return only a pass flag)
      ShardLayout const& s = e.shard_layout();
      auto got = e.weights();
      int const r = e.tp().rank, Cl = s.local_embd(), F = s.local_ff(), C = cfg.n_embd;
      bool ok = got.size() == s.size();
      auto check = [&](char const* what, std::size_t g0, std::size_t f0, std::size_t n) {
        for (std::size_t i = 0; i < n; ++i)
          if (got[g0 + i] != full[f0 + i]) {
            std::fprintf(stderr, "rank %d of %d: %s differs at %zu\n", r, N, what, i);
            ok = false;
            return;
          }
      };
      for (std::size_t l = 0; l < lay.layers.size(); ++l) {
        auto const& Lf = lay.layers[l];
        auto const& Ls = s.layers[l];
        std::size_t const q = std::size_t(r), cl = std::size_t(Cl), c = std::size_t(C), f = std::size_t(F);
        check("qkv_w", Ls.qkv_w, Lf.qkv_w + q * 3 * cl * c, 3 * cl * c);
        check("qkv_b", Ls.qkv_b, Lf.qkv_b + q * 3 * cl, 3 * cl);
        check("proj_w", Ls.proj_w, Lf.proj_w + q * cl * c, cl * c);
        check("proj_b", Ls.proj_b, Lf.proj_b, c);
        check("ln2_w", Ls.ln2_w, Lf.ln2_w, c);
        check("fc_w", Ls.fc_w, Lf.fc_w + q * f * c, f * c);
        check("fc_b", Ls.fc_b, Lf.fc_b + q * f, f);
        check("fcproj_w", Ls.fcproj_w, Lf.fcproj_w + q * f * c, f * c);
        check("fcproj_b", Ls.fcproj_b, Lf.fcproj_b, c);
      }
      check("wte", s.wte, lay.wte, std::size_t(cfg.vocab_size) * std::size_t(C));
      check("lnf_b", s.lnf_b, lay.lnf_b, std::size_t(C));
      ok &= hs * s.local_heads() == Cl;
      return int(ok);  // not bool: ranks write their results concurrently, and vector<bool> packs bits
    });
    REQUIRE(w == 1);
  }
}

TEST_CASE("vocabulary-parallel LM head: logit slices, tokens and log-probs equal the replicated head", "[model][tp][vocab_parallel]") {
  // V = 13 does not divide by 2, 4 or 8: the slices are uneven (V r / N boundaries)
  GPTConfig const cfg = model_cfg(8, 64, 5);
  auto const full = random_weights(cfg, 123);
  Batch const b = random_batch(12, 6, cfg.vocab_size, 9);
  RolloutEngine ref(cfg);
  ref.load_weights(full);
  auto const lg = ref.prefill(b.ids, b.mask, 4);
  std::vector<float> const want_logits(lg.begin(), lg.end());
  int const B = int(b.ids.dim(0)), V = cfg.vocab_size;
  for (int N : {2, 4, 8}) {
    INFO("tp " << N);
    // each rank's prefill logits are its slice [V r / N, V (r + 1) / N) of the full logits
    // (no REQUIRE inside the rank threads: each rank returns its count of mismatches)
    int const bad = on_replica(cfg, N, full, [&](RolloutEngine& e) {
      e.set_lm_head(rlflow::engine::LMHead::vocab_parallel);
      int const r = e.tp().rank, v0 = e.vocab_begin(), v1 = e.vocab_end();
      int wrong = (v0 != V * r / N) + (v1 != V * (r + 1) / N);
      auto const got = e.prefill(b.ids, b.mask, 4);
      if (got.size() != std::size_t(B) * std::size_t(v1 - v0)) return wrong + 1;
      for (int i = 0; i < B; ++i)
        for (int v = v0; v < v1; ++v) {
          float const w = want_logits[std::size_t(i) * V + v], g = got[std::size_t(i) * (v1 - v0) + (v - v0)];
          wrong += !(std::abs(double(g) - w) <= 1e-5 * std::max(1.0, std::abs(double(w))));
        }
      return wrong;
    });
    REQUIRE(bad == 0);
  }
  for (int mode = 0; mode < 5; ++mode) {
    SamplingParams sp;
    sp.max_new_tokens = 10;
    sp.eos_id = 1;
    sp.pad_id = 0;
    if (mode == 0) sp.temperature = 0.0f;                                  // greedy
    if (mode == 1) sp.temperature = 1.0f;                                  // plain sampling
    if (mode == 2) { sp.temperature = 0.7f; sp.top_k = 5; sp.top_p = 0.9f; }  // top-k then top-p
    if (mode == 3) { sp.temperature = 1.3f; sp.top_k = 9; }                // top-k wider than a slice
    if (mode == 4) { sp.temperature = 0.9f; sp.top_p = 0.8f; }              // top-p alone
    RolloutEngine r1(cfg);
    r1.load_weights(full);
    Gen const want = generate(r1, b, sp);
    for (int N : {2, 4, 8}) {
      INFO("mode " << mode << " tp " << N);
      Gen const got = on_replica(cfg, N, full, [&](RolloutEngine& e) {
        e.set_lm_head(rlflow::engine::LMHead::vocab_parallel);
        return generate(e, b, sp);
      });
      REQUIRE(got.tokens == want.tokens);
      REQUIRE(got.mask == want.mask);
      require_close(got.logp, want.logp);
    }
  }
  // the default head: replicated below vocab_parallel_min_vocab, vocabulary-parallel from it on
  {
    auto c2 = rlflow::comm::LocalCommunicator::make_group(2);
    RolloutEngine small(cfg, TPRank{0, 2}, c2[0].get());
    REQUIRE(small.lm_head() == rlflow::engine::LMHead::replicated);
    REQUIRE(small.vocab_end() - small.vocab_begin() == cfg.vocab_size);
    GPTConfig big = cfg;
    big.vocab_size = rlflow::engine::vocab_parallel_min_vocab;
    RolloutEngine large(big, TPRank{1, 2}, c2[1].get());
    REQUIRE(large.lm_head() == rlflow::engine::LMHead::vocab_parallel);
    REQUIRE(large.vocab_begin() == big.vocab_size / 2);
    RolloutEngine one(big);
    REQUIRE(one.lm_head() == rlflow::engine::LMHead::replicated);
    // the vocabulary-parallel engine holds its wte rows only; the replicated one wte whole
    REQUIRE(large.weights().size() == ShardLayout(big, TPRank{1, 2}, true).size());
    REQUIRE(small.weights().size() == ShardLayout(cfg, TPRank{0, 2}).size());
    {  // set_lm_head never communicates: whole <-> split before a load, whole -> split after it
      std::vector<float> seeded(rlflow::model::param_count(big));
      rlflow::model::init_params(big, seeded);
      auto const wl = random_weights(big, 78);
      ShardLayout const whole(big, TPRank{1, 2}), split(big, TPRank{1, 2}, true);
      std::vector<float> want_whole(whole.size()), want_split(split.size());
      RolloutEngine lone(big, TPRank{1, 2});  // no communicator
      lone.set_lm_head(rlflow::engine::LMHead::replicated);
      whole.load(seeded, want_whole);
      REQUIRE(std::vector<float>(lone.weights().begin(), lone.weights().end()) == want_whole);
      lone.load_weights(wl);
      lone.set_lm_head(rlflow::engine::LMHead::vocab_parallel);
      split.load(wl, want_split);
      REQUIRE(std::vector<float>(lone.weights().begin(), lone.weights().end()) == want_split);
      REQUIRE_THROWS_WITH(lone.set_lm_head(rlflow::engine::LMHead::replicated),
                          Catch::Contains("rows [128, 256)") && Catch::Contains("before load_weights"));
      REQUIRE(lone.lm_head() == rlflow::engine::LMHead::vocab_parallel);
    }
    // and the default (vocabulary-parallel) head samples the TP = 1 tokens on that vocabulary
    auto const wbig = random_weights(big, 77);
    Batch const bb = random_batch(8, 6, big.vocab_size, 21);
    SamplingParams sp;
    sp.max_new_tokens = 8;
    sp.temperature = 1.0f;
    RolloutEngine r1(big);
    r1.load_weights(wbig);
    Gen const want = generate(r1, bb, sp);
    for (int N : {2, 4}) {
      INFO("V " << big.vocab_size << " tp " << N);
      Gen const got = on_replica(big, N, wbig, [&](RolloutEngine& e) { return generate(e, bb, sp); });
      REQUIRE(got.tokens == want.tokens);
      require_close(got.logp, want.logp);
    }
  }
  // a vocabulary smaller than the TP group cannot be split
  GPTConfig tiny = model_cfg(8, 64, 5);
  tiny.vocab_size = 4;
  auto comms = rlflow::comm::LocalCommunicator::make_group(8);
  RolloutEngine e(tiny, TPRank{0, 8}, comms[0].get());
  REQUIRE_THROWS_WITH(e.set_lm_head(rlflow::engine::LMHead::vocab_parallel),
                      Catch::Contains("vocab_size (4)") && Catch::Contains("TP size (8)"));
}

TEST_CASE("share_replicated: a replica keeps one copy of the replicated tensors, read in place", "[model][tp][share]") {
  GPTConfig const cfg = model_cfg(8, 64, 8);
  auto const w1 = random_weights(cfg, 1001), w2 = random_weights(cfg, 1002);
  Batch const b = random_batch(6, 6, cfg.vocab_size, 3);
  SamplingParams sp;
  sp.max_new_tokens = 8;
  RolloutEngine ref(cfg);
  ref.load_weights(w2);
  Gen const want = generate(ref, b, sp);
  for (auto [N, vp] : {std::pair{2, false}, std::pair{2, true}, std::pair{4, false}, std::pair{4, true}}) {
    INFO("tp " << N << (vp ? ", vocabulary-parallel head (wte split, not shared)" : ", replicated head"));
    struct Out {
      std::uintptr_t shared = 0;
      int wrong = 0;
      Gen gen;
      bool operator==(Out const&) const = default;
    };
    // each rank: load w1 privately, share (the copy starts from the ranks' own replicated
    // tensors), then a collective load of w2; every rank must see the same shared address, its
    // shard_weights() must be its slice of w2, and generation must match TP = 1 on w2
    Out const o = on_replica(cfg, N, w1, [&](RolloutEngine& e) {
      Out r;
      int wrong = 0;
      if (vp) e.set_lm_head(rlflow::engine::LMHead::vocab_parallel);  // after the load: the rank keeps its rows
      if (!e.share_replicated()) wrong += 1000;
      std::size_t const split_floats = std::size_t(e.vocab_end() - e.vocab_begin()) * std::size_t(cfg.n_embd);
      wrong += e.shard_layout().replicated_size() !=
               ShardLayout(cfg, TPRank{e.tp().rank, N}).replicated_size() - (vp ? std::size_t(cfg.vocab_size) * cfg.n_embd : 0);
      wrong += vp && split_floats == std::size_t(cfg.vocab_size) * std::size_t(cfg.n_embd);
      std::vector<float> slice1(e.shard_layout().size());
      e.shard_layout().load(w1, slice1);
      wrong += e.shard_weights() != slice1;  // sharing kept the weights
      e.load_weights(w2);
      std::vector<float> slice2(e.shard_layout().size());
      e.shard_layout().load(w2, slice2);
      wrong += e.shard_weights() != slice2;
      r.shared = reinterpret_cast<std::uintptr_t>(e.shared_replicated_data());
      r.gen = generate(e, b, sp);
      // the head decides the cut, and the replicated tensors are shared now: no change
      try {
        e.set_lm_head(vp ? rlflow::engine::LMHead::replicated : rlflow::engine::LMHead::vocab_parallel);
        wrong += 100;
      } catch (rlflow::config_error const& x) {
        wrong += std::string(x.what()).find("share_replicated") == std::string::npos;
      }
      r.wrong = wrong;
      return r;
    });
    REQUIRE(o.shared != 0);  // (on_replica checked every rank returned the same address)
    REQUIRE(o.wrong == 0);
    REQUIRE(o.gen.tokens == want.tokens);
    require_close(o.gen.logp, want.logp);
  }
  // TP = 1, or no communicator that shares memory: nothing to share
  RolloutEngine one(cfg);
  REQUIRE(!one.share_replicated());
  REQUIRE(one.shared_replicated_data() == nullptr);
}

TEST_CASE("shared weight sync: a sync aborted in its barrier changes nothing, and the next one works", "[model][tp][share]") {
  // The shared sync takes one TP barrier before its copies and none after them (the next forward
  // waits for every rank's part): rank 1 fails instead of syncing w2, so rank 0's load is aborted
  // in that barrier and must leave rank 0 on w1 (shard_weights returns, not blocked); after the
  // group is re-armed both ranks sync w2, read it back and generate as TP = 1 on w2.
  GPTConfig const cfg = model_cfg(8, 64, 8);
  auto const w1 = random_weights(cfg, 2001), w2 = random_weights(cfg, 2002);
  Batch const b = random_batch(6, 6, cfg.vocab_size, 5);
  SamplingParams sp;
  sp.max_new_tokens = 8;
  RolloutEngine ref(cfg);
  ref.load_weights(w2);
  Gen const want = generate(ref, b, sp);
  int const N = 2;
  auto comms = rlflow::comm::LocalCommunicator::make_group(N);
  std::barrier<> step(N);
  std::vector<int> wrong(N, 0), aborted(N, 0);
  std::vector<Gen> gen(N);
  std::vector<std::thread> th;
  for (int r = 0; r < N; ++r)
    th.emplace_back([&, r] {
      auto& c = *comms[std::size_t(r)];
      RolloutEngine e(cfg, TPRank{r, N}, &c);
      e.load_weights(w1);
      if (!e.share_replicated()) wrong[std::size_t(r)] += 1000;
      std::vector<float> s1(e.shard_layout().size()), s2(e.shard_layout().size());
      e.shard_layout().load(w1, s1);
      e.shard_layout().load(w2, s2);
      step.arrive_and_wait();
      if (r == 1) {
        c.abort();  // rank 1 fails instead of syncing
      } else {
        try {
          e.load_weights(w2);
        } catch (rlflow::worker_error const&) {
          aborted[std::size_t(r)] = 1;
        }
        wrong[std::size_t(r)] += e.shard_weights() != s1;  // still w1, and no wait for rank 1's part
      }
      step.arrive_and_wait();
      if (r == 0) c.reset();  // no rank is inside a collective now
      step.arrive_and_wait();
      e.load_weights(w2);
      wrong[std::size_t(r)] += e.shard_weights() != s2;
      gen[std::size_t(r)] = generate(e, b, sp);
    });
  for (auto& t : th) t.join();
  REQUIRE(aborted[0] == 1);
  REQUIRE(wrong == std::vector<int>(N, 0));
  for (auto const& g : gen) {
    REQUIRE(g.tokens == want.tokens);
    require_close(g.logp, want.logp);
  }
}

}  // namespace test_rollout_tp
