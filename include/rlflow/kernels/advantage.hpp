// rlflow/kernels/advantage.hpp: advantage estimators with verl's names and semantics
// (verl: core_algos.ADV_ESTIMATOR_REGISTRY): GAE, GRPO (and Dr.GRPO), GDPO, GRPO pass@k, RLOO and
// rloo_vectorized, REINFORCE++, REINFORCE++-baseline, ReMax, OPO, GPG, the optimal token baseline
// and its multi-turn (TIR) variant; plus sequence_scores and group_index (uid -> dense group id).
// Rows of one group may sit anywhere in the batch and groups may differ in size. Each writes
// advantages (B, T) and optionally returns (B, T). The batch-level dispatch by name lives in
// rlflow/advantage_step.hpp.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <map>
#include <span>
#include <type_traits>
#include <string>
#include <string_view>
#include <functional>
#include <utility>
#include <vector>

#include <rlflow/kernels/detail/checks.hpp>
#include <rlflow/kernels/detail/exec.hpp>
#include <rlflow/kernels/masked.hpp>   // detail::masked_moments, whiten_apply
#include <rlflow/kernels/math.hpp>     // welford, top2
#include <rlflow/kernels/options.hpp>  // Dims

// Letters: B rows (prompts x samples, in any order), T padded response tokens.

namespace rlflow::kernels {

//! GRPO-family options. verl's trainer never forwards epsilon (it stays 1e-6); pass@k reads the
//! std flag from the algorithm config - pass algorithm.norm_adv_by_std_in_grpo here.
struct GRPOOptions {
  double epsilon = 1e-6;
  bool norm_adv_by_std_in_grpo = true;  //!< false = Dr.GRPO (no std division)
};

// ---------------------------------------------------------------------------------------------
// uid -> group id

namespace detail {

//! The key group_index hashes a label by: a std::string_view for string-like labels (no copy),
//! the label itself otherwise.
template <class Label>
auto label_key(Label const& l) {
  if constexpr (std::is_convertible_v<Label const&, std::string_view>) return std::string_view(l);
  else return l;
}

inline std::uint64_t load_u64(char const* p) {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline std::uint64_t load_u32(char const* p) {
  std::uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

//! The 128-bit product of a and b folded to 64 bits (high ^ low): the mixing step of the hash.
inline std::uint64_t fold_mul(std::uint64_t a, std::uint64_t b) {
#if defined(__SIZEOF_INT128__)
  unsigned __int128 const r = static_cast<unsigned __int128>(a) * b;
  return static_cast<std::uint64_t>(r) ^ static_cast<std::uint64_t>(r >> 64);
#else
  std::uint64_t const al = a & 0xffffffffu, ah = a >> 32, bl = b & 0xffffffffu, bh = b >> 32;
  std::uint64_t const ll = al * bl, lh = al * bh, hl = ah * bl, hh = ah * bh;
  std::uint64_t const mid = (ll >> 32) + (lh & 0xffffffffu) + (hl & 0xffffffffu);
  std::uint64_t const lo = (mid << 32) | (ll & 0xffffffffu);
  std::uint64_t const hi = hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
  return lo ^ hi;
#endif
}

//! 64-bit hash of a byte string, reading it as whole 8-byte words (a multiply-fold hash in the
//! style of wyhash; it only has to spread labels over the table: equality is always checked on
//! the bytes). Every load stays inside [data, data + size).
inline std::uint64_t hash_bytes(std::string_view s) {
  constexpr std::uint64_t k0 = 0xa0761d6478bd642full, k1 = 0xe7037ed1a0b428dbull, k2 = 0x8ebc6af09c88c6e3ull;
  char const* p = s.data();
  std::size_t const n = s.size();
  std::uint64_t h = k0 ^ (static_cast<std::uint64_t>(n) * k2), a = 0, b = 0;
  if (n <= 16) {
    if (n >= 8) {
      a = load_u64(p);
      b = load_u64(p + n - 8);
    } else if (n >= 4) {
      a = load_u32(p);
      b = load_u32(p + n - 4);
    } else if (n > 0) {
      a = (std::uint64_t{static_cast<unsigned char>(p[0])} << 16) | (std::uint64_t{static_cast<unsigned char>(p[n >> 1])} << 8) |
          std::uint64_t{static_cast<unsigned char>(p[n - 1])};
    }
  } else {
    std::size_t left = n;
    for (; left > 16; left -= 16, p += 16) h = fold_mul(load_u64(p) ^ k1, load_u64(p + 8) ^ h);
    a = load_u64(p + left - 16);
    b = load_u64(p + left - 8);
  }
  return fold_mul(a ^ k1 ^ static_cast<std::uint64_t>(n), fold_mul(b ^ k2, h ^ k0));
}

template <class Key>
std::uint64_t hash_key(Key const& k) {
  if constexpr (std::is_same_v<Key, std::string_view>) return hash_bytes(k);
  else if constexpr (std::is_integral_v<Key>) return fold_mul(static_cast<std::uint64_t>(k) ^ 0xe7037ed1a0b428dbull, 0x8ebc6af09c88c6e3ull);
  else return fold_mul(static_cast<std::uint64_t>(std::hash<Key>{}(k)) ^ 0xe7037ed1a0b428dbull, 0x8ebc6af09c88c6e3ull);
}

//! One slot of the text grouping table, one cache line: the label's hash, its dense id + 1
//! (0 = empty) and the label itself, inline when it fits (a uuid4 string's 36 bytes do), so the
//! probe that finds a row's group reads one line and never follows a pointer; a longer label is
//! compared through a pointer to its first occurrence.
struct alignas(64) text_slot {
  static constexpr std::size_t inline_bytes = 48;
  std::uint64_t hash;
  std::uint32_t id1;
  std::uint32_t len;
  char bytes[inline_bytes];
  bool holds(std::string_view k) const {
    if (len != k.size()) return false;
    char const* p;
    if (len <= inline_bytes) p = bytes;
    else std::memcpy(&p, bytes, sizeof p);
    return std::memcmp(p, k.data(), len) == 0;
  }
  void set(std::uint64_t h, std::uint32_t id, std::string_view k) {
    hash = h, id1 = id + 1, len = static_cast<std::uint32_t>(k.size());
    if (k.size() <= inline_bytes) std::memcpy(bytes, k.data(), k.size());
    else {
      char const* p = k.data();
      std::memcpy(bytes, &p, sizeof p);
    }
  }
};
static_assert(sizeof(text_slot) == 64, "rlflow::kernels::detail::text_slot: one slot must fill one 64-byte cache line");

//! Any other key (integers, ...): its hash, id + 1 (0 = empty) and the key by value.
template <class Key>
struct value_slot {
  std::uint64_t hash;
  std::uint64_t id1;
  Key key;
  bool holds(Key const& k) const { return key == k; }
  void set(std::uint64_t h, std::uint32_t id, Key const& k) { hash = h, id1 = std::uint64_t{id} + 1, key = k; }
};

template <class Key>
struct default_hash {
  std::uint64_t operator()(Key const& k) const { return hash_key<Key>(k); }
};

template <class Key>
using slot_of = std::conditional_t<std::is_same_v<Key, std::string_view>, text_slot, value_slot<Key>>;

//! Dense ids in first-seen order: out[i] = the number of distinct labels seen before row i's
//! first occurrence. key(i) gives row i's key (a string_view views the caller's bytes, which
//! must stay alive for the call). The table is linear probing over a power-of-two array of
//! slots kept at most half full; it comes from the caching host resource (reused from call to
//! call, no page faults in steady state) and grows x4 from 1024 slots. Rows go in blocks of 64:
//! the next block is hashed and its home slots prefetched before this one is probed, so the
//! table's cache misses overlap. When distinct is given, it receives the distinct keys in
//! first-seen order. Hash: the row hash (a parameter so tests can force collisions). Returns G.
template <class Key, class KeyOf, class Hash = default_hash<Key>>
std::int64_t hashed_group_ids(std::size_t n, KeyOf key, std::int64_t* out, std::vector<Key>* distinct = nullptr, Hash hash = {}) {
  static_assert(std::is_trivially_copyable_v<Key>, "rlflow::kernels::group_index: a label key must be trivially copyable; "
                                                  "pass strings (viewed as std::string_view) or integers");
  using slot = slot_of<Key>;
  if (n == 0) return 0;
  if (n >= std::size_t{0xffffffffu})
    throw shape_error(msg("rlflow::kernels::group_index: ", n, " labels; at most 4294967294 rows can be grouped at once"));
  int bits = 10;
  auto fresh = [](int b) {
    host_scratch<slot> t(std::int64_t{1} << b);
    for (std::int64_t j = 0; j < t.size(); ++j) t[j].id1 = 0;
    return t;
  };
  host_scratch<slot> table = fresh(bits);
  std::uint32_t groups = 0;
  auto grow = [&] {
    bits += 2;
    host_scratch<slot> bigger = fresh(bits);
    std::size_t const msk = static_cast<std::size_t>(bigger.size()) - 1;
    for (std::int64_t j = 0; j < table.size(); ++j)
      if (table[j].id1 != 0) {
        std::size_t i = static_cast<std::size_t>(table[j].hash >> (64 - bits));
        while (bigger[static_cast<std::int64_t>(i)].id1 != 0) i = (i + 1) & msk;
        bigger[static_cast<std::int64_t>(i)] = table[j];
      }
    table = std::move(bigger);
  };
  // Software pipeline: block b + 1 is hashed and its home slots prefetched before block b is
  // probed, so each miss has a block's worth of work to hide behind.
  constexpr std::size_t block = 64;
  std::uint64_t hs[2 * block];
  auto hash_block = [&](std::size_t i0) {
    std::size_t const e = std::min(n, i0 + block);
    std::uint64_t* hb = hs + (i0 / block % 2) * block;
    for (std::size_t r = i0; r < e; ++r) {
      hb[r - i0] = hash(key(r));
      __builtin_prefetch(table.data() + (hb[r - i0] >> (64 - bits)));
    }
  };
  hash_block(0);
  for (std::size_t i0 = 0; i0 < n; i0 += block) {
    if (i0 + block < n) hash_block(i0 + block);
    std::size_t const e = std::min(n, i0 + block);
    std::uint64_t const* hb = hs + (i0 / block % 2) * block;
    for (std::size_t r = i0; r < e; ++r) {
      Key const k = key(r);
      std::uint64_t const h = hb[r - i0];
      std::size_t const msk = static_cast<std::size_t>(table.size()) - 1;
      std::size_t j = static_cast<std::size_t>(h >> (64 - bits));
      for (;;) {
        slot& q = table[static_cast<std::int64_t>(j)];
        if (q.id1 == 0) {
          q.set(h, groups, k);
          if (distinct) distinct->push_back(k);
          out[r] = groups++;
          if (2 * std::size_t{groups} > static_cast<std::size_t>(table.size())) grow();
          break;
        }
        if (q.hash == h && q.holds(k)) {
          out[r] = static_cast<std::int64_t>(q.id1) - 1;
          break;
        }
        j = (j + 1) & msk;
      }
    }
  }
  return groups;
}

}  // namespace detail

//! Dense group ids 0..G-1 in first-seen order (the first row's label is group 0, the next new
//! label group 1, ...) into ids (B); returns G. The grouping the advantage estimators need: their
//! results do not depend on how groups are numbered, only on which rows share a label. One pass
//! of hashing over the rows (labels viewed, never copied; see detail::hashed_group_ids), no
//! allocation in steady state besides the caller's ids.                       labels, ids: (B)
//! Label: a string-like type (viewed as std::string_view) or a trivially copyable key with ==
//! and std::hash (integers are hashed directly).
template <class Label>
std::int64_t group_index_first_seen(std::span<Label const> labels, std::span<std::int64_t> ids) {
  using Key = decltype(detail::label_key(std::declval<Label const&>()));
  detail::expect_size("group_index_first_seen", "ids", ids.size(), static_cast<std::int64_t>(labels.size()), "B (one per label)");
  return detail::hashed_group_ids<Key>(labels.size(), [&](std::size_t i) { return detail::label_key(labels[i]); }, ids.data());
}

//! Dense group ids 0..G-1 for arbitrary labels, in sorted label order (numpy.unique's
//! factorization, as verl.utils.as_torch_index does for strings).              labels: (B)
//! One pass over the rows through the hash table of group_index_first_seen gives first-seen
//! ids; only the G distinct labels are then sorted and the ids renumbered, so the cost is O(B)
//! hashing + O(G log G) comparisons instead of sorting B strings.
//! Label: anything hashable by std::hash and ordered by <, or convertible to std::string_view.
template <class Label>
std::vector<std::int64_t> group_index(std::span<Label const> labels) {
  using Key = decltype(detail::label_key(std::declval<Label const&>()));
  constexpr bool is_text = std::is_same_v<Key, std::string_view>;
  std::size_t const n = labels.size();
  std::vector<std::int64_t> out(n);
  if (n == 0) return out;
  std::vector<Key> keys;  // distinct labels in first-seen order
  detail::hashed_group_ids<Key>(n, [&](std::size_t i) { return detail::label_key(labels[i]); }, out.data(), &keys);
  // First-seen id -> rank of its label among the distinct labels (sorted order, numpy.unique's).
  // Text labels sort by their first 8 bytes as a big-endian integer (the same order as the
  // strings' unsigned-byte comparison), falling back to the full comparison on a tie.
  struct entry {
    std::uint64_t prefix;
    std::int64_t id;
  };
  std::vector<entry> order(keys.size());
  for (std::size_t u = 0; u < keys.size(); ++u) {
    std::uint64_t p = 0;
    if constexpr (is_text) {
      std::string_view const k = keys[u];
      for (std::size_t c = 0; c < 8; ++c) p = (p << 8) | (c < k.size() ? static_cast<unsigned char>(k[c]) : 0u);
    }
    order[u] = entry{p, static_cast<std::int64_t>(u)};
  }
  std::sort(order.begin(), order.end(), [&](entry const& a, entry const& b) {
    if (a.prefix != b.prefix) return a.prefix < b.prefix;
    return keys[static_cast<std::size_t>(a.id)] < keys[static_cast<std::size_t>(b.id)];
  });
  std::vector<std::int64_t> rank(keys.size());
  for (std::size_t r = 0; r < order.size(); ++r) rank[static_cast<std::size_t>(order[r].id)] = static_cast<std::int64_t>(r);
  for (auto& v : out) v = rank[static_cast<std::size_t>(v)];
  return out;
}
inline std::vector<std::int64_t> group_index(std::vector<std::string> const& labels) {
  return group_index(std::span<std::string const>(labels));
}
inline std::vector<std::int64_t> group_index(std::vector<std::string_view> const& labels) {
  return group_index(std::span<std::string_view const>(labels));
}

namespace detail {

template <class Ex>
using welford_buffer = typename Ex::template buffer<math::welford>;

//! Per-group Welford moments of the scores (group ids in [0, groups); groups defaults to B).
template <class Ex>
welford_buffer<Ex> group_moments(Ex const& ex, std::int64_t rows, std::int64_t const* group, float const* s,
                                 std::int64_t groups = -1) {
  if (groups < 0) groups = rows;
  auto st = ex.template alloc<math::welford>(groups);
  if constexpr (std::is_same_v<Ex, exec<cpu::tag>>) {
    // rows are folded in one at a time, in row order: the branch-free push is the same merge
    ex.group_reduce(rows, group, groups, math::welford{}, [=](std::int64_t i) -> double { return s[i]; }, math::welford_push{},
                    st.data());
  } else {
    ex.group_reduce(rows, group, groups, math::welford{},
                    [=] RLFLOW_HD(std::int64_t i) -> math::welford { return math::welford::of(s[i]); },
                    math::welford_merge{}, st.data());
  }
  return st;
}

//! adv[i,t] = m ? a[i] : 0 (and the same into ret when given): the score-to-token broadcast.
template <class Ex, class M>
void broadcast_rows(Ex const& ex, Dims d, float const* a, M const* m, float* adv, float* ret) {
  ex.broadcast_rows(d.rows, d.cols, a, m, adv, ret);
}

//! The broadcast with the row value computed by value(i) (RLFLOW_HD). touch(i) is the address
//! value(i) reads at random (prefetched on the CPU, where the two passes are fused); other
//! backends fill a scratch array of row values and broadcast it.
template <class Ex, class M, class F, class Touch>
void broadcast_rows_by(Ex const& ex, Dims d, F value, Touch touch, M const* m, float* adv, float* ret) {
  if constexpr (std::is_same_v<Ex, exec<cpu::tag>>) {
    ex.broadcast_rows_fn(d.rows, d.cols, value, touch, m, adv, ret);
  } else {
    auto a = ex.template alloc<float>(d.rows);
    float* ap = a.data();
    ex.for_each(d.rows, [=] RLFLOW_HD(std::int64_t i) { ap[i] = value(i); });
    ex.broadcast_rows(d.rows, d.cols, ap, m, adv, ret);
  }
}

//! True when every row has its own group (ids a permutation of 0..rows-1): then each group is
//! a group of one and needs no statistics table. CPU only; 'groups' is the largest id + 1 from
//! the check pass, so the test runs only when groups == rows, with a bitmap of rows bits.
template <class Ex>
bool all_singleton_groups(Ex const&, std::int64_t rows, std::int64_t const* group, std::int64_t groups) {
  if constexpr (std::is_same_v<Ex, exec<cpu::tag>>) {
    if (groups != rows || rows == 0) return false;
    std::vector<std::uint64_t> seen(static_cast<std::size_t>((rows + 63) / 64), 0);
    for (std::int64_t i = 0; i < rows; ++i) {
      auto const id = static_cast<std::uint64_t>(group[i]);
      std::uint64_t const bit = std::uint64_t{1} << (id & 63u);
      std::uint64_t& word = seen[static_cast<std::size_t>(id >> 6)];
      if (word & bit) return false;
      word |= bit;
    }
    return true;
  } else {
    return false;
  }
}

//! Shared checks of the outcome (per-row score) estimators. Returns the group-table size the
//! rows need: largest id + 1 on the CPU (found by the same pass that checks the ids), B elsewhere.
template <class Ex, class M>
std::int64_t outcome_checks(Ex const& ex, const char* fn, Dims d, std::span<float const> scores, std::span<M const> mask,
                    std::span<std::int64_t const> group, bool need_group, std::span<float> adv, std::span<float> ret) {
  expect_dims(fn, d);
  expect_size(fn, "scores", scores.size(), d.rows, "B");
  expect_size(fn, "response_mask", mask.size(), d.numel(), "B*T");
  if (need_group) expect_size(fn, "index", group.size(), d.rows, "B");
  expect_size(fn, "advantages", adv.size(), d.numel(), "B*T");
  if (!ret.empty()) expect_size(fn, "returns", ret.size(), d.numel(), "B*T");
  if constexpr (std::is_same_v<Ex, exec<cpu::tag>>) {
    if (need_group) return check_rows_and_groups(ex, fn, "scores", d.rows, scores.data(), group.data());
  }
  check_finite_rows(ex, fn, "scores", d.rows, scores.data());
  if (need_group) check_groups(ex, fn, d.rows, group.data());
  return d.rows;
}

inline float* opt_ptr(std::span<float> s) { return s.empty() ? nullptr : s.data(); }

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Scores

namespace detail {

//! One row's score on the CPU: four double partial sums (one serial chain of dependent adds was
//! the cost of the whole GRPO step from verl's inputs), rounded once to float.
inline float row_score(float const* x, std::int64_t T) {
  double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
  std::int64_t t = 0;
  for (; t + 4 <= T; t += 4) {
    a0 += static_cast<double>(x[t]);
    a1 += static_cast<double>(x[t + 1]);
    a2 += static_cast<double>(x[t + 2]);
    a3 += static_cast<double>(x[t + 3]);
  }
  for (; t < T; ++t) a0 += static_cast<double>(x[t]);
  return static_cast<float>((a0 + a1) + (a2 + a3));
}

}  // namespace detail

//! s_i = sum_t r[i,t] over every position (unmasked, like verl's token_level_rewards.sum(-1)).
//! token_level_rewards: (B, T) -> scores: (B)
template <class Policy>
void sequence_scores(Policy const& policy, Dims d, std::span<float const> token_level_rewards, std::span<float> scores) {
  detail::check_policy<Policy>();
  detail::expect_dims("sequence_scores", d);
  detail::expect_size("sequence_scores", "token_level_rewards", token_level_rewards.size(), d.numel(), "B*T");
  detail::expect_size("sequence_scores", "scores", scores.size(), d.rows, "B");
  auto ex = detail::make_exec(policy);
  float const* r = token_level_rewards.data();
  float* s = scores.data();
  std::int64_t const T = d.cols;
  if constexpr (std::is_same_v<std::remove_cvref_t<decltype(ex)>, detail::exec<cpu::tag>>) {
    // CPU: four double partial sums per row (one serial chain of dependent adds was the cost of
    // the whole GRPO step from verl's inputs); still accumulated in double.
    ex.for_each(d.rows, [=](std::int64_t i) { s[i] = detail::row_score(r + i * T, T); });
    return;
  }
  ex.row_reduce(d.rows, T, 0.0, [=] RLFLOW_HD(std::int64_t i, std::int64_t t) -> double { return r[i * T + t]; },
                [=] RLFLOW_HD(std::int64_t i, double v) { s[i] = static_cast<float>(v); });
}

// ---------------------------------------------------------------------------------------------
// Outcome estimators over groups

//! GRPO: a_i = (s_i - mean_g) / (std_g + eps) with the unbiased group std, or s_i - mean_g
//! (Dr.GRPO); a group of one uses mean 0, std 1. A = returns = a_i * m.
//! verl: compute_grpo_outcome_advantage ("grpo"; "grpo_vectorized" is the same function)
//! scores: (B); response_mask: (B, T); index: (B) dense group ids; advantages, returns: (B, T)
template <class Policy, class Mask>
void grpo_outcome_advantage(Policy const& policy, Dims d, std::span<float const> scores,
                            std::span<Mask const> response_mask, std::span<std::int64_t const> index,
                            std::span<float> advantages, std::span<float> returns = {}, GRPOOptions opt = {}) {
  detail::check_policy<Policy>();
  detail::check_mask<Mask>();
  auto ex = detail::make_exec(policy);
  std::int64_t const groups =
      detail::outcome_checks(ex, "grpo_outcome_advantage", d, scores, response_mask, index, true, advantages, returns);
  float const* s = scores.data();
  std::int64_t const* g = index.data();
  double const eps = opt.epsilon;
  bool const norm = opt.norm_adv_by_std_in_grpo;
  if (detail::all_singleton_groups(ex, d.rows, g, groups)) {
    // Every group is a group of one (n = 1): verl's rule gives mean 0 and std 1, so the
    // advantage is the score itself (divided by 1 + eps); no group table is needed.
    double const div = 1.0 + eps;
    detail::broadcast_rows_by(
        ex, d, [=] RLFLOW_HD(std::int64_t i) -> float { return static_cast<float>(norm ? static_cast<double>(s[i]) / div : static_cast<double>(s[i])); },
        [=] RLFLOW_HD(std::int64_t i) -> void const* { return s + i; }, response_mask.data(), advantages.data(),
        detail::opt_ptr(returns));
    return;
  }
  auto st = detail::group_moments(ex, d.rows, g, s, groups);
  math::welford const* w = st.data();
  // Once per group: the mean to subtract and the divisor std + eps (the same doubles the per-row
  // formula used, so results are unchanged), packed 16 bytes a group so the broadcast's random
  // read of a group touches one cache line.
  auto cs = ex.template alloc<math::center_scale>(groups);
  math::center_scale* c = cs.data();
  ex.for_each(groups, [=] RLFLOW_HD(std::int64_t j) {
    math::welford const q = w[j];
    c[j] = math::center_scale{q.n > 1 ? q.mean : 0.0, (q.n > 1 ? sqrt(q.m2 / (q.n - 1.0)) : 1.0) + eps};
  });
  detail::broadcast_rows_by(
      ex, d,
      [=] RLFLOW_HD(std::int64_t i) -> float {
        math::center_scale const q = c[g[i]];
        double const x = static_cast<double>(s[i]) - q.center;
        return static_cast<float>(norm ? x / q.scale : x);
      },
      [=] RLFLOW_HD(std::int64_t i) -> void const* { return c + g[i]; }, response_mask.data(), advantages.data(),
      detail::opt_ptr(returns));
}

//! Pass@k: only each group's top scorer gets r_max - r_second (divided by std_g + eps when
//! norm_adv_by_std_in_grpo); everything else 0. Groups of one raise value_error (as verl).
//! Ties for the top go to the lowest row (verl: unspecified; the advantage is then 0 anyway).
//! verl: compute_grpo_passk_outcome_advantage ("grpo_passk")
template <class Policy, class Mask>
void grpo_passk_outcome_advantage(Policy const& policy, Dims d, std::span<float const> scores,
                                  std::span<Mask const> response_mask, std::span<std::int64_t const> index,
                                  std::span<float> advantages, std::span<float> returns = {}, GRPOOptions opt = {}) {
  detail::check_policy<Policy>();
  detail::check_mask<Mask>();
  auto ex = detail::make_exec(policy);
  const char* fn = "grpo_passk_outcome_advantage";
  detail::outcome_checks(ex, fn, d, scores, response_mask, index, true, advantages, returns);
  float const* s = scores.data();
  std::int64_t const* g = index.data();
  auto st = detail::group_moments(ex, d.rows, g, s);
  auto top = ex.template alloc<math::top2>(d.rows);
  ex.group_reduce(d.rows, g, d.rows, math::top2{}, [=] RLFLOW_HD(std::int64_t i) -> math::top2 { return math::top2::of(s[i], i); },
                  math::top2_merge{}, top.data());
  math::welford const* w = st.data();
  math::top2 const* tp = top.data();
  std::int64_t const lone = ex.min_index(d.rows, [=] RLFLOW_HD(std::int64_t i) -> std::int64_t {
    return w[g[i]].n < 2 ? i : math::first_index::none;
  });
  if (lone != math::first_index::none)
    throw value_error(msg("rlflow::kernels::", fn, ": group ", ex.load(g, lone), " (row ", lone,
                          ") has 1 sample; pass@k needs at least 2 samples per group (verl raises too) - set rollout.n >= 2"));
  auto a = ex.template alloc<float>(d.rows);
  float* ap = a.data();
  double const eps = opt.epsilon;
  bool const norm = opt.norm_adv_by_std_in_grpo;
  ex.for_each(d.rows, [=] RLFLOW_HD(std::int64_t i) {
    math::top2 const t = tp[g[i]];
    double v = 0.0;
    if (t.i1 == i) {
      v = t.v1 - t.v2;
      if (norm) {
        math::welford const q = w[g[i]];
        v /= sqrt(q.m2 / (q.n - 1.0)) + eps;
      }
    }
    ap[i] = static_cast<float>(v);
  });
  detail::broadcast_rows(ex, d, ap, response_mask.data(), advantages.data(), detail::opt_ptr(returns));
}

namespace detail {
//! The outcome estimators whose row value is a function of the row's score and its group's
//! moments: checks, group statistics, per-row value f(q, s_i) (RLFLOW_HD), broadcast.
template <class Policy, class Mask, class F>
void outcome_from_group_moments(Policy const& policy, const char* fn, Dims d, std::span<float const> scores,
                                std::span<Mask const> response_mask, std::span<std::int64_t const> index,
                                std::span<float> advantages, std::span<float> returns, F f) {
  check_policy<Policy>();
  check_mask<Mask>();
  auto ex = make_exec(policy);
  std::int64_t const groups = outcome_checks(ex, fn, d, scores, response_mask, index, true, advantages, returns);
  float const* s = scores.data();
  std::int64_t const* g = index.data();
  auto st = group_moments(ex, d.rows, g, s, groups);
  math::welford const* w = st.data();
  broadcast_rows_by(
      ex, d, [=] RLFLOW_HD(std::int64_t i) -> float { return static_cast<float>(f(w[g[i]], static_cast<double>(s[i]))); },
      [=] RLFLOW_HD(std::int64_t i) -> void const* { return w + g[i]; }, response_mask.data(), advantages.data(),
      opt_ptr(returns));
}

//! RLOO's row value: s - mean of the others = (s - mean_g) n/(n-1); a group of one keeps
//! 'lone' (verl's loop: s; the vectorized variant: 0).
struct rloo_value {
  bool lone_is_zero = false;
  RLFLOW_HD double operator()(math::welford const& q, double s) const {
    if (q.n > 1) return (s - q.mean) * (q.n / (q.n - 1.0));
    return lone_is_zero ? 0.0 : s;
  }
};
}  // namespace detail

//! RLOO: a_i = n/(n-1) s_i - n/(n-1) mean_g = s_i - mean of the others; a group of one keeps
//! a_i = s_i.                                     verl: compute_rloo_outcome_advantage ("rloo")
template <class Policy, class Mask>
void rloo_outcome_advantage(Policy const& policy, Dims d, std::span<float const> scores, std::span<Mask const> response_mask,
                            std::span<std::int64_t const> index, std::span<float> advantages, std::span<float> returns = {}) {
  detail::outcome_from_group_moments(policy, "rloo_outcome_advantage", d, scores, response_mask, index, advantages, returns,
                                     detail::rloo_value{false});
}

//! Vectorized RLOO: a_i = (c s_i - S_g) / max(c - 1, 1) * [c > 1]. Differs from rloo for groups
//! of one: 0 instead of s_i.                     verl: compute_rloo_vectorized_outcome_advantage
template <class Policy, class Mask>
void rloo_vectorized_outcome_advantage(Policy const& policy, Dims d, std::span<float const> scores,
                                       std::span<Mask const> response_mask, std::span<std::int64_t const> index,
                                       std::span<float> advantages, std::span<float> returns = {}) {
  detail::outcome_from_group_moments(policy, "rloo_vectorized_outcome_advantage", d, scores, response_mask, index, advantages,
                                     returns, detail::rloo_value{true});
}

//! REINFORCE++-baseline: a_i = s_i - mean_g (a group of one: mean 0), tiled and masked, then
//! A = masked_whiten(a m, m) m over the whole batch; returns = A. Throws for fewer than two
//! valid tokens in the batch.   verl: compute_reinforce_plus_plus_baseline_outcome_advantage
template <class Policy, class Mask>
void reinforce_plus_plus_baseline_outcome_advantage(Policy const& policy, Dims d, std::span<float const> scores,
                                                    std::span<Mask const> response_mask, std::span<std::int64_t const> index,
                                                    std::span<float> advantages, std::span<float> returns = {}) {
  detail::check_policy<Policy>();
  detail::check_mask<Mask>();
  auto ex = detail::make_exec(policy);
  const char* fn = "reinforce_plus_plus_baseline_outcome_advantage";
  detail::outcome_checks(ex, fn, d, scores, response_mask, index, true, advantages, returns);
  float const* s = scores.data();
  std::int64_t const* g = index.data();
  Mask const* m = response_mask.data();
  auto st = detail::group_moments(ex, d.rows, g, s);
  math::welford const* w = st.data();
  auto a = ex.template alloc<float>(d.rows);
  float* ap = a.data();
  ex.for_each(d.rows, [=] RLFLOW_HD(std::int64_t i) {
    math::welford const q = w[g[i]];
    ap[i] = static_cast<float>(static_cast<double>(s[i]) - (q.n > 1 ? q.mean : 0.0));
  });
  float* adv = advantages.data();
  detail::broadcast_rows(ex, d, ap, m, adv, static_cast<float*>(nullptr));
  auto const mom = detail::masked_moments(ex, fn, d, adv, m, true);
  double const mean = mom.mean, rs = 1.0 / std::sqrt(mom.var + 1e-8);
  float* ret = detail::opt_ptr(returns);
  ex.for_each(d.numel(), [=] RLFLOW_HD(std::int64_t k) {
    float const v = detail::on(m[k]) ? static_cast<float>((static_cast<double>(adv[k]) - mean) * rs) : 0.0f;
    adv[k] = v;
    if (ret) ret[k] = v;
  });
}

//! OPO: length-weighted baseline b_g = sum_j L_j s_j / sum_j L_j (L_j = valid tokens of row j;
//! a group of one: b = 0); A = returns = (s_i - b_g) m. A group of >= 2 fully masked rows raises
//! value_error (verl would produce NaN).          verl: compute_opo_outcome_advantage ("opo")
template <class Policy, class Mask>
void opo_outcome_advantage(Policy const& policy, Dims d, std::span<float const> scores, std::span<Mask const> response_mask,
                           std::span<std::int64_t const> index, std::span<float> advantages, std::span<float> returns = {}) {
  detail::check_policy<Policy>();
  detail::check_mask<Mask>();
  auto ex = detail::make_exec(policy);
  const char* fn = "opo_outcome_advantage";
  detail::outcome_checks(ex, fn, d, scores, response_mask, index, true, advantages, returns);
  float const* s = scores.data();
  std::int64_t const* g = index.data();
  Mask const* m = response_mask.data();
  std::int64_t const T = d.cols;
  auto len = ex.template alloc<double>(d.rows);
  double* lp = len.data();
  ex.row_reduce(d.rows, T, 0.0, [=] RLFLOW_HD(std::int64_t i, std::int64_t t) -> double { return detail::on(m[i * T + t]) ? 1.0 : 0.0; },
                [=] RLFLOW_HD(std::int64_t i, double v) { lp[i] = v; });
  using V = math::dvec<3>;
  auto st = ex.template alloc<V>(d.rows);
  ex.group_reduce(d.rows, g, d.rows, V::zero(),
                  [=] RLFLOW_HD(std::int64_t i) -> V { return V{{lp[i] * static_cast<double>(s[i]), lp[i], 1.0}}; },
                  [] RLFLOW_HD(V const& x, V const& y) -> V { return x + y; }, st.data());
  V const* sp = st.data();
  std::int64_t const bad = ex.min_index(d.rows, [=] RLFLOW_HD(std::int64_t i) -> std::int64_t {
    V const q = sp[g[i]];
    return (q.v[2] > 1 && q.v[1] == 0) ? i : math::first_index::none;
  });
  if (bad != math::first_index::none)
    throw value_error(msg("rlflow::kernels::", fn, ": every row of group ", ex.load(g, bad), " (e.g. row ", bad,
                          ") is fully masked, so the length-weighted baseline is 0/0 (verl yields NaN); drop the group"));
  auto a = ex.template alloc<float>(d.rows);
  float* ap = a.data();
  ex.for_each(d.rows, [=] RLFLOW_HD(std::int64_t i) {
    V const q = sp[g[i]];
    double const b = q.v[2] > 1 ? q.v[0] / q.v[1] : 0.0;
    ap[i] = static_cast<float>(static_cast<double>(s[i]) - b);
  });
  detail::broadcast_rows(ex, d, ap, m, advantages.data(), detail::opt_ptr(returns));
}

//! GPG: alpha = B / max(#{i: s_i != 0}, 1) over the whole batch; a_i = alpha (s_i - mean_g) / f_norm
//! (a group of one: mean 0). A = returns = a_i m.  verl: compute_gpg_outcome_advantage ("gpg")
template <class Policy, class Mask>
void gpg_outcome_advantage(Policy const& policy, Dims d, std::span<float const> scores, std::span<Mask const> response_mask,
                           std::span<std::int64_t const> index, std::span<float> advantages, std::span<float> returns = {},
                           double f_norm = 1.0) {
  detail::check_policy<Policy>();
  detail::check_mask<Mask>();
  auto ex = detail::make_exec(policy);
  detail::outcome_checks(ex, "gpg_outcome_advantage", d, scores, response_mask, index, true, advantages, returns);
  float const* s = scores.data();
  std::int64_t const* g = index.data();
  auto st = detail::group_moments(ex, d.rows, g, s);
  math::welford const* w = st.data();
  double const nz = ex.reduce(d.rows, 0.0, [=] RLFLOW_HD(std::int64_t i) -> double { return s[i] != 0.0f ? 1.0 : 0.0; });
  double const alpha = static_cast<double>(d.rows) / (nz > 1 ? nz : 1.0);
  auto a = ex.template alloc<float>(d.rows);
  float* ap = a.data();
  ex.for_each(d.rows, [=] RLFLOW_HD(std::int64_t i) {
    math::welford const q = w[g[i]];
    ap[i] = static_cast<float>(alpha * (static_cast<double>(s[i]) - (q.n > 1 ? q.mean : 0.0)) / f_norm);
  });
  detail::broadcast_rows(ex, d, ap, response_mask.data(), advantages.data(), detail::opt_ptr(returns));
}

// ---------------------------------------------------------------------------------------------
// Token-level estimators (per-row backward scans)

//! GAE: backward scan with carries nextV, last (both 0 at the end; left unchanged at masked
//! positions): delta = r + gamma nextV - V; last = delta + gamma lam last. A_raw[t] = last,
//! returns = A_raw + V everywhere; advantages = masked_whiten(A_raw, m) over the whole batch and
//! NOT re-masked (padding holds whitened values, as verl).  verl: compute_gae_advantage_return
//! token_level_rewards, values, response_mask, advantages, returns: (B, T)
template <class Policy, class Mask>
void gae_advantage_return(Policy const& policy, Dims d, std::span<float const> token_level_rewards,
                          std::span<float const> values, std::span<Mask const> response_mask, double gamma, double lam,
                          std::span<float> advantages, std::span<float> returns) {
  detail::check_policy<Policy>();
  detail::check_mask<Mask>();
  const char* fn = "gae_advantage_return";
  detail::expect_token_spans(fn, d,
                             {{"token_level_rewards", token_level_rewards.size()}, {"values", values.size()},
                              {"response_mask", response_mask.size()}, {"advantages", advantages.size()},
                              {"returns", returns.size()}});
  auto ex = detail::make_exec(policy);
  Mask const* m = response_mask.data();
  float const* r = token_level_rewards.data();
  float const* v = values.data();
  detail::check_finite_tokens(ex, fn, "token_level_rewards", d, r, m);
  detail::check_finite_tokens(ex, fn, "values", d, v, m);
  float* adv = advantages.data();
  float* ret = returns.data();
  std::int64_t const T = d.cols;
  ex.for_each(d.rows, [=] RLFLOW_HD(std::int64_t i) {
    double next_v = 0.0, last = 0.0;
    for (std::int64_t t = T - 1; t >= 0; --t) {
      std::int64_t const k = i * T + t;
      double const delta = static_cast<double>(r[k]) + gamma * next_v - static_cast<double>(v[k]);
      double const cand = delta + gamma * lam * last;
      if (detail::on(m[k])) {
        next_v = v[k];
        last = cand;
      }
      float const a = static_cast<float>(last);
      adv[k] = a;
      ret[k] = static_cast<float>(static_cast<double>(a) + static_cast<double>(v[k]));
    }
  });
  auto const mom = detail::masked_moments(ex, fn, d, adv, m, true);
  detail::whiten_apply(ex, d.numel(), adv, adv, mom.mean, mom.var, true);
}

//! REINFORCE++: backward scan run = 0; new = r + gamma run; returns_t = new m_t; run = m_t ? new
//! : run (masked tokens carry the running return). advantages = masked_whiten(returns, m) m;
//! returns are the un-whitened ones.   verl: compute_reinforce_plus_plus_outcome_advantage
template <class Policy, class Mask>
void reinforce_plus_plus_outcome_advantage(Policy const& policy, Dims d, std::span<float const> token_level_rewards,
                                           std::span<Mask const> response_mask, double gamma, std::span<float> advantages,
                                           std::span<float> returns) {
  detail::check_policy<Policy>();
  detail::check_mask<Mask>();
  const char* fn = "reinforce_plus_plus_outcome_advantage";
  detail::expect_token_spans(fn, d,
                             {{"token_level_rewards", token_level_rewards.size()},
                              {"response_mask", response_mask.size()}, {"advantages", advantages.size()},
                              {"returns", returns.size()}});
  auto ex = detail::make_exec(policy);
  Mask const* m = response_mask.data();
  float const* r = token_level_rewards.data();
  detail::check_finite_tokens(ex, fn, "token_level_rewards", d, r, m);
  float* adv = advantages.data();
  float* ret = returns.data();
  std::int64_t const T = d.cols;
  ex.for_each(d.rows, [=] RLFLOW_HD(std::int64_t i) {
    double run = 0.0;
    for (std::int64_t t = T - 1; t >= 0; --t) {
      std::int64_t const k = i * T + t;
      double const nw = static_cast<double>(r[k]) + gamma * run;
      bool const v = detail::on(m[k]);
      ret[k] = v ? static_cast<float>(nw) : 0.0f;
      if (v) run = nw;
    }
  });
  auto const mom = detail::masked_moments(ex, fn, d, ret, m, true);
  double const mean = mom.mean, rs = 1.0 / std::sqrt(mom.var + 1e-8);
  ex.for_each(d.numel(), [=] RLFLOW_HD(std::int64_t k) {
    adv[k] = detail::on(m[k]) ? static_cast<float>((static_cast<double>(ret[k]) - mean) * rs) : 0.0f;
  });
}

//! ReMax: returns_t = sum_{t' >= t} r_t' m_t' (reverse cumulative sum); A = returns - b_i m with
//! b_i the greedy rollout's score.     verl: compute_remax_outcome_advantage ("remax")
//! token_level_rewards: (B, T); reward_baselines: (B); advantages, returns: (B, T)
template <class Policy, class Mask>
void remax_outcome_advantage(Policy const& policy, Dims d, std::span<float const> token_level_rewards,
                             std::span<float const> reward_baselines, std::span<Mask const> response_mask,
                             std::span<float> advantages, std::span<float> returns) {
  detail::check_policy<Policy>();
  detail::check_mask<Mask>();
  const char* fn = "remax_outcome_advantage";
  detail::expect_dims(fn, d);
  detail::expect_size(fn, "token_level_rewards", token_level_rewards.size(), d.numel(), "B*T");
  detail::expect_size(fn, "reward_baselines", reward_baselines.size(), d.rows, "B");
  detail::expect_size(fn, "response_mask", response_mask.size(), d.numel(), "B*T");
  detail::expect_size(fn, "advantages", advantages.size(), d.numel(), "B*T");
  detail::expect_size(fn, "returns", returns.size(), d.numel(), "B*T");
  auto ex = detail::make_exec(policy);
  Mask const* m = response_mask.data();
  float const* r = token_level_rewards.data();
  float const* b = reward_baselines.data();
  detail::check_finite_tokens(ex, fn, "token_level_rewards", d, r, m);
  detail::check_finite_rows(ex, fn, "reward_baselines", d.rows, b);
  float* adv = advantages.data();
  float* ret = returns.data();
  std::int64_t const T = d.cols;
  ex.for_each(d.rows, [=] RLFLOW_HD(std::int64_t i) {
    double acc = 0.0;
    for (std::int64_t t = T - 1; t >= 0; --t) {
      std::int64_t const k = i * T + t;
      bool const v = detail::on(m[k]);
      if (v) acc += static_cast<double>(r[k]);
      ret[k] = static_cast<float>(acc);
      adv[k] = static_cast<float>(acc - (v ? static_cast<double>(b[i]) : 0.0));
    }
  });
}

// ---------------------------------------------------------------------------------------------
// GDPO (reward-decoupled GRPO)

//! GDPO: GRPO (same epsilon and std flag) on each reward dimension k separately, A_sum = sum_k w_k A_k
//! (float32 products and sums, as verl), then A = returns = masked_whiten(A_sum, m) m over the batch.
//! With one dimension (the trainer's fallback when no gdpo_reward_keys are configured: the row scores
//! of token_level_rewards) it is the whitened GRPO advantage. Throws for fewer than two valid tokens.
//! verl: compute_gdpo_outcome_advantage ("gdpo")
//! dimension_scores: (K, B) backend memory, dimension k's row i at k*B + i; weights: (K) host values
//! (empty: all 1 = gdpo_reward_weights unset); response_mask, advantages, returns: (B, T); index: (B)
template <class Policy, class Mask>
void gdpo_outcome_advantage(Policy const& policy, Dims d, std::int64_t num_dims, std::span<float const> dimension_scores,
                            std::span<double const> weights, std::span<Mask const> response_mask,
                            std::span<std::int64_t const> index, std::span<float> advantages, std::span<float> returns = {},
                            GRPOOptions opt = {}) {
  detail::check_policy<Policy>();
  detail::check_mask<Mask>();
  const char* fn = "gdpo_outcome_advantage";
  detail::expect_dims(fn, d);
  if (num_dims < 1)
    throw config_error(msg("rlflow::kernels::", fn, ": GDPO needs at least one reward dimension, got ", num_dims,
                           "; set algorithm.gdpo_reward_keys (verl asserts it is non-empty)"));
  detail::expect_size(fn, "dimension_scores", dimension_scores.size(), num_dims * d.rows, "K*B");
  if (!weights.empty() && static_cast<std::int64_t>(weights.size()) != num_dims)
    throw config_error(msg("rlflow::kernels::", fn, ": ", weights.size(), " gdpo_reward_weights for ", num_dims,
                           " reward dimensions; give one weight per gdpo_reward_keys entry"));
  detail::expect_size(fn, "response_mask", response_mask.size(), d.numel(), "B*T");
  detail::expect_size(fn, "advantages", advantages.size(), d.numel(), "B*T");
  if (!returns.empty()) detail::expect_size(fn, "returns", returns.size(), d.numel(), "B*T");
  auto ex = detail::make_exec(policy);
  std::int64_t const n = d.numel();
  auto tmp = ex.template alloc<float>(n);
  float* tp = tmp.data();
  float* acc = advantages.data();
  for (std::int64_t k = 0; k < num_dims; ++k) {
    grpo_outcome_advantage(policy, d, dimension_scores.subspan(static_cast<std::size_t>(k * d.rows), static_cast<std::size_t>(d.rows)),
                           response_mask, index, std::span<float>(tp, static_cast<std::size_t>(n)), std::span<float>{}, opt);
    float const wk = static_cast<float>(weights.empty() ? 1.0 : weights[static_cast<std::size_t>(k)]);
    bool const first = k == 0;
    ex.for_each(n, [=] RLFLOW_HD(std::int64_t q) {
      float const v = wk * tp[q];
      acc[q] = first ? v : acc[q] + v;
    });
  }
  Mask const* m = response_mask.data();
  auto const mom = detail::masked_moments(ex, fn, d, acc, m, true);
  double const mean = mom.mean, rs = 1.0 / std::sqrt(mom.var + 1e-8);
  float* ret = detail::opt_ptr(returns);
  ex.for_each(n, [=] RLFLOW_HD(std::int64_t q) {
    float const v = detail::on(m[q]) ? static_cast<float>((static_cast<double>(acc[q]) - mean) * rs) : 0.0f;
    acc[q] = v;
    if (ret) ret[q] = v;
  });
}

// ---------------------------------------------------------------------------------------------
// Optimal token baseline (OTB) and its multi-turn (TIR) variant

//! verl's keyword defaults of the two OTB estimators.
struct OTBOptions {
  bool handle_zero_tail = true;  //!< zero the longest row's baseline past the second-longest length
  double epsilon = 1e-8;         //!< added to the baseline's denominator
};

namespace detail {

//! OTB core. G = reverse cumsum of r m (the returns), W = cumsum of w m with w = 1 - 2 e^old +
//! sum_pi^2 (times isw^2). Per group of N > 1 and column c: B_c = sum_i G W m / (sum_i W m + eps),
//! with c the token index (otb) or the token's rank among the row's valid tokens (tir: multi-turn
//! rows compacted). Empty rows count as members in otb and are left out in tir (verl).
template <class Ex, class M>
void otb_impl(Ex const& ex, const char* fn, Dims d, bool tir, std::span<float const> token_level_rewards,
              std::span<M const> response_mask, std::span<std::int64_t const> index, std::span<float const> old_log_probs,
              std::span<float const> sum_pi_squared, std::span<float const> rollout_is_weights, std::span<float> advantages,
              std::span<float> returns, OTBOptions opt) {
  expect_dims(fn, d);
  expect_token_spans(fn, d,
                     {{"token_level_rewards", token_level_rewards.size()}, {"response_mask", response_mask.size()},
                      {"old_log_probs", old_log_probs.size()}, {"sum_pi_squared", sum_pi_squared.size()},
                      {"advantages", advantages.size()}, {"returns", returns.size()}});
  expect_size(fn, "index", index.size(), d.rows, "B");
  if (!rollout_is_weights.empty()) expect_size(fn, "rollout_is_weights", rollout_is_weights.size(), d.numel(), "B*T");
  M const* m = response_mask.data();
  float const* r = token_level_rewards.data();
  float const* lp = old_log_probs.data();
  float const* sp = sum_pi_squared.data();
  float const* isw = rollout_is_weights.empty() ? nullptr : rollout_is_weights.data();
  std::int64_t const* g = index.data();
  check_finite_tokens(ex, fn, "token_level_rewards", d, r, m);
  check_finite_tokens(ex, fn, "old_log_probs", d, lp, m);
  check_finite_tokens(ex, fn, "sum_pi_squared", d, sp, m);
  check_finite_tokens(ex, fn, "rollout_is_weights", d, isw, m);
  check_groups(ex, fn, d.rows, g);
  std::int64_t const B = d.rows, T = d.cols, n = d.numel();
  if (n == 0) return;
  float* ret = returns.data();
  float* adv = advantages.data();
  auto wbuf = ex.template alloc<double>(n);
  auto col = ex.template alloc<std::int64_t>(n);  // tir: compact column -> token index (first len entries of a row)
  auto pos = ex.template alloc<std::int64_t>(n);  // the column of each valid token
  auto len = ex.template alloc<double>(B);
  double* W = wbuf.data();
  std::int64_t* cp = col.data();
  std::int64_t* pp = pos.data();
  double* lenp = len.data();
  ex.for_each(B, [=] RLFLOW_HD(std::int64_t i) {
    double run = 0.0, cw = 0.0;
    std::int64_t j = 0;
    for (std::int64_t t = T - 1; t >= 0; --t) {
      std::int64_t const k = i * T + t;
      if (detail::on(m[k])) run += static_cast<double>(r[k]);
      ret[k] = static_cast<float>(run);
    }
    for (std::int64_t t = 0; t < T; ++t) {
      std::int64_t const k = i * T + t;
      if (detail::on(m[k])) {
        double w = 1.0 - 2.0 * exp(static_cast<double>(lp[k])) + static_cast<double>(sp[k]);
        if (isw) w *= static_cast<double>(isw[k]) * static_cast<double>(isw[k]);
        cw += w;
        cp[i * T + j] = t;
        pp[k] = tir ? j : t;
        ++j;
      }
      W[k] = cw;
    }
    lenp[i] = static_cast<double>(j);
  });
  // Group membership, size and the two longest rows (top2: lowest row on ties).
  auto top = ex.template alloc<math::top2>(B);
  ex.group_reduce(B, g, B, math::top2{},
                  [=] RLFLOW_HD(std::int64_t i) -> math::top2 {
                    return (tir && lenp[i] == 0) ? math::top2{} : math::top2::of(lenp[i], i);
                  },
                  math::top2_merge{}, top.data());
  math::top2 const* tp = top.data();
  // Column sums per group: one thread per column owns that column of every group (no races).
  auto num = ex.template alloc<double>(n);
  auto den = ex.template alloc<double>(n);
  double* np = num.data();
  double* dp = den.data();
  ex.for_each(n, [=] RLFLOW_HD(std::int64_t q) { np[q] = 0.0, dp[q] = 0.0; });
  ex.for_each(T, [=] RLFLOW_HD(std::int64_t c) {
    for (std::int64_t i = 0; i < B; ++i) {
      std::int64_t k;
      if (tir) {
        if (static_cast<double>(c) >= lenp[i]) continue;
        k = i * T + cp[i * T + c];
      } else {
        k = i * T + c;
        if (!detail::on(m[k])) continue;
      }
      std::int64_t const q = g[i] * T + c;
      np[q] += static_cast<double>(ret[k]) * W[k];
      dp[q] += W[k];
    }
  });
  double const eps = opt.epsilon;
  bool const zero_tail = opt.handle_zero_tail;
  ex.for_each_2d(B, T, [=] RLFLOW_HD(std::int64_t i, std::int64_t, std::int64_t k) {
    if (!detail::on(m[k])) {
      adv[k] = 0.0f;
      return;
    }
    math::top2 const q = tp[g[i]];
    double b = 0.0;
    if (q.n > 1) {
      std::int64_t const c = pp[k];
      b = np[g[i] * T + c] / (dp[g[i] * T + c] + eps);
      if (zero_tail && q.i1 == i && q.v1 > q.v2 && static_cast<double>(c) >= q.v2) b = 0.0;
    }
    adv[k] = static_cast<float>(static_cast<double>(ret[k]) - static_cast<double>(static_cast<float>(b)));
  });
}

}  // namespace detail

//! Optimal Token Baseline: A = (G - B) m with the per-token, per-group baseline
//! B_t = sum_i G_it W_it m_it / (sum_i W_it m_it + eps); W = cumsum(w m), w = 1 - 2 e^old_log_prob +
//! sum_pi_squared (times rollout_is_weights^2 when given); returns = G (reverse cumsum of r m).
//! Groups of one: B = 0. handle_zero_tail: if one row of a group is strictly the longest, its
//! baseline from column 'second-longest length' on is 0.
//! verl: compute_optimal_token_baseline_advantage ("optimal_token_baseline")
//! token_level_rewards, response_mask, old_log_probs, sum_pi_squared, rollout_is_weights (optional),
//! advantages, returns: (B, T); index: (B) dense group ids
template <class Policy, class Mask>
void optimal_token_baseline_advantage(Policy const& policy, Dims d, std::span<float const> token_level_rewards,
                                      std::span<Mask const> response_mask, std::span<std::int64_t const> index,
                                      std::span<float const> old_log_probs, std::span<float const> sum_pi_squared,
                                      std::span<float const> rollout_is_weights, std::span<float> advantages,
                                      std::span<float> returns, OTBOptions opt = {}) {
  detail::check_policy<Policy>();
  detail::check_mask<Mask>();
  detail::otb_impl(detail::make_exec(policy), "optimal_token_baseline_advantage", d, false, token_level_rewards, response_mask,
                   index, old_log_probs, sum_pi_squared, rollout_is_weights, advantages, returns, opt);
}

//! The multi-turn OTB: as optimal_token_baseline_advantage after squeezing each row to its valid
//! tokens (tool/observation tokens inside a response drop out), so column c is a row's c-th valid
//! token; rows without a valid token are in no group and get A = 0.
//! verl: compute_multi_turn_optimal_token_baseline_advantage ("tir_optimal_token_baseline")
template <class Policy, class Mask>
void tir_optimal_token_baseline_advantage(Policy const& policy, Dims d, std::span<float const> token_level_rewards,
                                          std::span<Mask const> response_mask, std::span<std::int64_t const> index,
                                          std::span<float const> old_log_probs, std::span<float const> sum_pi_squared,
                                          std::span<float const> rollout_is_weights, std::span<float> advantages,
                                          std::span<float> returns, OTBOptions opt = {}) {
  detail::check_policy<Policy>();
  detail::check_mask<Mask>();
  detail::otb_impl(detail::make_exec(policy), "tir_optimal_token_baseline_advantage", d, true, token_level_rewards, response_mask,
                   index, old_log_probs, sum_pi_squared, rollout_is_weights, advantages, returns, opt);
}

}  // namespace rlflow::kernels
