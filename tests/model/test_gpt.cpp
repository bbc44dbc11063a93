// tests/model/test_gpt.cpp <-> include/rlflow/model/gpt.hpp, engine/training_engine.hpp:
// forward against the double-precision reference, gradient check of every parameter tensor by
// central finite differences of the reference, masks and padding, determinism across threads.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>
#if defined(_OPENMP)
#include <omp.h>
#endif

#include <rlflow/engine/training_engine.hpp>
#include <rlflow/model/tokenizer.hpp>

#include "model/reference_gpt.hpp"

#include "fixtures.hpp"

namespace test_gpt {

using rlflow::DType;
using rlflow::Shape;
using rlflow::Tensor;
using rlflow::engine::TrainingEngine;
using rlflow::model::GPTConfig;

namespace {

GPTConfig tiny(bool value_head = false) {
  return {.vocab_size = 7, .max_seq_len = 8, .n_layer = 2, .n_head = 2, .n_embd = 8, .seed = 11, .value_head = value_head};
}

// Perturbs the GPT-2 initialisation so activations and gradients are far from trivial.
void randomise(std::span<float> p, unsigned seed, float scale = 0.25f) { fixtures::perturb(p, seed, scale); }

// A (B, T) batch: row b has b left pads, then tokens; the last row ends with a right pad.
struct Batch {
  int B, T;
  std::vector<std::int32_t> ids, mask;
  Tensor tids() const { return Tensor::from(ids, Shape{B, T}); }
  Tensor tmask() const { return Tensor::from(mask, Shape{B, T}); }
};
Batch make_batch(int B, int T, int V, unsigned seed) {
  std::mt19937 g(seed);
  Batch b{B, T, {}, {}};
  for (int r = 0; r < B; ++r)
    for (int t = 0; t < T; ++t) {
      bool const pad = t < r || (r == B - 1 && t == T - 1);
      b.ids.push_back(pad ? 0 : std::int32_t(g() % unsigned(V)));
      b.mask.push_back(pad ? 0 : 1);
    }
  return b;
}

std::vector<float> randn(std::size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

// Policy loss of the reference: sum a * logp + c * H over the response positions, in double.
double ref_policy_loss(GPTConfig const& cfg, std::vector<double> const& P, Batch const& b, int R, double temp,
                       std::vector<float> const& a, std::vector<float> const& c) {
  auto out = test::ref_forward<double>(cfg, P, b.ids, b.mask, b.B, b.T);
  double loss = 0;
  int const V = cfg.vocab_size;
  for (int r = 0; r < b.B; ++r)
    for (int j = 0; j < R; ++j) {
      int const t = b.T - R - 1 + j;
      double lp, h;
      test::ref_logprob<double>(&out.logits[(std::size_t(r) * b.T + t) * V], V, b.ids[std::size_t(r) * b.T + t + 1], temp, lp, h);
      loss += a[std::size_t(r) * R + j] * lp + c[std::size_t(r) * R + j] * h;
    }
  return loss;
}

double ref_value_loss(GPTConfig const& cfg, std::vector<double> const& P, Batch const& b, int R, std::vector<float> const& d) {
  auto out = test::ref_forward<double>(cfg, P, b.ids, b.mask, b.B, b.T);
  double loss = 0;
  for (int r = 0; r < b.B; ++r)
    for (int j = 0; j < R; ++j) loss += d[std::size_t(r) * R + j] * out.values[std::size_t(r) * b.T + b.T - R - 1 + j];
  return loss;
}

// Compares the engine's gradient with central differences of 'loss', tensor by tensor.
template <class Loss>
void check_gradients(rlflow::model::ParamLayout const& lay, std::span<float const> params, std::span<float const> grads,
                     Loss&& loss) {
  std::vector<double> P(params.begin(), params.end());
  double const h = 1e-5;
  for (auto const& t : lay.tensors()) {
    double max_err = 0, max_ref = 0;
    for (std::size_t i = t.offset; i < t.offset + t.numel; ++i) {
      double const keep = P[i];
      P[i] = keep + h;
      double const lp = loss(P);
      P[i] = keep - h;
      double const lm = loss(P);
      P[i] = keep;
      double const fd = (lp - lm) / (2 * h);
      max_err = std::max(max_err, std::abs(fd - double(grads[i])));
      max_ref = std::max(max_ref, std::abs(fd));
    }
    INFO("parameter " << t.name << ": max |fd - grad| = " << max_err << ", max |fd| = " << max_ref);
    CHECK(max_ref > 1e-6);  // every tensor gets a gradient (the wpe rows in use, at least)
    CHECK(max_err <= 2e-3 * std::max(max_ref, 1e-2));
  }
}

}  // namespace

TEST_CASE("GPTConfig and ParamLayout", "[model][gpt]") {
  GPTConfig c = tiny();
  rlflow::model::ParamLayout const lay(c);
  std::size_t const C = 8, V = 7, T = 8;
  std::size_t const per_layer = 2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C + 4 * C * C + 4 * C + 4 * C * C + C;
  REQUIRE(lay.size() == V * C + T * C + 2 * per_layer + 2 * C);
  REQUIRE(rlflow::model::param_count(c) == lay.size());
  REQUIRE(lay.find("h.1.mlp.c_fc.weight").shape == std::vector<std::int64_t>{32, 8});
  REQUIRE(lay.find("h.1.mlp.c_fc.weight").offset == lay.layers[1].fc_w);
  REQUIRE_THROWS_AS(lay.find("h.9.ln_1.weight"), rlflow::key_error);
  std::size_t end = 0;  // the views tile the buffer
  for (auto const& t : lay.tensors()) {
    REQUIRE(t.offset == end);
    end += t.numel;
  }
  REQUIRE(end == lay.size());
  c.n_embd = 9;
  REQUIRE_THROWS_AS(c.validate(), rlflow::config_error);
  REQUIRE(rlflow::model::param_count(tiny(true)) == lay.size() + C + 1);
}

TEST_CASE("init_params is deterministic from the seed", "[model][gpt]") {
  GPTConfig c = tiny();
  std::vector<float> a(rlflow::model::param_count(c)), b(a.size());
  rlflow::model::init_params(c, a);
  rlflow::model::init_params(c, b);
  REQUIRE(a == b);
  c.seed = 12;
  rlflow::model::init_params(c, b);
  REQUIRE(a != b);
  rlflow::model::ParamLayout const lay(c);
  auto const& w = lay.find("wte");
  double s = 0, s2 = 0;
  for (std::size_t i = w.offset; i < w.offset + w.numel; ++i) { s += a[i]; s2 += double(a[i]) * a[i]; }
  double const sd = std::sqrt(s2 / double(w.numel) - (s / double(w.numel)) * (s / double(w.numel)));
  REQUIRE(sd > 0.012);
  REQUIRE(sd < 0.028);
  REQUIRE(a[lay.find("ln_f.weight").offset] == 1.0f);
  REQUIRE(a[lay.find("h.0.attn.c_attn.bias").offset] == 0.0f);
}

TEST_CASE("forward log-probs and entropy match the double-precision reference", "[model][gpt]") {
  GPTConfig const cfg = tiny();
  TrainingEngine eng(cfg);
  randomise(eng.params(), 3);
  Batch const b = make_batch(3, 7, cfg.vocab_size, 5);
  int const R = 3;
  float const temp = GENERATE(1.0f, 0.6f);
  auto out = eng.compute_log_prob(b.tids(), b.tmask(), R, temp);
  std::vector<double> P(eng.params().begin(), eng.params().end());
  auto ref = test::ref_forward<double>(cfg, P, b.ids, b.mask, b.B, b.T);
  for (int r = 0; r < b.B; ++r)
    for (int j = 0; j < R; ++j) {
      int const t = b.T - R - 1 + j;
      double lp, h;
      test::ref_logprob<double>(&ref.logits[(std::size_t(r) * b.T + t) * cfg.vocab_size], cfg.vocab_size,
                                b.ids[std::size_t(r) * b.T + t + 1], temp, lp, h);
      CHECK(out.log_probs.at<float>(r, j) == Approx(lp).epsilon(1e-5).margin(1e-5));
      CHECK(out.entropy.at<float>(r, j) == Approx(h).epsilon(1e-5).margin(1e-5));
    }
  auto logits = eng.compute_logits(b.tids(), b.tmask());
  auto lg = logits.span<float>();
  for (std::size_t i = 0; i < lg.size(); ++i) {
    int const t = int(i / std::size_t(cfg.vocab_size)) % b.T, r = int(i / std::size_t(cfg.vocab_size * b.T));
    if (!b.mask[std::size_t(r) * b.T + t]) continue;  // a pad's logits are not defined by the spec
    CHECK(lg[i] == Approx(ref.logits[i]).margin(1e-5));
  }
}

TEST_CASE("gradient check of every parameter tensor (policy head, log-prob + entropy)", "[model][gpt][grad]") {
  GPTConfig const cfg = tiny();
  TrainingEngine eng(cfg);
  randomise(eng.params(), 7);
  Batch const b = make_batch(3, 7, cfg.vocab_size, 9);
  int const R = 4;
  float const temp = 0.8f;
  auto a = randn(std::size_t(b.B) * R, 1), c = randn(std::size_t(b.B) * R, 2);
  eng.zero_grad();
  eng.forward_backward(b.tids(), b.tmask(), R, Tensor::from(a, Shape{b.B, R}), Tensor::from(c, Shape{b.B, R}), temp);
  check_gradients(eng.layout(), eng.params(), eng.grads(),
                  [&](std::vector<double> const& P) { return ref_policy_loss(cfg, P, b, R, temp, a, c); });
}

TEST_CASE("gradient check of every parameter tensor (value head)", "[model][gpt][grad]") {
  GPTConfig const cfg = tiny(true);
  TrainingEngine eng(cfg);
  randomise(eng.params(), 8);
  Batch const b = make_batch(2, 6, cfg.vocab_size, 4);
  int const R = 3;
  auto d = randn(std::size_t(b.B) * R, 3);
  eng.zero_grad();
  auto v = eng.forward_backward_values(b.tids(), b.tmask(), R, Tensor::from(d, Shape{b.B, R}));
  std::vector<double> P(eng.params().begin(), eng.params().end());
  auto ref = test::ref_forward<double>(cfg, P, b.ids, b.mask, b.B, b.T);
  for (int r = 0; r < b.B; ++r)
    for (int j = 0; j < R; ++j) CHECK(v.at<float>(r, j) == Approx(ref.values[std::size_t(r) * b.T + b.T - R - 1 + j]).margin(1e-5));
  rlflow::model::ParamLayout const& lay = eng.layout();
  // the tied LM head does not feed the value: only wte's embedding rows in use get a gradient
  check_gradients(lay, eng.params(), eng.grads(), [&](std::vector<double> const& P) { return ref_value_loss(cfg, P, b, R, d); });
}

TEST_CASE("gradients accumulate over micro-batches", "[model][gpt]") {
  GPTConfig const cfg = tiny();
  TrainingEngine eng(cfg);
  randomise(eng.params(), 1);
  Batch const b1 = make_batch(2, 6, cfg.vocab_size, 1), b2 = make_batch(3, 6, cfg.vocab_size, 2);
  auto g1 = Tensor::from(randn(6, 5), Shape{2, 3}), g2 = Tensor::from(randn(9, 6), Shape{3, 3});
  eng.zero_grad();
  eng.forward_backward(b1.tids(), b1.tmask(), 3, g1);
  std::vector<float> s1(eng.grads().begin(), eng.grads().end());
  eng.zero_grad();
  eng.forward_backward(b2.tids(), b2.tmask(), 3, g2);
  std::vector<float> s2(eng.grads().begin(), eng.grads().end());
  eng.zero_grad();
  eng.forward_backward(b1.tids(), b1.tmask(), 3, g1);
  eng.forward_backward(b2.tids(), b2.tmask(), 3, g2);
  auto g = eng.grads();
  for (std::size_t i = 0; i < g.size(); ++i) REQUIRE(g[i] == Approx(s1[i] + s2[i]).margin(1e-6));
}

TEST_CASE("left padding does not change a sequence's log-probs", "[model][gpt]") {
  GPTConfig const cfg = tiny();
  TrainingEngine eng(cfg);
  randomise(eng.params(), 2);
  std::vector<std::int32_t> seq{3, 5, 1, 6, 2};
  auto run = [&](int pads) {
    std::vector<std::int32_t> ids(std::size_t(pads), 0), mask(std::size_t(pads), 0);
    for (auto t : seq) { ids.push_back(t); mask.push_back(1); }
    int const T = int(ids.size());
    auto r = eng.compute_log_prob(Tensor::from(ids, Shape{1, T}), Tensor::from(mask, Shape{1, T}), 3);
    return std::vector<float>(r.log_probs.span<float>().begin(), r.log_probs.span<float>().end());
  };
  auto a = run(0), b = run(3);
  for (std::size_t i = 0; i < a.size(); ++i) REQUIRE(a[i] == Approx(b[i]).margin(1e-6));
}

TEST_CASE("results do not depend on the OpenMP thread count", "[model][gpt]") {
  GPTConfig cfg = tiny();
  cfg.n_embd = 32;
  cfg.max_seq_len = 32;
  auto run = [&](int threads) {
#if defined(_OPENMP)
    omp_set_num_threads(threads);
#else
    (void)threads;
#endif
    TrainingEngine eng(cfg);
    randomise(eng.params(), 4, 0.1f);
    Batch const b = make_batch(8, 30, cfg.vocab_size, 3);
    eng.zero_grad();
    auto r = eng.forward_backward(b.tids(), b.tmask(), 10, Tensor::from(randn(80, 1), Shape{8, 10}),
                                  Tensor::from(randn(80, 2), Shape{8, 10}));
    eng.optimizer_step();
    std::vector<float> out(eng.params().begin(), eng.params().end());
    out.insert(out.end(), r.log_probs.span<float>().begin(), r.log_probs.span<float>().end());
    return out;
  };
  auto one = run(1), two = run(2);
#if defined(_OPENMP)
  omp_set_num_threads(2);
#endif
  REQUIRE(one == two);
}

TEST_CASE("results do not depend on the thread count where every loop and product forks", "[model][gpt][threads]") {
  // Sizes above every fork threshold of layers.hpp (products split by rows across the team,
  // layer norm, GELU, column sums, the log-softmax head, AdamW): 1 and 2 threads agree bit for bit.
  GPTConfig cfg = tiny();
  cfg.n_embd = 64;
  cfg.n_head = 4;
  cfg.max_seq_len = 48;
  int const B = 32, T = 48, R = 20;
  rlflow::model::layers::set_load_aware(false);  // the full team, even on a busy machine
  auto run = [&](int threads) {
    rlflow::model::layers::set_worker_threads(threads);
    TrainingEngine eng(cfg);
    randomise(eng.params(), 5, 0.1f);
    Batch const b = make_batch(B, T, cfg.vocab_size, 6);
    eng.zero_grad();
    auto r = eng.forward_backward(b.tids(), b.tmask(), R, Tensor::from(randn(std::size_t(B) * R, 3), Shape{B, R}),
                                  Tensor::from(randn(std::size_t(B) * R, 4), Shape{B, R}));
    eng.optimizer_step();
    std::vector<float> out(eng.params().begin(), eng.params().end());
    out.insert(out.end(), r.log_probs.span<float>().begin(), r.log_probs.span<float>().end());
    out.insert(out.end(), r.entropy.span<float>().begin(), r.entropy.span<float>().end());
    return out;
  };
#if defined(_OPENMP)
  int const before = omp_get_max_threads();
#endif
  auto one = run(1), two = run(2);
  rlflow::model::layers::set_load_aware(true);
#if defined(_OPENMP)
  omp_set_num_threads(before);
#endif
  REQUIRE(one.size() == two.size());
  REQUIRE(one == two);
}

TEST_CASE("the split product does not depend on the team size and equals one sgemm call", "[model][gpt][threads]") {
  // layers::sgemm splits C by row blocks (or column blocks when M is small) fixed by the shape;
  // each block is one sgemm over the same K. One and two threads give the same bits; against one
  // unsplit call the bits are equal only where OpenBLAS has no shape-dependent kernel (its
  // AVX-512 small-matrix kernels sum in another order), so that comparison is within rounding.
  std::mt19937 g(9);
  std::normal_distribution<float> n(0.0f, 1.0f);
  struct Case { CBLAS_TRANSPOSE ta, tb; int M, N, K; };
  Case const cases[] = {{CblasNoTrans, CblasTrans, 1536, 192, 64}, {CblasNoTrans, CblasNoTrans, 1000, 64, 256},
                        {CblasTrans, CblasNoTrans, 256, 64, 1536}, {CblasNoTrans, CblasTrans, 40, 4096, 128},
                        {CblasTrans, CblasTrans, 37, 3001, 97}};
#if defined(_OPENMP)
  int const before = omp_get_max_threads();
#endif
  rlflow::model::layers::set_load_aware(false);
  for (auto const& c : cases) {
    int const lda = c.ta == CblasNoTrans ? c.K : c.M, ldb = c.tb == CblasNoTrans ? c.N : c.K;
    std::vector<float> A(std::size_t(c.M) * c.K), Bm(std::size_t(c.K) * c.N), C0(std::size_t(c.M) * c.N);
    for (auto& x : A) x = n(g);
    for (auto& x : Bm) x = n(g);
    for (auto& x : C0) x = n(g);
    std::vector<float> ref = C0, got = C0, got1 = C0;
    cblas_sgemm(CblasRowMajor, c.ta, c.tb, c.M, c.N, c.K, 0.5f, A.data(), lda, Bm.data(), ldb, 1.0f, ref.data(), c.N);
    rlflow::model::layers::set_worker_threads(1);
    rlflow::model::layers::sgemm(c.ta, c.tb, c.M, c.N, c.K, 0.5f, A.data(), lda, Bm.data(), ldb, 1.0f, got1.data(), c.N);
    rlflow::model::layers::set_worker_threads(2);
    rlflow::model::layers::sgemm(c.ta, c.tb, c.M, c.N, c.K, 0.5f, A.data(), lda, Bm.data(), ldb, 1.0f, got.data(), c.N);
    INFO("M " << c.M << " N " << c.N << " K " << c.K);
    REQUIRE(got == got1);
    double worst_vs_one_call = 0;  // relative to the size of the sum's terms
    for (std::size_t i = 0; i < got.size(); ++i)
      worst_vs_one_call = std::max(worst_vs_one_call, std::abs(double(got[i]) - ref[i]) / (1.0 + std::abs(double(ref[i]))));
    REQUIRE(worst_vs_one_call < 1e-4);
    // and against a double-precision reference (the split covers every element exactly once)
    double worst = 0;
    for (int i = 0; i < c.M; ++i)
      for (int j = 0; j < c.N; ++j) {
        double s = 0;
        for (int k = 0; k < c.K; ++k) {
          double const a = c.ta == CblasNoTrans ? A[std::size_t(i) * lda + k] : A[std::size_t(k) * lda + i];
          double const b = c.tb == CblasNoTrans ? Bm[std::size_t(k) * ldb + j] : Bm[std::size_t(j) * ldb + k];
          s += a * b;
        }
        double const want = 0.5 * s + C0[std::size_t(i) * c.N + j];
        worst = std::max(worst, std::abs(want - got[std::size_t(i) * c.N + j]) / (1.0 + std::abs(want)));
      }
    REQUIRE(worst < 1e-4);
  }
  rlflow::model::layers::set_load_aware(true);
#if defined(_OPENMP)
  omp_set_num_threads(before);
#endif
}

TEST_CASE("training engine input errors name the problem", "[model][gpt]") {
  TrainingEngine eng(tiny());
  Batch const b = make_batch(2, 6, 7, 1);
  REQUIRE_THROWS_AS(eng.compute_log_prob(b.tids(), b.tmask(), 6), rlflow::shape_error);
  REQUIRE_THROWS_AS(eng.compute_log_prob(b.tids(), Tensor::zeros(DType::float32, Shape{2, 6}), 2), rlflow::dtype_error);
  REQUIRE_THROWS_AS(eng.backward(Tensor::zeros(DType::float32, Shape{2, 2})), rlflow::value_error);
  eng.forward(b.tids(), b.tmask(), 2);
  REQUIRE_THROWS_AS(eng.backward(Tensor::zeros(DType::float32, Shape{2, 3})), rlflow::shape_error);
  REQUIRE_THROWS_AS(eng.compute_values(b.tids(), b.tmask(), 2), rlflow::config_error);
  std::vector<std::int32_t> big(12, 9);
  REQUIRE_THROWS_WITH(eng.compute_log_prob(Tensor::from(big, Shape{2, 6}), b.tmask(), 2),
                      Catch::Contains("outside the vocabulary"));
  std::vector<std::int32_t> longer(20, 1);
  REQUIRE_THROWS_WITH(eng.compute_log_prob(Tensor::from(longer, Shape{1, 20}), Tensor::from(longer, Shape{1, 20}), 2),
                      Catch::Contains("max_seq_len"));
}

TEST_CASE("CharTokenizer round-trips and rejects unknown characters", "[model][tokenizer]") {
  rlflow::model::CharTokenizer tok("abc");
  REQUIRE(tok.vocab_size() == 6);
  auto ids = tok.encode("cab");
  REQUIRE(ids == std::vector<std::int32_t>{5, 3, 4});
  ids.push_back(tok.eos_id());
  ids.push_back(tok.pad_id());
  REQUIRE(tok.decode(ids) == "cab");
  REQUIRE(tok.decode(ids, false) == "cab<eos><pad>");
  REQUIRE_THROWS_AS(tok.encode("abd"), rlflow::value_error);
  REQUIRE_THROWS_AS(rlflow::model::CharTokenizer("aba"), rlflow::config_error);
  auto bytes = rlflow::model::CharTokenizer::bytes();
  REQUIRE(bytes.vocab_size() == 259);
  std::string s("\x01\xff hi", 5);
  REQUIRE(bytes.decode(bytes.encode(s)) == s);
}

TEST_CASE("tanh_approx is within 2e-7 of tanh", "[model][layers]") {
  double worst = 0;
  for (double x = -25; x <= 25; x += 3.7e-4) {
    float const xf = float(x);
    worst = std::max(worst, std::abs(double(rlflow::model::layers::tanh_approx(xf)) - std::tanh(double(xf))));
  }
  REQUIRE(worst < 2e-7);
  REQUIRE(rlflow::model::layers::tanh_approx(1e30f) == 1.0f);
  REQUIRE(rlflow::model::layers::tanh_approx(-INFINITY) == -1.0f);
  REQUIRE(rlflow::model::layers::tanh_approx(0.0f) == 0.0f);
}

TEST_CASE("sum_pi_squared matches the double-precision softmax of the reference logits", "[model][gpt][otb]") {
  GPTConfig const cfg = tiny();
  TrainingEngine eng(cfg);
  unsigned const seed = GENERATE(3u, 11u, 29u);
  randomise(eng.params(), seed);
  Batch const b = make_batch(4, 8, cfg.vocab_size, seed + 1);
  int const R = 4;
  float const temp = GENERATE(1.0f, 0.5f);
  REQUIRE_THROWS_WITH(TrainingEngine(cfg).sum_pi_squared(), Catch::Contains("call compute_log_prob() or forward() first"));
  eng.compute_log_prob(b.tids(), b.tmask(), R, temp);
  Tensor const sq = eng.sum_pi_squared();
  REQUIRE(sq.dim(0) == b.B);
  REQUIRE(sq.dim(1) == R);
  std::vector<double> P(eng.params().begin(), eng.params().end());
  auto ref = test::ref_forward<double>(cfg, P, b.ids, b.mask, b.B, b.T);
  int const V = cfg.vocab_size;
  for (int r = 0; r < b.B; ++r)
    for (int j = 0; j < R; ++j) {
      double const* z = &ref.logits[(std::size_t(r) * b.T + (b.T - R - 1 + j)) * V];
      double m = -INFINITY, s = 0, s2 = 0;
      for (int v = 0; v < V; ++v) m = std::max(m, z[v] / temp);
      for (int v = 0; v < V; ++v) s += std::exp(z[v] / temp - m);
      for (int v = 0; v < V; ++v) s2 += std::pow(std::exp(z[v] / temp - m) / s, 2);
      float const got = sq.at<float>(r, j);
      CHECK(got == Approx(s2).epsilon(1e-5).margin(1e-6));
      CHECK(got >= 1.0f / float(V) * (1 - 1e-5f));
      CHECK(got <= 1.0f + 1e-6f);
    }
}

}  // namespace test_gpt
