// tests/model/test_packing.cpp <-> include/rlflow/engine/training_engine.hpp (set_remove_padding),
// include/rlflow/model/gpt.hpp (forward_packed, select_tokens), model/layers.hpp (varlen attention):
// packed sequences against the padded path as the reference, for GPT-2 and the Llama family, over
// random weights, tokens, prompt and response lengths: log-probs, entropies, sum of squared
// probabilities, values, and the gradients of all of them.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <rlflow/engine/training_engine.hpp>

#include "fixtures.hpp"

namespace test_packing {

using rlflow::DType;
using rlflow::Shape;
using rlflow::Tensor;
using rlflow::engine::TrainingEngine;
using rlflow::model::Arch;
using rlflow::model::GPTConfig;

namespace {

GPTConfig packing_cfg(Arch arch, bool value_head, std::uint64_t seed) {
  GPTConfig c;
  c.vocab_size = 29;
  c.max_seq_len = 32;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_embd = 32;
  c.seed = seed;
  c.value_head = value_head;
  c.arch = arch;
  if (arch != Arch::gpt2) {
    c.n_kv_head = 2;
    c.intermediate_size = 48;
    c.tie_word_embeddings = arch != Arch::llama;
    c.qkv_bias = arch == Arch::qwen2;
    c.qk_norm = arch == Arch::qwen3;
    if (arch == Arch::qwen3) c.head_size = 12;
    c.rope_theta = 500.0;
  }
  return c;
}

//! A padded batch as the rollout makes it: B rows of [left-padded prompt (P) | right-padded
//! response (R)], prompt lengths in [1, P], response lengths in [0, R] (some rows empty, some full).
struct Rows {
  Tensor ids, mask;
  int B, T, R;
};
Rows random_rows(std::mt19937& g, int B, int P, int R, int V) {
  Rows r{Tensor::empty(DType::int32, Shape{B, P + R}), Tensor::empty(DType::int32, Shape{B, P + R}), B, P + R, R};
  std::uniform_int_distribution<int> tok(0, V - 1), plen(1, P), rlen(0, R);
  for (int b = 0; b < B; ++b) {
    int const pl = b == 0 ? P : plen(g), rl = b == 1 ? R : (b == 2 ? 0 : rlen(g));
    for (int t = 0; t < P + R; ++t) {
      bool const real = (t < P && t >= P - pl) || (t >= P && t < P + rl);
      r.ids.at<std::int32_t>(b, t) = tok(g);  // padding holds arbitrary ids too
      r.mask.at<std::int32_t>(b, t) = real ? 1 : 0;
    }
  }
  return r;
}

//! 1 where response column j of row b is scored (its token and the one before it are real).
std::vector<int> scored(Rows const& r) {
  std::vector<int> s(std::size_t(r.B) * r.R, 0);
  for (int b = 0; b < r.B; ++b)
    for (int j = 0; j < r.R; ++j) {
      int const p = r.T - r.R + j;
      s[std::size_t(b) * r.R + j] = r.mask.at<std::int32_t>(b, p) != 0 && r.mask.at<std::int32_t>(b, p - 1) != 0;
    }
  return s;
}

Tensor random_grad(std::mt19937& g, std::vector<int> const& on, int B, int R) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  Tensor t = Tensor::zeros(DType::float32, Shape{B, R});
  for (std::size_t i = 0; i < on.size(); ++i)
    if (on[i]) t.data<float>()[i] = d(g);
  return t;
}

//! max |a - b| <= tol * max(1, max |a|) over two flat buffers of the same size.
void require_close(std::span<float const> a, std::span<float const> b, double tol, char const* what) {
  REQUIRE(a.size() == b.size());
  double scale = 1.0, worst = 0.0;
  for (float x : a) scale = std::max(scale, double(std::fabs(x)));
  std::size_t at = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    double const d = std::fabs(double(a[i]) - double(b[i]));
    if (d > worst) worst = d, at = i;
  }
  INFO(what << ": worst difference " << worst << " at " << at << " (scale " << scale << ")");
  REQUIRE(worst <= tol * scale);
}

void require_scored_close(Tensor const& padded, Tensor const& packed, std::vector<int> const& on, double tol, char const* what) {
  auto const a = padded.span<float const>();
  auto const b = packed.span<float const>();
  std::size_t n_on = 0;
  for (std::size_t i = 0; i < on.size(); ++i) {
    INFO(what << " at flat column " << i);
    if (on[i]) {
      ++n_on;
      REQUIRE(std::fabs(double(a[i]) - double(b[i])) <= tol * std::max(1.0, std::fabs(double(a[i]))));
    } else {
      REQUIRE(b[i] == 0.0f);  // unscored columns are 0 (verl's pad_input)
    }
  }
  REQUIRE(n_on > 0);
}

}  // namespace

TEST_CASE("engine.packing_logprobs_and_grads: packed rows give the padded path's log-probs, entropies and gradients",
          "[engine][packing]") {
  Arch const arch = GENERATE(Arch::gpt2, Arch::llama, Arch::qwen2, Arch::qwen3);
  unsigned const seed = GENERATE(1u, 2u, 3u);
  INFO("arch " << rlflow::model::arch_name(arch) << ", seed " << seed);
  GPTConfig const cfg = packing_cfg(arch, false, seed);
  auto const w = fixtures::perturbed_weights(cfg, seed, 0.2f);
  TrainingEngine padded(cfg), packed(cfg);
  padded.load_weights(w);
  packed.load_weights(w);
  packed.set_remove_padding(true);
  REQUIRE(packed.remove_padding());
  std::mt19937 g(seed * 7919u);
  std::uniform_int_distribution<int> Bd(3, 6), Pd(2, 9), Rd(2, 10);
  Rows const r = random_rows(g, Bd(g), Pd(g), Rd(g), cfg.vocab_size);
  float const temperature = seed == 2 ? 0.7f : 1.0f;
  auto const on = scored(r);

  auto const a = padded.forward(r.ids, r.mask, r.R, temperature, true);
  Tensor const sq_a = padded.sum_pi_squared();
  auto const b = packed.forward(r.ids, r.mask, r.R, temperature, true);
  Tensor const sq_b = packed.sum_pi_squared();
  require_scored_close(a.log_probs, b.log_probs, on, 1e-5, "log_probs");
  require_scored_close(a.entropy, b.entropy, on, 1e-5, "entropy");
  require_scored_close(sq_a, sq_b, on, 1e-5, "sum_pi_squared");

  Tensor const dlogp = random_grad(g, on, r.B, r.R), dent = random_grad(g, on, r.B, r.R);
  padded.zero_grad();
  packed.zero_grad();
  padded.backward(dlogp, dent);
  packed.backward(dlogp, dent);
  require_close(padded.grads(), packed.grads(), 1e-5, "gradients");

  // the log-prob path without entropy, and gradients accumulating over two calls
  auto const a2 = padded.forward(r.ids, r.mask, r.R, temperature, false);
  auto const b2 = packed.forward(r.ids, r.mask, r.R, temperature, false);
  REQUIRE_FALSE(b2.entropy.defined());
  require_scored_close(a2.log_probs, b2.log_probs, on, 1e-5, "log_probs (no entropy)");
  padded.backward(dlogp);
  packed.backward(dlogp);
  require_close(padded.grads(), packed.grads(), 1e-5, "accumulated gradients");
}

TEST_CASE("engine.packing_values: the packed critic gives the padded values and gradients", "[engine][packing]") {
  Arch const arch = GENERATE(Arch::gpt2, Arch::qwen2);
  unsigned const seed = GENERATE(4u, 5u);
  GPTConfig const cfg = packing_cfg(arch, true, seed);
  auto const w = fixtures::perturbed_weights(cfg, seed, 0.2f);
  TrainingEngine padded(cfg), packed(cfg);
  padded.load_weights(w);
  packed.load_weights(w);
  packed.set_remove_padding(true);
  std::mt19937 g(seed);
  Rows const r = random_rows(g, 5, 6, 8, cfg.vocab_size);
  auto const on = scored(r);
  Tensor const va = padded.forward_values(r.ids, r.mask, r.R);
  Tensor const vb = packed.forward_values(r.ids, r.mask, r.R);
  require_scored_close(va, vb, on, 1e-5, "values");
  Tensor const dv = random_grad(g, on, r.B, r.R);
  padded.zero_grad();
  packed.zero_grad();
  padded.backward_values(dv);
  packed.backward_values(dv);
  require_close(padded.grads(), packed.grads(), 1e-5, "value gradients");
}

TEST_CASE("engine.packing_no_scored_column: a batch with nothing to score returns zeros and adds no gradient",
          "[engine][packing]") {
  GPTConfig const cfg = packing_cfg(Arch::gpt2, false, 6);
  TrainingEngine packed(cfg);
  packed.set_remove_padding(true);
  Tensor ids = Tensor::zeros(DType::int32, Shape{2, 6});
  Tensor mask = Tensor::zeros(DType::int32, Shape{2, 6});
  for (int t = 0; t < 3; ++t) mask.at<std::int32_t>(0, t) = 1, mask.at<std::int32_t>(1, t) = 1;  // prompts only
  auto const r = packed.forward(ids, mask, 3);
  for (float x : r.log_probs.span<float const>()) REQUIRE(x == 0.0f);
  packed.zero_grad();
  Tensor const dl = Tensor::full(Shape{2, 3}, 1.0f);
  packed.backward(dl);
  for (float x : packed.grads()) REQUIRE(x == 0.0f);
}

TEST_CASE("engine.packing_rejects: bad packed offsets name the sequence and the numbers", "[engine][packing]") {
  GPTConfig const cfg = packing_cfg(Arch::llama, false, 7);
  rlflow::model::GPT m(cfg);
  std::vector<std::int32_t> ids(10, 1);
  std::vector<std::int32_t> dec{0, 6, 4, 10};
  REQUIRE_THROWS_WITH(m.forward_packed(ids.data(), dec.data(), 3), Catch::Contains("decreases at sequence 1") && Catch::Contains("6"));
  std::vector<std::int32_t> nonzero{2, 10};
  REQUIRE_THROWS_WITH(m.forward_packed(ids.data(), nonzero.data(), 1), Catch::Contains("cu_seqlens[0] = 2"));
  std::vector<std::int32_t> long_seq(40, 1), cu{0, 40};
  REQUIRE_THROWS_WITH(m.forward_packed(long_seq.data(), cu.data(), 1), Catch::Contains("40 tokens exceeds max_seq_len = 32"));
  std::vector<std::int32_t> ok{0, 4, 10};
  m.forward_packed(ids.data(), ok.data(), 2);
  REQUIRE_THROWS_WITH(m.select_rows(0, 2), Catch::Contains("packed; use select_tokens"));
  std::vector<std::int32_t> outside{3, 10};
  REQUIRE_THROWS_WITH(m.select_tokens(outside), Catch::Contains("row 10 (entry 1) is outside [0, 10)"));
}

}  // namespace test_packing
