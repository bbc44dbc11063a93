// Fuzz target: GPT-2 tokenizer files (BPETokenizer::from_files: vocab.json + merges.txt, the
// files a Hugging Face model folder holds). The input is vocab.json, a marker line, merges.txt.
// Silent accept: an accepted tokenizer that breaks byte-level BPE's laws on fixed texts: an id
// outside [0, vocab_size), or decode(encode(s)) != s (every byte string must round-trip).
#include "fuzz/fuzz_driver.hpp"

#include <rlflow/model/bpe_tokenizer.hpp>

namespace fuzz_tokenizer {


using namespace rlflow;
namespace fs = std::filesystem;

namespace {
constexpr std::string_view sep = "\n--8<--\n";
fs::path dir() { return fuzz::scratch_dir("tok"); }
//! A byte-level vocabulary: the 256 byte tokens, then merged tokens, then <|endoftext|>.
std::string seed(std::vector<std::pair<std::string, std::string>> const& merges) {
  auto const& b2u = model::bpe_detail::bytes_to_unicode();
  nlohmann::json v = nlohmann::json::object();
  std::int32_t id = 0;
  for (int b = 0; b < 256; ++b) {
    std::string u;
    model::bpe_detail::append_utf8(u, b2u[std::size_t(b)]);
    v[u] = id++;
  }
  std::string m = "#version: 0.2\n";
  for (auto const& [a, b] : merges) {
    if (!v.contains(a + b)) v[a + b] = id++;
    m += a + " " + b + "\n";
  }
  v["<|endoftext|>"] = id++;
  return v.dump() + std::string(sep) + m;
}
}  // namespace

std::vector<std::string> fuzz_seeds() {
  return {seed({{"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}, {"i", "n"}, {"Ġ", "a"}, {"e", "r"}, {"Ġa", "n"}, {"Ġan", "d"}}),
          seed({{"1", "2"}, {"12", "3"}, {"Ġ", "1"}, {"'", "s"}}), seed({})};
}

fuzz::outcome fuzz_one(std::string_view in) {
  auto const at = in.find(sep);
  std::string const vocab(in.substr(0, at)), merges(at == std::string_view::npos ? std::string_view{} : in.substr(at + sep.size()));
  std::ofstream(dir() / "vocab.json", std::ios::binary | std::ios::trunc) << vocab;
  std::ofstream(dir() / "merges.txt", std::ios::binary | std::ios::trunc) << merges;
  auto const tok = model::BPETokenizer::from_folder(dir());
  static std::string const texts[] = {"the cat and the hat's 123 <|endoftext|> in there", std::string("\0\x01\xff\xfe z\xc3\xa9", 9),
                                      "  \n\t spaces  ", "1234567890"};
  for (auto const& s : texts) {
    auto const ids = tok.encode(s);
    for (auto const id : ids)
      if (id < 0 || id >= tok.vocab_size()) return fuzz::outcome::silent_accept;
    if (tok.decode(ids, /*skip_special=*/false) != s) return fuzz::outcome::silent_accept;
  }
  return fuzz::outcome::accepted;
}

}  // namespace fuzz_tokenizer
RLFLOW_FUZZ_TARGET(tokenizer)
