// tests/model/test_checkpointing.cpp <-> include/rlflow/engine/training_engine.hpp
// (set_gradient_checkpointing), include/rlflow/model/gpt.hpp (set_activation_checkpointing) and
// include/rlflow/model/param_layout.hpp (ActivationLayout, checkpointed): activation checkpointing
// against the kept-activation path as the reference, bit for bit, over random shapes, weights and
// batches for GPT-2 and the Llama family, padded and packed rows, actor and critic, and under
// training tensor parallelism; the checkpointed layout against an independent count of its floats.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include <rlflow/engine/training_engine.hpp>

#include "fixtures.hpp"

namespace test_checkpointing {

using rlflow::DType;
using rlflow::Shape;
using rlflow::Tensor;
using rlflow::engine::OptimizerConfig;
using rlflow::engine::TrainingEngine;
using rlflow::model::ActivationLayout;
using rlflow::model::Arch;
using rlflow::model::GPTConfig;

namespace {

//! A random shape of the family: 1-3 layers, 1-4 heads, grouped key/value heads, explicit head_dim
//! (qwen3), biases as the family has them, tied or untied head.
GPTConfig random_cfg(std::mt19937& g, Arch arch, bool value_head) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(g); };
  GPTConfig c;
  c.vocab_size = pick(11, 40);
  c.max_seq_len = 32;
  c.n_layer = pick(1, 3);
  c.n_head = 1 << pick(0, 2);
  c.n_embd = c.n_head * 2 * pick(2, 6);
  c.seed = g();
  c.value_head = value_head;
  c.arch = arch;
  if (arch != Arch::gpt2) {
    c.n_kv_head = c.n_head % 2 == 0 && pick(0, 1) ? c.n_head / 2 : c.n_head;
    c.intermediate_size = pick(8, 48);
    c.tie_word_embeddings = arch == Arch::llama ? pick(0, 1) == 1 : true;
    c.qkv_bias = arch == Arch::qwen2 || (arch == Arch::llama && pick(0, 1));
    c.o_bias = arch == Arch::llama && pick(0, 1);
    c.mlp_bias = arch == Arch::llama && pick(0, 1);
    c.qk_norm = arch == Arch::qwen3;
    if (arch == Arch::qwen3) c.head_size = 2 * pick(2, 6);
    c.rope_theta = 500.0;
  }
  return c;
}

//! B rows of [left-padded prompt (P) | right-padded response (R)] with random lengths.
struct Rows {
  Tensor ids, mask;
  int B, T, R;
};
Rows random_rows(std::mt19937& g, int B, int P, int R, int V) {
  Rows r{Tensor::empty(DType::int32, Shape{B, P + R}), Tensor::empty(DType::int32, Shape{B, P + R}), B, P + R, R};
  std::uniform_int_distribution<int> tok(0, V - 1), plen(1, P), rlen(1, R);
  for (int b = 0; b < B; ++b) {
    int const pl = plen(g), rl = b == 0 ? R : rlen(g);
    for (int t = 0; t < P + R; ++t) {
      r.ids.at<std::int32_t>(b, t) = tok(g);
      r.mask.at<std::int32_t>(b, t) = (t < P && t >= P - pl) || (t >= P && t < P + rl) ? 1 : 0;
    }
  }
  return r;
}

Tensor random_grad(std::mt19937& g, int B, int R) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  Tensor t = Tensor::empty(DType::float32, Shape{B, R});
  for (auto& x : t.span<float>()) x = d(g);
  return t;
}

//! The two buffers hold the same bits (and the first differing index when not).
void require_same_bits(std::span<float const> a, std::span<float const> b, char const* what) {
  REQUIRE(a.size() == b.size());
  std::size_t diff = a.size();
  for (std::size_t i = 0; i < a.size() && diff == a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) diff = i;
  INFO(what << ": first difference at " << diff << " of " << a.size());
  REQUIRE(diff == a.size());
}
void require_same_bits(Tensor const& a, Tensor const& b, char const* what) {
  require_same_bits(a.span<float const>(), b.span<float const>(), what);
}

//! A gradient that is zero everywhere would make the comparison vacuous.
void require_nonzero(std::span<float const> g) {
  REQUIRE(std::any_of(g.begin(), g.end(), [](float x) { return x != 0.0f; }));
}

}  // namespace

TEST_CASE("engine.checkpointing_actor: checkpointed log-prob gradients equal the kept-activation ones bit for bit",
          "[engine][checkpointing]") {
  Arch const arch = GENERATE(Arch::gpt2, Arch::llama, Arch::qwen2, Arch::qwen3);
  bool const packed = GENERATE(false, true);
  unsigned const seed = GENERATE(1u, 2u, 3u);
  bool const lora = GENERATE(false, true);  // the recompute runs the adapters' forward too
  INFO("arch " << rlflow::model::arch_name(arch) << ", packed " << packed << ", seed " << seed << ", lora " << lora);
  std::mt19937 g(seed * 104729u + unsigned(arch) * 31u + (packed ? 7u : 0u));
  GPTConfig const cfg = random_cfg(g, arch, false);
  auto const w = fixtures::perturbed_weights(cfg, seed, 0.2f);
  OptimizerConfig opt;
  opt.lr = 1e-2;
  TrainingEngine keep(cfg, opt), ckpt(cfg, opt);
  keep.load_weights(w);
  ckpt.load_weights(w);
  if (lora) {
    rlflow::model::LoraConfig lc;
    lc.rank = 2;
    lc.alpha = 5.0;
    lc.seed = seed;
    keep.enable_lora(lc);
    ckpt.enable_lora(lc);
  }
  keep.set_remove_padding(packed);
  ckpt.set_remove_padding(packed);
  ckpt.set_gradient_checkpointing(true);
  REQUIRE(ckpt.gradient_checkpointing());
  REQUIRE_FALSE(keep.gradient_checkpointing());
  keep.zero_grad();
  ckpt.zero_grad();
  // two micro-batches of different shapes accumulate, then an optimizer step and one more pass
  for (int pass = 0; pass < 3; ++pass) {
    std::uniform_int_distribution<int> Bd(1, 5), Pd(1, 8), Rd(1, 8);
    Rows const r = random_rows(g, Bd(g), Pd(g), Rd(g), cfg.vocab_size);
    float const temperature = pass == 1 ? 0.8f : 1.0f;
    auto const a = keep.forward(r.ids, r.mask, r.R, temperature, true);
    auto const b = ckpt.forward(r.ids, r.mask, r.R, temperature, true);
    require_same_bits(a.log_probs, b.log_probs, "log_probs");
    require_same_bits(a.entropy, b.entropy, "entropy");
    Tensor const dlogp = random_grad(g, r.B, r.R), dent = random_grad(g, r.B, r.R);
    keep.backward(dlogp, dent);
    ckpt.backward(dlogp, dent);
    require_nonzero(keep.grads());
    require_same_bits(keep.grads(), ckpt.grads(), "accumulated gradients");
    if (pass == 1) {
      REQUIRE(keep.optimizer_step() == ckpt.optimizer_step());
      require_same_bits(keep.params(), ckpt.params(), "parameters after the step");
      keep.zero_grad();
      ckpt.zero_grad();
    }
  }
}

TEST_CASE("engine.checkpointing_critic: checkpointed value gradients equal the kept-activation ones bit for bit",
          "[engine][checkpointing]") {
  Arch const arch = GENERATE(Arch::gpt2, Arch::llama, Arch::qwen2, Arch::qwen3);
  bool const packed = GENERATE(false, true);
  unsigned const seed = GENERATE(4u, 5u);
  INFO("arch " << rlflow::model::arch_name(arch) << ", packed " << packed << ", seed " << seed);
  std::mt19937 g(seed * 7919u + unsigned(arch) * 13u + (packed ? 3u : 0u));
  GPTConfig const cfg = random_cfg(g, arch, true);
  auto const w = fixtures::perturbed_weights(cfg, seed, 0.2f);
  TrainingEngine keep(cfg), ckpt(cfg);
  keep.load_weights(w);
  ckpt.load_weights(w);
  keep.set_remove_padding(packed);
  ckpt.set_remove_padding(packed);
  ckpt.set_gradient_checkpointing(true);
  keep.zero_grad();
  ckpt.zero_grad();
  for (int pass = 0; pass < 2; ++pass) {
    Rows const r = random_rows(g, 2 + pass * 2, 5, 6, cfg.vocab_size);
    Tensor const va = keep.forward_values(r.ids, r.mask, r.R);
    Tensor const vb = ckpt.forward_values(r.ids, r.mask, r.R);
    require_same_bits(va, vb, "values");
    Tensor const dv = random_grad(g, r.B, r.R);
    keep.backward_values(dv);
    ckpt.backward_values(dv);
    require_nonzero(keep.grads());
    require_same_bits(keep.grads(), ckpt.grads(), "value gradients");
  }
}

TEST_CASE("engine.checkpointing_tp: under training tensor parallelism the checkpointed gradients equal the kept ones",
          "[engine][checkpointing][tp]") {
  Arch const arch = GENERATE(Arch::gpt2, Arch::qwen3);
  int const N = 2;
  GPTConfig cfg;
  cfg.vocab_size = 300;  // vocabulary-parallel head (>= 256)
  cfg.max_seq_len = 24;
  cfg.n_layer = 2;
  cfg.n_head = 4;
  cfg.n_embd = 32;
  cfg = rlflow::model::builtin_model(cfg, arch);
  auto const w = fixtures::perturbed_weights(cfg, 9, 0.2f);
  std::mt19937 g(17);
  Rows const r = random_rows(g, 3, 6, 5, cfg.vocab_size);
  Tensor const dlogp = random_grad(g, r.B, r.R), dent = random_grad(g, r.B, r.R);
  auto run = [&](bool on) {
    return fixtures::on_ranks(N, [&](int rank, rlflow::comm::LocalCommunicator& comm) {
      TrainingEngine e(cfg, OptimizerConfig{}, rlflow::model::TPRank{rank, N}, &comm);
      e.load_weights(w);
      e.set_gradient_checkpointing(on);
      e.zero_grad();
      auto const out = e.forward(r.ids, r.mask, r.R, 1.0f, true);
      e.backward(dlogp, dent);
      auto const gr = e.grads();
      std::vector<float> v(out.log_probs.span<float const>().begin(), out.log_probs.span<float const>().end());
      v.insert(v.end(), gr.begin(), gr.end());
      return v;
    });
  };
  auto const keep = run(false), ckpt = run(true);
  for (int rank = 0; rank < N; ++rank) {
    INFO("TP rank " << rank);
    require_nonzero(keep[std::size_t(rank)]);
    require_same_bits(keep[std::size_t(rank)], ckpt[std::size_t(rank)], "log-probs and gradients");
  }
}

TEST_CASE("engine.checkpointing_switch: the backward follows the layout of its forward, not the current setting",
          "[engine][checkpointing]") {
  std::mt19937 g(23);
  GPTConfig const cfg = random_cfg(g, Arch::qwen2, false);
  auto const w = fixtures::perturbed_weights(cfg, 23, 0.2f);
  TrainingEngine keep(cfg), flip(cfg);
  keep.load_weights(w);
  flip.load_weights(w);
  Rows const r = random_rows(g, 3, 5, 4, cfg.vocab_size);
  Tensor const dlogp = random_grad(g, r.B, r.R);
  for (bool first : {true, false}) {  // forward checkpointed, backward after switching off; then the reverse
    keep.zero_grad();
    flip.zero_grad();
    flip.set_gradient_checkpointing(first);
    keep.forward(r.ids, r.mask, r.R);
    flip.forward(r.ids, r.mask, r.R);
    flip.set_gradient_checkpointing(!first);
    keep.backward(dlogp);
    flip.backward(dlogp);
    require_same_bits(keep.grads(), flip.grads(), "gradients");
  }
}

TEST_CASE("model.checkpointing_layout: the checkpointed layout keeps L residual rows plus one layer, disjoint and in bounds",
          "[model][checkpointing]") {
  std::mt19937 g(31);
  for (int trial = 0; trial < 40; ++trial) {
    Arch const arch = Arch(trial % 4);
    GPTConfig const cfg = random_cfg(g, arch, trial % 3 == 0);
    int const B = 1 + int(g() % 4), T = 2 + int(g() % 20), L = cfg.n_layer;
    INFO("arch " << rlflow::model::arch_name(arch) << ", L " << L << ", B " << B << ", T " << T);
    // one layer's floats counted from the family's definition
    std::uint64_t const N = std::uint64_t(B) * T, C = cfg.n_embd, NH = cfg.n_head, att = N * NH * T;
    std::uint64_t layer = 0;
    if (arch == Arch::gpt2) {
      // ln1 (+ mean, rstd), qkv, att, atty, res2, ln2 (+ mean, rstd), fc, gelu(fc), res3
      layer = N * C + N + N + 3 * N * C + att + N * C + N * C + N * C + N + N + 4 * N * C + 4 * N * C + N * C;
    } else {
      std::uint64_t const hd = cfg.head_dim(), q = NH * hd, kv = std::uint64_t(cfg.kv_heads()) * hd, F = cfg.ff_dim();
      // ln1 (+ rstd), qkv, att, atty, res2, ln2 (+ rstd), gate|up, silu(gate) up, res3
      layer = N * C + N + N * (q + 2 * kv) + att + N * q + N * C + N * C + N + 2 * N * F + N * F + N * C;
      if (cfg.qk_norm) layer += N * (q + 2 * kv) + N * (NH + std::uint64_t(cfg.kv_heads()));
    }
    ActivationLayout const keep(cfg, B, T), ckpt(cfg, B, T, true);
    REQUIRE(keep.per_layer() == layer);
    REQUIRE(keep.size() == N * C + std::uint64_t(L) * layer);
    REQUIRE(ckpt.size() == std::uint64_t(L) * N * C + layer);
    REQUIRE(ckpt.checkpointed());
    REQUIRE_FALSE(keep.checkpointed());
    // every field of layer l: inside the buffer, disjoint from each other and from the stream rows
    // other than its own input (residual_in(l)) and output (res3 = stream row l + 1)
    for (int l = 0; l < L; ++l) {
      auto const A = ckpt.layer(l);
      REQUIRE(A.res3 == (std::uint64_t(l) + 1) * N * C);
      REQUIRE(ckpt.residual_in(l) == std::uint64_t(l) * N * C);
      std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;  // [begin, end)
      auto add = [&](std::uint64_t o, std::uint64_t n) {
        if (n) spans.emplace_back(o, o + n);
      };
      std::uint64_t const mean = arch == Arch::gpt2 ? N : 0, qkv = arch == Arch::gpt2 ? 3 * C : std::uint64_t(cfg.qkv_dim());
      std::uint64_t const fc = arch == Arch::gpt2 ? 4 * C : 2 * std::uint64_t(cfg.ff_dim()), ff = std::uint64_t(cfg.ff_dim());
      for (int s = 0; s <= L; ++s) add(std::uint64_t(s) * N * C, N * C);  // the stream rows res0 .. res_L
      add(A.ln1, N * C), add(A.ln1_mean, mean), add(A.ln1_rstd, N), add(A.qkv, N * qkv), add(A.att, att);
      add(A.atty, N * std::uint64_t(cfg.attn_dim())), add(A.res2, N * C), add(A.ln2, N * C), add(A.ln2_mean, mean);
      add(A.ln2_rstd, N), add(A.fch, N * fc), add(A.fch_gelu, N * ff);
      if (cfg.qk_norm) add(A.qkv_raw, N * qkv), add(A.qk_rstd, N * (NH + std::uint64_t(cfg.kv_heads())));
      std::sort(spans.begin(), spans.end());
      for (std::size_t i = 0; i < spans.size(); ++i) {
        REQUIRE(spans[i].second <= ckpt.size());
        if (i) REQUIRE(spans[i - 1].second <= spans[i].first);
      }
      if (l > 0) REQUIRE(ckpt.layer(l).ln1 == ckpt.layer(0).ln1);  // one buffer for every layer
    }
  }
}

TEST_CASE("engine.checkpointing_memory: the engine allocates the checkpointed layout, smaller from two layers on",
          "[engine][checkpointing]") {
  std::mt19937 g(41);
  for (int trial = 0; trial < 8; ++trial) {
    Arch const arch = Arch(trial % 4);
    GPTConfig cfg = random_cfg(g, arch, false);
    cfg.n_layer = 1 + trial % 3;
    TrainingEngine keep(cfg), ckpt(cfg);
    ckpt.set_gradient_checkpointing(true);
    Rows const r = random_rows(g, 3, 6, 5, cfg.vocab_size);
    keep.forward(r.ids, r.mask, r.R);
    ckpt.forward(r.ids, r.mask, r.R);
    REQUIRE(keep.model().activation_bytes() == sizeof(float) * ActivationLayout(cfg, r.B, r.T).size());
    REQUIRE(ckpt.model().activation_bytes() == sizeof(float) * ActivationLayout(cfg, r.B, r.T, true).size());
    if (cfg.n_layer == 1) REQUIRE(ckpt.model().activation_bytes() == keep.model().activation_bytes());
    else REQUIRE(ckpt.model().activation_bytes() < keep.model().activation_bytes());
  }
}

}  // namespace test_checkpointing
