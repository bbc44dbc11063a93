// Fuzz target: Hugging Face tokenizer files (HFTokenizer::from_json: tokenizer.json and
// tokenizer_config.json). The input is tokenizer.json, a marker line, tokenizer_config.json.
// Silent accept: an accepted tokenizer that breaks byte-level BPE's laws on fixed texts: an id
// outside [0, vocab_size), a special id outside the vocabulary, or decode(encode(s)) != s (after
// NFC when the file normalizes) where the pre-tokenizer keeps every byte (no Removed split, no
// prefix space).
#include "fuzz/fuzz_driver.hpp"

#include <rlflow/model/hf_tokenizer.hpp>

namespace fuzz_hf_tokenizer {

using namespace rlflow;

namespace {
constexpr std::string_view sep = "\n--8<--\n";

//! A small tokenizer.json: the 256 byte tokens, a few merges, added tokens; Qwen's or GPT-2's layout.
std::string seed(bool qwen) {
  auto const& b2u = model::bpe_detail::bytes_to_unicode();
  nlohmann::json v = nlohmann::json::object();
  std::int32_t id = 0;
  for (int b = 0; b < 256; ++b) {
    std::string u;
    model::bpe_detail::append_utf8(u, b2u[std::size_t(b)]);
    v[u] = id++;
  }
  nlohmann::json merges = nlohmann::json::array();
  for (auto const& [a, b] : std::vector<std::pair<std::string, std::string>>{{"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}, {"1", "2"}, {"i", "n"}}) {
    if (!v.contains(a + b)) v[a + b] = id++;
    merges.push_back(qwen ? nlohmann::json{a, b} : nlohmann::json(a + " " + b));
  }
  nlohmann::json j;
  j["model"] = {{"type", "BPE"}, {"vocab", v}, {"merges", merges}, {"ignore_merges", !qwen}};
  j["decoder"] = {{"type", "ByteLevel"}};
  j["added_tokens"] = {{{"id", id}, {"content", "<|endoftext|>"}, {"special", true}, {"normalized", false}},
                       {{"id", id + 1}, {"content", "<|im_end|>"}, {"special", true}, {"normalized", false}},
                       {{"id", id + 2}, {"content", "<think>"}, {"special", false}, {"normalized", true}}};
  if (qwen) {
    j["normalizer"] = {{"type", "NFC"}};
    j["pre_tokenizer"] = {
        {"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern", {{"Regex", R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}}},
           {"behavior", "Isolated"},
           {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
    j["post_processor"] = {{"type", "TemplateProcessing"},
                           {"single", {{{"SpecialToken", {{"id", "<|endoftext|>"}}}}, {{"Sequence", {{"id", "A"}}}}}},
                           {"special_tokens", {{"<|endoftext|>", {{"id", "<|endoftext|>"}, {"ids", {id}}}}}}};
    return j.dump() + std::string(sep) +
           R"({"eos_token": "<|im_end|>", "pad_token": {"content": "<|endoftext|>"}, "add_bos_token": false, "chat_template": "{{ x }}", "model_max_length": 1e30})";
  }
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  j["post_processor"] = {{"type", "ByteLevel"}};
  return j.dump() + std::string(sep) + R"({"model_max_length": 1024})";
}

//! Whether the pre-tokenizer keeps every byte of the text as it is (no Removed, no prefix space).
bool keeps_bytes(nlohmann::json const& p) {
  if (p.is_object()) {
    if (p.contains("behavior") && p["behavior"] == "Removed") return false;
    if (p.contains("type") && p["type"] == "ByteLevel" && !(p.contains("add_prefix_space") && p["add_prefix_space"] == false)) return false;
    for (auto const& [k, v] : p.items())
      if (!keeps_bytes(v)) return false;
  } else if (p.is_array()) {
    for (auto const& v : p)
      if (!keeps_bytes(v)) return false;
  }
  return true;
}
}  // namespace

std::vector<std::string> fuzz_seeds() { return {seed(true), seed(false)}; }

fuzz::outcome fuzz_one(std::string_view in) {
  auto const at = in.find(sep);
  std::string_view const tj = in.substr(0, at), tc = at == std::string_view::npos ? std::string_view{} : in.substr(at + sep.size());
  auto const tok = model::HFTokenizer::from_json(tj, tc);
  // accepted: the text parsed, so this parse cannot throw
  bool const exact = keeps_bytes(nlohmann::json::parse(tj).value("pre_tokenizer", nlohmann::json()));
  auto const in_vocab = [&](std::int32_t id) { return id >= 0 && id < tok.vocab_size(); };
  if (!in_vocab(tok.eos_id()) || !in_vocab(tok.pad_id()) || (tok.bos_id() != -1 && !in_vocab(tok.bos_id()))) return fuzz::outcome::silent_accept;
  static std::string const texts[] = {"the cat and the hat's 123 <|endoftext|> in there<think>", std::string("\0\x01\xff\xfe z\xc3\xa9", 9),
                                      "  \n\t spaces  ", "12345678901", "caf\x65\xcc\x81 <|im_end|>\n"};
  for (auto const& s : texts) {
    auto const ids = tok.encode_with_special(s);
    for (auto const id : ids)
      if (!in_vocab(id)) return fuzz::outcome::silent_accept;
    if (!exact) continue;
    auto const plain = tok.encode(s);
    if (tok.decode(plain, /*skip_special=*/false) != (tok.normalizes_nfc() ? model::nfc(s) : s)) return fuzz::outcome::silent_accept;
  }
  return fuzz::outcome::accepted;
}

}  // namespace fuzz_hf_tokenizer
RLFLOW_FUZZ_TARGET(hf_tokenizer)
