// tests/dispatch_mpi/test_wire.cpp <-> include/rlflow/detail/wire.hpp: the round-trip law
// get(put(x)) == x over random values of every supported type, and truncated input -> format_error.
#include <map>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <catch2/catch.hpp>

#include <rlflow/detail/wire.hpp>

#include "dispatch/support.hpp"

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
