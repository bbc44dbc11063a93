// rlflow/dispatch/role.hpp: role tags (actor_tag, rollout_tag, reference_tag, critic_tag,
// reward_tag, worker_tag), the 'role' concept and role_name<R>(). A role is a plain class that
// opts in with 'using role_tag = rlflow::actor_tag;' and lists its methods in 'using methods =
// rlflow::methods<...>;' (verl's Worker subclass + @register). Does not define built-in roles.
#pragma once
#include <string_view>
#include <type_traits>

#include <rlflow/detail/meta.hpp>  // type_name

namespace rlflow {

//! verl: ActorRolloutRefWorker (actor part): trains the policy.
struct actor_tag { static constexpr std::string_view name = "actor"; };
//! verl: ActorRolloutRefWorker (rollout part): generates sequences.
struct rollout_tag { static constexpr std::string_view name = "rollout"; };
//! verl: ActorRolloutRefWorker (ref part): the frozen reference policy.
struct reference_tag { static constexpr std::string_view name = "ref"; };
//! verl: CriticWorker.
struct critic_tag { static constexpr std::string_view name = "critic"; };
//! verl: RewardModelWorker / reward functions.
struct reward_tag { static constexpr std::string_view name = "reward"; };
//! Any other worker type (tests, utilities, user roles outside the RL slots).
struct worker_tag { static constexpr std::string_view name = "worker"; };

namespace detail {
template <class R>
concept has_role_tag = requires { typename R::role_tag; };
template <class R>
concept has_methods = requires { typename R::methods; };
template <class R>
concept has_role_name = requires { { R::role_name } -> std::convertible_to<std::string_view>; };
}  // namespace detail

//! A role: a class with a nested role_tag and a methods table.
template <class R>
concept role = detail::has_role_tag<R> && detail::has_methods<R>;

//! The role's name for messages and env: R::role_name if given, else the type's name.
template <class R>
constexpr std::string_view role_name() {
  if constexpr (detail::has_role_name<R>) return R::role_name;
  else return detail::type_name<R>();
}

}  // namespace rlflow
