// rlflow/data_proto/impl/padding.ipp: the bodies of rlflow/data_proto/padding.hpp's non-template functions
// (included by that header when RLFLOW_DEFINE_BODIES; see rlflow/core/config.hpp).
#pragma once

namespace rlflow {

RLFLOW_DECL DataProto DataProto::padded(std::int64_t pad_size, PadPolicy policy) const {
  if (pad_size < 0) throw value_error(msg("rlflow::DataProto::padded: pad_size ", pad_size, " must be >= 0"));
  if (pad_size == 0) return *this;
  std::int64_t const n = size();
  if (n == 0)
    throw value_error(msg("rlflow::DataProto::padded: cannot pad an empty DataProto by ", pad_size,
                          " rows: there is no row to copy; skip padding when size() == 0"));
  check_rows_formed("padded", rows_plus("padded", n, pad_size));
  std::vector<std::int64_t> idx(static_cast<std::size_t>(n + pad_size));
  for (std::int64_t i = 0; i < n; ++i) idx[static_cast<std::size_t>(i)] = i;
  for (std::int64_t j = 0; j < pad_size; ++j)
    idx[static_cast<std::size_t>(n + j)] = policy == PadPolicy::cycle_from_first ? j % n : n - 1;
  return gather(idx);
}

}  // namespace rlflow
