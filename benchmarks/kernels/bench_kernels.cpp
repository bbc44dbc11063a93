// benchmarks/kernels/bench_kernels.cpp <-> include/rlflow/kernels/advantage.hpp (cpu::par).
// BM_GRPOAdvantage/rows:R/group:G/len:L: group statistics over R scores (groups of G rows,
// shuffled so they are not contiguous) plus the score-to-token broadcast into advantages and
// returns (R x L). BM_Memcpy/rows:R/group:G/len:L copies the same number of bytes in the same
// run. GB/s counts bytes read plus written: GRPO reads R*(4 score + 8 id) + R*L*4 mask and
// writes 2*R*L*4; memcpy moves half that each way. Every buffer is touched before timing and
// the result is checked once against a plain loop before timing.
#include <benchmark/benchmark.h>

#include <rlflow/kernels/advantage.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

namespace k = rlflow::kernels;

namespace {

struct Inputs {
  std::vector<float> scores, mask, adv, ret;
  std::vector<std::int64_t> ids;
};

Inputs make(std::int64_t R, std::int64_t G, std::int64_t L) {
  Inputs in;
  std::mt19937 g(42);
  in.scores.resize(R);
  in.ids.resize(R);
  for (std::int64_t i = 0; i < R; ++i) {
    in.ids[i] = i / G;
    in.scores[i] = static_cast<float>(g() % 4) * 0.5f;
  }
  std::shuffle(in.ids.begin(), in.ids.end(), g);
  in.mask.assign(R * L, 0.0f);
  for (std::int64_t i = 0; i < R; ++i) {
    std::int64_t len = 1 + static_cast<std::int64_t>(g() % L);
    std::fill(in.mask.begin() + i * L, in.mask.begin() + i * L + len, 1.0f);
  }
  in.adv.assign(R * L, 1.0f);  // touched: no first-touch page faults in the timed loop
  in.ret.assign(R * L, 1.0f);
  return in;
}

double bytes_moved(std::int64_t R, std::int64_t L) { return R * 12.0 + R * L * 12.0; }

void BM_GRPOAdvantage(benchmark::State& st) {
  std::int64_t const R = st.range(0), G = st.range(1), L = st.range(2);
  Inputs in = make(R, G, L);
  k::Dims d{R, L};
  auto run = [&] {
    k::grpo_outcome_advantage(rlflow::cpu::par, d, std::span<float const>(in.scores), std::span<float const>(in.mask),
                              std::span<std::int64_t const>(in.ids), std::span<float>(in.adv), std::span<float>(in.ret));
  };
  run();
  // one check against a plain loop (group means only; the tests cover the rest)
  std::vector<double> sum(R, 0.0), sq(R, 0.0), cnt(R, 0.0);
  for (std::int64_t i = 0; i < R; ++i) sum[in.ids[i]] += in.scores[i], cnt[in.ids[i]] += 1;
  for (std::int64_t i = 0; i < R; ++i) {
    double mu = sum[in.ids[i]] / cnt[in.ids[i]];
    sq[in.ids[i]] += (in.scores[i] - mu) * (in.scores[i] - mu);
  }
  for (std::int64_t i = 0; i < R; i += std::max<std::int64_t>(1, R / 997)) {
    std::int64_t gi = in.ids[i];
    double n = cnt[gi];
    double want = n > 1 ? (in.scores[i] - sum[gi] / n) / (std::sqrt(sq[gi] / (n - 1)) + 1e-6) : in.scores[i] / (1 + 1e-6);
    if (std::fabs(in.adv[i * L] - want) > 1e-4 * std::max(1.0, std::fabs(want))) {
      st.SkipWithError("grpo_outcome_advantage disagrees with the plain loop");
      return;
    }
  }
  for (auto _ : st) {
    run();
    benchmark::DoNotOptimize(in.adv.data());
    benchmark::ClobberMemory();
  }
  st.counters["GB/s"] = benchmark::Counter(bytes_moved(R, L) * st.iterations(), benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

void BM_Memcpy(benchmark::State& st) {
  std::int64_t const R = st.range(0), L = st.range(2);
  auto const half = static_cast<std::size_t>(bytes_moved(R, L) / 2);
  std::vector<char> src(half, 1), dst(half, 2);
  for (auto _ : st) {
    std::memcpy(dst.data(), src.data(), half);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  st.counters["GB/s"] = benchmark::Counter(2.0 * half * st.iterations(), benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

void args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"rows", "group", "len"});
  for (std::int64_t G : {1, 8, 64}) {
    b->Args({1 << 14, G, 256});
    b->Args({1 << 16, G, 256});   // 16M elements
    b->Args({1 << 20, G, 16});    // 1M scores, 16M elements
  }
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

}  // namespace

BENCHMARK(BM_GRPOAdvantage)->Apply(args);
BENCHMARK(BM_Memcpy)->Apply(args);
BENCHMARK_MAIN();
