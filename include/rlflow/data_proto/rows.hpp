// rlflow/data_proto/rows.hpp: DataProto's row and key operations: view, gather, slice, index,
// mask, select, pop, rename, union, chunk, split, concat (with meta_info merging), repeat,
// sample_level_repeat, fold / unfold of the batch dimension. Part of rlflow/core/data_proto.hpp.
#pragma once
#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <rlflow/data_proto/core.hpp>

namespace rlflow {

//! verl: fold_batch_dim / unfold_batch_dim as free functions (return new objects).
inline DataProto fold_batch_dim(DataProto const& d, std::int64_t new_batch_size) { return d.fold_batch_dim(new_batch_size); }
inline DataProto unfold_batch_dim(DataProto const& d) { return d.unfold_batch_dim(); }

}  // namespace rlflow

#if RLFLOW_DEFINE_BODIES
#include <rlflow/data_proto/impl/rows.ipp>
#endif
