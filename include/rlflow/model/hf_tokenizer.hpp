// rlflow/model/hf_tokenizer.hpp: HFTokenizer, a byte-level BPE tokenizer read from a Hugging Face
// tokenizer.json (+ tokenizer_config.json), as Qwen2/Qwen3, Llama-3 and GPT-2 ship; and
// load_tokenizer(folder), which picks tokenizer.json or GPT-2's vocab.json + merges.txt.
// Hugging Face: tokenizers' Tokenizer::from_file (models::bpe::BPE, pre_tokenizers Sequence /
// Split / ByteLevel, normalizers NFC, AddedVocabulary, processors ByteLevel / TemplateProcessing,
// decoders ByteLevel) and transformers' PreTrainedTokenizerFast (the special tokens, chat_template
// and model_max_length of tokenizer_config.json). verl: the tokenizer of hf_tokenizer(model.path).
//
// The file's Split regexes run on PCRE2 (UTF + UCP, invalid UTF-8 never matches, JIT when
// available), so each family's pattern comes from its file. Bytes that are not valid UTF-8 fall
// between the regex's matches and become pieces of their own; decode returns the raw bytes (no
// U+FFFD replacement), so decode(encode(s)) == s for every byte string when the normalizer is
// null, and == nfc(s) under NFC. Anything the file asks for that is not implemented here is
// refused with an error naming the field, never ignored.
#pragma once
#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <queue>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>
#include <rlflow/core/error.hpp>
#include <rlflow/detail/json_text.hpp>     // check_json_depth, json_preview
#include <rlflow/model/bpe_tokenizer.hpp>  // bpe_detail (byte map, UTF-8), BPETokenizer
#include <rlflow/model/tokenizer.hpp>      // Tokenizer
#include <rlflow/model/unicode_nfc.hpp>    // nfc_append

namespace rlflow::model {

namespace hf_detail {

inline constexpr char const* who = "rlflow::model::HFTokenizer";

//! A compiled PCRE2 pattern (8-bit, UTF + UCP + MATCH_INVALID_UTF, JIT when available). Copies
//! share the code; matching is thread-safe (each thread has its own match data).
class Regex {
 public:
  Regex() = default;
  Regex(std::string const& pattern, std::string const& where) {
    int err = 0;
    PCRE2_SIZE erroff = 0;
    pcre2_code* c = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                  PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &erroff, nullptr);
    if (!c) {
      std::array<PCRE2_UCHAR, 256> buf{};
      pcre2_get_error_message(err, buf.data(), buf.size());
      throw format_error(msg(who, ": ", where, ": the regex '", pattern, "' does not compile under PCRE2 (",
                             reinterpret_cast<char const*>(buf.data()), " at offset ", erroff, "); rlflow reads Oniguruma-compatible ",
                             "patterns that PCRE2 also accepts"));
    }
    code_.reset(c, pcre2_code_free);
    jit_ = pcre2_jit_compile(c, PCRE2_JIT_COMPLETE) == 0;
  }
  bool jit() const { return jit_; }

  //! Calls f(begin, end) for each non-empty match in text, left to right.
  template <class F>
  void for_each_match(std::string_view text, F&& f) const {
    struct Free {
      void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
    };
    thread_local std::unique_ptr<pcre2_match_data, Free> md(pcre2_match_data_create(16, nullptr));
    auto const* s = reinterpret_cast<PCRE2_SPTR>(text.data());
    PCRE2_SIZE off = 0;
    while (off < text.size()) {
      int const rc = pcre2_match(code_.get(), s, text.size(), off, 0, md.get(), nullptr);
      if (rc == PCRE2_ERROR_NOMATCH) return;
      if (rc < 0) {
        std::array<PCRE2_UCHAR, 256> buf{};
        pcre2_get_error_message(rc, buf.data(), buf.size());
        throw value_error(msg(who, ": the pre-tokenizer regex failed on a text of ", text.size(), " bytes (",
                              reinterpret_cast<char const*>(buf.data()), ")"));
      }
      PCRE2_SIZE const* ov = pcre2_get_ovector_pointer(md.get());
      if (ov[1] > ov[0]) {
        f(std::size_t(ov[0]), std::size_t(ov[1]));
        off = ov[1];
      } else {
        off = ov[1] + 1;  // an empty match: step on (a continuation byte never starts a match)
      }
    }
  }

 private:
  std::shared_ptr<pcre2_code> code_;
  bool jit_ = false;
};

//! GPT-2's pattern, which ByteLevel uses when its use_regex is true.
inline constexpr char const* gpt2_pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

enum class Behavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

//! One pre-tokenizer of the Sequence: Split (regex or literal) or ByteLevel.
struct PreStep {
  bool byte_level = false;
  Regex regex;          // Split with a Regex pattern, or ByteLevel with use_regex
  bool regex_set = false;
  std::string literal;  // Split with a String pattern (when regex is not used)
  bool use_literal = false;
  Behavior behavior = Behavior::isolated;
  bool invert = false;
  bool add_prefix_space = false;  // ByteLevel
};

struct Span {
  std::size_t begin, end;
};

//! Splits [a, b) of text by the step's pattern and behaviour (tokenizers' NormalizedString::split).
inline void split_piece(PreStep const& st, std::string_view text, Span piece, std::vector<Span>& out) {
  thread_local std::vector<std::pair<Span, bool>> parts;
  parts.clear();
  std::size_t last = piece.begin;
  auto on_match = [&](std::size_t s, std::size_t e) {
    if (s > last) parts.push_back({{last, s}, false});
    parts.push_back({{s, e}, true});
    last = e;
  };
  std::string_view const sub = text.substr(piece.begin, piece.end - piece.begin);
  if (st.use_literal) {
    if (!st.literal.empty())
      for (std::size_t p = sub.find(st.literal); p != std::string_view::npos; p = sub.find(st.literal, p + st.literal.size()))
        on_match(piece.begin + p, piece.begin + p + st.literal.size());
  } else {
    st.regex.for_each_match(sub, [&](std::size_t s, std::size_t e) { on_match(piece.begin + s, piece.begin + e); });
  }
  if (piece.end > last) parts.push_back({{last, piece.end}, false});
  if (st.invert)
    for (auto& p : parts) p.second = !p.second;
  switch (st.behavior) {
    case Behavior::removed:
      for (auto const& [sp, m] : parts)
        if (!m) out.push_back(sp);
      break;
    case Behavior::isolated:
      for (auto const& [sp, m] : parts) out.push_back(sp);
      break;
    case Behavior::merged_with_previous: {
      bool prev = false;
      std::size_t const first = out.size();
      for (auto const& [sp, m] : parts) {
        if (m && !prev && out.size() > first) out.back().end = sp.end;
        else out.push_back(sp);
        prev = m;
      }
      break;
    }
    case Behavior::merged_with_next: {
      bool prev = false;
      std::size_t const first = out.size();
      for (std::size_t k = parts.size(); k-- > 0;) {
        auto const& [sp, m] = parts[k];
        if (m && !prev && out.size() > first) out.back().begin = sp.begin;
        else out.push_back(sp);
        prev = m;
      }
      std::reverse(out.begin() + std::ptrdiff_t(first), out.end());
      break;
    }
    case Behavior::contiguous: {
      bool prev = false;
      std::size_t const first = out.size();
      for (auto const& [sp, m] : parts) {
        if (m == prev && out.size() > first) out.back().end = sp.end;
        else out.push_back(sp);
        prev = m;
      }
      break;
    }
  }
}

//! Added tokens, matched leftmost-longest in the text (tokenizers' AddedVocabulary, an
//! Aho-Corasick leftmost-longest search); candidates bucketed by first byte, longest first.
class AddedMatcher {
 public:
  void add(std::string content, std::int32_t id) { tokens_.push_back({std::move(content), id}); }
  void finish() {
    for (auto& b : first_) b.clear();
    std::vector<std::size_t> order(tokens_.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return tokens_[a].first.size() > tokens_[b].first.size(); });
    for (std::size_t i : order)
      if (!tokens_[i].first.empty()) first_[static_cast<unsigned char>(tokens_[i].first[0])].push_back(std::uint32_t(i));
  }
  bool empty() const { return tokens_.empty(); }
  //! Calls gap(string_view) for the text between matches and hit(id) for each match, in order.
  template <class Gap, class Hit>
  void split(std::string_view text, Gap&& gap, Hit&& hit) const {
    std::size_t last = 0;
    for (std::size_t p = 0; p < text.size();) {
      auto const& cand = first_[static_cast<unsigned char>(text[p])];
      std::int32_t found = -1;
      std::size_t len = 0;
      for (std::uint32_t i : cand) {
        auto const& t = tokens_[i].first;
        if (text.compare(p, t.size(), t) == 0) {
          found = tokens_[i].second;
          len = t.size();
          break;
        }
      }
      if (found < 0) {
        ++p;
        continue;
      }
      if (p > last) gap(text.substr(last, p - last));
      hit(found);
      p += len;
      last = p;
    }
    if (text.size() > last) gap(text.substr(last));
  }

 private:
  std::vector<std::pair<std::string, std::int32_t>> tokens_;
  std::array<std::vector<std::uint32_t>, 256> first_;
};

inline std::string read_file(std::filesystem::path const& f) {
  std::ifstream in(f, std::ios::binary);
  if (!in) throw io_error(msg(who, ": cannot open ", f.string()));
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) throw io_error(msg(who, ": reading ", f.string(), " failed"));
  return text;
}

inline nlohmann::json parse(std::string_view text, std::string const& where) {
  // tokenizer.json nests a few levels (pre_tokenizer Sequence inside post_processor Sequence...)
  rlflow::detail::check_json_depth(text, 16, who, where);
  try {
    return nlohmann::json::parse(text);
  } catch (nlohmann::json::exception const& e) {
    throw format_error(msg(who, ": ", where, " is not valid JSON (", e.what(), ")"));
  }
}

}  // namespace hf_detail

//! What tokenizer_config.json says (transformers' PreTrainedTokenizerFast settings).
struct HFTokenizerConfig {
  std::string eos_token, pad_token, bos_token;  //!< empty: not set
  std::optional<bool> add_bos_token, add_eos_token;
  std::string chat_template;  //!< the Jinja template text, as written (empty: none)
  std::int64_t model_max_length = std::numeric_limits<std::int64_t>::max();  //!< clamped to int64
};

//! A byte-level BPE tokenizer from tokenizer.json. encode() gives the ids without the
//! post-processor's special tokens (transformers' add_special_tokens=False, as verl tokenizes
//! chat-templated prompts); encode_with_special() adds them (Llama-3's <|begin_of_text|>).
//! Thread-safe for concurrent const use (per-thread scratch buffers and piece cache).
class HFTokenizer final : public Tokenizer {
 public:
  //! The largest token id accepted (ids index tables).
  static constexpr std::int32_t max_token_id = BPETokenizer::max_token_id;

  //! From the texts of tokenizer.json and tokenizer_config.json ('config_json' empty: no config
  //! file). 'where' names the files in errors.
  static HFTokenizer from_json(std::string_view tokenizer_json, std::string_view config_json = {},
                               std::string const& where = "tokenizer.json", std::string const& config_where = "tokenizer_config.json") {
    HFTokenizer t;
    t.load_config(config_json, config_where);
    t.load(hf_detail::parse(tokenizer_json, where), where);
    return t;
  }
  //! tokenizer.json and, when it exists, tokenizer_config.json beside it.
  static HFTokenizer from_folder(std::filesystem::path const& dir) {
    auto const tj = dir / "tokenizer.json", tc = dir / "tokenizer_config.json";
    std::error_code ec;
    if (!std::filesystem::is_regular_file(tj, ec))
      throw io_error(msg(hf_detail::who, ": ", dir.string(), " lacks tokenizer.json; set actor_rollout_ref.model.tokenizer_path to ",
                         "the folder holding it"));
    std::string const cfg = std::filesystem::is_regular_file(tc, ec) ? hf_detail::read_file(tc) : std::string();
    return from_json(hf_detail::read_file(tj), cfg, tj.string(), tc.string());
  }

  std::vector<std::int32_t> encode(std::string_view text) const override {
    std::vector<std::int32_t> out;
    out.reserve(text.size() / 3 + 4);
    encode_into(text, out);
    return out;
  }
  //! The ids with the post-processor's special tokens (tokenizers' encode(add_special_tokens=true)).
  std::vector<std::int32_t> encode_with_special(std::string_view text) const {
    std::vector<std::int32_t> out(prefix_);
    encode_into(text, out);
    out.insert(out.end(), suffix_.begin(), suffix_.end());
    return out;
  }

  //! Appends the ids of 'text' to 'out': added tokens, normalizer, pre-tokenizer, BPE.
  void encode_into(std::string_view text, std::vector<std::int32_t>& out) const {
    thread_local std::string norm;
    auto normalized_part = [&](std::string_view seg) {
      std::string_view s = seg;
      if (nfc_) {
        norm.clear();
        nfc_append(seg, norm);
        s = norm;
      }
      if (normalized_added_.empty()) pretokenize_and_bpe(s, out);
      else normalized_added_.split(s, [&](std::string_view g) { pretokenize_and_bpe(g, out); }, [&](std::int32_t id) { out.push_back(id); });
    };
    if (raw_added_.empty()) normalized_part(text);
    else raw_added_.split(text, normalized_part, [&](std::int32_t id) { out.push_back(id); });
  }

  //! The bytes of the tokens (added tokens as their text); special tokens skipped when
  //! skip_special. No U+FFFD replacement and no clean-up of spaces, so text round-trips.
  std::string decode(std::span<std::int32_t const> ids, bool skip_special = true) const override {
    std::string out;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      std::int32_t const id = ids[i];
      if (id < 0 || std::size_t(id) >= bytes_.size() || !known_[std::size_t(id)])
        throw value_error(msg(hf_detail::who, "::decode: id ", id, " at position ", i, " is not a token of this vocabulary (",
                              "ids in [0, ", bytes_.size(), ")", id >= 0 && std::size_t(id) < bytes_.size() ? ", this one unassigned" : "",
                              ")"));
      if (skip_special && special_[std::size_t(id)]) continue;
      out += bytes_[std::size_t(id)];
    }
    return out;
  }
  std::string decode(std::vector<std::int32_t> const& ids, bool skip_special = true) const {
    return decode(std::span<std::int32_t const>(ids), skip_special);
  }

  //! One more than the largest id (model vocabulary and added tokens).
  int vocab_size() const override { return static_cast<int>(bytes_.size()); }
  //! pad_token of the config; without one the EOS id (verl sets pad = eos then).
  std::int32_t pad_id() const override { return pad_; }
  //! bos_token of the config, or -1 when the tokenizer has none (Qwen).
  std::int32_t bos_id() const override { return bos_; }
  std::int32_t eos_id() const override { return eos_; }

  //! The id of a token (model tokens in the byte-to-unicode alphabet, added tokens as written), or -1.
  std::int32_t token_id(std::string const& token) const {
    auto it = ids_.find(token);
    return it == ids_.end() ? -1 : it->second;
  }
  //! The bytes a token stands for.
  std::string const& token_bytes(std::int32_t id) const { return bytes_.at(std::size_t(id)); }
  bool is_special(std::int32_t id) const { return id >= 0 && std::size_t(id) < special_.size() && special_[std::size_t(id)]; }
  HFTokenizerConfig const& config() const { return cfg_; }
  //! tokenizer_config.json's chat_template (empty: none).
  std::string const& chat_template() const { return cfg_.chat_template; }
  std::int64_t model_max_length() const { return cfg_.model_max_length; }
  //! The ids the post-processor puts before / after the text (Llama-3: <|begin_of_text|>).
  std::vector<std::int32_t> const& special_prefix() const { return prefix_; }
  std::vector<std::int32_t> const& special_suffix() const { return suffix_; }
  bool normalizes_nfc() const { return nfc_; }
  bool ignore_merges() const { return ignore_merges_; }
  //! Whether every regex of the pre-tokenizer runs on PCRE2's JIT compiler.
  bool regex_jit() const {
    for (auto const& st : steps_)
      if (st.regex_set && !st.regex.jit()) return false;
    return true;
  }

 private:
  struct Merge {
    std::int32_t rank, id;
  };
  static std::uint64_t key(std::int32_t a, std::int32_t b) { return (std::uint64_t(std::uint32_t(a)) << 32) | std::uint32_t(b); }

  HFTokenizer() : serial_(next_serial()) {}
  static std::uint64_t next_serial() {
    static std::atomic<std::uint64_t> n{0};
    return ++n;
  }

  [[noreturn]] static void bad(std::string const& where, std::string const& field, std::string const& what) {
    throw format_error(msg(hf_detail::who, ": ", where, ": ", field, " ", what));
  }
  static std::string type_of(nlohmann::json const& j, std::string const& where, std::string const& field) {
    if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
      bad(where, field, msg("is ", rlflow::detail::json_preview(j), "; expected an object with a string 'type'"));
    return j["type"].get<std::string>();
  }
  static bool flag(nlohmann::json const& j, char const* k, bool def, std::string const& where, std::string const& field) {
    if (!j.contains(k) || j[k].is_null()) return def;
    if (!j[k].is_boolean()) bad(where, field + "." + k, msg("is ", rlflow::detail::json_preview(j[k]), "; expected true or false"));
    return j[k].get<bool>();
  }

  void load_config(std::string_view text, std::string const& where) {
    if (text.empty()) return;
    auto const j = hf_detail::parse(text, where);
    if (!j.is_object()) bad(where, "the file", "is not a JSON object");
    auto token = [&](char const* k) -> std::string {
      if (!j.contains(k) || j[k].is_null()) return {};
      auto const& v = j[k];
      if (v.is_string()) return v.get<std::string>();
      if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
      bad(where, k, msg("is ", rlflow::detail::json_preview(v), "; expected a string or an AddedToken object with a string 'content'"));
    };
    cfg_.eos_token = token("eos_token");
    cfg_.pad_token = token("pad_token");
    cfg_.bos_token = token("bos_token");
    for (auto [k, dst] : {std::pair{"add_bos_token", &cfg_.add_bos_token}, std::pair{"add_eos_token", &cfg_.add_eos_token}})
      if (j.contains(k) && !j[k].is_null()) {
        if (!j[k].is_boolean()) bad(where, k, msg("is ", rlflow::detail::json_preview(j[k]), "; expected true or false"));
        *dst = j[k].get<bool>();
      }
    if (j.contains("chat_template") && !j["chat_template"].is_null()) {
      auto const& c = j["chat_template"];
      if (c.is_string()) {
        cfg_.chat_template = c.get<std::string>();
      } else if (c.is_array()) {  // [{"name": ..., "template": ...}]: the one named "default"
        for (auto const& e : c)
          if (e.is_object() && e.value("name", nlohmann::json()) == "default" && e.contains("template") && e["template"].is_string())
            cfg_.chat_template = e["template"].get<std::string>();
        if (cfg_.chat_template.empty()) bad(where, "chat_template", "is a list without a {\"name\": \"default\", \"template\": string} entry");
      } else {
        bad(where, "chat_template", msg("is ", rlflow::detail::json_preview(c), "; expected a string"));
      }
    }
    if (j.contains("model_max_length") && !j["model_max_length"].is_null()) {
      auto const& v = j["model_max_length"];
      if (v.is_number_unsigned()) cfg_.model_max_length = std::int64_t(std::min<std::uint64_t>(v.get<std::uint64_t>(), std::uint64_t(cfg_.model_max_length)));
      else if (v.is_number_integer() && v.get<std::int64_t>() > 0) cfg_.model_max_length = v.get<std::int64_t>();
      else if (v.is_number_float() && v.get<double>() >= 1) cfg_.model_max_length = v.get<double>() >= 9.2e18 ? cfg_.model_max_length : std::int64_t(v.get<double>());
      else bad(where, "model_max_length", msg("is ", rlflow::detail::json_preview(v), "; expected a positive number"));
    }
  }

  void load(nlohmann::json const& j, std::string const& where) {
    using namespace bpe_detail;
    if (!j.is_object()) bad(where, "the file", "is not a JSON object");
    // model: byte-level BPE
    if (!j.contains("model")) bad(where, "model", "is missing; a tokenizer.json holds the model (type BPE)");
    auto const& m = j["model"];
    if (m.contains("type") && !(m["type"].is_string() && m["type"] == "BPE"))
      bad(where, "model.type", msg("is ", rlflow::detail::json_preview(m["type"]), "; rlflow reads BPE models only"));
    if (!m.is_object() || !m.contains("vocab") || !m["vocab"].is_object()) bad(where, "model.vocab", "is missing or not a {token: id} object");
    if (!m.contains("merges") || !m["merges"].is_array()) bad(where, "model.merges", "is missing or not a list");
    if (m.contains("dropout") && !m["dropout"].is_null() && !(m["dropout"].is_number() && m["dropout"].get<double>() == 0.0))
      bad(where, "model.dropout", msg("is ", rlflow::detail::json_preview(m["dropout"]), "; BPE dropout is for training, rlflow encodes without it (set null)"));
    for (char const* k : {"continuing_subword_prefix", "end_of_word_suffix"})
      if (m.contains(k) && !m[k].is_null() && !(m[k].is_string() && m[k].get<std::string>().empty()))
        bad(where, msg("model.", k), msg("is ", rlflow::detail::json_preview(m[k]), "; rlflow's byte-level BPE has no subword affixes (set null)"));
    if (flag(m, "byte_fallback", false, where, "model")) bad(where, "model.byte_fallback", "is true; byte-level BPE never needs <0xNN> fallback tokens (set false)");
    ignore_merges_ = flag(m, "ignore_merges", false, where, "model");

    auto id_of = [&](nlohmann::json const& v, std::string const& field) -> std::int32_t {
      bool const ok = v.is_number_unsigned() ? v.get<std::uint64_t>() <= std::uint64_t(max_token_id)
                                             : v.is_number_integer() && v.get<std::int64_t>() >= 0 && v.get<std::int64_t>() <= max_token_id;
      if (!ok) bad(where, field, msg("is ", rlflow::detail::json_preview(v), "; expected an integer id in [0, ", max_token_id, "]"));
      return std::int32_t(v.get<std::int64_t>());
    };
    std::int32_t max_id = -1;
    std::vector<std::pair<std::string, std::int32_t>> vocab;
    vocab.reserve(m["vocab"].size());
    for (auto it = m["vocab"].begin(); it != m["vocab"].end(); ++it) {
      vocab.emplace_back(it.key(), id_of(it.value(), msg("model.vocab['", it.key(), "']")));
      max_id = std::max(max_id, vocab.back().second);
    }
    // added tokens
    struct Added {
      std::string content;
      std::int32_t id;
      bool special, normalized;
    };
    std::vector<Added> added;
    if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
      if (!j["added_tokens"].is_array()) bad(where, "added_tokens", "is not a list");
      std::size_t k = 0;
      for (auto const& a : j["added_tokens"]) {
        std::string const f = msg("added_tokens[", k++, "]");
        if (!a.is_object() || !a.contains("content") || !a["content"].is_string() || !a.contains("id"))
          bad(where, f, "is not an object with a string 'content' and an integer 'id'");
        std::string const content = a["content"].get<std::string>();
        if (content.empty()) bad(where, f + ".content", "is empty; an added token needs text");
        for (char const* opt : {"single_word", "lstrip", "rstrip"})
          if (flag(a, opt, false, where, f))
            bad(where, msg(f, ".", opt), msg("is true for '", content, "'; rlflow matches added tokens exactly and does not implement ", opt));
        bool const special = flag(a, "special", false, where, f);
        added.push_back({content, id_of(a["id"], f + ".id"), special, flag(a, "normalized", !special, where, f)});
        max_id = std::max(max_id, added.back().id);
      }
    }
    if (max_id < 0) bad(where, "model.vocab", "is empty");
    std::size_t const n = std::size_t(max_id) + 1;
    bytes_.assign(n, std::string());
    known_.assign(n, false);
    special_.assign(n, false);
    in_model_.assign(n, false);
    std::array<int, 0x200> byte_of{};
    byte_of.fill(-1);
    for (int b = 0; b < 256; ++b) byte_of[bytes_to_unicode()[std::size_t(b)]] = b;
    // the ByteLevel decoder: a token whose characters all come from the byte map stands for those
    // bytes, any other token for its own UTF-8 text
    auto token_bytes_of = [&](std::string const& tok) {
      std::string b;
      for (std::size_t i = 0; i < tok.size();) {
        auto const ch = decode_utf8(tok, i);
        if (!ch.ok || ch.cp >= 0x200 || byte_of[ch.cp] < 0) return tok;
        b.push_back(char(byte_of[ch.cp]));
        i += std::size_t(ch.len);
      }
      return b;
    };
    ids_.reserve(vocab.size() + added.size());
    for (auto const& [tok, id] : vocab) {
      if (known_[std::size_t(id)]) bad(where, msg("model.vocab['", tok, "']"), msg("has the id ", id, ", which another token already has"));
      known_[std::size_t(id)] = true;
      in_model_[std::size_t(id)] = true;
      ids_.emplace(tok, id);
      bytes_[std::size_t(id)] = token_bytes_of(tok);
    }
    for (int b = 0; b < 256; ++b) {
      std::string u;
      append_utf8(u, bytes_to_unicode()[std::size_t(b)]);
      auto it = ids_.find(u);
      if (it == ids_.end())
        bad(where, "model.vocab", msg("lacks the token of byte ", b, " ('", u, "'); a byte-level BPE vocabulary holds all 256 byte tokens"));
      byte_id_[std::size_t(b)] = it->second;
      byte_str_[std::size_t(b)] = u;
    }
    // merges: "a b" or ["a", "b"]
    auto const& ms = m["merges"];
    merges_.reserve(ms.size() * 2);
    for (std::size_t r = 0; r < ms.size(); ++r) {
      auto const& e = ms[r];
      std::string a, b;
      if (e.is_string()) {
        std::string const s = e.get<std::string>();
        auto const sp = s.find(' ');
        if (sp == std::string::npos || sp == 0 || sp + 1 == s.size() || s.find(' ', sp + 1) != std::string::npos)
          bad(where, msg("model.merges[", r, "]"), msg("'", s, "' is not two tokens separated by one space"));
        a = s.substr(0, sp);
        b = s.substr(sp + 1);
      } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
        a = e[0].get<std::string>();
        b = e[1].get<std::string>();
      } else {
        bad(where, msg("model.merges[", r, "]"), msg("is ", rlflow::detail::json_preview(e), "; expected \"a b\" or [\"a\", \"b\"]"));
      }
      auto ia = ids_.find(a), ib = ids_.find(b), im = ids_.find(a + b);
      if (ia == ids_.end() || ib == ids_.end() || im == ids_.end())
        bad(where, msg("model.merges[", r, "]"), msg("'", a, " ", b, "' uses a token missing from model.vocab ('",
                                                       ia == ids_.end() ? a : ib == ids_.end() ? b : a + b, "')"));
      merges_.emplace(key(ia->second, ib->second), Merge{std::int32_t(r), im->second});
    }
    // normalizer: null or NFC (alone or in a Sequence)
    if (j.contains("normalizer") && !j["normalizer"].is_null()) {
      auto const& nz = j["normalizer"];
      auto one = [&](nlohmann::json const& x, std::string const& field) {
        std::string const t = type_of(x, where, field);
        if (t != "NFC")
          bad(where, field + ".type", msg("is '", t, "'; rlflow applies no normalizer but NFC (a tokenizer.json with another ",
                                          "normalizer cannot be read)"));
        nfc_ = true;
      };
      if (type_of(nz, where, "normalizer") == "Sequence") {
        if (!nz.contains("normalizers") || !nz["normalizers"].is_array()) bad(where, "normalizer.normalizers", "is missing or not a list");
        for (std::size_t k = 0; k < nz["normalizers"].size(); ++k) one(nz["normalizers"][k], msg("normalizer.normalizers[", k, "]"));
      } else {
        one(nz, "normalizer");
      }
    }
    for (std::size_t k = 0; k < added.size(); ++k) {
      auto const& a = added[k];
      // an added token decodes to its text (the ByteLevel decoder agrees for the printable ASCII
      // of real files' added tokens), so text holding it round-trips
      known_[std::size_t(a.id)] = true;
      bytes_[std::size_t(a.id)] = a.content;
      ids_.emplace(a.content, a.id);
      if (a.special) special_[std::size_t(a.id)] = true;
      if (a.normalized && nfc_ && nfc(a.content) != a.content)
        bad(where, msg("added_tokens[", k, "].content"), msg("'", a.content, "' is normalized but not in NFC; write it in NFC"));
      (a.normalized ? normalized_added_ : raw_added_).add(a.content, a.id);
    }
    raw_added_.finish();
    normalized_added_.finish();
    load_pre_tokenizer(j, where);
    load_post_processor(j, where);
    // decoder: ByteLevel (alone or in a Sequence)
    if (!j.contains("decoder") || j["decoder"].is_null()) bad(where, "decoder", "is missing; rlflow decodes byte-level BPE (decoder type ByteLevel)");
    {
      auto const& d = j["decoder"];
      std::string const t = type_of(d, where, "decoder");
      bool ok = t == "ByteLevel";
      if (t == "Sequence" && d.contains("decoders") && d["decoders"].is_array() && d["decoders"].size() == 1)
        ok = type_of(d["decoders"][0], where, "decoder.decoders[0]") == "ByteLevel";
      if (!ok) bad(where, "decoder.type", msg("is '", t, "'; rlflow decodes byte-level BPE only (decoder type ByteLevel)"));
    }
    // special ids from the config
    auto need = [&](std::string const& field, std::string const& t) {
      auto it = ids_.find(t);
      if (it == ids_.end())
        throw config_error(msg(hf_detail::who, ": tokenizer_config.json's ", field, " '", t, "' is not a token of ", where,
                               "; set it to one of its added tokens"));
      return it->second;
    };
    std::string eos = cfg_.eos_token;
    if (eos.empty()) {
      if (ids_.count("<|endoftext|>")) eos = "<|endoftext|>";  // GPT-2's files name no EOS
      else
        throw config_error(msg(hf_detail::who, ": no eos_token: ", where, " comes without a tokenizer_config.json naming one ",
                               "and has no <|endoftext|>; put the model's tokenizer_config.json beside it"));
    }
    eos_ = need("eos_token", eos);
    bos_ = cfg_.bos_token.empty() ? -1 : need("bos_token", cfg_.bos_token);
    pad_ = cfg_.pad_token.empty() ? eos_ : need("pad_token", cfg_.pad_token);
  }

  void load_pre_tokenizer(nlohmann::json const& j, std::string const& where) {
    using hf_detail::Behavior;
    if (!j.contains("pre_tokenizer") || j["pre_tokenizer"].is_null())
      bad(where, "pre_tokenizer", "is missing; byte-level BPE needs a ByteLevel pre-tokenizer (alone or last in a Sequence)");
    auto const& p = j["pre_tokenizer"];
    std::vector<std::pair<nlohmann::json const*, std::string>> list;
    if (type_of(p, where, "pre_tokenizer") == "Sequence") {
      if (!p.contains("pretokenizers") || !p["pretokenizers"].is_array()) bad(where, "pre_tokenizer.pretokenizers", "is missing or not a list");
      for (std::size_t k = 0; k < p["pretokenizers"].size(); ++k) list.push_back({&p["pretokenizers"][k], msg("pre_tokenizer.pretokenizers[", k, "]")});
    } else {
      list.push_back({&p, "pre_tokenizer"});
    }
    bool byte_level = false;
    for (auto const& [x, field] : list) {
      std::string const t = type_of(*x, where, field);
      hf_detail::PreStep st;
      if (t == "ByteLevel") {
        if (byte_level) bad(where, field, "is a second ByteLevel; the bytes would be mapped twice");
        byte_level = true;
        st.byte_level = true;
        st.add_prefix_space = flag(*x, "add_prefix_space", true, where, field);
        if (flag(*x, "use_regex", true, where, field)) {
          st.regex = hf_detail::Regex(hf_detail::gpt2_pattern, where + ": " + field);
          st.regex_set = true;
        }
      } else if (t == "Split") {
        if (byte_level) bad(where, field, "is a Split after ByteLevel; rlflow splits the text before its bytes are mapped (put ByteLevel last)");
        if (!x->contains("pattern") || !(*x)["pattern"].is_object()) bad(where, field + ".pattern", "is missing or not an object");
        auto const& pat = (*x)["pattern"];
        if (pat.contains("Regex") && pat["Regex"].is_string()) {
          st.regex = hf_detail::Regex(pat["Regex"].get<std::string>(), where + ": " + field + ".pattern.Regex");
          st.regex_set = true;
        } else if (pat.contains("String") && pat["String"].is_string()) {
          st.use_literal = true;
          st.literal = pat["String"].get<std::string>();
          if (st.literal.empty()) bad(where, field + ".pattern.String", "is empty");
        } else {
          bad(where, field + ".pattern", msg("is ", rlflow::detail::json_preview(pat), "; expected {\"Regex\": string} or {\"String\": string}"));
        }
        std::string const b = x->contains("behavior") && (*x)["behavior"].is_string() ? (*x)["behavior"].get<std::string>() : "";
        if (b == "Removed") st.behavior = Behavior::removed;
        else if (b == "Isolated") st.behavior = Behavior::isolated;
        else if (b == "MergedWithPrevious") st.behavior = Behavior::merged_with_previous;
        else if (b == "MergedWithNext") st.behavior = Behavior::merged_with_next;
        else if (b == "Contiguous") st.behavior = Behavior::contiguous;
        else
          bad(where, field + ".behavior", msg("is ", x->contains("behavior") ? rlflow::detail::json_preview((*x)["behavior"]) : "missing",
                                               "; expected one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous"));
        st.invert = flag(*x, "invert", false, where, field);
      } else {
        bad(where, field + ".type", msg("is '", t, "'; rlflow's pre-tokenizers are Split and ByteLevel (in a Sequence)"));
      }
      steps_.push_back(std::move(st));
    }
    if (!byte_level) bad(where, "pre_tokenizer", "has no ByteLevel step; rlflow reads byte-level BPE only");
  }

  void load_post_processor(nlohmann::json const& j, std::string const& where) {
    if (!j.contains("post_processor") || j["post_processor"].is_null()) return;
    auto one = [&](nlohmann::json const& x, std::string const& field) {
      std::string const t = type_of(x, where, field);
      if (t == "ByteLevel") return;  // offsets only
      if (t != "TemplateProcessing")
        bad(where, field + ".type", msg("is '", t, "'; rlflow applies the post-processors ByteLevel and TemplateProcessing"));
      if (!prefix_.empty() || !suffix_.empty()) bad(where, field, "is a second TemplateProcessing");
      if (!x.contains("single") || !x["single"].is_array()) bad(where, field + ".single", "is missing or not a list");
      auto const& specials = x.contains("special_tokens") ? x["special_tokens"] : nlohmann::json::object();
      bool seen_a = false;
      for (std::size_t k = 0; k < x["single"].size(); ++k) {
        auto const& piece = x["single"][k];
        std::string const f = msg(field, ".single[", k, "]");
        if (piece.is_object() && piece.contains("Sequence")) {
          auto const& s = piece["Sequence"];
          if (!s.is_object() || s.value("id", nlohmann::json()) != "A" || seen_a) bad(where, f, "is not the one {\"Sequence\": {\"id\": \"A\"}}");
          seen_a = true;
        } else if (piece.is_object() && piece.contains("SpecialToken") && piece["SpecialToken"].is_object() &&
                   piece["SpecialToken"].contains("id") && piece["SpecialToken"]["id"].is_string()) {
          std::string const name = piece["SpecialToken"]["id"].get<std::string>();
          if (!specials.is_object() || !specials.contains(name) || !specials[name].is_object() || !specials[name].contains("ids") ||
              !specials[name]["ids"].is_array())
            bad(where, field + ".special_tokens", msg("lacks an entry with 'ids' for '", name, "', which ", f, " uses"));
          for (auto const& idv : specials[name]["ids"]) {
            bool const ok = idv.is_number_integer() && idv.get<std::int64_t>() >= 0 && idv.get<std::int64_t>() < vocab_size();
            if (!ok) bad(where, msg(field, ".special_tokens['", name, "'].ids"), msg("holds ", rlflow::detail::json_preview(idv), ", not an id in [0, ", vocab_size(), ")"));
            (seen_a ? suffix_ : prefix_).push_back(std::int32_t(idv.get<std::int64_t>()));
          }
        } else {
          bad(where, f, msg("is ", rlflow::detail::json_preview(piece), "; expected {\"SpecialToken\": {\"id\": name}} or {\"Sequence\": {\"id\": \"A\"}}"));
        }
      }
      if (!seen_a) bad(where, field + ".single", "has no {\"Sequence\": {\"id\": \"A\"}}");
    };
    auto const& pp = j["post_processor"];
    if (type_of(pp, where, "post_processor") == "Sequence") {
      if (!pp.contains("processors") || !pp["processors"].is_array()) bad(where, "post_processor.processors", "is missing or not a list");
      for (std::size_t k = 0; k < pp["processors"].size(); ++k) one(pp["processors"][k], msg("post_processor.processors[", k, "]"));
    } else {
      one(pp, "post_processor");
    }
  }

  //! Pre-tokenizes one segment (no added tokens in it) and appends the BPE ids of each piece.
  void pretokenize_and_bpe(std::string_view text, std::vector<std::int32_t>& out) const {
    if (text.empty()) return;
    thread_local std::string buf[2];
    thread_local std::vector<hf_detail::Span> spans[2];
    int cur = 0;
    std::string_view src = text;  // the text the current spans index
    spans[0].assign(1, {0, text.size()});
    for (auto const& st : steps_) {
      int const nxt = 1 - cur;
      if (st.byte_level && st.add_prefix_space) {
        // each piece not starting with a space gets one (tokenizers' ByteLevel add_prefix_space)
        std::string& b = buf[nxt];
        b.clear();
        thread_local std::vector<hf_detail::Span> moved;
        moved.clear();
        for (auto const& sp : spans[cur]) {
          std::size_t const s = b.size();
          if (sp.end > sp.begin && src[sp.begin] != ' ') b.push_back(' ');
          b.append(src.substr(sp.begin, sp.end - sp.begin));
          moved.push_back({s, b.size()});
        }
        src = b;
        spans[cur] = moved;
      }
      if (st.byte_level && !st.regex_set) continue;
      spans[nxt].clear();
      for (auto const& sp : spans[cur]) hf_detail::split_piece(st, src, sp, spans[nxt]);
      cur = nxt;
    }
    for (auto const& sp : spans[cur])
      if (sp.end > sp.begin) bpe(src.substr(sp.begin, sp.end - sp.begin), out);
  }

  //! BPE of one piece through a per-thread cache of recent pieces (tokenizers' BPE cache); the
  //! cache belongs to one tokenizer at a time (its serial number; copies share the same data).
  void bpe(std::string_view piece, std::vector<std::int32_t>& out) const {
    if (piece.size() == 1 || piece.size() > max_cached_piece) return bpe_uncached(piece, out);
    struct Hash {
      using is_transparent = void;
      std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };
    struct Cache {
      std::uint64_t owner = 0;
      std::unordered_map<std::string, std::pair<std::uint32_t, std::uint32_t>, Hash, std::equal_to<>> where;
      std::vector<std::int32_t> ids;
    };
    thread_local Cache cache;
    if (cache.owner != serial_ || cache.where.size() >= max_cached_pieces) {
      cache.owner = serial_;
      cache.where.clear();
      cache.ids.clear();
    }
    if (auto it = cache.where.find(piece); it != cache.where.end()) {
      out.insert(out.end(), cache.ids.begin() + it->second.first, cache.ids.begin() + it->second.first + it->second.second);
      return;
    }
    std::size_t const at = out.size();
    bpe_uncached(piece, out);
    auto const first = std::uint32_t(cache.ids.size());
    cache.ids.insert(cache.ids.end(), out.begin() + std::ptrdiff_t(at), out.end());
    cache.where.emplace(std::string(piece), std::pair{first, std::uint32_t(out.size() - at)});
  }
  static constexpr std::size_t max_cached_piece = 64, max_cached_pieces = 1 << 16;

  //! BPE of one piece: the lowest-ranked adjacent pair merges first, the leftmost among equals
  //! (tokenizers' Word::merge_all). With ignore_merges a piece that is a token is that token.
  void bpe_uncached(std::string_view piece, std::vector<std::int32_t>& out) const {
    if (piece.size() == 1) {
      out.push_back(byte_id_[static_cast<unsigned char>(piece[0])]);
      return;
    }
    if (ignore_merges_) {
      thread_local std::string mapped;
      mapped.clear();
      for (char c : piece) mapped += byte_str_[static_cast<unsigned char>(c)];
      auto it = ids_.find(mapped);
      if (it != ids_.end() && in_model_[std::size_t(it->second)]) {
        out.push_back(it->second);
        return;
      }
    }
    struct Sym {
      std::int32_t id;
      std::int32_t prev, next;  // -1: none
      bool alive;
    };
    struct Cand {
      std::int32_t rank, pos, id;
      bool operator>(Cand const& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    thread_local std::vector<Sym> sym;
    thread_local std::vector<Cand> heap;
    sym.clear();
    heap.clear();
    std::int32_t const n = std::int32_t(piece.size());
    for (std::int32_t i = 0; i < n; ++i) sym.push_back({byte_id_[static_cast<unsigned char>(piece[std::size_t(i)])], i - 1, i + 1 < n ? i + 1 : -1, true});
    auto push = [&](std::int32_t pos) {
      std::int32_t const nx = sym[std::size_t(pos)].next;
      if (nx < 0) return;
      auto it = merges_.find(key(sym[std::size_t(pos)].id, sym[std::size_t(nx)].id));
      if (it == merges_.end()) return;
      heap.push_back({it->second.rank, pos, it->second.id});
      std::push_heap(heap.begin(), heap.end(), std::greater<>());
    };
    for (std::int32_t i = 0; i + 1 < n; ++i) push(i);
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), std::greater<>());
      Cand const c = heap.back();
      heap.pop_back();
      Sym& s = sym[std::size_t(c.pos)];
      if (!s.alive || s.next < 0) continue;
      Sym& r = sym[std::size_t(s.next)];
      auto it = merges_.find(key(s.id, r.id));
      if (it == merges_.end() || it->second.id != c.id || it->second.rank != c.rank) continue;  // stale
      s.id = c.id;
      r.alive = false;
      s.next = r.next;
      if (r.next >= 0) sym[std::size_t(r.next)].prev = c.pos;
      if (s.prev >= 0) push(s.prev);
      push(c.pos);
    }
    for (std::int32_t i = 0; i >= 0; i = sym[std::size_t(i)].next) out.push_back(sym[std::size_t(i)].id);
  }

  HFTokenizerConfig cfg_;
  std::unordered_map<std::string, std::int32_t> ids_;
  std::vector<std::string> bytes_;
  std::vector<bool> known_, special_, in_model_;  // in_model_: a model.vocab id
  std::unordered_map<std::uint64_t, Merge> merges_;
  std::array<std::int32_t, 256> byte_id_{};
  std::array<std::string, 256> byte_str_{};
  std::vector<hf_detail::PreStep> steps_;
  hf_detail::AddedMatcher raw_added_, normalized_added_;
  std::vector<std::int32_t> prefix_, suffix_;
  bool nfc_ = false, ignore_merges_ = false;
  std::uint64_t serial_ = 0;  // names this tokenizer's data for the per-thread BPE cache
  std::int32_t eos_ = 0, bos_ = -1, pad_ = 0;
};

//! The tokenizer of a model folder: tokenizer.json (+ tokenizer_config.json) when the folder has
//! it, else GPT-2's vocab.json + merges.txt. verl: hf_tokenizer(local_path).
inline std::shared_ptr<Tokenizer const> load_tokenizer(std::filesystem::path const& dir) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(dir / "tokenizer.json", ec)) return std::make_shared<HFTokenizer const>(HFTokenizer::from_folder(dir));
  if (std::filesystem::is_regular_file(dir / "vocab.json", ec) && std::filesystem::is_regular_file(dir / "merges.txt", ec))
    return std::make_shared<BPETokenizer const>(BPETokenizer::from_folder(dir));
  throw io_error(msg("rlflow::model::load_tokenizer: ", dir.string(), " holds neither tokenizer.json nor vocab.json + merges.txt; set ",
                     "actor_rollout_ref.model.tokenizer_path to the folder of the model's tokenizer files"));
}

}  // namespace rlflow::model
