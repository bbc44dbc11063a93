// rlflow/mpi/wire.hpp: the argument and result codec of the MPI backend. wire::put(buf, v)
// appends a value's bytes, wire::get<T>(reader) reads them back (bounds-checked by
// detail::ByteReader, format_error on truncation). DataProto travels in its own self-describing,
// checksummed format (DataProto::serialize), its large tensor columns as bulk segments moved
// by the backend without a copy (BulkScope); plain values as little-endian PODs; strings,
// vectors, optionals, pairs, tuples, maps element by element; MeshCoord field by field.
// Function pointers travel as offsets from an anchor function of the same executable image
// (every rank runs the same binary; ASLR moves the image, not the layout inside it). Not a
// public API: worker groups use it; a user type becomes transportable by specializing
// rlflow::wire::codec<T> with static put(Buffer&, T const&) and get(detail::ByteReader&).
#pragma once
#include <array>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include <rlflow/core/data_proto.hpp>
#include <rlflow/detail/serialize.hpp>  // ByteReader
#include <rlflow/dispatch/mode.hpp>     // MeshCoord
#include <rlflow/core/error.hpp>

namespace rlflow::wire {

namespace detail {
//! An allocator whose resize() leaves new bytes uninitialized: message buffers are written or
//! received into right after, so zero-filling them first would be one more pass over memory.
template <class T>
struct default_init_allocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = default_init_allocator<U>;
  };
  using std::allocator<T>::allocator;
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... A>
  void construct(U* p, A&&... a) {
    ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
  }
};
}  // namespace detail
//! A growable byte buffer (reused across calls by the backend; resize does not zero-fill).
using Buffer = std::vector<std::byte, detail::default_init_allocator<std::byte>>;
using Reader = rlflow::detail::ByteReader;

template <class T, class = void>
struct codec;  // specialize for user types

//! Bulk segments: the tensor columns of a DataProto that travel as their own messages, straight
//! from (and into) the tensors' storage, instead of inside the encoded buffer. While a Bulk is
//! installed as this thread's sink (BulkScope), codec<DataProto>::put appends each large column
//! (>= bulk_min_bytes) to it and writes only its descriptor; get() allocates the column and
//! appends the receive slot. The MPI backend moves the segments, in order, after the message.
struct BulkSeg {
  void* ptr = nullptr;
  std::size_t bytes = 0;
  Tensor keep;  //!< keeps a sent column's storage alive until the send completes
};
struct Bulk {
  std::vector<BulkSeg> segs;
  bool done = false;  //!< receive side: the segments were received (or drained)
  std::vector<std::shared_ptr<void>> held;  //!< send side: values whose buffers the segments point into
  //! Keeps 'v' (a result whose segments were just encoded) alive until the sends complete; a
  //! move keeps a vector's or a tensor's buffer where the segments point.
  template <class T>
  void hold(T&& v) {
    held.push_back(std::make_shared<std::decay_t<T>>(std::forward<T>(v)));
  }
  void clear() {
    segs.clear();
    held.clear();
    done = false;
  }
};
//! Columns smaller than this stay inside the message (a message costs a few microseconds).
inline constexpr std::size_t bulk_min_bytes = 32 * 1024;
namespace detail {
inline Bulk*& bulk_out() {
  thread_local Bulk* b = nullptr;
  return b;
}
inline Bulk*& bulk_in() {
  thread_local Bulk* b = nullptr;
  return b;
}
}  // namespace detail
//! Installs 'out' / 'in' as this thread's sinks for its lifetime (nullptr: none).
class BulkScope {
 public:
  BulkScope(Bulk* out, Bulk* in) : out_(detail::bulk_out()), in_(detail::bulk_in()) {
    detail::bulk_out() = out;
    detail::bulk_in() = in;
  }
  ~BulkScope() {
    detail::bulk_out() = out_;
    detail::bulk_in() = in_;
  }
  BulkScope(BulkScope const&) = delete;
  BulkScope& operator=(BulkScope const&) = delete;

 private:
  Bulk* out_;
  Bulk* in_;
};


namespace detail {
inline void append(Buffer& b, void const* p, std::size_t n) {
  std::size_t const at = b.size();
  b.resize(at + n);
  if (n) std::memcpy(b.data() + at, p, n);
}
//! The anchor function pointers are measured from (any function of the rlflow image would do).
[[gnu::noinline]] inline void fn_anchor() { asm volatile(""); }
template <class T>
struct is_vector : std::false_type {};
template <class T, class A>
struct is_vector<std::vector<T, A>> : std::true_type {};
template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};
template <class T>
struct is_map : std::false_type {};
template <class K, class V, class C, class A>
struct is_map<std::map<K, V, C, A>> : std::true_type {};
template <class K, class V, class H, class E, class A>
struct is_map<std::unordered_map<K, V, H, E, A>> : std::true_type {};
template <class T>
struct is_tuple_like : std::false_type {};
template <class... T>
struct is_tuple_like<std::tuple<T...>> : std::true_type {};
template <class A, class B>
struct is_tuple_like<std::pair<A, B>> : std::true_type {};
template <class T, std::size_t N>
struct is_tuple_like<std::array<T, N>> : std::true_type {};
}  // namespace detail

template <class T>
void put(Buffer& b, T const& v) {
  codec<std::remove_cv_t<T>>::put(b, v);
}
template <class T>
T get(Reader& r) {
  return codec<std::remove_cv_t<T>>::get(r);
}

//! Arithmetic types and enums: little-endian bytes.
template <class T>
struct codec<T, std::enable_if_t<std::is_arithmetic_v<T> || std::is_enum_v<T>>> {
  static void put(Buffer& b, T v) { detail::append(b, &v, sizeof v); }
  static T get(Reader& r) { return r.pod<T>("a value"); }
};

template <>
struct codec<std::string> {
  static void put(Buffer& b, std::string const& s) {
    wire::put<std::uint64_t>(b, s.size());
    detail::append(b, s.data(), s.size());
  }
  static std::string get(Reader& r) { return r.str("a string"); }
};

template <class T>
struct codec<T, std::enable_if_t<detail::is_vector<T>::value>> {
  using E = typename T::value_type;
  //! Numbers: u64 length, u8 placement (0: the elements follow; 1: they are the next bulk
  //! segment, when a bulk sink is installed and they fill >= bulk_min_bytes: weights, say).
  static void put(Buffer& b, T const& v) {
    wire::put<std::uint64_t>(b, v.size());
    if constexpr (std::is_arithmetic_v<E> && !std::is_same_v<E, bool>) {
      Bulk* const bulk = detail::bulk_out();
      bool const big = bulk && v.size() * sizeof(E) >= bulk_min_bytes;
      wire::put<std::uint8_t>(b, big ? 1 : 0);
      if (big) bulk->segs.push_back(BulkSeg{const_cast<E*>(v.data()), v.size() * sizeof(E), {}});
      else detail::append(b, v.data(), v.size() * sizeof(E));
    } else {
      for (auto const& e : v) wire::put<E>(b, e);
    }
  }
  static T get(Reader& r) {
    auto const n = r.u64("a vector's length");
    T v;
    if constexpr (std::is_arithmetic_v<E> && !std::is_same_v<E, bool>) {
      auto const where = r.u8("a vector's placement");
      if (where == 1) {
        Bulk* const bulk = detail::bulk_in();
        if (!bulk || n > static_cast<std::uint64_t>(INT32_MAX) / sizeof(E) || n * sizeof(E) < bulk_min_bytes)
          throw format_error(msg("rlflow::wire: a vector of ", n, " elements sent as a bulk segment ",
                                 bulk ? "has an impossible size" : "but no bulk receiver is installed"));
        v.resize(static_cast<std::size_t>(n));
        bulk->segs.push_back(BulkSeg{v.data(), v.size() * sizeof(E), {}});  // moves of v keep this heap buffer
        return v;
      }
      if (where != 0) throw format_error(msg("rlflow::wire: a vector's placement byte is ", int(where), " (known: 0, 1)"));
      if (n > r.remaining() / sizeof(E)) (void)r.take(n * sizeof(E), "a vector's elements");  // throws
      v.resize(static_cast<std::size_t>(n));
      if (n) std::memcpy(v.data(), r.take(n * sizeof(E), "a vector's elements"), static_cast<std::size_t>(n) * sizeof(E));
    } else {
      if (n > r.remaining()) (void)r.take(n, "a vector's elements");  // each element takes >= 1 byte
      v.reserve(static_cast<std::size_t>(n));
      for (std::uint64_t i = 0; i < n; ++i) v.push_back(wire::get<E>(r));
    }
    return v;
  }
};

template <class T>
struct codec<T, std::enable_if_t<detail::is_optional<T>::value>> {
  using E = typename T::value_type;
  static void put(Buffer& b, T const& v) {
    wire::put<std::uint8_t>(b, v ? 1 : 0);
    if (v) wire::put<E>(b, *v);
  }
  static T get(Reader& r) {
    if (r.u8("an optional's flag") == 0) return std::nullopt;
    return wire::get<E>(r);
  }
};

template <class T>
struct codec<T, std::enable_if_t<detail::is_map<T>::value>> {
  using K = typename T::key_type;
  using V = typename T::mapped_type;
  static void put(Buffer& b, T const& m) {
    wire::put<std::uint64_t>(b, m.size());
    for (auto const& [k, v] : m) {
      wire::put<K>(b, k);
      wire::put<V>(b, v);
    }
  }
  static T get(Reader& r) {
    auto const n = r.u64("a map's size");
    if (n > r.remaining()) (void)r.take(n, "a map's entries");
    T m;
    for (std::uint64_t i = 0; i < n; ++i) {
      K k = wire::get<K>(r);
      m.emplace(std::move(k), wire::get<V>(r));
    }
    return m;
  }
};

template <class T>
struct codec<T, std::enable_if_t<detail::is_tuple_like<T>::value>> {
  static void put(Buffer& b, T const& t) {
    std::apply([&](auto const&... e) { (wire::put<std::remove_cvref_t<decltype(e)>>(b, e), ...); }, t);
  }
  static T get(Reader& r) {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return T{wire::get<std::tuple_element_t<I, T>>(r)...};  // braced: left-to-right
    }(std::make_index_sequence<std::tuple_size_v<T>>{});
  }
};

template <>
struct codec<MeshCoord> {
  static void put(Buffer& b, MeshCoord const& c) {
    wire::put<std::int32_t>(b, c.dp);
    wire::put<std::int32_t>(b, c.tp);
    wire::put<std::int32_t>(b, c.pp);
  }
  static MeshCoord get(Reader& r) {
    MeshCoord c;
    c.dp = wire::get<std::int32_t>(r);
    c.tp = wire::get<std::int32_t>(r);
    c.pp = wire::get<std::int32_t>(r);
    return c;
  }
};

//! DataProto, form 0: its own format (magic, version, CRC-32C), length-prefixed. Form 1 (a bulk
//! sink is installed and a column is large): the DataProto without its tensor columns in that
//! format (rows, non-tensor columns, meta_info), then each tensor column's key, dtype and shape,
//! its bytes inline when small, else as the next bulk segment. The bulk bytes carry no CRC:
//! MPI's transport is reliable, and checksumming would be one more pass over every byte.
template <>
struct codec<DataProto> {
  static void put(Buffer& b, DataProto const& d) {
    Bulk* const bulk = detail::bulk_out();
    bool any = false;
    if (bulk)
      for (auto const& [k, t] : d.tensors()) any = any || t.nbytes() >= bulk_min_bytes;
    if (!any) {
      wire::put<std::uint8_t>(b, 0);
      put_serialized(b, d);
      return;
    }
    wire::put<std::uint8_t>(b, 1);
    DataProto shell = DataProto::with_batch_size(d.size(), d.meta_info());
    for (auto const& [k, c] : d.non_tensors()) shell.set_non_tensor(k, c);
    put_serialized(b, shell);
    wire::put<std::uint32_t>(b, static_cast<std::uint32_t>(d.tensors().size()));
    for (auto const& [k, t] : d.tensors()) {
      if (t.device() != Device::cpu)
        throw value_error(msg("rlflow::wire: DataProto tensor '", k, "' (", t.describe(),
                              ") lives on the device; copy it to the host before sending it to another process"));
      wire::put<std::string>(b, k);
      wire::put<std::uint8_t>(b, static_cast<std::uint8_t>(t.dtype()));
      wire::put<std::uint8_t>(b, static_cast<std::uint8_t>(t.rank()));
      for (auto dim : t.shape().dims()) wire::put<std::int64_t>(b, dim);
      bool const big = t.nbytes() >= bulk_min_bytes;
      wire::put<std::uint8_t>(b, big ? 1 : 0);
      if (big) {
        bulk->segs.push_back(BulkSeg{const_cast<void*>(t.raw_data()), t.nbytes(), t});
      } else {
        detail::append(b, t.raw_data(), t.nbytes());
      }
    }
  }
  static DataProto get(Reader& r) {
    auto const form = r.u8("a DataProto's form");
    if (form == 0) return get_serialized(r);
    if (form != 1) throw format_error(msg("rlflow::wire: a DataProto's form byte is ", int(form), " (known: 0, 1)"));
    DataProto d = get_serialized(r);
    std::int64_t const rows = d.size();
    auto const n = r.u32("a DataProto's tensor count");
    for (std::uint32_t i = 0; i < n; ++i) {
      auto key = wire::get<std::string>(r);
      auto const code = r.u8("a tensor's dtype");
      if (!dtype_valid(code)) throw format_error(msg("rlflow::wire: tensor '", key, "' has unknown dtype tag ", int(code)));
      auto const rank = r.u8("a tensor's rank");
      if (rank < 1 || rank > Shape::max_rank)
        throw format_error(msg("rlflow::wire: tensor '", key, "' has rank ", int(rank), " (valid: 1..", Shape::max_rank, ")"));
      std::array<std::int64_t, Shape::max_rank> dims{};
      std::uint64_t numel = 1;
      for (int j = 0; j < rank; ++j) {
        dims[static_cast<std::size_t>(j)] = r.i64("a tensor dimension");
        auto const dj = dims[static_cast<std::size_t>(j)];
        if (dj < 0 || (dj > 0 && numel > (std::uint64_t{1} << 62) / static_cast<std::uint64_t>(dj)))
          throw format_error(msg("rlflow::wire: tensor '", key, "' has an invalid dimension ", dj));
        numel *= static_cast<std::uint64_t>(dj);
      }
      if (dims[0] != rows)
        throw format_error(msg("rlflow::wire: tensor '", key, "' has ", dims[0], " rows but the DataProto has ", rows));
      auto const dt = static_cast<DType>(code);
      auto const where = r.u8("a tensor's placement");
      if (where > 1) throw format_error(msg("rlflow::wire: tensor '", key, "' has placement byte ", int(where), " (known: 0, 1)"));
      Tensor t = Tensor::empty(dt, Shape(std::span<std::int64_t const>(dims.data(), rank)));
      if (where == 1) {
        Bulk* const bulk = detail::bulk_in();
        if (!bulk)
          throw format_error(msg("rlflow::wire: tensor '", key, "' was sent as a bulk segment but no bulk receiver is installed ",
                                 "(a message of the MPI backend read outside its receive path)"));
        if (t.nbytes() < bulk_min_bytes || t.nbytes() > static_cast<std::size_t>(INT32_MAX))
          throw format_error(msg("rlflow::wire: tensor '", key, "' of ", t.nbytes(), " bytes was marked bulk (size range ",
                                 bulk_min_bytes, "..", INT32_MAX, ")"));
        bulk->segs.push_back(BulkSeg{t.raw_data(), t.nbytes(), {}});
      } else {
        r.copy_to(t.raw_data(), t.nbytes(), "a tensor's bytes");
      }
      d.set_tensor(std::move(key), std::move(t));
    }
    return d;
  }

 private:
  static void put_serialized(Buffer& b, DataProto const& d) {
    std::size_t const n = d.serialized_size();
    wire::put<std::uint64_t>(b, n);
    thread_local std::vector<std::byte> scratch;  // DataProto::serialize_into's buffer type
    d.serialize_into(scratch);
    detail::append(b, scratch.data(), scratch.size());
  }
  static DataProto get_serialized(Reader& r) {
    auto const n = r.u64("a DataProto's length");
    std::byte const* p = r.take(n, "a DataProto");
    return DataProto::deserialize(std::span<std::byte const>(p, static_cast<std::size_t>(n)));
  }
};

//! Free function pointers: offset from detail::fn_anchor (same binary on every rank).
template <class R, class... A>
struct codec<R (*)(A...)> {
  using F = R (*)(A...);
  static void put(Buffer& b, F f) {
    auto const off = static_cast<std::int64_t>(reinterpret_cast<std::intptr_t>(f) -
                                               reinterpret_cast<std::intptr_t>(&detail::fn_anchor));
    wire::put<std::uint8_t>(b, f ? 1 : 0);
    wire::put<std::int64_t>(b, off);
  }
  static F get(Reader& r) {
    bool const set = r.u8("a function pointer's flag") != 0;
    auto const off = r.i64("a function pointer");
    if (!set) return nullptr;
    return reinterpret_cast<F>(reinterpret_cast<std::intptr_t>(&detail::fn_anchor) + off);
  }
};

//! Shared pointers (e.g. the weights a checkpoint engine hands every rollout rank): a null flag,
//! then the pointee; the receiver owns a fresh object.
template <class T>
struct codec<std::shared_ptr<T>> {
  using V = std::remove_const_t<T>;
  static void put(Buffer& b, std::shared_ptr<T> const& p) {
    wire::put<std::uint8_t>(b, p ? 1 : 0);
    if (p) wire::put<V>(b, *p);
  }
  static std::shared_ptr<T> get(Reader& r) {
    if (r.u8("a shared pointer's flag") == 0) return nullptr;
    return std::make_shared<V>(wire::get<V>(r));
  }
};

//! True when T has a codec (used to give a clear compile error for untransportable types).
template <class T, class = void>
inline constexpr bool transportable = false;
template <class T>
inline constexpr bool transportable<T, std::void_t<decltype(codec<std::remove_cv_t<T>>::get(std::declval<Reader&>()))>> =
    true;

}  // namespace rlflow::wire
