// rlflow/core/tensor.hpp: Tensor, a small contiguous n-d array for the framework (not a general
// tensor library). Defines DType, bfloat16 / float16 storage types, Shape, Tensor (owning
// storage through a memory resource, cheap row views sharing storage, typed span access).
// Does not do arithmetic: kernels work on spans. Device copies live in tensor_cuda.cuh (nvcc).
#pragma once
#include <algorithm>    // std::copy, std::equal
#include <array>
#include <bit>          // std::bit_cast
#include <cstdint>
#include <cstring>      // std::memcpy, std::memcmp
#include <initializer_list>
#include <memory>       // std::shared_ptr
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <rlflow/core/backend.hpp>  // Device
#include <rlflow/core/config.hpp>   // RLFLOW_DECL, RLFLOW_DEFINE_BODIES
#include <rlflow/core/error.hpp>    // shape_error, dtype_error
#include <rlflow/core/memory.hpp>   // memory_resource, default_host_resource

namespace rlflow {

// ---------------------------------------------------------------------------------------------
// 16-bit float storage types (bit-exact containers with round-to-nearest-even conversion)

//! bfloat16: the upper 16 bits of an IEEE float32.
struct bfloat16 {
  std::uint16_t bits = 0;
  bfloat16() = default;
  explicit bfloat16(float f) {
    std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) { bits = static_cast<std::uint16_t>((u >> 16) | 0x40); return; }  // NaN stays NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    bits = static_cast<std::uint16_t>(u >> 16);
  }
  explicit operator float() const { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }
  friend bool operator==(bfloat16 a, bfloat16 b) { return a.bits == b.bits; }
};

//! float16: IEEE binary16.
struct float16 {
  std::uint16_t bits = 0;
  float16() = default;
  explicit float16(float f) {
    std::uint32_t x = std::bit_cast<std::uint32_t>(f);
    std::uint32_t sign = (x >> 16) & 0x8000u;
    std::uint32_t absx = x & 0x7fffffffu;
    if (absx > 0x7f800000u) { bits = static_cast<std::uint16_t>(sign | 0x7e00u); return; }     // NaN
    if (absx >= 0x477ff000u) { bits = static_cast<std::uint16_t>(sign | 0x7c00u); return; }    // overflow -> inf
    if (absx < 0x38800000u) {                                                                   // subnormal or zero
      float a = std::bit_cast<float>(absx);
      // 2^-24 is the smallest subnormal; nearbyint-style rounding via a magic add.
      float scaled = a * 16777216.0f;  // a / 2^-24
      std::uint32_t m = static_cast<std::uint32_t>(scaled);
      float frac = scaled - static_cast<float>(m);
      if (frac > 0.5f || (frac == 0.5f && (m & 1u))) ++m;
      bits = static_cast<std::uint16_t>(sign | m);
      return;
    }
    std::uint32_t r = absx + 0xc8000fffu + ((absx >> 13) & 1u);  // rebias 127->15 and round to nearest even
    bits = static_cast<std::uint16_t>(sign | (r >> 13));
  }
  explicit operator float() const {
    std::uint32_t sign = (static_cast<std::uint32_t>(bits) & 0x8000u) << 16;
    std::uint32_t e = (bits >> 10) & 0x1fu, m = bits & 0x3ffu;
    if (e == 0) {
      float v = static_cast<float>(m) * 5.9604644775390625e-8f;  // m * 2^-24
      return sign ? -v : v;
    }
    if (e == 31) return std::bit_cast<float>(sign | 0x7f800000u | (m << 13));
    return std::bit_cast<float>(sign | ((e + 112u) << 23) | (m << 13));
  }
  friend bool operator==(float16 a, float16 b) { return a.bits == b.bits; }
};

// ---------------------------------------------------------------------------------------------
// DType

enum class DType : std::uint8_t { float32 = 0, bfloat16 = 1, float16 = 2, int32 = 3, int64 = 4, uint8 = 5, bool_ = 6 };
inline constexpr int dtype_count = 7;

constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::float32: case DType::int32: return 4;
    case DType::bfloat16: case DType::float16: return 2;
    case DType::int64: return 8;
    case DType::uint8: case DType::bool_: return 1;
  }
  return 0;
}

constexpr const char* dtype_name(DType t) {
  switch (t) {
    case DType::float32: return "float32";
    case DType::bfloat16: return "bfloat16";
    case DType::float16: return "float16";
    case DType::int32: return "int32";
    case DType::int64: return "int64";
    case DType::uint8: return "uint8";
    case DType::bool_: return "bool";
  }
  return "unknown";
}

constexpr bool dtype_valid(int code) { return code >= 0 && code < dtype_count; }

template <class T> struct dtype_of_t { static_assert(sizeof(T) == 0, "rlflow::dtype_of<T>: T is not a tensor element type; use float, bfloat16, float16, int32_t, int64_t, uint8_t or bool"); };
template <> struct dtype_of_t<float> { static constexpr DType value = DType::float32; };
template <> struct dtype_of_t<bfloat16> { static constexpr DType value = DType::bfloat16; };
template <> struct dtype_of_t<float16> { static constexpr DType value = DType::float16; };
template <> struct dtype_of_t<std::int32_t> { static constexpr DType value = DType::int32; };
template <> struct dtype_of_t<std::int64_t> { static constexpr DType value = DType::int64; };
template <> struct dtype_of_t<std::uint8_t> { static constexpr DType value = DType::uint8; };
template <> struct dtype_of_t<bool> { static constexpr DType value = DType::bool_; };
template <class T> inline constexpr DType dtype_of = dtype_of_t<std::remove_cv_t<T>>::value;

// ---------------------------------------------------------------------------------------------
// Shape

//! An n-d shape with inline storage (rank <= max_rank). shape[0] is the row (batch) dimension.
class Shape {
 public:
  static constexpr int max_rank = 8;
  Shape() = default;
  Shape(std::initializer_list<std::int64_t> dims) { assign(dims.begin(), dims.end()); }
  explicit Shape(std::span<std::int64_t const> dims) { assign(dims.begin(), dims.end()); }

  int rank() const { return rank_; }
  std::int64_t operator[](int i) const { return d_[static_cast<std::size_t>(i)]; }
  std::int64_t& operator[](int i) { return d_[static_cast<std::size_t>(i)]; }
  std::int64_t numel() const {
    std::int64_t n = 1;
    for (int i = 0; i < rank_; ++i) n *= d_[static_cast<std::size_t>(i)];
    return n;
  }
  //! Elements per row (product of dims 1..rank-1); 1 for rank 0 or 1.
  std::int64_t row_numel() const {
    std::int64_t n = 1;
    for (int i = 1; i < rank_; ++i) n *= d_[static_cast<std::size_t>(i)];
    return n;
  }
  std::span<std::int64_t const> dims() const { return {d_.data(), static_cast<std::size_t>(rank_)}; }
  Shape with_dim0(std::int64_t n) const { Shape s = *this; s.d_[0] = n; return s; }
  //! Drops the first dimension.
  Shape tail() const { Shape s; s.assign(d_.begin() + 1, d_.begin() + rank_); return s; }
  friend bool operator==(Shape const& a, Shape const& b) {
    return a.rank_ == b.rank_ && std::equal(a.d_.begin(), a.d_.begin() + a.rank_, b.d_.begin());
  }
  std::string str() const;

 private:
  template <class It>
  void assign(It b, It e) {
    auto n = std::distance(b, e);
    if (n > max_rank) throw shape_error(msg("rlflow::Shape: rank ", n, " exceeds the maximum of ", max_rank));
    rank_ = static_cast<int>(n);
    int i = 0;
    for (; b != e; ++b, ++i) {
      if (*b < 0) throw shape_error(msg("rlflow::Shape: dimension ", i, " is negative (", *b, ")"));
      d_[static_cast<std::size_t>(i)] = *b;
    }
  }
  std::array<std::int64_t, max_rank> d_{};
  int rank_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Storage and Tensor

namespace detail {
//! One allocation; freed through the resource that made it.
struct Storage {
  void* ptr = nullptr;
  std::size_t bytes = 0;
  memory_resource* mr = nullptr;
  Device device = Device::cpu;
  Storage(std::size_t n, memory_resource* r, Device d) : bytes(n), mr(r), device(d) {
    ptr = n ? mr->allocate(n, host_alignment) : nullptr;
  }
  Storage(Storage const&) = delete;
  Storage& operator=(Storage const&) = delete;
  ~Storage() { if (ptr) mr->deallocate(ptr, bytes, host_alignment); }
};
}  // namespace detail

//! A contiguous n-d tensor. Copies of a Tensor share storage (like torch); row slices are views.
//! Use clone() for a deep copy.
class Tensor {
 public:
  Tensor() = default;

  //! Uninitialised tensor of the given dtype and shape.
  static Tensor empty(DType dtype, Shape const& shape, memory_resource* mr = nullptr, Device device = Device::cpu);
  static Tensor zeros(DType dtype, Shape const& shape, memory_resource* mr = nullptr);
  //! A tensor holding a copy of 'values' with the given shape (numel must match).
  template <class T>
  static Tensor from(std::span<T const> values, Shape const& shape, memory_resource* mr = nullptr) {
    if (static_cast<std::int64_t>(values.size()) != shape.numel())
      throw shape_error(msg("rlflow::Tensor::from: ", values.size(), " values do not fill shape ", shape.str(),
                            " (", shape.numel(), " elements)"));
    Tensor t = empty(dtype_of<T>, shape, mr);
    if (!values.empty()) std::memcpy(t.raw_data(), values.data(), values.size_bytes());
    return t;
  }
  template <class T>
  static Tensor from(std::vector<T> const& values, Shape const& shape, memory_resource* mr = nullptr) {
    return from(std::span<T const>(values.data(), values.size()), shape, mr);
  }
  //! A 1-d tensor of the given values.
  template <class T>
  static Tensor from(std::vector<T> const& values) {
    return from(values, Shape{static_cast<std::int64_t>(values.size())});
  }
  //! A tensor filled with one value.
  template <class T>
  static Tensor full(Shape const& shape, T value, memory_resource* mr = nullptr) {
    Tensor t = empty(dtype_of<T>, shape, mr);
    auto s = t.span<T>();
    std::fill(s.begin(), s.end(), value);
    return t;
  }

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  Shape const& shape() const { return shape_; }
  int rank() const { return shape_.rank(); }
  std::int64_t dim(int i) const {
    if (i < 0 || i >= shape_.rank())
      throw shape_error(msg("rlflow::Tensor::dim(", i, "): tensor of shape ", shape_.str(), " has rank ", shape_.rank()));
    return shape_[i];
  }
  //! Rows (first dimension); 0 for an undefined or rank-0 tensor.
  std::int64_t rows() const { return shape_.rank() ? shape_[0] : 0; }
  std::int64_t numel() const { return shape_.numel(); }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype_); }
  std::size_t row_bytes() const { return static_cast<std::size_t>(shape_.row_numel()) * dtype_size(dtype_); }
  Device device() const { return storage_ ? storage_->device : Device::cpu; }
  memory_resource* resource() const { return storage_ ? storage_->mr : &default_host_resource(); }

  void* raw_data() { return storage_ ? static_cast<char*>(storage_->ptr) + offset_ : nullptr; }
  void const* raw_data() const { return storage_ ? static_cast<char const*>(storage_->ptr) + offset_ : nullptr; }

  //! Typed host access; throws dtype_error naming both types if T does not match.
  template <class T>
  std::span<T> span() {
    check_access<T>();
    return {static_cast<T*>(raw_data()), static_cast<std::size_t>(numel())};
  }
  template <class T>
  std::span<T const> span() const {
    check_access<T>();
    return {static_cast<T const*>(raw_data()), static_cast<std::size_t>(numel())};
  }
  template <class T> T* data() { return span<T>().data(); }
  template <class T> T const* data() const { return span<T>().data(); }

  //! Element of a 2-d tensor (or of a 1-d tensor with col == 0), bounds-checked.
  template <class T>
  T const& at(std::int64_t row, std::int64_t col = 0) const {
    check_index(row, col);
    return span<T>()[static_cast<std::size_t>(row * shape_.row_numel() + col)];
  }
  template <class T>
  T& at(std::int64_t row, std::int64_t col = 0) {
    check_index(row, col);
    return span<T>()[static_cast<std::size_t>(row * shape_.row_numel() + col)];
  }

  //! A view of rows [begin, end) sharing this tensor's storage.
  Tensor slice_rows(std::int64_t begin, std::int64_t end) const;
  //! A view of one row with the first dimension dropped.
  Tensor row(std::int64_t i) const {
    Tensor t = slice_rows(i, i + 1);
    t.shape_ = shape_.tail();
    return t;
  }
  //! A view with a new shape of the same element count.
  Tensor reshape(Shape const& s) const;
  //! A deep copy in fresh storage.
  Tensor clone(memory_resource* mr = nullptr) const;
  //! Gathers rows by index into a new tensor (indices may repeat; each must be in range).
  Tensor index_rows(std::span<std::int64_t const> idx, memory_resource* mr = nullptr) const;
  //! Concatenates tensors along the first dimension (all must agree in dtype and trailing shape).
  static Tensor concat_rows(std::span<Tensor const> parts, memory_resource* mr = nullptr);

  //! True when both tensors view the same allocation.
  bool shares_storage_with(Tensor const& o) const { return storage_ && storage_ == o.storage_; }
  //! Byte offset of this view in its storage.
  std::size_t storage_offset() const { return offset_; }

  //! Same dtype, same shape and bit-identical bytes (NaN == NaN when the bits agree).
  friend bool bit_equal(Tensor const& a, Tensor const& b);

  std::string describe() const;

 private:
  template <class T>
  void check_access() const {
    if (!defined()) throw dtype_error("rlflow::Tensor: access to an undefined (empty) tensor");
    if (dtype_of<T> != dtype_)
      throw dtype_error(msg("rlflow::Tensor: accessed as ", dtype_name(dtype_of<T>), " but the tensor ", describe(),
                            " holds ", dtype_name(dtype_), "; use span<", dtype_name(dtype_), ">() or convert first"));
    host_only("span");
  }
  void check_index(std::int64_t row, std::int64_t col) const {
    if (row < 0 || row >= rows() || col < 0 || col >= shape_.row_numel())
      throw shape_error(msg("rlflow::Tensor::at(", row, ", ", col, "): out of range for shape ", shape_.str()));
  }
  void host_only(const char* what) const;

  std::shared_ptr<detail::Storage> storage_;
  std::size_t offset_ = 0;
  Shape shape_;
  DType dtype_ = DType::float32;
};

}  // namespace rlflow

#if RLFLOW_DEFINE_BODIES
#include <rlflow/core/impl/tensor.ipp>
#endif
