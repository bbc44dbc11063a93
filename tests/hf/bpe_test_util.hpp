// tests/hf/bpe_test_util.hpp: shared by the BPE tests and benchmark: a small byte-level BPE
// trainer (a vocabulary the test builds itself), GPT-2's bpe() written literally over strings
// (the reference for the id-based BPETokenizer), and a generator of varied text.
#pragma once
#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <rlflow/model/bpe_tokenizer.hpp>

namespace bpe_test {

using rlflow::model::bpe_detail::append_utf8;
using rlflow::model::bpe_detail::bytes_to_unicode;

//! A piece's bytes as GPT-2's unicode characters, one string per byte.
inline std::vector<std::string> to_symbols(std::string_view piece) {
  std::vector<std::string> s;
  for (unsigned char c : piece) {
    std::string u;
    append_utf8(u, bytes_to_unicode()[c]);
    s.push_back(u);
  }
  return s;
}

struct Vocab {
  std::vector<std::pair<std::string, std::int32_t>> tokens;
  std::vector<std::pair<std::string, std::string>> merges;
};

//! Trains 'n_merges' byte-level BPE merges on 'corpus' (most frequent pair first, ties to the
//! smaller pair), GPT-2 style: 256 byte tokens, merged tokens, then <|endoftext|>.
inline Vocab train_bpe(std::vector<std::string> const& corpus, int n_merges) {
  std::map<std::string, std::int64_t> counts;
  for (auto const& text : corpus) rlflow::model::gpt2_pretokenize(text, [&](std::string_view p) { ++counts[std::string(p)]; });
  std::vector<std::pair<std::vector<std::string>, std::int64_t>> words;
  for (auto const& [w, c] : counts) words.push_back({to_symbols(w), c});
  Vocab v;
  std::map<std::string, std::int32_t> ids;
  for (int b = 0; b < 256; ++b) {
    std::string u;
    append_utf8(u, bytes_to_unicode()[std::size_t(b)]);
    ids[u] = b;
    v.tokens.push_back({u, b});
  }
  for (int m = 0; m < n_merges; ++m) {
    std::map<std::pair<std::string, std::string>, std::int64_t> pc;
    for (auto const& [w, c] : words)
      for (std::size_t i = 0; i + 1 < w.size(); ++i) pc[{w[i], w[i + 1]}] += c;
    if (pc.empty()) break;
    auto best = pc.begin();
    for (auto it = pc.begin(); it != pc.end(); ++it)
      if (it->second > best->second) best = it;
    auto const [a, b] = best->first;
    v.merges.push_back({a, b});
    if (!ids.count(a + b)) {
      std::int32_t const id = std::int32_t(v.tokens.size());
      ids[a + b] = id;
      v.tokens.push_back({a + b, id});
    }
    for (auto& [w, c] : words) {
      std::vector<std::string> nw;
      for (std::size_t i = 0; i < w.size();) {
        if (i + 1 < w.size() && w[i] == a && w[i + 1] == b) nw.push_back(a + b), i += 2;
        else nw.push_back(w[i++]);
      }
      w = std::move(nw);
    }
  }
  v.tokens.push_back({"<|endoftext|>", std::int32_t(v.tokens.size())});
  return v;
}

//! GPT-2's encoder.py over strings: pre-tokenize, bytes to unicode, bpe() with 'ranks', ids.
struct ReferenceEncoder {
  std::map<std::pair<std::string, std::string>, int> ranks;
  std::map<std::string, std::int32_t> ids;
  explicit ReferenceEncoder(Vocab const& v) {
    for (std::size_t r = 0; r < v.merges.size(); ++r) ranks.emplace(v.merges[r], int(r));
    for (auto const& [t, id] : v.tokens) ids[t] = id;
  }
  std::vector<std::string> bpe(std::vector<std::string> word) const {
    while (word.size() > 1) {
      int best = 1 << 30;
      std::pair<std::string, std::string> bigram;
      for (std::size_t i = 0; i + 1 < word.size(); ++i) {
        auto it = ranks.find({word[i], word[i + 1]});
        if (it != ranks.end() && it->second < best) best = it->second, bigram = it->first;
      }
      if (best == (1 << 30)) break;
      std::vector<std::string> nw;
      std::size_t i = 0;
      while (i < word.size()) {
        auto j = std::find(word.begin() + std::ptrdiff_t(i), word.end(), bigram.first);
        if (j == word.end()) {
          nw.insert(nw.end(), word.begin() + std::ptrdiff_t(i), word.end());
          break;
        }
        std::size_t const jj = std::size_t(j - word.begin());
        nw.insert(nw.end(), word.begin() + std::ptrdiff_t(i), j);
        i = jj;
        if (word[i] == bigram.first && i + 1 < word.size() && word[i + 1] == bigram.second) nw.push_back(bigram.first + bigram.second), i += 2;
        else nw.push_back(word[i++]);
      }
      word = std::move(nw);
    }
    return word;
  }
  std::vector<std::int32_t> encode(std::string_view text) const {
    std::vector<std::int32_t> out;
    std::string_view const eot = "<|endoftext|>";
    while (true) {
      auto const p = text.find(eot);
      rlflow::model::gpt2_pretokenize(text.substr(0, p), [&](std::string_view piece) {
        for (auto const& t : bpe(to_symbols(piece))) out.push_back(ids.at(t));
      });
      if (p == std::string_view::npos) break;
      out.push_back(ids.at(std::string(eot)));
      text.remove_prefix(p + eot.size());
    }
    return out;
  }
};

//! Varied text: words (capitalised, upper), contractions, numbers, white-space runs, punctuation,
//! accented / Greek / Cyrillic / CJK / Devanagari / Arabic letters, emoji (ZWJ, skin tones),
//! combining marks. Only characters assigned since Unicode 6 (categories agree across versions)
//! and no U+0085 / U+FEFF (where JavaScript's \s and Unicode's White_Space differ).
inline std::string varied_text(std::mt19937_64& g, int parts) {
  static std::vector<std::string> const words = {
      "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "Hello", "World", "GPT", "token", "izer",
      "Natalia", "sold", "clips", "April", "May", "altogether", "how", "many", "answer", "is", "of", "and", "a",
      "café", "naïve", "résumé", "Straße", "Ελληνικά", "привет", "мир", "日本語", "中文", "한국어", "テキスト",
      "हिन्दी", "العربية", "עברית", "ǅemal", "Ⅻ", "x²", "½", "٣٤", "I", "you", "we", "they", "it", "O"};
  static std::vector<std::string> const seps = {" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\u00a0",
                                                "\u3000", "\u2003", " \t ", "    \n", "\v", "\f"};
  static std::vector<std::string> const puncts = {".", ",", "!", "?", "...", "!!!", "--", "(", ")", "[", "]", "\"",
                                                  "'", "''", "#", "####", "$", "%", "&", "*", "+", "-", "=", "/",
                                                  "\\", ":", ";", "<", ">", "@", "^", "_", "`", "{", "|", "}", "~",
                                                  "«", "»", "—", "…", "€", "©", "°"};
  static std::vector<std::string> const contr = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'x", "’s"};
  static std::vector<std::string> const emoji = {"😀", "🎉", "👍", "👍🏽", "👨‍👩‍👧", "❤️", "🇫🇷", "🤖", "✨", "🙂🙃"};
  static std::vector<std::string> const marks = {"e\u0301", "n\u0303", "a\u0308\u0304", "\u0301"};
  std::string out;
  for (int i = 0; i < parts; ++i) {
    switch (g() % 9) {
      case 0: case 1: case 2: {
        std::string w = words[g() % words.size()];
        if (g() % 5 == 0 && !w.empty() && w[0] >= 'a' && w[0] <= 'z') w[0] = char(w[0] - 32);
        if (g() % 11 == 0) for (auto& c : w) if (c >= 'a' && c <= 'z') c = char(c - 32);
        out += w;
        break;
      }
      case 3: out += seps[g() % seps.size()]; break;
      case 4: out += puncts[g() % puncts.size()]; break;
      case 5: out += contr[g() % contr.size()]; break;
      case 6: {
        std::uint64_t const n = g() % 4 == 0 ? g() % 100000000 : g() % 1000;
        out += std::to_string(n);
        if (g() % 4 == 0) out += "." + std::to_string(g() % 100);
        if (g() % 6 == 0) out += ",000";
        break;
      }
      case 7: out += emoji[g() % emoji.size()]; break;
      case 8: out += g() % 2 ? marks[g() % marks.size()] : " "; break;
    }
  }
  return out;
}

}  // namespace bpe_test
