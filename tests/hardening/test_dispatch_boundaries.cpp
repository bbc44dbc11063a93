// Batches crossing a dispatch (class 4): two DataProto arguments of different row
// counts, a non-tensor column shorter than the batch (reachable through the mutable
// accessor), each a shape_error naming the keys and the row counts before any worker runs.
#include <catch2/catch.hpp>

#include <rlflow/core/data_proto.hpp>
#include <rlflow/dispatch/worker_group.hpp>

#include <atomic>

namespace test_dispatch_boundaries {

using namespace rlflow;

namespace {
std::atomic<int> calls{0};

DataProto rows(std::int64_t n) {
  std::vector<std::int64_t> id(static_cast<std::size_t>(n));
  NonTensorColumn label;
  for (std::int64_t i = 0; i < n; ++i) {
    id[static_cast<std::size_t>(i)] = i;
    label.emplace_back(std::string("r") + std::to_string(i));
  }
  return DataProto::from_dict({{"id", Tensor::from(id, Shape{n})}}, {{"label", std::move(label)}});
}

struct Two {
  using role_tag = worker_tag;
  static constexpr std::string_view role_name = "Two";
  explicit Two(WorkerContext const&) {}
  DataProto pair(DataProto const& a, DataProto const& b) {
    ++calls;
    DataProto out = a.clone();
    out.set_tensor("b_id", b.tensor("id").clone());
    return out;
  }
  DataProto one(DataProto const& a) {
    ++calls;
    return a.clone();
  }
  using methods = rlflow::methods<method<&Two::pair, dispatch::DPComputeProto>, method<&Two::one, dispatch::DPComputeProto>>;
};
}  // namespace

TEST_CASE("two DataProto arguments of different row counts are a shape_error before any worker runs", "[hardening][dispatch]") {
  ResourcePool pool("p", {2}, 1);
  WorkerGroup<Two> g(pool);
  calls = 0;
  auto const out = g.call<&Two::pair>(rows(4), rows(4));
  REQUIRE(out.size() == 4);
  REQUIRE(calls == 2);
  calls = 0;
  REQUIRE_THROWS_AS(g.call<&Two::pair>(rows(4), rows(6)), shape_error);
  REQUIRE_THROWS_WITH(g.call<&Two::pair>(rows(4), rows(6)),
                      Catch::Contains("Two::pair") && Catch::Contains("argument 1 has 6 rows") &&
                          Catch::Contains("argument 0 has 4"));
  // both multiples of the DP size: chunked independently before, now rejected as well
  REQUIRE_THROWS_AS(g.call<&Two::pair>(rows(2), rows(8)), shape_error);
  REQUIRE(calls == 0);
}

TEST_CASE("a non-tensor column shorter than the batch is a shape_error, never a read past its end", "[hardening][dispatch]") {
  ResourcePool pool("p", {2}, 1);
  WorkerGroup<Two> g(pool);
  DataProto d = rows(6);
  d.non_tensor("label").pop_back();  // the mutable accessor lets a column go short
  d.non_tensor("label").pop_back();
  calls = 0;
  REQUIRE_THROWS_AS(g.call<&Two::one>(d), shape_error);
  REQUIRE_THROWS_WITH(g.call<&Two::one>(d), Catch::Contains("Two::one") && Catch::Contains("label") &&
                                                Catch::Contains("length 4") && Catch::Contains("batch size 6"));
  REQUIRE(calls == 0);
  // the DataProto operations that slice rows check too
  REQUIRE_THROWS_AS(d.chunk(2), shape_error);
  REQUIRE_THROWS_AS(d.slice(0, 6), shape_error);
  REQUIRE_THROWS_AS(d.split(3), shape_error);
  std::vector<std::int64_t> idx{5, 0};
  REQUIRE_THROWS_AS(d.index(idx), shape_error);
  // a longer column is caught by the consistency check as well
  DataProto e = rows(4);
  e.non_tensor("label").emplace_back(std::string("extra"));
  REQUIRE_THROWS_WITH(g.call<&Two::one>(e), Catch::Contains("label") && Catch::Contains("length 5"));
  REQUIRE(calls == 0);
}

}  // namespace test_dispatch_boundaries
