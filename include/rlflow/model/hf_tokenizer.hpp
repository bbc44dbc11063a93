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
#include <rlflow/core/config.hpp>  // RLFLOW_DECL, RLFLOW_DEFINE_BODIES
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
RLFLOW_DECL void split_piece(PreStep const& st, std::string_view text, Span piece, std::vector<Span>& out);

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

RLFLOW_DECL std::string read_file(std::filesystem::path const& f);

RLFLOW_DECL nlohmann::json parse(std::string_view text, std::string const& where);

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
                               std::string const& where = "tokenizer.json", std::string const& config_where = "tokenizer_config.json");
  //! tokenizer.json and, when it exists, tokenizer_config.json beside it.
  static HFTokenizer from_folder(std::filesystem::path const& dir);

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
  std::string decode(std::span<std::int32_t const> ids, bool skip_special = true) const override;
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
  std::int32_t token_id(std::string const& token) const;
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
  static std::string type_of(nlohmann::json const& j, std::string const& where, std::string const& field);
  static bool flag(nlohmann::json const& j, char const* k, bool def, std::string const& where, std::string const& field);

  void load_config(std::string_view text, std::string const& where);

  void load(nlohmann::json const& j, std::string const& where);

  void load_pre_tokenizer(nlohmann::json const& j, std::string const& where);

  void load_post_processor(nlohmann::json const& j, std::string const& where);

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
  void bpe_uncached(std::string_view piece, std::vector<std::int32_t>& out) const;

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
RLFLOW_DECL std::shared_ptr<Tokenizer const> load_tokenizer(std::filesystem::path const& dir);

}  // namespace rlflow::model

#if RLFLOW_DEFINE_BODIES
#include <rlflow/model/impl/hf_tokenizer.ipp>
#endif
