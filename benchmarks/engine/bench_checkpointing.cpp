// benchmarks/engine/bench_checkpointing.cpp: activation checkpointing
// (actor_rollout_ref.model.enable_gradient_checkpointing) in the training engine's update.
//   BM_Update/checkpointing:off|on: one mini-batch of B = 8 rows of T = 192 tokens (64 prompt,
//     128 response), 2 micro-batches of 4 rows, forward + backward of the log-probs and entropy,
//     then AdamW, on a Qwen2-family model of L = 6, C = 256, NH = 4, NKV = 2, F = 768, V = 1024
//     (q/k/v biases, tied head). Same rows, same seed, same threads (1) in both.
//     'activation_bytes': the kept-activation buffer (ActivationLayout of a 4 x 192 micro-batch);
//     'workspace_bytes': it plus the backward scratch, head and logits buffers (model::GPT::
//     workspace_bytes). Time per step is the benchmark's own column.
//     Before timing, the two variants' gradients are checked to be bit-identical.
// Run: ./build/benchmarks/engine/bench_checkpointing
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include <rlflow/engine/training_engine.hpp>

using rlflow::DType;
using rlflow::Shape;
using rlflow::Tensor;
using rlflow::engine::TrainingEngine;
using rlflow::model::GPTConfig;

namespace {

constexpr int kB = 8, kP = 64, kR = 128, kMicro = 4;

GPTConfig bench_config() {
  GPTConfig shape{.vocab_size = 1024, .max_seq_len = kP + kR, .n_layer = 6, .n_head = 4, .n_embd = 256};
  return rlflow::model::builtin_model(shape, rlflow::model::Arch::qwen2);
}

struct Batch {
  std::vector<Tensor> ids, mask, dlogp, dent;
};

Batch full_batch() {
  std::mt19937 g(11);
  std::uniform_int_distribution<int> tok(0, 1023);
  Batch b;
  for (int m = 0; m < kB / kMicro; ++m) {
    Tensor ids = Tensor::empty(DType::int32, Shape{kMicro, kP + kR});
    Tensor am = Tensor::full(Shape{kMicro, kP + kR}, std::int32_t{1});
    Tensor dl = Tensor::full(Shape{kMicro, kR}, -1.0f / float(kB * kR)), de = Tensor::full(Shape{kMicro, kR}, 1e-3f);
    for (auto& x : ids.span<std::int32_t>()) x = tok(g);
    b.ids.push_back(ids), b.mask.push_back(am), b.dlogp.push_back(dl), b.dent.push_back(de);
  }
  return b;
}

void accumulate(TrainingEngine& eng, Batch const& b) {
  eng.zero_grad();
  for (std::size_t m = 0; m < b.ids.size(); ++m) {
    eng.forward(b.ids[m], b.mask[m], kR, 1.0f, true);
    eng.backward(b.dlogp[m], b.dent[m]);
  }
}

void check_same_gradients(Batch const& b) {
  TrainingEngine keep(bench_config()), ckpt(bench_config());
  ckpt.set_gradient_checkpointing(true);
  accumulate(keep, b);
  accumulate(ckpt, b);
  if (std::memcmp(keep.grads().data(), ckpt.grads().data(), keep.grads().size_bytes()) != 0)
    throw std::runtime_error("bench_checkpointing: checkpointed gradients differ from the kept-activation ones");
}

void BM_Update(benchmark::State& state, bool checkpointing) {
  rlflow::model::layers::set_worker_threads(1);
  Batch const b = full_batch();
  static bool checked = false;
  if (!checked) check_same_gradients(b), checked = true;
  TrainingEngine eng(bench_config());
  eng.set_gradient_checkpointing(checkpointing);
  for (auto _ : state) {
    accumulate(eng, b);
    benchmark::DoNotOptimize(eng.optimizer_step());
  }
  state.counters["activation_bytes"] = double(eng.model().activation_bytes());
  state.counters["workspace_bytes"] = double(eng.model().workspace_bytes());
  state.counters["tokens/s"] = benchmark::Counter(double(kB * (kP + kR)), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK_CAPTURE(BM_Update, off, false)->Name("BM_Update/checkpointing:off")->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(4);
BENCHMARK_CAPTURE(BM_Update, on, true)->Name("BM_Update/checkpointing:on")->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(4);

}  // namespace

BENCHMARK_MAIN();
