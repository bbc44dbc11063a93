// tests/dispatch/test_communicator.cpp <-> include/rlflow/comm/communicator.hpp: the
// in-process communicator from inside worker methods (DP gradient all-reduce), against a
// plain-loop reference over random inputs.
#include <array>
#include <atomic>
#include <chrono>
#include <exception>
#include <random>
#include <thread>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "dispatch/roles.hpp"
#include "fixtures.hpp"

namespace test_communicator {

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

// ---- sub-communicators (split, split_mesh) ------------------------------------------------

TEST_CASE("split_mesh gives TP and DP groups whose sums equal a rank-ordered reference bit for bit", "[dispatch][comm]") {
  for (int ws : {1, 2, 4, 6, 8}) {
    for (int tp = 1; tp <= ws; ++tp) {
      if (ws % tp) continue;
      for (int pp : {1, 2}) {
        if (ws % (tp * pp)) continue;
        int const dp = ws / (tp * pp);
        INFO("ws " << ws << " tp " << tp << " pp " << pp);
        int const n = 37 + ws * 13;
        std::vector<std::vector<float>> tp_out(static_cast<std::size_t>(ws)), dp_out(static_cast<std::size_t>(ws));
        std::vector<std::array<int, 4>> ids(static_cast<std::size_t>(ws));
        fixtures::on_ranks(ws, [&](int r, comm::Communicator& world) {
          auto m = comm::split_mesh(world, tp, pp);
          ids[static_cast<std::size_t>(r)] = {m.tp->rank(), m.tp->size(), m.dp->rank(), m.dp->size()};
          auto a = Trainer::local_grad(n, 11, r);
          m.tp->allreduce_sum(a);
          tp_out[static_cast<std::size_t>(r)] = a;
          auto b = Trainer::local_grad(n, 12, r);
          m.dp->allreduce_sum(b);
          dp_out[static_cast<std::size_t>(r)] = b;
        });
        for (int r = 0; r < ws; ++r) {
          int const t = r % tp, d = (r / tp) % dp, p = r / (tp * dp);
          REQUIRE(ids[static_cast<std::size_t>(r)] == std::array<int, 4>{t, tp, d, dp});
          // reference: float sums in rank order over the group's members
          std::vector<float> ra = Trainer::local_grad(n, 11, (p * dp + d) * tp);
          for (int k = 1; k < tp; ++k) {
            auto v = Trainer::local_grad(n, 11, (p * dp + d) * tp + k);
            for (int i = 0; i < n; ++i) ra[static_cast<std::size_t>(i)] += v[static_cast<std::size_t>(i)];
          }
          std::vector<float> rb = Trainer::local_grad(n, 12, (p * dp) * tp + t);
          for (int k = 1; k < dp; ++k) {
            auto v = Trainer::local_grad(n, 12, (p * dp + k) * tp + t);
            for (int i = 0; i < n; ++i) rb[static_cast<std::size_t>(i)] += v[static_cast<std::size_t>(i)];
          }
          REQUIRE(tp_out[static_cast<std::size_t>(r)] == ra);
          REQUIRE(dp_out[static_cast<std::size_t>(r)] == rb);
        }
      }
    }
  }
}

TEST_CASE("split ranks members by (key, rank) and aborting the parent wakes a blocked sub-group", "[dispatch][comm]") {
  // colors: even / odd ranks; keys reversed, so the highest rank becomes sub-rank 0
  std::vector<int> sub_rank(6), sub_size(6);
  fixtures::on_ranks(6, [&](int r, comm::Communicator& world) {
    auto s = world.split(r % 2, -r);
    sub_rank[static_cast<std::size_t>(r)] = s->rank();
    sub_size[static_cast<std::size_t>(r)] = s->size();
    std::vector<float> b(3, float(r));
    s->broadcast(b, 0);
    REQUIRE(b[0] == float(r % 2 ? 5 : 4));  // sub-rank 0 is the group's highest rank
  });
  REQUIRE(sub_rank == std::vector<int>{2, 2, 1, 1, 0, 0});
  REQUIRE(sub_size == std::vector<int>(6, 3));

  auto comms = comm::LocalCommunicator::make_group(4);
  std::vector<std::unique_ptr<comm::Communicator>> tps(4);
  {
    std::vector<std::thread> th;
    for (int r = 0; r < 4; ++r) th.emplace_back([&, r] { tps[static_cast<std::size_t>(r)] = comm::split_mesh(*comms[static_cast<std::size_t>(r)], 2).tp; });
    for (auto& t : th) t.join();
  }
  std::atomic<bool> threw{false};
  std::thread blocked([&] {
    std::vector<float> v(4, 1.0f);
    try {
      tps[1]->allreduce_sum(v);  // its partner (rank 0) never joins
    } catch (worker_error const&) {
      threw = true;
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  comms[0]->abort();
  blocked.join();
  REQUIRE(threw);
  comms[0]->reset();
  // re-armed: the sub-group works again
  std::vector<std::vector<float>> out(2, std::vector<float>(2));
  std::thread a([&] { out[0] = {1, 2}; tps[0]->allreduce_sum(out[0]); });
  std::thread b([&] { out[1] = {3, 4}; tps[1]->allreduce_sum(out[1]); });
  a.join();
  b.join();
  REQUIRE(out[0] == std::vector<float>{4, 6});
  REQUIRE(out[1] == std::vector<float>{4, 6});
}

TEST_CASE("split_mesh rejects a mesh that does not divide the world", "[dispatch][comm]") {
  auto comms = comm::LocalCommunicator::make_group(1);
  REQUIRE_THROWS_WITH(comm::split_mesh(*comms[0], 3), Catch::Contains("tp = 3") && Catch::Contains("divides 1"));
}

TEST_CASE("gather to one rank: the root gets every rank's input in rank order, the others nothing", "[dispatch][comm]") {
  std::mt19937_64 seeds(std::random_device{}());
  for (int ws : {1, 2, 3, 4}) {
    for (int root = 0; root < ws; ++root) {
      std::size_t const n = 1 + seeds() % 37;
      std::uint64_t const seed = seeds();
      INFO("ranks " << ws << ", root " << root << ", " << n << " elements");
      auto comms = comm::LocalCommunicator::make_group(ws);
      std::vector<std::vector<float>> in(static_cast<std::size_t>(ws)), out(static_cast<std::size_t>(ws));
      for (int r = 0; r < ws; ++r) {
        in[std::size_t(r)] = Trainer::local_grad(int(n), seed, r);
        // non-roots pass a sentinel-filled buffer of the root's size: gather must leave it alone
        out[std::size_t(r)].assign(r == root ? n * std::size_t(ws) : 3, -7.f);
      }
      std::vector<std::thread> ts;
      for (int r = 0; r < ws; ++r)
        ts.emplace_back([&, r] {
          auto& o = out[std::size_t(r)];
          comms[std::size_t(r)]->gather(in[std::size_t(r)], r == root ? std::span<float>(o) : std::span<float>(), root);
          comms[std::size_t(r)]->gather(in[std::size_t(r)], r == root ? std::span<float>(o) : std::span<float>(), root);  // reusable
        });
      for (auto& t : ts) t.join();
      std::vector<float> expect;  // the plain loop: every rank's input, rank 0 first
      for (int r = 0; r < ws; ++r) expect.insert(expect.end(), in[std::size_t(r)].begin(), in[std::size_t(r)].end());
      REQUIRE(out[std::size_t(root)] == expect);
      for (int r = 0; r < ws; ++r)
        if (r != root) REQUIRE(out[std::size_t(r)] == std::vector<float>(3, -7.f));
    }
  }
  // a root outside the group and a root buffer of the wrong size are errors naming the numbers
  auto one = comm::LocalCommunicator::make_group(1);
  std::vector<float> in{1.f, 2.f}, small(1);
  REQUIRE_THROWS_WITH(one[0]->gather(in, small, 0), Catch::Contains("has 1 elements") && Catch::Contains("= 2"));
  REQUIRE_THROWS_WITH(one[0]->gather(in, small, 1), Catch::Contains("root 1 is outside [0, 1)"));
  // ranks passing different lengths: every rank gets the error
  auto two = comm::LocalCommunicator::make_group(2);
  std::vector<std::string> errs(2);
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; ++r)
    ts.emplace_back([&, r] {
      std::vector<float> mine(std::size_t(1 + r)), got(r == 0 ? 2 : 0);  // the root's buffer fits its own length
      try {
        two[std::size_t(r)]->gather(mine, got, 0);
      } catch (std::exception const& e) {
        errs[std::size_t(r)] = e.what();
      }
    });
  for (auto& t : ts) t.join();
  for (auto const& e : errs) REQUIRE_THAT(e, Catch::Contains("every rank must pass the same length"));
}

}  // namespace test_communicator
