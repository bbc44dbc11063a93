// Fuzz target: DataProto::deserialize (bytes from another process or a file). The first input
// byte picks the mode: odd = recompute the CRC-32C trailer after mutation (so the parser behind
// the checksum is explored), even = bytes as they are. Silent accept: accepted bytes that do not
// serialize back to themselves (a lossy or non-canonical parse).
#include "fuzz/fuzz_driver.hpp"

#include <rlflow/core/data_proto.hpp>

namespace fuzz_data_proto {

using namespace rlflow;

std::vector<std::string> fuzz_seeds() {
  std::vector<std::string> out;
  auto add = [&](DataProto const& d) {
    auto b = d.serialize();
    std::string s(reinterpret_cast<char const*>(b.data()), b.size());
    out.push_back("\x01" + s);
    out.push_back(std::string("\x00", 1) + s);
  };
  NonTensorColumn uid, rm;
  for (int i = 0; i < 4; ++i) {
    uid.emplace_back(std::string("u") + std::to_string(i));
    rm.emplace_back(Dict{{"ground_truth", std::string("abc")}, {"n", static_cast<std::int64_t>(i)}, {"x", 0.5 * i}});
  }
  Meta meta;
  meta.set("temperature", 1.0);
  meta.set("do_sample", true);
  add(DataProto::from_dict({{"input_ids", Tensor::zeros(DType::int32, Shape{4, 3})},
                            {"log_probs", Tensor::full(Shape{4, 2}, 0.25f)},
                            {"seed", Tensor::full(Shape{4}, std::int64_t{7})}},
                           {{"uid", uid}, {"reward_model", rm}}, meta));
  add(DataProto::from_dict({{"mask", Tensor::zeros(DType::uint8, Shape{2, 2, 2})}}));
  add(DataProto::from_dict({}, {{"uid", uid}}));
  add(DataProto{});
  return out;
}

fuzz::outcome fuzz_one(std::string_view in) {
  if (in.empty()) throw format_error("empty input");
  std::vector<std::byte> bytes(in.size() - 1);
  if (!bytes.empty()) std::memcpy(bytes.data(), in.data() + 1, bytes.size());
  if ((static_cast<unsigned char>(in[0]) & 1u) && bytes.size() >= 4) {
    std::uint32_t const crc = rlflow::detail::crc32c(bytes.data(), bytes.size() - 4);
    for (int i = 0; i < 4; ++i) bytes[bytes.size() - 4 + static_cast<std::size_t>(i)] = static_cast<std::byte>(crc >> (8 * i));
  }
  DataProto d = DataProto::deserialize(bytes);
  d.check_consistency("fuzz");
  if (d.size() >= 2) (void)DataProto::concat(d.chunk(2));
  if (d.size() <= 64) (void)d.repeat(3);  // forms new row counts: Shape::numel must not overflow
  auto again = d.serialize();
  if (again.size() != bytes.size() || std::memcmp(again.data(), bytes.data(), bytes.size()) != 0) return fuzz::outcome::silent_accept;
  return fuzz::outcome::accepted;
}

}  // namespace fuzz_data_proto
RLFLOW_FUZZ_TARGET(data_proto)
