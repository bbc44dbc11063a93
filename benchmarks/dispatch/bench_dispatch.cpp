// benchmarks/dispatch/bench_dispatch.cpp: dispatch overhead of the in-process backend.
//   BM_BareHandoff/workers:N            the raw primitive: wake N threads (Mailbox), no-op, count down
//   BM_Dispatch_OneToAll/workers:N      a WorkerGroup call of a registered no-op method
//   BM_Dispatch_DPComputeProto/workers:N/rows:R  chunk R rows x 3 float32 columns of width 256,
//                                       dispatch, the method returns its chunk, concat the results
//   BM_Memcpy/bytes:B                   a plain memcpy of that batch's bytes
// After the run it prints the target ratios (OneToAll / BareHandoff, DPComputeProto /
// (OneToAll + Memcpy)) from the medians of this one run. Timings are never asserted.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>
#include <rlflow/core/data_proto.hpp>
#include <rlflow/dispatch/worker_group.hpp>

namespace {

using rlflow::DataProto;

// ---- the bare hand-off: the same Mailbox + CountDown the backend uses, nothing else ----------
struct BareWorkers {
  explicit BareWorkers(int n) : boxes(static_cast<std::size_t>(n)) {
    for (int i = 0; i < n; ++i)
      threads.emplace_back([this, i] {
        for (;;) {
          rlflow::dispatch::Message m = boxes[static_cast<std::size_t>(i)].pop();
          if (m.op == rlflow::dispatch::op_stop) return;
          static_cast<rlflow::dispatch::CountDown*>(m.state)->arrive();  // the no-op signals back
        }
      });
  }
  ~BareWorkers() {
    for (auto& b : boxes) b.push({rlflow::dispatch::op_stop, nullptr});
    for (auto& t : threads) t.join();
  }
  void round_trip() {
    done.reset(static_cast<int>(boxes.size()));
    for (auto& b : boxes) b.push({0, &done});
    done.wait();
  }
  std::vector<rlflow::dispatch::Mailbox> boxes;
  std::vector<std::thread> threads;
  rlflow::dispatch::CountDown done;
};

void BM_BareHandoff(benchmark::State& state) {
  BareWorkers w(static_cast<int>(state.range(0)));
  for (int i = 0; i < 1000; ++i) w.round_trip();  // warm
  for (auto _ : state) w.round_trip();
  state.counters["threads"] = static_cast<double>(state.range(0) + 1);
}
BENCHMARK(BM_BareHandoff)->ArgName("workers")->Arg(1)->Arg(2)->Arg(8)->UseRealTime()->Repetitions(5)
    ->ReportAggregatesOnly(true);

// ---- WorkerGroup calls --------------------------------------------------------------------------
struct Bench {
  using role_tag = rlflow::worker_tag;
  void noop() {}
  DataProto echo(DataProto const& d) { return d; }
  using methods = rlflow::methods<rlflow::method<&Bench::noop, rlflow::dispatch::OneToAll>,
                                  rlflow::method<&Bench::echo, rlflow::dispatch::DPComputeProto>>;
};

void BM_Dispatch_OneToAll(benchmark::State& state) {
  int const n = static_cast<int>(state.range(0));
  rlflow::ResourcePool pool("bench", {n}, 1);
  rlflow::WorkerGroup<Bench> g(pool);
  for (int i = 0; i < 1000; ++i) g.call<&Bench::noop>();
  for (auto _ : state) g.call<&Bench::noop>();
  state.counters["threads"] = static_cast<double>(n + 1);
}
BENCHMARK(BM_Dispatch_OneToAll)->ArgName("workers")->Arg(1)->Arg(2)->Arg(8)->UseRealTime()->Repetitions(5)
    ->ReportAggregatesOnly(true);

DataProto make_batch(std::int64_t rows) {
  rlflow::TensorColumns cols;
  for (const char* k : {"a", "b", "c"}) {
    auto t = rlflow::Tensor::empty(rlflow::DType::float32, rlflow::Shape{rows, 256});
    auto s = t.span<float>();
    for (std::size_t i = 0; i < s.size(); ++i) s[i] = static_cast<float>(i % 977);
    cols.emplace_back(k, t);
  }
  return DataProto::from_dict(std::move(cols));
}

void BM_Dispatch_DPComputeProto(benchmark::State& state) {
  int const n = static_cast<int>(state.range(0));
  std::int64_t const rows = state.range(1);
  rlflow::ResourcePool pool("bench", {n}, 1);
  rlflow::WorkerGroup<Bench> g(pool);
  DataProto const batch = make_batch(rows);
  {  // check once, then warm the result buffers (the caching host resource reuses them)
    DataProto out = g.call<&Bench::echo>(batch);
    if (!(out == batch)) state.SkipWithError("DPComputeProto result differs from the input");
  }
  for (int i = 0; i < 3; ++i) benchmark::DoNotOptimize(g.call<&Bench::echo>(batch));
  for (auto _ : state) {
    DataProto out = g.call<&Bench::echo>(batch);
    benchmark::DoNotOptimize(out);
  }
  double const bytes = static_cast<double>(rows) * 3 * 256 * 4;
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes) * state.iterations());
  state.counters["threads"] = static_cast<double>(n + 1);
}
BENCHMARK(BM_Dispatch_DPComputeProto)->ArgNames({"workers", "rows"})
    ->Args({1, 1024})->Args({2, 1024})->Args({8, 1024})->Args({1, 65536})->Args({2, 65536})->Args({8, 65536})
    ->UseRealTime()->Repetitions(5)->ReportAggregatesOnly(true);

void BM_Memcpy(benchmark::State& state) {
  auto const bytes = static_cast<std::size_t>(state.range(0));
  std::vector<char> src(bytes, 1), dst(bytes, 0);  // both touched: warm
  for (int i = 0; i < 3; ++i) std::memcpy(dst.data(), src.data(), bytes);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes) * state.iterations());
}
BENCHMARK(BM_Memcpy)->ArgName("bytes")->Arg(1024 * 3 * 256 * 4)->Arg(65536LL * 3 * 256 * 4)->UseRealTime()
    ->Repetitions(5)->ReportAggregatesOnly(true);

//! Console output plus the target ratios computed from the medians of this run.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(std::vector<Run> const& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (auto const& r : runs)
      if (r.run_type == Run::RT_Aggregate && r.aggregate_name == "median")
        median_[strip_repeats(r.run_name.str())] = r.GetAdjustedRealTime();  // in the run's time unit (ns)
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    auto get = [&](std::string const& k) { auto it = median_.find(k); return it == median_.end() ? -1.0 : it->second; };
    std::printf("\nratios (medians of this run; targets <= 1.3):\n");
    for (int n : {1, 2, 8}) {
      double b = get("BM_BareHandoff/workers:" + std::to_string(n) + "/real_time");
      double o = get("BM_Dispatch_OneToAll/workers:" + std::to_string(n) + "/real_time");
      if (b > 0 && o > 0) std::printf("  OneToAll / BareHandoff, workers:%d: %.2f  (%.2f us / %.2f us)\n", n, o / b, o / 1e3, b / 1e3);
    }
    for (long rows : {1024L, 65536L})
      for (int n : {1, 2, 8}) {
        double d = get("BM_Dispatch_DPComputeProto/workers:" + std::to_string(n) + "/rows:" + std::to_string(rows) + "/real_time");
        double o = get("BM_Dispatch_OneToAll/workers:" + std::to_string(n) + "/real_time");
        double m = get("BM_Memcpy/bytes:" + std::to_string(rows * 3 * 256 * 4) + "/real_time");
        if (d > 0 && o > 0 && m > 0)
          std::printf("  DPComputeProto / (OneToAll + Memcpy), workers:%d rows:%ld: %.2f  (%.1f us / (%.1f + %.1f) us)\n", n,
                      rows, d / (o + m), d / 1e3, o / 1e3, m / 1e3);
      }
  }

 private:
  static std::string strip_repeats(std::string s) {
    auto const p = s.find("/repeats:");
    if (p == std::string::npos) return s;
    auto const e = s.find('/', p + 1);
    return s.erase(p, e == std::string::npos ? std::string::npos : e - p);
  }
  std::map<std::string, double> median_;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RatioReporter rep;
  benchmark::RunSpecifiedBenchmarks(&rep);
  benchmark::Shutdown();
  return 0;
}
