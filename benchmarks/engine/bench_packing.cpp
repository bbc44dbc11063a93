// benchmarks/engine/bench_packing.cpp: packed sequences (actor_rollout_ref.model.use_remove_padding)
// in the training engine's update.
//   BM_Update/packing:off|on: one mini-batch of B = 32 rows of [prompt (8..32 tokens, left-padded
//     to 32) | response (heavy-tailed: lognormal lengths, median about 24 tokens, clamped to 224)],
//     4 micro-batches of 8 rows, forward + backward of the log-probs and entropy, then AdamW, on a
//     GPT-2 of L = 4, C = 256, NH = 4, V = 512. Same rows, same seed, same threads (1) in both;
//     'tokens/s' counts the real (unpadded) tokens, so the ratio of the two rates is the speed-up.
//     Before timing, both variants' log-probs are checked to agree at the scored tokens.
// Run: ./build/benchmarks/engine/bench_packing --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
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

constexpr int kB = 32, kP = 32, kR = 224, kMicro = 8;

GPTConfig bench_config() { return {.vocab_size = 512, .max_seq_len = kP + kR, .n_layer = 4, .n_head = 4, .n_embd = 256}; }

struct Batch {
  std::vector<Tensor> ids, mask, dlogp, dent;
  double real_tokens = 0;
};

Batch heavy_tailed_batch() {
  std::mt19937 g(7);
  std::uniform_int_distribution<int> tok(0, 511), plen(8, kP);
  std::lognormal_distribution<double> rlen(std::log(24.0), 1.0);
  Batch b;
  for (int m = 0; m < kB / kMicro; ++m) {
    Tensor ids = Tensor::empty(DType::int32, Shape{kMicro, kP + kR}), am = Tensor::zeros(DType::int32, Shape{kMicro, kP + kR});
    Tensor dl = Tensor::zeros(DType::float32, Shape{kMicro, kR}), de = Tensor::zeros(DType::float32, Shape{kMicro, kR});
    for (int i = 0; i < kMicro; ++i) {
      int const pl = plen(g), rl = std::clamp(int(rlen(g)), 1, kR);
      for (int t = 0; t < kP + kR; ++t) {
        ids.at<std::int32_t>(i, t) = tok(g);
        bool const real = (t < kP && t >= kP - pl) || (t >= kP && t < kP + rl);
        am.at<std::int32_t>(i, t) = real;
        b.real_tokens += real;
      }
      for (int j = 0; j < rl; ++j) dl.at<float>(i, j) = -1.0f / float(kB * 24), de.at<float>(i, j) = 1e-3f;
    }
    b.ids.push_back(ids), b.mask.push_back(am), b.dlogp.push_back(dl), b.dent.push_back(de);
  }
  return b;
}

void check_same_log_probs(Batch const& b) {
  TrainingEngine padded(bench_config()), packed(bench_config());
  packed.set_remove_padding(true);
  auto const x = padded.forward(b.ids[0], b.mask[0], kR);
  auto const y = packed.forward(b.ids[0], b.mask[0], kR);
  for (int i = 0; i < kMicro; ++i)
    for (int j = 0; j < kR; ++j)
      if (b.mask[0].at<std::int32_t>(i, kP + j) &&
          std::fabs(x.log_probs.at<float>(i, j) - y.log_probs.at<float>(i, j)) > 1e-4f * std::max(1.0f, std::fabs(x.log_probs.at<float>(i, j))))
        throw std::runtime_error("bench_packing: packed and padded log-probs differ");
}

void BM_Update(benchmark::State& state, bool packing) {
  rlflow::model::layers::set_worker_threads(1);
  Batch const b = heavy_tailed_batch();
  static bool checked = false;
  if (!checked) check_same_log_probs(b), checked = true;
  TrainingEngine eng(bench_config());
  eng.set_remove_padding(packing);
  for (auto _ : state) {
    eng.zero_grad();
    for (std::size_t m = 0; m < b.ids.size(); ++m) {
      eng.forward(b.ids[m], b.mask[m], kR, 1.0f, true);
      eng.backward(b.dlogp[m], b.dent[m]);
    }
    benchmark::DoNotOptimize(eng.optimizer_step());
  }
  state.counters["tokens/s"] = benchmark::Counter(b.real_tokens, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["real_share"] = b.real_tokens / double(kB * (kP + kR));
}
BENCHMARK_CAPTURE(BM_Update, off, false)->Name("BM_Update/packing:off")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Update, on, true)->Name("BM_Update/packing:on")->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
