// rlflow/detail/crc32.hpp: CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320), the checksum
// of rlflow's binary formats (DataProto serialization, checkpoint manifests). Table-driven,
// constexpr table; incremental via the 'crc' argument.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace rlflow::detail {

inline constexpr std::array<std::uint32_t, 256> crc32_table = [] {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    t[i] = c;
  }
  return t;
}();

//! CRC-32 of 'n' bytes, continuing from 'crc' (pass the previous result to chain calls).
inline std::uint32_t crc32(void const* data, std::size_t n, std::uint32_t crc = 0) {
  auto const* p = static_cast<unsigned char const*>(data);
  crc = ~crc;
  for (std::size_t i = 0; i < n; ++i) crc = crc32_table[(crc ^ p[i]) & 0xffu] ^ (crc >> 8);
  return ~crc;
}
inline std::uint32_t crc32(std::span<std::byte const> bytes, std::uint32_t crc = 0) {
  return crc32(bytes.data(), bytes.size(), crc);
}

}  // namespace rlflow::detail
