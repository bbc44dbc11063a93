// rlflow/data_proto/impl/core.ipp: the bodies of rlflow/data_proto/core.hpp's non-template functions
// (included by that header when RLFLOW_DEFINE_BODIES; see rlflow/core/config.hpp).
#pragma once

namespace rlflow {

RLFLOW_DECL Tensor const& DataProtoItem::tensor(std::string_view key) const {
  for (auto const& [k, t] : batch)
    if (k == key) return t;
  throw key_error(msg("rlflow::DataProtoItem: no tensor '", key, "'"));
}
RLFLOW_DECL Value const& DataProtoItem::non_tensor(std::string_view key) const {
  for (auto const& [k, v] : non_tensor_batch)
    if (k == key) return v;
  throw key_error(msg("rlflow::DataProtoItem: no non-tensor '", key, "'"));
}

namespace detail {
RLFLOW_DECL std::string hex32(std::uint32_t v) {
  char buf[11];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}
}  // namespace detail

RLFLOW_DECL DataProto DataProto::from_dict(TensorColumns tensors, NonTensorColumns non_tensors, Meta meta) {
  DataProto d;
  d.has_batch_ = !tensors.empty();
  d.batch_size_ = tensors.empty() ? 0 : tensors.front().second.rows();
  d.batch_ = std::move(tensors);
  d.non_tensor_ = std::move(non_tensors);
  d.meta_ = std::move(meta);
  d.check_consistency("from_dict");
  return d;
}

RLFLOW_DECL DataProto DataProto::with_batch_size(std::int64_t rows, Meta meta) {
  if (rows < 0) throw value_error(msg("rlflow::DataProto::with_batch_size: rows = ", rows, " must be >= 0"));
  if (rows > max_rows)
    throw value_error(msg("rlflow::DataProto::with_batch_size: rows = ", rows, " is more than DataProto::max_rows = ",
                          max_rows, "; split the batch"));
  DataProto d;
  d.has_batch_ = true;
  d.batch_size_ = rows;
  d.meta_ = std::move(meta);
  return d;
}

RLFLOW_DECL Tensor const& DataProto::tensor(std::string_view key) const {
  if (auto const* t = find_tensor(key)) return *t;
  throw key_error(msg("rlflow::DataProto::tensor: no tensor key '", key, "'; tensor keys: ", key_list(batch_),
                      "; non-tensor keys: ", key_list(non_tensor_)));
}

RLFLOW_DECL NonTensorColumn const& DataProto::non_tensor(std::string_view key) const {
  if (auto const* c = find_non_tensor(key)) return *c;
  throw key_error(msg("rlflow::DataProto::non_tensor: no non-tensor key '", key, "'; non-tensor keys: ",
                      key_list(non_tensor_), "; tensor keys: ", key_list(batch_)));
}

RLFLOW_DECL void DataProto::check_consistency(const char* where) const {
  auto const fail_dup = [&](std::string const& k, const char* what) {
    throw key_error(msg("rlflow::DataProto::", where, ": ", what, " key '", k, "' appears more than once; ",
                        "tensor and non-tensor keys must be unique across both maps"));
  };
  for (std::size_t i = 0; i < batch_.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j)
      if (batch_[j].first == batch_[i].first) fail_dup(batch_[i].first, "tensor");
    for (auto const& nt : non_tensor_)
      if (nt.first == batch_[i].first) fail_dup(batch_[i].first, "tensor/non-tensor");
  }
  for (std::size_t i = 0; i < non_tensor_.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (non_tensor_[j].first == non_tensor_[i].first) fail_dup(non_tensor_[i].first, "non-tensor");
  if (!has_batch_ && !batch_.empty())
    throw value_error(msg("rlflow::DataProto::", where, ": internal error: tensors without a batch"));
  if (batch_size_ < 0) throw value_error(msg("rlflow::DataProto::", where, ": batch size ", batch_size_, " is negative"));
  for (auto const& [k, t] : batch_) {
    if (!t.defined())
      throw value_error(msg("rlflow::DataProto::", where, ": tensor '", k, "' is undefined (default-constructed); ",
                            "pass a tensor made by Tensor::empty/zeros/from"));
    if (t.rank() == 0)
      throw shape_error(msg("rlflow::DataProto::", where, ": tensor '", k, "' has rank 0; every tensor needs one leading ",
                            "batch dimension (only num_batch_dims=1 is supported); reshape it to (1,) or (n, ...)"));
    if (t.rows() != batch_size_)
      throw shape_error(msg("rlflow::DataProto::", where, ": not all tensors have the same batch size: '",
                            batch_.front().first, "' has ", batch_size_, " rows, '", k, "' has shape ", t.shape().str(),
                            "; give every tensor the same first dimension"));
  }
  std::int64_t const n = size();
  for (auto const& [k, c] : non_tensor_) {
    auto const len = static_cast<std::int64_t>(c.size());
    if (len == n) continue;
    if (has_batch_)
      throw shape_error(msg("rlflow::DataProto::", where, ": key ", k, " length ", len, " is not equal to batch size ", n,
                            "; give non-tensor column '", k, "' one value per row"));
    throw shape_error(msg("rlflow::DataProto::", where, ": non-tensor key ", k, " length ", len,
                          " is not equal to the length ", n, " of the first non-tensor key '", non_tensor_.front().first,
                          "'; every column needs one value per row"));
  }
}

RLFLOW_DECL void DataProto::set_tensor(std::string key, Tensor t) {
  if (!t.defined() || t.rank() == 0)
    throw shape_error(msg("rlflow::DataProto::set_tensor('", key, "'): the tensor is ",
                          t.defined() ? "rank 0" : "undefined", "; a column needs a leading batch dimension"));
  if (find_non_tensor(key))
    throw key_error(msg("rlflow::DataProto::set_tensor: '", key, "' is already a non-tensor key; pop it or choose another name"));
  std::int64_t const n = size();
  bool const fresh = !has_batch_ && non_tensor_.empty();
  if (!fresh && t.rows() != n)
    throw shape_error(msg("rlflow::DataProto::set_tensor('", key, "'): tensor ", t.describe(), " has ", t.rows(),
                          " rows but the DataProto has ", n, "; every column needs one entry per row"));
  if (!has_batch_) {
    has_batch_ = true;
    batch_size_ = t.rows();
  }
  for (auto& [k, v] : batch_)
    if (k == key) { v = std::move(t); return; }
  batch_.emplace_back(std::move(key), std::move(t));
}

RLFLOW_DECL void DataProto::set_non_tensor(std::string key, NonTensorColumn c) {
  if (find_tensor(key))
    throw key_error(msg("rlflow::DataProto::set_non_tensor: '", key, "' is already a tensor key; pop it or choose another name"));
  std::optional<std::int64_t> need;
  if (has_batch_) need = batch_size_;
  else
    for (auto const& [k, col] : non_tensor_)
      if (k != key) { need = static_cast<std::int64_t>(col.size()); break; }
  if (need && static_cast<std::int64_t>(c.size()) != *need)
    throw shape_error(msg("rlflow::DataProto::set_non_tensor: key ", key, " length ", c.size(), " is not equal to batch size ",
                          *need, "; give the column one value per row"));
  for (auto& [k, v] : non_tensor_)
    if (k == key) { v = std::move(c); return; }
  non_tensor_.emplace_back(std::move(key), std::move(c));
}

RLFLOW_DECL DataProtoItem DataProto::item(std::int64_t i) const {
  std::int64_t const n = size();
  std::int64_t const j = i < 0 ? i + n : i;
  if (j < 0 || j >= n)
    throw value_error(msg("rlflow::DataProto::item(", i, "): index out of range for ", n, " rows"));
  DataProtoItem it;
  for (auto const& [k, t] : batch_) it.batch.emplace_back(k, t.row(j));
  for (auto const& [k, c] : non_tensor_) it.non_tensor_batch.emplace_back(k, c[static_cast<std::size_t>(j)]);
  it.meta_info = meta_;
  return it;
}

RLFLOW_DECL std::string DataProto::describe() const {
  std::string s = msg("DataProto(size=", size(), has_batch_ ? ", batch" : ", no batch", ")\n");
  for (auto const& [k, t] : batch_) s += msg("  tensor ", k, ": ", t.describe(), "\n");
  for (auto const& [k, c] : non_tensor_) s += msg("  non-tensor ", k, ": ", c.size(), " values\n");
  for (auto const& [k, v] : meta_) s += msg("  meta ", k, ": ", v.repr(), "\n");
  return s;
}

RLFLOW_DECL bool operator==(DataProto const& a, DataProto const& b) {
  if (a.has_batch_ != b.has_batch_ || a.size() != b.size()) return false;
  if (a.batch_.size() != b.batch_.size() || a.non_tensor_.size() != b.non_tensor_.size()) return false;
  for (auto const& [k, t] : a.batch_) {
    Tensor const* o = b.find_tensor(k);
    if (!o || !bit_equal(t, *o)) return false;
  }
  for (auto const& [k, c] : a.non_tensor_) {
    auto const* o = b.find_non_tensor(k);
    if (!o || !(c == *o)) return false;
  }
  return a.meta_ == b.meta_;
}

}  // namespace rlflow
