// tests/dispatch_mpi/fault_main.cpp: a job whose worker rank dies or stops in the middle of a
// call (run by run_fault.cmake under mpiexec). Usage: test_mpi_fault kill|stop|throw.
// kill: group rank 1 raises SIGKILL; stop: it raises SIGSTOP (alive but silent); throw: it
// throws. The driver prints the call's error and exits 3; "no error" (exit 0) would be a bug.
#include <csignal>
#include <cstdio>
#include <string>

#include <rlflow/mpi/mpi.hpp>

namespace {
struct Victim {
  using role_tag = rlflow::worker_tag;
  explicit Victim(rlflow::WorkerContext const& c) : rank(c.rank) {}
  int rank;
  int work(std::string how) {
    if (rank == 1) {
      if (how == "kill") std::raise(SIGKILL);
      if (how == "stop") std::raise(SIGSTOP);
      if (how == "throw") throw std::runtime_error("thrown on purpose");
    }
    return rank;
  }
  using methods = rlflow::methods<rlflow::method<&Victim::work, rlflow::dispatch::OneToAll>>;
};
}  // namespace

int main(int argc, char** argv) {
  std::string const how = argc > 1 ? argv[1] : "kill";
  try {
    rlflow::ResourcePool pool("p", {2}, 1);
    rlflow::WorkerGroup<Victim, rlflow::dispatch::Mpi> g(pool);
    auto driver = rlflow::mpi::drive();
    if (!driver) return 0;
    auto ok = g.call<&Victim::work>(std::string("none"));
    std::printf("warm-up call returned %zu results\n", ok.size());
    std::fflush(stdout);
    g.call<&Victim::work>(how);
    std::printf("no error\n");
    return 0;
  } catch (std::exception const& e) {
    std::printf("driver caught: %s\n", e.what());
    std::fflush(stdout);
    return 3;
  }
}
