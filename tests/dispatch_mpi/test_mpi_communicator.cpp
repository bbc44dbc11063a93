// tests/dispatch_mpi/test_mpi_communicator.cpp <-> include/rlflow/mpi/mpi_communicator.hpp:
// comm::MpiCommunicator over every process of the job, against a plain loop on each rank (every
// rank can rebuild every rank's random input from its seed) and against the in-process
// comm::LocalCommunicator on the same inputs: the sums must be the same bits (rank order).
#include <random>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include <rlflow/mpi/mpi.hpp>

namespace test_mpi_communicator {

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

namespace {
//! Every rank's TP and DP sums of a mesh (tp, dp) split from 'world', as a plain loop: the
//! members of a group in rank order, their inputs summed in that order.
std::vector<float> mesh_expect(int ws, int tp, int me, std::size_t n, std::uint64_t seed, bool tp_group) {
  int const dp = ws / tp;
  std::vector<int> members;
  for (int r = 0; r < ws; ++r)
    if (tp_group ? r / tp == me / tp : r % tp == me % tp) members.push_back(r);
  (void)dp;
  std::vector<float> acc = input_of<float>(members[0], n, seed);
  for (std::size_t k = 1; k < members.size(); ++k) {
    auto v = input_of<float>(members[k], n, seed);
    for (std::size_t i = 0; i < n; ++i) acc[i] += v[i];
  }
  return acc;
}
//! The same mesh on in-process communicators (one thread per rank): rank 'me's TP and DP sums.
std::pair<std::vector<float>, std::vector<float>> local_mesh(int ws, int tp, int me, std::size_t n, std::uint64_t seed) {
  auto comms = comm::LocalCommunicator::make_group(ws);
  std::vector<std::vector<float>> t(static_cast<std::size_t>(ws)), d(static_cast<std::size_t>(ws));
  std::vector<std::thread> ts;
  for (int r = 0; r < ws; ++r)
    ts.emplace_back([&, r] {
      auto m = comm::split_mesh(*comms[static_cast<std::size_t>(r)], tp);
      t[static_cast<std::size_t>(r)] = d[static_cast<std::size_t>(r)] = input_of<float>(r, n, seed);
      m.tp->allreduce_sum(std::span<float>(t[static_cast<std::size_t>(r)]));
      m.dp->allreduce_sum(std::span<float>(d[static_cast<std::size_t>(r)]));
    });
  for (auto& th : ts) th.join();
  return {t[static_cast<std::size_t>(me)], d[static_cast<std::size_t>(me)]};
}
}  // namespace

TEST_CASE("MpiCommunicator::split: TP/DP sub-communicators of a mesh equal the loop and the in-process split", "[mpi][comm][split]") {
  if (!mpi::launched()) return;
  mpi::Runtime::get();
  comm::MpiCommunicator c(MPI_COMM_WORLD);
  int const ws = c.size(), me = c.rank();
  for (int tp = 1; tp <= ws; ++tp) {
    if (ws % tp) continue;
    auto m = comm::split_mesh(c, tp);
    REQUIRE(m.tp->size() == tp);
    REQUIRE(m.dp->size() == ws / tp);
    REQUIRE(m.tp->rank() == me % tp);  // GroupShape's order: rank = dp_rank * tp + tp_rank
    REQUIRE(m.dp->rank() == me / tp);
    for (std::size_t n : {std::size_t{1}, std::size_t{5}, std::size_t{1001}}) {
      auto t = input_of<float>(me, n, 3), d = t;
      m.tp->allreduce_sum(std::span<float>(t));
      m.dp->allreduce_sum(std::span<float>(d));
      REQUIRE(t == mesh_expect(ws, tp, me, n, 3, true));
      REQUIRE(d == mesh_expect(ws, tp, me, n, 3, false));
      auto const [lt, ld] = local_mesh(ws, tp, me, n, 3);
      REQUIRE(t == lt);
      REQUIRE(d == ld);
    }
    // broadcast from the TP group's last rank, all-gather over DP, barrier
    std::vector<float> b{static_cast<float>(me), 1.f};
    m.tp->broadcast(std::span<float>(b), tp - 1);
    REQUIRE(b[0] == static_cast<float>((me / tp) * tp + tp - 1));
    std::vector<float> one{static_cast<float>(me)}, all(static_cast<std::size_t>(ws / tp));
    m.dp->allgather(std::span<float const>(one), std::span<float>(all));
    for (int k = 0; k < ws / tp; ++k) REQUIRE(all[static_cast<std::size_t>(k)] == static_cast<float>(k * tp + me % tp));
    m.tp->barrier();
    // a split of a split (key reverses the order)
    auto rev = m.tp->split(0, -m.tp->rank());
    REQUIRE(rev->rank() == tp - 1 - m.tp->rank());
  }
  // a negative color is refused on every rank (after agreeing, so no rank is left waiting)
  REQUIRE_THROWS_WITH(c.split(me == ws - 1 ? -1 : 0, 0),
                      Catch::Contains("rank " + std::to_string(ws - 1) + " passed color -1") && Catch::Contains(">= 0"));
  c.barrier();  // still usable
}

namespace {
//! A worker with its TP and DP groups split from the group's communicator at construction.
struct MeshRole {
  using role_tag = rlflow::worker_tag;
  static constexpr std::string_view role_name = "MeshRole";
  static int tp_of(WorkerContext const& c) { return c.comm().size() % 2 == 0 ? 2 : 1; }
  explicit MeshRole(WorkerContext const& c) : ctx(c), mesh(comm::split_mesh(c.comm(), tp_of(c))) {}
  WorkerContext const& ctx;
  comm::MeshCommunicators mesh;
  //! [tp sum, tp count, dp sum, dp count, tp rank, dp rank]; rank bad_rank throws before its
  //! TP all-reduce (its TP peer waits there, the DP peers wait in theirs).
  std::vector<float> sums(int bad_rank) {
    if (ctx.rank == bad_rank) throw std::runtime_error("failed before the TP all-reduce");
    std::vector<float> t{static_cast<float>(ctx.rank + 1), 1.f}, d = t;
    mesh.tp->allreduce_sum(std::span<float>(t));
    mesh.dp->allreduce_sum(std::span<float>(d));
    return {t[0], t[1], d[0], d[1], static_cast<float>(mesh.tp->rank()), static_cast<float>(mesh.dp->rank())};
  }
  //! A large result (a bulk segment in the reply): n values depending on the rank.
  std::vector<float> big(int n) const {
    std::vector<float> v(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = static_cast<float>(i % 97) + 0.25f * static_cast<float>(ctx.rank);
    return v;
  }
  using methods = rlflow::methods<rlflow::method<&MeshRole::sums, rlflow::dispatch::OneToAll>,
                                  rlflow::method<&MeshRole::big, rlflow::dispatch::OneToAll>>;
};
}  // namespace

TEST_CASE("MpiCommunicator::split in a worker group: equal to in-process, a rank failing mid-call is named, then it works",
          "[mpi][comm][split][errors]") {
  int const W = mpi::launched() ? mpi::Runtime::get().size() - 1 : 4;
  ResourcePool pool("mesh", {W}, 1);
  WorkerGroup<MeshRole, dispatch::Mpi> g(pool);
  auto driver = mpi::drive();
  if (!driver) return;
  ResourcePool lpool("mesh_local", {W}, 1);
  WorkerGroup<MeshRole> ref(lpool);
  auto const expect = ref.call<&MeshRole::sums>(-1);
  REQUIRE(g.call<&MeshRole::sums>(-1) == expect);
  // large vectors in replies travel as bulk segments; the worker keeps them alive until sent
  for (int n : {10, 100000, 300000}) REQUIRE(g.call<&MeshRole::big>(n) == ref.call<&MeshRole::big>(n));
  auto const filled = g.execute_func_rank_zero([](int n) { return std::vector<double>(static_cast<std::size_t>(n), 1.5); }, 50000);
  REQUIRE(filled == std::vector<double>(50000, 1.5));
  if (W > 1) {
    for (int bad = 0; bad < W; ++bad) {
      REQUIRE_THROWS_WITH(g.call<&MeshRole::sums>(bad), Catch::Contains("MeshRole::sums failed on rank " + std::to_string(bad)) &&
                                                            Catch::Contains("failed before the TP all-reduce"));
      REQUIRE(g.call<&MeshRole::sums>(-1) == expect);  // the sub-communicators renewed themselves
    }
  }
}

TEST_CASE("MpiCommunicator: gather to one rank equals the loop, non-roots' buffers untouched", "[mpi][comm]") {
  if (!mpi::launched()) return;
  mpi::Runtime::get();
  comm::MpiCommunicator c(MPI_COMM_WORLD);
  int const ws = c.size(), me = c.rank();
  for (int root = 0; root < ws; ++root) {
    auto in = input_of<float>(me, 7, 11 + std::uint64_t(root));
    std::vector<float> out(me == root ? std::size_t(7 * ws) : 2, -7.f);
    c.gather(in, me == root ? std::span<float>(out) : std::span<float>(), root);
    if (me == root) {
      for (int r = 0; r < ws; ++r)
        REQUIRE(std::vector<float>(out.begin() + 7 * r, out.begin() + 7 * (r + 1)) == input_of<float>(r, 7, 11 + std::uint64_t(root)));
    } else {
      REQUIRE(out == std::vector<float>(2, -7.f));
    }
  }
  std::vector<float> in{1.f}, wrong(std::size_t(ws) + 1);
  REQUIRE_THROWS_AS(c.gather(in, {}, ws), value_error);  // a root outside the group, on every rank
  if (me == 0) REQUIRE_THROWS_AS(c.gather(in, wrong, 0), value_error);
  c.barrier();
  std::vector<float> one{1.f};  // and the communicator still works
  c.allreduce_sum(std::span<float>(one));
  REQUIRE(one[0] == static_cast<float>(ws));
}

}  // namespace test_mpi_communicator
