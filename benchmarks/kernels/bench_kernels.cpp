// benchmarks/kernels/bench_kernels.cpp <-> include/rlflow/kernels/advantage.hpp (cpu::par).
// BM_GRPOAdvantage/rows:R/group:G/len:L: group statistics over R scores (groups of G rows,
// shuffled so they are not contiguous) plus the score-to-token broadcast into advantages and
// returns (R x L). BM_Memcpy/rows:R/group:G/len:L copies the same number of bytes in the same
// run. GB/s counts bytes read plus written: GRPO reads R*(4 score + 8 id) + R*L*4 mask and
// writes 2*R*L*4; memcpy moves half that each way. Every buffer is touched before timing and
// the result is checked once against a plain loop before timing.
//
// From verl's interface (uid strings, an int32 response_mask (B, L), token_level_rewards (B, L)):
// BM_GRPOAdvantageFromUids/rows:R/group:G/len:L/impl:0 runs rlflow's kernels on those inputs
// (sequence_scores, group_index_first_seen hashing the uid strings, grpo_outcome_advantage reading
// the int32 mask in place and writing advantages, which verl also returns as returns); impl:2 the
// same writing a separate returns too; impl:1 runs, in plain C++, verl's vectorized algorithm step by step
// (verl: core_algos.compute_grpo_vectorized_outcome_advantage with utils.groupwise.as_torch_index
// and group_mean_std): the rewards' row sums; np.unique(uids, return_inverse=True) = sort a copy of
// the labels, unique, and the inverse by binary search; three index_add_ (float32) for count,
// sum and sum of squares; mean, var = (s2 - s1^2/n)/max(n-1,1), std = sqrt(max(var, eps)),
// singletons -> (0, 1); scalars = (s - mean[g]) / (std[g] + eps); advantages = scalars[:, None] *
// mask (int32 promoted to float). Each eager op writes a fresh tensor, as in PyTorch. It is a
// reference for the algorithm's cost (no interpreter, no numpy object-array overhead), so it
// flatters verl; tools/verl_grpo_vectorized_bench.py times verl's actual Python function.
#include <benchmark/benchmark.h>

#include <rlflow/kernels/advantage.hpp>

#include <cstdio>
#include <string>

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

struct UidInputs {
  std::vector<std::string> uid;      // one uuid4-like string per prompt, repeated G times, shuffled
  std::vector<float> rewards;        // token_level_rewards (R, L): the score at the last valid token
  std::vector<std::int32_t> mask;    // response_mask (R, L) int32, as verl's batch holds it
  std::vector<float> adv, ret;
};

UidInputs make_uids(std::int64_t R, std::int64_t G, std::int64_t L) {
  UidInputs in;
  std::mt19937_64 g(7);
  std::vector<std::int64_t> prompt(R);
  for (std::int64_t i = 0; i < R; ++i) prompt[i] = i / G;
  std::shuffle(prompt.begin(), prompt.end(), g);
  std::vector<std::string> names(static_cast<std::size_t>((R + G - 1) / G));
  for (auto& n : names) {
    char buf[40];
    std::uint64_t a = g(), b = g();
    std::snprintf(buf, sizeof buf, "%08x-%04x-4%03x-%04x-%012llx", static_cast<unsigned>(a >> 32), static_cast<unsigned>(a >> 16) & 0xffffu,
                  static_cast<unsigned>(a) & 0xfffu, static_cast<unsigned>(b >> 48) & 0xffffu,
                  static_cast<unsigned long long>(b & 0xffffffffffffull));
    n = buf;
  }
  in.uid.resize(R);
  for (std::int64_t i = 0; i < R; ++i) in.uid[i] = names[prompt[i]];
  in.rewards.assign(R * L, 0.0f);
  in.mask.assign(R * L, 0);
  for (std::int64_t i = 0; i < R; ++i) {
    std::int64_t len = 1 + static_cast<std::int64_t>(g() % L);
    std::fill(in.mask.begin() + i * L, in.mask.begin() + i * L + len, 1);
    in.rewards[i * L + len - 1] = static_cast<float>(g() % 4) * 0.5f;
  }
  in.adv.assign(R * L, 1.0f);
  in.ret.assign(R * L, 1.0f);
  return in;
}

//! rlflow from verl's inputs through the kernels: row scores, first-seen group ids hashed from the
//! uid strings (group_index_first_seen, into a reused buffer), and the estimator reading verl's
//! int32 mask in place (no conversion). verl's function returns one tensor as both advantages and
//! returns, so one output is written (impl:2 writes a second one; rlflow::compute_advantage
//! shares one buffer for both, as verl does).
void rlflow_from_uids(UidInputs& in, std::int64_t R, std::int64_t L, std::vector<float>& scores, std::vector<std::int64_t>& idx,
                      bool both) {
  k::Dims d{R, L};
  k::sequence_scores(rlflow::cpu::par, d, std::span<float const>(in.rewards), std::span<float>(scores));
  k::group_index_first_seen(std::span<std::string const>(in.uid), std::span<std::int64_t>(idx));
  k::grpo_outcome_advantage(rlflow::cpu::par, d, std::span<float const>(scores), std::span<std::int32_t const>(in.mask),
                            std::span<std::int64_t const>(idx), std::span<float>(in.adv),
                            both ? std::span<float>(in.ret) : std::span<float>());
}

//! verl's vectorized GRPO, step by step, eager (every op a fresh array). The reference algorithm.
std::vector<float> verl_vectorized_reference(UidInputs const& in, std::int64_t R, std::int64_t L, double eps = 1e-6) {
  // scores = token_level_rewards.sum(dim=-1)
  std::vector<float> scores(R);
  for (std::int64_t i = 0; i < R; ++i) {
    float a = 0;
    for (std::int64_t t = 0; t < L; ++t) a += in.rewards[i * L + t];
    scores[i] = a;
  }
  // as_torch_index: np.unique(arr, return_inverse=True) on the object array of strings
  std::vector<std::string> u(in.uid);  // np.asarray copies the labels
  std::sort(u.begin(), u.end());
  u.erase(std::unique(u.begin(), u.end()), u.end());
  std::vector<std::int64_t> g(R);
  for (std::int64_t i = 0; i < R; ++i) g[i] = std::lower_bound(u.begin(), u.end(), in.uid[i]) - u.begin();
  // group_mean_std: G = max + 1; count/s1/s2 by index_add_ in float32
  std::int64_t const G = static_cast<std::int64_t>(u.size());
  std::vector<float> ones(R, 1.0f), sq(R);
  for (std::int64_t i = 0; i < R; ++i) sq[i] = scores[i] * scores[i];
  std::vector<float> count(G, 0.0f), s1(G, 0.0f), s2(G, 0.0f);
  for (std::int64_t i = 0; i < R; ++i) count[g[i]] += ones[i];
  for (std::int64_t i = 0; i < R; ++i) s1[g[i]] += scores[i];
  for (std::int64_t i = 0; i < R; ++i) s2[g[i]] += sq[i];
  std::vector<float> cc(G), mean(G), var_num(G), denom(G), var(G), std_(G);
  for (std::int64_t j = 0; j < G; ++j) cc[j] = std::max(count[j], 1.0f);
  for (std::int64_t j = 0; j < G; ++j) mean[j] = s1[j] / cc[j];
  for (std::int64_t j = 0; j < G; ++j) var_num[j] = s2[j] - (s1[j] * s1[j]) / cc[j];
  for (std::int64_t j = 0; j < G; ++j) denom[j] = std::max(count[j] - 1.0f, 1.0f);
  for (std::int64_t j = 0; j < G; ++j) var[j] = var_num[j] / denom[j];
  for (std::int64_t j = 0; j < G; ++j) std_[j] = std::sqrt(std::max(var[j], static_cast<float>(eps)));
  for (std::int64_t j = 0; j < G; ++j)
    if (count[j] <= 1.0f) mean[j] = 0.0f, std_[j] = 1.0f;
  // scalars = (scores - mean_g[g]) / (std_g[g] + epsilon): gathers, then elementwise ops
  std::vector<float> mg(R), sg(R), diff(R), den(R), scal(R);
  for (std::int64_t i = 0; i < R; ++i) mg[i] = mean[g[i]];
  for (std::int64_t i = 0; i < R; ++i) sg[i] = std_[g[i]];
  for (std::int64_t i = 0; i < R; ++i) diff[i] = scores[i] - mg[i];
  for (std::int64_t i = 0; i < R; ++i) den[i] = sg[i] + static_cast<float>(eps);
  for (std::int64_t i = 0; i < R; ++i) scal[i] = diff[i] / den[i];
  // advantages = scalars.unsqueeze(-1) * response_mask (int32 -> float32 promotion)
  std::vector<float> adv(R * L);
  for (std::int64_t i = 0; i < R; ++i)
    for (std::int64_t t = 0; t < L; ++t) adv[i * L + t] = scal[i] * static_cast<float>(in.mask[i * L + t]);
  return adv;
}

void BM_GRPOAdvantageFromUids(benchmark::State& st) {
  std::int64_t const R = st.range(0), G = st.range(1), L = st.range(2), impl = st.range(3);
  UidInputs in = make_uids(R, G, L);
  std::vector<float> scores(R);
  std::vector<std::int64_t> idx(R);
  // Both paths agree (verl's float32 sums vs rlflow's doubles: within 1e-3 on these scores).
  rlflow_from_uids(in, R, L, scores, idx, true);
  auto const want = verl_vectorized_reference(in, R, L);
  for (std::int64_t i = 0; i < R * L; i += std::max<std::int64_t>(1, R * L / 4099))
    if (std::fabs(in.adv[i] - want[i]) > 1e-3 * std::max(1.0f, std::fabs(want[i]))) {
      st.SkipWithError("rlflow's GRPO from uids disagrees with verl's vectorized algorithm");
      return;
    }
  for (auto _ : st) {
    if (impl == 0 || impl == 2) {
      rlflow_from_uids(in, R, L, scores, idx, impl == 2);
      benchmark::DoNotOptimize(in.adv.data());
    } else {
      auto a = verl_vectorized_reference(in, R, L);
      benchmark::DoNotOptimize(a.data());
    }
    benchmark::ClobberMemory();
  }
  st.SetLabel(impl == 0 ? "rlflow" : impl == 2 ? "rlflow_adv_and_ret" : "verl_vectorized_algorithm");
}

void uid_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"rows", "group", "len", "impl"});
  for (std::int64_t R : {1 << 16, 1 << 20})
    for (std::int64_t impl : {0, 1, 2}) b->Args({R, 8, 64, impl});
  b->Unit(benchmark::kMillisecond)->UseRealTime();
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
BENCHMARK(BM_GRPOAdvantageFromUids)->Apply(uid_args);
BENCHMARK_MAIN();
