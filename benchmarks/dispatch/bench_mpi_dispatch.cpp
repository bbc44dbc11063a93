// benchmarks/dispatch/bench_mpi_dispatch.cpp: dispatch overhead of the MPI backend.
//   BM_MpiPingPong/bytes:B                      raw MPI_Send/MPI_Recv round trip, rank 0 <-> rank 1
//   BM_MpiRawEcho/ranks:N/bytes:B               raw: rank 0 sends B bytes to each of N ranks
//                                               (MPI_Isend), each sends them back; the baseline
//   BM_MpiDispatch_OneToAll/ranks:N             WorkerGroup<Bench, Mpi> call of a no-op method
//   BM_MpiDispatch_DPComputeProto/ranks:N/rows:R  R rows x 3 float32 columns of width 256 split
//                                               over N ranks, echoed back, concatenated
// The raw and the dispatch benchmarks run interleaved in rounds (raw, dispatch, raw, ...; 5 rounds
// by default, --rounds=N), while the worker ranks serve and, on a second thread, echo raw
// messages: a load change on a shared machine hits both sides of a ratio alike. Afterwards it
// prints the target ratios from the medians over the rounds: OneToAll / RawEcho(64 B) (target
// <= 2) and DPComputeProto / RawEcho of the same bytes (target <= 1.3). Large DataProto columns
// travel as bulk segments (wire::Bulk): no serialization pass; the driver's concat of the parts
// is the one copy the raw echo does not make. Run: mpiexec --oversubscribe -np 5 build/benchmarks/dispatch/bench_mpi_dispatch
// (started without mpiexec, it starts itself that way). Timings are never asserted.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <thread>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <rlflow/core/data_proto.hpp>
#include <rlflow/mpi/mpi.hpp>

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

int rounds = 5;
void register_round() {
  auto reg = [](const char* name, auto fn, std::vector<std::string> names, std::vector<std::int64_t> args) {
    auto* b = benchmark::RegisterBenchmark(name, fn);
    if (names.size() == 1) b->ArgName(names[0]);
    else b->ArgNames(names);
    b->Args(args)->UseRealTime();
  };
  reg("BM_MpiPingPong", BM_MpiPingPong, {"bytes"}, {64});
  for (int n : rank_counts()) {
    reg("BM_MpiRawEcho", BM_MpiRawEcho, {"ranks", "bytes"}, {n, 64});
    reg("BM_MpiDispatch_OneToAll", BM_MpiDispatch_OneToAll, {"ranks"}, {n});
    for (auto rows : row_counts) {
      reg("BM_MpiRawEcho", BM_MpiRawEcho, {"ranks", "bytes"}, {n, chunk_bytes(rows, n)});
      reg("BM_MpiDispatch_DPComputeProto", BM_MpiDispatch_DPComputeProto, {"ranks", "rows"}, {n, rows});
    }
  }
}

//! Console output; remembers every round's time per benchmark, for the medians of the ratios.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(std::vector<Run> const& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (auto const& r : runs)
      if (r.run_type == Run::RT_Iteration) times_[r.run_name.str()].push_back(r.GetAdjustedRealTime());
  }
  void Finalize() override {}  // ratios are printed once, after both phases
  void print_ratios() {
    auto get = [&](std::string const& k) {
      auto it = times_.find(k);
      if (it == times_.end() || it->second.empty()) return -1.0;
      auto v = it->second;
      std::sort(v.begin(), v.end());
      std::size_t const m = v.size() / 2;
      return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
    };
    std::printf("\nratios (medians over %d interleaved rounds of this run):\n", rounds);
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
  std::map<std::string, std::vector<double>> times_;
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
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--rounds=", 9) == 0) rounds = std::max(1, std::atoi(argv[i] + 9));
  auto& rt = rlflow::mpi::Runtime::get();
  benchmark::Initialize(&argc, argv);
  // groups built on every rank; the worker ranks serve them and echo raw messages on a thread
  for (int n : rank_counts()) {
    static std::vector<std::unique_ptr<rlflow::ResourcePool>> pools;
    pools.push_back(std::make_unique<rlflow::ResourcePool>("bench" + std::to_string(n), std::vector<int>{n}, 1));
    groups()[n] = std::make_unique<Group>(*pools.back());
  }
  raw_comm();
  std::thread echo;
  if (!rt.is_driver()) echo = std::thread(echo_loop);
  {
    auto scope = rlflow::mpi::drive();
    if (scope) {
      RatioReporter rep;
      for (int r = 0; r < rounds; ++r) register_round();
      benchmark::RunSpecifiedBenchmarks(&rep);
      rep.print_ratios();
      for (int w = 1; w < rt.size(); ++w) MPI_Send(nullptr, 0, MPI_BYTE, w, tag_stop, raw_comm());
    }
  }
  if (echo.joinable()) echo.join();
  groups().clear();
  benchmark::Shutdown();
  return 0;
}
