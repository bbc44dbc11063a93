// rlflow/core/tensorboard.hpp: TensorBoard event files for trainer.logger=tensorboard: the record
// framing (length, masked CRC32C of the length, data, masked CRC32C of the data) and a scalar
// writer. The writer's body is in src/tensorboard/ and needs protobuf (libprotobuf-dev,
// protobuf-compiler); it exists where RLFLOW_HAS_TENSORBOARD is defined (the rlflow_compiled
// target defines it when CMake found protobuf).
// verl: Tracking's 'tensorboard' backend (torch.utils.tensorboard.SummaryWriter).
#pragma once
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include <rlflow/core/metrics.hpp>  // Metrics

namespace rlflow {

namespace detail {

//! CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) of 'data', bit by bit.
constexpr std::uint32_t crc32c(std::string_view data) {
  std::uint32_t crc = 0xFFFFFFFFu;
  for (char ch : data) {
    crc ^= static_cast<std::uint8_t>(ch);
    for (int b = 0; b < 8; ++b) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

//! TensorFlow's record checksum: the CRC rotated right by 15 bits plus 0xa282ead8.
constexpr std::uint32_t masked_crc32c(std::string_view data) {
  std::uint32_t const c = crc32c(data);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

//! One framed record: uint64 length, its masked CRC, the data, the data's masked CRC (little endian).
inline std::string tfrecord(std::string_view data) {
  auto const le = [](std::uint64_t v, int bytes) {
    std::string s;
    for (int i = 0; i < bytes; ++i) s += static_cast<char>((v >> (8 * i)) & 0xFF);
    return s;
  };
  std::string const len = le(data.size(), 8);
  std::string out = len + le(masked_crc32c(len), 4);
  out += data;
  out += le(masked_crc32c(data), 4);
  return out;
}

}  // namespace detail

#if defined(RLFLOW_HAS_TENSORBOARD)
//! Writes scalars as TensorBoard events to 'dir'/events.out.tfevents.<seconds>.<host>.rlflow: a
//! file_version event first, then one Event (wall_time, step, a Summary of simple_value floats)
//! per add_scalars; non-finite values are skipped. Flushed after each event.
class TensorBoardWriter {
 public:
  explicit TensorBoardWriter(std::filesystem::path const& dir);
  void add_scalars(std::int64_t step, Metrics const& m);
  std::filesystem::path const& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::ofstream out_;
};
#endif

}  // namespace rlflow
