// rlflow/dispatch/fused.hpp: fused colocated workers (verl: create_colocated_worker_cls_fused /
// FusedWorker, and the legacy WorkerDict). Fused<Roles...> is a type generated at compile time
// that holds one object of each role; a WorkerGroup of it runs one worker per device, and
// group.view<Role>() forwards calls to the right role object through the compile-time method
// table (no runtime lookup, no name routing like verl's "_fwmn_"). Derive from Fused to add
// methods that compose roles (test SC-FU-1).
#pragma once
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include <rlflow/detail/meta.hpp>       // type_list, count_if
#include <rlflow/dispatch/context.hpp>  // WorkerContext
#include <rlflow/dispatch/method.hpp>            // methods<>
#include <rlflow/dispatch/role.hpp>        // role, worker_tag

namespace rlflow {

namespace detail {
//! Builds R from a tuple of arguments, passing the worker's context first when R accepts it.
template <class R, class Tuple>
R construct_role(WorkerContext const& ctx, Tuple&& args) {
  return std::apply(
      [&](auto&&... a) -> R {
        if constexpr (std::is_constructible_v<R, WorkerContext const&, decltype(a)...>) {
          return R(ctx, std::forward<decltype(a)>(a)...);
        } else {
          static_assert(std::is_constructible_v<R, decltype(a)...>,
                        "rlflow::WorkerGroup / rlflow::Fused: the role cannot be constructed from the given arguments "
                        "(with or without a leading 'rlflow::WorkerContext const&'); fix the constructor arguments");
          return R(std::forward<decltype(a)>(a)...);
        }
      },
      std::forward<Tuple>(args));
}

//! One role object inside a fused worker (a base class, so roles need not be movable).
template <class R>
struct RoleSlot {
  R role_object_;
  template <class Tuple>
  RoleSlot(WorkerContext const& ctx, Tuple&& args) : role_object_(construct_role<R>(ctx, std::forward<Tuple>(args))) {}
};

template <class T, class... Ts>
inline constexpr std::size_t count_same = (std::size_t{0} + ... + (std::is_same_v<T, Ts> ? 1u : 0u));
}  // namespace detail

//! A worker holding one object of each role (constructed on the worker's thread in order).
//! Fused(ctx) default-constructs each role (passing ctx when accepted); Fused(ctx, tuple...)
//! takes one std::tuple of constructor arguments per role.
template <class... Roles>
class Fused : private detail::RoleSlot<Roles>... {
  static_assert(sizeof...(Roles) >= 1, "rlflow::Fused<Roles...>: give at least one role");
  static_assert((role<Roles> && ...),
                "rlflow::Fused<Roles...>: every role needs 'using role_tag = rlflow::actor_tag;' (or another tag) and "
                "'using methods = rlflow::methods<...>;'");
  static_assert(((detail::count_same<Roles, Roles...> == 1) && ...),
                "rlflow::Fused<Roles...>: a role appears twice; list each role once");

 public:
  using role_tag = worker_tag;
  using methods = rlflow::methods<>;  //!< derived classes may list their own (cross-role) methods
  using fused_roles = detail::type_list<Roles...>;

  explicit Fused(WorkerContext const& ctx) : detail::RoleSlot<Roles>(ctx, std::tuple<>{})... {}
  template <class... Tuples>
    requires(sizeof...(Tuples) == sizeof...(Roles) && sizeof...(Roles) > 0)
  Fused(WorkerContext const& ctx, Tuples&&... per_role_args)
      : detail::RoleSlot<Roles>(ctx, std::forward<Tuples>(per_role_args))... {}

  //! The object of role R in this worker (verl: self.<role> / fused_worker_dict[role]).
  template <class R>
  R& get() {
    static_assert(detail::count_same<R, Roles...> == 1,
                  "rlflow::Fused<Roles...>::get<R>(): R is not one of the fused roles; use one of Roles...");
    return static_cast<detail::RoleSlot<R>&>(*this).role_object_;
  }
  template <class R>
  R const& get() const {
    static_assert(detail::count_same<R, Roles...> == 1,
                  "rlflow::Fused<Roles...>::get<R>(): R is not one of the fused roles; use one of Roles...");
    return static_cast<detail::RoleSlot<R> const&>(*this).role_object_;
  }
};

}  // namespace rlflow
