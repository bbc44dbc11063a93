// tests/dispatch_mpi/test_nccl_communicator.cu <-> include/rlflow/comm/nccl_communicator.hpp:
// comm::NcclCommunicator bootstrapped over MPI, one device per rank (run: mpiexec -np 2 with two
// GPUs). The all-reduce must equal the rank-order loop bit for bit (every rank rebuilds every
// rank's input from its seed); broadcast, all-gather and gather against the host values; split into
// sub-communicators (ncclCommSplit) sums in the sub-group's rank order. Label 'cuda':
// skipped (with a warning) where no GPU, or fewer GPUs than ranks, answers.
#include <mpi.h>

#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include <rlflow/comm/nccl_communicator.hpp>

namespace {
struct MpiSession {
  MpiSession() {
    int init = 0;
    MPI_Initialized(&init);
    if (!init) {
      int provided = 0;
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    }
  }
  ~MpiSession() {
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Finalize();
  }
};
MpiSession& session() {
  static MpiSession s;
  return s;
}
template <class T>
std::vector<T> input_of(int rank, std::size_t n) {
  std::mt19937_64 rng(1000 + static_cast<std::uint64_t>(rank));
  std::uniform_real_distribution<double> u(-100.0, 100.0);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(u(rng));
  return v;
}
template <class T>
struct DeviceVec {
  T* p = nullptr;
  std::size_t n = 0;
  explicit DeviceVec(std::vector<T> const& h) : n(h.size()) {
    cudaMalloc(&p, (n ? n : 1) * sizeof(T));
    cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice);
  }
  ~DeviceVec() { cudaFree(p); }
  std::vector<T> host() const {
    std::vector<T> h(n);
    cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
  }
};
}  // namespace

TEST_CASE("NcclCommunicator: rank-order all-reduce, broadcast and all-gather over MPI bootstrap", "[cuda][nccl]") {
  session();
  int size = 1, rank = 0, devices = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < size) {
    WARN("fewer GPUs (" << devices << ") than ranks (" << size << "): NCCL test skipped");
    return;
  }
  cudaSetDevice(rank);
  rlflow::comm::NcclCommunicator c(MPI_COMM_WORLD);
  REQUIRE(c.size() == size);
  for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{4099}}) {
    DeviceVec<float> d(input_of<float>(rank, n));
    c.allreduce_sum(std::span<float>(d.p, n));
    std::vector<float> expect(n);
    for (std::size_t i = 0; i < n; ++i) {
      float acc = input_of<float>(0, n)[i];
      for (int r = 1; r < size; ++r) acc += input_of<float>(r, n)[i];
      expect[i] = acc;
    }
    REQUIRE(d.host() == expect);
    DeviceVec<double> dd(input_of<double>(rank, n));
    c.allreduce_sum(std::span<double>(dd.p, n));
    for (std::size_t i = 0; i < n; ++i) {
      double acc = input_of<double>(0, n)[i];
      for (int r = 1; r < size; ++r) acc += input_of<double>(r, n)[i];
      REQUIRE(dd.host()[i] == acc);
    }
  }
  DeviceVec<float> b(input_of<float>(rank, 33));
  c.broadcast(std::span<float>(b.p, 33), size - 1);
  REQUIRE(b.host() == input_of<float>(size - 1, 33));
  DeviceVec<float> in(input_of<float>(rank, 5));
  DeviceVec<float> out(std::vector<float>(static_cast<std::size_t>(5 * size)));
  c.allgather(std::span<float const>(in.p, 5), std::span<float>(out.p, out.n));
  auto h = out.host();
  for (int r = 0; r < size; ++r)
    REQUIRE(std::vector<float>(h.begin() + 5 * r, h.begin() + 5 * (r + 1)) == input_of<float>(r, 5));
  for (int root : {0, size - 1}) {
    DeviceVec<float> g(std::vector<float>(rank == root ? static_cast<std::size_t>(5 * size) : 0));
    c.gather(std::span<float const>(in.p, 5), std::span<float>(g.p, g.n), root);
    auto gh = g.host();
    if (rank == root)
      for (int r = 0; r < size; ++r)
        REQUIRE(std::vector<float>(gh.begin() + 5 * r, gh.begin() + 5 * (r + 1)) == input_of<float>(r, 5));
    else
      REQUIRE(gh.empty());
  }
  c.barrier();
}

TEST_CASE("NcclCommunicator::split: sub-communicators sum in their own rank order", "[cuda][nccl]") {
  session();
  int size = 1, rank = 0, devices = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < size) {
    WARN("fewer GPUs (" << devices << ") than ranks (" << size << "): NCCL split test skipped");
    return;
  }
  cudaSetDevice(rank);
  rlflow::comm::NcclCommunicator c(MPI_COMM_WORLD);
  std::size_t const n = 1031;
  SECTION("one group with the ranks reversed: sub-rank s is world rank size-1-s") {
    auto sub = c.split(0, size - rank);
    REQUIRE(sub->size() == size);
    REQUIRE(sub->rank() == size - 1 - rank);
    DeviceVec<float> d(input_of<float>(rank, n));
    sub->allreduce_sum(std::span<float>(d.p, n));
    std::vector<float> expect(n);
    for (std::size_t i = 0; i < n; ++i) {
      float acc = input_of<float>(size - 1, n)[i];  // sub-rank 0 first
      for (int s = 1; s < size; ++s) acc += input_of<float>(size - 1 - s, n)[i];
      expect[i] = acc;
    }
    REQUIRE(d.host() == expect);
  }
  SECTION("a group per rank: the all-reduce is the identity") {
    auto sub = c.split(rank, 0);
    REQUIRE(sub->size() == 1);
    REQUIRE(sub->rank() == 0);
    DeviceVec<float> d(input_of<float>(rank, n));
    sub->allreduce_sum(std::span<float>(d.p, n));
    REQUIRE(d.host() == input_of<float>(rank, n));
  }
  SECTION("a negative color is an error naming it, before any collective") {
    REQUIRE_THROWS_WITH(c.split(-1, 0), Catch::Contains("color -1"));
  }
  c.barrier();
}
