// rlflow/data_proto/serialization.hpp: DataProto's self-describing, versioned, checksummed binary
// format (serialize / deserialize, save / load with an atomic rename). Part of rlflow/core/data_proto.hpp.
#pragma once
#include <cstdint>
#include <cstdio>       // std::rename, std::remove
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <unordered_set>  // duplicate-key checks in the deserializer
#include <vector>

#include <rlflow/data_proto/core.hpp>
#include <rlflow/detail/serialize.hpp>

namespace rlflow {

// ---- serialization --------------------------------------------------------------------------
//
// Format version 1 (all integers little-endian):
//   header  : magic "RLFDPROT" (8) | u32 version | u32 flags (0) | u64 body_bytes
//   body    : u8 has_batch | i64 batch_size | u32 n_tensors
//             n_tensors x { u32 key_len, key | u8 dtype | u8 rank | rank x i64 dim | raw bytes }
//             u32 n_non_tensor x { u32 key_len, key | u64 rows | rows x value }
//             meta: u64 n x { u32 key_len, key | value }
//   value   : u8 kind (0 none, 1 bool, 2 int, 3 float, 4 string, 5 list, 6 dict) then
//             bool u8 0/1 | int i64 | float f64 bits | string u64 len + bytes |
//             list u64 n + n values | dict u64 n + n x (u32 key_len, key, value)
//   trailer : u32 CRC-32C of every preceding byte

namespace detail {
inline constexpr std::size_t dp_header_bytes = 24;
inline constexpr std::size_t dp_trailer_bytes = 4;
}  // namespace detail

}  // namespace rlflow

#if RLFLOW_DEFINE_BODIES
#include <rlflow/data_proto/impl/serialization.ipp>
#endif
