// tests/dispatch_mpi/test_mpi_group.cpp <-> include/rlflow/mpi/mpi.hpp: the dispatch suite of
// tests/dispatch/test_worker_group.cpp on WorkerGroup<Calc, dispatch::Mpi> under mpiexec (run
// with 3 and 5 processes: 2 and 4 worker ranks). Every call is compared with the same call on an
// in-process WorkerGroup<Calc> of the same size in the driver process: results must be identical.
// Each TEST_CASE builds its MPI groups on every rank, then mpi::drive() sends the worker ranks
// into their serve loop until the driver leaves the case.
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <rlflow/mpi/mpi.hpp>

#include "dispatch/roles.hpp"

namespace test_mpi_group {

using namespace rlflow;
using namespace test_dispatch;
using MpiCalc = WorkerGroup<Calc, dispatch::Mpi>;

namespace {
//! Worker ranks of this job (4 when not started by mpiexec: then the groups run in process).
int workers() { return mpi::launched() ? mpi::Runtime::get().size() - 1 : 4; }
}  // namespace

TEST_CASE("mpi: ONE_TO_ALL, ALL_TO_ALL, RANK_ZERO, execute_all and a custom mode equal in-process", "[mpi][group]") {
  int const W = workers();
  ResourcePool pool("cpu_pool", {W}, 4);
  MpiCalc g(pool);
  WorkerGroup<Pair, dispatch::Mpi> pg(pool);
  auto driver = mpi::drive();
  if (!driver) return;
  REQUIRE(g.in_process() == !mpi::launched());
  WorkerGroup<Calc> ref(pool);
  REQUIRE(g.world_size() == W);
  REQUIRE(g.call<&Calc::add_rank>(2) == ref.call<&Calc::add_rank>(2));
  std::vector<int> a(static_cast<std::size_t>(W)), b(static_cast<std::size_t>(W));
  for (int r = 0; r < W; ++r) a[static_cast<std::size_t>(r)] = r + 1, b[static_cast<std::size_t>(r)] = 7 + r;
  auto const s = g.call<&Calc::sum2>(per_rank(a), per_rank(b));
  REQUIRE(s == ref.call<&Calc::sum2>(per_rank(a), per_rank(b)));
  for (int r = 0; r < W; ++r) REQUIRE(s[static_cast<std::size_t>(r)] == 8 + 2 * r);
  REQUIRE(g.call<&Calc::five>() == 5);
  REQUIRE(g.execute_func_rank_zero([](int x, int y) { return x * y; }, 6, 7) == 42);
  REQUIRE(g.execute_all<&Calc::unregistered>(3) == ref.execute_all<&Calc::unregistered>(3));
  auto pa = g.execute_all_async<&Calc::unregistered>(per_rank(a));
  REQUIRE(std::move(pa).get() == ref.execute_all<&Calc::unregistered>(per_rank(a)));
  g.call<&Calc::nothing>();
  REQUIRE(g.call<&Calc::env>("WG_BACKEND") == std::vector<std::string>(static_cast<std::size_t>(W), mpi::launched() ? "mpi" : "in_process"));
  REQUIRE(g.call<&Calc::env>("RANK") == ref.call<&Calc::env>("RANK"));
  REQUIRE(g.call<&Calc::coords>() == ref.call<&Calc::coords>());
  WorkerGroup<Pair> pref(pool);
  REQUIRE(pg.call<&Pair::sum2>(per_rank(std::vector<int>{1, 2}), per_rank(std::vector<int>{7, 8})) ==
          pref.call<&Pair::sum2>(per_rank(std::vector<int>{1, 2}), per_rank(std::vector<int>{7, 8})));
}

TEST_CASE("mpi: the group laws over random inputs on every group size, DataProto bits identical", "[mpi][group]") {
  int const W = workers();
  std::vector<std::unique_ptr<ResourcePool>> pools;
  std::vector<std::unique_ptr<MpiCalc>> gs;
  for (int ws = 1; ws <= W; ++ws) {
    pools.push_back(std::make_unique<ResourcePool>("p" + std::to_string(ws), std::vector<int>{ws}, 2));
    gs.push_back(std::make_unique<MpiCalc>(*pools.back()));
  }
  auto driver = mpi::drive();
  if (!driver) return;
  std::mt19937 rng(5);
  for (int ws = 1; ws <= W; ++ws) {
    MpiCalc& g = *gs[static_cast<std::size_t>(ws - 1)];
    WorkerGroup<Calc> ref(*pools[static_cast<std::size_t>(ws - 1)]);
    for (int trial = 0; trial < 6; ++trial) {
      std::int64_t const n = ws * static_cast<std::int64_t>(rng() % 7);
      auto d = make_rows(n, rng());
      REQUIRE(g.call<&Calc::echo>(d).get() == d);  // lossless (non-blocking)
      REQUIRE(ref.call<&Calc::echo>(d).get() == d);
      REQUIRE(g.call<&Calc::seen>() == ref.call<&Calc::seen>());  // the same chunk on the same rank
      REQUIRE(g.call<&Calc::plus>(d) == ref.call<&Calc::plus>(d));
      int const v = static_cast<int>(rng() % 100);
      REQUIRE(g.call<&Calc::add_rank>(v) == ref.call<&Calc::add_rank>(v));
      REQUIRE(g.call<&Calc::metric>(d) == ref.call<&Calc::metric>(d));
    }
    auto e = make_rows(2 * ws, 21);
    REQUIRE(g.call<&Calc::apply>(&double_x, e) == double_x(e));  // DP_COMPUTE_PROTO_WITH_FUNC
  }
}

TEST_CASE("mpi: auto-padding returns exactly the input, blocking and non-blocking", "[mpi][group][padding]") {
  int const W = workers();
  ResourcePool pool("p", {W}, 2);
  MpiCalc g(pool);
  auto driver = mpi::drive();
  if (!driver) return;
  WorkerGroup<Calc> ref(pool);
  for (std::int64_t n : {std::int64_t{10}, std::int64_t{1}, std::int64_t{W}, std::int64_t{2 * W + 1}}) {
    auto d = make_rows(n, static_cast<std::uint64_t>(n));
    d.set_auto_padding(true);
    DataProto const before = d;
    DataProto b = g.call<&Calc::plus>(d);
    REQUIRE(b == ref.call<&Calc::plus>(d));
    REQUIRE(b.size() == n);
    REQUIRE(g.call<&Calc::echo>(d).get() == d);
    REQUIRE(ref.call<&Calc::echo>(d).get() == d);
    REQUIRE(d == before);
    REQUIRE(g.call<&Calc::seen>() == ref.call<&Calc::seen>());
    REQUIRE(g.call<&Calc::metric>(d) == ref.call<&Calc::metric>(d));
  }
  if (W > 1) REQUIRE_THROWS_AS(g.call<&Calc::plus>(make_rows(W + 1, 1)), shape_error);
  REQUIRE(g.call<&Calc::add_rank>(0).size() == static_cast<std::size_t>(W));
}

TEST_CASE("mpi: Pendings chain into the next call, hundreds in flight resolve in any order", "[mpi][group][async]") {
  int const W = workers();
  ResourcePool pool("p", {W}, 2);
  MpiCalc a(pool), b(pool);
  auto driver = mpi::drive();
  if (!driver) return;
  auto d = make_rows(7, 3);
  d.set_auto_padding(true);
  Pending<DataProto> p = a.call<&Calc::echo>(d);
  DataProto chained = b.call<&Calc::plus>(p);
  DataProto direct = b.call<&Calc::plus>(a.call<&Calc::echo>(d).get());
  REQUIRE(chained == direct);
  REQUIRE(chained.size() == 7);
  std::vector<Pending<DataProto>> ps;
  std::vector<DataProto> ins;
  for (int i = 0; i < 300; ++i) {
    ins.push_back(make_rows(W * (i % 4), static_cast<std::uint64_t>(i)));
    ps.push_back(a.call<&Calc::echo>(ins.back()));
  }
  for (int i = 299; i >= 0; --i) REQUIRE(ps[static_cast<std::size_t>(i)].get() == ins[static_cast<std::size_t>(i)]);
  auto [x, y] = sync_wait(when_all(a.call<&Calc::echo>(d), b.call<&Calc::echo>(d)));
  REQUIRE(x == y);
}

TEST_CASE("mpi: mesh dispatch DPxTP2 gives TP ranks the same chunk", "[mpi][group][mesh]") {
  int const W = workers();
  int const ws = W - W % 2;
  ResourcePool pool("p", {ws}, 1);
  GroupOptions opts;
  opts.tp = 2;
  MpiCalc g(pool, opts);
  auto driver = mpi::drive();
  if (!driver) return;
  ResourcePool pool2("p2", {ws}, 1);
  WorkerGroup<Calc> ref(pool2, opts);
  REQUIRE(g.call<&Calc::coords>() == ref.call<&Calc::coords>());
  auto d = make_rows(3 * ws / 2, 8);
  REQUIRE(g.call<&Calc::echo>(d).get() == d);
  REQUIRE(ref.call<&Calc::echo>(d).get() == d);
  REQUIRE(g.call<&Calc::seen>() == ref.call<&Calc::seen>());
}

TEST_CASE("mpi: a throwing worker fails the call naming role, method and rank, the next call works",
          "[mpi][group][errors]") {
  int const W = workers();
  ResourcePool pool("p", {W}, 1);
  MpiCalc g(pool);
  auto driver = mpi::drive();
  if (!driver) return;
  for (int bad = 0; bad < W; ++bad) {
    REQUIRE_THROWS_WITH(g.call<&Calc::fail_on>(bad),
                        Catch::Contains("Calc::fail_on failed on rank " + std::to_string(bad) + " of " + std::to_string(W)) &&
                            Catch::Contains("boom on purpose"));
    auto ok = g.call<&Calc::fail_on>(-1);
    REQUIRE(ok.size() == static_cast<std::size_t>(W));
    for (int r = 0; r < W; ++r) REQUIRE(ok[static_cast<std::size_t>(r)] == r);
  }
  REQUIRE_THROWS_AS(g.call<&Calc::fail_on>(W - 1), worker_error);
  // a rank that fails while the others wait in a collective: they leave it, the call names the
  // failing rank, and collectives work again afterwards
  if (W > 1) {
    REQUIRE_THROWS_WITH(g.call<&Calc::reduce>(1), Catch::Contains("Calc::reduce failed on rank 1") &&
                                                      Catch::Contains("failed before the all-reduce"));
  }
  auto ok = g.call<&Calc::reduce>(-1);
  float const sum = static_cast<float>(W * (W - 1) / 2);
  for (auto const& v : ok) REQUIRE(v == std::vector<float>{sum, static_cast<float>(W)});
  REQUIRE_THROWS_WITH(g.call<&Calc::env>("missing"), Catch::Contains("no env key 'missing'"));
  auto d = make_rows(W, 1);
  REQUIRE(g.call<&Calc::echo>(d).get() == d);
}

namespace {
struct Fragile {
  using role_tag = rlflow::worker_tag;
  explicit Fragile(WorkerContext const& c) {
    if (c.rank == c.world_size - 1) throw std::runtime_error("no device");
  }
  int id() { return 1; }
  using methods = rlflow::methods<rlflow::method<&Fragile::id, dispatch::OneToAll>>;
};
}  // namespace

TEST_CASE("mpi: a constructor that throws fails the group on every rank, naming the rank", "[mpi][group][errors]") {
  int const W = workers();
  ResourcePool pool("p", {W}, 1);
  std::string what;
  try {
    WorkerGroup<Fragile, dispatch::Mpi> f(pool);
  } catch (worker_error const& e) {
    what = e.what();
  }
  REQUIRE(pool.used_slots() == std::vector<int>(static_cast<std::size_t>(W), 0));  // the lease was returned
  MpiCalc g(pool);  // the job still works
  auto driver = mpi::drive();
  if (!driver) return;
  REQUIRE_THAT(what, Catch::Contains("rank " + std::to_string(W - 1) + " of " + std::to_string(W)) &&
                         Catch::Contains("no device"));
  REQUIRE(g.call<&Calc::five>() == 5);
  g.shutdown();
  REQUIRE_FALSE(g.running());
  REQUIRE_THROWS_WITH(g.call<&Calc::add_rank>(1), Catch::Contains("shut down"));
}

TEST_CASE("mpi: a group larger than the job is refused with the mpirun fix", "[mpi][group][errors]") {
  if (!mpi::launched()) return;
  int const W = workers();
  ResourcePool pool("big", {W + 1}, 1);
  REQUIRE_THROWS_WITH(MpiCalc(pool), Catch::Contains("mpirun -np " + std::to_string(W + 2)));
}

// Large tensor columns (>= wire::bulk_min_bytes) travel as bulk segments after the message,
// straight from the tensors into fresh ones; small ones stay inline. Rows of 3000 floats
// (12 KB): a chunk of >= 3 rows sends "x" as a segment, 1-2 rows inline, "id" always inline.
TEST_CASE("mpi: large DataProto columns (bulk segments) give results identical to in-process", "[mpi][group][bulk]") {
  int const W = workers();
  ResourcePool pool("p", {W}, 3);
  MpiCalc g(pool), h(pool);
  auto driver = mpi::drive();
  if (!driver) return;
  WorkerGroup<Calc> ref(pool);
  std::mt19937 rng(11);
  for (std::int64_t n : {std::int64_t{W}, std::int64_t{3 * W}, std::int64_t{3 * W + 1}, std::int64_t{16 * W + 5}}) {
    auto d = make_rows(n, rng(), 3000);
    d.set_auto_padding(true);
    DataProto const before = d;
    REQUIRE(g.call<&Calc::echo>(d).get() == d);  // non-blocking: the reply's segments arrive on the progress thread
    REQUIRE(g.call<&Calc::seen>() == (ref.call<&Calc::echo>(d).get(), ref.call<&Calc::seen>()));
    DataProto p = g.call<&Calc::plus>(d);  // a new large column in the reply
    REQUIRE(p == ref.call<&Calc::plus>(d));
    REQUIRE(p.tensor("y").nbytes() >= static_cast<std::size_t>(n) * 3000 * 4);
    REQUIRE(g.call<&Calc::metric>(d) == ref.call<&Calc::metric>(d));
    if (n % W == 0) REQUIRE(g.call<&Calc::apply>(&double_x, d) == double_x(d));  // this mode does not pad
    // a Pending with bulk segments chained into another group's call
    REQUIRE(h.call<&Calc::plus>(h.call<&Calc::echo>(d)) == ref.call<&Calc::plus>(d));
    REQUIRE(d == before);  // the caller's columns were sent from, never changed
  }
  // a DataProto argument shared by every rank (ONE_TO_ALL through execute_all) is sent once per rank
  auto big = make_rows(64, 3, 3000);
  auto const sizes = g.execute_all<&Calc::metric>(big);
  for (int r = 0; r < W; ++r) REQUIRE(sizes[static_cast<std::size_t>(r)] == 64 + 0.5 * r);
  REQUIRE(g.execute_func_rank_zero([](DataProto const& x) { return double_x(x); }, big) == double_x(big));
  // a call that throws on the workers after its bulk arguments arrived leaves the next call clean
  auto no_x = DataProto::from_dict({{"z", Tensor::zeros(DType::float32, Shape{8 * W, 3000})}});
  REQUIRE_THROWS_WITH(g.call<&Calc::plus>(no_x), Catch::Contains("Calc::plus failed on rank") && Catch::Contains("'x'"));
  REQUIRE_THROWS_WITH(g.call<&Calc::fail_on>(0), Catch::Contains("boom on purpose"));
  REQUIRE(g.call<&Calc::echo>(big).get() == big);
}

// The bulk receive checks what arrives against what the message announced: a different count
// or size is a format_error naming both numbers, and the segments are consumed (no hang, and
// the next message is not confused). Run between world ranks 0 (sender) and 1 (receiver).
TEST_CASE("mpi: a bulk segment count or size that differs from the message is a clear error", "[mpi][bulk][errors]") {
  if (!mpi::launched()) return;
  auto& rt = mpi::Runtime::get();
  int const tag = 777;
  std::vector<float> a(100, 1.f), b(200, 2.f);
  if (rt.rank() == 0) {
    std::vector<MPI_Request> q;
    std::vector<int> peers;
    wire::Bulk out;
    out.segs = {wire::BulkSeg{a.data(), a.size() * 4, {}}, wire::BulkSeg{b.data(), b.size() * 4, {}}};
    for (int round = 0; round < 3; ++round) rt.post_bulk_sends(1, tag, out.segs, q, peers);
    rt.wait_requests(q, peers, [] { return std::string("test sender"); });
  } else if (rt.rank() == 1) {
    std::vector<float> x(100), y(200);
    wire::Bulk in;  // round 1: the contents name one segment where two were announced
    in.segs = {wire::BulkSeg{x.data(), x.size() * 4, {}}};
    REQUIRE_THROWS_WITH(rt.recv_bulk(0, tag, in, 2, [] { return std::string("test"); }),
                        Catch::Contains("mismatched message") && Catch::Contains("announced 2") && Catch::Contains("name 1"));
    in.clear();  // round 2: the second segment is larger than its slot
    in.segs = {wire::BulkSeg{x.data(), x.size() * 4, {}}, wire::BulkSeg{y.data(), 100 * 4, {}}};
    REQUIRE_THROWS_WITH(rt.recv_bulk(0, tag, in, 2, [] { return std::string("test"); }),
                        Catch::Contains("bulk segment 1 of 2 should hold 400 bytes but was larger"));
    in.clear();  // round 3: matches; the data is exact
    in.segs = {wire::BulkSeg{x.data(), x.size() * 4, {}}, wire::BulkSeg{y.data(), y.size() * 4, {}}};
    rt.recv_bulk(0, tag, in, 2, [] { return std::string("test"); });
    REQUIRE(x == a);
    REQUIRE(y == b);
  }
}

// mpi::place_pool: a pool's groups start at a given world rank, so two pools run in different
// processes (a trainer pool and a standalone rollout pool). Results equal in-process; the pools'
// collectives are their own.
TEST_CASE("mpi: place_pool puts a pool's groups on their own processes", "[mpi][group][placement]") {
  int const W = workers();
  if (W < 2) return;
  int const half = W / 2;
  ResourcePool a("place_a", {half}, 2), b("place_b", {W - half}, 2);
  if (mpi::launched()) mpi::place_pool("place_b", 1 + half);
  MpiCalc ga(a), gb(b);
  auto driver = mpi::drive();
  if (!driver) return;
  if (mpi::launched()) {
    auto world = [] { return mpi::Runtime::get().rank(); };
    REQUIRE(ga.execute_func_rank_zero(world) == 1);
    REQUIRE(gb.execute_func_rank_zero(world) == 1 + half);
  }
  WorkerGroup<Calc> ra(a), rb(b);
  auto d = make_rows(3 * W, 4, 3000);
  d.set_auto_padding(true);
  REQUIRE(gb.call<&Calc::plus>(d) == rb.call<&Calc::plus>(d));
  REQUIRE(ga.call<&Calc::plus>(d) == ra.call<&Calc::plus>(d));
  REQUIRE(gb.call<&Calc::reduce>(-1) == rb.call<&Calc::reduce>(-1));  // an all-reduce over b's processes only
  REQUIRE(ga.call<&Calc::reduce>(-1) == ra.call<&Calc::reduce>(-1));
  REQUIRE_THROWS_WITH(gb.call<&Calc::fail_on>(0), Catch::Contains("(MPI rank " + std::to_string(1 + half) + ")"));
}

}  // namespace test_mpi_group
