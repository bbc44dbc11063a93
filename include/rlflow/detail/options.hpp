// rlflow/detail/options.hpp: sorting a Trainer's options by kind (the Kokkos pattern):
// count how many options of a kind were given, pick the one given or a default, recognise
// roles, and name an unknown option through an incomplete template.
#pragma once
#include <type_traits>

namespace rlflow::detail {

template <class T>
concept has_option_kind = requires { typename T::option_kind; };
template <class T>
concept has_role_tag_opt = requires { typename T::role_tag; };

template <class T, class Kind>
inline constexpr bool is_kind = [] {
  if constexpr (has_option_kind<T>) return std::is_same_v<typename T::option_kind, Kind>;
  else return false;
}();

template <class T, class Tag>
inline constexpr bool is_role_with = [] {
  if constexpr (has_role_tag_opt<T>) return std::is_same_v<typename T::role_tag, Tag>;
  else return false;
}();

template <class Kind, class... Options>
inline constexpr int count_kind = (0 + ... + (is_kind<Options, Kind> ? 1 : 0));

template <class Tag, class... Options>
inline constexpr int count_role = (0 + ... + (is_role_with<Options, Tag> ? 1 : 0));

//! The first option of kind Kind, or Default.
template <class Kind, class Default, class... Options>
struct pick_kind { using type = Default; };
template <class Kind, class Default, class First, class... Rest>
struct pick_kind<Kind, Default, First, Rest...> {
  using type = std::conditional_t<is_kind<First, Kind>, First, typename pick_kind<Kind, Default, Rest...>::type>;
};
template <class Kind, class Default, class... Options>
using pick_kind_t = typename pick_kind<Kind, Default, Options...>::type;

//! The first role with role tag Tag, or Default.
template <class Tag, class Default, class... Options>
struct pick_role { using type = Default; };
template <class Tag, class Default, class First, class... Rest>
struct pick_role<Tag, Default, First, Rest...> {
  using type = std::conditional_t<is_role_with<First, Tag>, First, typename pick_role<Tag, Default, Rest...>::type>;
};
template <class Tag, class Default, class... Options>
using pick_role_t = typename pick_role<Tag, Default, Options...>::type;

//! Declared, never defined: instantiating it prints the offending option's type.
template <class T>
struct unknown_trainer_option_is;

template <class T>
constexpr bool check_known_option() {
  if constexpr (has_option_kind<T> || has_role_tag_opt<T>) {
    return true;
  } else {
    [[maybe_unused]] unknown_trainer_option_is<T> error_here;  // incomplete type: names T in the error
    return false;
  }
}

}  // namespace rlflow::detail
