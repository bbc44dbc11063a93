// tests/model/test_training_engine.cpp <-> include/rlflow/engine/optimizer.hpp, training_engine.hpp:
// AdamW against a double-precision reference, clipping, the learning-rate schedules, and
// supervised memorisation of a small dataset (loss near zero, then greedy rollouts reproduce it).
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <rlflow/engine/optimizer.hpp>
#include <rlflow/engine/rollout_engine.hpp>
#include <rlflow/engine/training_engine.hpp>
#include <rlflow/model/tokenizer.hpp>

namespace test_training_engine {

using rlflow::DType;
using rlflow::Shape;
using rlflow::Tensor;
using namespace rlflow::engine;

TEST_CASE("AdamW with clipping and decoupled weight decay matches a double reference", "[engine][optimizer]") {
  OptimizerConfig c;
  c.lr = 0.05f;
  c.weight_decay = 0.1f;
  c.max_grad_norm = GENERATE(0.5f, 0.0f);
  std::size_t const n = 37;
  std::vector<std::uint8_t> decay(n);
  for (std::size_t i = 0; i < n; ++i) decay[i] = i % 3 != 0;
  AdamW opt(c, n, decay);
  std::mt19937 g(1);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> p(n), grad(n);
  for (auto& x : p) x = d(g);
  std::vector<double> P(p.begin(), p.end()), M(n, 0.0), Vv(n, 0.0);
  for (int step = 1; step <= 4; ++step) {
    for (auto& x : grad) x = d(g);
    double norm = 0;
    for (float x : grad) norm += double(x) * x;
    norm = std::sqrt(norm);
    double const clip = (c.max_grad_norm > 0 && norm > c.max_grad_norm) ? c.max_grad_norm / (norm + 1e-6) : 1.0;
    for (std::size_t i = 0; i < n; ++i) {
      double const gi = grad[i] * clip;
      M[i] = 0.9 * M[i] + 0.1 * gi;
      Vv[i] = 0.999 * Vv[i] + 0.001 * gi * gi;
      double const mh = M[i] / (1 - std::pow(0.9, step)), vh = Vv[i] / (1 - std::pow(0.999, step));
      if (decay[i]) P[i] -= 0.05 * 0.1 * P[i];
      P[i] -= 0.05 * mh / (std::sqrt(vh) + 1e-8);
    }
    float const got_norm = opt.step(p, grad);
    REQUIRE(got_norm == Approx(norm).epsilon(1e-6));
    for (std::size_t i = 0; i < n; ++i) REQUIRE(p[i] == Approx(P[i]).margin(2e-6));
  }
  REQUIRE(opt.steps_taken() == 4);
  // a non-finite gradient skips the update but counts the step
  auto keep = p;
  grad[3] = NAN;
  REQUIRE(std::isnan(opt.step(p, grad)));
  REQUIRE(p == keep);
  REQUIRE(opt.steps_taken() == 5);
}

TEST_CASE("learning-rate schedules: warmup, constant, cosine", "[engine][optimizer]") {
  OptimizerConfig c;
  c.lr = 1.0f;
  c.warmup_steps = 4;
  REQUIRE(lr_at(c, 0) == 0.0f);
  REQUIRE(lr_at(c, 2) == Approx(0.5));
  REQUIRE(lr_at(c, 4) == 1.0f);
  REQUIRE(lr_at(c, 1000) == 1.0f);
  c.schedule = LRSchedule::warmup_cosine;
  c.total_steps = 14;
  c.min_lr_ratio = 0.1f;
  REQUIRE(lr_at(c, 4) == Approx(1.0));
  REQUIRE(lr_at(c, 9) == Approx(0.1 + 0.9 * 0.5));
  REQUIRE(lr_at(c, 14) == Approx(0.1));
  REQUIRE(lr_at(c, 20) == Approx(0.1));
  c.total_steps = 3;
  REQUIRE_THROWS_AS(c.validate(), rlflow::config_error);
  TrainingEngine eng(rlflow::model::GPTConfig{}, OptimizerConfig{.lr = 0.2f, .warmup_steps = 2});
  REQUIRE(eng.lr() == 0.0f);
  eng.optimizer_step();
  REQUIRE(eng.lr() == Approx(0.1));
  REQUIRE(eng.step() == 1);
}

TEST_CASE("the model memorises a small dataset under supervised training", "[engine][train]") {
  rlflow::model::CharTokenizer tok("abcdefgh");
  std::vector<std::string> const data{"abcdefg", "hgfedcb", "cegah", "bdfhbd"};  // distinct first characters
  rlflow::model::GPTConfig const cfg{.vocab_size = tok.vocab_size(), .max_seq_len = 12, .n_layer = 2, .n_head = 2, .n_embd = 32, .seed = 3};
  OptimizerConfig oc;
  oc.lr = 1e-2f;
  oc.weight_decay = 0.0f;
  TrainingEngine eng(cfg, oc);
  // each row: BOS text EOS, right-padded; log-probs cover everything after BOS, the loss everything
  // after the first character (the prompt of the rollout check below)
  int const B = int(data.size()), T = 9, R = T - 1;
  std::vector<std::int32_t> ids(std::size_t(B) * T, tok.pad_id()), mask(std::size_t(B) * T, 0);
  std::vector<float> dlogp(std::size_t(B) * R, 0.0f);
  int tokens = 0;
  for (int b = 0; b < B; ++b) {
    auto enc = tok.encode(data[std::size_t(b)]);
    enc.insert(enc.begin(), tok.bos_id());
    enc.push_back(tok.eos_id());
    for (std::size_t t = 0; t < enc.size(); ++t) {
      ids[std::size_t(b) * T + t] = enc[t];
      mask[std::size_t(b) * T + t] = 1;
      if (t >= 2) { dlogp[std::size_t(b) * R + t - 1] = 1.0f; ++tokens; }  // the first character is the prompt
    }
  }
  for (auto& x : dlogp) x *= -1.0f / float(tokens);  // mean negative log-likelihood
  Tensor tid = Tensor::from(ids, Shape{B, T}), tmask = Tensor::from(mask, Shape{B, T}), g = Tensor::from(dlogp, Shape{B, R});
  auto nll = [&](LogProbResult const& r) {
    double s = 0;
    for (std::size_t i = 0; i < dlogp.size(); ++i) s += double(dlogp[i]) * r.log_probs.span<float>()[i];
    return s;
  };
  double const first = nll(eng.compute_log_prob(tid, tmask, R));
  double last = first;
  for (int step = 0; step < 150; ++step) {
    eng.zero_grad();
    last = nll(eng.forward_backward(tid, tmask, R, g));
    eng.optimizer_step();
  }
  last = nll(eng.compute_log_prob(tid, tmask, R));
  INFO("loss " << first << " -> " << last);
  REQUIRE(first > 1.5);
  REQUIRE(last < 0.02);
  // greedy rollouts from BOS + first character reproduce each string and stop at EOS
  RolloutEngine ro(cfg);
  ro.load_weights(eng.params());
  std::vector<std::int32_t> pids, pmask;
  for (auto const& s : data) {
    pids.push_back(tok.bos_id());
    pids.push_back(tok.encode(s.substr(0, 1))[0]);
    pmask.push_back(1);
    pmask.push_back(1);
  }
  SamplingParams sp;
  sp.temperature = 0.0f;
  sp.max_new_tokens = 8;
  sp.eos_id = tok.eos_id();
  sp.pad_id = tok.pad_id();
  auto out = ro.generate(Tensor::from(pids, Shape{B, 2}), Tensor::from(pmask, Shape{B, 2}), sp, std::vector<std::uint64_t>(std::size_t(B), 1));
  for (int b = 0; b < B; ++b) {
    std::vector<std::int32_t> row(out.responses.data<std::int32_t>() + std::size_t(b) * 8, out.responses.data<std::int32_t>() + std::size_t(b + 1) * 8);
    CHECK(data[std::size_t(b)].substr(0, 1) + tok.decode(row) == data[std::size_t(b)]);
    int len = 0;
    for (int j = 0; j < 8; ++j) len += out.response_mask.at<std::int32_t>(b, j);
    CHECK(len == int(data[std::size_t(b)].size()));  // the rest of the text plus EOS
  }
}

TEST_CASE("gradients and AdamW moments take memory only once an engine trains", "[engine][memory]") {
  // a model whose weights dwarf one short row's activations: 256-token vocabulary, width 64
  rlflow::model::GPTConfig const cfg{.vocab_size = 256, .max_seq_len = 8, .n_layer = 2, .n_head = 2, .n_embd = 64, .seed = 5};
  auto& mr = rlflow::default_host_resource();
  std::size_t const P = rlflow::model::param_count(cfg);
  std::size_t const buffer = rlflow::caching_host_resource::size_class(P * sizeof(float));
  auto in_use = [&] { return mr.stats().bytes_in_use; };
  Tensor const ids = Tensor::from(std::vector<std::int32_t>{1, 2, 3, 4}, Shape{1, 4});
  Tensor const mask = Tensor::from(std::vector<std::int32_t>{1, 1, 1, 1}, Shape{1, 4});
  std::size_t const before = in_use();
  TrainingEngine eng(cfg, OptimizerConfig{});
  std::size_t const built = in_use() - before;
  CHECK(built >= buffer);      // the weights
  CHECK(built < 2 * buffer);   // and neither gradients nor moments
  (void)eng.compute_log_prob(ids, mask, 3);  // a reference's whole use
  std::size_t const after_forward = in_use() - before;
  CHECK(after_forward < 2 * buffer);
  // the first backward allocates the gradients (zero before accumulating), the first step the moments
  eng.zero_grad();
  std::vector<float> dl(3, -1.0f);
  (void)eng.forward_backward(ids, mask, 3, Tensor::from(dl, Shape{1, 3}));
  CHECK(in_use() - before >= after_forward + buffer);
  double norm = 0;
  for (float g : eng.grads()) norm += double(g) * g;
  CHECK(norm > 0);
  std::size_t const with_grads = in_use();
  eng.optimizer_step();
  CHECK(in_use() >= with_grads + 2 * buffer);
  double moved = 0;
  for (float m : eng.optimizer().m()) moved += std::abs(m);
  CHECK(moved > 0);
}

}  // namespace test_training_engine
