// benchmarks/kernels/bench_kernels_cuda.cu <-> include/rlflow/kernels/advantage.hpp (cuda::par).
// BM_GRPOAdvantage/rows:R/group:G/len:L on the device and BM_Memcpy (cudaMemcpyAsync device to
// device) of the same bytes in the same run; GB/s counts bytes read plus written, timed with
// CUDA events (manual time). Target: 70% of device copy bandwidth at R*L >= 16M. Needs a GPU.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <rlflow/kernels/advantage.hpp>

#include <algorithm>
#include <random>
#include <vector>

namespace k = rlflow::kernels;

namespace {

double bytes_moved(std::int64_t R, std::int64_t L) { return R * 12.0 + R * L * 12.0; }

template <class F>
void time_loop(benchmark::State& st, F f) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (auto _ : st) {
    cudaEventRecord(a);
    f();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    st.SetIterationTime(ms / 1e3);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
}

bool no_gpu(benchmark::State& st) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    st.SkipWithError("no CUDA device");
    return true;
  }
  return false;
}

void BM_GRPOAdvantage(benchmark::State& st) {
  if (no_gpu(st)) return;
  std::int64_t const R = st.range(0), G = st.range(1), L = st.range(2);
  std::mt19937 g(42);
  std::vector<float> s(R), m(R * L, 0.0f);
  std::vector<std::int64_t> ids(R);
  for (std::int64_t i = 0; i < R; ++i) ids[i] = i / G, s[i] = static_cast<float>(g() % 4) * 0.5f;
  std::shuffle(ids.begin(), ids.end(), g);
  for (std::int64_t i = 0; i < R; ++i) std::fill(m.begin() + i * L, m.begin() + i * L + 1 + g() % L, 1.0f);
  float *ds, *dm, *da, *dr;
  std::int64_t* di;
  cudaMalloc(&ds, R * 4);
  cudaMalloc(&dm, R * L * 4);
  cudaMalloc(&da, R * L * 4);
  cudaMalloc(&dr, R * L * 4);
  cudaMalloc(&di, R * 8);
  cudaMemcpy(ds, s.data(), R * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dm, m.data(), R * L * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(di, ids.data(), R * 8, cudaMemcpyHostToDevice);
  k::Dims d{R, L};
  auto run = [&] {
    k::grpo_outcome_advantage(rlflow::cuda::par, d, std::span<float const>(ds, R), std::span<float const>(dm, R * L),
                              std::span<std::int64_t const>(di, R), std::span<float>(da, R * L), std::span<float>(dr, R * L));
  };
  run();
  // check once against the cpu path
  std::vector<float> ha(R * L), got(R * L);
  k::grpo_outcome_advantage(rlflow::cpu::par, d, std::span<float const>(s), std::span<float const>(m),
                            std::span<std::int64_t const>(ids), std::span<float>(ha));
  cudaMemcpy(got.data(), da, R * L * 4, cudaMemcpyDeviceToHost);
  for (std::int64_t q = 0; q < R * L; q += 97)
    if (std::abs(got[q] - ha[q]) > 1e-5f * std::max(1.0f, std::abs(ha[q]))) {
      st.SkipWithError("cuda grpo_outcome_advantage disagrees with cpu::par");
      return;
    }
  time_loop(st, run);
  st.counters["GB/s"] = benchmark::Counter(bytes_moved(R, L) * st.iterations(), benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
  cudaFree(ds), cudaFree(dm), cudaFree(da), cudaFree(dr), cudaFree(di);
}

void BM_Memcpy(benchmark::State& st) {
  if (no_gpu(st)) return;
  std::int64_t const R = st.range(0), L = st.range(2);
  auto const half = static_cast<std::size_t>(bytes_moved(R, L) / 2);
  void *a, *b;
  cudaMalloc(&a, half);
  cudaMalloc(&b, half);
  cudaMemset(a, 1, half);
  cudaMemset(b, 2, half);
  time_loop(st, [&] { cudaMemcpyAsync(b, a, half, cudaMemcpyDeviceToDevice); });
  st.counters["GB/s"] = benchmark::Counter(2.0 * half * st.iterations(), benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
  cudaFree(a), cudaFree(b);
}

void args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"rows", "group", "len"});
  for (std::int64_t G : {1, 8, 64}) {
    b->Args({1 << 16, G, 256});
    b->Args({1 << 20, G, 16});
    b->Args({1 << 20, G, 256});
  }
  b->UseManualTime()->Unit(benchmark::kMillisecond);
}

}  // namespace

BENCHMARK(BM_GRPOAdvantage)->Apply(args);
BENCHMARK(BM_Memcpy)->Apply(args);
BENCHMARK_MAIN();
