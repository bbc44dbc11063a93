// rlflow/trainer/checks.hpp: the compile-time checks of Trainer<Options...>, one mistake
// one message. check_trainer_options<Options...>() runs the checks in a fixed order and stops at
// the first that fails: that one static_asserts, the later ones are not instantiated, and the
// Trainer (trainer.hpp) then builds itself from safe defaults (trainer_options_ok false) so no
// member or role error follows. Order: unknown options (each named), counts of each kind, the
// placement, the backend, the algorithm's needs, the colocation count, the role contracts
// (roles/concepts.hpp). Does not define the Trainer.
#pragma once
#include <type_traits>

#include <rlflow/algorithm/algorithm.hpp>                // PPO
#include <rlflow/core/backend.hpp>                  // cpu::tag
#include <rlflow/detail/meta.hpp>              // dependent_false
#include <rlflow/detail/options.hpp>           // count_kind, count_role, pick_kind_t, check_known_option
#include <rlflow/config/policy.hpp>                   // Colocate, TP, Backend, placement_kind ...
#include <rlflow/roles/actor_rollout_ref.hpp>  // has_engines, BasicActorRolloutRef
#include <rlflow/roles/concepts.hpp>           // check_reward_role, check_critic_role, check_actor_rollout_ref_role
#include <rlflow/roles/reward.hpp>             // DefaultReward
#include <rlflow/dispatch/role.hpp>               // role tags

namespace rlflow::detail {

//! An option the Trainer sorts: a kind (option_kind) or a role (role_tag).
template <class T>
inline constexpr bool known_option = has_option_kind<T> || has_role_tag_opt<T>;

//! The contract check of an optional role (void: none given).
template <class R, class Tag>
constexpr bool check_role_if_given() {
  if constexpr (std::is_void_v<R>) return true;
  else if constexpr (std::is_same_v<Tag, critic_tag>) return roles::check_critic_role<R>();
  else return roles::check_actor_rollout_ref_role<R>();
}

//! The Trainer's checks in order; the first failing one static_asserts (its message only) and
//! the function returns false without instantiating the later ones.
template <class... Options>
constexpr bool check_trainer_options() {
  using placement = pick_kind_t<placement_kind, Colocate<3>, Options...>;
  using algorithm = pick_kind_t<algorithm_kind, void, Options...>;
  using backend = pick_kind_t<backend_kind, Backend<cpu::tag>, Options...>;
  using parallel = pick_kind_t<parallel_kind, TP<1>, Options...>;
  constexpr bool has_critic = count_role<critic_tag, Options...> == 1;
  if constexpr (!(known_option<Options> && ...)) {
    // sizeof of the incomplete unknown_trainer_option_is<T> names each unknown option T
    static_assert(((sizeof(std::conditional_t<known_option<Options>, int, unknown_trainer_option_is<Options>>) > 0) && ...),
                  "rlflow::Trainer<...>: unknown option; see 'unknown_trainer_option_is<T>' above");
    return false;
  } else if constexpr (count_kind<placement_kind, Options...> > 1) {
    static_assert(dependent_false<Options...>,
                  "rlflow::Trainer<...>: more than one placement policy (Colocate<N> / SeparateAsync); keep one");
    return false;
  } else if constexpr (count_kind<algorithm_kind, Options...> != 1) {
    static_assert(dependent_false<Options...>,
                  "rlflow::Trainer<...>: exactly one algorithm is required; add rlflow::GRPO, rlflow::PPO, rlflow::RLOO, "
                  "rlflow::ReinforcePlusPlus, rlflow::ReMax, another estimator of rlflow/algorithm/algorithm.hpp, or rlflow::FromConfig");
    return false;
  } else if constexpr (count_kind<parallel_kind, Options...> > 1) {
    static_assert(dependent_false<Options...>,
                  "rlflow::Trainer<...>: more than one parallel layout (TP<N>); keep one");
    return false;
  } else if constexpr (count_kind<backend_kind, Options...> > 1) {
    static_assert(dependent_false<Options...>, "rlflow::Trainer<...>: more than one backend (Backend<Tag>); keep one");
    return false;
  } else if constexpr (count_role<reward_tag, Options...> > 1) {
    static_assert(dependent_false<Options...>,
                  "rlflow::Trainer<...>: more than one reward role; keep one (without one, the Trainer uses "
                  "rlflow::roles::DefaultReward, which scores by data_source)");
    return false;
  } else if constexpr (count_role<critic_tag, Options...> > 1) {
    static_assert(dependent_false<Options...>, "rlflow::Trainer<...>: more than one critic role; keep one");
    return false;
  } else if constexpr (count_role<actor_tag, Options...> > 1) {
    static_assert(dependent_false<Options...>,
                  "rlflow::Trainer<...>: more than one actor role; keep one (the hybrid actor / rollout / reference "
                  "role, 'using role_tag = rlflow::actor_tag;')");
    return false;
  } else if constexpr (count_role<rollout_tag, Options...> + count_role<reference_tag, Options...> != 0) {
    static_assert(dependent_false<Options...>,
                  "rlflow::Trainer<...>: separate rollout / reference roles are not supported; give one hybrid role "
                  "with 'using role_tag = rlflow::actor_tag;' that generates, computes reference log-probs and trains "
                  "(docs/roles.md), or none for rlflow::roles::ActorRolloutRef");
    return false;
  } else if constexpr (!(parallel::size >= 1 && parallel::size <= 8 && (parallel::size & (parallel::size - 1)) == 0) ||
                       placement::max_colocate_count < 1) {
    return false;  // TP<N> / Colocate<N> reported it in their own static_assert (policy.hpp)
  } else if constexpr (placement::is_async && !std::is_same_v<typename backend::system, cpu::tag>) {
    static_assert(dependent_false<Options...>,
                  "rlflow::Trainer<..., SeparateAsync, Backend<cuda::tag>>: the standalone rollout pool runs on the CPU "
                  "engines only; use rlflow::Backend<rlflow::cpu::tag> or rlflow::Colocate<N>");
    return false;
  } else if constexpr (!roles::has_engines<typename backend::system>) {
    static_assert(dependent_false<Options...>,
                  "rlflow::Trainer<..., Backend<cuda::tag>, ...>: the CUDA engines are not visible; include "
                  "<rlflow/trainer/trainer_cuda.cuh> in a .cu file compiled by nvcc, or use rlflow::Backend<rlflow::cpu::tag>");
    return false;
  } else if constexpr (parallel::size != 1 && !std::is_same_v<typename backend::system, cpu::tag> &&
                       count_role<actor_tag, Options...> == 0) {
    static_assert(dependent_false<Options...>,
                  "rlflow::Trainer<..., TP<N>, Backend<cuda::tag>>: tensor-parallel rollout replicas run on the CPU "
                  "engines only (the CUDA engines have no sharded layout yet); use TP<1> with the CUDA backend");
    return false;
  } else if constexpr (algorithm::needs_critic && !has_critic) {
    static_assert(dependent_false<Options...>,
                  "rlflow::Trainer<..., PPO, ...>: PPO needs a critic; pass a role with 'using role_tag = "
                  "rlflow::critic_tag;' such as rlflow::roles::ValueCritic");
    return false;
  } else if constexpr (placement::max_colocate_count < 2 + (has_critic ? 1 : 0)) {
    static_assert(dependent_false<Options...>,
                  "rlflow::Trainer<Colocate<N>, ...>: N is smaller than the number of colocated roles (actor_rollout_ref, "
                  "reward and, with a critic, critic); raise N");
    return false;
  } else if constexpr (!roles::check_reward_role<pick_role_t<reward_tag, roles::DefaultReward, Options...>>()) {
    return false;
  } else if constexpr (!check_role_if_given<pick_role_t<critic_tag, void, Options...>, critic_tag>()) {
    return false;
  } else {
    return check_role_if_given<pick_role_t<actor_tag, void, Options...>, actor_tag>();
  }
}

}  // namespace rlflow::detail
