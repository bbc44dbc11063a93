// rlflow/data_proto/padding.hpp: padding a DataProto to a divisor and back (verl:
// pad_dataproto_to_divisor / unpad_dataproto, DataProto.padding; named policies, never mutating). Part of
// rlflow/core/data_proto.hpp.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include <rlflow/data_proto/core.hpp>

namespace rlflow {

//! verl: pad_dataproto_to_divisor(data, size_divisor).
inline std::pair<DataProto, std::int64_t> pad_dataproto_to_divisor(DataProto const& d, std::int64_t divisor) {
  return d.pad_to_divisor(divisor);
}
//! verl: unpad_dataproto(data, pad_size).
inline DataProto unpad_dataproto(DataProto const& d, std::int64_t pad_size) { return d.unpad(pad_size); }

}  // namespace rlflow

#if RLFLOW_DEFINE_BODIES
#include <rlflow/data_proto/impl/padding.ipp>
#endif
