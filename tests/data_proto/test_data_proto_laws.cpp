// Laws over random DataProtos against plain-loop references: concat(chunk(d, k)) == d with the
// documented piece sizes, unpad(pad(d)) == d for both policies, split/concat, index/mask/repeat/
// sample_level_repeat row by row, fold/unfold, union with a disjoint split, select/pop.
#include <catch2/catch.hpp>

#include "data_proto/dp_test_util.hpp"

namespace test_data_proto_laws {

using namespace rlflow;
using dp_test::rows_match;

TEST_CASE("law: concat(chunk(d, k)) == d, exactly k pieces of the documented sizes", "[data_proto][law]") {
  std::mt19937_64 rng(1);
  for (int trial = 0; trial < 150; ++trial) {
    auto d = dp_test::random_dp(rng, {.batch = trial % 4 != 0});
    std::int64_t const n = d.size();
    std::int64_t const k = 1 + static_cast<std::int64_t>(rng() % 9);
    auto parts = d.chunk(k);
    REQUIRE(static_cast<std::int64_t>(parts.size()) == k);
    std::int64_t start = 0;
    for (std::int64_t i = 0; i < k; ++i) {
      std::int64_t const want = n / k + (i < n % k ? 1 : 0);  // reference distribution
      REQUIRE(parts[static_cast<std::size_t>(i)].size() == want);
      std::vector<std::int64_t> ref;
      for (std::int64_t r = 0; r < want; ++r) ref.push_back(start + r);
      REQUIRE(rows_match(parts[static_cast<std::size_t>(i)], d, ref));
      REQUIRE(parts[static_cast<std::size_t>(i)].meta_info() == d.meta_info());
      for (auto const& [key, t] : parts[static_cast<std::size_t>(i)].tensors())
        if (t.nbytes()) REQUIRE(t.shares_storage_with(d.tensor(key)));  // zero copy
      start += want;
    }
    REQUIRE(DataProto::concat(parts) == d);
    std::int64_t const s = 1 + static_cast<std::int64_t>(rng() % 7);
    auto sp = d.split(s);
    REQUIRE(static_cast<std::int64_t>(sp.size()) == (n + s - 1) / s);
    if (!sp.empty()) REQUIRE(DataProto::concat(sp) == d);
  }
}

TEST_CASE("law: unpad(pad(d)) == d for both policies, rows by reference", "[data_proto][law]") {
  std::mt19937_64 rng(2);
  for (int trial = 0; trial < 150; ++trial) {
    auto d = dp_test::random_dp(rng, {.batch = trial % 4 != 0});
    auto const snapshot = d.clone();
    std::int64_t const n = d.size();
    std::int64_t const div = 1 + static_cast<std::int64_t>(rng() % 8);
    auto [p, pad] = d.pad_to_divisor(div);
    std::int64_t const want_pad = n == 0 ? 0 : (div - n % div) % div;
    REQUIRE(pad == want_pad);
    std::vector<std::int64_t> ref;
    for (std::int64_t i = 0; i < n + pad; ++i) ref.push_back(i < n ? i : (i - n) % n);
    REQUIRE(rows_match(p, d, ref));
    REQUIRE(p.unpad(pad) == d);
    if (n > 0) {
      std::int64_t const extra = static_cast<std::int64_t>(rng() % 5);
      auto q = d.padded_repeat_last(extra);
      std::vector<std::int64_t> ref2;
      for (std::int64_t i = 0; i < n + extra; ++i) ref2.push_back(std::min(i, n - 1));
      REQUIRE(rows_match(q, d, ref2));
      REQUIRE(q.unpad(extra) == d);
    }
    REQUIRE(d == snapshot);  // padding never mutates the caller's object
  }
}

TEST_CASE("law: index, mask, repeat and sample_level_repeat against references", "[data_proto][law]") {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 100; ++trial) {
    auto d = dp_test::random_dp(rng, {.batch = trial % 3 != 0});
    std::int64_t const n = d.size();
    if (n > 0) {
      std::vector<std::int64_t> idx(rng() % 20);
      for (auto& i : idx) i = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(n));
      REQUIRE(rows_match(d.index(idx), d, idx));
    }
    std::vector<bool> m(static_cast<std::size_t>(n));
    std::vector<std::int64_t> mref;
    for (std::int64_t i = 0; i < n; ++i)
      if ((m[static_cast<std::size_t>(i)] = rng() % 2)) mref.push_back(i);
    REQUIRE(rows_match(d.mask(m), d, mref));
    std::int64_t const times = static_cast<std::int64_t>(rng() % 4);
    std::vector<std::int64_t> inter, tile;
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t r = 0; r < times; ++r) inter.push_back(i);
    for (std::int64_t r = 0; r < times; ++r)
      for (std::int64_t i = 0; i < n; ++i) tile.push_back(i);
    REQUIRE(rows_match(d.repeat(times, true), d, inter));
    REQUIRE(rows_match(d.repeat(times, false), d, tile));
    std::vector<std::int64_t> counts(static_cast<std::size_t>(n)), sref;
    for (std::int64_t i = 0; i < n; ++i) {
      counts[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(rng() % 4);
      for (std::int64_t r = 0; r < counts[static_cast<std::size_t>(i)]; ++r) sref.push_back(i);
    }
    REQUIRE(rows_match(d.sample_level_repeat(counts), d, sref));
    // slice with steps against Python's rule
    std::int64_t const b = static_cast<std::int64_t>(rng() % 30) - 15, e = static_cast<std::int64_t>(rng() % 30) - 15;
    std::int64_t const step = 1 + static_cast<std::int64_t>(rng() % 3);
    std::vector<std::int64_t> slref;
    std::int64_t bb = b < 0 ? std::max<std::int64_t>(b + n, 0) : std::min(b, n);
    std::int64_t ee = e < 0 ? std::max<std::int64_t>(e + n, 0) : std::min(e, n);
    for (std::int64_t i = bb; i < ee; i += step) slref.push_back(i);
    REQUIRE(rows_match(d.slice(b, e, step), d, slref));
  }
}

TEST_CASE("law: fold/unfold, union of a key split, select + pop", "[data_proto][law]") {
  std::mt19937_64 rng(4);
  for (int trial = 0; trial < 100; ++trial) {
    auto d = dp_test::random_dp(rng, {.batch = trial % 3 != 0, .rows = 12});
    for (std::int64_t g : {1, 2, 3, 4, 6, 12}) {
      auto f = d.fold_batch_dim(g);
      REQUIRE(f.size() == g);
      REQUIRE(f.unfold_batch_dim() == d);
    }
    // split the keys in two, union them back
    auto tk = d.tensor_keys();
    auto nk = d.non_tensor_keys();
    std::vector<std::string> t1(tk.begin(), tk.begin() + static_cast<std::ptrdiff_t>(tk.size() / 2));
    std::vector<std::string> n1(nk.begin(), nk.begin() + static_cast<std::ptrdiff_t>(nk.size() / 2));
    auto rest = d;
    auto popped = rest.pop(t1, n1);
    REQUIRE(popped.tensor_keys() == t1);
    REQUIRE(popped.non_tensor_keys() == n1);
    auto merged = rest;
    merged.union_with(popped);
    REQUIRE(merged == d);
    auto sel = d.select(t1, n1, std::vector<std::string>{});
    sel.meta_info() = d.meta_info();
    if (t1.empty() && d.has_batch()) {
      // verl: select(batch_keys=[]) keeps an empty batch with its size; pop of no tensor keys has no batch
      REQUIRE(sel.has_batch());
      REQUIRE(sel.size() == 12);
      REQUIRE_FALSE(popped.has_batch());
    } else {
      REQUIRE(sel == popped.union_with(DataProto::from_dict({}, {}, d.meta_info())));
    }
  }
}

}  // namespace test_data_proto_laws
