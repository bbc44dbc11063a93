// tests/dispatch/test_fused.cpp <-> include/rlflow/dispatch/fused.hpp: fused colocated workers,
// per-role views, cross-role methods (A-33, A-34 adapted).
#include <vector>

#include <catch2/catch.hpp>

#include "dispatch/roles.hpp"

namespace test_fused {

using namespace rlflow;
using namespace test_dispatch;

namespace {
// verl test SC-FU-1 / SC-CO-1: Actor adds its rank, Critic subtracts its config b.
struct Actor {
  using role_tag = rlflow::actor_tag;
  Actor(WorkerContext const& c, double scale) : rank(c.rank), scale(scale) {}
  int rank;
  double scale;
  std::thread::id thread = std::this_thread::get_id();
  double add(double x) { return x * scale + rank; }
  DataProto plus(DataProto const& d) { return plus_ten_rank(d, rank); }
  std::size_t thread_hash() const { return std::hash<std::thread::id>{}(thread); }
  using methods = rlflow::methods<rlflow::method<&Actor::add, dispatch::OneToAll>,
                                  rlflow::method<&Actor::plus, dispatch::DPComputeProto>,
                                  rlflow::method<&Actor::thread_hash, dispatch::OneToAll>>;
};
struct Critic {
  using role_tag = rlflow::critic_tag;
  explicit Critic(double b) : b(b) {}
  double b;
  std::thread::id thread = std::this_thread::get_id();
  double sub(double x) { return x - b; }
  std::size_t thread_hash() const { return std::hash<std::thread::id>{}(thread); }
  using methods = rlflow::methods<rlflow::method<&Critic::sub, dispatch::AllToAll, execute::All, blocking<false>>,
                                  rlflow::method<&Critic::thread_hash, dispatch::OneToAll>>;
};
// a fused class with a method that composes two roles (verl: subclass of the raw fused class)
struct ActorCritic : rlflow::Fused<Actor, Critic> {
  using Fused::Fused;
  double foo(double x) { return get<Critic>().sub(get<Actor>().add(x)); }
  using methods = rlflow::methods<rlflow::method<&ActorCritic::foo, dispatch::OneToAll>>;
};
}  // namespace

TEST_CASE("views of a fused group equal dedicated groups and share threads and devices (A-33, A-34)",
          "[dispatch][fused]") {
  ResourcePool pool("global_pool", {2}, 3);
  // example-begin fused
  auto fused = rlflow::make_colocated_group<rlflow::Colocate<3>, Actor, Critic>(
      pool, rlflow::GroupOptions{}, std::tuple{2.0}, std::tuple{0.25});
  std::vector<double> a = fused.view<Actor>().call<&Actor::add>(0.1);           // blocking OneToAll
  auto c = fused.view<Critic>().call<&Critic::sub>(rlflow::per_rank(a)).get();  // non-blocking AllToAll
  // example-end fused
  WorkerGroup<Actor> actors(pool, {}, 2.0);
  WorkerGroup<Critic> critics(pool, {}, 0.25);
  REQUIRE(a == actors.call<&Actor::add>(0.1));
  REQUIRE(c == critics.call<&Critic::sub>(per_rank(a)).get());
  REQUIRE(pool.used_slots() == std::vector<int>{3, 3});  // one fused worker + two dedicated per device

  auto d = make_rows(6, 4);
  REQUIRE(fused.view<Actor>().call<&Actor::plus>(d) == actors.call<&Actor::plus>(d));
  // the direct call works too when the method is unambiguous
  REQUIRE(fused.call<&Actor::add>(1.0) == actors.call<&Actor::add>(1.0));
  // both role objects of a rank live on the same worker thread
  REQUIRE(fused.view<Actor>().call<&Actor::thread_hash>() == fused.view<Critic>().call<&Critic::thread_hash>());
  REQUIRE(fused.view<Actor>().call<&Actor::thread_hash>() != actors.call<&Actor::thread_hash>());
}

TEST_CASE("a fused-class method composing two roles equals the chained role calls (A-33)", "[dispatch][fused]") {
  ResourcePool pool("p", {2}, 1);
  WorkerGroup<ActorCritic> g(pool, {}, std::tuple{3.0}, std::tuple{1.5});
  auto chained = g.view<Critic>().call<&Critic::sub>(per_rank(g.view<Actor>().call<&Actor::add>(0.5))).get();
  REQUIRE(g.call<&ActorCritic::foo>(0.5) == chained);
  REQUIRE(chained == std::vector<double>{0.5 * 3 + 0 - 1.5, 0.5 * 3 + 1 - 1.5});
  auto again = g.execute_all<&Critic::sub>(2.0);  // unregistered path reaches role objects too
  REQUIRE(again == std::vector<double>{0.5, 0.5});
}

}  // namespace test_fused
