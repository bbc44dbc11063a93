// rlflow/model/unicode_nfc.hpp: Unicode NFC normalization (UAX #15) of UTF-8 text that may hold
// invalid bytes, for the "NFC" normalizer of Hugging Face tokenizer.json files (Qwen2 / Qwen3).
// Hugging Face: tokenizers' normalizers::unicode::NFC. Data from unicode_nfc_tables.hpp; Hangul
// syllables compose and decompose algorithmically. A byte that is not part of valid UTF-8 is
// kept as it is and acts as a starter that nothing composes with. Text without a code point
// from the table's "may change" ranges (all text below U+0300 among them) is copied unchanged.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <rlflow/model/bpe_tokenizer.hpp>        // bpe_detail::decode_utf8, append_utf8
#include <rlflow/model/unicode_nfc_tables.hpp>  // combining_runs, decompositions, compositions, nfc_unstable

namespace rlflow::model {

namespace nfc_detail {

inline constexpr char32_t s_base = 0xAC00, l_base = 0x1100, v_base = 0x1161, t_base = 0x11A7;
inline constexpr char32_t l_count = 19, v_count = 21, t_count = 28, n_count = v_count * t_count, s_count = l_count * n_count;
//! An invalid byte b travels through the algorithm as invalid_base + b (above every code point).
inline constexpr char32_t invalid_base = 0x110000;

inline std::uint32_t ccc(char32_t c) {
  if (c < 0x300 || c >= invalid_base) return 0;
  auto const* r = std::upper_bound(std::begin(unicode::combining_runs), std::end(unicode::combining_runs), c,
                                   [](char32_t v, unicode::CombiningRun const& x) { return v < x.first; });
  if (r == std::begin(unicode::combining_runs)) return 0;
  --r;
  return c <= r->last ? r->ccc : 0;
}

inline bool may_change(char32_t c) {
  if (c < 0x300 || c >= invalid_base) return false;
  auto const* r = std::upper_bound(std::begin(unicode::nfc_unstable), std::end(unicode::nfc_unstable), c,
                                   [](char32_t v, unicode::NfcRange const& x) { return v < x.first; });
  return r != std::begin(unicode::nfc_unstable) && c <= (r - 1)->last;
}

inline void decompose(char32_t c, std::vector<char32_t>& out) {
  if (c >= s_base && c < s_base + s_count) {
    char32_t const s = c - s_base;
    out.push_back(l_base + s / n_count);
    out.push_back(v_base + (s % n_count) / t_count);
    if (s % t_count) out.push_back(t_base + s % t_count);
    return;
  }
  if (c >= 0xC0 && c < invalid_base) {
    auto const* d = std::lower_bound(std::begin(unicode::decompositions), std::end(unicode::decompositions), c,
                                     [](unicode::Decomposition const& x, char32_t v) { return x.cp < v; });
    if (d != std::end(unicode::decompositions) && d->cp == c) {
      decompose(d->first, out);
      if (d->second) decompose(d->second, out);
      return;
    }
  }
  out.push_back(c);
}

//! The primary composite of (a, b), or 0.
inline char32_t compose(char32_t a, char32_t b) {
  if (a >= l_base && a < l_base + l_count && b >= v_base && b < v_base + v_count)
    return s_base + ((a - l_base) * v_count + (b - v_base)) * t_count;
  if (a >= s_base && a < s_base + s_count && (a - s_base) % t_count == 0 && b > t_base && b < t_base + t_count)
    return a + (b - t_base);
  auto const* p = std::lower_bound(std::begin(unicode::compositions), std::end(unicode::compositions), std::pair{a, b},
                                   [](unicode::Composition const& x, std::pair<char32_t, char32_t> v) {
                                     return x.first < v.first || (x.first == v.first && x.second < v.second);
                                   });
  return p != std::end(unicode::compositions) && p->first == a && p->second == b ? p->composite : 0;
}

//! NFC of the code points in 'seg' (decompose, order marks by class, compose), in place.
inline void nfc_segment(std::vector<char32_t>& seg, std::vector<char32_t>& tmp) {
  tmp.clear();
  for (char32_t c : seg) decompose(c, tmp);
  // canonical ordering: stable sort of each run of non-starters by combining class
  for (std::size_t i = 0; i < tmp.size();) {
    if (ccc(tmp[i]) == 0) { ++i; continue; }
    std::size_t j = i;
    while (j < tmp.size() && ccc(tmp[j]) != 0) ++j;
    std::stable_sort(tmp.begin() + std::ptrdiff_t(i), tmp.begin() + std::ptrdiff_t(j),
                     [](char32_t x, char32_t y) { return ccc(x) < ccc(y); });
    i = j;
  }
  // canonical composition: a character joins the last starter unless blocked
  seg.clear();
  std::ptrdiff_t starter = -1;
  int last = -1;  // class of the last character kept after the starter; -1: none
  for (char32_t c : tmp) {
    int const cc = int(ccc(c));
    if (starter >= 0 && (last == -1 || (last != 0 && last < cc))) {
      if (char32_t const p = compose(seg[std::size_t(starter)], c)) {
        seg[std::size_t(starter)] = p;
        continue;
      }
    }
    if (cc == 0) {
      starter = std::ptrdiff_t(seg.size());
      last = -1;
    } else {
      last = cc;
    }
    seg.push_back(c);
  }
}

}  // namespace nfc_detail

//! Appends the NFC form of 'text' to 'out' (bytes that are not valid UTF-8 pass through).
inline void nfc_append(std::string_view text, std::string& out) {
  using namespace nfc_detail;
  // fast path: a code point >= U+0300 needs a lead byte >= 0xCC
  std::size_t first = 0;
  while (first < text.size() && static_cast<unsigned char>(text[first]) < 0xCC) ++first;
  if (first == text.size()) {
    out.append(text);
    return;
  }
  thread_local std::vector<char32_t> seg, tmp;
  std::size_t copied = 0;  // text[0, copied) is in out
  std::size_t i = 0;
  std::size_t prev = 0;    // start of the character before i
  bool prev_stable = false;
  while (i < text.size()) {
    auto const ch = bpe_detail::decode_utf8(text, i);
    char32_t const c = ch.ok ? ch.cp : invalid_base + static_cast<unsigned char>(text[i]);
    if (!may_change(c)) {
      prev = i;
      prev_stable = true;
      i += std::size_t(ch.len);
      continue;
    }
    // a segment: the stable character before (it may compose with what follows), then every
    // character up to the next one that cannot change
    std::size_t const start = prev_stable ? prev : i;
    out.append(text.substr(copied, start - copied));
    seg.clear();
    std::size_t k = start;
    while (k < text.size()) {
      auto const d = bpe_detail::decode_utf8(text, k);
      char32_t const e = d.ok ? d.cp : invalid_base + static_cast<unsigned char>(text[k]);
      if (k > i && !may_change(e)) break;
      seg.push_back(e);
      k += std::size_t(d.len);
    }
    nfc_segment(seg, tmp);
    for (char32_t e : seg) {
      if (e >= invalid_base) out.push_back(static_cast<char>(e - invalid_base));
      else bpe_detail::append_utf8(out, e);
    }
    copied = i = k;
    prev_stable = false;
  }
  out.append(text.substr(copied));
}

//! The NFC form of 'text'.
inline std::string nfc(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  nfc_append(text, out);
  return out;
}

}  // namespace rlflow::model
