// tests/dispatch/test_communicator.cpp <-> include/rlflow/dispatch/communicator.hpp: the
// in-process communicator from inside worker methods (DP gradient all-reduce), against a
// plain-loop reference over random inputs.
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "dispatch/roles.hpp"

using namespace rlflow;

namespace {
struct Trainer {
  using role_tag = rlflow::actor_tag;
  explicit Trainer(WorkerContext const& c) : ctx(c) {}
  WorkerContext const& ctx;
  //! each rank's gradient = seeded random vector; returns the all-reduced sum
  std::vector<float> grad_sum(int n, std::uint64_t seed) {
    std::vector<float> g = local_grad(n, seed, ctx.rank);
    ctx.comm().allreduce_sum(g);
    return g;
  }
  std::vector<float> bcast(int n) {
    std::vector<float> v(static_cast<std::size_t>(n), static_cast<float>(ctx.rank));
    ctx.comm().broadcast(v, ctx.world_size - 1);
    return v;
  }
  std::vector<float> gather() {
    std::vector<float> in{static_cast<float>(ctx.rank), static_cast<float>(ctx.rank)}, out(2 * static_cast<std::size_t>(ctx.world_size));
    this_worker().comm().allgather(in, out);
    return out;
  }
  int mismatched() {
    std::vector<float> v(static_cast<std::size_t>(1 + ctx.rank));
    ctx.comm().allreduce_sum(v);
    return 0;
  }
  static std::vector<float> local_grad(int n, std::uint64_t seed, int rank) {
    std::mt19937_64 rng(seed * 131 + static_cast<std::uint64_t>(rank));
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> g(static_cast<std::size_t>(n));
    for (auto& v : g) v = u(rng);
    return g;
  }
  using methods = rlflow::methods<rlflow::method<&Trainer::grad_sum, dispatch::OneToAll>,
                                  rlflow::method<&Trainer::bcast, dispatch::OneToAll>,
                                  rlflow::method<&Trainer::gather, dispatch::OneToAll>,
                                  rlflow::method<&Trainer::mismatched, dispatch::OneToAll>>;
};
}  // namespace

TEST_CASE("allreduce_sum inside worker methods matches a rank-ordered reference, bit-identical on all ranks",
          "[dispatch][comm]") {
  std::mt19937 rng(6);
  for (int ws : {1, 2, 3, 4}) {
    ResourcePool pool("p", {ws}, 1);
    WorkerGroup<Trainer> g(pool);
    for (int trial = 0; trial < 5; ++trial) {
      int const n = static_cast<int>(rng() % 300);
      auto const seed = static_cast<std::uint64_t>(rng());
      auto out = g.call<&Trainer::grad_sum>(n, seed);
      std::vector<float> ref(static_cast<std::size_t>(n), 0.f);
      for (int r = 0; r < ws; ++r) {
        auto l = Trainer::local_grad(n, seed, r);
        for (int i = 0; i < n; ++i) ref[static_cast<std::size_t>(i)] = r == 0 ? l[static_cast<std::size_t>(i)] : ref[static_cast<std::size_t>(i)] + l[static_cast<std::size_t>(i)];
      }
      for (auto const& o : out) REQUIRE(o == ref);
    }
    for (auto const& v : g.call<&Trainer::bcast>(5)) REQUIRE(v == std::vector<float>(5, static_cast<float>(ws - 1)));
    std::vector<float> expect;
    for (int r = 0; r < ws; ++r) expect.insert(expect.end(), {static_cast<float>(r), static_cast<float>(r)});
    for (auto const& v : g.call<&Trainer::gather>()) REQUIRE(v == expect);
    if (ws > 1) {
      REQUIRE_THROWS_WITH(g.call<&Trainer::mismatched>(), Catch::Contains("same length"));
      REQUIRE(g.call<&Trainer::grad_sum>(3, 1).size() == static_cast<std::size_t>(ws));  // usable afterwards
    }
  }
  REQUIRE_THROWS_AS(this_worker(), rlflow::error);
}
