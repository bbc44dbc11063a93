// tests/dispatch/test_row_counts.cpp <-> include/rlflow/dispatch/dp_compute_proto.hpp: a row mode's
// method returns one row per input row; a worker that returns fewer (or more) is a worker_error
// naming the method, the rank and both counts, blocking and non-blocking, with and without
// auto-padding (where the padding cut would otherwise remove real rows). A mode that declares
// 'changes_row_count = true' collects whatever its workers return.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "dispatch/support.hpp"

namespace test_row_counts {

using namespace rlflow;
using test_dispatch::ids_of;
using test_dispatch::make_rows;

namespace {
//! DPComputeProto with the row-count check declared off: its methods may return any row count.
struct ExpandRows : dispatch::detail::padded_row_mode<dispatch::GroupMesh, ExpandRows> {
  static constexpr const char* mode_name = "ExpandRows";
  static constexpr bool changes_row_count = true;
};

struct Dropper {
  using role_tag = worker_tag;
  static constexpr std::string_view role_name = "Dropper";
  explicit Dropper(WorkerContext const& c) : rank(c.rank) {}
  int rank;
  //! rank 'bad' drops half of its rows (the rest keep theirs)
  DataProto drop_half_on(DataProto const& d, int bad) { return rank == bad ? d.slice(0, d.size() / 2) : d; }
  //! every rank drops its last row
  DataProto drop_last(DataProto const& d) { return d.slice(0, d.size() - 1); }
  DataProto drop_last_async(DataProto const& d) { return d.slice(0, d.size() - 1); }
  //! every rank returns one more row than it got
  DataProto add_one(DataProto const& d) { return d.padded_repeat_last(1); }
  DataProto drop_with_func(DataProto (*f)(DataProto const&), DataProto const& d) { return f(d).slice(0, 1); }
  //! n samples per input row, on purpose (a rollout that returns n rows per prompt)
  DataProto two_per_row(DataProto const& d) { return d.repeat(2); }
  using methods = rlflow::methods<method<&Dropper::drop_half_on, dispatch::DPComputeProto>,
                                  method<&Dropper::drop_last, dispatch::DPComputeProto>,
                                  method<&Dropper::drop_last_async, dispatch::NDComputeProto<dispatch::MeshLayout<2>>,
                                         execute::All, blocking<false>>,
                                  method<&Dropper::add_one, dispatch::DPComputeProto>,
                                  method<&Dropper::drop_with_func, dispatch::DPComputeProtoWithFunc>,
                                  method<&Dropper::two_per_row, ExpandRows>>;
};
DataProto same(DataProto const& d) { return d; }
}  // namespace

TEST_CASE("a worker that returns fewer rows than its chunk is a worker_error with the counts", "[dispatch][rows]") {
  static_assert(!changes_row_count_v<dispatch::DPComputeProto> && !changes_row_count_v<dispatch::DPComputeProtoWithFunc> &&
                !changes_row_count_v<dispatch::NDComputeProto<>> && changes_row_count_v<ExpandRows>);
  ResourcePool pool("rows", {4}, 1);
  WorkerGroup<Dropper> g(pool);
  auto const d = make_rows(8, 1);
  // 8 rows in, rank 2 returns 1 of its 2
  REQUIRE_THROWS_AS(g.call<&Dropper::drop_half_on>(d, 2), worker_error);
  REQUIRE_THROWS_WITH(g.call<&Dropper::drop_half_on>(d, 2),
                      Catch::Contains("drop_half_on") && Catch::Contains("rank 2") &&
                          Catch::Contains("returned 1 rows") && Catch::Contains("2-row input chunk"));
  REQUIRE(ids_of(g.call<&Dropper::drop_half_on>(d, -1)) == ids_of(d));  // nobody drops: unchanged
  // 8 in, 4 back
  REQUIRE_THROWS_WITH(g.call<&Dropper::drop_last>(d), Catch::Contains("rank 0") && Catch::Contains("returned 1 rows"));
  // auto-padding: 10 rows on 4 workers are padded to 12 (3 each); 8 back would be cut to 6
  auto p = make_rows(10, 2);
  p.set_auto_padding(true);
  REQUIRE_THROWS_WITH(g.call<&Dropper::drop_last>(p), Catch::Contains("returned 2 rows") && Catch::Contains("3-row input chunk"));
  // more rows than given is as wrong
  REQUIRE_THROWS_WITH(g.call<&Dropper::add_one>(d), Catch::Contains("returned 3 rows") && Catch::Contains("2-row input chunk"));
  // non-blocking, through a mesh layout (DP 2 x TP 2: the collectors' chunks hold 4 rows)
  auto pending = g.call<&Dropper::drop_last_async>(d);
  REQUIRE_THROWS_WITH(pending.get(), Catch::Contains("drop_last_async") && Catch::Contains("returned 3 rows") &&
                                                    Catch::Contains("4-row input chunk"));
  // DP_COMPUTE_PROTO_WITH_FUNC
  REQUIRE_THROWS_AS(g.call<&Dropper::drop_with_func>(&same, d), worker_error);
}

TEST_CASE("a mode that declares changes_row_count collects any row count", "[dispatch][rows]") {
  ResourcePool pool("rows2", {4}, 1);
  WorkerGroup<Dropper> g(pool);
  auto const d = make_rows(8, 3);
  DataProto const out = g.call<&Dropper::two_per_row>(d);
  REQUIRE(out.size() == 16);
  std::vector<std::int64_t> want;
  for (auto id : ids_of(d)) want.insert(want.end(), {id, id});
  REQUIRE(ids_of(out) == want);
}

}  // namespace test_row_counts
