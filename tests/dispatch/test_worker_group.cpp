// tests/dispatch/test_worker_group.cpp <-> include/rlflow/dispatch/worker_group.hpp: calls through a
// WorkerGroup (checklist A-25..A-30, A-32, A-35, A-40..A-46 adapted), blocking and non-blocking,
// auto-padding, errors that never hang, identity and shutdown.
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "dispatch/roles.hpp"

namespace test_worker_group {

using namespace rlflow;
using namespace test_dispatch;

// the registered metadata is discoverable on the type
using calc_plus = detail::at_t<3, Calc::methods::list>;
static_assert(std::is_same_v<calc_plus::dispatch_mode_type, dispatch::DPComputeProto>);
static_assert(std::is_same_v<calc_plus::execute_mode_type, execute::All>);
static_assert(calc_plus::is_blocking);
static_assert(!detail::at_t<4, Calc::methods::list>::is_blocking);
static_assert(std::is_same_v<decltype(std::declval<WorkerGroup<Calc>&>().call<&Calc::echo>(DataProto{})), Pending<DataProto>>);
static_assert(std::is_same_v<decltype(std::declval<WorkerGroup<Calc>&>().call<&Calc::five>()), int>);

TEST_CASE("ONE_TO_ALL, ALL_TO_ALL, RANK_ZERO and a custom mode through a group (A-42..A-46)", "[dispatch][group]") {
  ResourcePool pool("cpu_pool", {4}, 3);
  WorkerGroup<Calc> g(pool);
  REQUIRE(g.world_size() == 4);
  REQUIRE(g.call<&Calc::add_rank>(2) == std::vector<int>{2, 3, 4, 5});
  REQUIRE(g.call<&Calc::sum2>(per_rank(std::vector<int>{1, 2, 3, 4}), per_rank(std::vector<int>{7, 8, 9, 10})) ==
          std::vector<int>{8, 10, 12, 14});
  REQUIRE(g.call<&Calc::sum2>(per_rank(std::vector<int>{1, 2, 3, 4}), 1) == std::vector<int>{2, 3, 4, 5});
  REQUIRE(g.call<&Calc::five>() == 5);
  REQUIRE(g.execute_func_rank_zero([](int a, int b) { return a * b; }, 6, 7) == 42);
  REQUIRE(g.execute_all<&Calc::unregistered>(3) == std::vector<int>{3, 4, 5, 6});
  auto pa = g.execute_all_async<&Calc::unregistered>(per_rank(std::vector<int>{0, 10, 20, 30}));
  REQUIRE(std::move(pa).get() == std::vector<int>{0, 11, 22, 33});
  g.call<&Calc::nothing>();

  WorkerGroup<Pair> pg(pool);  // TwoToAll rewrites [x0, x1] to [x0, x1, x0, x1]
  REQUIRE(pg.call<&Pair::sum2>(per_rank(std::vector<int>{1, 2}), per_rank(std::vector<int>{7, 8})) ==
          std::vector<int>{8, 10, 8, 10});
}

TEST_CASE("DP_COMPUTE_PROTO splits rows by rank and concatenates in rank order (A-26, A-27)", "[dispatch][group]") {
  ResourcePool pool("p", {2}, 1);
  WorkerGroup<Calc> g(pool);
  auto d = make_rows(4, 11);
  DataProto out = g.call<&Calc::plus>(d);
  REQUIRE(out.size() == 4);
  auto x = d.tensor("x").span<float>();
  auto y = out.tensor("y").span<float>();
  for (std::size_t i = 0; i < y.size(); ++i) {
    int const rank = static_cast<int>(i / 3 / 2);  // rows 0-1 on rank 0, rows 2-3 on rank 1 (w = 3)
    REQUIRE(y[i] == x[i] + 10.f + static_cast<float>(rank));
  }
  Pending<DataProto> p = g.call<&Calc::echo>(d);  // non-blocking registration
  REQUIRE(std::move(p).get() == d);
}

TEST_CASE("the group laws over random inputs: DP modes lossless, ONE_TO_ALL equal", "[dispatch][group]") {
  std::mt19937 rng(5);
  for (int ws : {1, 2, 3, 4}) {
    ResourcePool pool("p", {ws}, 1);
    WorkerGroup<Calc> g(pool);
    for (int trial = 0; trial < 6; ++trial) {
      std::int64_t const n = ws * static_cast<std::int64_t>(rng() % 7);
      auto d = make_rows(n, rng());
      REQUIRE(g.call<&Calc::echo>(d).get() == d);
      auto seen = g.call<&Calc::seen>();
      for (int r = 0; r < ws; ++r)
        REQUIRE(seen[static_cast<std::size_t>(r)].back() == (n ? r * (n / ws) : -1));
      int const v = static_cast<int>(rng() % 100);
      auto all = g.call<&Calc::add_rank>(v);
      for (int r = 0; r < ws; ++r) REQUIRE(all[static_cast<std::size_t>(r)] == v + r);
    }
  }
}

TEST_CASE("auto-padding returns exactly the input for 10, 1 and 8 rows on 4 workers (A-29)", "[dispatch][group][padding]") {
  ResourcePool pool("p", {4}, 1);
  WorkerGroup<Calc> g(pool);
  for (std::int64_t n : {10, 1, 8}) {
    auto d = make_rows(n, static_cast<std::uint64_t>(n));
    d.set_auto_padding(true);
    DataProto const before = d;
    // blocking registration (plus) and non-blocking registration (echo)
    DataProto b = g.call<&Calc::plus>(d);
    REQUIRE(b.size() == n);
    REQUIRE(ids_of(b) == ids_of(d));
    Pending<DataProto> p = g.call<&Calc::echo>(d);
    DataProto nb = p.get();
    REQUIRE(nb == d);
    REQUIRE(d == before);  // the driver's object is not padded in place
    // the padding rows landed on the last rank as copies of the last row
    auto seen = g.call<&Calc::seen>();
    std::int64_t const per = (n + 3) / 4;
    for (int r = 0; r < 4; ++r) REQUIRE(seen[static_cast<std::size_t>(r)].back() == std::min(r * per, n - 1));
    // DP_COMPUTE_METRIC: one value per rank, never trimmed
    auto m = g.call<&Calc::metric>(d);
    REQUIRE(m.size() == 4);
    REQUIRE(m[3] == static_cast<double>(per) + 1.5);
  }
  // without the flag, a non-multiple fails on the driver, before any worker runs
  REQUIRE_THROWS_AS(g.call<&Calc::plus>(make_rows(10, 1)), shape_error);
  REQUIRE(g.call<&Calc::add_rank>(0).size() == 4);
}

TEST_CASE("a Pending passes straight into the next call and equals the blocking chain", "[dispatch][group][async]") {
  ResourcePool pool("p", {3}, 2);
  WorkerGroup<Calc> a(pool), b(pool);
  auto d = make_rows(7, 3);
  d.set_auto_padding(true);
  Pending<DataProto> p = a.call<&Calc::echo>(d);
  DataProto chained = b.call<&Calc::plus>(p);             // materialized for the next group
  DataProto direct = b.call<&Calc::plus>(a.call<&Calc::echo>(d).get());
  REQUIRE(chained == direct);
  REQUIRE(chained.size() == 7);
  // many calls in flight (more than a mailbox holds), resolved in any order
  std::vector<Pending<DataProto>> ps;
  std::vector<DataProto> ins;
  for (int i = 0; i < 300; ++i) {
    ins.push_back(make_rows(3 * (i % 4), static_cast<std::uint64_t>(i)));
    ps.push_back(a.call<&Calc::echo>(ins.back()));
  }
  for (int i = 299; i >= 0; --i) REQUIRE(ps[static_cast<std::size_t>(i)].get() == ins[static_cast<std::size_t>(i)]);
  auto [x, y] = sync_wait(when_all(a.call<&Calc::echo>(d), b.call<&Calc::echo>(d)));
  REQUIRE(x == y);
  REQUIRE(sync_wait(a.call<&Calc::five>()) == 5);
}

TEST_CASE("DP_COMPUTE_PROTO_WITH_FUNC equals running the function on all rows (A-32)", "[dispatch][group]") {
  ResourcePool pool("p", {2}, 1);
  WorkerGroup<Calc> g(pool);
  auto d = make_rows(8, 21);
  REQUIRE(g.call<&Calc::apply>(&double_x, d) == double_x(d));
}

TEST_CASE("mesh dispatch on a group: DP2xTP2 and two layouts on 8 ranks (A-30)", "[dispatch][group][mesh]") {
  ResourcePool pool("p", {4}, 1);
  GroupOptions opts;
  opts.tp = 2;
  WorkerGroup<Calc> g(pool, opts);
  auto coords = g.call<&Calc::coords>();
  REQUIRE(coords == std::vector<MeshCoord>{{0, 0, 0}, {0, 1, 0}, {1, 0, 0}, {1, 1, 0}});
  auto d = make_rows(6, 8);
  REQUIRE(g.call<&Calc::echo>(d).get() == d);
  auto seen = g.call<&Calc::seen>();
  REQUIRE(seen[0].back() == 0);
  REQUIRE(seen[1].back() == 0);
  REQUIRE(seen[2].back() == 3);
  REQUIRE(seen[3].back() == 3);

  ResourcePool pool8("p8", {4, 4}, 1);
  WorkerGroup<Calc> g8(pool8);
  auto t = g8.call<&Calc::tag_rank>(make_rows(4, 9));  // MeshLayout<4>: dp2 x tp4, collectors 0 and 4
  auto ranks = t.tensor("rank").span<std::int64_t>();
  REQUIRE(std::vector<std::int64_t>(ranks.begin(), ranks.end()) == std::vector<std::int64_t>{0, 0, 4, 4});
  REQUIRE(ids_of(t) == std::vector<std::int64_t>{0, 1, 2, 3});
}

TEST_CASE("a throwing worker surfaces as a driver error and the next call works", "[dispatch][group][errors]") {
  ResourcePool pool("p", {4}, 1);
  WorkerGroup<Calc> g(pool);
  for (int bad = 0; bad < 4; ++bad) {
    REQUIRE_THROWS_WITH(g.call<&Calc::fail_on>(bad),
                        Catch::Contains("Calc::fail_on failed on rank " + std::to_string(bad) + " of 4") &&
                            Catch::Contains("boom on purpose"));
    REQUIRE(g.call<&Calc::fail_on>(-1) == std::vector<int>{0, 1, 2, 3});
  }
  REQUIRE_THROWS_AS(g.call<&Calc::fail_on>(2), worker_error);
  // a rank that fails while the others wait in a collective: they are woken, the call names the
  // failing rank, and collectives work again afterwards
  REQUIRE_THROWS_WITH(g.call<&Calc::reduce>(1), Catch::Contains("Calc::reduce failed on rank 1") &&
                                                    Catch::Contains("failed before the all-reduce"));
  auto ok = g.call<&Calc::reduce>(-1);
  for (auto const& v : ok) REQUIRE(v == std::vector<float>{6.f, 4.f});
  // non-blocking: the error arrives at get()
  auto d = make_rows(4, 1);
  REQUIRE(g.call<&Calc::echo>(d).get() == d);
}

namespace {
struct Fragile {
  using role_tag = rlflow::worker_tag;
  explicit Fragile(WorkerContext const& c) {
    if (c.rank == 2) throw std::runtime_error("no device");
  }
  int id() { return 1; }
  using methods = rlflow::methods<rlflow::method<&Fragile::id, dispatch::OneToAll>>;
};
}  // namespace

TEST_CASE("a constructor that throws fails the group with the rank, shutdown joins every thread", "[dispatch][group][errors]") {
  ResourcePool pool("p", {4}, 1);
  REQUIRE_THROWS_WITH(WorkerGroup<Fragile>(pool), Catch::Contains("rank 2 of 4") && Catch::Contains("no device"));
  REQUIRE(pool.used_slots() == std::vector<int>{0, 0, 0, 0});  // the lease was returned
  WorkerGroup<Calc> g(pool);
  g.shutdown();
  REQUIRE_FALSE(g.running());
  REQUIRE_THROWS_WITH(g.call<&Calc::add_rank>(1), Catch::Contains("shut down"));
}

TEST_CASE("worker identity and env (A-35)", "[dispatch][group][env]") {
  ResourcePool pool("p", {2, 2}, 2, Device::cuda);
  GroupOptions opts;
  opts.name = "actor_rollout";
  opts.env = {{"test_key", "test_value"}};
  WorkerGroup<Calc> g(pool, opts);
  for (int r = 0; r < 4; ++r) {
    auto const& c = g.context(r);
    REQUIRE(c.rank == r);
    REQUIRE(c.world_size == 4);
    REQUIRE(c.node == r / 2);
    REQUIRE(c.local_rank == r % 2);
    REQUIRE(c.device == DeviceId{Device::cuda, r / 2, r % 2});
    REQUIRE(c.device_share == 0.5);
  }
  REQUIRE(g.call<&Calc::env>("RAY_LOCAL_WORLD_SIZE") == std::vector<std::string>(4, "2"));
  REQUIRE(g.call<&Calc::env>("test_key") == std::vector<std::string>(4, "test_value"));
  REQUIRE(g.call<&Calc::env>("RANK") == std::vector<std::string>{"0", "1", "2", "3"});
  REQUIRE(g.call<&Calc::env>("CUDA_VISIBLE_DEVICES") == std::vector<std::string>{"0", "1", "0", "1"});
  REQUIRE_THROWS_WITH(g.call<&Calc::env>("missing"), Catch::Contains("no env key 'missing'"));
  GroupOptions bad;
  bad.env = {{"WORLD_SIZE", "3"}};
  REQUIRE_THROWS_WITH(WorkerGroup<Calc>(pool, bad), Catch::Contains("WORLD_SIZE") && Catch::Contains("protected"));
}

}  // namespace test_worker_group
