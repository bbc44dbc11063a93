// rlflow/roles/concepts.hpp: the contracts of the roles a Trainer accepts (docs/roles.md), as
// C++20 concepts and as ordered checks that stop at the first broken rule:
//   roles::reward_role<R>            what Trainer<..., R> calls on a reward role
//   roles::critic_role<R>            ... on a critic role (PPO)
//   roles::actor_rollout_ref_role<R> ... on the hybrid actor / rollout / reference role
// check_reward_role<R>() (and the critic / actor twins) static_assert the FIRST rule R breaks,
// with a message naming the member and the fix, and return false; the Trainer gates everything
// else on their result (trainer_checks.hpp), so a wrong role gives one message. The offending
// type is named by the compiler's "[with R = ...]" line just above the message.
// Does not define any role.
#pragma once
#include <concepts>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <rlflow/core/data_proto.hpp>        // DataProto
#include <rlflow/detail/meta.hpp>       // dependent_false, value_tag, type_list
#include <rlflow/dispatch/context.hpp>  // WorkerContext
#include <rlflow/dispatch/mode.hpp>     // CollectContext
#include <rlflow/dispatch/method.hpp>            // method, methods
#include <rlflow/dispatch/role.hpp>        // role tags
#include <rlflow/roles/setup.hpp>       // RoleSetup, MetricLists

namespace rlflow::roles {

namespace contract {

//! Marks "any result type" where the Trainer ignores what a method returns.
struct ignored {};

//! What a registered method M returns to the driver: the dispatch mode's collected value (e.g.
//! DataProto for DPComputeProto, std::vector<T> for OneToAll / DPComputeMetric), or the rank-0
//! value for execute::RankZero.
template <class M, class Ret = typename M::result_type>
struct collected_of {
  using type = decltype(M::dispatch_mode_type::collect(std::declval<std::vector<Ret>&&>(),
                                                        std::declval<CollectContext const&>()));
};
template <class M>
struct collected_of<M, void> {
  using type = void;
};
template <class M>
using collected_t = std::conditional_t<M::execute_mode_type::rank_zero_only, typename M::result_type,
                                       typename collected_of<M>::type>;

template <auto Fn>
struct same_fn {
  template <class M>
  struct pred : std::bool_constant<std::is_same_v<rlflow::detail::value_tag<M::fn>, rlflow::detail::value_tag<Fn>>> {};
};

//! R::methods lists a method whose function is Fn.
template <class R, auto Fn>
concept registered = requires { typename R::methods::list; } &&
                     (rlflow::detail::count_if<same_fn<Fn>::template pred, typename R::methods::list>::value >= 1);

//! The registered method descriptor of Fn in R::methods.
template <class R, auto Fn>
using registered_method_t =
    rlflow::detail::at_t<rlflow::detail::find_if<same_fn<Fn>::template pred, typename R::methods::list>::value,
                         typename R::methods::list>;

//! Fn's registration returns Collected to the driver (contract::ignored: anything).
template <class R, auto Fn, class Collected>
concept collects = std::is_same_v<Collected, ignored> || std::is_same_v<collected_t<registered_method_t<R, Fn>>, Collected>;

//! R(WorkerContext const&, Args...) or R(Args...) (Fused passes the context first when accepted).
template <class R, class... Args>
concept constructible_from_setup =
    std::is_constructible_v<R, WorkerContext const&, Args...> || std::is_constructible_v<R, Args...>;

template <class R>
concept has_methods_table = requires { typename R::methods::list; };

template <class R, class Tag>
concept tagged = requires { typename R::role_tag; } && std::is_same_v<typename R::role_tag, Tag>;

}  // namespace contract

// ---------------------------------------------------------------------------------------------
// One rule per method: the member exists (and is not overloaded), it can be called with the
// arguments the Trainer passes and returns what it reads, it is registered in R::methods, and its
// dispatch mode gives the driver the type the Trainer reads. CONCEPT_ names the predicate,
// CHECK_ the asserting check; ARGS is a parenthesised argument list for std::is_invocable_r.
#define RLFLOW_ROLE_METHOD_RULE(KIND, NAME, RET, ARGS, COLLECTED, SIG, MODE)                                         \
  namespace contract {                                                                                               \
  template <class R>                                                                                                 \
  concept KIND##_has_##NAME = requires { &R::NAME; };                                                                \
  template <class R, class... A>                                                                                     \
  concept KIND##_invocable_##NAME = std::is_invocable_r_v<RET, decltype(&R::NAME), R&, A...>;                        \
  template <class R>                                                                                                 \
  concept KIND##_##NAME = KIND##_has_##NAME<R> && KIND##_invocable_##NAME<R RLFLOW_ROLE_UNPAREN ARGS> &&             \
                          registered<R, &R::NAME> && collects<R, &R::NAME, COLLECTED>;                               \
  template <class R>                                                                                                 \
  constexpr bool check_##KIND##_##NAME() {                                                                           \
    if constexpr (!KIND##_has_##NAME<R>) {                                                                           \
      static_assert(rlflow::detail::dependent_false<R>,                                                              \
                    "rlflow::roles::" #KIND "<R>: R (named in the 'with R = ...' line above) has no member function " \
                    "'" #NAME "', or more than one overload of it; add '" SIG "' registered with " MODE               \
                    " (docs/roles.md)");                                                                             \
      return false;                                                                                                  \
    } else if constexpr (!KIND##_invocable_##NAME<R RLFLOW_ROLE_UNPAREN ARGS>) {                                     \
      static_assert(rlflow::detail::dependent_false<R>,                                                              \
                    "rlflow::roles::" #KIND "<R>: R::" #NAME " cannot be called as the Trainer calls it; declare it " \
                    "as '" SIG "' (docs/roles.md)");                                                                 \
      return false;                                                                                                  \
    } else if constexpr (!registered<R, &R::NAME>) {                                                                 \
      static_assert(rlflow::detail::dependent_false<R>,                                                              \
                    "rlflow::roles::" #KIND "<R>: R::" #NAME " is not registered; add rlflow::method<&R::" #NAME     \
                    ", " MODE "> to R's 'using methods = rlflow::methods<...>;' (docs/roles.md)");                  \
      return false;                                                                                                  \
    } else if constexpr (!collects<R, &R::NAME, COLLECTED>) {                                                        \
      static_assert(rlflow::detail::dependent_false<R>,                                                              \
                    "rlflow::roles::" #KIND "<R>: R::" #NAME " is registered with a dispatch or execute mode that "   \
                    "does not return what the Trainer reads; register it as rlflow::method<&R::" #NAME ", " MODE    \
                    "> (docs/roles.md)");                                                                            \
      return false;                                                                                                  \
    } else {                                                                                                         \
      return true;                                                                                                   \
    }                                                                                                                \
  }                                                                                                                  \
  }  // namespace contract
#define RLFLOW_ROLE_UNPAREN(...) __VA_OPT__(, ) __VA_ARGS__

// ---- reward role ----------------------------------------------------------------------------
RLFLOW_ROLE_METHOD_RULE(reward_role, compute_rm_score, DataProto, (DataProto const&), DataProto,
                        "rlflow::DataProto compute_rm_score(rlflow::DataProto const& data)",
                        "rlflow::dispatch::DPComputeProto")

// ---- critic role ----------------------------------------------------------------------------
RLFLOW_ROLE_METHOD_RULE(critic_role, compute_values, DataProto, (DataProto const&), DataProto,
                        "rlflow::DataProto compute_values(rlflow::DataProto const& data)",
                        "rlflow::dispatch::DPComputeProto")
RLFLOW_ROLE_METHOD_RULE(critic_role, update_critic, MetricLists, (DataProto const&), std::vector<MetricLists>,
                        "rlflow::roles::MetricLists update_critic(rlflow::DataProto const& data)",
                        "rlflow::dispatch::DPComputeMetric")
RLFLOW_ROLE_METHOD_RULE(critic_role, save_checkpoint, void, (std::string), contract::ignored,
                        "void save_checkpoint(std::string path) const",
                        "rlflow::dispatch::OneToAll, rlflow::execute::RankZero")
RLFLOW_ROLE_METHOD_RULE(critic_role, load_checkpoint, void, (std::string), contract::ignored,
                        "void load_checkpoint(std::string path)", "rlflow::dispatch::OneToAll")

// ---- actor / rollout / reference (hybrid) role ----------------------------------------------
RLFLOW_ROLE_METHOD_RULE(actor_rollout_ref_role, generate_sequences, DataProto, (DataProto const&), DataProto,
                        "rlflow::DataProto generate_sequences(rlflow::DataProto const& prompts)",
                        "rlflow::dispatch::DPComputeProto")
RLFLOW_ROLE_METHOD_RULE(actor_rollout_ref_role, compute_log_prob, DataProto, (DataProto const&), DataProto,
                        "rlflow::DataProto compute_log_prob(rlflow::DataProto const& data)",
                        "rlflow::dispatch::DPComputeProto")
RLFLOW_ROLE_METHOD_RULE(actor_rollout_ref_role, compute_ref_log_prob, DataProto, (DataProto const&), DataProto,
                        "rlflow::DataProto compute_ref_log_prob(rlflow::DataProto const& data)",
                        "rlflow::dispatch::DPComputeProto")
RLFLOW_ROLE_METHOD_RULE(actor_rollout_ref_role, update_actor, MetricLists, (DataProto const&), std::vector<MetricLists>,
                        "rlflow::roles::MetricLists update_actor(rlflow::DataProto const& data)",
                        "rlflow::dispatch::DPComputeMetric")
RLFLOW_ROLE_METHOD_RULE(actor_rollout_ref_role, update_weights, void, (), contract::ignored, "void update_weights()",
                        "rlflow::dispatch::OneToAll")
RLFLOW_ROLE_METHOD_RULE(actor_rollout_ref_role, save_checkpoint, void, (std::string), contract::ignored,
                        "void save_checkpoint(std::string path) const",
                        "rlflow::dispatch::OneToAll, rlflow::execute::RankZero")
RLFLOW_ROLE_METHOD_RULE(actor_rollout_ref_role, load_checkpoint, void, (std::string), contract::ignored,
                        "void load_checkpoint(std::string path)", "rlflow::dispatch::OneToAll")
RLFLOW_ROLE_METHOD_RULE(actor_rollout_ref_role, memory_stats, std::vector<std::int64_t>, (int),
                        std::vector<std::vector<std::int64_t>>,
                        "std::vector<std::int64_t> memory_stats(int reset_peak) const (allocated, peak, reserved, "
                        "peak reserved bytes; zeros on the CPU)",
                        "rlflow::dispatch::OneToAll")

#undef RLFLOW_ROLE_METHOD_RULE
#undef RLFLOW_ROLE_UNPAREN

// ---------------------------------------------------------------------------------------------
// The concepts (no diagnostics: use them in requires-clauses and your own static_asserts)

//! verl: a reward model worker / reward manager. The Trainer calls compute_rm_score on every
//! generated batch and reads 'token_level_scores' (docs/roles.md).
template <class R>
concept reward_role = contract::tagged<R, reward_tag> && contract::has_methods_table<R> &&
                      contract::constructible_from_setup<R, RoleSetup const&> && contract::reward_role_compute_rm_score<R>;

//! verl: CriticWorker. Constructed from (RoleSetup, total optimizer steps).
template <class R>
concept critic_role = contract::tagged<R, critic_tag> && contract::has_methods_table<R> &&
                      contract::constructible_from_setup<R, RoleSetup const&, std::int64_t> &&
                      contract::critic_role_compute_values<R> && contract::critic_role_update_critic<R> &&
                      contract::critic_role_save_checkpoint<R> && contract::critic_role_load_checkpoint<R>;

//! verl: ActorRolloutRefWorker with the hybrid engine. Constructed from (RoleSetup, total
//! optimizer steps).
template <class R>
concept actor_rollout_ref_role =
    contract::tagged<R, actor_tag> && contract::has_methods_table<R> &&
    contract::constructible_from_setup<R, RoleSetup const&, std::int64_t> &&
    contract::actor_rollout_ref_role_generate_sequences<R> && contract::actor_rollout_ref_role_compute_log_prob<R> &&
    contract::actor_rollout_ref_role_compute_ref_log_prob<R> && contract::actor_rollout_ref_role_update_actor<R> &&
    contract::actor_rollout_ref_role_update_weights<R> && contract::actor_rollout_ref_role_save_checkpoint<R> &&
    contract::actor_rollout_ref_role_load_checkpoint<R> && contract::actor_rollout_ref_role_memory_stats<R>;

// ---------------------------------------------------------------------------------------------
// The checks: the first broken rule of R as one static_assert, in the order a reader fixes them.

//! Checks the reward-role contract; one static_assert for the first broken rule, false then.
template <class R>
constexpr bool check_reward_role() {
  using namespace contract;
  if constexpr (!has_methods_table<R>) {
    static_assert(rlflow::detail::dependent_false<R>,
                  "rlflow::roles::reward_role<R>: R has no 'using methods = rlflow::methods<...>;'; add one listing "
                  "rlflow::method<&R::compute_rm_score, rlflow::dispatch::DPComputeProto> (docs/roles.md)");
    return false;
  } else if constexpr (!constructible_from_setup<R, RoleSetup const&>) {
    static_assert(rlflow::detail::dependent_false<R>,
                  "rlflow::roles::reward_role<R>: R cannot be constructed from rlflow::roles::RoleSetup; add a "
                  "constructor R(rlflow::WorkerContext const& ctx, rlflow::roles::RoleSetup setup) or "
                  "R(rlflow::roles::RoleSetup setup) (docs/roles.md)");
    return false;
  } else {
    return check_reward_role_compute_rm_score<R>();
  }
}

//! Checks the critic-role contract; one static_assert for the first broken rule, false then.
template <class R>
constexpr bool check_critic_role() {
  using namespace contract;
  if constexpr (!has_methods_table<R>) {
    static_assert(rlflow::detail::dependent_false<R>,
                  "rlflow::roles::critic_role<R>: R has no 'using methods = rlflow::methods<...>;'; add one listing "
                  "compute_values, update_critic, save_checkpoint and load_checkpoint (docs/roles.md)");
    return false;
  } else if constexpr (!constructible_from_setup<R, RoleSetup const&, std::int64_t>) {
    static_assert(rlflow::detail::dependent_false<R>,
                  "rlflow::roles::critic_role<R>: R cannot be constructed from (rlflow::roles::RoleSetup, "
                  "std::int64_t total_optimizer_steps); add a constructor R(rlflow::WorkerContext const& ctx, "
                  "rlflow::roles::RoleSetup setup, std::int64_t total_optimizer_steps) (docs/roles.md)");
    return false;
  } else if constexpr (!check_critic_role_compute_values<R>()) {
    return false;
  } else if constexpr (!check_critic_role_update_critic<R>()) {
    return false;
  } else if constexpr (!check_critic_role_save_checkpoint<R>()) {
    return false;
  } else {
    return check_critic_role_load_checkpoint<R>();
  }
}

//! Checks the hybrid actor-role contract; one static_assert for the first broken rule, false then.
template <class R>
constexpr bool check_actor_rollout_ref_role() {
  using namespace contract;
  if constexpr (!has_methods_table<R>) {
    static_assert(rlflow::detail::dependent_false<R>,
                  "rlflow::roles::actor_rollout_ref_role<R>: R has no 'using methods = rlflow::methods<...>;'; add "
                  "one listing generate_sequences, compute_log_prob, compute_ref_log_prob, update_actor, "
                  "update_weights, save_checkpoint, load_checkpoint and memory_stats (docs/roles.md)");
    return false;
  } else if constexpr (!constructible_from_setup<R, RoleSetup const&, std::int64_t>) {
    static_assert(rlflow::detail::dependent_false<R>,
                  "rlflow::roles::actor_rollout_ref_role<R>: R cannot be constructed from (rlflow::roles::RoleSetup, "
                  "std::int64_t total_optimizer_steps); add a constructor R(rlflow::WorkerContext const& ctx, "
                  "rlflow::roles::RoleSetup setup, std::int64_t total_optimizer_steps) (docs/roles.md)");
    return false;
  } else if constexpr (!check_actor_rollout_ref_role_generate_sequences<R>()) {
    return false;
  } else if constexpr (!check_actor_rollout_ref_role_compute_log_prob<R>()) {
    return false;
  } else if constexpr (!check_actor_rollout_ref_role_compute_ref_log_prob<R>()) {
    return false;
  } else if constexpr (!check_actor_rollout_ref_role_update_actor<R>()) {
    return false;
  } else if constexpr (!check_actor_rollout_ref_role_update_weights<R>()) {
    return false;
  } else if constexpr (!check_actor_rollout_ref_role_save_checkpoint<R>()) {
    return false;
  } else if constexpr (!check_actor_rollout_ref_role_load_checkpoint<R>()) {
    return false;
  } else {
    return check_actor_rollout_ref_role_memory_stats<R>();
  }
}

}  // namespace rlflow::roles
