// rlflow/core/data_proto.hpp: DataProto, the record that flows between the stages of RL post-training
// (verl's verl/protocol.py DataProto): named tensor columns sharing the first dimension
// ('batch'), named columns of host Values ('non_tensor_batch') and an ordered map of Values
// ('meta_info'). Defines the row operations (slice, index, mask, chunk, split, concat, repeat,
// reorder, padding, fold/unfold, mini-batch iteration), the key operations (select, pop,
// rename, union) and a self-describing, versioned, checksummed binary format (bytes and files).
// Value semantics: derived objects COPY meta_info and non-tensor Values (verl shares them by
// reference) and share tensor storage where the rows are contiguous (slice/chunk/split are
// zero-copy views). Does not move data between devices; the format carries host tensors only.
//
// This umbrella includes the parts, one concept per header (include this one):
//   data_proto/core.hpp           the class, DataProtoItem, columns, consistency, describe, ==
//   data_proto/rows.hpp           row and key operations (slice ... concat, repeat, fold/unfold)
//   data_proto/padding.hpp        padding to a divisor and back
//   data_proto/iterator.hpp       MiniBatchIterator (make_iterator)
//   data_proto/serialization.hpp  the binary format, save / load
#pragma once
#include <rlflow/data_proto/core.hpp>
#include <rlflow/data_proto/rows.hpp>
#include <rlflow/data_proto/padding.hpp>
#include <rlflow/data_proto/iterator.hpp>
#include <rlflow/data_proto/serialization.hpp>
