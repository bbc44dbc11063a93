// rlflow/dispatch/method.hpp: compile-time method registration (verl's @register as types).
// method<&R::fn, Dispatch, Execute, blocking<B>> describes one registered method; methods<...>
// is a role's table. Defines member_fn_traits and the checks with their messages. Does not call
// anything: worker_group.hpp turns the table into calls.
#pragma once
#include <cstddef>
#include <string_view>
#include <tuple>
#include <type_traits>

#include <rlflow/detail/meta.hpp>          // type_list, member_name
#include <rlflow/dispatch/all_to_all.hpp>  // dispatch::AllToAll (the default, as in verl)
#include <rlflow/dispatch/mode.hpp>        // dispatch_mode, execute_mode, blocking

namespace rlflow {

// ---------------------------------------------------------------------------------------------
// member function traits

template <class F>
struct member_fn_traits {
  static constexpr bool valid = false;
};
#define RLFLOW_MEMBER_FN_TRAITS(CV, NOEXCEPT)                          \
  template <class C, class R, class... P>                              \
  struct member_fn_traits<R (C::*)(P...) CV NOEXCEPT> {                \
    static constexpr bool valid = true;                                \
    using class_type = C;                                              \
    using result_type = R;                                             \
    using params = detail::type_list<P...>;                            \
    using args_tuple = std::tuple<std::decay_t<P>...>;                 \
    static constexpr std::size_t arity = sizeof...(P);                 \
  };
RLFLOW_MEMBER_FN_TRAITS(, )
RLFLOW_MEMBER_FN_TRAITS(const, )
RLFLOW_MEMBER_FN_TRAITS(, noexcept)
RLFLOW_MEMBER_FN_TRAITS(const, noexcept)
#undef RLFLOW_MEMBER_FN_TRAITS

namespace detail {
template <class P>
inline constexpr bool transportable_param =
    !std::is_lvalue_reference_v<P> || std::is_const_v<std::remove_reference_t<P>>;
template <class L>
struct all_transportable;
template <class... P>
struct all_transportable<type_list<P...>> : std::bool_constant<(transportable_param<P> && ...)> {};
template <class B>
struct is_blocking_tag : std::false_type {};
template <bool B>
struct is_blocking_tag<blocking<B>> : std::true_type {};
}  // namespace detail

//! One registered method (verl: @register(dispatch_mode, execute_mode, blocking)).
//! Parameters must be values or const references (they cross to workers as messages).
template <auto Fn, class Dispatch = dispatch::AllToAll, class Execute = execute::All, class Blocking = blocking<true>>
struct method {
  static_assert(member_fn_traits<decltype(Fn)>::valid,
                "rlflow::method<Fn, ...>: Fn is not a member function pointer; write rlflow::method<&MyRole::fn, ...>");
  static_assert(dispatch_mode<Dispatch>,
                "rlflow::method<&R::fn, D>: D is not a dispatch mode; use rlflow::dispatch::{OneToAll, AllToAll, "
                "DPCompute, DPComputeProto, DPComputeProtoWithFunc, DPComputeMetric, NDComputeProto<Layout>} or give D "
                "'using dispatch_tag = rlflow::dispatch_mode_tag;' with static split and collect");
  static_assert(execute_mode<Execute>,
                "rlflow::method<&R::fn, D, E>: E is not an execute mode; use rlflow::execute::All or "
                "rlflow::execute::RankZero");
  static_assert(detail::is_blocking_tag<Blocking>::value,
                "rlflow::method<&R::fn, D, E, B>: B must be rlflow::blocking<true> or rlflow::blocking<false>");

  using traits = member_fn_traits<decltype(Fn)>;
  static_assert(detail::all_transportable<typename traits::params>::value,
                "rlflow::method<&R::fn, ...>: fn takes a non-const reference; take the argument by value or by "
                "const reference (arguments cross to workers as messages) and return results instead");

  static constexpr auto fn = Fn;
  using dispatch_mode_type = Dispatch;
  using execute_mode_type = Execute;
  static constexpr bool is_blocking = Blocking::value;
  using class_type = typename traits::class_type;
  using result_type = typename traits::result_type;
  //! The method's name for messages ("compute_log_prob").
  static constexpr std::string_view name() { return detail::member_name<Fn>(); }
};

namespace detail {
template <class M>
struct is_method : std::false_type {};
template <auto Fn, class D, class E, class B>
struct is_method<method<Fn, D, E, B>> : std::true_type {};
}  // namespace detail

//! A role's method table (verl: the @register-decorated methods of a Worker class).
template <class... Ms>
struct methods : detail::type_list<Ms...> {
  static_assert((detail::is_method<Ms>::value && ...),
                "rlflow::methods<...>: every entry must be rlflow::method<&R::fn, Dispatch, Execute, Blocking>");
  // instantiating every entry runs its checks (dispatch mode, execute mode, parameters)
  static_assert(((sizeof(Ms) > 0) && ... && true));
  using list = detail::type_list<Ms...>;
};

}  // namespace rlflow
