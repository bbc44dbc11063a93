// rlflow/kernels/group_index.hpp: rows grouped by label (verl's uid -> group id), the grouping
// the GRPO/RLOO-family advantage estimators need: a hash table with linear probing
// (detail::hashed_group_ids) and the public group_index_first_seen / group_index
// (verl: the index dicts of core_algos' outcome estimators and verl.utils.as_torch_index).
// Letters: B rows, G distinct labels.
#pragma once
#include <algorithm>    // std::sort, std::min
#include <cstdint>
#include <cstring>      // std::memcpy, std::memcmp
#include <functional>   // std::hash
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>      // std::declval, std::move
#include <vector>

#include <rlflow/core/error.hpp>                  // shape_error, msg
#include <rlflow/kernels/detail/exec.hpp>    // host_scratch, expect_size

namespace rlflow::kernels {

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

}  // namespace rlflow::kernels
