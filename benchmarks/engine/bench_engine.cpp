// benchmarks/engine/bench_engine.cpp: the built-in GPT's engines on the CPU.
//   BM_RolloutDecode/kv_cache vs BM_RolloutDecode/recompute: B = 64 prompts, 64 new tokens; the
//     recompute variant re-runs the whole sequence per token (llm.c's generation); both first
//     check that they produce the same tokens.
//   BM_TrainStep: forward + backward + AdamW on the demo-sized model; reports tokens/s.
//   BM_ModelForward vs BM_SgemmSameShapes: the trunk forward's FLOP/s next to OpenBLAS sgemm
//     FLOP/s on exactly the forward's matrix products, in the same run.
//   BM_ModelBackward vs BM_SgemmBackwardShapes: the same for the backward (trunk + LM head on
//     every position), against the sgemm calls of its products.
//   BM_RolloutDecode/tp:N (N = 1, 2, 4): tokens/s of generate on a model with 8 heads and the
//     same total threads (4): 4 / N replicas of N tensor-parallel ranks, one thread per rank,
//     each replica on its share of the B = 64 prompts (so tp:1 is 4 data-parallel engines).
//   BM_WeightSync/tp:N: bytes/s of the resharding weight sync (the ranks of one replica copy their
//     split tensors and 1/N each of the replica's one shared copy of the replicated tensors;
//     ranks 1..N-1 on persistent threads, released by a barrier; BM_WeightSyncPrivate/tp:N: every
//     rank copies its whole shard, replicated tensors included; BM_WeightSyncFromShard/tp:N: each
//     rank loads from its training shard, as with training TP = rollout TP)
//     and, timed in the same iterations,
//     a memcpy of the same number of bytes: counter 'vs_memcpy' = memcpy time / sync time; a
//     fence-only round (release, join): 'fence_share' = fence time / sync time; and (shared, tp >= 2)
//     the same load and a second TP barrier (the session-4 sync): 'barriers_vs_memcpy'.
//   BM_CheckpointSave/tp:N: a training-TP group of N ranks saves its checkpoint (gather of the
//     weights and both AdamW moments to rank 0, which writes the full-model file; one thread per
//     rank, started each iteration) and, in the same iterations, the unsharded engine saves the
//     same file: counter 'vs_tp1' = unsharded time / gathered time (1: gathering costs nothing);
//     and the same group saving with its last rank writing (every rank all-gathers the full
//     state: the all-gather save): 'allgather_vs_gather' = that time / the gather-to-rank-0 time.
//   BM_LMHead/tp:N/vocab:V: one replica's generate with the vocabulary-parallel LM head (manual
//     time) and, in the same iterations, with the replicated head: counter 'vs_replicated' =
//     replicated time / vocabulary-parallel time (> 1: vocabulary-parallel is faster).
//   BM_TrainLMHead/tp:N/vocab:V: one training-TP group's forward + backward (log-probs, entropy,
//     their gradients) with the vocabulary-parallel LM head (manual time) and, in the same
//     iterations, with the replicated head: counter 'vs_replicated' as for BM_LMHead.
// Run: ./build/benchmarks/engine/bench_engine --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <cblas.h>
#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <rlflow/engine/checkpoint.hpp>
#include <rlflow/engine/rollout_engine.hpp>
#include <rlflow/engine/training_engine.hpp>

using rlflow::Shape;
using rlflow::Tensor;
using namespace rlflow::engine;
using rlflow::model::GPTConfig;

namespace {

GPTConfig decode_config() { return {.vocab_size = 64, .max_seq_len = 80, .n_layer = 2, .n_head = 4, .n_embd = 64, .seed = 1}; }

struct Prompts {
  Tensor ids, mask;
  std::vector<std::uint64_t> seeds;
};
Prompts make_prompts(int B, int P, int V) {
  std::mt19937 g(1);
  std::vector<std::int32_t> ids(std::size_t(B) * P), mask(std::size_t(B) * P, 1);
  for (auto& x : ids) x = std::int32_t(3 + g() % unsigned(V - 3));
  Prompts p{Tensor::from(ids, Shape{B, P}), Tensor::from(mask, Shape{B, P}), {}};
  for (int b = 0; b < B; ++b) p.seeds.push_back(std::uint64_t(b) + 1);
  return p;
}

void BM_RolloutDecode(benchmark::State& state, bool kv_cache) {
  GPTConfig const cfg = decode_config();
  int const B = 64, P = 8, R = 64;
  Prompts const p = make_prompts(B, P, cfg.vocab_size);
  RolloutEngine ro(cfg);
  SamplingParams sp;
  sp.max_new_tokens = R;  // no EOS: every row runs all 64 steps
  ro.set_use_kv_cache(true);
  auto const ref = ro.generate(p.ids, p.mask, sp, p.seeds);
  ro.set_use_kv_cache(kv_cache);
  if (!bit_equal(ro.generate(p.ids, p.mask, sp, p.seeds).responses, ref.responses)) {
    state.SkipWithError("kv_cache and recompute disagree");
    return;
  }
  for (auto _ : state) {
    auto r = ro.generate(p.ids, p.mask, sp, p.seeds);
    benchmark::DoNotOptimize(r.log_probs.data<float>());
  }
  state.counters["tokens/s"] = benchmark::Counter(double(B) * R, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(kv_cache ? "B=64 P=8 R=64 L=2 C=64" : "B=64 P=8 R=64 L=2 C=64, full forward per token");
}
BENCHMARK_CAPTURE(BM_RolloutDecode, kv_cache, true)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_RolloutDecode, recompute, false)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_TrainStep(benchmark::State& state) {
  GPTConfig const c{.vocab_size = 32, .max_seq_len = 32, .n_layer = 2, .n_head = 4, .n_embd = 64};  // the demo's model size
  int const B = int(state.range(0)), T = 24, R = 12;
  TrainingEngine eng(c);
  std::mt19937 g(2);
  std::vector<std::int32_t> ids(std::size_t(B) * T), mask(std::size_t(B) * T, 1);
  for (auto& x : ids) x = std::int32_t(g() % 32u);
  std::vector<float> d(std::size_t(B) * R, -1.0f / float(B * R));
  Tensor tid = Tensor::from(ids, Shape{B, T}), tm = Tensor::from(mask, Shape{B, T}), dl = Tensor::from(d, Shape{B, R});
  for (auto _ : state) {
    eng.zero_grad();
    eng.forward_backward(tid, tm, R, dl);
    benchmark::DoNotOptimize(eng.optimizer_step());
  }
  state.counters["tokens/s"] = benchmark::Counter(double(B) * T, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel("V=32 L=2 NH=4 C=64 T=24");
}
BENCHMARK(BM_TrainStep)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond)->UseRealTime();

// the forward's matrix products: per layer qkv (N,C)x(3C,C)^T, proj (N,C)x(C,C), fc (N,C)x(4C,C)^T,
// fcproj (N,4C)x(4C,C): 24 N C^2 FLOPs per layer
constexpr int fwd_B = 16, fwd_T = 64;
GPTConfig forward_config() { return {.vocab_size = 64, .max_seq_len = fwd_T, .n_layer = 4, .n_head = 4, .n_embd = 256}; }
double forward_matmul_flops(GPTConfig const& c) {
  double const N = double(fwd_B) * fwd_T, C = c.n_embd;
  return 24.0 * N * C * C * c.n_layer;
}

void BM_ModelForward(benchmark::State& state) {
  GPTConfig const c = forward_config();
  rlflow::model::GPT model(c);
  std::mt19937 g(3);
  std::vector<std::int32_t> ids(std::size_t(fwd_B) * fwd_T), mask(ids.size(), 1);
  for (auto& x : ids) x = std::int32_t(g() % 64u);
  for (auto _ : state) {
    model.forward(ids.data(), mask.data(), fwd_B, fwd_T);
    benchmark::ClobberMemory();
  }
  state.counters["FLOP/s"] = benchmark::Counter(forward_matmul_flops(c), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel("trunk forward B=16 T=64 L=4 C=256 (FLOPs counted: matmuls only)");
}
BENCHMARK(BM_ModelForward)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_SgemmSameShapes(benchmark::State& state) {
  GPTConfig const c = forward_config();
  int const N = fwd_B * fwd_T, C = c.n_embd;
  std::vector<float> x(std::size_t(N) * 4 * C, 0.01f), w(std::size_t(4) * C * C, 0.02f), y(std::size_t(N) * 4 * C);
  for (auto _ : state) {
    for (int l = 0; l < c.n_layer; ++l) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, 3 * C, C, 1.0f, x.data(), C, w.data(), C, 1.0f, y.data(), 3 * C);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, C, 1.0f, x.data(), C, w.data(), C, 1.0f, y.data(), C);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, 4 * C, C, 1.0f, x.data(), C, w.data(), C, 1.0f, y.data(), 4 * C);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, 4 * C, 1.0f, x.data(), 4 * C, w.data(), C, 1.0f, y.data(), C);
    }
    benchmark::ClobberMemory();
  }
  state.counters["FLOP/s"] = benchmark::Counter(forward_matmul_flops(c), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel("the same sgemm calls alone");
}
BENCHMARK(BM_SgemmSameShapes)->Unit(benchmark::kMillisecond)->UseRealTime();

// The backward of the same model over every position (select_rows(0, T), the LM head on all
// rows): per layer dinp and dW of qkv, proj, fc and fcproj (48 N C^2 FLOPs) plus the head's two
// products (4 N C V); BM_SgemmBackwardShapes runs exactly those sgemm calls alone.
double backward_matmul_flops(GPTConfig const& c) {
  double const N = double(fwd_B) * fwd_T, C = c.n_embd, V = c.vocab_size;
  return 48.0 * N * C * C * c.n_layer + 4.0 * N * C * V;
}

void BM_ModelBackward(benchmark::State& state) {
  GPTConfig const c = forward_config();
  rlflow::model::GPT model(c);
  std::mt19937 g(3);
  std::vector<std::int32_t> ids(std::size_t(fwd_B) * fwd_T), mask(ids.size(), 1);
  for (auto& x : ids) x = std::int32_t(g() % 64u);
  std::vector<float> lp(ids.size()), ent(ids.size()), dlp(ids.size(), -1.0f / float(ids.size())), dent(ids.size(), 0.0f);
  std::vector<float> grads(model.params().size(), 0.0f);
  model.forward(ids.data(), mask.data(), fwd_B, fwd_T);
  model.select_rows(0, fwd_T);
  model.logprob_forward(ids.data(), 1.0f, lp.data(), ent.data());
  for (auto _ : state) {
    model.logprob_backward(dlp.data(), dent.data(), std::span<float>(grads));
    benchmark::ClobberMemory();
  }
  state.counters["FLOP/s"] = benchmark::Counter(backward_matmul_flops(c), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel("trunk + head backward B=16 T=64 L=4 C=256 V=64 (FLOPs counted: matmuls only)");
}
BENCHMARK(BM_ModelBackward)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_SgemmBackwardShapes(benchmark::State& state) {
  GPTConfig const c = forward_config();
  int const N = fwd_B * fwd_T, C = c.n_embd, V = c.vocab_size;
  std::vector<float> a(std::size_t(N) * 4 * C, 0.01f), w(std::size_t(4) * C * C, 0.02f), o(std::size_t(N) * 4 * C),
      dw(std::size_t(4) * C * C);
  auto nt = [&](int K, int Nout) {  // linear_nt_backward: dinp (N,K) = dout (N,Nout) W (Nout,K); dW += dout^T inp
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, K, Nout, 1.0f, a.data(), Nout, w.data(), K, 0.0f, o.data(), K);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Nout, K, N, 1.0f, a.data(), Nout, a.data(), K, 1.0f, dw.data(), K);
  };
  auto nn = [&](int K, int Nout) {  // linear_nn_backward: dinp = dout W^T; dW (K,Nout) += inp^T dout
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, K, Nout, 1.0f, a.data(), Nout, w.data(), Nout, 0.0f, o.data(), K);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, Nout, N, 1.0f, a.data(), K, a.data(), Nout, 1.0f, dw.data(), Nout);
  };
  for (auto _ : state) {
    nt(C, V);  // the tied LM head
    for (int l = 0; l < c.n_layer; ++l) {
      nn(4 * C, C);
      nt(C, 4 * C);
      nn(C, C);
      nt(C, 3 * C);
    }
    benchmark::ClobberMemory();
  }
  state.counters["FLOP/s"] = benchmark::Counter(backward_matmul_flops(c), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel("the same sgemm calls alone");
}
BENCHMARK(BM_SgemmBackwardShapes)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();

// ---- tensor parallel -------------------------------------------------------------------------

namespace {

GPTConfig tp_config() {
  GPTConfig c = decode_config();
  c.n_head = 8;
  return c;
}

//! 4 / N replicas of N ranks (one thread each) generate their share of the batch.
void BM_RolloutDecodeTP(benchmark::State& state) {
  int const N = int(state.range(0)), threads = 4, replicas = threads / N;
  GPTConfig const cfg = tp_config();
  int const B = 64, P = 8, R = 64, Bq = B / replicas;
  std::vector<float> full(rlflow::model::param_count(cfg));
  rlflow::model::init_params(cfg, full);
  std::vector<Prompts> parts;
  for (int q = 0; q < replicas; ++q) parts.push_back(make_prompts(Bq, P, cfg.vocab_size));
  std::vector<std::vector<std::unique_ptr<rlflow::comm::LocalCommunicator>>> comms;
  std::vector<std::unique_ptr<RolloutEngine>> engines;
  for (int q = 0; q < replicas; ++q) {
    comms.push_back(rlflow::comm::LocalCommunicator::make_group(N));
    for (int r = 0; r < N; ++r) {
      engines.push_back(std::make_unique<RolloutEngine>(cfg, rlflow::model::TPRank{r, N}, N > 1 ? comms.back()[std::size_t(r)].get() : nullptr));
      engines.back()->load_weights(full);
    }
  }
  SamplingParams sp;
  sp.max_new_tokens = R;  // no EOS: every row runs all 64 steps
  for (auto _ : state) {
    std::vector<std::thread> th;
    for (int i = 0; i < threads; ++i)
      th.emplace_back([&, i] {
        Prompts const& p = parts[std::size_t(i / N)];
        auto r = engines[std::size_t(i)]->generate(p.ids, p.mask, sp, p.seeds);
        benchmark::DoNotOptimize(r.log_probs.data<float>());
      });
    for (auto& t : th) t.join();
  }
  state.counters["tokens/s"] = benchmark::Counter(double(B) * R, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel("B=64 P=8 R=64 L=2 NH=8 C=64, 4 threads: " + std::to_string(replicas) + " replica(s) of tp=" + std::to_string(N));
}

GPTConfig sync_config() { return {.vocab_size = 256, .max_seq_len = 256, .n_layer = 4, .n_head = 8, .n_embd = 256, .seed = 1}; }

//! One replica's N ranks load their shards from the full weights; a memcpy of the same bytes is
//! timed in the same iterations. shared (BM_WeightSync, what the Trainer does): the replica keeps
//! one copy of the replicated tensors (RolloutEngine::share_replicated), each rank copies its
//! split tensors and 1/N of the replicated ones, then the TP group's barrier; private
//! (BM_WeightSyncPrivate): every rank copies its split tensors and all replicated ones.
//! from_shard (BM_WeightSyncFromShard, the Trainer with training TP = rollout TP): each rank loads
//! from its own training shard (RolloutEngine::load_shard) instead of the full weights.
//! Each iteration also times a fence-only round (the same release / join of the ranks, no copy):
//! counter 'fence_share' = fence time / sync time, the part of the sync that is the group's
//! dispatch rather than copying. Shared, N > 1: and the same load followed by a TP-group barrier
//! (the session-4 sync, which fenced every load before and after the copies; the load now has the
//! first barrier only): 'barriers_vs_memcpy' = memcpy time / that time, to read next to
//! 'vs_memcpy'. Every group round follows a memcpy on the releasing thread.
void weight_sync(benchmark::State& state, bool shared, bool from_shard = false) {
  int const N = int(state.range(0));
  GPTConfig const cfg = sync_config();
  std::vector<float> full(rlflow::model::param_count(cfg));
  rlflow::model::init_params(cfg, full);
  auto comms = rlflow::comm::LocalCommunicator::make_group(N);
  std::vector<std::unique_ptr<RolloutEngine>> engines;
  std::vector<std::vector<float>> shards;  // from_shard: each rank's training shard (ShardLayout order)
  for (int r = 0; r < N; ++r) {
    engines.push_back(std::make_unique<RolloutEngine>(cfg, rlflow::model::TPRank{r, N}, N > 1 ? comms[std::size_t(r)].get() : nullptr));
    auto const& sl = engines.back()->shard_layout();
    shards.emplace_back(sl.size());
    sl.load(full, shards.back());
  }
  std::size_t floats = 0;  // the bytes the replica copies per sync
  for (int r = 0; r < N; ++r) {
    auto const& sl = engines[std::size_t(r)]->shard_layout();
    floats += sl.size() - ((shared && N > 1) ? sl.replicated_size() : 0);
  }
  if (shared && N > 1) floats += engines[0]->shard_layout().replicated_size();
  std::vector<float> src(floats, 1.0f), dst(floats, 0.0f);
  double sync_s = 0, memcpy_s = 0, fence_s = 0, barrier_s = 0;
  using clock = std::chrono::steady_clock;
  // ranks 1..N-1 are persistent threads (as the trainer's workers are); rank 0 is this thread
  std::barrier start(N), done(N);
  std::atomic<bool> stop{false};
  enum Round { sync, fence_only, with_barriers };
  std::atomic<int> round{sync};
  // the two-barrier shared sync fenced each load with two TP barriers, before and after the
  // copies; the load now takes the first only (the next forward waits for the parts instead)
  bool const fenced = shared && N > 1;
  auto one = [&](int r) {
    auto& e = *engines[std::size_t(r)];
    int const what = round.load();
    if (what == fence_only) return;
    if (from_shard) e.load_shard(shards[std::size_t(r)]);
    else e.load_weights(full);
    if (what == with_barriers) comms[std::size_t(r)]->barrier();  // the second barrier of the two-barrier sync
  };
  std::vector<std::thread> th;
  for (int r = 1; r < N; ++r)
    th.emplace_back([&, r] {
      if (shared) engines[std::size_t(r)]->share_replicated();
      for (;;) {
        start.arrive_and_wait();
        if (stop.load()) return;
        one(r);
        done.arrive_and_wait();
      }
    });
  if (shared && N > 1 && !engines[0]->share_replicated()) {
    state.SkipWithError("share_replicated failed");
  }
  auto group_round = [&](int what) {
    round = what;
    start.arrive_and_wait();
    one(0);
    done.arrive_and_wait();
  };
  // each group round comes after a memcpy on this thread (the other ranks waiting to be released),
  // so no round profits from ranks another round has just woken
  auto copy = [&] {
    std::memcpy(dst.data(), src.data(), floats * sizeof(float));
    benchmark::ClobberMemory();
  };
  auto timed = [&](auto&& f) {
    auto const t0 = clock::now();
    f();
    return std::chrono::duration<double>(clock::now() - t0).count();
  };
  for (auto _ : state) {
    copy();
    double const s = timed([&] { group_round(sync); });
    sync_s += s;
    memcpy_s += timed(copy);
    fence_s += timed([&] { group_round(fence_only); });
    if (fenced) {
      copy();
      barrier_s += timed([&] { group_round(with_barriers); });
    }
    state.SetIterationTime(s);
  }
  stop = true;
  start.arrive_and_wait();
  for (auto& t : th) t.join();
  state.counters["bytes/s"] = benchmark::Counter(double(floats) * 4, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["memcpy_bytes/s"] = double(floats) * 4 * double(state.iterations()) / memcpy_s;
  state.counters["vs_memcpy"] = memcpy_s / sync_s;
  state.counters["fence_share"] = fence_s / sync_s;
  if (fenced) state.counters["barriers_vs_memcpy"] = memcpy_s / barrier_s;
  state.SetLabel("L=4 C=256 V=256 T=256, " + std::to_string(floats * 4 / 1024) + " KiB over " + std::to_string(N) + " rank(s)" +
                 (shared && N > 1 ? ", replicated tensors shared" : "") + (from_shard ? ", from the training shards" : ""));
}
void BM_WeightSync(benchmark::State& state) { weight_sync(state, true); }
void BM_WeightSyncPrivate(benchmark::State& state) { weight_sync(state, false); }
void BM_WeightSyncFromShard(benchmark::State& state) { weight_sync(state, true, true); }

//! A training-TP group of N ranks (engines of sync_config) saves with save_checkpoint_gathered
//! (rank 0 writes); the unsharded engine saves the same model with save_checkpoint in the same
//! iteration, and the group again with its last rank writing (the all-gather path). Manual time:
//! the group's save; 'vs_tp1' = unsharded time / group time; 'allgather_vs_gather' = all-gather
//! save time / group time.
void BM_CheckpointSave(benchmark::State& state) {
  int const N = int(state.range(0));
  GPTConfig const cfg = sync_config();
  auto comms = rlflow::comm::LocalCommunicator::make_group(N);
  std::vector<std::unique_ptr<TrainingEngine>> group;
  for (int r = 0; r < N; ++r)
    group.push_back(std::make_unique<TrainingEngine>(cfg, OptimizerConfig{}, rlflow::model::TPRank{r, N},
                                                     N > 1 ? comms[std::size_t(r)].get() : nullptr));
  TrainingEngine plain(cfg);
  namespace fs = std::filesystem;
  fs::path const dir = fs::temp_directory_path() / ("rlflow_bench_ckpt_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  using clock = std::chrono::steady_clock;
  double group_s = 0, plain_s = 0, all_s = 0;
  // the group's save with 'writer' writing: rank 0 (gather to rank 0) or rank N - 1 (every rank
  // gathers the full state: the all-gather save)
  auto group_save = [&](char const* file, int writer) {
    std::vector<std::thread> th;
    for (int r = 1; r < N; ++r)
      th.emplace_back([&, r] { save_checkpoint_gathered(dir / file, *group[std::size_t(r)], r == writer); });
    save_checkpoint_gathered(dir / file, *group[0], writer == 0);
    for (auto& t : th) t.join();
  };
  for (auto _ : state) {
    auto const t0 = clock::now();
    group_save("tp.safetensors", 0);
    auto const t1 = clock::now();
    save_checkpoint(dir / "one.safetensors", plain);
    auto const t2 = clock::now();
    group_save("tp_last.safetensors", N - 1);
    auto const t3 = clock::now();
    double const g = std::chrono::duration<double>(t1 - t0).count();
    group_s += g;
    plain_s += std::chrono::duration<double>(t2 - t1).count();
    all_s += std::chrono::duration<double>(t3 - t2).count();
    state.SetIterationTime(g);
  }
  state.counters["vs_tp1"] = plain_s / group_s;
  state.counters["allgather_vs_gather"] = all_s / group_s;
  state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(fs::file_size(dir / "one.safetensors")));
  fs::remove_all(dir);
}

//! Runs 'replicated' then 'vocab_parallel' in each iteration (the same iterations, so the ratio
//! sees the same machine state): manual time = the vocabulary-parallel round; returns the
//! replicated / vocabulary-parallel time ratio (the counter 'vs_replicated').
template <class Replicated, class VocabParallel>
double time_heads(benchmark::State& state, Replicated&& replicated, VocabParallel&& vocab_parallel) {
  using clock = std::chrono::steady_clock;
  double rep_s = 0, vp_s = 0;
  for (auto _ : state) {
    auto const t0 = clock::now();
    replicated();
    auto const t1 = clock::now();
    vocab_parallel();
    auto const t2 = clock::now();
    double const s = std::chrono::duration<double>(t2 - t1).count();
    rep_s += std::chrono::duration<double>(t1 - t0).count();
    vp_s += s;
    state.SetIterationTime(s);
  }
  return rep_s / vp_s;
}

//! One replica of N ranks generates with the replicated LM head and with the vocabulary-parallel
//! one, alternately in the same iterations (same prompts, same seeds, same tokens checked first):
//! manual time = the vocabulary-parallel generate; counter vs_replicated = replicated time /
//! vocabulary-parallel time (> 1: the vocabulary-parallel head is faster).
void BM_LMHead(benchmark::State& state) {
  int const N = int(state.range(0)), V = int(state.range(1));
  GPTConfig cfg = tp_config();
  cfg.vocab_size = V;
  int const B = 64, P = 8, R = 16;
  std::vector<float> full(rlflow::model::param_count(cfg));
  rlflow::model::init_params(cfg, full);
  Prompts const p = make_prompts(B, P, cfg.vocab_size);
  auto comms_rep = rlflow::comm::LocalCommunicator::make_group(N), comms_vp = rlflow::comm::LocalCommunicator::make_group(N);
  std::vector<std::unique_ptr<RolloutEngine>> rep, vp;
  for (int r = 0; r < N; ++r) {
    rep.push_back(std::make_unique<RolloutEngine>(cfg, rlflow::model::TPRank{r, N}, comms_rep[std::size_t(r)].get()));
    vp.push_back(std::make_unique<RolloutEngine>(cfg, rlflow::model::TPRank{r, N}, comms_vp[std::size_t(r)].get()));
    rep.back()->set_lm_head(LMHead::replicated);  // before the load: from V = 256 the default is vocabulary-parallel
    vp.back()->set_lm_head(LMHead::vocab_parallel);
    rep.back()->load_weights(full);
    vp.back()->load_weights(full);
  }
  SamplingParams sp;
  sp.max_new_tokens = R;
  std::vector<RolloutResult> out(static_cast<std::size_t>(N));
  auto run = [&](std::vector<std::unique_ptr<RolloutEngine>>& engines) {
    std::vector<std::thread> th;
    for (int r = 0; r < N; ++r)
      th.emplace_back([&, r] { out[std::size_t(r)] = engines[std::size_t(r)]->generate(p.ids, p.mask, sp, p.seeds); });
    for (auto& t : th) t.join();
    return out[0].responses;
  };
  if (!bit_equal(run(rep), run(vp))) {
    state.SkipWithError("the vocabulary-parallel head sampled other tokens than the replicated one");
    return;
  }
  double const ratio = time_heads(state, [&] { run(rep); }, [&] { run(vp); });
  state.counters["tokens/s"] = benchmark::Counter(double(B) * R, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["vs_replicated"] = ratio;
  state.SetLabel("B=64 P=8 R=16 L=2 NH=8 C=64 V=" + std::to_string(V) + ", one replica of tp=" + std::to_string(N));
}

//! One training-TP group of N ranks (a thread each, started per round) runs forward + backward of
//! the same micro-batch with the replicated LM head and with the vocabulary-parallel one,
//! alternately in the same iterations, after checking that both give the same log-probs to 1e-5:
//! manual time = the vocabulary-parallel round; vs_replicated = replicated time / that time.
void BM_TrainLMHead(benchmark::State& state) {
  int const N = int(state.range(0)), V = int(state.range(1));
  GPTConfig cfg = tp_config();
  cfg.vocab_size = V;
  int const B = 16, T = 48, R = 32;
  std::mt19937 g(3);
  std::vector<std::int32_t> ids(std::size_t(B) * T), mask(std::size_t(B) * T, 1);
  for (auto& x : ids) x = std::int32_t(g() % unsigned(V));
  Tensor const tid = Tensor::from(ids, Shape{B, T}), tmask = Tensor::from(mask, Shape{B, T});
  std::vector<float> d(std::size_t(B) * R);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (auto& x : d) x = n(g);
  Tensor const dlogp = Tensor::from(d, Shape{B, R});
  for (auto& x : d) x = 0.01f * n(g);
  Tensor const dent = Tensor::from(d, Shape{B, R});
  auto comms_rep = rlflow::comm::LocalCommunicator::make_group(N), comms_vp = rlflow::comm::LocalCommunicator::make_group(N);
  std::vector<std::unique_ptr<TrainingEngine>> rep, vp;
  for (int r = 0; r < N; ++r) {
    rep.push_back(std::make_unique<TrainingEngine>(cfg, OptimizerConfig{}, rlflow::model::TPRank{r, N}, comms_rep[std::size_t(r)].get()));
    vp.push_back(std::make_unique<TrainingEngine>(cfg, OptimizerConfig{}, rlflow::model::TPRank{r, N}, comms_vp[std::size_t(r)].get()));
    rep.back()->set_lm_head(rlflow::model::LMHead::replicated);
    vp.back()->set_lm_head(rlflow::model::LMHead::vocab_parallel);
  }
  std::vector<Tensor> lp(static_cast<std::size_t>(N));
  auto run = [&](std::vector<std::unique_ptr<TrainingEngine>>& engines) {
    std::vector<std::thread> th;
    for (int r = 0; r < N; ++r)
      th.emplace_back([&, r] {
        auto& e = *engines[std::size_t(r)];
        lp[std::size_t(r)] = e.forward(tid, tmask, R, 1.0f, true).log_probs;
        e.backward(dlogp, dent);
      });
    for (auto& t : th) t.join();
    return lp[0];
  };
  Tensor const a = run(rep), b = run(vp);
  for (std::int64_t i = 0; i < a.numel(); ++i)
    if (std::abs(a.data<float>()[i] - b.data<float>()[i]) > 1e-5f * std::max(1.0f, std::abs(a.data<float>()[i]))) {
      state.SkipWithError("the vocabulary-parallel head's log-probs differ from the replicated head's");
      return;
    }
  double const ratio = time_heads(state, [&] { run(rep); }, [&] { run(vp); });
  state.counters["tokens/s"] = benchmark::Counter(double(B) * T, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["vs_replicated"] = ratio;
  state.SetLabel("B=16 T=48 R=32 L=2 NH=8 C=64 V=" + std::to_string(V) + ", one group of tp=" + std::to_string(N));
}

}  // namespace

BENCHMARK(BM_TrainLMHead)->ArgNames({"tp", "vocab"})->Args({2, 64})->Args({4, 64})->Args({2, 256})->Args({4, 256})->Args({2, 1024})->Args({4, 1024})->Args({2, 8192})->Args({4, 8192})->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK(BM_LMHead)->ArgNames({"tp", "vocab"})->Args({2, 64})->Args({4, 64})->Args({2, 256})->Args({4, 256})->Args({2, 1024})->Args({4, 1024})->Args({2, 8192})->Args({4, 8192})->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK(BM_RolloutDecodeTP)->Name("BM_RolloutDecode")->ArgName("tp")->Arg(1)->Arg(2)->Arg(4)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_WeightSync)->ArgName("tp")->Arg(1)->Arg(2)->Arg(4)->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK(BM_WeightSyncPrivate)->ArgName("tp")->Arg(2)->Arg(4)->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK(BM_WeightSyncFromShard)->ArgName("tp")->Arg(1)->Arg(2)->Arg(4)->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK(BM_CheckpointSave)->ArgName("tp")->Arg(1)->Arg(2)->Arg(4)->Unit(benchmark::kMillisecond)->UseManualTime();
