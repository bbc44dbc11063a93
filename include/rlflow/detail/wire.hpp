// rlflow/detail/wire.hpp: the argument and result codec of the MPI backend. wire::put(buf, v)
// appends a value's bytes, wire::get<T>(reader) reads them back (bounds-checked by
// detail::ByteReader, format_error on truncation). DataProto travels in its own self-describing,
// checksummed format (DataProto::serialize); plain values as little-endian PODs; strings,
// vectors, optionals, pairs, tuples, maps element by element; MeshCoord field by field.
// Function pointers travel as offsets from an anchor function of the same executable image
// (every rank runs the same binary; ASLR moves the image, not the layout inside it). Not a
// public API: worker groups use it; a user type becomes transportable by specializing
// rlflow::wire::codec<T> with static put(Buffer&, T const&) and get(detail::ByteReader&).
#pragma once
#include <array>
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

#include <rlflow/data_proto.hpp>
#include <rlflow/detail/serialize.hpp>  // ByteReader
#include <rlflow/dispatch/mode.hpp>     // MeshCoord
#include <rlflow/error.hpp>

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
  static void put(Buffer& b, T const& v) {
    wire::put<std::uint64_t>(b, v.size());
    if constexpr (std::is_arithmetic_v<E> && !std::is_same_v<E, bool>) detail::append(b, v.data(), v.size() * sizeof(E));
    else
      for (auto const& e : v) wire::put<E>(b, e);
  }
  static T get(Reader& r) {
    auto const n = r.u64("a vector's length");
    T v;
    if constexpr (std::is_arithmetic_v<E> && !std::is_same_v<E, bool>) {
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

//! DataProto: its own format (magic, version, CRC-32C), length-prefixed.
template <>
struct codec<DataProto> {
  static void put(Buffer& b, DataProto const& d) {
    std::size_t const n = d.serialized_size();
    wire::put<std::uint64_t>(b, n);
    thread_local std::vector<std::byte> scratch;  // DataProto::serialize_into's buffer type
    d.serialize_into(scratch);
    detail::append(b, scratch.data(), scratch.size());
  }
  static DataProto get(Reader& r) {
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

//! True when T has a codec (used to give a clear compile error for untransportable types).
template <class T, class = void>
inline constexpr bool transportable = false;
template <class T>
inline constexpr bool transportable<T, std::void_t<decltype(codec<std::remove_cv_t<T>>::get(std::declval<Reader&>()))>> =
    true;

}  // namespace rlflow::wire
