// benchmarks/dispatch/bench_mpi_dispatch.cpp: dispatch overhead of the MPI backend (issue 12).
//   BM_MpiPingPong/bytes:B                      raw MPI_Send/MPI_Recv round trip, rank 0 <-> rank 1
//   BM_MpiRawEcho/ranks:N/bytes:B               raw: rank 0 sends B bytes to each of N ranks
//                                               (MPI_Isend), each sends them back; the baseline
//   BM_MpiDispatch_OneToAll/ranks:N             WorkerGroup<Bench, Mpi> call of a no-op method
//   BM_MpiDispatch_DPComputeProto/ranks:N/rows:R  R rows x 3 float32 columns of width 256 split
//                                               over N ranks, echoed back, concatenated
// Two phases in one job: first the raw benchmarks (the worker ranks run an echo loop), then the
// dispatch ones (the worker ranks serve). Afterwards it prints the target ratios from this run's
// medians: OneToAll / RawEcho(64 B) (target <= 2) and DPComputeProto / RawEcho of the same bytes
// (target <= 1.3). Run: mpiexec --oversubscribe -np 5 build/benchmarks/dispatch/bench_mpi_dispatch
// (started without mpiexec, it starts itself that way). Timings are never asserted.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <rlflow/data_proto.hpp>
#include <rlflow/dispatch/mpi.hpp>

namespace {

using rlflow::DataProto;
constexpr int tag_data = 100, tag_stop = 101;

int world_size() { return rlflow::mpi::Runtime::get().size(); }
MPI_Comm raw_comm() {
  static MPI_Comm c = [] {
    MPI_Comm d;
    MPI_Comm_dup(MPI_COMM_WORLD, &d);
    return d;
  }();
  return c;
}

//! Worker ranks during the raw phase: echo every message back to rank 0 until told to stop.
void echo_loop() {
  std::vector<char> buf;
  rlflow::mpi::detail::Backoff bo;  // polls like the backend's serve loop (MPI_Probe would spin)
  for (;;) {
    MPI_Status st;
    int flag = 0;
    MPI_Iprobe(0, MPI_ANY_TAG, raw_comm(), &flag, &st);
    if (!flag) {
      bo.pause();
      continue;
    }
    bo.reset();
    int n = 0;
    MPI_Get_count(&st, MPI_BYTE, &n);
    buf.resize(static_cast<std::size_t>(n) + 1);
    MPI_Recv(buf.data(), n, MPI_BYTE, 0, st.MPI_TAG, raw_comm(), MPI_STATUS_IGNORE);
    if (st.MPI_TAG == tag_stop) return;
    MPI_Send(buf.data(), n, MPI_BYTE, 0, tag_data, raw_comm());
  }
}

void BM_MpiPingPong(benchmark::State& state) {
  auto const bytes = static_cast<std::size_t>(state.range(0));
  std::vector<char> out(bytes, 1), in(bytes, 0);
  auto rt = [&] {
    MPI_Send(out.data(), static_cast<int>(bytes), MPI_BYTE, 1, tag_data, raw_comm());
    MPI_Recv(in.data(), static_cast<int>(bytes), MPI_BYTE, 1, tag_data, raw_comm(), MPI_STATUS_IGNORE);
  };
  for (int i = 0; i < 100; ++i) rt();
  for (auto _ : state) rt();
  state.SetBytesProcessed(static_cast<std::int64_t>(2 * bytes) * state.iterations());
}

//! N ranks, 'bytes' each way per rank (what a dispatch of that size moves, without rlflow).
void raw_echo(int n, std::vector<std::vector<char>>& out, std::vector<std::vector<char>>& in) {
  std::vector<MPI_Request> q(static_cast<std::size_t>(2 * n));
  for (int r = 0; r < n; ++r) {
    auto& o = out[static_cast<std::size_t>(r)];
    auto& i = in[static_cast<std::size_t>(r)];
    MPI_Irecv(i.data(), static_cast<int>(i.size()), MPI_BYTE, r + 1, tag_data, raw_comm(), &q[static_cast<std::size_t>(2 * r)]);
    MPI_Isend(o.data(), static_cast<int>(o.size()), MPI_BYTE, r + 1, tag_data, raw_comm(), &q[static_cast<std::size_t>(2 * r + 1)]);
  }
  MPI_Waitall(2 * n, q.data(), MPI_STATUSES_IGNORE);
}

void BM_MpiRawEcho(benchmark::State& state) {
  int const n = static_cast<int>(state.range(0));
  auto const bytes = static_cast<std::size_t>(state.range(1));
  std::vector<std::vector<char>> out(static_cast<std::size_t>(n), std::vector<char>(bytes, 1));
  std::vector<std::vector<char>> in(static_cast<std::size_t>(n), std::vector<char>(bytes, 0));
  for (int i = 0; i < 20; ++i) raw_echo(n, out, in);
  for (auto _ : state) raw_echo(n, out, in);
  state.SetBytesProcessed(static_cast<std::int64_t>(2 * bytes) * n * state.iterations());
  state.counters["processes"] = n + 1;
}

// ---- dispatch -------------------------------------------------------------------------------------
struct Bench {
  using role_tag = rlflow::worker_tag;
  void noop() {}
  DataProto echo(DataProto const& d) { return d; }
  using methods = rlflow::methods<rlflow::method<&Bench::noop, rlflow::dispatch::OneToAll>,
                                  rlflow::method<&Bench::echo, rlflow::dispatch::DPComputeProto>>;
};
using Group = rlflow::WorkerGroup<Bench, rlflow::dispatch::Mpi>;
std::map<int, std::unique_ptr<Group>>& groups() {
  static std::map<int, std::unique_ptr<Group>> g;
  return g;
}

void BM_MpiDispatch_OneToAll(benchmark::State& state) {
  Group& g = *groups().at(static_cast<int>(state.range(0)));
  for (int i = 0; i < 100; ++i) g.call<&Bench::noop>();
  for (auto _ : state) g.call<&Bench::noop>();
  state.counters["processes"] = static_cast<double>(state.range(0) + 1);
}

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

void BM_MpiDispatch_DPComputeProto(benchmark::State& state) {
  int const n = static_cast<int>(state.range(0));
  std::int64_t const rows = state.range(1);
  Group& g = *groups().at(n);
  DataProto const batch = make_batch(rows);
  {
    DataProto out = g.call<&Bench::echo>(batch);
    if (!(out == batch)) state.SkipWithError("DPComputeProto result differs from the input");
  }
  for (int i = 0; i < 3; ++i) benchmark::DoNotOptimize(g.call<&Bench::echo>(batch));
  for (auto _ : state) {
    DataProto out = g.call<&Bench::echo>(batch);
    benchmark::DoNotOptimize(out);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(rows) * 3 * 256 * 4 * 2 * state.iterations());
  state.counters["processes"] = n + 1;
}

// The sizes: N in {1, 2, 4} (capped by the job), rows 1024 and 16384 (3 MiB and 48 MiB a call).
std::vector<int> rank_counts() {
  std::vector<int> v;
  for (int n : {1, 2, 4})
    if (n <= world_size() - 1) v.push_back(n);
  return v;
}
constexpr std::int64_t row_counts[] = {1024, 16384};
//! Bytes a rank receives in a DPComputeProto echo of 'rows' over n ranks (the chunk's wire size).
std::int64_t chunk_bytes(std::int64_t rows, int n) {
  return static_cast<std::int64_t>(make_batch(rows / n).serialized_size());
}

void register_raw() {
  for (long b : {64L, 4096L, 1L << 20}) benchmark::RegisterBenchmark("BM_MpiPingPong", BM_MpiPingPong)->ArgName("bytes")->Arg(b)
      ->UseRealTime()->Repetitions(5)->ReportAggregatesOnly(true);
  for (int n : rank_counts()) {
    benchmark::RegisterBenchmark("BM_MpiRawEcho", BM_MpiRawEcho)->ArgNames({"ranks", "bytes"})->Args({n, 64})
        ->UseRealTime()->Repetitions(5)->ReportAggregatesOnly(true);
    for (auto rows : row_counts)
      benchmark::RegisterBenchmark("BM_MpiRawEcho", BM_MpiRawEcho)->ArgNames({"ranks", "bytes"})->Args({n, chunk_bytes(rows, n)})
          ->UseRealTime()->Repetitions(5)->ReportAggregatesOnly(true);
  }
}
void register_dispatch() {
  for (int n : rank_counts()) {
    benchmark::RegisterBenchmark("BM_MpiDispatch_OneToAll", BM_MpiDispatch_OneToAll)->ArgName("ranks")->Arg(n)
        ->UseRealTime()->Repetitions(5)->ReportAggregatesOnly(true);
    for (auto rows : row_counts)
      benchmark::RegisterBenchmark("BM_MpiDispatch_DPComputeProto", BM_MpiDispatch_DPComputeProto)
          ->ArgNames({"ranks", "rows"})->Args({n, rows})->UseRealTime()->Repetitions(5)->ReportAggregatesOnly(true);
  }
}

//! Console output; remembers the medians for the ratios.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(std::vector<Run> const& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (auto const& r : runs)
      if (r.run_type == Run::RT_Aggregate && r.aggregate_name == "median")
        median_[strip(r.run_name.str())] = r.GetAdjustedRealTime();
  }
  void Finalize() override {}  // ratios are printed once, after both phases
  void print_ratios() {
    auto get = [&](std::string const& k) { auto it = median_.find(k); return it == median_.end() ? -1.0 : it->second; };
    std::printf("\nratios (medians of this run):\n");
    for (int n : rank_counts()) {
      double const d = get("BM_MpiDispatch_OneToAll/ranks:" + std::to_string(n) + "/real_time");
      double const raw = get("BM_MpiRawEcho/ranks:" + std::to_string(n) + "/bytes:64/real_time");
      if (d > 0 && raw > 0)
        std::printf("  OneToAll / RawEcho(64 B), ranks:%d: %.2f  (%.1f us / %.1f us; target <= 2)\n", n, d / raw, d / 1e3, raw / 1e3);
      for (auto rows : row_counts) {
        double const p = get("BM_MpiDispatch_DPComputeProto/ranks:" + std::to_string(n) + "/rows:" + std::to_string(rows) + "/real_time");
        double const rb = get("BM_MpiRawEcho/ranks:" + std::to_string(n) + "/bytes:" + std::to_string(chunk_bytes(rows, n)) + "/real_time");
        if (p > 0 && rb > 0)
          std::printf("  DPComputeProto / RawEcho(same bytes), ranks:%d rows:%lld: %.2f  (%.1f us / %.1f us; target <= 1.3)\n", n,
                      static_cast<long long>(rows), p / rb, p / 1e3, rb / 1e3);
      }
    }
    double const pp = get("BM_MpiPingPong/bytes:64/real_time");
    double const o1 = get("BM_MpiDispatch_OneToAll/ranks:1/real_time");
    if (pp > 0 && o1 > 0)
      std::printf("  OneToAll(ranks:1) / PingPong(64 B): %.2f  (%.1f us / %.1f us; target <= 2)\n", o1 / pp, o1 / 1e3, pp / 1e3);
  }

 private:
  static std::string strip(std::string s) {
    auto const p = s.find("/repeats:");
    if (p == std::string::npos) return s;
    auto const e = s.find('/', p + 1);
    return s.erase(p, e == std::string::npos ? std::string::npos : e - p);
  }
  std::map<std::string, double> median_;
};

//! Started without mpiexec: start this program under it (5 processes) and return its status.
int relaunch(int argc, char** argv) {
  std::vector<std::string> args{RLFLOW_MPIEXEC, "--oversubscribe", "-np", "5", "/proc/self/exe"};
  char self[4096];
  ssize_t const len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len > 0) args[4] = std::string(self, static_cast<std::size_t>(len));
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  std::fprintf(stderr, "bench_mpi_dispatch: not started by mpiexec; running:");
  for (auto& a : args) std::fprintf(stderr, " %s", a.c_str());
  std::fprintf(stderr, "\n");
  execv(RLFLOW_MPIEXEC, cargs.data());
  std::perror("execv " RLFLOW_MPIEXEC);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (!rlflow::mpi::launched()) return relaunch(argc, argv);
  auto& rt = rlflow::mpi::Runtime::get();
  bool const driver = rt.is_driver();
  benchmark::Initialize(&argc, argv);
  // phase 1: raw MPI (the worker ranks echo)
  RatioReporter rep;
  if (driver) {
    register_raw();
    benchmark::RunSpecifiedBenchmarks(&rep);
    for (int w = 1; w < rt.size(); ++w) MPI_Send(nullptr, 0, MPI_BYTE, w, tag_stop, raw_comm());
    benchmark::ClearRegisteredBenchmarks();
  } else {
    echo_loop();
  }
  // phase 2: dispatch (groups built on every rank, then the workers serve)
  for (int n : rank_counts()) {
    static std::vector<std::unique_ptr<rlflow::ResourcePool>> pools;
    pools.push_back(std::make_unique<rlflow::ResourcePool>("bench" + std::to_string(n), std::vector<int>{n}, 1));
    groups()[n] = std::make_unique<Group>(*pools.back());
  }
  {
    auto scope = rlflow::mpi::drive();
    if (scope) {
      register_dispatch();
      benchmark::RunSpecifiedBenchmarks(&rep);
      rep.print_ratios();
    }
  }
  groups().clear();
  benchmark::Shutdown();
  return 0;
}
