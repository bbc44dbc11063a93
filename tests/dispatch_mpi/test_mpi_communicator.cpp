// tests/dispatch_mpi/test_mpi_communicator.cpp <-> include/rlflow/dispatch/mpi_communicator.hpp:
// comm::MpiCommunicator over every process of the job, against a plain loop on each rank (every
// rank can rebuild every rank's random input from its seed) and against the in-process
// comm::LocalCommunicator on the same inputs: the sums must be the same bits (rank order).
#include <random>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include <rlflow/dispatch/mpi.hpp>

using namespace rlflow;

namespace {
template <class T>
std::vector<T> input_of(int rank, std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed * 1000 + static_cast<std::uint64_t>(rank));
  std::uniform_real_distribution<double> u(-100.0, 100.0);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(u(rng));
  return v;
}

//! What the in-process communicator gives for the same inputs (one thread per rank).
template <class T>
std::vector<T> local_allreduce(int ws, std::size_t n, std::uint64_t seed) {
  auto comms = comm::LocalCommunicator::make_group(ws);
  std::vector<std::vector<T>> data(static_cast<std::size_t>(ws));
  std::vector<std::thread> ts;
  for (int r = 0; r < ws; ++r) {
    data[static_cast<std::size_t>(r)] = input_of<T>(r, n, seed);
    ts.emplace_back([&, r] { comms[static_cast<std::size_t>(r)]->allreduce_sum(std::span<T>(data[static_cast<std::size_t>(r)])); });
  }
  for (auto& t : ts) t.join();
  return data[0];
}
}  // namespace

TEST_CASE("MpiCommunicator: all-reduce equals the rank-order loop and the in-process communicator bit for bit",
          "[mpi][comm]") {
  if (!mpi::launched()) return;  // needs mpiexec
  mpi::Runtime::get();           // MPI is initialized
  comm::MpiCommunicator c(MPI_COMM_WORLD);
  int const ws = c.size(), me = c.rank();
  REQUIRE(ws >= 2);
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{1000}, std::size_t{4097}}) {
    for (std::uint64_t seed : {1u, 2u}) {
      auto f = input_of<float>(me, n, seed);
      c.allreduce_sum(std::span<float>(f));
      std::vector<float> expect(n);
      for (std::size_t i = 0; i < n; ++i) {
        float acc = input_of<float>(0, n, seed)[i];
        for (int r = 1; r < ws; ++r) acc += input_of<float>(r, n, seed)[i];
        expect[i] = acc;
      }
      REQUIRE(f == expect);
      REQUIRE(f == local_allreduce<float>(ws, n, seed));
      auto d = input_of<double>(me, n, seed);
      c.allreduce_sum(std::span<double>(d));
      REQUIRE(d == local_allreduce<double>(ws, n, seed));
    }
  }
}

TEST_CASE("MpiCommunicator: broadcast, all-gather, barrier and length checks", "[mpi][comm]") {
  if (!mpi::launched()) return;
  mpi::Runtime::get();
  comm::MpiCommunicator c(MPI_COMM_WORLD);
  int const ws = c.size(), me = c.rank();
  for (int root = 0; root < ws; ++root) {
    auto v = input_of<float>(me, 17, 3);
    c.broadcast(std::span<float>(v), root);
    REQUIRE(v == input_of<float>(root, 17, 3));
  }
  auto in = input_of<float>(me, 5, 4);
  std::vector<float> out(static_cast<std::size_t>(5 * ws));
  c.allgather(in, out);
  for (int r = 0; r < ws; ++r) {
    auto e = input_of<float>(r, 5, 4);
    REQUIRE(std::vector<float>(out.begin() + 5 * r, out.begin() + 5 * (r + 1)) == e);
  }
  c.barrier();
  std::vector<float> wrong(3);
  REQUIRE_THROWS_AS(c.allgather(in, wrong), value_error);
  REQUIRE_THROWS_AS(c.broadcast(std::span<float>(in), ws), value_error);
  // ranks passing different lengths: every rank gets the error naming both lengths
  std::vector<float> uneven(static_cast<std::size_t>(me + 1), 1.f);
  REQUIRE_THROWS_WITH(c.allreduce_sum(std::span<float>(uneven)), Catch::Contains("every rank must pass the same length"));
  // and the communicator still works
  std::vector<float> one{1.f};
  c.allreduce_sum(std::span<float>(one));
  REQUIRE(one[0] == static_cast<float>(ws));
}
