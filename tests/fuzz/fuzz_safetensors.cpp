// Fuzz target: safetensors::File (a file from disk or another tool), the GPT config in its
// metadata (engine::detail::check_config) and the F32 / BF16 / F16 weights a model folder converts
// to float32 (model::hf::tensor_as_f32). Silent accept: an rlflow-written file (an "rlflow."
// metadata key and the index checksum present) accepted with tensors (names, dtypes, shapes or
// bytes) that differ from every seed's, or a converted value that differs from an independent
// decoding of its bits.
#include "fuzz/fuzz_driver.hpp"

#include <rlflow/engine/checkpoint.hpp>
#include <rlflow/model/hf_folder.hpp>
#include <rlflow/model/safetensors.hpp>

#include <bit>
#include <cmath>
#include <set>
#include <unistd.h>

namespace fuzz_safetensors {

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
//! A foreign file from its header JSON and data bytes (8-byte little-endian header length first).
std::string raw_file(std::string const& header, std::string const& data) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[std::size_t(i)] = char((header.size() >> (8 * i)) & 0xff);
  return s + header + data;
}
//! IEEE binary16 to float, written out from the format (sign, 5-bit exponent, 10-bit fraction).
float half_bits_to_float(std::uint16_t h) {
  int const sign = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  float v;
  if (e == 0) v = std::ldexp(float(m), -24);  // zero and subnormals: m * 2^-24
  else if (e == 31) v = m ? NAN : INFINITY;
  else v = std::ldexp(float(1024 + m), e - 25);
  return sign ? -v : v;
}
//! The converted value equals the independent decoding (NaN: NaN; otherwise the same bits).
bool same_value(float got, float want) {
  if (std::isnan(want)) return std::isnan(got);
  return std::bit_cast<std::uint32_t>(got) == std::bit_cast<std::uint32_t>(want);
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
  // half-precision weights as Hugging Face folders hold them: BF16 (1.0, -2.5) and F16 (1.0, 65504, a subnormal, -0)
  out.push_back(raw_file(R"({"h":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]},"f":{"dtype":"F16","shape":[2,2],"data_offsets":[4,12]}})",
                         std::string("\x80\x3f\x20\xc0" "\x00\x3c\xff\x7b\x01\x00\x00\x80", 12)));
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
  for (auto const& n : f.names()) {  // the weights a model folder reads, as float32
    DType const dt = f.info(n).dtype;
    if (dt != DType::float32 && dt != DType::bfloat16 && dt != DType::float16) continue;
    std::vector<float> const v = model::hf::tensor_as_f32(f, n);
    auto const b = f.bytes(n);
    std::size_t const w = dt == DType::float32 ? 4 : 2;
    if (v.size() * w != b.size()) return fuzz::outcome::silent_accept;
    for (std::size_t i = 0; i < v.size(); ++i) {
      std::uint32_t u = 0;
      std::memcpy(&u, b.data() + i * w, w);
      float const want = dt == DType::float32    ? std::bit_cast<float>(u)
                         : dt == DType::bfloat16 ? std::bit_cast<float>(u << 16)
                                                 : half_bits_to_float(std::uint16_t(u));
      if (!same_value(v[i], want)) return fuzz::outcome::silent_accept;
    }
  }
  // rlflow wrote it (an "rlflow." key) and its index is checksummed: what loads must be a seed's
  bool const checksummed = f.rlflow_written() && f.metadata().count("rlflow.index_fnv1a64");
  if (checksummed && !seed_digests().count(digest(f))) return fuzz::outcome::silent_accept;
  return fuzz::outcome::accepted;
}

}  // namespace fuzz_safetensors
RLFLOW_FUZZ_TARGET(safetensors)
