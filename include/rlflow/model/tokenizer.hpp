// rlflow/model/tokenizer.hpp: tokenizers for the built-in model. Defines the Tokenizer interface
// (encode / decode / special ids / vocabulary size) and CharTokenizer, one token per character
// of a given alphabet (or per byte) plus PAD, BOS and EOS. Does not do BPE.
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <rlflow/core/error.hpp>  // config_error, value_error

namespace rlflow::model {

//! What the engines and the trainer need from a tokenizer; implement it to plug in your own.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::vector<std::int32_t> encode(std::string_view text) const = 0;
  //! Text of the tokens; special tokens are skipped when skip_special is true.
  virtual std::string decode(std::span<std::int32_t const> ids, bool skip_special = true) const = 0;
  virtual int vocab_size() const = 0;
  virtual std::int32_t pad_id() const = 0;
  virtual std::int32_t bos_id() const = 0;
  virtual std::int32_t eos_id() const = 0;
};

//! Character-level tokenizer: ids 0, 1, 2 are PAD, BOS, EOS; id 3 + i is alphabet[i].
//! CharTokenizer::bytes() covers all 256 byte values (vocabulary 259).
class CharTokenizer final : public Tokenizer {
 public:
  static constexpr std::int32_t pad = 0, bos = 1, eos = 2, first_char = 3;

  //! One token per distinct character of 'alphabet' (bytes; order sets the ids).
  explicit CharTokenizer(std::string_view alphabet) : alphabet_(alphabet) {
    if (alphabet.empty()) throw config_error("rlflow::model::CharTokenizer: the alphabet is empty; pass the characters to encode");
    id_of_.fill(-1);
    for (std::size_t i = 0; i < alphabet.size(); ++i) {
      auto const c = static_cast<unsigned char>(alphabet[i]);
      if (id_of_[c] >= 0)
        throw config_error(msg("rlflow::model::CharTokenizer: character '", alphabet[i], "' appears twice in the alphabet (",
                               "positions ", id_of_[c] - first_char, " and ", i, "); list each character once"));
      id_of_[c] = first_char + static_cast<std::int32_t>(i);
    }
  }
  //! A byte-level tokenizer (vocabulary 259).
  static CharTokenizer bytes() {
    std::string all(256, '\0');
    for (int i = 0; i < 256; ++i) all[static_cast<std::size_t>(i)] = static_cast<char>(i);
    return CharTokenizer(all);
  }

  std::vector<std::int32_t> encode(std::string_view text) const override {
    std::vector<std::int32_t> out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
      auto const c = static_cast<unsigned char>(text[i]);
      if (id_of_[c] < 0)
        throw value_error(msg("rlflow::model::CharTokenizer::encode: character code ", int(c), " at position ", i,
                              " is not in the alphabet of ", alphabet_.size(), " characters; add it to the alphabet"));
      out.push_back(id_of_[c]);
    }
    return out;
  }
  std::string decode(std::span<std::int32_t const> ids, bool skip_special = true) const override {
    std::string out;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      std::int32_t const id = ids[i];
      if (id >= first_char && id < vocab_size()) {
        out.push_back(alphabet_[static_cast<std::size_t>(id - first_char)]);
      } else if (id >= 0 && id < first_char) {
        if (!skip_special) out += id == pad ? "<pad>" : id == bos ? "<bos>" : "<eos>";
      } else {
        throw value_error(msg("rlflow::model::CharTokenizer::decode: id ", id, " at position ", i,
                              " is outside the vocabulary [0, ", vocab_size(), ")"));
      }
    }
    return out;
  }
  std::string decode(std::vector<std::int32_t> const& ids, bool skip_special = true) const {
    return decode(std::span<std::int32_t const>(ids), skip_special);
  }
  int vocab_size() const override { return first_char + static_cast<int>(alphabet_.size()); }
  std::int32_t pad_id() const override { return pad; }
  std::int32_t bos_id() const override { return bos; }
  std::int32_t eos_id() const override { return eos; }
  std::string const& alphabet() const { return alphabet_; }

 private:
  std::string alphabet_;
  std::array<std::int32_t, 256> id_of_{};
};

}  // namespace rlflow::model
