// tests/model/test_stable_products.cpp <-> include/rlflow/model/stable_products.hpp: the
// batch-invariant products against their plain-C++ definition (bit for bit) and a double-precision
// sum, a row's bits under any batch, row order and thread count, and the rollout engines' decode
// with the kernels switched on and off (the same tokens, log-probs within float rounding).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include <rlflow/engine/paged_engine.hpp>
#include <rlflow/engine/rollout_engine.hpp>
#include <rlflow/model/stable_products.hpp>

#include "fixtures.hpp"
#include "paged_groups.hpp"  // random_groups, run_groups

namespace test_stable_products {

namespace st = rlflow::model::stable;

struct Case {
  int M, K, N;
  bool bias, accumulate;
};

std::vector<float> normal(std::mt19937& g, std::size_t n, float scale = 1.0f) {
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(g);
  return v;
}

bool same_bits(float const* a, float const* b, std::size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

// nt / nn by kind (0: nt with W (N, K), 1: nn with W (K, N)); both W shapes hold N K floats
void product(int kind, float* out, float const* x, float const* w, float const* b, Case const& c) {
  if (kind == 0) st::nt(out, x, w, b, c.M, c.K, c.N, c.accumulate);
  else st::nn(out, x, w, b, c.M, c.K, c.N, c.accumulate);
}
void reference(int kind, float* out, float const* x, float const* w, float const* b, Case const& c) {
  if (kind == 0) st::reference_nt(out, x, w, b, c.M, c.K, c.N, c.accumulate);
  else st::reference_nn(out, x, w, b, c.M, c.K, c.N, c.accumulate);
}

std::vector<Case> random_cases(std::mt19937& g, int count) {
  std::vector<Case> cs;
  for (int i = 0; i < count; ++i) {
    Case c{1 + int(g() % 40u), int(g() % 80u), 1 + int(g() % 300u), g() % 2u == 0, g() % 2u == 0};
    if (i % 8 == 0) c.K = 880 + int(g() % 40u);     // the decoders' widths, K off the 16-lane grid
    if (i % 11 == 0) c.N = 250 + int(g() % 600u);   // several split blocks
    if (i % 13 == 0) c.M = 1 + int(g() % 4u);       // the one- and two-row tiles
    if (i % 17 == 0) c.M = 65 + int(g() % 100u);    // several row blocks
    cs.push_back(c);
  }
  cs.push_back({3, 0, 5, true, true});  // K = 0: out = prior
  cs.push_back({1, 1, 1, false, false});
  return cs;
}

TEST_CASE("the kernels equal their plain definition bit for bit and a double sum within rounding", "[stable]") {
  if (!st::available()) WARN("no AVX-512F here: nt / nn run their reference (the bit-for-bit check is then an identity)");
  std::mt19937 g(11);
  for (Case const& c : random_cases(g, 160)) {
    for (int kind = 0; kind < 2; ++kind) {
      CAPTURE(kind, c.M, c.K, c.N, c.bias, c.accumulate);
      auto const x = normal(g, std::size_t(c.M) * c.K), w = normal(g, std::size_t(c.N) * c.K, 0.05f), b = normal(g, std::size_t(c.N));
      auto const start = normal(g, std::size_t(c.M) * c.N);
      auto got = start, want = start;
      float const* bp = c.bias ? b.data() : nullptr;
      product(kind, got.data(), x.data(), w.data(), bp, c);
      reference(kind, want.data(), x.data(), w.data(), bp, c);
      REQUIRE(same_bits(got.data(), want.data(), got.size()));
      // an independent check of what the sum is: double precision, with a bound of float rounding
      for (int m = 0; m < c.M; ++m)
        for (int n = 0; n < c.N; ++n) {
          double s = 0.0, mag = 0.0;
          for (int k = 0; k < c.K; ++k) {
            double const wk = kind == 0 ? w[std::size_t(n) * c.K + k] : w[std::size_t(k) * c.N + n];
            s += double(x[std::size_t(m) * c.K + k]) * wk;
            mag += std::abs(double(x[std::size_t(m) * c.K + k]) * wk);
          }
          double const prior = (c.accumulate ? double(start[std::size_t(m) * c.N + n]) : 0.0) + (c.bias ? double(b[std::size_t(n)]) : 0.0);
          double const exact = prior + s;
          REQUIRE(std::abs(double(got[std::size_t(m) * c.N + n]) - exact) <= 1e-6 * (mag + std::abs(prior)) * (c.K + 2) + 1e-30);
        }
    }
  }
}

TEST_CASE("a row's bits do not depend on the rows beside it, their order or the thread count", "[stable]") {
  if (!st::available()) WARN("no AVX-512F here: nt / nn run their reference");
  std::mt19937 g(12);
  for (int trial = 0; trial < 24; ++trial) {
    int const K = trial % 3 == 0 ? 896 + trial : 1 + int(g() % 200u), N = 1 + int(g() % 700u), M = trial % 4 == 1 ? 60 + int(g() % 90u) : 2 + int(g() % 45u);
    for (int kind = 0; kind < 2; ++kind) {
      CAPTURE(trial, kind, M, K, N);
      Case const c{M, K, N, true, false};
      auto const x = normal(g, std::size_t(M) * K), w = normal(g, std::size_t(N) * K, 0.05f), b = normal(g, std::size_t(N));
      std::vector<float> all(std::size_t(M) * N);
      product(kind, all.data(), x.data(), w.data(), b.data(), c);
      // each row alone
      std::vector<float> one(static_cast<std::size_t>(N));
      for (int m = 0; m < M; ++m) {
        product(kind, one.data(), x.data() + std::size_t(m) * K, w.data(), b.data(), Case{1, K, N, true, false});
        REQUIRE(same_bits(one.data(), all.data() + std::size_t(m) * N, std::size_t(N)));
      }
      // the rows reversed and mixed with other rows
      std::vector<int> order(std::size_t(M) * 2);
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), g);
      auto const other = normal(g, std::size_t(M) * K);
      std::vector<float> mixed(order.size() * std::size_t(K));
      for (std::size_t i = 0; i < order.size(); ++i) {
        float const* src = order[i] < M ? x.data() + std::size_t(order[i]) * K : other.data() + std::size_t(order[i] - M) * K;
        std::copy(src, src + K, mixed.begin() + std::ptrdiff_t(i * std::size_t(K)));
      }
      std::vector<float> mixed_out(order.size() * std::size_t(N));
      product(kind, mixed_out.data(), mixed.data(), w.data(), b.data(), Case{int(order.size()), K, N, true, false});
      for (std::size_t i = 0; i < order.size(); ++i)
        if (order[i] < M) REQUIRE(same_bits(mixed_out.data() + i * std::size_t(N), all.data() + std::size_t(order[i]) * N, std::size_t(N)));
#if defined(_OPENMP)
      // two threads split the columns (a product large enough to fork): the same bits
      int const before = omp_get_max_threads();
      omp_set_num_threads(2);
      std::vector<float> two(all.size());
      product(kind, two.data(), x.data(), w.data(), b.data(), c);
      omp_set_num_threads(before);
      REQUIRE(same_bits(two.data(), all.data(), all.size()));
#endif
    }
  }
}

// switches the kernels for one scope and back on at its end (a failed check included)
struct Enabled {
  explicit Enabled(bool on) { st::set_enabled(on); }
  ~Enabled() { st::set_enabled(true); }
  Enabled(Enabled const&) = delete;
  Enabled& operator=(Enabled const&) = delete;
};

TEST_CASE("the paged engine decodes the same tokens with the kernels on and off", "[stable][engine]") {
  if (!st::available()) {
    WARN("no AVX-512F here: the engines use BLAS either way");
    return;
  }
  // a Qwen2 whose widths run full 16-lane steps and a tail, with MLP weights large enough
  // (stable::decode_min_weights) that decode steps use the kernels without batch_invariant too
  rlflow::model::GPTConfig c;
  c.arch = rlflow::model::Arch::qwen2;
  c.vocab_size = 101;
  c.max_seq_len = 64;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_kv_head = 2;
  c.n_embd = 136;  // head_dim 34
  c.intermediate_size = 1000;
  c.qkv_bias = true;
  c.tie_word_embeddings = true;
  c.seed = 9;
  c.validate();
  REQUIRE(std::int64_t{c.n_embd} * c.intermediate_size >= st::decode_min_weights);
  auto const w = fixtures::perturbed_weights(c, 4, 0.2f);
  auto const groups = paged_groups::random_groups(7, 3, c.vocab_size, 21, 2, 20);
  rlflow::engine::SamplingParams sp;
  sp.temperature = 0.9f;
  sp.top_k = 30;
  sp.max_new_tokens = 14;
  sp.eos_id = 2;
  for (bool invariant : {false, true}) {
    CAPTURE(invariant);
    rlflow::engine::PagedEngineConfig pc;
    pc.batch_invariant = invariant;
    pc.max_num_seqs = 8;  // decode steps of up to 8 rows, prefill chunks beside them
    auto const blas = [&] {
      Enabled const off(false);
      return paged_groups::run_groups<rlflow::engine::PagedEngine>(c, pc, w, groups, sp, false);
    }();
    auto const stable = paged_groups::run_groups<rlflow::engine::PagedEngine>(c, pc, w, groups, sp, invariant);
    REQUIRE(blas.size() == stable.size());
    for (std::size_t r = 0; r < blas.size(); ++r) {
      REQUIRE(blas[r].samples.size() == stable[r].samples.size());
      for (std::size_t k = 0; k < blas[r].samples.size(); ++k) {
        auto const& a = blas[r].samples[k];
        auto const& b = stable[r].samples[k];
        REQUIRE(a.tokens == b.tokens);
        REQUIRE(a.logprobs.size() == b.logprobs.size());
        for (std::size_t j = 0; j < a.logprobs.size(); ++j) REQUIRE(b.logprobs[j] == Approx(a.logprobs[j]).margin(1e-4));
      }
    }
  }
}

}  // namespace test_stable_products
