// tests/model/test_training_tp.cpp <-> the training tensor parallelism (Megatron-style) of
// include/rlflow/model/gpt.hpp and include/rlflow/engine/training_engine.hpp: TP = 2 and 4 groups
// (one thread per rank, an in-process TP communicator) against the unsharded engine on random
// models and batches: logits, log-probs, entropies, values and every parameter gradient (gathered
// back to the full layout) within 1e-5 relative; a few AdamW steps (clipping active) within 1e-4;
// the replicated tensors stay identical on every rank bit for bit; errors before work; checkpoints
// of TP engines hold the full model (a TP = 2 / 4 save equals the TP = 1 save byte for byte, a
// file loads at every TP into the rank's slices, a bad file leaves the shard untouched).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <exception>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <filesystem>
#include <memory>

#include <unistd.h>

#include <rlflow/engine/checkpoint.hpp>
#include <rlflow/engine/training_engine.hpp>

#include "fixtures.hpp"

namespace test_training_tp {

using rlflow::DType;
using rlflow::Shape;
using rlflow::Tensor;
using rlflow::engine::OptimizerConfig;
using rlflow::engine::TrainingEngine;
using rlflow::model::GPTConfig;
using rlflow::model::TPRank;

namespace {

GPTConfig model_cfg(int n_head, int n_embd, std::uint64_t seed, bool value_head = false) {
  return {.vocab_size = 17, .max_seq_len = 16, .n_layer = 2, .n_head = n_head, .n_embd = n_embd, .seed = seed,
          .value_head = value_head};
}

//! Random full weights, far from the initialisation (biases and layer norms included).
std::vector<float> random_weights(GPTConfig const& c, unsigned seed) { return fixtures::perturbed_weights(c, seed, 0.2f); }

struct Batch {
  Tensor ids, mask, dlogp, dent;
  int R = 0;
};
//! B left-padded random sequences of width T (prompt lengths vary, some response padding), R
//! response columns, random loss gradients.
Batch random_batch(int B, int T, int R, int V, unsigned seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  Batch b{Tensor::zeros(DType::int32, Shape{B, T}), Tensor::zeros(DType::int32, Shape{B, T}),
          Tensor::empty(DType::float32, Shape{B, R}), Tensor::empty(DType::float32, Shape{B, R}), R};
  int const P = T - R;
  for (int i = 0; i < B; ++i) {
    int const plen = 1 + int(g() % unsigned(P));
    int const rlen = 1 + int(g() % unsigned(R));
    for (int t = 0; t < T; ++t) {
      b.ids.at<std::int32_t>(i, t) = int(g() % unsigned(V));
      b.mask.at<std::int32_t>(i, t) = (t >= P - plen && t < P + rlen) ? 1 : 0;
    }
    for (int j = 0; j < R; ++j) {
      b.dlogp.at<float>(i, j) = n(g);
      b.dent.at<float>(i, j) = 0.1f * n(g);
    }
  }
  return b;
}

std::vector<float> to_vec(Tensor const& t) {
  auto s = t.span<float const>();
  return {s.begin(), s.end()};
}

//! What one engine (one rank) reports after the scenario.
struct Outcome {
  std::vector<float> logits, log_probs, entropy, values, grads, weights, shard, sum_pi2;
  double norm = 0;
};

//! The scenario: forward + backward of the batch (logits, log-probs, entropy or values, the full
//! gradient), then 'steps' more forward/backward/AdamW steps; the full weights at the end.
Outcome scenario(TrainingEngine& e, std::vector<float> const& full, Batch const& b, int steps) {
  Outcome o;
  e.load_weights(full);
  o.logits = to_vec(e.compute_logits(b.ids, b.mask));
  e.zero_grad();
  if (e.config().value_head) {
    o.values = to_vec(e.forward_values(b.ids, b.mask, b.R));
    e.backward_values(b.dlogp);
  } else {
    auto r = e.forward(b.ids, b.mask, b.R, 0.7f, true);
    o.log_probs = to_vec(r.log_probs);
    o.entropy = to_vec(r.entropy);
    o.sum_pi2 = to_vec(e.sum_pi_squared());
    e.backward(b.dlogp, b.dent);
  }
  o.grads.resize(e.layout().size());
  e.gather_grads(o.grads);
  o.norm = e.grad_norm();
  for (int s = 0; s < steps; ++s) {
    if (s > 0) {
      e.zero_grad();
      if (e.config().value_head) {
        e.forward_values(b.ids, b.mask, b.R);
        e.backward_values(b.dlogp);
      } else {
        e.forward(b.ids, b.mask, b.R, 0.7f, true);
        e.backward(b.dlogp, b.dent);
      }
    }
    e.optimizer_step();
  }
  o.weights.resize(e.layout().size());
  e.gather_weights(o.weights);
  auto const p = e.params();
  o.shard.assign(p.begin(), p.end());
  return o;
}

//! Runs the scenario on the N ranks of one TP group (a thread each); returns every rank's outcome.
//! head: the LM head every rank sets first (none: the engine's default).
std::vector<Outcome> on_group(GPTConfig const& cfg, OptimizerConfig const& opt, int N, std::vector<float> const& full,
                              Batch const& b, int steps, std::optional<rlflow::model::LMHead> head = {}) {
  return fixtures::on_ranks(N, [&](int r, rlflow::comm::LocalCommunicator& comm) {
    TrainingEngine e(cfg, opt, TPRank{r, N}, &comm);
    if (head) e.set_lm_head(*head);
    return scenario(e, full, b, steps);
  });
}

//! |a - b| <= tol * max(|b|, 1) element-wise (logits, log-probs, entropies, values: order 1).
void require_close(std::vector<float> const& a, std::vector<float> const& b, double tol) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO("element " << i << ": " << a[i] << " vs " << b[i]);
    REQUIRE(std::abs(double(a[i]) - b[i]) <= tol * std::max(std::abs(double(b[i])), 1.0));
  }
}

//! Per parameter tensor: max |a - b| <= tol * max |b| (relative to the tensor's own scale, so
//! small gradients are held to the same relative accuracy as large ones).
void require_close_tensors(rlflow::model::ParamLayout const& lay, std::vector<float> const& a, std::vector<float> const& b,
                           double tol) {
  REQUIRE(a.size() == lay.size());
  REQUIRE(b.size() == lay.size());
  for (auto const& t : lay.tensors()) {
    double scale = 0, err = 0;
    for (std::size_t i = t.offset; i < t.offset + t.numel; ++i) {
      scale = std::max(scale, std::abs(double(b[i])));
      err = std::max(err, std::abs(double(a[i]) - b[i]));
    }
    INFO(t.name << ": max error " << err << " against max magnitude " << scale);
    REQUIRE(scale > 0);  // every tensor gets a gradient / holds weights: the comparison is not vacuous
    REQUIRE(err <= tol * scale);
  }
}

//! The floats of the full layout that are replicated (not split by TP).
bool replicated(std::string const& name) {
  return !(name.ends_with("c_attn.weight") || name.ends_with("c_attn.bias") || name.ends_with("attn.c_proj.weight") ||
           name.ends_with("c_fc.weight") || name.ends_with("c_fc.bias") || name.ends_with("mlp.c_proj.weight"));
}

}  // namespace

TEST_CASE("training TP = 2 and 4: outputs, gradients and AdamW steps equal TP = 1", "[tp][training]") {
  struct Case {
    int heads, embd;
    bool value_head;
  };
  for (Case const c : {Case{4, 32, false}, Case{8, 32, false}, Case{4, 16, true}}) {
    GPTConfig const cfg = model_cfg(c.heads, c.embd, 11u + unsigned(c.heads), c.value_head);
    auto const full = random_weights(cfg, 100u + unsigned(c.embd));
    Batch const b = random_batch(3, 12, 5, cfg.vocab_size, 7u + unsigned(c.heads));
    OptimizerConfig opt;
    opt.lr = 1e-2f;
    opt.weight_decay = 0.1f;
    opt.max_grad_norm = 0.05f;  // below the gradients' norm: the clip (and so the global norm) matters
    // The key bias's gradient is zero in exact arithmetic (softmax ignores a shift common to all
    // scores), so both runs hold rounding noise there (~1e-9). With torch's eps = 1e-8 AdamW turns
    // that noise into updates of order lr whose sign is a coin toss in either run; eps = 1e-6 keeps
    // noise-level gradients noise-level and leaves every real gradient's update unchanged.
    opt.eps = 1e-6f;
    int const steps = 3;
    TrainingEngine ref_engine(cfg, opt);
    Outcome const ref = scenario(ref_engine, full, b, steps);
    REQUIRE(ref.norm > opt.max_grad_norm);
    rlflow::model::ParamLayout const lay(cfg);
    for (int N : {2, 4}) {
      if (N > cfg.n_head) continue;
      INFO("n_head " << c.heads << ", n_embd " << c.embd << ", value head " << c.value_head << ", TP " << N);
      auto const got = on_group(cfg, opt, N, full, b, steps);
      for (auto const& o : got) {
        require_close(o.logits, ref.logits, 1e-5);
        if (c.value_head) {
          require_close(o.values, ref.values, 1e-5);
        } else {
          require_close(o.log_probs, ref.log_probs, 1e-5);
          require_close(o.entropy, ref.entropy, 1e-5);
        }
        require_close_tensors(lay, o.grads, ref.grads, 1e-5);
        REQUIRE(std::abs(o.norm - ref.norm) <= 1e-5 * ref.norm);
        require_close_tensors(lay, o.weights, ref.weights, 1e-4);
        // the ranks' all-reduces are rank-order sums: every rank sees the same full model
        REQUIRE(o.weights == got[0].weights);
        REQUIRE(o.grads == got[0].grads);
      }
      // each rank's own shard is its slice of the gathered weights, and the replicated tensors
      // are bit-identical across ranks (their gradients are never summed, only kept consistent)
      for (int r = 0; r < N; ++r) {
        rlflow::model::ShardLayout const sl(cfg, TPRank{r, N});
        std::vector<float> slice(sl.size());
        sl.load(got[0].weights, slice);
        REQUIRE(got[std::size_t(r)].shard == slice);
      }
      std::vector<float> w0 = got[0].weights;
      for (auto const& t : lay.tensors())
        if (replicated(t.name))
          for (int r = 1; r < N; ++r)
            for (std::size_t i = t.offset; i < t.offset + t.numel; ++i) REQUIRE(got[std::size_t(r)].weights[i] == w0[i]);
    }
  }
}

TEST_CASE("training TP, vocabulary-parallel LM head: log-probs, entropies, sum pi^2, gradients and AdamW steps equal TP = 1 and the replicated head",
          "[tp][training][vocab_parallel]") {
  using rlflow::model::LMHead;
  struct Case {
    int heads, embd, vocab;
  };
  // V = 13 leaves uneven slices at TP = 2, 4 and 8 (6/7, 3/3/3/4, 1/2/...); V = 37 wider rows
  for (Case const c : {Case{8, 32, 13}, Case{4, 32, 37}}) {
    GPTConfig cfg = model_cfg(c.heads, c.embd, 5u + unsigned(c.vocab));
    cfg.vocab_size = c.vocab;
    auto const full = random_weights(cfg, 300u + unsigned(c.vocab));
    Batch const b = random_batch(4, 12, 6, cfg.vocab_size, 17u + unsigned(c.vocab));
    OptimizerConfig opt;
    opt.lr = 1e-2f;
    opt.weight_decay = 0.1f;
    opt.max_grad_norm = 0.05f;
    opt.eps = 1e-6f;  // as in the case above (the key bias's noise-level gradient)
    int const steps = 3;
    TrainingEngine ref_engine(cfg, opt);
    Outcome const ref = scenario(ref_engine, full, b, steps);
    REQUIRE(ref.norm > opt.max_grad_norm);
    REQUIRE(ref.sum_pi2.size() == ref.log_probs.size());
    rlflow::model::ParamLayout const lay(cfg);
    for (int N : {2, 4, 8}) {
      if (N > cfg.n_head) continue;
      INFO("n_head " << c.heads << ", V " << c.vocab << ", TP " << N);
      auto const vp = on_group(cfg, opt, N, full, b, steps, LMHead::vocab_parallel);
      auto const rp = on_group(cfg, opt, N, full, b, steps, LMHead::replicated);
      for (auto const* got : {&vp, &rp})
        for (auto const& o : *got) {
          require_close(o.logits, ref.logits, 1e-5);
          require_close(o.log_probs, ref.log_probs, 1e-5);
          require_close(o.entropy, ref.entropy, 1e-5);
          require_close(o.sum_pi2, ref.sum_pi2, 1e-5);
          require_close_tensors(lay, o.grads, ref.grads, 1e-5);
          REQUIRE(std::abs(o.norm - ref.norm) <= 1e-5 * ref.norm);
          require_close_tensors(lay, o.weights, ref.weights, 1e-4);
          // rank-order sums, each wte row's gradient on its owner: every rank holds the same model
          REQUIRE(o.weights == (*got)[0].weights);
          REQUIRE(o.grads == (*got)[0].grads);
          REQUIRE(o.log_probs == (*got)[0].log_probs);
          REQUIRE(o.entropy == (*got)[0].entropy);
        }
      // the two heads agree with each other as closely as with TP = 1
      require_close(vp[0].log_probs, rp[0].log_probs, 1e-5);
      require_close(vp[0].entropy, rp[0].entropy, 1e-5);
      require_close_tensors(lay, vp[0].grads, rp[0].grads, 1e-5);
      // every rank's shard is its slice of the gathered weights, with the vocabulary-parallel
      // head wte's own rows only (its zero padding still zero after the AdamW steps), with the
      // replicated head wte whole; the replicated tensors bit-identical on every rank
      int const Vw = (c.vocab + N - 1) / N;
      for (int r = 0; r < N; ++r) {
        for (bool split : {true, false}) {
          rlflow::model::ShardLayout const sl(cfg, TPRank{r, N}, split);
          std::vector<float> slice(sl.size(), 1.0f);
          auto const& got = split ? vp : rp;
          sl.load(got[0].weights, slice);
          REQUIRE(got[std::size_t(r)].shard == slice);
        }
        REQUIRE(rp[std::size_t(r)].shard.size() - vp[std::size_t(r)].shard.size() ==
                std::size_t(c.vocab - Vw) * std::size_t(c.embd));
      }
    }
  }
}

TEST_CASE("training TP, vocabulary-parallel LM head: the default by vocabulary size, the slices, and V < TP refused", "[tp][training][vocab_parallel]") {
  using rlflow::model::LMHead;
  std::vector<std::vector<std::unique_ptr<rlflow::comm::LocalCommunicator>>> comms;
  for (int N = 1; N <= 4; ++N) comms.push_back(rlflow::comm::LocalCommunicator::make_group(N));
  auto make = [&](int V, int N, int r) {
    GPTConfig cfg = model_cfg(4, 16, 3);
    cfg.vocab_size = V;
    return std::make_unique<TrainingEngine>(cfg, OptimizerConfig{}, TPRank{r, N}, comms[std::size_t(N - 1)][std::size_t(r)].get());
  };
  int const big = rlflow::model::training_vocab_parallel_min_vocab;
  // the default follows the vocabulary size (the constructor does not communicate)
  REQUIRE(make(big - 1, 4, 0)->lm_head() == LMHead::replicated);
  REQUIRE(make(big, 4, 0)->lm_head() == LMHead::vocab_parallel);
  {
    GPTConfig cfg = model_cfg(4, 16, 3);
    cfg.vocab_size = big;
    REQUIRE(TrainingEngine(cfg).lm_head() == LMHead::replicated);  // TP = 1: nothing to split
  }
  // the slices tile [0, V) in rank order, uneven ones differing by at most one row
  for (int V : {4, 13, 37, big + 1})
    for (int N : {1, 2, 4}) {
      int prev = 0, lo = V, hi = 0;
      for (int r = 0; r < N; ++r) {
        auto e = make(V, N, r);
        if (N > 1) e->set_lm_head(LMHead::vocab_parallel);
        INFO("V " << V << ", TP " << N << ", rank " << r);
        REQUIRE(e->model().vocab_begin() == prev);
        prev = e->model().vocab_end();
        lo = std::min(lo, e->model().vocab_end() - e->model().vocab_begin());
        hi = std::max(hi, e->model().vocab_end() - e->model().vocab_begin());
      }
      REQUIRE(prev == V);
      REQUIRE(hi - lo <= 1);
      REQUIRE(lo >= 1);
    }
  // fewer vocabulary rows than ranks: refused with the numbers and the fix
  auto e = make(3, 4, 0);
  REQUIRE_THROWS_AS(e->set_lm_head(LMHead::vocab_parallel), rlflow::config_error);
  REQUIRE_THROWS_WITH(e->set_lm_head(LMHead::vocab_parallel),
                      Catch::Contains("vocab_size (3) >= the TP size (4)") && Catch::Contains("LMHead::replicated"));
  REQUIRE(e->lm_head() == LMHead::replicated);
}

TEST_CASE("training TP, vocabulary-parallel LM head: each rank holds its wte rows only, and the head is chosen before training",
          "[tp][training][vocab_parallel]") {
  using rlflow::model::LMHead;
  using rlflow::model::ShardLayout;
  GPTConfig cfg = model_cfg(4, 16, 9);
  cfg.vocab_size = rlflow::model::training_vocab_parallel_min_vocab + 45;  // 301: uneven slices, default vocab_parallel
  int const N = 2, V = cfg.vocab_size, C = cfg.n_embd, Vw = (V + N - 1) / N;
  auto const full = random_weights(cfg, 4242);
  std::vector<float> seeded(rlflow::model::param_count(cfg));
  rlflow::model::init_params(cfg, seeded);
  auto comms = rlflow::comm::LocalCommunicator::make_group(N);
  for (int r = 0; r < N; ++r) {
    INFO("rank " << r);
    ShardLayout const split(cfg, TPRank{r, N}, true), whole(cfg, TPRank{r, N});
    REQUIRE(whole.size() - split.size() == std::size_t(V - Vw) * std::size_t(C));
    TrainingEngine e(cfg, OptimizerConfig{}, TPRank{r, N}, comms[std::size_t(r)].get());
    // the default: parameters, gradients and both AdamW moments hold the split cut
    REQUIRE(e.lm_head() == LMHead::vocab_parallel);
    REQUIRE(e.shard_layout().split_vocab());
    REQUIRE(e.params().size() == split.size());
    REQUIRE(e.grads().size() == split.size());
    REQUIRE(e.optimizer().m().size() == split.size());
    REQUIRE(e.optimizer().v().size() == split.size());
    std::vector<float> want(split.size(), 1.0f);
    split.load(seeded, want);
    REQUIRE(std::vector<float>(e.params().begin(), e.params().end()) == want);
  }
  // a fresh engine takes either head (the seeded weights cut again), both ways
  {
    TrainingEngine e(cfg, OptimizerConfig{}, TPRank{1, N}, comms[1].get());
    e.set_lm_head(LMHead::replicated);
    ShardLayout const whole(cfg, TPRank{1, N});
    std::vector<float> want(whole.size());
    whole.load(seeded, want);
    REQUIRE(e.grads().size() == whole.size());
    REQUIRE(e.optimizer().m().size() == whole.size());
    REQUIRE(std::vector<float>(e.params().begin(), e.params().end()) == want);
    // whole -> split keeps the loaded weights (the rank keeps its rows)
    e.load_weights(full);
    e.set_lm_head(LMHead::vocab_parallel);
    ShardLayout const split(cfg, TPRank{1, N}, true);
    std::vector<float> cut(split.size());
    split.load(full, cut);
    REQUIRE(std::vector<float>(e.params().begin(), e.params().end()) == cut);
    // split -> whole after a load: the other rank's rows are not here
    REQUIRE_THROWS_AS(e.set_lm_head(LMHead::replicated), rlflow::config_error);
    REQUIRE_THROWS_WITH(e.set_lm_head(LMHead::replicated), Catch::Contains("rows [150, 301)") &&
                                                              Catch::Contains("before loading weights"));
    REQUIRE(e.lm_head() == LMHead::vocab_parallel);  // unchanged
    REQUIRE(std::vector<float>(e.params().begin(), e.params().end()) == cut);
  }
  // after an optimizer step the head is fixed, even where the cut could be made
  {
    GPTConfig small = cfg;
    small.vocab_size = 40;  // default replicated
    auto const refused = fixtures::on_ranks(N, [&](int r, rlflow::comm::LocalCommunicator& comm) {
      TrainingEngine e(small, OptimizerConfig{}, TPRank{r, N}, &comm);
      e.optimizer_step();  // zero gradients: a step all the same
      try {
        e.set_lm_head(LMHead::vocab_parallel);
      } catch (rlflow::config_error const& x) {
        return int(std::string(x.what()).find("before the first optimizer step") != std::string::npos &&
                   e.lm_head() == LMHead::replicated);
      }
      return 0;
    });
    REQUIRE(refused == std::vector<int>(static_cast<std::size_t>(N), 1));
  }
}

TEST_CASE("training TP: errors before work", "[tp][training]") {
  GPTConfig const cfg = model_cfg(4, 32, 1);
  auto comms = rlflow::comm::LocalCommunicator::make_group(2);
  // no communicator, or the wrong one
  REQUIRE_THROWS_AS(TrainingEngine(cfg, {}, TPRank{0, 2}, nullptr), rlflow::config_error);
  REQUIRE_THROWS_WITH(TrainingEngine(cfg, {}, TPRank{1, 2}, comms[0].get()),
                      Catch::Contains("TP rank 1 of 2") && Catch::Contains("got size 2, rank 0"));
  // TP does not divide the heads / more ranks than heads
  auto c3 = rlflow::comm::LocalCommunicator::make_group(3);
  REQUIRE_THROWS_WITH(TrainingEngine(cfg, {}, TPRank{0, 3}, c3[0].get()), Catch::Contains("does not divide n_head = 4"));
  auto c8 = rlflow::comm::LocalCommunicator::make_group(8);
  REQUIRE_THROWS_WITH(TrainingEngine(cfg, {}, TPRank{0, 8}, c8[0].get()), Catch::Contains("more ranks than the model's n_head = 4"));
  // a TP = 1 engine through the TP constructor is the plain engine
  TrainingEngine a(cfg, {}, TPRank{}, nullptr), b(cfg);
  REQUIRE(a.params().size() == b.params().size());
  REQUIRE(std::equal(a.params().begin(), a.params().end(), b.params().begin()));
}

namespace {
//! Every tensor (name, dtype, shape, bytes) and the metadata of two safetensors files are equal.
void require_same_file(std::filesystem::path const& a, std::filesystem::path const& b) {
  auto const fa = rlflow::engine::safetensors::File::load(a), fb = rlflow::engine::safetensors::File::load(b);
  REQUIRE(fa.names() == fb.names());
  REQUIRE(fa.metadata() == fb.metadata());
  for (auto const& n : fa.names()) {
    INFO("tensor " << n);
    REQUIRE(fa.info(n).dtype == fb.info(n).dtype);
    REQUIRE(fa.info(n).shape == fb.info(n).shape);
    auto const x = fa.bytes(n), y = fb.bytes(n);
    REQUIRE(std::equal(x.begin(), x.end(), y.begin(), y.end()));
  }
}
}  // namespace

TEST_CASE("training TP checkpoints hold the full model and load at every TP", "[tp][training][checkpoint]") {
  namespace fs = std::filesystem;
  fs::path const dir = fs::temp_directory_path() / ("rlflow_tp_ckpt_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  GPTConfig const cfg = model_cfg(4, 32, 5);
  auto const full = random_weights(cfg, 77);
  Batch const b = random_batch(3, 12, 5, cfg.vocab_size, 9);
  OptimizerConfig opt;
  opt.lr = 1e-2f;
  // the unsharded engine after 2 steps (non-zero moments, step 2) writes the reference file
  TrainingEngine ref(cfg, opt);
  (void)scenario(ref, full, b, 2);
  REQUIRE(ref.step() == 2);
  rlflow::engine::save_checkpoint(dir / "tp1.safetensors", ref);
  std::vector<float> const p(ref.params().begin(), ref.params().end()), m(ref.optimizer().m().begin(), ref.optimizer().m().end()),
      v(ref.optimizer().v().begin(), ref.optimizer().v().end());
  // both cuts: wte whole (the default on this vocabulary), and split by vocabulary rows
  for (auto [N, vp] : {std::pair{2, false}, std::pair{4, false}, std::pair{2, true}, std::pair{4, true}}) {
    INFO("TP " << N << (vp ? ", vocabulary-parallel head (wte split)" : ", replicated head"));
    std::string const tag = std::to_string(N) + (vp ? "_vp" : "");
    fs::path const out = dir / ("tp" + tag + ".safetensors");
    std::vector<std::vector<float>> shards(std::size_t(N) * 3);
    std::vector<std::int64_t> steps(static_cast<std::size_t>(N));
    std::vector<std::vector<float>> gathered0;
    fixtures::on_ranks(N, [&](int r, rlflow::comm::LocalCommunicator& comm) {
      TrainingEngine e(cfg, opt, TPRank{r, N}, &comm);
      if (vp) e.set_lm_head(rlflow::model::LMHead::vocab_parallel);
      rlflow::engine::load_checkpoint(dir / "tp1.safetensors", e);
      steps[std::size_t(r)] = e.step();
      shards[std::size_t(r) * 3].assign(e.params().begin(), e.params().end());
      shards[std::size_t(r) * 3 + 1].assign(e.optimizer().m().begin(), e.optimizer().m().end());
      shards[std::size_t(r) * 3 + 2].assign(e.optimizer().v().begin(), e.optimizer().v().end());
      rlflow::engine::save_checkpoint_gathered(out, e, r == 0);  // a collective; rank 0 writes
      // the last rank writing: not TP rank 0, so every rank gathers (the all-gather path)
      rlflow::engine::save_checkpoint_gathered(dir / ("last_of_tp" + tag + ".safetensors"), e, r == N - 1);
      // the gather to rank 0 directly: rank 0 gets the full state, the others pass empty spans
      std::size_t const n = r == 0 ? e.layout().size() : 0;
      std::vector<float> gp(n), gm(n), gv(n);
      e.gather_state_to_rank0(gp, gm, gv);
      if (r == 0) gathered0 = {gp, gm, gv};
    });
    // each rank holds its slice of the parameters and of both moments, and the step counter
    for (int r = 0; r < N; ++r) {
      rlflow::model::ShardLayout const sl(cfg, TPRank{r, N}, vp);
      std::vector<float> slice(sl.size());
      REQUIRE(steps[std::size_t(r)] == 2);
      sl.load(p, slice);
      REQUIRE(shards[std::size_t(r) * 3] == slice);
      sl.load(m, slice);
      REQUIRE(shards[std::size_t(r) * 3 + 1] == slice);
      sl.load(v, slice);
      REQUIRE(shards[std::size_t(r) * 3 + 2] == slice);
    }
    // load at TP = N, save gathered: the same file as the unsharded engine's (round-trip law)
    require_same_file(out, dir / "tp1.safetensors");
    require_same_file(dir / ("last_of_tp" + tag + ".safetensors"), dir / "tp1.safetensors");
    REQUIRE(gathered0.size() == 3);
    REQUIRE(gathered0[0] == p);
    REQUIRE(gathered0[1] == m);
    REQUIRE(gathered0[2] == v);
  }
  // the TP = 4 files load into an unsharded engine: the same state as the reference
  for (char const* name : {"tp4.safetensors", "tp4_vp.safetensors"}) {
    INFO(name);
    TrainingEngine back(cfg, opt);
    rlflow::engine::load_checkpoint(dir / name, back);
    REQUIRE(std::equal(back.params().begin(), back.params().end(), p.begin(), p.end()));
    REQUIRE(std::equal(back.optimizer().v().begin(), back.optimizer().v().end(), v.begin(), v.end()));
    REQUIRE(back.step() == 2);
  }
  fs::remove_all(dir);
}

TEST_CASE("training TP checkpoints: a shard cannot be saved alone, a bad file leaves the shard untouched", "[tp][training][checkpoint]") {
  namespace fs = std::filesystem;
  fs::path const dir = fs::temp_directory_path() / ("rlflow_tp_ckpt_bad_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  GPTConfig const cfg = model_cfg(4, 32, 5);
  auto comms = rlflow::comm::LocalCommunicator::make_group(2);
  TrainingEngine e(cfg, {}, TPRank{1, 2}, comms[1].get());  // no collective below: one rank is enough
  TrainingEngine const& ce = e;
  REQUIRE_THROWS_WITH(rlflow::engine::save_checkpoint(dir / "x.safetensors", ce),
                      Catch::Contains("rank 1 of 2") && Catch::Contains("save_checkpoint_gathered"));
  REQUIRE(!fs::exists(dir / "x.safetensors"));
  std::vector<float> const before(e.params().begin(), e.params().end());
  // weights only (no moments, no step): the missing field is named
  rlflow::engine::save_weights(dir / "weights.safetensors", cfg, random_weights(cfg, 3));
  REQUIRE_THROWS_WITH(rlflow::engine::load_checkpoint(dir / "weights.safetensors", e),
                      Catch::Contains("weights.safetensors") && Catch::Contains("optimizer.step"));
  // another architecture: the file and the differing config are named
  GPTConfig other = model_cfg(4, 16, 5);
  TrainingEngine small(other);
  rlflow::engine::save_checkpoint(dir / "other.safetensors", small);
  REQUIRE_THROWS_WITH(rlflow::engine::load_checkpoint(dir / "other.safetensors", e),
                      Catch::Contains("other.safetensors") && Catch::Contains("\"n_embd\":16"));
  REQUIRE(std::equal(e.params().begin(), e.params().end(), before.begin(), before.end()));
  fs::remove_all(dir);
}

}  // namespace test_training_tp
