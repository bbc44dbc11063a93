// Fuzz target: safetensors::File (a file from disk or another tool) and the GPT config in its
// metadata (engine::detail::check_config). Silent accept: an rlflow-written file (an "rlflow."
// metadata key and the index checksum present) accepted with tensors (names, dtypes, shapes or
// bytes) that differ from every seed's.
#define RLFLOW_FUZZ_NAME "safetensors"
#include "fuzz/fuzz_driver.hpp"

#include <rlflow/engine/checkpoint.hpp>
#include <rlflow/model/safetensors.hpp>

#include <set>
#include <unistd.h>

using namespace rlflow;
namespace st = rlflow::engine::safetensors;

namespace {
model::GPTConfig tiny_gpt() { return {.vocab_size = 6, .max_seq_len = 4, .n_layer = 1, .n_head = 1, .n_embd = 2}; }
std::string file_bytes(std::vector<st::TensorRecord> const& recs, std::map<std::string, std::string> meta = {}) {
  auto const p = std::filesystem::temp_directory_path() / ("rlflow_fuzz_st_" + std::to_string(::getpid()) + ".safetensors");
  st::save(p, recs, std::move(meta));
  std::ifstream in(p, std::ios::binary);
  std::string s{std::istreambuf_iterator<char>(in), {}};
  std::filesystem::remove(p);
  return s;
}
//! What a load hands out: names, dtypes, shapes, bytes.
std::string digest(st::File const& f) {
  std::string d;
  for (auto const& n : f.names()) {
    auto const& i = f.info(n);
    d += n + "|" + st::dtype_code(i.dtype) + "|";
    for (auto x : i.shape) d += std::to_string(x) + ",";
    auto b = f.bytes(n);
    d.append(reinterpret_cast<char const*>(b.data()), b.size());
    d += "#";
  }
  return d;
}
std::set<std::string>& seed_digests() {
  static std::set<std::string> s;
  return s;
}
}  // namespace

std::vector<std::string> fuzz_seeds() {
  std::vector<std::string> out;
  std::vector<float> a{1, 2, 3, 4, 5, 6}, b{7, 8};
  std::vector<std::int64_t> c{1, -1};
  out.push_back(file_bytes({{"a", DType::float32, {2, 3}, std::as_bytes(std::span<float const>(a))},
                            {"b", DType::float32, {2}, std::as_bytes(std::span<float const>(b))},
                            {"c", DType::int64, {2}, std::as_bytes(std::span<std::int64_t const>(c))}}));
  out.push_back(file_bytes({{"x", DType::float32, {1, 2}, std::as_bytes(std::span<float const>(b))},
                            {"y", DType::float32, {1, 2}, std::as_bytes(std::span<float const>(b))}}));
  auto const cfg = tiny_gpt();
  model::ParamLayout lay(cfg);
  std::vector<float> w(lay.size(), 0.25f);
  std::vector<st::TensorRecord> recs;
  for (auto const& t : lay.tensors())
    recs.push_back({t.name, DType::float32, t.shape, std::as_bytes(std::span<float const>(w).subspan(t.offset, t.numel))});
  out.push_back(file_bytes(recs, {{"format", "pt"}, {"rlflow.gpt_config", engine::detail::config_json(cfg)}}));
  // a foreign file (no rlflow checksums): structure checks only
  out.push_back(std::string("\x28\0\0\0\0\0\0\0", 8) + R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})" +
                std::string(4, '\0'));
  for (auto const& s : out) {
    std::vector<std::byte> bytes(s.size());
    if (!bytes.empty()) std::memcpy(bytes.data(), s.data(), s.size());
    try {
      seed_digests().insert(digest(st::File::from_bytes(std::move(bytes))));
    } catch (rlflow::error const&) {
    }
  }
  return out;
}

fuzz::outcome fuzz_one(std::string_view in) {
  static bool const seeded = (fuzz_seeds(), true);  // the seed digests, in libFuzzer mode too
  (void)seeded;
  std::vector<std::byte> bytes(in.size());
  if (!bytes.empty()) std::memcpy(bytes.data(), in.data(), in.size());
  auto f = st::File::from_bytes(std::move(bytes), "<fuzz>");
  if (f.metadata().count("rlflow.gpt_config")) {
    auto const cfg = tiny_gpt();
    engine::detail::check_config(f, cfg);  // a format_error or config_error unless it matches
  }
  // rlflow wrote it (an "rlflow." key) and its index is checksummed: what loads must be a seed's
  bool const checksummed = f.rlflow_written() && f.metadata().count("rlflow.index_fnv1a64");
  if (checksummed && !seed_digests().count(digest(f))) return fuzz::outcome::silent_accept;
  return fuzz::outcome::accepted;
}
