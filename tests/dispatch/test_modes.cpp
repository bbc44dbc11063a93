// tests/dispatch/test_modes.cpp <-> include/rlflow/dispatch/*.hpp: the dispatch-mode laws over
// random inputs (plain values and DataProto), auto-padding, mesh dispatch and a custom mode.
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "dispatch/laws.hpp"
#include "dispatch/support.hpp"

namespace test_modes {

using namespace rlflow;
using test_dispatch::ids_of;
using test_dispatch::make_rows;
namespace laws = test_dispatch::laws;

TEST_CASE("OneToAll gives every rank the same argument and collects one result per rank", "[dispatch][modes]") {
  std::mt19937 rng(1);
  for (int trial = 0; trial < 20; ++trial) {
    int const ws = 1 + static_cast<int>(rng() % 8);
    auto g = GroupShape::make(ws);
    std::vector<float> x(rng() % 50);
    for (auto& v : x) v = static_cast<float>(rng() % 1000) / 7.f;
    laws::check_broadcast<dispatch::OneToAll, std::vector<float>>(x, g);
    laws::check_broadcast<dispatch::AllToAll, std::vector<float>>(x, g);  // non-PerRank args are broadcast
    auto d = make_rows(1 + static_cast<int>(rng() % 9), rng());
    laws::check_broadcast<dispatch::OneToAll, DataProto>(d, g);
    // blocking calls borrow the driver's value; non-blocking ones own one shared copy
    SplitContext ctx{g, "R", "f", 0, true};
    auto b = dispatch::OneToAll::split<std::vector<float>>(x, ctx);
    REQUIRE(b.borrowed == &x);
    SplitContext ctx2{g, "R", "f", 0, false};
    auto o = dispatch::OneToAll::split<std::vector<float>>(x, ctx2);
    REQUIRE(o.borrowed == nullptr);
    REQUIRE(o.values.size() == 1);
  }
}

TEST_CASE("AllToAll scatters PerRank arguments and DPCompute is lossless", "[dispatch][modes]") {
  std::mt19937 rng(2);
  for (int trial = 0; trial < 20; ++trial) {
    int const ws = 1 + static_cast<int>(rng() % 8);
    auto g = GroupShape::make(ws);
    std::vector<int> v(static_cast<std::size_t>(ws));
    for (auto& e : v) e = static_cast<int>(rng());
    auto parts = laws::split_per_rank<dispatch::AllToAll, int>(per_rank(v), g);
    REQUIRE(parts == v);
    // collect(split(x)) == x for DPCompute
    std::int64_t pad = 0;
    auto parts2 = laws::split_per_rank<dispatch::DPCompute, int>(per_rank(v), g, &pad);
    CollectContext cctx{g, "R", "f", pad};
    REQUIRE(dispatch::DPCompute::collect(std::move(parts2), cctx) == v);
  }
  auto g = GroupShape::make(4);
  SplitContext ctx{g, "Actor", "update", 1, true};
  REQUIRE_THROWS_WITH(dispatch::AllToAll::split<int>(per_rank(std::vector<int>{1, 2, 3}), ctx),
                      Catch::Contains("Actor::update") && Catch::Contains("3 per-rank values") &&
                          Catch::Contains("4 ranks"));
  REQUIRE_THROWS_AS(dispatch::DPCompute::split<int>(per_rank(std::vector<int>{1, 2}), ctx), shape_error);
}

TEST_CASE("DPComputeProto is lossless, chunks are zero-copy views, auto-padding pads a copy", "[dispatch][modes]") {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 30; ++trial) {
    int const ws = 1 + static_cast<int>(rng() % 8);
    auto g = GroupShape::make(ws);
    std::int64_t const n = ws * static_cast<std::int64_t>(rng() % 5);
    auto d = make_rows(n, rng());
    laws::check_lossless<dispatch::DPComputeProto, DataProto>(d, g);
    auto parts = laws::split_per_rank<dispatch::DPComputeProto, DataProto>(d, g);
    for (int r = 0; r < ws; ++r) {
      REQUIRE(parts[static_cast<std::size_t>(r)].size() == n / ws);
      if (n > 0) {
        REQUIRE(parts[static_cast<std::size_t>(r)].tensor("x").shares_storage_with(d.tensor("x")));  // a view
        REQUIRE(ids_of(parts[static_cast<std::size_t>(r)]).front() == r * (n / ws));  // contiguous, rank order
      }
    }
    // auto-padding: any n >= 1
    std::int64_t const m = 1 + static_cast<std::int64_t>(rng() % 23);
    auto e = make_rows(m, rng());
    e.set_auto_padding(true);
    DataProto const before = e;
    laws::check_lossless<dispatch::DPComputeProto, DataProto>(e, g);
    std::int64_t pad = -1;
    auto pp = laws::split_per_rank<dispatch::DPComputeProto, DataProto>(e, g, &pad);
    REQUIRE(pad == (m % ws == 0 ? 0 : ws - m % ws));
    for (auto const& p : pp) REQUIRE(p.size() == (m + pad) / ws);
    REQUIRE(e == before);  // the caller's object is untouched (verl mutates it)
    if (pad > 0) REQUIRE(ids_of(pp.back()).back() == m - 1);  // padded with the last row
  }
}

TEST_CASE("DPComputeProto without auto-padding rejects a non-multiple with the fix", "[dispatch][modes]") {
  auto g = GroupShape::make(4);
  SplitContext ctx{g, "Actor", "compute_log_prob", 0, true};
  auto d = make_rows(10, 7);
  REQUIRE_THROWS_WITH(dispatch::DPComputeProto::split<DataProto>(d, ctx),
                      Catch::Contains("Actor::compute_log_prob") && Catch::Contains("10 rows") &&
                          Catch::Contains("DP size 4") && Catch::Contains("set_auto_padding(true)") &&
                          Catch::Contains("(DPComputeProto)"));
  // each mode names itself, not the mode it is built from
  REQUIRE_THROWS_WITH(dispatch::DPComputeMetric::split<DataProto>(d, ctx), Catch::Contains("(DPComputeMetric)"));
  REQUIRE_THROWS_WITH((dispatch::NDComputeProto<dispatch::GroupMesh>::split<DataProto>(d, ctx)),
                      Catch::Contains("(NDComputeProto)") && !Catch::Contains("DPComputeProto"));
  // two auto-padded arguments of different lengths
  auto a = make_rows(5, 1), b = make_rows(6, 2);
  a.set_auto_padding(true);
  b.set_auto_padding(true);
  SplitContext c2{g, "Actor", "f", 0, true};
  (void)dispatch::DPComputeProto::split<DataProto>(a, c2);
  c2.arg_index = 1;
  REQUIRE_THROWS_AS(dispatch::DPComputeProto::split<DataProto>(b, c2), shape_error);
}

TEST_CASE("mesh DP2xTP2: both TP ranks of a DP group get the same chunk and only collectors contribute",
          "[dispatch][modes][mesh]") {
  std::mt19937 rng(4);
  auto g = GroupShape::make(4, /*tp=*/2);
  REQUIRE(g.dp() == 2);
  for (int trial = 0; trial < 20; ++trial) {
    std::int64_t const n = 2 * static_cast<std::int64_t>(1 + rng() % 6);
    auto d = make_rows(n, rng());
    auto parts = laws::split_per_rank<dispatch::DPComputeProto, DataProto>(d, g);
    REQUIRE(parts[0] == parts[1]);
    REQUIRE(parts[2] == parts[3]);
    REQUIRE(ids_of(parts[0]).front() == 0);
    REQUIRE(ids_of(parts[2]).front() == n / 2);
    // non-collectors return garbage: the result must not change
    parts[1] = make_rows(3, 99, 3, 1000);
    parts[3] = make_rows(1, 98, 3, 2000);
    CollectContext cctx{g, "R", "f", 0};
    REQUIRE(dispatch::DPComputeProto::collect(std::move(parts), cctx) == d);
  }
  // the verl layouts of test SC-DM-1 on 8 ranks
  auto g8 = GroupShape::make(8);
  std::vector<int> infer, train, coll;
  for (int r = 0; r < 8; ++r) {
    infer.push_back(dispatch::MeshLayout<4>::dp_rank(r, g8));
    train.push_back(dispatch::MeshLayout<2, 2>::dp_rank(r, g8));
    if (dispatch::MeshLayout<2, 2>::is_collector(r, g8)) coll.push_back(r);
  }
  REQUIRE(infer == std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1});
  REQUIRE(train == std::vector<int>{0, 0, 1, 1, 0, 0, 1, 1});
  REQUIRE(coll == std::vector<int>{4, 6});
  laws::check_lossless<dispatch::NDComputeProto<dispatch::MeshLayout<2, 2>>, DataProto>(make_rows(16, 5), g8);
  REQUIRE_THROWS_AS(GroupShape::make(6, 4), config_error);
  REQUIRE_THROWS_AS(dispatch::MeshLayout<4>::dp_size(GroupShape::make(6)), config_error);
}

namespace {
// every rank claims to collect for DP rank 0: collect must refuse (verl assumes rank order)
struct BadLayout {
  static int dp_size(GroupShape const&) { return 2; }
  static int dp_rank(int r, GroupShape const&) { return r % 2; }
  static bool is_collector(int, GroupShape const&) { return true; }
  static bool is_identity(GroupShape const&) { return false; }
};
}  // namespace

TEST_CASE("mesh collect checks exactly one collector per DP rank", "[dispatch][modes][mesh]") {
  auto g = GroupShape::make(4);
  std::vector<DataProto> outs{make_rows(1, 1), make_rows(1, 2), make_rows(1, 3), make_rows(1, 4)};
  CollectContext cctx{g, "Actor", "train", 0};
  REQUIRE_THROWS_WITH(dispatch::NDComputeProto<BadLayout>::collect(std::move(outs), cctx),
                      Catch::Contains("both collectors of DP rank 0"));
}

TEST_CASE("DPComputeMetric splits like DPComputeProto and returns every rank's value untrimmed",
          "[dispatch][modes]") {
  auto g = GroupShape::make(4);
  auto d = make_rows(10, 3);
  d.set_auto_padding(true);
  std::int64_t pad = 0;
  auto parts = laws::split_per_rank<dispatch::DPComputeMetric, DataProto>(d, g, &pad);
  REQUIRE(pad == 2);
  std::vector<double> metrics{1, 2, 3, 4};
  CollectContext cctx{g, "R", "f", pad};
  REQUIRE(dispatch::DPComputeMetric::collect(std::move(metrics), cctx) == std::vector<double>{1, 2, 3, 4});
}

TEST_CASE("Dist<bool>::for_rank returns each rank's value (std::vector<bool> holds no bool objects)", "[dispatch][dist]") {
  std::mt19937 g(17);
  for (int trial = 0; trial < 20; ++trial) {
    int const ws = 1 + static_cast<int>(g() % 8);
    std::vector<bool> v;
    for (int r = 0; r < ws; ++r) v.push_back(g() % 2 == 1);
    auto const d = Dist<bool>::scatter(v);
    REQUIRE(d.covers(ws));
    for (int r = 0; r < ws; ++r) CHECK(d.for_rank(r) == v[static_cast<std::size_t>(r)]);
    std::vector<int> idx;
    for (int r = 0; r < ws; ++r) idx.push_back(ws - 1 - r);
    auto const p = Dist<bool>::scatter(v, idx);
    for (int r = 0; r < ws; ++r) CHECK(p.for_rank(r) == v[static_cast<std::size_t>(ws - 1 - r)]);
    CHECK(Dist<bool>::broadcast(v[0]).for_rank(ws - 1) == v[0]);
  }
}

}  // namespace test_modes
