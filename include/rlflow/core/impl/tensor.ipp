// rlflow/core/impl/tensor.ipp: the bodies of rlflow/core/tensor.hpp's non-template functions (included by
// that header when RLFLOW_DEFINE_BODIES; see rlflow/core/config.hpp).
#pragma once

namespace rlflow {

RLFLOW_DECL std::string Shape::str() const {
  std::string s = "(";
  for (int i = 0; i < rank_; ++i) s += (i ? ", " : "") + std::to_string(d_[static_cast<std::size_t>(i)]);
  return s + (rank_ == 1 ? ",)" : ")");
}

RLFLOW_DECL Tensor Tensor::empty(DType dtype, Shape const& shape, memory_resource* mr, Device device) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = shape;
  std::size_t const n = static_cast<std::size_t>(shape.numel()) * dtype_size(dtype);
  t.storage_ = std::make_shared<detail::Storage>(n, mr ? mr : &default_host_resource(), device);
  return t;
}

RLFLOW_DECL Tensor Tensor::zeros(DType dtype, Shape const& shape, memory_resource* mr) {
  Tensor t = empty(dtype, shape, mr);
  if (t.nbytes()) std::memset(t.raw_data(), 0, t.nbytes());
  return t;
}

RLFLOW_DECL Tensor Tensor::slice_rows(std::int64_t begin, std::int64_t end) const {
  if (rank() == 0) throw shape_error("rlflow::Tensor::slice_rows: a rank-0 tensor has no rows");
  if (begin < 0 || end < begin || end > rows())
    throw shape_error(msg("rlflow::Tensor::slice_rows(", begin, ", ", end, "): out of range for ", rows(), " rows"));
  Tensor t = *this;
  t.offset_ += static_cast<std::size_t>(begin) * row_bytes();
  t.shape_[0] = end - begin;
  return t;
}

RLFLOW_DECL Tensor Tensor::reshape(Shape const& s) const {
  if (s.numel() != numel())
    throw shape_error(msg("rlflow::Tensor::reshape: cannot view ", shape_.str(), " (", numel(), " elements) as ",
                          s.str(), " (", s.numel(), " elements)"));
  Tensor t = *this;
  t.shape_ = s;
  return t;
}

RLFLOW_DECL Tensor Tensor::clone(memory_resource* mr) const {
  host_only("clone");
  Tensor t = empty(dtype_, shape_, mr ? mr : resource());
  if (nbytes()) std::memcpy(t.raw_data(), raw_data(), nbytes());
  return t;
}

RLFLOW_DECL Tensor Tensor::index_rows(std::span<std::int64_t const> idx, memory_resource* mr) const {
  host_only("index_rows");
  if (rank() == 0) throw shape_error("rlflow::Tensor::index_rows: a rank-0 tensor has no rows");
  Tensor t = empty(dtype_, shape_.with_dim0(static_cast<std::int64_t>(idx.size())), mr ? mr : resource());
  std::size_t const rb = row_bytes();
  auto* dst = static_cast<char*>(t.raw_data());
  auto const* src = static_cast<char const*>(raw_data());
  for (std::size_t i = 0; i < idx.size(); ++i) {
    if (idx[i] < 0 || idx[i] >= rows())
      throw shape_error(msg("rlflow::Tensor::index_rows: index ", idx[i], " at position ", i, " is out of range for ",
                            rows(), " rows"));
    if (rb) std::memcpy(dst + i * rb, src + static_cast<std::size_t>(idx[i]) * rb, rb);
  }
  return t;
}

RLFLOW_DECL Tensor Tensor::concat_rows(std::span<Tensor const> parts, memory_resource* mr) {
  if (parts.empty()) throw shape_error("rlflow::Tensor::concat_rows: no tensors to concatenate");
  Tensor const& first = parts[0];
  std::int64_t total = 0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    Tensor const& p = parts[i];
    p.host_only("concat_rows");
    if (p.dtype() != first.dtype())
      throw dtype_error(msg("rlflow::Tensor::concat_rows: part ", i, " is ", dtype_name(p.dtype()), " but part 0 is ",
                            dtype_name(first.dtype())));
    if (p.rank() == 0 || p.rank() != first.rank() || !(p.shape().tail() == first.shape().tail()))
      throw shape_error(msg("rlflow::Tensor::concat_rows: part ", i, " has shape ", p.shape().str(),
                            ", incompatible with part 0's ", first.shape().str()));
    total += p.rows();
  }
  Tensor t = empty(first.dtype(), first.shape().with_dim0(total), mr ? mr : first.resource());
  auto* dst = static_cast<char*>(t.raw_data());
  for (auto const& p : parts) {
    if (p.nbytes()) std::memcpy(dst, p.raw_data(), p.nbytes());
    dst += p.nbytes();
  }
  return t;
}

RLFLOW_DECL bool bit_equal(Tensor const& a, Tensor const& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  if (a.dtype() != b.dtype() || !(a.shape() == b.shape())) return false;
  return a.nbytes() == 0 || std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

RLFLOW_DECL std::string Tensor::describe() const {
  return msg("Tensor<", dtype_name(dtype_), ">", shape_.str(), "@", device_name(device()));
}

RLFLOW_DECL void Tensor::host_only(const char* what) const {
  if (device() != Device::cpu)
    throw error(msg("rlflow::Tensor::", what, ": tensor ", describe(), " lives on the device; copy it to the host first"));
}

}  // namespace rlflow
