// rlflow/detail/meta.hpp: small compile-time helpers shared across areas: type_list and its
// operations (concat, size, at), dependent_false, value_tag, and readable names of types and
// member pointers taken from __PRETTY_FUNCTION__ (used in error messages only).
// Does not use Boost.Hana: measured against these scans, Hana compiled slower (docs/development.md).
#pragma once
#include <cstddef>      // std::size_t
#include <string>
#include <string_view>
#include <type_traits>

namespace rlflow::detail {

//! Always false, but only once T is known: for static_assert in primary templates.
template <class...>
inline constexpr bool dependent_false = false;
template <auto...>
inline constexpr bool dependent_false_v = false;

//! A value as a type: compares member pointers of different classes without ill-formed ==.
template <auto V>
struct value_tag {
  static constexpr auto value = V;
};

// ---------------------------------------------------------------------------------------------
// type_list

template <class... Ts>
struct type_list {
  static constexpr std::size_t size = sizeof...(Ts);
};

template <class... Ls>
struct concat_lists;
template <>
struct concat_lists<> { using type = type_list<>; };
template <class... As>
struct concat_lists<type_list<As...>> { using type = type_list<As...>; };
template <class... As, class... Bs, class... Rest>
struct concat_lists<type_list<As...>, type_list<Bs...>, Rest...> {
  using type = typename concat_lists<type_list<As..., Bs...>, Rest...>::type;
};
//! type_list<A..., B..., ...>
template <class... Ls>
using concat_t = typename concat_lists<Ls...>::type;

template <std::size_t I, class L>
struct at_impl;
template <std::size_t I, class T, class... Ts>
struct at_impl<I, type_list<T, Ts...>> : at_impl<I - 1, type_list<Ts...>> {};
template <class T, class... Ts>
struct at_impl<0, type_list<T, Ts...>> { using type = T; };
//! The I-th type of a type_list.
template <std::size_t I, class L>
using at_t = typename at_impl<I, L>::type;

//! Index of the first type in L for which Pred<T>::value is true; L::size if none.
template <template <class> class Pred, class L>
struct find_if;
template <template <class> class Pred, class... Ts>
struct find_if<Pred, type_list<Ts...>> {
  static constexpr std::size_t value = [] {
    constexpr bool hits[] = {Pred<Ts>::value..., false};
    for (std::size_t i = 0; i < sizeof...(Ts); ++i)
      if (hits[i]) return i;
    return sizeof...(Ts);
  }();
};

//! Number of types in L for which Pred<T>::value is true.
template <template <class> class Pred, class L>
struct count_if;
template <template <class> class Pred, class... Ts>
struct count_if<Pred, type_list<Ts...>> {
  static constexpr std::size_t value = (std::size_t{0} + ... + (Pred<Ts>::value ? 1u : 0u));
};

// ---------------------------------------------------------------------------------------------
// names for messages (g++/clang/nvcc all print "[with T = ...]" or "[T = ...]")

constexpr std::string_view pretty_tail(std::string_view p, std::string_view key) {
  auto const b = p.find(key);
  if (b == std::string_view::npos) return p;
  auto s = p.substr(b + key.size());
  auto e = s.find_first_of(";]");
  return e == std::string_view::npos ? s : s.substr(0, e);
}

//! "Actor" for struct Actor (namespaces kept).
template <class T>
constexpr std::string_view type_name() {
  return pretty_tail(__PRETTY_FUNCTION__, "T = ");
}

//! "&Actor::add" for value_name<&Actor::add>().
template <auto V>
constexpr std::string_view value_name() {
  return pretty_tail(__PRETTY_FUNCTION__, "V = ");
}

//! "add" for member_name<&Actor::add>() (the text after the last "::").
template <auto V>
constexpr std::string_view member_name() {
  std::string_view s = value_name<V>();
  auto const p = s.rfind("::");
  return p == std::string_view::npos ? s : s.substr(p + 2);
}

}  // namespace rlflow::detail
