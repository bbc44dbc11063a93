// tests/model/test_gpt_cuda.cu <-> include/rlflow/kernels/model/gpt_forward.cuh: the CUDA forward
// (cuBLAS + kernels) against the CPU training engine on random weights and padded batches.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>
#include <random>
#include <vector>

#include <rlflow/engine/training_engine.hpp>
#include <rlflow/model/cuda/gpt_forward.cuh>

TEST_CASE("CUDA GPT forward matches the CPU engine", "[model][gpt][cuda]") {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    WARN("no GPU: CUDA GPT forward test skipped");
    return;
  }
  rlflow::model::GPTConfig const cfg{.vocab_size = 37, .max_seq_len = 40, .n_layer = 3, .n_head = 4, .n_embd = 64};
  rlflow::engine::TrainingEngine cpu(cfg);
  std::mt19937 g(1);
  std::normal_distribution<float> d(0.0f, 0.2f);
  for (auto& x : cpu.params()) x += d(g);
  int const B = 5, T = 33, R = 9;
  std::vector<std::int32_t> ids(std::size_t(B) * T), mask(ids.size(), 1);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      ids[std::size_t(b) * T + t] = std::int32_t(g() % 37u);
      if (t < 2 * b) { mask[std::size_t(b) * T + t] = 0; ids[std::size_t(b) * T + t] = 0; }
    }
  rlflow::Tensor tid = rlflow::Tensor::from(ids, rlflow::Shape{B, T}), tm = rlflow::Tensor::from(mask, rlflow::Shape{B, T});
  rlflow::kernels::cuda::model::GPTForward gpu(cfg);
  gpu.load_weights(cpu.params());
  auto ref = cpu.compute_logits(tid, tm);
  std::vector<float> lg(std::size_t(B) * T * 37);
  gpu.logits(ids.data(), mask.data(), B, T, lg.data());
  for (std::size_t i = 0; i < lg.size(); ++i) {
    if (!mask[i / 37]) continue;
    REQUIRE(lg[i] == Approx(ref.span<float>()[i]).margin(1e-4));
  }
  auto lp = cpu.compute_log_prob(tid, tm, R, 0.8f);
  std::vector<float> glp(std::size_t(B) * R), gent(std::size_t(B) * R);
  gpu.log_probs(ids.data(), mask.data(), B, T, R, 0.8f, glp.data(), gent.data());
  for (std::size_t i = 0; i < glp.size(); ++i) {
    REQUIRE(glp[i] == Approx(lp.log_probs.span<float>()[i]).margin(1e-4));
    REQUIRE(gent[i] == Approx(lp.entropy.span<float>()[i]).margin(1e-4));
  }
}
