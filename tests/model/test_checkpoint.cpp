// tests/model/test_checkpoint.cpp <-> include/rlflow/model/safetensors.hpp, checkpoint.hpp:
// round trips, bit-identical resume, the on-disk layout read back with plain JSON parsing,
// truncated and corrupt files (format_error, engine untouched), wrong configs, failed writes.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>
#include <rlflow/engine/checkpoint.hpp>

#include "fixtures.hpp"

namespace test_checkpoint {

using rlflow::Shape;
using rlflow::Tensor;
using namespace rlflow::engine;
namespace fs = std::filesystem;

namespace {

rlflow::model::GPTConfig cfg() {
  return {.vocab_size = 9, .max_seq_len = 10, .n_layer = 2, .n_head = 2, .n_embd = 8, .seed = 4};
}

using fixtures::TempDir;

// one optimizer step on a fixed batch: what "training" means here
void train_step(TrainingEngine& e, unsigned seed) {
  std::mt19937 g(seed);
  std::vector<std::int32_t> ids(24), mask(24, 1);
  for (auto& x : ids) x = std::int32_t(g() % 9u);
  std::vector<float> d(12);
  for (auto& x : d) x = float(int(g() % 7u) - 3) * 0.1f;
  e.zero_grad();
  e.forward_backward(Tensor::from(ids, Shape{3, 8}), Tensor::from(mask, Shape{3, 8}), 4, Tensor::from(d, Shape{3, 4}));
  e.optimizer_step();
}

std::vector<char> read_file(fs::path const& p) {
  std::ifstream in(p, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}
void write_file(fs::path const& p, std::vector<char> const& b) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(b.data(), std::streamsize(b.size()));
}

}  // namespace

TEST_CASE("checkpoint round trip gives a bit-identical resume", "[engine][checkpoint]") {
  TempDir dir;
  OptimizerConfig oc;
  oc.lr = 1e-2f;
  oc.schedule = LRSchedule::warmup_cosine;
  oc.warmup_steps = 2;
  oc.total_steps = 10;
  TrainingEngine a(cfg(), oc);
  for (unsigned s = 0; s < 3; ++s) train_step(a, s);
  save_checkpoint(dir.p / "ckpt.safetensors", a, {{"note", "three steps"}});
  TrainingEngine b(cfg(), oc);
  auto meta = load_checkpoint(dir.p / "ckpt.safetensors", b);
  REQUIRE(meta.at("note") == "three steps");
  REQUIRE(b.step() == 3);
  REQUIRE(std::equal(a.params().begin(), a.params().end(), b.params().begin()));
  REQUIRE(std::equal(a.optimizer().m().begin(), a.optimizer().m().end(), b.optimizer().m().begin()));
  REQUIRE(std::equal(a.optimizer().v().begin(), a.optimizer().v().end(), b.optimizer().v().begin()));
  for (unsigned s = 3; s < 6; ++s) {
    train_step(a, s);
    train_step(b, s);
  }
  REQUIRE(std::memcmp(a.params().data(), b.params().data(), a.params().size_bytes()) == 0);
  REQUIRE(a.lr() == b.lr());
  // weights-only files
  save_weights(dir.p / "w.safetensors", a.config(), a.params());
  auto w = load_weights(dir.p / "w.safetensors", a.config());
  REQUIRE(std::equal(w.begin(), w.end(), a.params().begin()));
  REQUIRE_THROWS_WITH(load_checkpoint(dir.p / "w.safetensors", b), Catch::Contains("weights only"));
}

TEST_CASE("the file is plain safetensors: header, offsets, little-endian floats", "[engine][checkpoint]") {
  TempDir dir;
  TrainingEngine a(cfg());
  save_weights(dir.p / "w.safetensors", a.config(), a.params());
  auto bytes = read_file(dir.p / "w.safetensors");
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= std::uint64_t(static_cast<unsigned char>(bytes[std::size_t(i)])) << (8 * i);
  REQUIRE((8 + n) % 8 == 0);
  auto h = nlohmann::json::parse(std::string(bytes.data() + 8, n));
  REQUIRE(h["__metadata__"]["format"] == "pt");
  auto const& wte = h["wte"];
  REQUIRE(wte["dtype"] == "F32");
  REQUIRE(wte["shape"] == nlohmann::json::array({9, 8}));
  std::size_t const b = wte["data_offsets"][0], e = wte["data_offsets"][1];
  REQUIRE(e - b == 9 * 8 * 4);
  auto const& lay = a.layout().find("wte");
  REQUIRE(std::memcmp(bytes.data() + 8 + n + b, a.params().data() + lay.offset, e - b) == 0);
  REQUIRE(h.size() == a.layout().tensors().size() + 1);
}

TEST_CASE("truncated or corrupt checkpoints are format errors and never a partial load", "[engine][checkpoint]") {
  TempDir dir;
  TrainingEngine a(cfg());
  train_step(a, 1);
  auto const path = dir.p / "c.safetensors";
  save_checkpoint(path, a);
  auto const good = read_file(path);
  TrainingEngine b(cfg());
  std::vector<float> const before(b.params().begin(), b.params().end());
  auto expect_untouched = [&] {
    REQUIRE(std::equal(before.begin(), before.end(), b.params().begin()));
    REQUIRE(b.step() == 0);
  };
  SECTION("truncated at many points") {
    for (std::size_t cut : {std::size_t(0), std::size_t(5), std::size_t(8), std::size_t(40), good.size() / 2, good.size() - 1}) {
      write_file(path, std::vector<char>(good.begin(), good.begin() + std::ptrdiff_t(cut)));
      INFO("cut at " << cut);
      REQUIRE_THROWS_AS(load_checkpoint(path, b), rlflow::format_error);
      expect_untouched();
    }
  }
  SECTION("a flipped data byte fails the checksum") {
    auto bad = good;
    bad[bad.size() - 100] ^= 0x10;
    write_file(path, bad);
    REQUIRE_THROWS_WITH(load_checkpoint(path, b), Catch::Contains("checksum"));
    expect_untouched();
  }
  SECTION("a corrupt header") {
    auto bad = good;
    bad[9] = '#';
    write_file(path, bad);
    REQUIRE_THROWS_AS(load_checkpoint(path, b), rlflow::format_error);
    expect_untouched();
  }
  SECTION("trailing bytes") {
    auto bad = good;
    bad.push_back(0);
    write_file(path, bad);
    REQUIRE_THROWS_WITH(load_checkpoint(path, b), Catch::Contains("cover"));
    expect_untouched();
  }
  SECTION("a different architecture is a config error") {
    auto c = cfg();
    c.n_embd = 16;
    TrainingEngine other(c);
    REQUIRE_THROWS_AS(load_checkpoint(path, other), rlflow::config_error);
  }
  SECTION("a missing file is an io error") {
    REQUIRE_THROWS_AS(load_checkpoint(dir.p / "absent.safetensors", b), rlflow::io_error);
  }
}

TEST_CASE("a failed write leaves no file behind and keeps the old one", "[engine][checkpoint]") {
  TempDir dir;
  TrainingEngine a(cfg());
  REQUIRE_THROWS_AS(save_checkpoint(dir.p / "no_such_dir" / "c.safetensors", a), rlflow::io_error);
  auto const path = dir.p / "c.safetensors";
  save_checkpoint(path, a);
  auto const first = read_file(path);
  train_step(a, 2);
  save_checkpoint(path, a);  // replaces atomically
  REQUIRE(read_file(path) != first);
  int files = 0;
  for (auto const& e : fs::directory_iterator(dir.p)) { (void)e; ++files; }
  REQUIRE(files == 1);  // no temporary left over
}

}  // namespace test_checkpoint
