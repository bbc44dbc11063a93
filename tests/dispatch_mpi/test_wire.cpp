// tests/dispatch_mpi/test_wire.cpp <-> include/rlflow/mpi/wire.hpp: the round-trip law
// get(put(x)) == x over random values of every supported type, and truncated input -> format_error.
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <catch2/catch.hpp>

#include <rlflow/mpi/wire.hpp>

#include "dispatch/support.hpp"

namespace test_wire {

using namespace rlflow;

namespace {
template <class T>
T round_trip(T const& v) {
  wire::Buffer b;
  wire::put<T>(b, v);
  wire::Reader r(std::span<std::byte const>(b.data(), b.size()));
  T back = wire::get<T>(r);
  REQUIRE(r.done());
  // every strict prefix is refused
  if (!b.empty()) {
    wire::Reader cut(std::span<std::byte const>(b.data(), b.size() - 1));
    REQUIRE_THROWS_AS(wire::get<T>(cut), format_error);
  }
  return back;
}
int twice(int x) { return 2 * x; }
}  // namespace

TEST_CASE("wire: get(put(x)) == x for values, containers, DataProto and function pointers", "[mpi][wire]") {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    int const i = static_cast<int>(rng());
    double const d = std::uniform_real_distribution<double>(-1e9, 1e9)(rng);
    REQUIRE(round_trip(i) == i);
    REQUIRE(round_trip(d) == d);
    REQUIRE(round_trip(static_cast<std::int64_t>(rng())) >= INT64_MIN);
    std::string s(rng() % 20, 'a');
    for (auto& c : s) c = static_cast<char>('a' + rng() % 26);
    REQUIRE(round_trip(s) == s);
    std::vector<float> fv(rng() % 30);
    for (auto& x : fv) x = static_cast<float>(rng() % 1000) / 3.f;
    REQUIRE(round_trip(fv) == fv);
    std::vector<std::string> sv{s, s + "x", ""};
    REQUIRE(round_trip(sv) == sv);
    std::map<std::string, std::vector<double>> m{{"a", {d, 1.0}}, {s, {}}};
    REQUIRE(round_trip(m) == m);
    std::optional<int> o = trial % 2 ? std::optional<int>(i) : std::nullopt;
    REQUIRE(round_trip(o) == o);
    auto t = std::make_tuple(i, s, fv);
    REQUIRE(round_trip(t) == t);
    MeshCoord mc{i % 7, i % 3, 1};
    REQUIRE(round_trip(mc) == mc);
    std::vector<bool> bits{true, false, trial % 2 == 0};
    REQUIRE(round_trip(bits) == bits);
    auto dp = test_dispatch::make_rows(static_cast<std::int64_t>(rng() % 9), rng());
    REQUIRE(round_trip(dp) == dp);
  }
  int (*f)(int) = &twice;
  REQUIRE(round_trip(f)(21) == 42);
  int (*none)(int) = nullptr;
  REQUIRE(round_trip(none) == nullptr);
}

TEST_CASE("wire: a corrupted DataProto is refused by its checksum", "[mpi][wire]") {
  wire::Buffer b;
  wire::put(b, test_dispatch::make_rows(4, 1));
  b[b.size() / 2] ^= std::byte{0x5a};
  wire::Reader r(std::span<std::byte const>(b.data(), b.size()));
  REQUIRE_THROWS_AS(wire::get<DataProto>(r), format_error);
}

// The bulk form (a sink installed): large columns leave the buffer as segments, in order; the
// receiver's get() allocates them and registers slots in the same order; the law still holds.
TEST_CASE("wire: DataProto with bulk segments round-trips, small columns stay inline", "[mpi][wire][bulk]") {
  std::mt19937_64 rng(9);
  for (std::int64_t n : {0, 1, 2, 3, 40}) {
    for (std::int64_t w : {1, 3000}) {
      auto dp = test_dispatch::make_rows(n, rng(), w);
      dp.set_tensor("big2", Tensor::full(Shape{n, 5000}, static_cast<std::int64_t>(n)));
      wire::Bulk out;
      wire::Buffer b;
      {
        wire::BulkScope scope(&out, nullptr);
        wire::put(b, dp);
      }
      std::size_t big_bytes = 0;
      for (auto const& [k, t] : dp.tensors())
        if (t.nbytes() >= wire::bulk_min_bytes) big_bytes += t.nbytes();
      std::size_t seg_bytes = 0;
      for (auto const& s : out.segs) seg_bytes += s.bytes;
      REQUIRE(seg_bytes == big_bytes);
      if (big_bytes) REQUIRE(b.size() < big_bytes);  // the large columns are not in the message
      wire::Bulk in;
      wire::Reader r(std::span<std::byte const>(b.data(), b.size()));
      DataProto back;
      {
        wire::BulkScope scope(nullptr, &in);
        back = wire::get<DataProto>(r);
      }
      REQUIRE(r.done());
      REQUIRE(in.segs.size() == out.segs.size());
      for (std::size_t i = 0; i < in.segs.size(); ++i) {
        REQUIRE(in.segs[i].bytes == out.segs[i].bytes);
        std::memcpy(in.segs[i].ptr, out.segs[i].ptr, in.segs[i].bytes);  // what the transport does
      }
      REQUIRE(back == dp);
      if (!out.segs.empty()) {  // the bulk form read without a receiver is refused, not misread
        wire::Reader r2(std::span<std::byte const>(b.data(), b.size()));
        REQUIRE_THROWS_WITH(wire::get<DataProto>(r2), Catch::Contains("no bulk receiver"));
      }
      for (std::size_t cut = 0; cut < b.size(); cut += 1 + b.size() / 50) {  // truncation -> format_error
        wire::Bulk in2;
        wire::BulkScope scope(nullptr, &in2);
        wire::Reader rc(std::span<std::byte const>(b.data(), cut));
        REQUIRE_THROWS_AS(wire::get<DataProto>(rc), format_error);
      }
    }
  }
}

TEST_CASE("wire: shared pointers and number vectors (inline and as bulk segments) round-trip", "[mpi][wire][bulk]") {
  std::mt19937_64 rng(3);
  for (std::size_t n : {std::size_t{0}, std::size_t{5}, std::size_t{20000}}) {
    auto w = std::make_shared<std::vector<float>>(n);
    for (auto& x : *w) x = static_cast<float>(rng() % 1000) / 7.f;
    std::shared_ptr<std::vector<float> const> cw = w;
    REQUIRE(*round_trip(cw) == *w);  // no sink: inline
    std::shared_ptr<std::vector<float> const> none;
    REQUIRE(round_trip(none) == nullptr);
    wire::Bulk out, in;
    wire::Buffer b;
    {
      wire::BulkScope scope(&out, nullptr);
      wire::put(b, cw);
    }
    REQUIRE(out.segs.size() == (n * 4 >= wire::bulk_min_bytes ? 1u : 0u));
    wire::Reader r(std::span<std::byte const>(b.data(), b.size()));
    std::shared_ptr<std::vector<float> const> back;
    {
      wire::BulkScope scope(nullptr, &in);
      back = wire::get<std::shared_ptr<std::vector<float> const>>(r);
    }
    REQUIRE(r.done());
    REQUIRE(in.segs.size() == out.segs.size());
    for (std::size_t i = 0; i < in.segs.size(); ++i) std::memcpy(in.segs[i].ptr, out.segs[i].ptr, in.segs[i].bytes);
    REQUIRE(*back == *w);
  }
}

}  // namespace test_wire
