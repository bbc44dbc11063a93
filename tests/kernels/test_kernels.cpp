// tests/kernels/test_kernels.cpp <-> include/rlflow/kernels/*: cpu::par against the independent
// double-precision references in reference.hpp, over random inputs and verl's edge cases.
#include <catch2/catch.hpp>

#include <rlflow/kernels/kernels.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <map>
#include <memory>
#include <set>
#include <optional>
#include <type_traits>
#include <random>
#include <string>
#include <vector>

#include "kernels/reference.hpp"

namespace k = rlflow::kernels;
using rlflow::cpu::par;
using fvec = std::vector<float>;
using ivec = std::vector<std::int64_t>;

namespace {

template <class T>
std::span<T const> cs(std::vector<T> const& v) { return {v.data(), v.size()}; }
std::span<float> ms(fvec& v) { return {v.data(), v.size()}; }

ref::vec dbl(fvec const& v) { return ref::vec(v.begin(), v.end()); }

//! AggInfo without -Wmissing-field-initializers noise.
k::AggInfo info(int dp, std::optional<double> ntok = {}, std::optional<double> nseq = {}, std::optional<double> norm = {}) {
  k::AggInfo a;
  a.dp_size = dp;
  a.batch_num_tokens = ntok;
  a.global_batch_size = nseq;
  a.loss_scale_factor = norm;
  return a;
}

//! A mask buffer of element type M (bool stored as bytes: std::vector<bool> has no data()).
template <class M>
struct mask_buf {
  std::vector<std::conditional_t<std::is_same_v<M, bool>, std::uint8_t, M>> v;
  std::span<M const> span() const { return {reinterpret_cast<M const*>(v.data()), v.size()}; }
};

double max_rel(fvec const& got, ref::vec const& want) {
  REQUIRE(got.size() == want.size());
  double e = 0;
  for (std::size_t i = 0; i < got.size(); ++i) e = std::max(e, std::fabs(got[i] - want[i]) / std::max(1.0, std::fabs(want[i])));
  return e;
}

fvec uniform(std::mt19937& g, std::size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  fvec v(n);
  for (auto& x : v) x = u(g);
  return v;
}

//! Right-padded mask with random lengths in [min_len, T]; a few rows also get interior holes.
fvec random_mask(std::mt19937& g, int B, int T, int min_len = 0, bool holes = true) {
  fvec m(static_cast<std::size_t>(B) * T, 0.0f);
  std::uniform_int_distribution<int> len(min_len, T);
  for (int i = 0; i < B; ++i) {
    int L = len(g);
    for (int t = 0; t < L; ++t) m[i * T + t] = 1.0f;
    if (holes && L > 2 && g() % 3 == 0) m[i * T + L / 2] = 0.0f;
  }
  return m;
}

//! Non-contiguous groups of varying size (including groups of one), shuffled.
ivec random_groups(std::mt19937& g, int B) {
  ivec ids;
  std::int64_t gid = 0;
  while (static_cast<int>(ids.size()) < B) {
    int n = std::min<int>(B - static_cast<int>(ids.size()), 1 + static_cast<int>(g() % 9));
    for (int j = 0; j < n; ++j) ids.push_back(gid);
    ++gid;
  }
  std::shuffle(ids.begin(), ids.end(), g);
  return ids;
}

//! Scores with ties and groups of equal values.
fvec random_scores(std::mt19937& g, ivec const& ids) {
  fvec s(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) s[i] = (ids[i] % 5 == 0) ? 0.5f : static_cast<float>(g() % 5) * 0.25f - 0.3f;
  return s;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// masked helpers

TEST_CASE("masked helpers match the reference and raise as verl", "[kernels][masked]") {
  std::mt19937 g(1);
  int B = 37, T = 53;
  auto x = uniform(g, B * T, -3, 5);
  auto m = random_mask(g, B, T);
  x[5] = NAN;  // a NaN at a masked position must not leak
  m[5] = 0;
  k::Dims d{B, T};
  CHECK(k::masked_sum(par, d, cs(x), cs(m)) == Approx(ref::msum(dbl(x), dbl(m))).epsilon(1e-12));
  CHECK(k::masked_mean(par, d, cs(x), cs(m)) == Approx(ref::mmean(dbl(x), dbl(m))).epsilon(1e-12));
  CHECK(k::masked_var(par, d, cs(x), cs(m)) == Approx(ref::mvar(dbl(x), dbl(m))).epsilon(1e-10));
  fvec out(x.size());
  k::masked_whiten(par, d, cs(x), cs(m), ms(out));
  auto w = ref::whiten(dbl(x), dbl(m));
  for (std::size_t i = 0; i < x.size(); ++i)
    if (i != 5) REQUIRE(out[i] == Approx(w[i]).epsilon(1e-5).margin(1e-5));

  // oracle: whiten([1,2,3,100], [1,1,1,0]) = [-1, 0, 1, 98]
  fvec xo{1, 2, 3, 100}, mo{1, 1, 1, 0}, oo(4);
  k::masked_whiten(par, k::Dims{1, 4}, cs(xo), cs(mo), ms(oo));
  CHECK(oo[0] == Approx(-1).epsilon(1e-6));
  CHECK(oo[1] == Approx(0).margin(1e-6));
  CHECK(oo[2] == Approx(1).epsilon(1e-6));
  CHECK(oo[3] == Approx(98).epsilon(1e-6));

  fvec one{1, 0, 0}, zero{0, 0, 0}, v3{1, 2, 3};
  CHECK_THROWS_AS(k::masked_var(par, k::Dims{1, 3}, cs(v3), cs(one)), rlflow::value_error);
  CHECK_THROWS_WITH(k::masked_var(par, k::Dims{1, 3}, cs(v3), cs(zero)), Catch::Contains("no valid token"));
  CHECK(k::masked_var(par, k::Dims{1, 3}, cs(v3), cs(one), false) == Approx(0.0).margin(1e-12));
  CHECK_THROWS_AS(k::masked_sum(par, k::Dims{2, 3}, cs(v3), cs(one)), rlflow::shape_error);
}

// ---------------------------------------------------------------------------------------------
// outcome advantage estimators

TEST_CASE("grpo matches verl's oracle values", "[kernels][advantage]") {
  fvec s{1, 0, 1, 0.5f, 2, 0, 0, 1};
  ivec ids{0, 0, 0, 0, 1, 1, 1, 1};
  fvec m(8 * 3, 1.0f), adv(24), ret(24);
  k::grpo_outcome_advantage(par, k::Dims{8, 3}, cs(s), cs(m), cs(ids), ms(adv), ms(ret));
  double want[8] = {0.78335, -1.30558, 0.78335, -0.26112, 1.30558, -0.78335, -0.78335, 0.26112};
  for (int i = 0; i < 8; ++i) {
    CHECK(adv[i * 3] == Approx(want[i]).epsilon(1e-4));
    CHECK(ret[i * 3 + 2] == adv[i * 3 + 2]);
  }
  k::grpo_outcome_advantage(par, k::Dims{8, 3}, cs(s), cs(m), cs(ids), ms(adv), ms(ret), k::GRPOOptions{1e-6, false});
  double dr[8] = {0.375, -0.625, 0.375, -0.125, 1.25, -0.75, -0.75, 0.25};
  for (int i = 0; i < 8; ++i) CHECK(adv[i * 3 + 1] == Approx(dr[i]).epsilon(1e-6));
  // n = 1: score / (1 + 1e-6); all-equal group: 0
  fvec s1{1.0f, 3, 3, 3};
  ivec i1{0, 1, 1, 1};
  fvec m1(4, 1.0f), a1(4);
  k::grpo_outcome_advantage(par, k::Dims{4, 1}, cs(s1), cs(m1), cs(i1), ms(a1));
  CHECK(a1[0] == Approx(0.999999).epsilon(1e-7));
  CHECK(a1[1] == 0.0f);
  CHECK(a1[3] == 0.0f);
}

TEMPLATE_TEST_CASE("outcome estimators match the references over random non-contiguous groups", "[kernels][advantage]", float,
                   std::uint8_t, bool) {
  std::mt19937 g(7);
  for (int trial = 0; trial < 4; ++trial) {
    int B = 1 + static_cast<int>(g() % 200), T = 1 + static_cast<int>(g() % 40);
    auto ids = random_groups(g, B);
    auto s = random_scores(g, ids);
    auto mf = random_mask(g, B, T);
    mask_buf<TestType> mb;
    mb.v.resize(mf.size());
    for (std::size_t i = 0; i < mf.size(); ++i) mb.v[i] = static_cast<TestType>(mf[i] != 0);
    auto m = mb.span();
    k::Dims d{B, T};
    fvec adv(B * T), ret(B * T);
    auto sd = dbl(s);
    auto md = dbl(mf);
    for (bool norm : {true, false}) {
      k::grpo_outcome_advantage(par, d, cs(s), m, cs(ids), ms(adv), ms(ret), k::GRPOOptions{1e-6, norm});
      auto want = ref::broadcast(ref::grpo(sd, ids, 1e-6, norm), md, T);
      REQUIRE(max_rel(adv, want) < 1e-5);
      REQUIRE(max_rel(ret, want) < 1e-5);
    }
    k::rloo_outcome_advantage(par, d, cs(s), m, cs(ids), ms(adv));
    REQUIRE(max_rel(adv, ref::broadcast(ref::rloo(sd, ids, false), md, T)) < 1e-5);
    k::rloo_vectorized_outcome_advantage(par, d, cs(s), m, cs(ids), ms(adv));
    REQUIRE(max_rel(adv, ref::broadcast(ref::rloo(sd, ids, true), md, T)) < 1e-5);
    k::gpg_outcome_advantage(par, d, cs(s), m, cs(ids), ms(adv));
    REQUIRE(max_rel(adv, ref::broadcast(ref::gpg(sd, ids), md, T)) < 1e-5);
    ref::vec len(B, 0.0);
    for (int i = 0; i < B; ++i) for (int t = 0; t < T; ++t) len[i] += md[i * T + t];
    bool opo_ok = true;
    for (auto& [id, rows] : ref::groups(ids)) {
      double L = 0;
      for (int i : rows) L += len[i];
      if (rows.size() > 1 && L == 0) opo_ok = false;
    }
    if (opo_ok) {
      k::opo_outcome_advantage(par, d, cs(s), m, cs(ids), ms(adv));
      REQUIRE(max_rel(adv, ref::broadcast(ref::opo(sd, len, ids), md, T)) < 1e-5);
    } else {
      CHECK_THROWS_AS(k::opo_outcome_advantage(par, d, cs(s), m, cs(ids), ms(adv)), rlflow::value_error);
    }
    if (ref::mcount(md) >= 2) {
      k::reinforce_plus_plus_baseline_outcome_advantage(par, d, cs(s), m, cs(ids), ms(adv), ms(ret));
      ref::vec a(B);
      for (auto& [id, rows] : ref::groups(ids))
        for (int i : rows) a[i] = sd[i] - (rows.size() > 1 ? ref::gmean(sd, rows) : 0.0);
      auto tiled = ref::broadcast(a, md, T);
      auto w = ref::whiten(tiled, md);
      for (std::size_t q = 0; q < w.size(); ++q) w[q] *= md[q];
      REQUIRE(max_rel(adv, w) < 1e-4);
      REQUIRE(max_rel(ret, w) < 1e-4);
    }
  }
}

TEST_CASE("grpo with every row its own group (n = 1) and with ids that only look like it", "[kernels][advantage]") {
  // A permutation of 0..B-1 takes the table-free path; ids whose largest value is B-1 but with
  // repeats must not. Both must equal the reference exactly as before.
  std::mt19937 g(13);
  for (int trial = 0; trial < 6; ++trial) {
    int B = 3 + static_cast<int>(g() % 300), T = 1 + static_cast<int>(g() % 20);
    ivec ids(B);
    for (int i = 0; i < B; ++i) ids[i] = i;
    std::shuffle(ids.begin(), ids.end(), g);
    if (trial % 2 == 1) {  // copy one id over another, keeping the largest id B-1 in place
      int const pmax = static_cast<int>(std::find(ids.begin(), ids.end(), B - 1) - ids.begin());
      int const q = (pmax + 1) % B, p2 = (pmax + 2) % B;
      ids[p2] = ids[q];
    }
    auto s = random_scores(g, ids);
    auto mf = random_mask(g, B, T);
    k::Dims d{B, T};
    fvec adv(B * T), ret(B * T);
    for (bool norm : {true, false}) {
      k::grpo_outcome_advantage(par, d, cs(s), cs(mf), cs(ids), ms(adv), ms(ret), k::GRPOOptions{1e-6, norm});
      auto want = ref::broadcast(ref::grpo(dbl(s), ids, 1e-6, norm), dbl(mf), T);
      REQUIRE(max_rel(adv, want) < 1e-6);
      REQUIRE(max_rel(ret, want) < 1e-6);
    }
  }
}

TEST_CASE("grpo pass@k matches the reference and rejects groups of one", "[kernels][advantage]") {
  std::mt19937 g(11);
  int B = 120, T = 9;
  ivec ids(B);
  for (int i = 0; i < B; ++i) ids[i] = i % 30;  // 30 groups of 4, interleaved
  std::shuffle(ids.begin(), ids.end(), g);
  auto s = uniform(g, B, -1, 2);
  auto m = random_mask(g, B, T);
  fvec adv(B * T);
  for (bool norm : {true, false}) {
    k::grpo_passk_outcome_advantage(par, k::Dims{B, T}, cs(s), cs(m), cs(ids), ms(adv), {}, k::GRPOOptions{1e-6, norm});
    REQUIRE(max_rel(adv, ref::broadcast(ref::passk(dbl(s), ids, 1e-6, norm), dbl(m), T)) < 1e-5);
  }
  ids[0] = 99 % B;  // make a group of one (id 99 unused otherwise)
  CHECK_THROWS_WITH(k::grpo_passk_outcome_advantage(par, k::Dims{B, T}, cs(s), cs(m), cs(ids), ms(adv)),
                    Catch::Contains("at least 2 samples"));
}

TEST_CASE("rloo and rloo_vectorized differ only on groups of one", "[kernels][advantage]") {
  fvec s{2.0f, 1.0f, 3.0f};
  ivec ids{0, 1, 1};
  fvec m(3, 1.0f), a(3), b(3);
  k::rloo_outcome_advantage(par, k::Dims{3, 1}, cs(s), cs(m), cs(ids), ms(a));
  k::rloo_vectorized_outcome_advantage(par, k::Dims{3, 1}, cs(s), cs(m), cs(ids), ms(b));
  CHECK(a[0] == 2.0f);
  CHECK(b[0] == 0.0f);
  CHECK(a[1] == Approx(-2.0f));
  CHECK(b[1] == Approx(-2.0f));
  CHECK(a[2] == Approx(2.0f));
}

TEST_CASE("outcome estimators: empty batch, fully masked rows, NaN scores, bad group ids", "[kernels][advantage]") {
  fvec none;
  ivec noids;
  fvec out;
  REQUIRE_NOTHROW(k::grpo_outcome_advantage(par, k::Dims{0, 16}, cs(none), cs(none), cs(noids), ms(out)));
  REQUIRE_NOTHROW(k::rloo_outcome_advantage(par, k::Dims{0, 0}, cs(none), cs(none), cs(noids), ms(out)));
  fvec s{1, 2, 3, 4};
  ivec ids{0, 0, 1, 1};
  fvec m{1, 1, 0, 0, 1, 0, 0, 0};  // rows 1 and 3 fully masked
  fvec adv(8);
  k::grpo_outcome_advantage(par, k::Dims{4, 2}, cs(s), cs(m), cs(ids), ms(adv));
  CHECK(adv[2] == 0.0f);
  CHECK(adv[3] == 0.0f);
  CHECK(adv[0] == Approx(-0.5 / (std::sqrt(0.5) + 1e-6)).epsilon(1e-6));
  s[2] = NAN;
  CHECK_THROWS_WITH(k::grpo_outcome_advantage(par, k::Dims{4, 2}, cs(s), cs(m), cs(ids), ms(adv)), Catch::Contains("row 2"));
  s[2] = INFINITY;
  CHECK_THROWS_AS(k::rloo_outcome_advantage(par, k::Dims{4, 2}, cs(s), cs(m), cs(ids), ms(adv)), rlflow::value_error);
  s[2] = 3;
  ids[1] = 7;
  CHECK_THROWS_WITH(k::grpo_outcome_advantage(par, k::Dims{4, 2}, cs(s), cs(m), cs(ids), ms(adv)),
                    Catch::Contains("group id 7 at row 1"));
  ids[1] = 0;
  CHECK_THROWS_AS(k::grpo_outcome_advantage(par, k::Dims{4, 3}, cs(s), cs(m), cs(ids), ms(adv)), rlflow::shape_error);
}

TEST_CASE("group_index factorizes labels in sorted order", "[kernels][advantage]") {
  std::vector<std::string> uids{"b", "a", "c", "a", "b"};
  CHECK(k::group_index(uids) == ivec{1, 0, 2, 0, 1});
}

TEST_CASE("group_index (hashing) equals the sort-and-search factorization", "[kernels][advantage]") {
  // Reference: numpy.unique's inverse - sort a copy, unique, binary-search each label.
  auto reference = [](auto const& labels) {
    auto u = labels;
    std::sort(u.begin(), u.end());
    u.erase(std::unique(u.begin(), u.end()), u.end());
    ivec out;
    for (auto const& l : labels) out.push_back(std::lower_bound(u.begin(), u.end(), l) - u.begin());
    return out;
  };
  std::mt19937 g(11);
  for (int trial = 0; trial < 20; ++trial) {
    int const B = 1 + static_cast<int>(g() % 3000), distinct = 1 + static_cast<int>(g() % (B + 1));
    std::vector<std::string> names;
    for (int j = 0; j < distinct; ++j) {
      // shared 8-byte prefixes, prefixes of each other, empty and high-bit bytes: ties past the first 8 bytes
      std::string s = (g() % 2) ? "prompt-0" : "";
      int const len = static_cast<int>(g() % 12);
      for (int c = 0; c < len; ++c) s.push_back(static_cast<char>((g() % 3 == 0) ? 0xC3 : 'a' + g() % 3));
      names.push_back(s);
    }
    std::vector<std::string> labels;
    for (int i = 0; i < B; ++i) labels.push_back(names[g() % names.size()]);
    REQUIRE(k::group_index(labels) == reference(labels));
    std::vector<std::int64_t> nums;
    for (int i = 0; i < B; ++i) nums.push_back(static_cast<std::int64_t>(g() % (distinct + 1)) * 1000003 - 5000);
    REQUIRE(k::group_index(std::span<std::int64_t const>(nums)) == reference(nums));
  }
  CHECK(k::group_index(std::vector<std::string>{}).empty());
}

namespace {

//! Plain-loop first-seen factorization: a std::map from label to the number of labels before it.
template <class L>
ivec first_seen_reference(std::vector<L> const& labels) {
  std::map<L, std::int64_t> seen;
  ivec out;
  for (auto const& l : labels) out.push_back(seen.emplace(l, static_cast<std::int64_t>(seen.size())).first->second);
  return out;
}

//! Labels that stress the text table: empty, 1-3 / 4-7 / 8-16 bytes (the hash's short paths),
//! around the 48-byte inline limit, long labels differing only past byte 48 or in their last
//! byte, shared prefixes, embedded NULs and high-bit bytes.
std::vector<std::string> tricky_names(std::mt19937& g, int distinct) {
  std::set<std::string> uniq;
  std::vector<std::string> names;
  std::string const long_prefix(52, 'p');
  while (static_cast<int>(names.size()) < distinct) {
    std::string s;
    switch (g() % 6) {
      case 0: break;  // empty
      case 1: s = long_prefix; break;
      case 2: s = std::string(47 + g() % 3, 'q'); break;  // 47, 48, 49 bytes
      case 3: s = "prompt-0"; break;
      default: break;
    }
    int const len = static_cast<int>(g() % 20);
    for (int c = 0; c < len; ++c) {
      unsigned const r = g() % 5;
      s.push_back(r == 0 ? '\0' : r == 1 ? static_cast<char>(0xC3) : static_cast<char>('a' + g() % 3));
    }
    if (uniq.insert(s).second) names.push_back(s);
  }
  return names;
}

}  // namespace

TEST_CASE("group_index_first_seen equals a plain-loop first-seen factorization and the sorted grouping", "[kernels][advantage]") {
  std::mt19937 g(23);
  for (int trial = 0; trial < 24; ++trial) {
    int const B = trial == 0 ? 1 : 1 + static_cast<int>(g() % 5000);
    int const distinct = trial == 1 ? 1 : 1 + static_cast<int>(g() % (B + 1));  // trial 1: every row the same uid
    auto const names = tricky_names(g, distinct);
    std::vector<std::string> labels;
    for (int i = 0; i < B; ++i) labels.push_back(names[g() % names.size()]);
    ivec ids(static_cast<std::size_t>(B), -1);
    std::int64_t const G = k::group_index_first_seen(std::span<std::string const>(labels), std::span<std::int64_t>(ids));
    auto const want = first_seen_reference(labels);
    REQUIRE(ids == want);
    REQUIRE(G == *std::max_element(want.begin(), want.end()) + 1);
    // the sorted factorization (group_index) is the same partition, renumbered one-to-one
    auto const sorted = k::group_index(labels);
    std::map<std::int64_t, std::int64_t> to_sorted, from_sorted;
    for (int i = 0; i < B; ++i) {
      REQUIRE(to_sorted.emplace(ids[i], sorted[i]).first->second == sorted[i]);
      REQUIRE(from_sorted.emplace(sorted[i], ids[i]).first->second == ids[i]);
    }
    // string_view labels and integer labels take the same path
    std::vector<std::string_view> views(labels.begin(), labels.end());
    ivec vids(static_cast<std::size_t>(B));
    k::group_index_first_seen(std::span<std::string_view const>(views), std::span<std::int64_t>(vids));
    REQUIRE(vids == want);
    std::vector<std::int64_t> nums;
    for (int i = 0; i < B; ++i) nums.push_back(static_cast<std::int64_t>(g() % (distinct + 1)) * 1000003 - 5000);
    ivec nids(static_cast<std::size_t>(B));
    k::group_index_first_seen(std::span<std::int64_t const>(nums), std::span<std::int64_t>(nids));
    REQUIRE(nids == first_seen_reference(nums));
  }
  ivec none;
  CHECK(k::group_index_first_seen(std::span<std::string const>(), std::span<std::int64_t>(none)) == 0);
  std::vector<std::string> two{"a", "b"};
  ivec one(1);
  CHECK_THROWS_AS(k::group_index_first_seen(std::span<std::string const>(two), std::span<std::int64_t>(one)), rlflow::shape_error);
}

TEST_CASE("the hashed grouping stays exact when hashes collide", "[kernels][advantage]") {
  // Forced hashes: every label the same hash (one probe chain through the whole table, growth
  // included), three hash values, and the hash of the first byte only.
  std::mt19937 g(31);
  int const B = 3000;
  auto const names = tricky_names(g, 700);
  std::vector<std::string> labels;
  for (int i = 0; i < B; ++i) labels.push_back(names[g() % names.size()]);
  auto const want = first_seen_reference(labels);
  auto key = [&](std::size_t i) { return std::string_view(labels[i]); };
  auto run = [&](auto hash) {
    ivec ids(static_cast<std::size_t>(B), -1);
    std::int64_t const G = k::detail::hashed_group_ids<std::string_view>(labels.size(), key, ids.data(), nullptr, hash);
    REQUIRE(G == *std::max_element(want.begin(), want.end()) + 1);
    return ids;
  };
  CHECK(run([](std::string_view) -> std::uint64_t { return 42; }) == want);
  CHECK(run([](std::string_view s) -> std::uint64_t { return (s.size() % 3) << 62; }) == want);
  CHECK(run([](std::string_view s) -> std::uint64_t { return s.empty() ? 0 : static_cast<unsigned char>(s[0]) * 0x9E3779B97F4A7C15ull; }) == want);
  // integer keys through a constant hash as well
  std::vector<std::int64_t> nums;
  for (int i = 0; i < B; ++i) nums.push_back(static_cast<std::int64_t>(g() % 900) - 450);
  ivec nids(static_cast<std::size_t>(B));
  k::detail::hashed_group_ids<std::int64_t>(nums.size(), [&](std::size_t i) { return nums[i]; }, nids.data(), nullptr,
                                            [](std::int64_t) -> std::uint64_t { return 7; });
  CHECK(nids == first_seen_reference(nums));
}

TEST_CASE("hash_bytes reads only the label's bytes and sees every one of them", "[kernels][advantage]") {
  // Exact-size heap buffers (an over-read trips the sanitizers); the same bytes elsewhere hash
  // the same; changing any single byte changes the hash.
  std::mt19937 g(37);
  for (std::size_t n = 0; n <= 80; ++n) {
    std::unique_ptr<char[]> a(new char[n + 1]), b(new char[n + 1]);
    for (std::size_t i = 0; i < n; ++i) a[i] = static_cast<char>(g());
    std::copy(a.get(), a.get() + n, b.get());
    std::string_view const va(a.get(), n), vb(b.get(), n);
    std::uint64_t const h = k::detail::hash_bytes(va);
    REQUIRE(k::detail::hash_bytes(vb) == h);
    for (std::size_t i = 0; i < n; ++i) {
      b[i] = static_cast<char>(b[i] ^ 0x01);
      REQUIRE(k::detail::hash_bytes(vb) != h);
      b[i] = a[i];
    }
    if (n > 0) REQUIRE(k::detail::hash_bytes(std::string_view(a.get(), n - 1)) != h);  // the length counts
  }
}

TEST_CASE("the group estimators do not depend on how groups are numbered", "[kernels][advantage]") {
  // first-seen ids (the advantage path's), sorted ids (numpy.unique's) and a random renumbering
  // give bit-identical advantages and returns
  std::mt19937 g(43);
  for (int trial = 0; trial < 4; ++trial) {
    int const B = 2 + static_cast<int>(g() % 300), T = 1 + static_cast<int>(g() % 20);
    auto const names = tricky_names(g, 1 + static_cast<int>(g() % (B / 2 + 1)));
    std::vector<std::string> labels;
    for (int i = 0; i < B; ++i) labels.push_back(names[g() % names.size()]);
    ivec first(B);
    std::int64_t const G = k::group_index_first_seen(std::span<std::string const>(labels), std::span<std::int64_t>(first));
    auto const sorted = k::group_index(labels);
    std::vector<std::int64_t> perm(static_cast<std::size_t>(G));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), g);
    ivec shuffled(B);
    for (int i = 0; i < B; ++i) shuffled[i] = perm[static_cast<std::size_t>(first[i])];
    fvec s(B);
    for (auto& x : s) x = static_cast<float>(g() % 4) * 0.5f + 0.01f * static_cast<float>(g() % 7);
    auto const m = random_mask(g, B, T);
    k::Dims const d{B, T};
    auto all = [&](ivec const& ids) {
      std::vector<fvec> out;
      auto add = [&](auto f) {
        fvec a(static_cast<std::size_t>(B) * T, -3.0f), r(static_cast<std::size_t>(B) * T, -3.0f);
        f(ms(a), ms(r));
        out.push_back(a);
        out.push_back(r);
      };
      for (bool norm : {true, false}) {
        add([&](auto a, auto r) { k::grpo_outcome_advantage(par, d, cs(s), cs(m), cs(ids), a, r, k::GRPOOptions{1e-6, norm}); });
        bool const passk_ok = [&] {  // pass@k needs groups of two or more
          std::map<std::int64_t, int> n;
          for (auto v : ids) ++n[v];
          return std::all_of(n.begin(), n.end(), [](auto const& e) { return e.second >= 2; });
        }();
        if (passk_ok)
          add([&](auto a, auto r) { k::grpo_passk_outcome_advantage(par, d, cs(s), cs(m), cs(ids), a, r, k::GRPOOptions{1e-6, norm}); });
      }
      add([&](auto a, auto r) { k::rloo_outcome_advantage(par, d, cs(s), cs(m), cs(ids), a, r); });
      add([&](auto a, auto r) { k::rloo_vectorized_outcome_advantage(par, d, cs(s), cs(m), cs(ids), a, r); });
      add([&](auto a, auto r) { k::opo_outcome_advantage(par, d, cs(s), cs(m), cs(ids), a, r); });
      add([&](auto a, auto r) { k::gpg_outcome_advantage(par, d, cs(s), cs(m), cs(ids), a, r); });
      add([&](auto a, auto r) { k::reinforce_plus_plus_baseline_outcome_advantage(par, d, cs(s), cs(m), cs(ids), a, r); });
      return out;
    };
    auto const want = all(sorted);
    REQUIRE(all(first) == want);
    REQUIRE(all(shuffled) == want);
  }
}

TEST_CASE("an int32 mask streams above the streaming-store size exactly, into one or two outputs", "[kernels][advantage]") {
  // The broadcast's vector path for verl's int32 mask (any nonzero value is valid), at odd widths
  // and with advantages and returns shifted off 16-byte alignment by different amounts.
  using ex_t = k::detail::exec<rlflow::cpu::tag>;
  std::int64_t const need = static_cast<std::int64_t>(ex_t::stream_store_bytes / sizeof(float)) + 1;
  std::mt19937 g(47);
  int const T = 37;
  int const B = static_cast<int>((need + T - 1) / T);
  ivec ids(static_cast<std::size_t>(B));
  for (int i = 0; i < B; ++i) ids[i] = i / 3;
  std::shuffle(ids.begin(), ids.end(), g);
  fvec s(B);
  for (auto& x : s) x = static_cast<float>(g() % 9) * 0.25f;
  auto const mf = random_mask(g, B, T);
  std::vector<std::int32_t> im(mf.size());
  for (std::size_t i = 0; i < mf.size(); ++i) {
    std::int32_t const v[] = {1, 2, -1, 1 << 30};
    im[i] = mf[i] != 0.0f ? v[g() % 4] : 0;
  }
  std::size_t const n = static_cast<std::size_t>(B) * T;
  auto const want = ref::broadcast(ref::grpo(dbl(s), ids, 1e-6, true), dbl(mf), T);
  fvec abuf(n + 4, -7.0f), rbuf(n + 4, -7.0f), fa(n), fr(n);
  std::span<float> adv(abuf.data() + 1, n), ret(rbuf.data() + 2, n);
  k::Dims const d{B, T};
  k::grpo_outcome_advantage(par, d, cs(s), cs(mf), cs(ids), ms(fa), ms(fr));  // float mask, aligned: the reference bits
  k::grpo_outcome_advantage(par, d, cs(s), std::span<std::int32_t const>(im), cs(ids), adv, ret);
  for (std::size_t q = 0; q < n; ++q) {
    REQUIRE(adv[q] == fa[q]);
    REQUIRE(ret[q] == fa[q]);
    REQUIRE(std::fabs(adv[q] - want[q]) <= 1e-6 * std::max(1.0, std::fabs(want[q])));
  }
  REQUIRE(abuf[0] == -7.0f);
  REQUIRE(rbuf[0] == -7.0f);
  REQUIRE(rbuf[1] == -7.0f);
  for (std::size_t q = n + 1; q < abuf.size(); ++q) REQUIRE(abuf[q] == -7.0f);
  for (std::size_t q = n + 2; q < rbuf.size(); ++q) REQUIRE(rbuf[q] == -7.0f);
  std::fill(abuf.begin(), abuf.end(), -7.0f);
  k::grpo_outcome_advantage(par, d, cs(s), std::span<std::int32_t const>(im), cs(ids), adv);  // one output
  for (std::size_t q = 0; q < n; ++q) REQUIRE(adv[q] == fa[q]);
}

TEST_CASE("an int32 mask (verl's dtype) gives the same advantages as the float mask", "[kernels][advantage]") {
  int B = 40, T = 9;
  std::mt19937 g(5);
  auto m = random_mask(g, B, T, T);
  std::vector<std::int32_t> im(m.size());
  for (std::size_t i = 0; i < m.size(); ++i) im[i] = m[i] != 0.0f ? static_cast<std::int32_t>(1 + g() % 3) : 0;  // nonzero = valid
  fvec s(B);
  ivec ids(B);
  for (int i = 0; i < B; ++i) s[i] = static_cast<float>(g() % 5), ids[i] = i % 7;
  fvec a1(B * T), r1(B * T), a2(B * T), r2(B * T);
  k::grpo_outcome_advantage(par, k::Dims{B, T}, cs(s), cs(m), cs(ids), ms(a1), ms(r1));
  k::grpo_outcome_advantage(par, k::Dims{B, T}, cs(s), std::span<std::int32_t const>(im), cs(ids), ms(a2), ms(r2));
  REQUIRE(a1 == a2);
  REQUIRE(r1 == r2);
  REQUIRE(max_rel(a2, ref::broadcast(ref::grpo(dbl(s), ids, 1e-6, true), dbl(m), T)) < 1e-6);
}

TEST_CASE("very long rows broadcast exactly", "[kernels][advantage]") {
  int B = 6, T = 20000;
  std::mt19937 g(3);
  auto m = random_mask(g, B, T, T / 2);
  fvec s{1, 2, 3, 4, 5, 6};
  ivec ids{0, 1, 0, 1, 0, 1};
  fvec adv(B * T);
  k::grpo_outcome_advantage(par, k::Dims{B, T}, cs(s), cs(m), cs(ids), ms(adv));
  REQUIRE(max_rel(adv, ref::broadcast(ref::grpo(dbl(s), ids, 1e-6, true), dbl(m), T)) < 1e-6);
}

TEMPLATE_TEST_CASE("broadcasts above the streaming-store size are exact at any alignment and width", "[kernels][advantage]",
                   float, std::uint8_t, bool) {
  // Outputs of stream_store_bytes or more are written with non-temporal stores, with an unaligned
  // head and a tail per row. Odd widths, outputs shifted off 16-byte alignment (adv and returns
  // by different amounts), returns absent or present, and the per-row-array path (pass@k).
  using ex_t = k::detail::exec<rlflow::cpu::tag>;
  std::int64_t const need = static_cast<std::int64_t>(ex_t::stream_store_bytes / sizeof(float)) + 1;  // adv alone
  std::mt19937 g(29);
  for (int trial = 0; trial < 2; ++trial) {
    int const T = trial == 0 ? 37 : 1031;
    int const B = static_cast<int>((need + T - 1) / T);
    ivec ids(static_cast<std::size_t>(B));  // groups of 2 (and one of 3), shuffled: pass@k needs n >= 2
    for (int i = 0; i < B; ++i) ids[i] = std::min(i / 2, B / 2 - 1);
    std::shuffle(ids.begin(), ids.end(), g);
    auto s = random_scores(g, ids);
    auto mf = random_mask(g, B, T);
    mask_buf<TestType> mb;
    mb.v.resize(mf.size());
    for (std::size_t i = 0; i < mf.size(); ++i) mb.v[i] = static_cast<TestType>(mf[i] != 0);
    if constexpr (std::is_same_v<TestType, float>) mb.v[5] = std::nanf("");  // NaN counts as set (m != 0)
    auto md = dbl(mf);
    if constexpr (std::is_same_v<TestType, float>) md[5] = 1.0;
    std::size_t const n = static_cast<std::size_t>(B) * T;
    int const shift_a = 1 + trial, shift_r = 3 - trial;  // floats: 4 and 8 or 8 and 12 bytes off
    fvec abuf(n + 4, -7.0f), rbuf(n + 4, -7.0f);
    std::span<float> adv(abuf.data() + shift_a, n), ret(rbuf.data() + shift_r, n);
    k::Dims d{B, T};
    auto want = ref::broadcast(ref::grpo(dbl(s), ids, 1e-6, true), md, T);
    auto check = [&](std::span<float> out, fvec const& buf, int shift, ref::vec const& w) {
      double e = 0;
      for (std::size_t q = 0; q < n; ++q) e = std::max(e, std::fabs(out[q] - w[q]) / std::max(1.0, std::fabs(w[q])));
      REQUIRE(e < 1e-6);
      for (int q = 0; q < shift; ++q) REQUIRE(buf[static_cast<std::size_t>(q)] == -7.0f);  // nothing before
      for (std::size_t q = n + static_cast<std::size_t>(shift); q < buf.size(); ++q) REQUIRE(buf[q] == -7.0f);  // or after
    };
    k::grpo_outcome_advantage(par, d, cs(s), mb.span(), cs(ids), adv, ret);
    check(adv, abuf, shift_a, want);
    check(ret, rbuf, shift_r, want);
    std::fill(abuf.begin(), abuf.end(), -7.0f);
    k::grpo_outcome_advantage(par, d, cs(s), mb.span(), cs(ids), adv);
    check(adv, abuf, shift_a, want);
    auto pk = ref::broadcast(ref::passk(dbl(s), ids, 1e-6, true), md, T);
    k::grpo_passk_outcome_advantage(par, d, cs(s), mb.span(), cs(ids), adv, ret);
    check(adv, abuf, shift_a, pk);
    check(ret, rbuf, shift_r, pk);
  }
}

// ---------------------------------------------------------------------------------------------
// token-level estimators

TEST_CASE("gae, reinforce++ and remax match the references", "[kernels][advantage]") {
  std::mt19937 g(5);
  for (int trial = 0; trial < 3; ++trial) {
    int B = 2 + static_cast<int>(g() % 30), T = 1 + static_cast<int>(g() % 50);
    auto r = uniform(g, B * T, -1, 1);
    auto v = uniform(g, B * T, -2, 2);
    auto m = random_mask(g, B, T, 1);
    auto md = dbl(m);
    if (ref::mcount(md) < 2) continue;
    double gamma = 0.9 + 0.1 * (trial == 0), lam = 0.95;
    fvec adv(B * T), ret(B * T);
    k::gae_advantage_return(par, k::Dims{B, T}, cs(r), cs(v), cs(m), gamma, lam, ms(adv), ms(ret));
    ref::vec araw(B * T), rret(B * T);
    for (int i = 0; i < B; ++i) {
      double nv = 0, last = 0;
      for (int t = T - 1; t >= 0; --t) {
        int q = i * T + t;
        double cand = r[q] + gamma * nv - v[q] + gamma * lam * last;
        if (m[q] != 0) nv = v[q], last = cand;
        araw[q] = last;
        rret[q] = last + v[q];
      }
    }
    REQUIRE(max_rel(ret, rret) < 1e-5);
    REQUIRE(max_rel(adv, ref::whiten(araw, md)) < 1e-4);  // padding holds whitened values too

    k::reinforce_plus_plus_outcome_advantage(par, k::Dims{B, T}, cs(r), cs(m), gamma, ms(adv), ms(ret));
    ref::vec rr(B * T);
    for (int i = 0; i < B; ++i) {
      double run = 0;
      for (int t = T - 1; t >= 0; --t) {
        int q = i * T + t;
        double nw = r[q] + gamma * run;
        rr[q] = nw * md[q];
        if (md[q] != 0) run = nw;
      }
    }
    REQUIRE(max_rel(ret, rr) < 1e-5);
    auto wr = ref::whiten(rr, md);
    for (int q = 0; q < B * T; ++q) wr[q] *= md[q];
    REQUIRE(max_rel(adv, wr) < 1e-4);

    auto base = uniform(g, B, -1, 1);
    k::remax_outcome_advantage(par, k::Dims{B, T}, cs(r), cs(base), cs(m), ms(adv), ms(ret));
    ref::vec ra(B * T), rt(B * T);
    for (int i = 0; i < B; ++i) {
      double acc = 0;
      for (int t = T - 1; t >= 0; --t) {
        int q = i * T + t;
        acc += r[q] * md[q];
        rt[q] = acc;
        ra[q] = acc - base[i] * md[q];
      }
    }
    REQUIRE(max_rel(ret, rt) < 1e-5);
    REQUIRE(max_rel(adv, ra) < 1e-5);
  }
}

TEST_CASE("constant batches whiten to exact zeros, as verl's float32 mask count gives", "[kernels][masked][advantage]") {
  // verl: mask.sum() + 1e-8 is a float32 value, so the mean of a constant batch is exact and
  // x - mean is 0 (a double 1e-8 would leave x 1e-8 / N, whitened to about x 1e-4 / N).
  fvec x{2, 2, 2, 2, 2, 0}, m{1, 1, 1, 1, 1, 0}, out(6);
  k::Dims const d{2, 3};
  CHECK(k::masked_mean(par, d, cs(x), cs(m)) == 2.0);
  CHECK(k::masked_var(par, d, cs(x), cs(m)) == 0.0);
  k::masked_whiten(par, d, cs(x), cs(m), ms(out));
  for (int q = 0; q < 5; ++q) CHECK(out[q] == 0.0f);
  CHECK(out[5] == Approx(-2e4).epsilon(1e-6));  // masked positions are whitened too (verl)
  // An empty mask: 0 / float32(1e-8) = 0, not NaN.
  fvec none(6, 0.0f);
  CHECK(k::masked_mean(par, d, cs(x), cs(none)) == 0.0);
  CHECK(k::masked_mean(par, d, cs(x), cs(m)) * 5 == k::masked_sum(par, d, cs(x), cs(m)));

  // GAE: one valid token per row with the same reward and value -> the same raw advantage.
  std::mt19937 g(77);
  for (int trial = 0; trial < 4; ++trial) {
    int B = 2 + static_cast<int>(g() % 20), T = 1 + static_cast<int>(g() % 9);
    float const rv = static_cast<float>(g() % 7) * 0.37f + 0.1f, vv = 0.25f * static_cast<float>(g() % 5);
    fvec r(B * T, 0.0f), v(B * T, vv), mk(B * T, 0.0f), adv(B * T), ret(B * T);
    for (int i = 0; i < B; ++i) {
      int t = static_cast<int>(g() % T);
      r[i * T + t] = rv;
      for (int u = 0; u <= t; ++u) mk[i * T + u] = 0.0f;
      mk[i * T + t] = 1.0f;  // one valid token, rewards elsewhere 0
    }
    k::gae_advantage_return(par, k::Dims{B, T}, cs(r), cs(v), cs(mk), 1.0, 1.0, ms(adv), ms(ret));
    for (int q = 0; q < B * T; ++q)
      if (mk[q] != 0) REQUIRE(adv[q] == 0.0f);

    // REINFORCE++: every row's return at its valid token is rv.
    k::reinforce_plus_plus_outcome_advantage(par, k::Dims{B, T}, cs(r), cs(mk), 0.99, ms(adv), ms(ret));
    for (int q = 0; q < B * T; ++q) REQUIRE(adv[q] == 0.0f);

    // REINFORCE++-baseline: groups of one (mean 0) with equal scores -> a constant batch.
    fvec sc(B, rv);
    ivec ids(B);
    std::iota(ids.begin(), ids.end(), 0);
    auto mfull = random_mask(g, B, T, 1, false);
    k::reinforce_plus_plus_baseline_outcome_advantage(par, k::Dims{B, T}, cs(sc), cs(mfull), cs(ids), ms(adv), ms(ret));
    for (int q = 0; q < B * T; ++q) REQUIRE(adv[q] == 0.0f);
  }
}

TEST_CASE("gdpo: per-dimension grpo, weighted sum, whitened and masked", "[kernels][advantage]") {
  std::mt19937 g(41);
  for (int trial = 0; trial < 6; ++trial) {
    int B = 6 + static_cast<int>(g() % 40), T = 1 + static_cast<int>(g() % 12), K = 1 + trial % 3;
    auto ids = random_groups(g, B);
    auto m = random_mask(g, B, T, 1);
    fvec sc(K * B);
    for (int q = 0; q < K * B; ++q) sc[q] = static_cast<float>(g() % 4) * 0.5f - (q % 3 == 0 ? 0.25f : 0.0f);
    std::vector<double> w;
    if (trial % 2) for (int q = 0; q < K; ++q) w.push_back(0.5 + q);
    bool norm = trial != 4;
    k::GRPOOptions o;
    o.norm_adv_by_std_in_grpo = norm;
    fvec adv(B * T), ret(B * T);
    k::gdpo_outcome_advantage(par, k::Dims{B, T}, K, cs(sc), std::span<double const>(w), cs(m), cs(ids), ms(adv), ms(ret), o);
    auto md = dbl(m);
    ref::vec sum(B * T, 0.0);
    for (int q = 0; q < K; ++q) {
      ref::vec s(B);
      for (int i = 0; i < B; ++i) s[i] = sc[q * B + i];
      auto a = ref::broadcast(ref::grpo(s, ids, 1e-6, norm), md, T);
      for (int z = 0; z < B * T; ++z) sum[z] += (w.empty() ? 1.0 : w[q]) * a[z];
    }
    auto want = ref::whiten(sum, md);
    for (int z = 0; z < B * T; ++z) want[z] *= md[z];
    REQUIRE(max_rel(adv, want) < 2e-4);
    REQUIRE(adv == ret);
  }
  // one dimension, all rows equal within groups: every A_k is 0, so is the whitened sum
  fvec s1{1, 1, 2, 2}, m1{1, 1, 1, 1, 1, 1, 1, 0}, a1(8);
  ivec id1{0, 0, 1, 1};
  k::gdpo_outcome_advantage(par, k::Dims{4, 2}, 1, cs(s1), {}, cs(m1), cs(id1), ms(a1));
  for (float v : a1) CHECK(v == 0.0f);
  std::vector<double> bad{1, 2};
  CHECK_THROWS_AS(k::gdpo_outcome_advantage(par, k::Dims{4, 2}, 1, cs(s1), std::span<double const>(bad), cs(m1), cs(id1), ms(a1)),
                  rlflow::config_error);
  CHECK_THROWS_AS(k::gdpo_outcome_advantage(par, k::Dims{4, 2}, 0, std::span<float const>{}, {}, cs(m1), cs(id1), ms(a1)),
                  rlflow::config_error);
}

TEST_CASE("optimal token baseline and its multi-turn variant match the reference", "[kernels][advantage]") {
  std::mt19937 g(43);
  for (int trial = 0; trial < 16; ++trial) {
    int B = 2 + static_cast<int>(g() % 30), T = 1 + static_cast<int>(g() % 15);
    auto ids = random_groups(g, B);
    auto m = random_mask(g, B, T, trial % 4 == 0 ? 0 : 1, true);  // holes: multi-turn observation tokens
    auto r = uniform(g, B * T, -1, 1);
    auto lp = uniform(g, B * T, -5, -0.01f);
    auto sp = uniform(g, B * T, 0.05f, 1.0f);
    auto w = uniform(g, B * T, 0.5f, 1.5f);
    bool const use_w = trial % 3 == 1, tail = trial % 5 != 2;
    k::OTBOptions o;
    o.handle_zero_tail = tail;
    for (bool tir : {false, true}) {
      INFO("trial " << trial << " tir " << tir);
      fvec adv(B * T, 7.0f), ret(B * T, 7.0f);
      std::span<float const> ws = use_w ? cs(w) : std::span<float const>{};
      if (tir)
        k::tir_optimal_token_baseline_advantage(par, k::Dims{B, T}, cs(r), cs(m), cs(ids), cs(lp), cs(sp), ws, ms(adv), ms(ret), o);
      else
        k::optimal_token_baseline_advantage(par, k::Dims{B, T}, cs(r), cs(m), cs(ids), cs(lp), cs(sp), ws, ms(adv), ms(ret), o);
      auto [wa, wr] = ref::otb(dbl(r), dbl(m), ids, dbl(lp), dbl(sp), use_w ? dbl(w) : ref::vec{}, B, T, tir, tail);
      REQUIRE(max_rel(ret, wr) < 1e-5);
      REQUIRE(max_rel(adv, wa) < 1e-4);
    }
  }
  // verl's edge cases: a group of one keeps A = G; the strictly longest row's tail has baseline 0.
  // Rows 0, 1 in group 0 (lengths 3 and 1), row 2 alone; reward 1 at the last valid token.
  fvec r{0, 0, 1, 1, 0, 0, 0, 1, 0}, m{1, 1, 1, 1, 0, 0, 1, 1, 0}, lp(9, -1.0f), sp(9, 0.5f), adv(9), ret(9);
  ivec ids{0, 0, 1};
  k::optimal_token_baseline_advantage(par, k::Dims{3, 3}, cs(r), cs(m), cs(ids), cs(lp), cs(sp), {}, ms(adv), ms(ret));
  // column 0: both rows valid, G = 1 for each -> B_0 = 1, A = 0; columns 1, 2 of row 0 lie past the
  // second-longest length 1 -> baseline 0, A = G = 1.
  CHECK(adv[0] == Approx(0.0).margin(1e-6));
  CHECK(adv[1] == 1.0f);
  CHECK(adv[2] == 1.0f);
  CHECK(adv[3] == Approx(0.0).margin(1e-6));
  CHECK(adv[6] == 1.0f);  // group of one: A = G
  CHECK(adv[7] == 1.0f);
  CHECK(adv[8] == 0.0f);
  CHECK(ret[6] == 1.0f);
  ivec badg{0, 0, 5};
  CHECK_THROWS_AS(k::optimal_token_baseline_advantage(par, k::Dims{3, 3}, cs(r), cs(m), cs(badg), cs(lp), cs(sp), {}, ms(adv), ms(ret)),
                  rlflow::value_error);
}

TEST_CASE("masked sum and mean along an axis, and compute_entropy_loss", "[kernels][masked][entropy]") {
  std::mt19937 g(47);
  int B = 7, T = 9;
  auto x = uniform(g, B * T, -2, 2);
  auto m = random_mask(g, B, T, 0);
  x[3] = NAN;
  m[3] = 0;
  fvec rs(B), rm(B), cs_(T), cm(T);
  k::masked_sum(par, k::Dims{B, T}, cs(x), cs(m), -1, ms(rs));
  k::masked_mean(par, k::Dims{B, T}, cs(x), cs(m), 1, ms(rm));
  k::masked_sum(par, k::Dims{B, T}, cs(x), cs(m), 0, ms(cs_));
  k::masked_mean(par, k::Dims{B, T}, cs(x), cs(m), 0, ms(cm));
  for (int i = 0; i < B; ++i) {
    double s = 0, c = 0;
    for (int t = 0; t < T; ++t) if (m[i * T + t] != 0) s += x[i * T + t], c += 1;
    REQUIRE(rs[i] == Approx(s).margin(1e-6));
    REQUIRE(rm[i] == Approx(s / ref::fden(c)).margin(1e-6));
    if (c == 0) REQUIRE(rm[i] == 0.0f);
  }
  for (int t = 0; t < T; ++t) {
    double s = 0, c = 0;
    for (int i = 0; i < B; ++i) if (m[i * T + t] != 0) s += x[i * T + t], c += 1;
    REQUIRE(cs_[t] == Approx(s).margin(1e-6));
    REQUIRE(cm[t] == Approx(s / ref::fden(c)).margin(1e-6));
  }
  CHECK_THROWS_AS(k::masked_sum(par, k::Dims{B, T}, cs(x), cs(m), 2, ms(rs)), rlflow::shape_error);
  CHECK_THROWS_AS(k::masked_sum(par, k::Dims{B, T}, cs(x), cs(m), 0, ms(rs)), rlflow::shape_error);  // needs T outputs

  int V = 11;
  auto z = uniform(g, B * T * V, -3, 3);
  for (int agg : {0, 1, 2, 3, 4}) {
    double got = k::compute_entropy_loss(par, k::Dims{B, T}, V, cs(z), cs(m), static_cast<k::AggMode>(agg));
    ref::vec h(B * T);
    for (int q = 0; q < B * T; ++q) h[q] = ref::entropy(ref::vec(z.begin() + q * V, z.begin() + (q + 1) * V));
    REQUIRE(got == Approx(ref::agg(h, dbl(m), B, T, agg, ref::agg_info{})).epsilon(1e-5));
  }
}

TEST_CASE("gae rejects batches that cannot be whitened and NaN values", "[kernels][advantage]") {
  fvec r{1, 2, 3}, v{0, 0, 0}, m{0, 1, 0}, a(3), rt(3);
  CHECK_THROWS_WITH(k::gae_advantage_return(par, k::Dims{1, 3}, cs(r), cs(v), cs(m), 1.0, 1.0, ms(a), ms(rt)),
                    Catch::Contains("exactly one valid token"));
  fvec m2{1, 1, 0};
  v[1] = NAN;
  CHECK_THROWS_WITH(k::gae_advantage_return(par, k::Dims{1, 3}, cs(r), cs(v), cs(m2), 1.0, 1.0, ms(a), ms(rt)),
                    Catch::Contains("row 0, token 1"));
  v[1] = 0;
  v[2] = NAN;  // masked: allowed
  REQUIRE_NOTHROW(k::gae_advantage_return(par, k::Dims{1, 3}, cs(r), cs(v), cs(m2), 1.0, 1.0, ms(a), ms(rt)));
}

// ---------------------------------------------------------------------------------------------
// agg_loss

TEST_CASE("agg_loss modes, global batch info and weights", "[kernels][agg]") {
  std::mt19937 g(9);
  int B = 23, T = 31;
  auto L = uniform(g, B * T, -2, 2);
  auto m = random_mask(g, B, T);
  for (int t = 0; t < T; ++t) m[3 * T + t] = 0;  // a fully masked row
  auto Ld = dbl(L), md = dbl(m);
  std::vector<std::pair<k::AggInfo, ref::agg_info>> infos{
      {k::AggInfo{}, ref::agg_info{}},
      {info(4, 1234.0, 96.0, 77.0), ref::agg_info{4, 1234.0, 96.0, 77.0}}};
  for (auto const& [ki, ri] : infos)
    for (int mode = 0; mode < 5; ++mode) {
      auto am = static_cast<k::AggMode>(mode);
      double got = k::agg_loss(par, k::Dims{B, T}, cs(L), cs(m), am, ki);
      REQUIRE(got == Approx(ref::agg(Ld, md, B, T, mode, ri)).epsilon(1e-10));
      fvec w(B * T);
      k::agg_loss_weights(par, k::Dims{B, T}, cs(m), am, ki, ms(w));
      double dot = 0;
      for (int q = 0; q < B * T; ++q) dot += w[q] * Ld[q];
      REQUIRE(dot == Approx(got).epsilon(1e-5));
      for (int q = 0; q < 6; ++q) {  // the aggregation is linear: a unit bump changes it by w
        int idx = static_cast<int>(g() % (B * T));
        auto L2 = Ld;
        L2[idx] += 1.0;
        REQUIRE(ref::agg(L2, md, B, T, mode, ri) - ref::agg(Ld, md, B, T, mode, ri) == Approx(w[idx]).epsilon(1e-5).margin(1e-9));
      }
    }
  CHECK(k::parse_agg_mode("seq-mean-token-sum-norm") == k::AggMode::seq_mean_token_sum_norm);
  CHECK_THROWS_AS(k::parse_agg_mode("seq-mean"), rlflow::config_error);
  fvec z(B * T, 0.0f);
  CHECK_THROWS_WITH(k::agg_loss(par, k::Dims{B, T}, cs(L), cs(z), k::AggMode::token_mean), Catch::Contains("no valid token"));
  CHECK(k::agg_loss(par, k::Dims{B, T}, cs(L), cs(z), k::AggMode::token_mean, info(1, 10.0)) == 0.0);
  CHECK_THROWS_AS(k::agg_loss(par, k::Dims{B, T}, cs(L), cs(m), k::AggMode::seq_mean_token_mean, info(2)),
                  rlflow::config_error);
}

// ---------------------------------------------------------------------------------------------
// policy losses

namespace {
struct pl_case {
  int B, T;
  fvec x, o, a, m, w;
};
pl_case make_pl_case(std::mt19937& g, int B, int T, bool wide) {
  pl_case c{B, T, {}, {}, {}, {}, {}};
  c.o = uniform(g, B * T, -6, -0.05f);
  c.x = c.o;
  std::normal_distribution<float> n(0, wide ? 0.8f : 0.15f);
  for (auto& v : c.x) v += n(g);
  if (wide) {  // ratios far outside the clip range, past the +-20 clamp
    c.x[0] = c.o[0] + 25;
    c.x[1] = c.o[1] - 30;
  }
  // sequence-level advantages (geo_mean's assumption) with some exact zeros
  c.a.resize(B * T);
  for (int i = 0; i < B; ++i) {
    float ai = (i % 7 == 0) ? 0.0f : std::uniform_real_distribution<float>(-2, 2)(g);
    for (int t = 0; t < T; ++t) c.a[i * T + t] = ai;
  }
  c.m = random_mask(g, B, T, 1);
  c.w = uniform(g, B * T, 0.5f, 1.5f);
  return c;
}
}  // namespace

TEST_CASE("policy losses match the reference, metrics included, and the gradient matches finite differences",
          "[kernels][policy_loss]") {
  std::mt19937 g(13);
  for (int mode = 0; mode < 12; ++mode) {  // 0..10: PolicyLossMode order; 11: compute_policy_loss_reinforce
    for (bool wide : {false, true}) {
      DYNAMIC_SECTION("mode " << (mode == 11 ? "reinforce" : k::policy_loss_mode_name(static_cast<k::PolicyLossMode>(mode)))
                              << (wide ? " wide" : "")) {
        int B = 12, T = 17;
        auto c = make_pl_case(g, B, T, wide);
        k::PolicyLossConfig cfg;
        cfg.mode = static_cast<k::PolicyLossMode>(mode);
        cfg.clip_ratio_high = 0.28;
        cfg.clip_cov_ratio = 0.05;
        cfg.clip_cov_lb = 0.0;
        cfg.clip_cov_ub = 50.0;
        cfg.kl_cov_ratio = 0.05;
        ref::pl_full rc;
        rc.hi = 0.28;
        rc.cc_ratio = 0.05;
        rc.cc_lb = 0.0;
        rc.cc_ub = 50.0;
        rc.kc_ratio = 0.05;
        bool const use_w = mode != 6 && !wide;
        for (int agg : {0, 3, 4}) {
          auto am = static_cast<k::AggMode>(agg);
          k::AggInfo ki = info(1, std::nullopt, 20.0);
          ref::agg_info ri{1, -1, 20.0, -1};
          fvec grad(B * T, 0.0f);
          auto loss_fn = [&](k::Grad gr) {
            if (mode == 11)
              return k::compute_policy_loss_reinforce(par, k::Dims{B, T}, cs(c.o), cs(c.x), cs(c.a), cs(c.m), am, ki, gr,
                                                      use_w ? cs(c.w) : std::span<float const>{});
            return k::compute_policy_loss(par, k::Dims{B, T}, cfg, cs(c.o), cs(c.x), cs(c.a), cs(c.m), am, ki, gr,
                                          use_w ? cs(c.w) : std::span<float const>{});
          };
          auto res = loss_fn(k::Grad{ms(grad)});
          ref::pl_in in{dbl(c.x), dbl(c.x), dbl(c.o), dbl(c.a), dbl(c.m), use_w ? dbl(c.w) : ref::vec{}, B, T};
          ref::pl_met met;
          double want = ref::policy_loss(mode, in, rc, agg, ri, &met);
          REQUIRE(res.loss == Approx(want).epsilon(1e-6).margin(1e-9));
          if (res.metrics.has_pg_clipfrac) REQUIRE(res.metrics.pg_clipfrac == Approx(met.clip).margin(1e-9));
          if (res.metrics.has_ppo_kl) REQUIRE(res.metrics.ppo_kl == Approx(met.kl).epsilon(1e-6).margin(1e-9));
          if (res.metrics.has_pg_clipfrac_lower && (mode == 0 || mode == 9 || mode == 10))
            REQUIRE(res.metrics.pg_clipfrac_lower == Approx(met.lower).margin(1e-9));
          CHECK(res.metrics.has_ppo_kl == (mode != 3));
          CHECK(res.metrics.has_pg_clipfrac == (mode != 3 && mode != 5 && mode != 8 && mode != 11));
          // finite differences in double on the reference surrogate (stop-gradients frozen)
          double const h = 1e-6;
          for (int q = 0; q < 25; ++q) {
            int idx = static_cast<int>(g() % (B * T));
            auto p = in, mn = in;
            p.x[idx] += h;
            mn.x[idx] -= h;
            double fd = (ref::policy_loss(mode, p, rc, agg, ri, nullptr) - ref::policy_loss(mode, mn, rc, agg, ri, nullptr)) / (2 * h);
            INFO("token " << idx << " mask " << c.m[idx]);
            REQUIRE(grad[idx] == Approx(fd).epsilon(1e-3).margin(1e-6));
          }
          // accumulate adds scale * grad
          fvec acc(B * T, 1.0f);
          loss_fn(k::Grad{ms(acc), 2.0, true});
          for (int q = 0; q < B * T; q += 7) REQUIRE(acc[q] == Approx(1.0f + 2.0f * grad[q]).epsilon(1e-5).margin(1e-6));
        }
      }
    }
  }
}

TEST_CASE("policy loss configuration errors and NaN inputs", "[kernels][policy_loss]") {
  std::mt19937 g(17);
  auto c = make_pl_case(g, 3, 4, false);
  k::PolicyLossConfig cfg;
  cfg.clip_ratio_c = 1.0;
  CHECK_THROWS_AS(k::compute_policy_loss(par, k::Dims{3, 4}, cfg, cs(c.o), cs(c.x), cs(c.a), cs(c.m), k::AggMode::token_mean),
                  rlflow::config_error);
  cfg = {};
  cfg.mode = k::PolicyLossMode::dro;
  cfg.dro_beta = 0;
  CHECK_THROWS_AS(k::compute_policy_loss(par, k::Dims{3, 4}, cfg, cs(c.o), cs(c.x), cs(c.a), cs(c.m), k::AggMode::token_mean),
                  rlflow::config_error);
  cfg = {};
  c.m[5] = 1;
  c.x[5] = NAN;
  CHECK_THROWS_WITH(k::compute_policy_loss(par, k::Dims{3, 4}, cfg, cs(c.o), cs(c.x), cs(c.a), cs(c.m), k::AggMode::token_mean),
                    Catch::Contains("'log_prob' is nan at row 1, token 1"));
  c.m[5] = 0;  // masked NaN is ignored
  REQUIRE_NOTHROW(k::compute_policy_loss(par, k::Dims{3, 4}, cfg, cs(c.o), cs(c.x), cs(c.a), cs(c.m), k::AggMode::token_mean));
  CHECK(k::parse_policy_loss_mode("geo_mean") == k::PolicyLossMode::geo_mean);
  CHECK_THROWS_AS(k::parse_policy_loss_mode("ppo"), rlflow::config_error);
  fvec none;
  CHECK_THROWS_AS(k::compute_policy_loss(par, k::Dims{0, 4}, cfg, cs(none), cs(none), cs(none), cs(none), k::AggMode::token_mean),
                  rlflow::value_error);
  auto r = k::compute_policy_loss(par, k::Dims{0, 4}, cfg, cs(none), cs(none), cs(none), cs(none), k::AggMode::token_mean,
                                  info(1, 100.0));
  CHECK(r.loss == 0.0);
}

namespace {
double metric(std::vector<std::pair<std::string, double>> const& ms_, std::string const& name) {
  for (auto const& [k2, v] : ms_)
    if (k2 == name) return v;
  FAIL("metric " << name << " missing");
  return 0;
}
}  // namespace

TEST_CASE("rollout correction: IS weights, rejection masks and metrics match the reference", "[kernels][rollout_corr]") {
  std::mt19937 g(23);
  int B = 9, T = 13;
  for (int trial = 0; trial < 24; ++trial) {
    auto c = make_pl_case(g, B, T, trial % 5 == 4);
    int const level = trial % 3;            // off, token, sequence
    bool const icepop = (trial / 3) % 2 == 1;
    bool const bn = (trial / 6) % 2 == 1;
    std::vector<std::pair<std::string, double>> rs;
    k::RolloutCorrectionOptions o;
    o.rollout_is = level == 0 ? std::nullopt : std::optional<std::string>(level == 1 ? "token" : "sequence");
    o.rollout_is_threshold = icepop ? "0.5_1.5" : "1.2";
    o.rollout_is_batch_normalize = bn;
    const char* opts[] = {"token_k1", "seq_mean_k3", "seq_sum_k2", "seq_max_k3", "token_k3,seq_sum_k1"};
    if (trial % 4 != 0) {
      std::string name = opts[trial % 5];
      o.rollout_rs = name;
      o.rollout_rs_threshold = trial % 5 == 4 ? "0.05,1.3" : (name.back() == '1' ? "1.3" : "0.02");
      if (trial % 5 == 4) rs = {{"token_k3", 0.05}, {"seq_sum_k1", 1.3}};
      else rs = {{name, name.back() == '1' ? 1.3 : 0.02}};
    }
    INFO("trial " << trial << " level " << level << " icepop " << icepop << " rs " << (o.rollout_rs ? *o.rollout_rs : "-"));
    auto got = k::compute_rollout_correction_and_rejection_mask(par, k::Dims{B, T}, cs(c.x), cs(c.o), cs(c.m), o);
    auto want = ref::rollout_corr(dbl(c.x), dbl(c.o), dbl(c.m), B, T, level, icepop ? 1.5 : 1.2, icepop ? 0.5 : -1.0, bn, rs);
    REQUIRE(got.rollout_is_weights.size() == (level ? std::size_t(B * T) : 0u));
    if (level) REQUIRE(max_rel(got.rollout_is_weights, want.w) < 1e-5);
    for (int q = 0; q < B * T; ++q) REQUIRE(got.response_mask[q] == want.mask[q]);
    for (auto const& [name, v] : want.met) {
      INFO(name);
      REQUIRE(metric(got.metrics, "rollout_corr/" + name) == Approx(v).epsilon(1e-6).margin(1e-9));
    }
  }
}

TEST_CASE("rollout correction edge cases: identical policies, empty masks, bad options", "[kernels][rollout_corr]") {
  std::mt19937 g(29);
  int B = 4, T = 5;
  auto c = make_pl_case(g, B, T, false);
  k::RolloutCorrectionOptions o;  // verl defaults: sequence-level TIS at 2.0
  o.rollout_rs = "token_k1,seq_max_k2";
  o.rollout_rs_threshold = "2.0,0.1";
  auto r = k::compute_rollout_correction_and_rejection_mask(par, k::Dims{B, T}, cs(c.o), cs(c.o), cs(c.m), o);
  for (int q = 0; q < B * T; ++q) {
    CHECK(r.response_mask[q] == c.m[q]);
    CHECK(r.rollout_is_weights[q] == c.m[q]);  // pi_train == pi_rollout: weight exactly 1
  }
  CHECK(metric(r.metrics, "rollout_corr/kl") == 0.0);
  CHECK(metric(r.metrics, "rollout_corr/k3_kl") == 0.0);
  CHECK(metric(r.metrics, "rollout_corr/chi2_token") == 0.0);
  CHECK(metric(r.metrics, "rollout_corr/rollout_rs_masked_fraction") == 0.0);
  CHECK(metric(r.metrics, "rollout_corr/rollout_is_mean") == 1.0);
  fvec zero(B * T, 0.0f);
  CHECK_THROWS_WITH(k::compute_rollout_correction_and_rejection_mask(par, k::Dims{B, T}, cs(c.x), cs(c.o), cs(zero), o),
                    Catch::Contains("no valid token"));
  auto bad = o;
  bad.rollout_rs = "token_k4";
  CHECK_THROWS_AS(k::compute_rollout_correction_and_rejection_mask(par, k::Dims{B, T}, cs(c.x), cs(c.o), cs(c.m), bad),
                  rlflow::config_error);
  bad = o;
  bad.rollout_rs_threshold.reset();
  CHECK_THROWS_WITH(k::compute_rollout_correction_and_rejection_mask(par, k::Dims{B, T}, cs(c.x), cs(c.o), cs(c.m), bad),
                    Catch::Contains("rollout_rs_threshold"));
  bad = o;
  bad.rollout_rs_threshold = "1,2,3";
  CHECK_THROWS_AS(k::compute_rollout_correction_and_rejection_mask(par, k::Dims{B, T}, cs(c.x), cs(c.o), cs(c.m), bad),
                  rlflow::config_error);
  bad = o;
  bad.rollout_is_threshold = "2_1";
  CHECK_THROWS_WITH(k::compute_rollout_correction_and_rejection_mask(par, k::Dims{B, T}, cs(c.x), cs(c.o), cs(c.m), bad),
                    Catch::Contains("exceeds the upper bound"));
  bad = o;
  bad.rollout_is = "batch";
  CHECK_THROWS_AS(k::compute_rollout_correction_and_rejection_mask(par, k::Dims{B, T}, cs(c.x), cs(c.o), cs(c.m), bad),
                  rlflow::config_error);
  bad = o;
  bad.rollout_rs = "seq_max_k2";
  bad.rollout_rs_threshold = "0.1_0.2";  // non-k1 options take one upper bound
  CHECK_THROWS_AS(k::compute_rollout_correction_and_rejection_mask(par, k::Dims{B, T}, cs(c.x), cs(c.o), cs(c.m), bad),
                  rlflow::config_error);
}

TEST_CASE("rollout correction into caller buffers (the any-backend form) equals the vector form", "[kernels][rollout_corr]") {
  std::mt19937 g(37);
  int B = 10, T = 9;
  auto c = make_pl_case(g, B, T, true);
  std::vector<std::int32_t> mi(c.m.begin(), c.m.end());  // verl's int32 response_mask
  k::RolloutCorrectionOptions o;
  o.rollout_is = "token";
  o.rollout_is_threshold = "0.7_1.4";
  o.rollout_rs = "seq_mean_k2,token_k1";
  o.rollout_rs_threshold = "0.05,1.5";
  auto const want = k::compute_rollout_correction_and_rejection_mask(par, k::Dims{B, T}, cs(c.x), cs(c.o), cs(c.m), o);
  fvec w(B * T, -1.0f), mo(B * T, -1.0f);
  auto const got = k::compute_rollout_correction_and_rejection_mask(par, k::Dims{B, T}, cs(c.x), cs(c.o), cs(mi), o, ms(w), ms(mo));
  REQUIRE(got.size() == want.metrics.size());
  for (std::size_t q = 0; q < got.size(); ++q) {
    CHECK(got[q].first == want.metrics[q].first);
    CHECK(got[q].second == want.metrics[q].second);
  }
  CHECK(w == want.rollout_is_weights);
  CHECK(mo == want.response_mask);
  // IS off: the weights buffer may be empty and is not touched
  o.rollout_is.reset();
  CHECK_NOTHROW(k::compute_rollout_correction_and_rejection_mask(par, k::Dims{B, T}, cs(c.x), cs(c.o), cs(mi), o, std::span<float>{}, ms(mo)));
  o.rollout_is = "sequence";
  CHECK_THROWS_AS(k::compute_rollout_correction_and_rejection_mask(par, k::Dims{B, T}, cs(c.x), cs(c.o), cs(mi), o, std::span<float>{}, ms(mo)),
                  rlflow::shape_error);
  fvec small(3);
  CHECK_THROWS_WITH(k::compute_rollout_correction_and_rejection_mask(par, k::Dims{B, T}, cs(c.x), cs(c.o), cs(mi), o, ms(w), ms(small)),
                    Catch::Contains("response_mask_out"));
}

TEST_CASE("bypass_mode: ppo_clip on the rejected mask, reinforce with the IS weights", "[kernels][policy_loss][rollout_corr]") {
  std::mt19937 g(31);
  int B = 8, T = 11;
  auto c = make_pl_case(g, B, T, false);  // c.o plays the rollout log-probs
  k::PolicyLossConfig cfg;
  cfg.mode = k::PolicyLossMode::bypass_mode;
  cfg.rollout_correction.rollout_is = "token";
  cfg.rollout_correction.rollout_rs = "token_k2";
  cfg.rollout_correction.rollout_rs_threshold = "0.004";
  auto corr = k::compute_rollout_correction_and_rejection_mask(par, k::Dims{B, T}, cs(c.x), cs(c.o), cs(c.m), cfg.rollout_correction);
  double rejected = 0;
  for (int q = 0; q < B * T; ++q) rejected += c.m[q] != corr.response_mask[q];
  REQUIRE(rejected > 0);  // the threshold bites
  for (auto agg : {k::AggMode::token_mean, k::AggMode::seq_mean_token_sum}) {
    fvec g1(B * T), g2(B * T);
    auto by = k::compute_policy_loss(par, k::Dims{B, T}, cfg, cs(c.o), cs(c.x), cs(c.a), cs(c.m), agg, {}, k::Grad{ms(g1)});
    k::PolicyLossConfig v = cfg;
    v.mode = k::PolicyLossMode::vanilla;
    auto va = k::compute_policy_loss(par, k::Dims{B, T}, v, cs(c.o), cs(c.x), cs(c.a), cs(corr.response_mask), agg, {},
                                     k::Grad{ms(g2)});
    CHECK(by.loss == va.loss);
    CHECK(by.metrics.pg_clipfrac == va.metrics.pg_clipfrac);
    for (int q = 0; q < B * T; ++q) REQUIRE(g1[q] == g2[q]);
    CHECK(metric(by.extra_metrics, "rollout_corr/rollout_rs_token_k2_masked_fraction") == Approx(rejected / ref::mcount(dbl(c.m))));
    cfg.rollout_correction.loss_type = "reinforce";
    auto rf = k::compute_policy_loss(par, k::Dims{B, T}, cfg, cs(c.o), cs(c.x), cs(c.a), cs(c.m), agg, {}, k::Grad{ms(g1)});
    auto want = k::compute_policy_loss_reinforce(par, k::Dims{B, T}, cs(c.o), cs(c.x), cs(c.a), cs(corr.response_mask), agg, {},
                                                 k::Grad{ms(g2)}, cs(corr.rollout_is_weights));
    CHECK(rf.loss == want.loss);
    CHECK(rf.metrics.ppo_kl == want.metrics.ppo_kl);
    CHECK(!rf.metrics.has_pg_clipfrac);
    for (int q = 0; q < B * T; ++q) REQUIRE(g1[q] == g2[q]);
    cfg.rollout_correction.loss_type = "ppo_clip";
  }
  cfg.rollout_correction.loss_type = "pg";
  CHECK_THROWS_AS(k::compute_policy_loss(par, k::Dims{B, T}, cfg, cs(c.o), cs(c.x), cs(c.a), cs(c.m), k::AggMode::token_mean),
                  rlflow::config_error);
  CHECK(k::parse_policy_loss_mode("dppo_kl") == k::PolicyLossMode::dppo_kl);
  CHECK(k::parse_policy_loss_mode("bypass_mode") == k::PolicyLossMode::bypass_mode);
}

TEST_CASE("geo_mean with rollout IS weights uses the per-row geometric mean", "[kernels][policy_loss]") {
  std::mt19937 g(19);
  int B = 5, T = 6;
  auto c = make_pl_case(g, B, T, false);
  k::PolicyLossConfig cfg;
  cfg.mode = k::PolicyLossMode::geo_mean;
  auto base = k::compute_policy_loss(par, k::Dims{B, T}, cfg, cs(c.o), cs(c.x), cs(c.a), cs(c.m), k::AggMode::token_mean);
  fvec w(B * T, 2.0f);  // constant weights: the geometric mean is 2 per non-empty row
  auto wt = k::compute_policy_loss(par, k::Dims{B, T}, cfg, cs(c.o), cs(c.x), cs(c.a), cs(c.m), k::AggMode::token_mean, {}, {}, cs(w));
  CHECK(wt.loss == Approx(2.0 * base.loss).epsilon(1e-6));
}

// ---------------------------------------------------------------------------------------------
// value loss

TEST_CASE("value loss matches the reference and its gradient finite differences", "[kernels][value_loss]") {
  std::mt19937 g(23);
  int B = 9, T = 14;
  auto v = uniform(g, B * T, -2, 2), vo = uniform(g, B * T, -2, 2), R = uniform(g, B * T, -2, 2);
  auto m = random_mask(g, B, T, 1);
  double eps = 0.5;
  auto loss_ref = [&](ref::vec const& vv, double* clipfrac) {
    ref::vec L(B * T), cl(B * T);
    for (int q = 0; q < B * T; ++q) {
      double vc = std::max(std::min(vv[q], vo[q] + eps), vo[q] - eps);
      double l1 = (vv[q] - R[q]) * (vv[q] - R[q]), l2 = (vc - R[q]) * (vc - R[q]);
      L[q] = std::max(l1, l2);
      cl[q] = l2 > l1;
    }
    if (clipfrac) *clipfrac = ref::mmean(cl, dbl(m));
    return 0.5 * ref::agg(L, dbl(m), B, T, 3, ref::agg_info{});
  };
  fvec grad(B * T);
  auto res = k::compute_value_loss(par, k::Dims{B, T}, cs(v), cs(vo), cs(R), cs(m), eps, k::AggMode::seq_mean_token_mean, {},
                                   k::Grad{ms(grad)});
  double cf;
  REQUIRE(res.vf_loss == Approx(loss_ref(dbl(v), &cf)).epsilon(1e-6));
  REQUIRE(res.vf_clipfrac == Approx(cf).margin(1e-9));
  REQUIRE(res.vpred_mean == Approx(ref::mmean(dbl(v), dbl(m))).epsilon(1e-6));
  for (int q = 0; q < B * T; ++q) {
    auto p = dbl(v), mn = dbl(v);
    p[q] += 1e-6;
    mn[q] -= 1e-6;
    REQUIRE(grad[q] == Approx((loss_ref(p, nullptr) - loss_ref(mn, nullptr)) / 2e-6).epsilon(1e-3).margin(1e-6));
  }
}

// ---------------------------------------------------------------------------------------------
// KL

TEST_CASE("kl_penalty estimators, gradients, kl_loss and the oracle clamp", "[kernels][kl]") {
  std::mt19937 g(29);
  int n = 400;
  auto x = uniform(g, n, -30, 0), r = uniform(g, n, -30, 0);
  for (std::string name : {"kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3", "k1+", "k3+", "abs+", "k2+"}) {
    auto kind = k::parse_kl_penalty(name);
    fvec out(n), grad(n);
    k::kl_penalty(par, kind, cs(x), cs(r), ms(out), ms(grad));
    int ki = static_cast<int>(kind.kind);
    for (int i = 0; i < n; ++i) {
      REQUIRE(out[i] == Approx(ref::kl(ki, x[i], r[i])).epsilon(1e-6).margin(1e-6));
      double fd = kind.straight_through ? (x[i] - r[i])
                                        : (ref::kl(ki, x[i] + 1e-6, r[i]) - ref::kl(ki, x[i] - 1e-6, r[i])) / 2e-6;
      REQUIRE(grad[i] == Approx(fd).epsilon(1e-4).margin(1e-5));
    }
  }
  fvec ox{-30.0f}, orf{-0.1f}, oo(1);
  k::kl_penalty(par, k::parse_kl_penalty("low_var_kl"), cs(ox), cs(orf), ms(oo));
  CHECK(oo[0] == 10.0f);
  CHECK_THROWS_AS(k::parse_kl_penalty("full"), rlflow::config_error);
  CHECK_THROWS_AS(k::parse_kl_penalty("k4"), rlflow::config_error);

  int B = 7, T = 11;
  auto lx = uniform(g, B * T, -3, 0), lr = uniform(g, B * T, -3, 0);
  auto m = random_mask(g, B, T, 1);
  fvec grad(B * T);
  double v = k::kl_loss(par, k::Dims{B, T}, k::parse_kl_penalty("low_var_kl"), cs(lx), cs(lr), cs(m), k::AggMode::token_mean, {},
                        k::Grad{ms(grad)});
  auto f = [&](ref::vec const& xx) {
    ref::vec L(B * T);
    for (int q = 0; q < B * T; ++q) L[q] = ref::kl(3, xx[q], lr[q]);
    return ref::agg(L, dbl(m), B, T, 0, ref::agg_info{});
  };
  REQUIRE(v == Approx(f(dbl(lx))).epsilon(1e-6));
  for (int q = 0; q < B * T; ++q) {
    auto p = dbl(lx), mn = dbl(lx);
    p[q] += 1e-6;
    mn[q] -= 1e-6;
    REQUIRE(grad[q] == Approx((f(p) - f(mn)) / 2e-6).epsilon(1e-3).margin(1e-6));
  }
}

TEST_CASE("apply_kl_penalty uses the pre-update coefficient and updates the adaptive controller", "[kernels][kl]") {
  std::mt19937 g(31);
  int B = 6, T = 8;
  auto s = uniform(g, B * T, 0, 1), x = uniform(g, B * T, -3, 0), r = uniform(g, B * T, -3, 0);
  auto m = random_mask(g, B, T, 1);
  k::AdaptiveKLController ctrl(0.05, 0.01, 100);
  fvec out(B * T);
  auto res = k::apply_kl_penalty(par, k::Dims{B, T}, cs(s), cs(x), cs(r), cs(m), k::parse_kl_penalty("kl"), ctrl, ms(out));
  CHECK(res.beta == 0.05);
  double tot = 0;
  for (int i = 0; i < B; ++i) {
    double a = 0, c = 0;
    for (int t = 0; t < T; ++t) {
      int q = i * T + t;
      double kld = m[q] != 0 ? static_cast<double>(x[q]) - r[q] : 0.0;
      REQUIRE(out[q] == Approx(s[q] - 0.05 * kld).epsilon(1e-6).margin(1e-7));
      a += kld;
      c += m[q] != 0;
    }
    tot += a / ref::fden(c);  // verl: float32 denominator (exactly c for c >= 1)
  }
  double kl = tot / B;
  CHECK(res.current_kl == Approx(kl).epsilon(1e-9));
  double e = std::clamp(kl / 0.01 - 1, -0.2, 0.2);
  CHECK(ctrl.value == Approx(0.05 * (1 + e * B / 100.0)).epsilon(1e-12));
  k::FixedKLController fixed{0.001};
  k::apply_kl_penalty(par, k::Dims{B, T}, cs(s), cs(x), cs(r), cs(m), k::parse_kl_penalty("k3"), fixed, ms(out));
  CHECK(fixed.value == 0.001);
  CHECK_THROWS_AS(k::AdaptiveKLController(0.1, 0.1, 0), rlflow::config_error);
}

// ---------------------------------------------------------------------------------------------
// entropy

TEST_CASE("entropy_from_logits and its gradient", "[kernels][entropy]") {
  std::mt19937 g(37);
  int N = 13, V = 301;
  auto z = uniform(g, N * V, -8, 8);
  z[3] = -INFINITY;  // a banned token
  z[V * 2 + 7] = 60.0f;  // a very peaked row
  fvec h(N);
  k::entropy_from_logits(par, N, V, cs(z), ms(h));
  for (int i = 0; i < N; ++i) {
    ref::vec row(z.begin() + i * V, z.begin() + (i + 1) * V);
    REQUIRE(h[i] == Approx(ref::entropy(row)).epsilon(1e-5).margin(1e-6));
  }
  auto ge = uniform(g, N, -1, 1);
  fvec gz(N * V);
  k::entropy_from_logits_backward(par, N, V, cs(z), cs(ge), ms(gz));
  for (int q = 0; q < 60; ++q) {
    int i = static_cast<int>(g() % N), v = static_cast<int>(g() % V);
    if (z[i * V + v] == -INFINITY) {
      REQUIRE(gz[i * V + v] == 0.0f);
      continue;
    }
    ref::vec row(z.begin() + i * V, z.begin() + (i + 1) * V), p = row, mn = row;
    p[v] += 1e-5;
    mn[v] -= 1e-5;
    double fd = ge[i] * (ref::entropy(p) - ref::entropy(mn)) / 2e-5;
    REQUIRE(gz[i * V + v] == Approx(fd).epsilon(1e-3).margin(1e-6));
  }
  z[V + 4] = NAN;
  CHECK_THROWS_WITH(k::entropy_from_logits(par, N, V, cs(z), ms(h)), Catch::Contains("row 1, vocab index 4"));
  fvec allinf(4, -INFINITY), h1(1);
  CHECK_THROWS_WITH(k::entropy_from_logits(par, 1, 4, cs(allinf), ms(h1)), Catch::Contains("every logit of row 0"));
  fvec none;
  REQUIRE_NOTHROW(k::entropy_from_logits(par, 0, 5, cs(none), ms(none)));
}
