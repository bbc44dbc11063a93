// tests/model/test_training_cuda.cu <-> include/rlflow/engine/cuda/training_engine.cuh,
// include/rlflow/model/cuda/gpt_backward.cuh: the CUDA training engine against the CPU
// TrainingEngine on random small configs of both families (GPT-2; the Llama family's variants:
// GQA, q/k norm, biases, RoPE scalings, tied and untied heads) and padded batches: logits at every
// position and log-probs and entropy (1e-4), gradients of random per-token loss gradients
// (accumulated over two micro-batches), zero_grad, and AdamW steps (with clipping and a cosine
// schedule) from identical gradients.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <rlflow/engine/training_engine.hpp>
#include <rlflow/engine/cuda/training_engine.cuh>

#include "../fixtures.hpp"  // tiny_llama_config, perturbed_weights

namespace {

bool gpu_present() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

struct Batch {
  rlflow::Tensor ids, mask;
};
Batch random_batch(int B, int P, int R, int V, std::mt19937& g) {
  int const T = P + R;
  std::vector<std::int32_t> ids(std::size_t(B) * T, 0), mask(ids.size(), 0);
  for (int b = 0; b < B; ++b) {
    int const plen = 1 + int(g() % unsigned(P)), rlen = 1 + int(g() % unsigned(R));
    for (int t = P - plen; t < P + rlen; ++t) {
      ids[std::size_t(b) * T + t] = std::int32_t(g() % unsigned(V));
      mask[std::size_t(b) * T + t] = 1;
    }
  }
  return {rlflow::Tensor::from(ids, rlflow::Shape{B, T}), rlflow::Tensor::from(mask, rlflow::Shape{B, T})};
}
rlflow::Tensor random_grad(int B, int R, std::mt19937& g) {
  std::vector<float> v(std::size_t(B) * R);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (auto& x : v) x = d(g);
  return rlflow::Tensor::from(v, rlflow::Shape{B, R});
}
void require_grads_close(std::vector<float> const& gpu, std::span<float const> cpu) {
  REQUIRE(gpu.size() == cpu.size());
  float mx = 0.0f;
  for (float x : cpu) mx = std::max(mx, std::fabs(x));
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    INFO("gradient index " << i << " (max |g| " << mx << ")");
    REQUIRE(std::fabs(gpu[i] - cpu[i]) <= 1e-3f * mx + 1e-3f * std::fabs(cpu[i]));
  }
}

//! The CUDA engine's logits at every position of a padded batch (row b starts with 2 b pads)
//! against the CPU engine's, and its log-probs and entropy at temperature 0.8.
void check_logits_every_position(rlflow::model::GPTConfig const& cfg, rlflow::engine::TrainingEngine& cpu, std::mt19937& g) {
  int const V = cfg.vocab_size;
  int const B = 5, T = 33, R = 9;
  // 'ext' is the same batch with one more real token per row
  std::vector<std::int32_t> ids(std::size_t(B) * T), mask(ids.size(), 1), ext(std::size_t(B) * (T + 1)), ext_mask(ext.size(), 1);
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      ids[std::size_t(b) * T + t] = std::int32_t(g() % unsigned(V));
      if (t < 2 * b) {
        mask[std::size_t(b) * T + t] = 0;
        ids[std::size_t(b) * T + t] = 0;
      }
      ext[std::size_t(b) * (T + 1) + t] = ids[std::size_t(b) * T + t];
      ext_mask[std::size_t(b) * (T + 1) + t] = mask[std::size_t(b) * T + t];
    }
    ext[std::size_t(b) * (T + 1) + T] = std::int32_t(g() % unsigned(V));
  }
  rlflow::Tensor const tid = rlflow::Tensor::from(ids, rlflow::Shape{B, T}), tm = rlflow::Tensor::from(mask, rlflow::Shape{B, T});
  rlflow::engine::cuda::TrainingEngine gpu(cfg);
  gpu.load_weights(cpu.params());
  // logits at positions 0 .. T-1: the head rows of 'ext' with R = T (causal, so the extra token
  // changes none of them); row (b, t) sits at the same flat index as in the CPU's (B, T, V)
  rlflow::Tensor const ref = cpu.compute_logits(tid, tm);
  gpu.forward(rlflow::Tensor::from(ext, rlflow::Shape{B, T + 1}), rlflow::Tensor::from(ext_mask, rlflow::Shape{B, T + 1}), T, 1.0f,
              false);
  std::vector<float> lg(std::size_t(B) * T * V);
  REQUIRE(cudaMemcpy(lg.data(), gpu.device_logits(), lg.size() * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
  auto const rl = ref.span<float>();
  for (std::size_t i = 0; i < lg.size(); ++i) {
    if (!mask[i / std::size_t(V)]) continue;
    INFO("logit " << i);
    REQUIRE(lg[i] == Approx(rl[i]).margin(1e-4));
  }
  auto const lp = cpu.compute_log_prob(tid, tm, R, 0.8f);
  auto const glp = gpu.compute_log_prob(tid, tm, R, 0.8f);
  auto const cl = lp.log_probs.span<float>(), ce = lp.entropy.span<float>();
  auto const gl = glp.log_probs.span<float>(), ge = glp.entropy.span<float>();
  REQUIRE(gl.size() == cl.size());
  for (std::size_t i = 0; i < gl.size(); ++i) {
    REQUIRE(gl[i] == Approx(cl[i]).margin(1e-4));
    REQUIRE(ge[i] == Approx(ce[i]).margin(1e-4));
  }
}

//! Two micro-batches of forward + backward (the first with an entropy term) on both engines:
//! log-probs, entropy and the accumulated gradients agree; then zero_grad.
void check_forward_backward(rlflow::model::GPTConfig const& cfg, rlflow::engine::TrainingEngine& cpu, std::mt19937& g, float temp) {
  int const B = 1 + int(g() % 4u), P = 2 + int(g() % 8u), R = 1 + int(g() % 8u), V = cfg.vocab_size;
  INFO("V " << V << " L " << cfg.n_layer << " NH " << cfg.n_head << " C " << cfg.n_embd << " B " << B << " P " << P << " R " << R);
  rlflow::engine::cuda::TrainingEngine gpu(cfg);
  gpu.load_weights(cpu.params());
  for (int micro = 0; micro < 2; ++micro) {  // two micro-batches: gradients accumulate
    auto bt = random_batch(B, P, R, V, g);
    auto dlp = random_grad(B, R, g), dent = random_grad(B, R, g);
    rlflow::Tensor none;
    rlflow::Tensor const& de = micro == 0 ? dent : none;  // the second one without an entropy term
    auto rc = cpu.forward_backward(bt.ids, bt.mask, R, dlp, de, temp);
    auto rg = gpu.forward(bt.ids, bt.mask, R, temp, true);
    for (std::size_t i = 0; i < std::size_t(B) * R; ++i) {
      REQUIRE(rg.log_probs.span<float>()[i] == Approx(rc.log_probs.span<float>()[i]).epsilon(1e-4).margin(1e-4));
      if (micro == 0) REQUIRE(rg.entropy.span<float>()[i] == Approx(rc.entropy.span<float>()[i]).epsilon(1e-4).margin(1e-4));
    }
    gpu.backward(dlp, de);
    require_grads_close(gpu.grads(), cpu.grads());
  }
  REQUIRE_THROWS_AS(gpu.backward(random_grad(B, R, g)), rlflow::value_error);  // no pending forward
  gpu.zero_grad();
  for (float x : gpu.grads()) REQUIRE(x == 0.0f);
}

}  // namespace

TEST_CASE("CUDA training engine logits and log-probs match the CPU engine at every position", "[model][training][cuda]") {
  if (!gpu_present()) {
    WARN("no GPU: CUDA training engine test skipped");
    return;
  }
  rlflow::model::GPTConfig cfg;
  cfg.vocab_size = 37;
  cfg.max_seq_len = 40;
  cfg.n_layer = 3;
  cfg.n_head = 4;
  cfg.n_embd = 64;
  rlflow::engine::TrainingEngine cpu(cfg);
  std::mt19937 g(1);
  std::normal_distribution<float> d(0.0f, 0.2f);
  for (auto& x : cpu.params()) x += d(g);
  check_logits_every_position(cfg, cpu, g);
}

TEST_CASE("CUDA training engine forward and backward match the CPU engine", "[model][training][cuda]") {
  if (!gpu_present()) {
    WARN("no GPU: CUDA training engine test skipped");
    return;
  }
  std::mt19937 g(3);
  for (int trial = 0; trial < 4; ++trial) {
    int const vocab = 20 + int(g() % 50u), layers = 1 + int(g() % 3u), heads = 1 << (g() % 3u);  // drawn in this order
    rlflow::model::GPTConfig const cfg{.vocab_size = vocab, .max_seq_len = 40, .n_layer = layers, .n_head = heads,
                                       .n_embd = heads * 8 * (1 + int(g() % 3u)), .seed = g()};
    INFO("trial " << trial);
    rlflow::engine::TrainingEngine cpu(cfg);
    std::normal_distribution<float> d(0.0f, 0.1f);
    for (auto& x : cpu.params()) x += d(g);
    check_forward_backward(cfg, cpu, g, trial % 2 ? 0.7f : 1.0f);
  }
}

TEST_CASE("CUDA training engine runs the Llama family as the CPU engine: logits, log-probs, gradients, AdamW",
          "[model][training][cuda][llama]") {
  if (!gpu_present()) {
    WARN("no GPU: CUDA training engine test skipped");
    return;
  }
  std::mt19937 g(37);
  int variant = 0;
  fixtures::for_each_tiny_llama(13, 60, [&](rlflow::model::GPTConfig const& cfg, std::vector<float> const& w) {
    INFO(fixtures::describe(cfg));
    rlflow::engine::OptimizerConfig opt;
    opt.lr = 1e-2f;
    opt.weight_decay = 0.1f;
    rlflow::engine::TrainingEngine cpu(cfg, opt);
    std::copy(w.begin(), w.end(), cpu.params().begin());
    check_logits_every_position(cfg, cpu, g);
    check_forward_backward(cfg, cpu, g, variant++ % 2 ? 0.7f : 1.0f);
    // one AdamW step from the CPU's gradients: the decay mask follows the family's layout
    rlflow::engine::cuda::TrainingEngine gpu(cfg, opt);
    gpu.load_weights(cpu.params());
    gpu.set_grads(cpu.grads());
    REQUIRE(gpu.optimizer_step() == Approx(cpu.optimizer_step()).epsilon(1e-6));
    auto const pg = gpu.params();
    auto const pc = cpu.params();
    for (std::size_t i = 0; i < pc.size(); ++i) REQUIRE(pg[i] == Approx(pc[i]).epsilon(1e-5).margin(1e-6));
  });
}

TEST_CASE("CUDA packed sequences (use_remove_padding) equal the CPU engine's: log-probs, sum_pi_squared, gradients",
          "[model][training][cuda][packing]") {
  if (!gpu_present()) {
    WARN("no GPU: CUDA training engine test skipped");
    return;
  }
  std::mt19937 g(41);
  std::vector<rlflow::model::GPTConfig> cfgs{
      {.vocab_size = 29, .max_seq_len = 40, .n_layer = 2, .n_head = 2, .n_embd = 16, .seed = 5},
      fixtures::tiny_llama_config(rlflow::model::Arch::qwen3, 1, 6), fixtures::tiny_llama_config(rlflow::model::Arch::llama, 2, 7)};
  for (auto const& cfg : cfgs) {
    INFO("arch " << rlflow::model::arch_name(cfg.arch));
    rlflow::engine::TrainingEngine cpu(cfg);
    auto const w = fixtures::perturbed_weights(cfg, 70, 0.2f);
    std::copy(w.begin(), w.end(), cpu.params().begin());
    cpu.set_remove_padding(true);
    rlflow::engine::cuda::TrainingEngine gpu(cfg);
    gpu.load_weights(cpu.params());
    gpu.set_remove_padding(true);
    REQUIRE(gpu.remove_padding());
    for (int micro = 0; micro < 3; ++micro) {
      int const B = 2 + int(g() % 4u), P = 3 + int(g() % 8u), R = 2 + int(g() % 8u);
      INFO("micro " << micro << " B " << B << " P " << P << " R " << R);
      auto bt = random_batch(B, P, R, cfg.vocab_size, g);
      if (micro == 2) {  // a row with no real response token (no score), and a row of padding only
        for (int j = 0; j < R; ++j) bt.mask.data<std::int32_t>()[std::size_t(P + j)] = 0;
        for (int t = 0; t < P + R; ++t) bt.mask.data<std::int32_t>()[std::size_t(P + R + t)] = 0;
      }
      auto dlp = random_grad(B, R, g), dent = random_grad(B, R, g);
      float const temp = micro == 1 ? 0.7f : 1.0f;
      auto rc = cpu.forward(bt.ids, bt.mask, R, temp, true);
      auto rg = gpu.forward(bt.ids, bt.mask, R, temp, true);
      auto const cl = rc.log_probs.span<float>(), gl = rg.log_probs.span<float>();
      auto const ce = rc.entropy.span<float>(), ge = rg.entropy.span<float>();
      for (std::size_t i = 0; i < cl.size(); ++i) {
        INFO("column " << i);
        REQUIRE(gl[i] == Approx(cl[i]).epsilon(1e-4).margin(1e-4));
        REQUIRE(ge[i] == Approx(ce[i]).epsilon(1e-4).margin(1e-4));
        if (cl[i] == 0.0f) REQUIRE(gl[i] == 0.0f);  // unscored columns are 0 on both
      }
      // the device columns the trainer's loss kernels read hold the same values
      std::vector<float> dev(cl.size()), dev_ent(cl.size());
      REQUIRE(cudaMemcpy(dev.data(), gpu.device_log_probs(), dev.size() * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
      REQUIRE(cudaMemcpy(dev_ent.data(), gpu.device_entropy(), dev.size() * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
      for (std::size_t i = 0; i < dev.size(); ++i) {
        REQUIRE(dev[i] == gl[i]);
        REQUIRE(dev_ent[i] == ge[i]);
      }
      auto const qc = cpu.sum_pi_squared(), qg = gpu.sum_pi_squared();
      for (std::size_t i = 0; i < cl.size(); ++i) REQUIRE(qg.span<float>()[i] == Approx(qc.span<float>()[i]).epsilon(1e-4).margin(1e-6));
      cpu.backward(dlp, dent);
      if (micro == 0) {  // through the device columns, as the trainer does
        float* d = nullptr;
        std::size_t const BR = std::size_t(B) * R;
        REQUIRE(cudaMalloc(&d, 2 * BR * sizeof(float)) == cudaSuccess);
        REQUIRE(cudaMemcpy(d, dlp.data<float>(), BR * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
        REQUIRE(cudaMemcpy(d + BR, dent.data<float>(), BR * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
        REQUIRE(cudaDeviceSynchronize() == cudaSuccess);  // the engine reads them on its own stream
        gpu.backward_device(d, d + BR);
        cudaFree(d);
      } else {
        gpu.backward(dlp, dent);
      }
      require_grads_close(gpu.grads(), cpu.grads());
    }
    // an all-padding batch scores nothing: zeros, and a backward that adds nothing
    auto bt = random_batch(2, 4, 3, cfg.vocab_size, g);
    for (auto& m : bt.mask.span<std::int32_t>()) m = 0;
    auto const before = gpu.grads();
    auto const r0 = gpu.forward(bt.ids, bt.mask, 3, 1.0f, true);
    for (float x : r0.log_probs.span<float>()) REQUIRE(x == 0.0f);
    gpu.backward(random_grad(2, 3, g));
    REQUIRE(gpu.grads() == before);
    // switching the mode drops a pending forward: its rows no longer match the columns
    auto bt2 = random_batch(2, 4, 3, cfg.vocab_size, g);
    gpu.forward(bt2.ids, bt2.mask, 3, 1.0f, true);
    gpu.set_remove_padding(false);
    REQUIRE_THROWS_AS(gpu.backward(random_grad(2, 3, g)), rlflow::value_error);
    REQUIRE_THROWS_AS(gpu.sum_pi_squared(), rlflow::value_error);
  }
}

TEST_CASE("CUDA sum_pi_squared equals the CPU engine's", "[model][training][cuda][otb]") {
  if (!gpu_present()) {
    WARN("no GPU: CUDA sum_pi_squared test skipped");
    return;
  }
  std::mt19937 g(19);
  for (int trial = 0; trial < 4; ++trial) {
    rlflow::model::GPTConfig const cfg{.vocab_size = 20 + int(g() % 300u), .max_seq_len = 40, .n_layer = 1 + int(g() % 2u),
                                       .n_head = 2, .n_embd = 16, .seed = g()};  // initializers run in order: the draws too
    int const B = 1 + int(g() % 4u), P = 2 + int(g() % 8u), R = 1 + int(g() % 8u);
    INFO("trial " << trial << " V " << cfg.vocab_size << " B " << B << " P " << P << " R " << R);
    rlflow::engine::TrainingEngine cpu(cfg);
    std::normal_distribution<float> d(0.0f, 0.3f);
    for (auto& x : cpu.params()) x += d(g);
    rlflow::engine::cuda::TrainingEngine gpu(cfg);
    gpu.load_weights(cpu.params());
    REQUIRE_THROWS_AS(gpu.sum_pi_squared(), rlflow::value_error);  // nothing scored yet
    float const temp = trial % 2 ? 0.6f : 1.0f;
    auto bt = random_batch(B, P, R, cfg.vocab_size, g);
    cpu.compute_log_prob(bt.ids, bt.mask, R, temp, false);
    gpu.compute_log_prob(bt.ids, bt.mask, R, temp, false);
    auto const c = cpu.sum_pi_squared(), q = gpu.sum_pi_squared();
    REQUIRE(q.dim(0) == B);
    REQUIRE(q.dim(1) == R);
    for (std::size_t i = 0; i < std::size_t(B) * R; ++i)
      REQUIRE(q.span<float>()[i] == Approx(c.span<float>()[i]).epsilon(1e-4).margin(1e-6));
  }
}

TEST_CASE("CUDA training engine AdamW steps equal the CPU optimizer's", "[model][training][cuda]") {
  if (!gpu_present()) {
    WARN("no GPU: CUDA AdamW test skipped");
    return;
  }
  std::mt19937 g(9);
  rlflow::model::GPTConfig const cfg{.vocab_size = 31, .max_seq_len = 24, .n_layer = 2, .n_head = 2, .n_embd = 32};
  rlflow::engine::OptimizerConfig opt;
  opt.lr = 1e-2f;
  opt.weight_decay = 0.1f;
  opt.max_grad_norm = 0.5f;
  opt.schedule = rlflow::engine::LRSchedule::warmup_cosine;
  opt.warmup_steps = 1;
  opt.total_steps = 6;
  rlflow::engine::TrainingEngine cpu(cfg, opt);
  rlflow::engine::cuda::TrainingEngine gpu(cfg, opt);
  gpu.load_weights(cpu.params());
  std::normal_distribution<float> d(0.0f, 0.2f);
  for (int step = 0; step < 4; ++step) {
    for (auto& x : cpu.grads()) x = d(g) * (step == 2 ? 0.001f : 1.0f);  // step 2: below the clip
    gpu.set_grads(cpu.grads());
    REQUIRE(gpu.lr() == cpu.lr());
    float const nc = cpu.optimizer_step();
    float const ng = gpu.optimizer_step();
    REQUIRE(ng == Approx(nc).epsilon(1e-6));
    REQUIRE(gpu.step() == cpu.step());
    auto pg = gpu.params();
    auto pc = cpu.params();
    auto mg = gpu.exp_avg(), vg = gpu.exp_avg_sq();
    auto mc = cpu.optimizer().m(), vc = cpu.optimizer().v();
    for (std::size_t i = 0; i < pc.size(); ++i) {
      REQUIRE(pg[i] == Approx(pc[i]).epsilon(1e-5).margin(1e-6));
      REQUIRE(mg[i] == Approx(mc[i]).epsilon(1e-5).margin(1e-9));
      REQUIRE(vg[i] == Approx(vc[i]).epsilon(1e-5).margin(1e-12));
    }
  }
}
