// tests/dispatch/test_resource_pool.cpp <-> include/rlflow/dispatch/resource_pool.hpp: bundles, rank ->
// device, max_colocate_count, split and merged pools (A-38, A-39 adapted), the manager.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "dispatch/roles.hpp"

namespace test_resource_pool {

using namespace rlflow;
using namespace test_dispatch;

TEST_CASE("a pool maps ranks to devices node by node, lists as verl", "[dispatch][pool]") {
  ResourcePool p("global_pool", {2, 3}, 3);
  REQUIRE(p.world_size() == 5);
  REQUIRE(p.local_world_size_list() == std::vector<int>{2, 2, 3, 3, 3});
  REQUIRE(p.local_rank_list() == std::vector<int>{0, 1, 0, 1, 2});
  REQUIRE(p.device_of(3) == DeviceId{Device::cpu, 1, 1});
  REQUIRE(p.device_share() == Approx(1.0 / 3));
  REQUIRE_THROWS_AS(ResourcePool("x", {}, 1), config_error);
  REQUIRE_THROWS_AS(ResourcePool("x", {2, 0}, 1), config_error);
}

TEST_CASE("groups on one pool colocate rank r on device r, up to max_colocate_count (A-38)", "[dispatch][pool]") {
  ResourcePool p("global_pool", {4}, 2);
  WorkerGroup<Calc> a(p), b(p);
  for (int r = 0; r < 4; ++r) REQUIRE(a.context(r).device == b.context(r).device);
  REQUIRE(p.used_slots() == std::vector<int>{2, 2, 2, 2});
  REQUIRE_THROWS_WITH(WorkerGroup<Calc>(p), Catch::Contains("global_pool") && Catch::Contains("already hosts 2") &&
                                                Catch::Contains("max_colocate_count 2"));
  GroupOptions big;
  big.world_size = 8;
  REQUIRE_THROWS_WITH(WorkerGroup<Calc>(p, big),
                      Catch::Contains("asks for 8 workers") && Catch::Contains("'global_pool' has 4 devices"));
}

TEST_CASE("split pools: ranks restart at 0 per window and rows split evenly (A-39)", "[dispatch][pool]") {
  ResourcePool p("pool", {4, 4}, 1);
  auto halves = p.split(4);
  REQUIRE(halves.size() == 2);
  WorkerGroup<Calc> g0(halves[0]), g1(halves[1]);
  REQUIRE(g0.context(0).rank == 0);
  REQUIRE(g1.context(0).rank == 0);
  REQUIRE(g1.context(0).device == DeviceId{Device::cpu, 1, 0});
  auto d = make_rows(8, 3);
  REQUIRE(g1.call<&Calc::echo>(d).get() == d);
  REQUIRE(g1.call<&Calc::seen>() == std::vector<std::vector<std::int64_t>>{{0}, {2}, {4}, {6}});
  // a window crossing a node boundary, and a nested split
  ResourcePool q("q", {4, 4}, 1);
  auto parts = q.split(std::vector<int>{2, 4, 2});
  REQUIRE(parts[1].device_of(0) == DeviceId{Device::cpu, 0, 2});
  REQUIRE(parts[1].device_of(3) == DeviceId{Device::cpu, 1, 1});
  auto inner = parts[1].split(1);
  REQUIRE(inner.size() == 4);
  REQUIRE(inner[2].device_of(0) == DeviceId{Device::cpu, 1, 0});
  {
    WorkerGroup<Calc> w(inner[2]);
    REQUIRE(q.used_slots() == std::vector<int>{0, 0, 0, 0, 1, 0, 0, 0});  // windows share the accounting
  }
  REQUIRE(q.used_slots() == std::vector<int>(8, 0));
  REQUIRE_THROWS_AS(q.split(3), config_error);
  REQUIRE_THROWS_WITH(q.split(std::vector<int>{2, 2}), Catch::Contains("sum to 4") && Catch::Contains("8 devices"));
  // merge concatenates device sets
  auto m = merge(parts[0], parts[2]);
  REQUIRE(m.world_size() == 4);
  REQUIRE(m.device_of(2) == DeviceId{Device::cpu, 1, 2});
}

TEST_CASE("ResourcePoolManager maps roles to pools and checks the device count", "[dispatch][pool]") {
  ResourcePoolManager mgr({{"global_pool", {2, 2}}, {"reward_pool", {1}}},
                          {{"actor_rollout", "global_pool"}, {"critic", "global_pool"}, {"reward", "reward_pool"}}, 3);
  REQUIRE(mgr.total_devices() == 5);
  REQUIRE_THROWS_WITH(mgr.create(4), Catch::Contains("available devices 4") && Catch::Contains("desired 5"));
  mgr.create(8);
  REQUIRE(mgr.get_resource_pool("critic").name() == "global_pool");
  REQUIRE(mgr.get_resource_pool("reward").world_size() == 1);
  REQUIRE_THROWS_WITH(mgr.get_resource_pool("ref"), Catch::Contains("'ref' has no pool"));
  REQUIRE_THROWS_AS(ResourcePoolManager({{"a", {1}}}, {{"actor", "b"}}), config_error);
}

}  // namespace test_resource_pool
