// Checkpoint metadata is validated field by field (class 2): MANIFEST.json,
// latest_checkpointed_iteration.txt, the GPT config stored in safetensors metadata, and the
// safetensors tensor index (names, shapes, offsets) under its own checksum.
#include <catch2/catch.hpp>

#include <rlflow/trainer/checkpoint.hpp>
#include <rlflow/engine/checkpoint.hpp>
#include <rlflow/model/safetensors.hpp>

#include <fstream>
#include <functional>
#include <algorithm>  // std::count, std::equal
#include <fcntl.h>    // open
#include <sys/wait.h>
#include <random>
#include <unistd.h>

namespace test_checkpoint_metadata {

using namespace rlflow;
namespace fs = std::filesystem;
namespace st = rlflow::engine::safetensors;

namespace {
fs::path fresh_dir(std::string const& name) {
  auto p = fs::temp_directory_path() / ("rlflow_hardening_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}
std::string slurp(fs::path const& p) {
  auto b = rlflow::detail::read_all(p);
  return {b.begin(), b.end()};
}
void put(fs::path const& p, std::string const& s) { rlflow::detail::write_all(p, s.data(), s.size()); }

//! A committed two-file checkpoint at root/global_step_7.
fs::path make_checkpoint(fs::path const& root) {
  CheckpointWriter w(root, 7);
  w.write("a.bin", "hello");
  w.write("trainer_state.json", "{}");
  return w.commit();
}

//! Rewrites MANIFEST.json through a JSON edit.
template <class F>
void edit_manifest(fs::path const& dir, F&& f) {
  auto j = nlohmann::json::parse(slurp(dir / "MANIFEST.json"));
  f(j);
  put(dir / "MANIFEST.json", j.dump());
}
}  // namespace

TEST_CASE("a valid checkpoint verifies and its manifest reads back", "[hardening][checkpoint]") {
  auto root = fresh_dir("ok");
  auto dir = make_checkpoint(root);
  REQUIRE(verify_checkpoint(dir, {"a.bin", "trainer_state.json"}) == dir);
  auto m = read_checkpoint_manifest(dir);
  REQUIRE(m.step == 7);
  REQUIRE(m.files.size() == 2);
  REQUIRE(m.files.at("a.bin").first == 5);
  REQUIRE(latest_checkpoint_step(root) == 7);
  fs::remove_all(root);
}

TEST_CASE("every damaged manifest field is a format_error naming the file and the field", "[hardening][checkpoint]") {
  auto root = fresh_dir("manifest");
  auto dir = make_checkpoint(root);
  auto const original = slurp(dir / "MANIFEST.json");
  struct Case {
    const char* what;
    std::function<void(nlohmann::json&)> edit;
    const char* expect;
  };
  std::vector<Case> cases = {
      {"float step", [](auto& j) { j["step"] = 7.5; }, "'step' must be an integer"},
      {"huge float step", [](auto& j) { j["step"] = 1e300; }, "'step' must be an integer"},
      {"negative step", [](auto& j) { j["step"] = -1; }, "'step' = -1 is out of range"},
      {"step of another directory", [](auto& j) { j["step"] = 8; }, "but the directory is 'global_step_7'"},
      {"string version", [](auto& j) { j["version"] = "1"; }, "'version' must be an integer"},
      {"future version", [](auto& j) { j["version"] = 2; }, "'version' = 2"},
      {"wrong format", [](auto& j) { j["format"] = "other"; }, "field 'format'"},
      {"no format", [](auto& j) { j.erase("format"); }, "lacks the field 'format'"},
      {"files missing", [](auto& j) { j.erase("files"); }, "lacks the field 'files'"},
      {"no files listed", [](auto& j) { j["files"] = nlohmann::json::object(); }, "verifies nothing"},
      {"files is a list", [](auto& j) { j["files"] = nlohmann::json::array({1}); }, "non-empty object"},
      {"float size", [](auto& j) { j["files"]["a.bin"]["size"] = 5.0; }, "'size' must be an integer"},
      {"negative size", [](auto& j) { j["files"]["a.bin"]["size"] = -5; }, "'size' = -5 is out of range"},
      {"crc above 32 bits", [](auto& j) { j["files"]["a.bin"]["crc32"] = 1ull << 40; }, "out of range"},
      {"crc as a string", [](auto& j) { j["files"]["a.bin"]["crc32"] = "x"; }, "'crc32' must be an integer"},
      {"file entry not an object", [](auto& j) { j["files"]["a.bin"] = 3; }, "expected a JSON object"},
      {"path traversal", [](auto& j) { j["files"]["../a.bin"] = j["files"]["a.bin"]; }, "not a plain file name"},
      {"manifest is an array", [](auto& j) { j = nlohmann::json::array(); }, "expected a JSON object"},
  };
  for (auto const& c : cases) {
    INFO(c.what);
    put(dir / "MANIFEST.json", original);
    edit_manifest(dir, c.edit);
    REQUIRE_THROWS_AS(verify_checkpoint(dir), format_error);
    REQUIRE_THROWS_WITH(verify_checkpoint(dir), Catch::Contains(c.expect) && Catch::Contains("MANIFEST.json"));
  }
  // bytes that are not JSON at all
  put(dir / "MANIFEST.json", "{\"format\": \"rlflow-checkpoint\", ");
  REQUIRE_THROWS_AS(verify_checkpoint(dir), format_error);
  put(dir / "MANIFEST.json", std::string("\xff\xfe\x00\x01", 4));
  REQUIRE_THROWS_AS(verify_checkpoint(dir), format_error);
  // a required file that the manifest does not list
  put(dir / "MANIFEST.json", original);
  REQUIRE_THROWS_WITH(verify_checkpoint(dir, {"actor.safetensors"}), Catch::Contains("does not list 'actor.safetensors'"));
  fs::remove_all(root);
}

TEST_CASE("the tracker file holds one step number or is a format_error", "[hardening][checkpoint]") {
  auto root = fresh_dir("tracker");
  auto const tracker = root / checkpoint_tracker_file;
  for (std::string bad : {"", "abc", "-3", "12abc", "1 2", "99999999999999999999", "1e3", "0x10", "3.0"}) {
    INFO("content '" << bad << "'");
    put(tracker, bad);
    REQUIRE_THROWS_AS(latest_checkpoint_step(root), format_error);
  }
  put(tracker, " 12\n");
  REQUIRE(latest_checkpoint_step(root) == 12);
  fs::remove_all(root);
}

TEST_CASE("temporary folders of a killed writer are removed, a live writer's are kept", "[hardening][checkpoint]") {
  auto root = fresh_dir("stale");
  pid_t dead = ::fork();  // a pid that surely no longer runs
  if (dead == 0) ::_exit(0);
  int status = 0;
  ::waitpid(dead, &status, 0);
  auto const stale_dir = root / (".tmp_global_step_4_" + std::to_string(dead));
  auto const stale_file = root / ("metrics.jsonl.tmp." + std::to_string(dead));
  auto const live_dir = root / ".tmp_global_step_5_1";  // pid 1 runs (init)
  fs::create_directories(stale_dir);
  put(stale_dir / "actor.safetensors", "partial");
  put(stale_file, "partial");
  fs::create_directories(live_dir);
  auto const keep = root / "notes.tmp.txt";
  put(keep, "user file");
  REQUIRE(remove_stale_checkpoint_temps(root) == 2);
  REQUIRE(!fs::exists(stale_dir));
  REQUIRE(!fs::exists(stale_file));
  REQUIRE(fs::exists(live_dir));
  REQUIRE(fs::exists(keep));
  fs::remove_all(root);
}

TEST_CASE("prune_checkpoints keeps the newest K and the tracked one", "[hardening][checkpoint]") {
  auto root = fresh_dir("prune");
  for (int s : {2, 4, 6, 8}) {
    CheckpointWriter w(root, s);
    w.write("x", "1");
    w.commit();
  }
  prune_checkpoints(root, 2);
  REQUIRE(checkpoint_steps(root) == std::vector<std::int64_t>{6, 8});
  prune_checkpoints(root, 1);
  REQUIRE(checkpoint_steps(root) == std::vector<std::int64_t>{8});
  fs::remove_all(root);
}

namespace {
model::GPTConfig tiny_gpt() { return {.vocab_size = 8, .max_seq_len = 8, .n_layer = 1, .n_head = 2, .n_embd = 8}; }
//! Rewrites the JSON header of a safetensors file (keeps the data section).
template <class F>
void edit_header(fs::path const& p, F&& f) {
  auto bytes = slurp(p);
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= std::uint64_t(static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)])) << (8 * i);
  auto h = nlohmann::ordered_json::parse(bytes.substr(8, n));
  f(h);
  std::string text = h.dump();
  while (text.size() % 8) text.push_back(' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>(text.size() >> (8 * i));
  put(p, out + text + bytes.substr(8 + n));
}
}  // namespace

TEST_CASE("a GPT config in the metadata with floats or out-of-range integers is a format_error", "[hardening][checkpoint]") {
  auto root = fresh_dir("gptcfg");
  auto const cfg = tiny_gpt();
  model::ParamLayout lay(cfg);
  std::vector<float> w(lay.size(), 0.5f);
  auto const p = root / "w.safetensors";
  for (auto bad : {R"({"vocab_size":8.5,"max_seq_len":8,"n_layer":1,"n_head":2,"n_embd":8,"value_head":false})",
                   R"({"vocab_size":1e300,"max_seq_len":8,"n_layer":1,"n_head":2,"n_embd":8,"value_head":false})",
                   R"({"vocab_size":4294967304,"max_seq_len":8,"n_layer":1,"n_head":2,"n_embd":8,"value_head":false})",
                   R"({"vocab_size":-8,"max_seq_len":8,"n_layer":1,"n_head":2,"n_embd":8,"value_head":false})",
                   R"({"vocab_size":8,"max_seq_len":8,"n_layer":1,"n_head":2,"n_embd":8,"value_head":1})",
                   R"({"vocab_size":8,"max_seq_len":8,"n_layer":1,"n_head":2,"n_embd":8})", R"([1,2])", R"(nope)"}) {
    INFO(bad);
    engine::save_weights(p, cfg, w);
    edit_header(p, [&](auto& h) {
      h["__metadata__"]["rlflow.gpt_config"] = bad;
    });
    REQUIRE_THROWS_AS(engine::load_weights(p, cfg), format_error);
  }
  fs::remove_all(root);
}

TEST_CASE("safetensors: swapped offsets of two same-shape tensors fail the index checksum", "[hardening][safetensors]") {
  auto root = fresh_dir("swap");
  auto const p = root / "t.safetensors";
  std::vector<float> a{1, 2, 3, 4}, b{5, 6, 7, 8};
  st::save(p, {{"a", DType::float32, {4}, std::as_bytes(std::span<float const>(a))},
               {"b", DType::float32, {4}, std::as_bytes(std::span<float const>(b))}});
  REQUIRE(st::File::load(p).bytes("a").size() == 16);
  edit_header(p, [](auto& h) { std::swap(h["a"]["data_offsets"], h["b"]["data_offsets"]); });
  REQUIRE_THROWS_WITH(st::File::load(p), Catch::Contains("index checksum"));
  // shapes that overflow numel are rejected before any size arithmetic
  st::save(p, {{"a", DType::float32, {4}, std::as_bytes(std::span<float const>(a))}});
  edit_header(p, [](auto& h) {
    h["a"]["shape"] = {1ull << 62, 1ull << 62, 4};
    h["__metadata__"].erase("rlflow.index_fnv1a64");
  });
  REQUIRE_THROWS_WITH(st::File::load(p), Catch::Contains("overflows"));
  edit_header(p, [](auto& h) { h["a"]["shape"] = {18446744073709551615ull}; });
  REQUIRE_THROWS_AS(st::File::load(p), format_error);
  // a directory is not a file
  REQUIRE_THROWS_AS(st::File::load(root), io_error);
  fs::remove_all(root);
}

namespace {
//! What 'f' writes to stderr (fd 2) while it runs.
template <class F>
std::string stderr_of(F&& f) {
  auto const p = fs::temp_directory_path() / ("rlflow_hardening_stderr_" + std::to_string(::getpid()));
  std::fflush(stderr);
  int const saved = ::dup(2);
  int const fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ::dup2(fd, 2);
  ::close(fd);
  try {
    f();
  } catch (...) {
    std::fflush(stderr);
    ::dup2(saved, 2);
    ::close(saved);
    throw;
  }
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::string s = slurp(p);
  fs::remove(p);
  return s;
}
void rename_meta(nlohmann::ordered_json& h, std::string const& from, std::string const& to) {
  auto& m = h["__metadata__"];
  m[to] = m[from];
  m.erase(from);
}
}  // namespace

TEST_CASE("safetensors: a file rlflow wrote must carry its checksums, a foreign file loads with a notice",
          "[hardening][safetensors]") {
  auto root = fresh_dir("marker");
  auto const cfg = tiny_gpt();
  engine::TrainingEngine a(cfg);
  auto const p = root / "c.safetensors";
  engine::save_checkpoint(p, a);
  REQUIRE(st::File::load(p).metadata().at("rlflow.writer") == "rlflow");
  auto const good = slurp(p);
  // the data checksum key renamed by one byte, then one weight byte changed
  edit_header(p, [](auto& h) { rename_meta(h, "rlflow.fnv1a64", "rlflow.fnv1a65"); });
  auto bytes = slurp(p);
  bytes.back() = static_cast<char>(bytes.back() ^ 0x40);
  put(p, bytes);
  engine::TrainingEngine b(cfg);
  std::vector<float> const before(b.params().begin(), b.params().end());
  REQUIRE_THROWS_AS(engine::load_checkpoint(p, b), format_error);
  REQUIRE_THROWS_WITH(engine::load_checkpoint(p, b), Catch::Contains(p.string()) && Catch::Contains("'rlflow.fnv1a64'"));
  REQUIRE(std::equal(before.begin(), before.end(), b.params().begin()));  // engine untouched
  // the index checksum key renamed: also a format_error naming it
  put(p, good);
  edit_header(p, [](auto& h) { rename_meta(h, "rlflow.index_fnv1a64", "rlflow.index_fnv1a6"); });
  REQUIRE_THROWS_WITH(st::File::load(p), Catch::Contains(p.string()) && Catch::Contains("'rlflow.index_fnv1a64'"));
  // the marker renamed as well: the other rlflow keys still say rlflow wrote it
  put(p, good);
  edit_header(p, [](auto& h) {
    rename_meta(h, "rlflow.writer", "rlflow.writes");
    rename_meta(h, "rlflow.fnv1a64", "xlflow.fnv1a64");
  });
  REQUIRE_THROWS_WITH(st::File::load(p), Catch::Contains("'rlflow.fnv1a64'"));
  // the unedited file loads silently
  put(p, good);
  engine::TrainingEngine c(cfg);
  REQUIRE(stderr_of([&] { engine::load_checkpoint(p, c); }).empty());
  // a foreign file (no rlflow key at all) loads, with one line on stderr naming it
  auto const q = root / "foreign.safetensors";
  std::string text = R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  while (text.size() % 8) text.push_back(' ');
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[static_cast<std::size_t>(i)] = static_cast<char>(text.size() >> (8 * i));
  put(q, file + text + std::string(4, '\0'));
  std::size_t n = 0;
  std::string const note = stderr_of([&] { n = st::File::load(q).bytes("t").size(); });
  REQUIRE(n == 4);
  REQUIRE(std::count(note.begin(), note.end(), '\n') == 1);
  REQUIRE_THAT(note, Catch::Contains(q.string()) && Catch::Contains("no rlflow checksum"));
  fs::remove_all(root);
}

}  // namespace test_checkpoint_metadata
