// Files a user hands rlflow besides checkpoints: dataset files (data.train_files),
// GPT-2 tokenizer files (vocab.json, merges.txt), a Hugging Face model folder's config.json and
// shard index, and the GPT config an rlflow weights file records. Every damaged or hostile
// file is a clean rlflow::error naming the file (and the field), raised before any large
// allocation; never undefined behaviour (a float converted to int), a narrowing (2^32 + k read
// as k), a stack overflow (deep nesting), or a silent accept (a folder read as an empty file).
#include <catch2/catch.hpp>

#include <rlflow/data/data_files.hpp>
#include <rlflow/engine/checkpoint.hpp>
#include <rlflow/engine/hf_export.hpp>
#include <rlflow/model/bpe_tokenizer.hpp>
#include <rlflow/model/hf_folder.hpp>

#include <fstream>
#include <random>
#include <unistd.h>

namespace test_file_boundaries {

using namespace rlflow;
namespace fs = std::filesystem;
namespace hf = rlflow::model::hf;

namespace {
fs::path fresh_dir(std::string const& name) {
  auto p = fs::temp_directory_path() / ("rlflow_files_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}
void put(fs::path const& p, std::string const& s) { std::ofstream(p, std::ios::binary | std::ios::trunc) << s; }
std::string nested(std::size_t depth, char open = '[', char close = ']') {
  return std::string(depth, open) + std::string(depth, close);
}
template <class E, class F>
void rejects(F&& f, std::vector<std::string> const& parts) {
  try {
    f();
    FAIL("accepted; expected an error mentioning: " << parts.front());
  } catch (E const& e) {
    std::string const m = e.what();
    INFO(m);
    for (auto const& p : parts) CHECK(m.find(p) != std::string::npos);
  }
}
model::GPTConfig tiny() { return {.vocab_size = 300, .max_seq_len = 8, .n_layer = 1, .n_head = 2, .n_embd = 4}; }
//! A GPT-2 byte-level vocab.json: the 256 byte tokens and <|endoftext|>.
nlohmann::json byte_vocab() {
  nlohmann::json v = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) {
    std::string u;
    model::bpe_detail::append_utf8(u, model::bpe_detail::bytes_to_unicode()[std::size_t(b)]);
    v[u] = b;
  }
  v["<|endoftext|>"] = 256;
  return v;
}
}  // namespace

TEST_CASE("data files: deep nesting, folders and damaged rows are errors naming the file and line", "[hardening][files]") {
  auto dir = fresh_dir("data");
  auto const jl = dir / "train.jsonl";
  auto load = [&](fs::path const& p) { return load_prompt_files({p.string()}, DataFileOptions{}); };
  // depth 64 is accepted (extra_info nested 62 levels inside the row object)
  put(jl, "{\"prompt\": \"a\", \"extra_info\": " + nested(max_data_row_depth - 1) + "}\n");
  REQUIRE(load(jl).items.size() == 1);
  // one deeper: refused before parsing (dump() of the row's extra_info would recurse per level)
  put(jl, "{\"prompt\": \"a\"}\n{\"prompt\": \"b\", \"extra_info\": " + nested(max_data_row_depth) + "}\n");
  rejects<format_error>([&] { load(jl); }, {jl.string() + " line 2", "nests JSON 65 levels", "at most 64"});
  // a hostile line of 400k levels (a stack overflow in dump() before the fix)
  put(jl, "{\"prompt\": \"b\", \"extra_info\": " + nested(400000, '{', '}') + "}\n");
  rejects<format_error>([&] { load(jl); }, {"line 1", "nests JSON 400001 levels"});
  // brackets inside strings do not count
  put(jl, "{\"prompt\": \"" + nested(1000) + "\", \"extra_info\": \"\\\"[[[\"}\n");
  REQUIRE(load(jl).items.at(0).prompt == nested(1000));
  // a JSON array file, deep
  auto const ja = dir / "train.json";
  put(ja, "[{\"prompt\": \"x\", \"extra_info\": " + nested(200000) + "}]");
  rejects<format_error>([&] { load(ja); }, {ja.string(), "nests JSON"});
  // a folder given as a data file: an io_error, not an empty file with "no usable rows"
  fs::create_directories(dir / "folder.jsonl");
  rejects<io_error>([&] { load(dir / "folder.jsonl"); }, {"folder.jsonl", "is a folder"});
  // a chat message that is not an object: its preview in the message is bounded
  put(jl, "{\"prompt\": [" + nested(50) + "]}\n");
  rejects<format_error>([&] { load(jl); }, {"message 0 is array of 1 entries", "{\"role\": string"});
  fs::remove_all(dir);
}

TEST_CASE("tokenizer files: ids are exact integers in range, folders and deep text are refused", "[hardening][files]") {
  auto dir = fresh_dir("tok");
  put(dir / "merges.txt", "#version: 0.2\n");
  put(dir / "vocab.json", byte_vocab().dump());
  REQUIRE(model::BPETokenizer::from_folder(dir).vocab_size() == 257);
  auto with_id = [&](std::string const& id_text) {
    auto text = byte_vocab().dump();
    text.insert(text.size() - 1, ",\"zz\":" + id_text);
    put(dir / "vocab.json", text);
  };
  auto load = [&] { return model::BPETokenizer::from_folder(dir); };
  // 2^32 + 5 was narrowed to 5 (then "id 5 is given to two tokens", or a wrong id when 5 was free)
  with_id("4294967301");
  rejects<format_error>(load, {"vocab.json", "'zz'", "4294967301", "outside [0, 16777215]"});
  // 2^31 - 1: max_id + 1 overflowed int (undefined behaviour) and the table asked for 64 GiB
  with_id("2147483647");
  rejects<format_error>(load, {"'zz'", "2147483647"});
  with_id("18446744073709551615");
  rejects<format_error>(load, {"'zz'", "18446744073709551615"});
  with_id("-3");
  rejects<format_error>(load, {"'zz'", "-3"});
  with_id("1e300");
  rejects<format_error>(load, {"'zz'", "non-integer id"});
  with_id("7.0");
  rejects<format_error>(load, {"'zz'", "non-integer id"});
  // the constructor bounds ids too (before allocating its id table)
  rejects<config_error>([] { model::BPETokenizer({{"a", (1 << 24)}}, {}); }, {"'a'", "16777216", "largest accepted id"});
  // deep vocab.json
  put(dir / "vocab.json", "{\"a\": " + nested(100000) + "}");
  rejects<format_error>(load, {"vocab.json", "nests JSON 100001 levels"});
  // merges.txt as a folder read as an empty file: a tokenizer without merges (silent) before the fix
  put(dir / "vocab.json", byte_vocab().dump());
  fs::remove(dir / "merges.txt");
  fs::create_directories(dir / "merges.txt");
  rejects<io_error>(load, {"merges.txt", "not a regular file"});
  fs::remove_all(dir);
}

TEST_CASE("a Hugging Face folder: config.json integers exact and bounded, shards inside the folder", "[hardening][files]") {
  auto dir = fresh_dir("hf");
  auto const c = tiny();
  model::ParamLayout const lay(c);
  std::vector<float> flat(lay.size());
  model::init_params(c, flat);
  hf::export_gpt2(dir, c, flat);
  auto const good = nlohmann::json::parse(std::ifstream(dir / "config.json"));
  REQUIRE(hf::read_gpt2_config(dir) == c);
  auto with = [&](std::string const& key, std::string const& value_text) {
    auto j = good;
    j[key] = "@@";
    auto text = j.dump();
    text.replace(text.find("\"@@\""), 4, value_text);
    put(dir / "config.json", text);
  };
  auto read = [&] { return hf::read_gpt2_config(dir); };
  // 2^32 + 1 layers were read as 1 layer
  with("n_layer", "4294967297");
  rejects<config_error>(read, {"config.json", "n_layer = 4294967297", "out of range"});
  // a float where an int belongs: get<int>() converted it (undefined behaviour for 1e300)
  with("n_embd", "1e300");
  rejects<config_error>(read, {"n_embd", "not an integer"});
  with("vocab_size", "300.0");
  rejects<config_error>(read, {"vocab_size", "not an integer"});
  with("n_positions", "-5");
  rejects<config_error>(read, {"n_positions", "out of range"});
  with("n_inner", "1e30");
  rejects<config_error>(read, {"n_inner", "not an integer"});
  // a wrong JSON type for model_type escaped as nlohmann's type_error
  with("model_type", "5");
  rejects<config_error>(read, {"model_type = 5", "not a string"});
  with("layer_norm_epsilon", "\"small\"");
  rejects<config_error>(read, {"layer_norm_epsilon", "not a number"});
  // sizes whose parameter count overflows int64 in ParamLayout (4 * n_embd^2 from n_embd = 2^31)
  with("n_embd", "2147483646");
  rejects<config_error>(read, {"parameters", "limit of 2^36"});
  with("n_layer", "100000");
  rejects<config_error>(read, {"n_layer", "4096"});
  // deep config.json
  put(dir / "config.json", "{\"a\": " + nested(100000) + "}");
  rejects<format_error>(read, {"config.json", "nests JSON"});
  // a config describing a model larger than the weight files: refused before allocating it
  {
    auto j = good;
    j["n_layer"] = 2000;
    j["n_embd"] = 1024;
    j["n_head"] = 16;
    put(dir / "config.json", j.dump());
  }
  auto const big = read();
  rejects<format_error>([&] { hf::load_gpt2_weights(dir, big); }, {"describes", "weight files hold", "do not belong together"});
  put(dir / "config.json", good.dump());
  // shard index: names leaving the folder are refused
  fs::rename(dir / "model.safetensors", dir / "model-00001-of-00001.safetensors");
  for (std::string const bad : {"../model-00001-of-00001.safetensors", "/etc/passwd", "sub/x.safetensors", "..", ""}) {
    put(dir / "model.safetensors.index.json",
        nlohmann::json{{"weight_map", {{"transformer.wte.weight", bad}}}}.dump());
    rejects<format_error>([&] { hf::weight_files(dir); }, {"weight_map['transformer.wte.weight']", "not a plain file name"});
  }
  put(dir / "model.safetensors.index.json", nlohmann::json{{"weight_map", {{"transformer.wte.weight", "model-00001-of-00001.safetensors"}}}}.dump());
  REQUIRE(hf::load_gpt2(dir).params == flat);
  fs::remove_all(dir);
}

TEST_CASE("GPTConfig::parameter_count equals the layout's size and bounds every size", "[hardening][files]") {
  std::mt19937 rng(13);
  for (int i = 0; i < 200; ++i) {
    model::GPTConfig c;
    c.n_head = 1 + int(rng() % 4);
    c.n_embd = c.n_head * (1 + int(rng() % 8));
    c.n_layer = 1 + int(rng() % 5);
    c.vocab_size = 2 + int(rng() % 100);
    c.max_seq_len = 2 + int(rng() % 30);
    c.value_head = rng() % 2;
    REQUIRE(c.parameter_count() == static_cast<std::int64_t>(model::ParamLayout(c).size()));
  }
  model::GPTConfig c{.n_head = 1, .n_embd = 2147483647};  // 12 n_embd^2 overflows int64
  REQUIRE(c.parameter_count() == -1);
  rejects<config_error>([&] { c.validate(); }, {"more than 2^63 parameters"});
  c.n_embd = 65536;  // 12 * 2^32 * 2 layers: fits int64, above the bound
  rejects<config_error>([&] { c.validate(); }, {"parameters, above the limit of 2^36"});
}

TEST_CASE("an rlflow weights file's GPT config: fields exact (export reads it validated)", "[hardening][files]") {
  auto dir = fresh_dir("gptcfg");
  auto const c = tiny();
  std::vector<float> flat(model::ParamLayout(c).size());
  model::init_params(c, flat);
  engine::save_weights(dir / "w.safetensors", c, flat);
  REQUIRE(engine::checkpoint_config(engine::safetensors::File::load(dir / "w.safetensors")) == c);
  for (std::string const bad : {R"({"vocab_size":300.0,"max_seq_len":8,"n_layer":1,"n_head":2,"n_embd":4,"value_head":false})",
                                R"({"vocab_size":300,"max_seq_len":8,"n_layer":4294967297,"n_head":2,"n_embd":4,"value_head":false})",
                                R"({"vocab_size":300,"max_seq_len":8,"n_layer":1,"n_head":2,"n_embd":4,"value_head":false,"seed":-1e300})",
                                R"({"vocab_size":300,"max_seq_len":8,"n_layer":1,"n_head":2,"n_embd":4,"value_head":"no"})"}) {
    std::vector<engine::safetensors::TensorRecord> recs{
        {"x", DType::float32, {1}, std::as_bytes(std::span<float const>(flat.data(), 1))}};
    engine::safetensors::save(dir / "bad.safetensors", recs, {{"rlflow.gpt_config", bad}});
    auto const f = engine::safetensors::File::load(dir / "bad.safetensors");
    INFO(bad);
    CHECK_THROWS_AS(engine::checkpoint_config(f), format_error);
  }
  fs::remove_all(dir);
}

}  // namespace test_file_boundaries
