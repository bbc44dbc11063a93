// rlflow/model/bpe_tokenizer.hpp: BPETokenizer, GPT-2's byte-level BPE from vocab.json +
// merges.txt (the files of a Hugging Face GPT-2 folder). Defines the byte <-> unicode map,
// GPT-2's pre-tokenization pattern written by hand (std::regex has no \p classes; the letter and
// number categories come from unicode_tables.hpp), merges by rank, special tokens
// (<|endoftext|> is EOS, BOS and pad unless the options say otherwise) and a decode that
// round-trips every byte string. verl: the Hugging Face tokenizer (AutoTokenizer) of model.path.
//
// The pattern (OpenAI's encoder.py):
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// \s is Unicode's White_Space property (as the Python 'regex' module GPT-2 used). Bytes that are
// not valid UTF-8 count as one "other" character each, so any byte string encodes and decodes.
// Special-token strings in the text become their ids (as Hugging Face's GPT-2 tokenizers do).
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>
#include <rlflow/detail/json_text.hpp>  // check_json_depth, json_preview
#include <rlflow/core/error.hpp>
#include <rlflow/model/tokenizer.hpp>       // Tokenizer
#include <rlflow/model/unicode_tables.hpp>  // letter_ranges, number_ranges

namespace rlflow::model {

namespace bpe_detail {

//! GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the other 68 bytes to
//! U+0100 + k in byte order, so every byte has a visible, non-space character.
inline std::array<char32_t, 256> const& bytes_to_unicode() {
  static std::array<char32_t, 256> const table = [] {
    std::array<char32_t, 256> t{};
    char32_t n = 0;
    for (int b = 0; b < 256; ++b) {
      bool const printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[std::size_t(b)] = printable ? char32_t(b) : char32_t(256 + n++);
    }
    return t;
  }();
  return table;
}

inline void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) out.push_back(char(c));
  else if (c < 0x800) {
    out.push_back(char(0xC0 | (c >> 6)));
    out.push_back(char(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(char(0xE0 | (c >> 12)));
    out.push_back(char(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(char(0x80 | (c & 0x3F)));
  } else {
    out.push_back(char(0xF0 | (c >> 18)));
    out.push_back(char(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(char(0x80 | (c & 0x3F)));
  }
}

//! Decodes one UTF-8 character at s[i]: its code point and length; an invalid sequence (bad lead
//! byte, missing continuation, overlong form, surrogate, > U+10FFFF) gives length 1 and ok = false.
struct utf8_char {
  char32_t cp;
  int len;
  bool ok;
};
inline utf8_char decode_utf8(std::string_view s, std::size_t i) {
  auto const u = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char const c = u(i);
  if (c < 0x80) return {c, 1, true};
  int len = 0;
  char32_t cp = 0, min = 0;
  if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F, min = 0x80;
  else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F, min = 0x800;
  else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07, min = 0x10000;
  else return {c, 1, false};
  if (i + std::size_t(len) > s.size()) return {c, 1, false};
  for (int k = 1; k < len; ++k) {
    unsigned char const d = u(i + std::size_t(k));
    if ((d & 0xC0) != 0x80) return {c, 1, false};
    cp = (cp << 6) | (d & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {c, 1, false};
  return {cp, len, true};
}

enum char_class : std::uint8_t { space = 0, letter = 1, number = 2, other = 3 };

template <std::size_t N>
bool in_ranges(unicode::CodeRange const (&r)[N], char32_t c) {
  std::size_t lo = 0, hi = N;
  while (lo < hi) {
    std::size_t const mid = (lo + hi) / 2;
    if (r[mid].last < c) lo = mid + 1;
    else hi = mid;
  }
  return lo < N && r[lo].first <= c;
}

//! Unicode White_Space.
inline bool is_white_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

inline char_class classify(char32_t c) {
  static std::array<std::uint8_t, 128> const ascii = [] {
    std::array<std::uint8_t, 128> t{};
    for (int i = 0; i < 128; ++i) {
      char32_t const c = char32_t(i);
      t[std::size_t(i)] = is_white_space(c) ? space : ((c | 32) >= 'a' && (c | 32) <= 'z') ? letter : (c >= '0' && c <= '9') ? number : other;
    }
    return t;
  }();
  if (c < 128) return char_class(ascii[c]);
  if (is_white_space(c)) return space;
  if (in_ranges(unicode::letter_ranges, c)) return letter;
  if (in_ranges(unicode::number_ranges, c)) return number;
  return other;
}

}  // namespace bpe_detail

//! GPT-2's pre-tokenization of 'text' (no special tokens): calls emit(std::string_view piece)
//! for each piece, in order; the pieces concatenate to 'text'.
template <class Emit>
void gpt2_pretokenize(std::string_view text, Emit&& emit) {
  using namespace bpe_detail;
  // one entry per character: class and byte offset (plus a sentinel at the end)
  thread_local std::vector<std::uint8_t> cls;
  thread_local std::vector<std::uint32_t> off;
  cls.clear();
  off.clear();
  for (std::size_t i = 0; i < text.size();) {
    auto const ch = decode_utf8(text, i);
    cls.push_back(ch.ok ? classify(ch.cp) : other);
    off.push_back(std::uint32_t(i));
    i += std::size_t(ch.len);
  }
  std::size_t const n = cls.size();
  off.push_back(std::uint32_t(text.size()));
  auto piece = [&](std::size_t a, std::size_t b) { emit(text.substr(off[a], off[b] - off[a])); };
  auto byte_at = [&](std::size_t k) { return text[off[k]]; };  // first byte of character k
  auto run = [&](std::size_t k, std::uint8_t c) {
    while (k < n && cls[k] == c) ++k;
    return k;
  };
  std::size_t i = 0;
  while (i < n) {
    // 's|'t|'re|'ve|'m|'ll|'d
    if (byte_at(i) == '\'' && i + 1 < n) {
      char const a = byte_at(i + 1);
      std::size_t len = 0;
      if (a == 's' || a == 't' || a == 'm' || a == 'd') len = 2;
      else if (i + 2 < n && ((a == 'r' && byte_at(i + 2) == 'e') || (a == 'v' && byte_at(i + 2) == 'e') ||
                             (a == 'l' && byte_at(i + 2) == 'l')))
        len = 3;
      if (len) {
        piece(i, i + len);
        i += len;
        continue;
      }
    }
    std::uint8_t const c = cls[i];
    // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+'
    bool const sp = byte_at(i) == ' ' && i + 1 < n && cls[i + 1] != space;
    if (c != space || sp) {
      std::size_t const s = sp ? i + 1 : i;
      std::size_t const e = run(s, cls[s]);
      piece(i, e);
      i = e;
      continue;
    }
    // '\s+(?!\S)' then '\s+'
    std::size_t const e = run(i, space);
    if (e == n || e - i == 1) {
      piece(i, e);
      i = e;
    } else {
      piece(i, e - 1);  // leave the last white space to prefix the next word
      i = e - 1;
    }
  }
}

//! Options of a BPETokenizer. Empty bos / pad tokens: the EOS token.
struct BPEOptions {
  std::vector<std::string> special_tokens = {"<|endoftext|>"};  //!< matched in text, skipped by decode
  std::string eos_token = "<|endoftext|>";
  std::string bos_token;
  std::string pad_token;
};

//! GPT-2's byte-level BPE. Thread-safe for concurrent encode / decode (const, no caches).
class BPETokenizer final : public Tokenizer {
 public:
  //! vocab: token text (in the byte-to-unicode alphabet) -> id; merges: pairs in rank order.
  BPETokenizer(std::vector<std::pair<std::string, std::int32_t>> const& vocab,
               std::vector<std::pair<std::string, std::string>> const& merges, BPEOptions opt = {})
      : opt_(std::move(opt)) {
    using namespace bpe_detail;
    std::array<int, 0x200> byte_of{};  // bytes_to_unicode's inverse (all its values are < 0x200)
    byte_of.fill(-1);
    for (int b = 0; b < 256; ++b) byte_of[bytes_to_unicode()[std::size_t(b)]] = b;
    std::int32_t max_id = -1;
    for (auto const& [tok, id] : vocab) {
      if (id < 0) throw config_error(msg("rlflow::model::BPETokenizer: token '", tok, "' has the negative id ", id));
      // ids index a table of max_id + 1 entries: bound it before allocating (and before max_id + 1 overflows)
      if (id > max_token_id)
        throw config_error(msg("rlflow::model::BPETokenizer: token '", tok, "' has the id ", id, ", above the largest accepted id ",
                               max_token_id, " (2^24 - 1; real vocabularies hold up to a few hundred thousand tokens)"));
      max_id = std::max(max_id, id);
    }
    bytes_.assign(std::size_t(max_id + 1), std::string());
    std::vector<bool> seen(std::size_t(max_id + 1), false);
    ids_.reserve(vocab.size());
    for (auto const& [tok, id] : vocab) {
      if (seen[std::size_t(id)]) throw config_error(msg("rlflow::model::BPETokenizer: id ", id, " is given to two tokens (one is '", tok, "')"));
      seen[std::size_t(id)] = true;
      ids_.emplace(tok, id);
      // the token's bytes: map each character back through byte_of; a token with other
      // characters (an added token) stands for its own UTF-8 text
      std::string b;
      bool mapped = true;
      for (std::size_t i = 0; i < tok.size();) {
        auto const ch = decode_utf8(tok, i);
        if (!ch.ok || ch.cp >= 0x200 || byte_of[ch.cp] < 0) { mapped = false; break; }
        b.push_back(char(byte_of[ch.cp]));
        i += std::size_t(ch.len);
      }
      bytes_[std::size_t(id)] = mapped ? b : tok;
    }
    for (int b = 0; b < 256; ++b) {
      std::string u;
      append_utf8(u, bytes_to_unicode()[std::size_t(b)]);
      auto it = ids_.find(u);
      if (it == ids_.end())
        throw config_error(msg("rlflow::model::BPETokenizer: the vocabulary lacks the token of byte ", b, " ('", u,
                               "'); a byte-level BPE vocabulary holds all 256 byte tokens"));
      byte_id_[std::size_t(b)] = it->second;
    }
    merges_.reserve(merges.size() * 2);
    for (std::size_t r = 0; r < merges.size(); ++r) {
      auto const& [a, b] = merges[r];
      auto ia = ids_.find(a), ib = ids_.find(b), im = ids_.find(a + b);
      if (ia == ids_.end() || ib == ids_.end() || im == ids_.end())
        throw config_error(msg("rlflow::model::BPETokenizer: merge ", r + 1, " '", a, " ", b, "' uses a token missing from ",
                               "the vocabulary ('", ia == ids_.end() ? a : ib == ids_.end() ? b : a + b,
                               "'); vocab.json and merges.txt do not belong together"));
      merges_.emplace(key(ia->second, ib->second), Merge{std::int32_t(r), im->second});
    }
    special_.assign(bytes_.size(), false);
    for (auto const& s : opt_.special_tokens) {
      auto it = ids_.find(s);
      if (it == ids_.end())
        throw config_error(msg("rlflow::model::BPETokenizer: special token '", s, "' is not in the vocabulary"));
      special_[std::size_t(it->second)] = true;
      specials_.push_back({s, it->second});
    }
    auto need = [&](std::string const& what, std::string const& t) {
      auto it = ids_.find(t);
      if (it == ids_.end())
        throw config_error(msg("rlflow::model::BPETokenizer: ", what, " '", t, "' is not in the vocabulary; set it to one of its tokens"));
      return it->second;
    };
    eos_ = need("eos_token", opt_.eos_token);
    bos_ = opt_.bos_token.empty() ? eos_ : need("bos_token", opt_.bos_token);
    pad_ = opt_.pad_token.empty() ? eos_ : need("pad_token", opt_.pad_token);
  }

  //! The largest token id accepted (ids index a table; a hostile 2^31 - 1 would allocate 64 GiB).
  static constexpr std::int32_t max_token_id = (1 << 24) - 1;

  //! From GPT-2's files: vocab.json ({"token": id}) and merges.txt ("#version" line, then "a b").
  static BPETokenizer from_files(std::filesystem::path const& vocab_json, std::filesystem::path const& merges_txt,
                                 BPEOptions opt = {}) {
    for (auto const& f : {vocab_json, merges_txt}) {
      std::error_code ec;
      if (!std::filesystem::is_regular_file(f, ec))
        throw io_error(msg("rlflow::model::BPETokenizer: ", f.string(), " is missing or not a regular file; a GPT-2 tokenizer folder "
                           "holds the files vocab.json and merges.txt"));
    }
    std::ifstream vin(vocab_json, std::ios::binary);
    if (!vin) throw io_error(msg("rlflow::model::BPETokenizer: cannot open ", vocab_json.string()));
    std::string const text{std::istreambuf_iterator<char>(vin), std::istreambuf_iterator<char>()};
    // a {token: id} object nests one level; refuse deep text before parsing (its dump would recurse)
    rlflow::detail::check_json_depth(text, 8, "rlflow::model::BPETokenizer", vocab_json.string());
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (nlohmann::json::exception const& e) {
      throw format_error(msg("rlflow::model::BPETokenizer: ", vocab_json.string(), " is not valid JSON (", e.what(), ")"));
    }
    if (!j.is_object()) throw format_error(msg("rlflow::model::BPETokenizer: ", vocab_json.string(), " is not a {token: id} object"));
    std::vector<std::pair<std::string, std::int32_t>> vocab;
    vocab.reserve(j.size());
    for (auto it = j.begin(); it != j.end(); ++it) {
      auto const& v = it.value();
      // an integer in [0, max_token_id]: never narrowed (get<int32_t> would turn 2^32 + 5 into 5)
      bool const in_range = v.is_number_unsigned() ? v.get<std::uint64_t>() <= std::uint64_t(max_token_id)
                                                   : v.is_number_integer() && v.get<std::int64_t>() >= 0 &&
                                                         v.get<std::int64_t>() <= max_token_id;
      if (!v.is_number_integer())
        throw format_error(msg("rlflow::model::BPETokenizer: ", vocab_json.string(), ": token '", it.key(), "' has a non-integer id ",
                               rlflow::detail::json_preview(v)));
      if (!in_range)
        throw format_error(msg("rlflow::model::BPETokenizer: ", vocab_json.string(), ": token '", it.key(), "' has the id ",
                               rlflow::detail::json_preview(v), ", outside [0, ", max_token_id, "]"));
      vocab.emplace_back(it.key(), static_cast<std::int32_t>(v.get<std::int64_t>()));
    }
    std::ifstream min(merges_txt, std::ios::binary);
    if (!min) throw io_error(msg("rlflow::model::BPETokenizer: cannot open ", merges_txt.string()));
    std::vector<std::pair<std::string, std::string>> merges;
    std::string line;
    std::size_t lineno = 0;
    while (std::getline(min, line)) {
      ++lineno;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty() || (lineno == 1 && line.starts_with("#version"))) continue;
      auto const sp = line.find(' ');
      if (sp == std::string::npos || sp == 0 || sp + 1 == line.size() || line.find(' ', sp + 1) != std::string::npos)
        throw format_error(msg("rlflow::model::BPETokenizer: ", merges_txt.string(), " line ", lineno, " '", line,
                               "' is not two tokens separated by one space"));
      merges.emplace_back(line.substr(0, sp), line.substr(sp + 1));
    }
    if (min.bad()) throw io_error(msg("rlflow::model::BPETokenizer: reading ", merges_txt.string(), " failed"));
    return BPETokenizer(vocab, merges, std::move(opt));
  }

  //! vocab.json + merges.txt of a folder (a Hugging Face model folder).
  static BPETokenizer from_folder(std::filesystem::path const& dir, BPEOptions opt = {}) {
    if (!std::filesystem::exists(dir / "vocab.json") || !std::filesystem::exists(dir / "merges.txt"))
      throw io_error(msg("rlflow::model::BPETokenizer: ", dir.string(), " lacks vocab.json or merges.txt (GPT-2's tokenizer files); ",
                         "set actor_rollout_ref.model.tokenizer_path to the folder holding them"));
    return from_files(dir / "vocab.json", dir / "merges.txt", std::move(opt));
  }

  std::vector<std::int32_t> encode(std::string_view text) const override {
    std::vector<std::int32_t> out;
    out.reserve(text.size() / 3 + 4);
    encode_into(text, out);
    return out;
  }

  //! Appends the ids of 'text' to 'out' (no allocation beyond out's growth and the per-thread scratch).
  void encode_into(std::string_view text, std::vector<std::int32_t>& out) const {
    while (!text.empty()) {
      // the earliest special token, if any
      std::size_t best = std::string_view::npos, best_len = 0;
      std::int32_t best_id = -1;
      for (auto const& [s, id] : specials_) {
        auto const p = text.find(s);
        if (p < best || (p == best && s.size() > best_len)) best = p, best_len = s.size(), best_id = id;
      }
      std::string_view const plain = text.substr(0, best);
      gpt2_pretokenize(plain, [&](std::string_view piece) { bpe(piece, out); });
      if (best == std::string_view::npos) break;
      out.push_back(best_id);
      text.remove_prefix(best + best_len);
    }
  }

  std::string decode(std::span<std::int32_t const> ids, bool skip_special = true) const override {
    std::string out;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      std::int32_t const id = ids[i];
      if (id < 0 || std::size_t(id) >= bytes_.size())
        throw value_error(msg("rlflow::model::BPETokenizer::decode: id ", id, " at position ", i, " is outside the vocabulary [0, ",
                              bytes_.size(), ")"));
      if (skip_special && special_[std::size_t(id)]) continue;
      out += bytes_[std::size_t(id)];
    }
    return out;
  }
  std::string decode(std::vector<std::int32_t> const& ids, bool skip_special = true) const {
    return decode(std::span<std::int32_t const>(ids), skip_special);
  }
  int vocab_size() const override { return static_cast<int>(bytes_.size()); }
  std::int32_t pad_id() const override { return pad_; }
  std::int32_t bos_id() const override { return bos_; }
  std::int32_t eos_id() const override { return eos_; }
  //! The id of a token (its text in the byte-to-unicode alphabet), or -1.
  std::int32_t token_id(std::string const& token) const {
    auto it = ids_.find(token);
    return it == ids_.end() ? -1 : it->second;
  }
  //! The bytes a token stands for.
  std::string const& token_bytes(std::int32_t id) const { return bytes_.at(std::size_t(id)); }
  std::size_t merge_count() const { return merges_.size(); }

 private:
  struct Merge {
    std::int32_t rank, id;
  };
  static std::uint64_t key(std::int32_t a, std::int32_t b) { return (std::uint64_t(std::uint32_t(a)) << 32) | std::uint32_t(b); }

  //! BPE of one piece (GPT-2's bpe(): repeatedly take the lowest-ranked adjacent pair and merge
  //! every non-overlapping occurrence of it, left to right).
  void bpe(std::string_view piece, std::vector<std::int32_t>& out) const {
    thread_local std::vector<std::int32_t> sym;
    sym.clear();
    for (char c : piece) sym.push_back(byte_id_[static_cast<unsigned char>(c)]);
    while (sym.size() > 1) {
      std::int32_t best_rank = std::numeric_limits<std::int32_t>::max(), a = -1, b = -1, merged = -1;
      for (std::size_t i = 0; i + 1 < sym.size(); ++i) {
        auto it = merges_.find(key(sym[i], sym[i + 1]));
        if (it != merges_.end() && it->second.rank < best_rank) {
          best_rank = it->second.rank;
          a = sym[i];
          b = sym[i + 1];
          merged = it->second.id;
        }
      }
      if (merged < 0) break;
      std::size_t w = 0;
      for (std::size_t i = 0; i < sym.size();) {
        if (i + 1 < sym.size() && sym[i] == a && sym[i + 1] == b) {
          sym[w++] = merged;
          i += 2;
        } else {
          sym[w++] = sym[i++];
        }
      }
      sym.resize(w);
    }
    out.insert(out.end(), sym.begin(), sym.end());
  }

  BPEOptions opt_;
  std::unordered_map<std::string, std::int32_t> ids_;
  std::vector<std::string> bytes_;
  std::vector<bool> special_;
  std::vector<std::pair<std::string, std::int32_t>> specials_;
  std::unordered_map<std::uint64_t, Merge> merges_;
  std::array<std::int32_t, 256> byte_id_{};
  std::int32_t eos_ = 0, bos_ = 0, pad_ = 0;
};

}  // namespace rlflow::model
