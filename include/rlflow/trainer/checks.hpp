// rlflow/trainer/checks.hpp: the compile-time checks of Trainer<Options...>, one mistake
// one message. check_trainer_options<Options...>() runs the checks in a fixed order and stops at
// the first that fails: that one static_asserts, the later ones are not instantiated, and the
// Trainer (trainer.hpp) then builds itself from safe defaults (trainer_options_ok false) so no
// member or role error follows. Order: unknown options (each named), counts of each kind, the
// placement, the backend, the algorithm's needs, the colocation count, the role contracts
// (roles/concepts.hpp). Then the start-up checks of a Trainer being built (runtime, before any
// work): the template argument T is the Trainer type, whose public option types they read.
// Does not define the Trainer.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include <rlflow/algorithm/algorithm.hpp>                // PPO
#include <rlflow/core/backend.hpp>                  // cpu::tag
#include <rlflow/data/data.hpp>                     // PromptDataset
#include <rlflow/core/error.hpp>                    // config_error, msg
#include <rlflow/model/tensor_parallel.hpp>    // model::check_tensor_parallel, GPTConfig
#include <rlflow/detail/meta.hpp>              // dependent_false
#include <rlflow/detail/options.hpp>           // count_kind, count_role, pick_kind_t, check_known_option
#include <rlflow/config/policy.hpp>                   // Colocate, TP, Backend, placement_kind ...
#include <rlflow/roles/actor_rollout_ref.hpp>  // has_engines, BasicActorRolloutRef
#include <rlflow/roles/concepts.hpp>           // check_reward_role, check_critic_role, check_actor_rollout_ref_role
#include <rlflow/roles/reward.hpp>             // DefaultReward
#include <rlflow/dispatch/role.hpp>               // role tags
#include <rlflow/config/trainer_config.hpp>           // TrainerConfig, trainer_unhonoured_keys

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

// ---- start-up checks (runtime) ---------------------------------------------------------------

//! trainer.v1.trainer_mode is one of the async roads (separate_async, colocate_async).
inline bool async_mode(TrainerConfig const& cfg) { return cfg.is_separate_async() || cfg.is_colocate_async(); }
//! trainer.v1.<mode>.num_warmup_batches: batches the rollout workers may generate ahead.
inline std::int64_t warmup_batches(TrainerConfig const& cfg) {
  return cfg.is_separate_async() ? cfg.trainer.v1.separate_async.num_warmup_batches
                                 : cfg.trainer.v1.colocate_async.num_warmup_batches;
}
//! The staleness bound K (versions behind, at most): min(max_off_policy_threshold, num_warmup_batches).
inline std::int64_t staleness_bound(TrainerConfig const& cfg) {
  return std::min(cfg.trainer.v1.sampler.max_off_policy_threshold, warmup_batches(cfg));
}
//! actor_rollout_ref.actor.megatron.tensor_model_parallel_size: the training TP.
inline std::int64_t training_tp(TrainerConfig const& cfg) { return cfg.actor_rollout_ref.actor.megatron.tensor_model_parallel_size; }

//! TP<N>: the rollout runs as world_size / N replicas of N ranks, each split by heads. A world
//! size N does not divide, or more ranks than heads, is an error before any work.
template <class T>
void check_tensor_parallel(TrainerConfig const& cfg, model::GPTConfig const& m) {
  constexpr int N = T::parallel::size;
  if constexpr (N > 1) {
    std::int64_t const ws = cfg.world_size();
    if (ws % N != 0)
      throw config_error(msg("rlflow::Trainer<..., TP<", N, ">>: the ", ws, " workers (trainer.nnodes * n_gpus_per_node) ",
                             "do not split into rollout replicas of ", N, " ranks; use a multiple of ", N,
                             " devices or a TP that divides ", ws));
    model::check_tensor_parallel(m, N, "rlflow::Trainer<..., TP<N>>: actor_rollout_ref.model");
  }
}

//! actor_rollout_ref.model.lm_head (rlflow): vocab_parallel needs at least one vocabulary row per
//! rank of the TP groups that use it (rollout TP<N>, training TP); without tensor parallelism the
//! key changes nothing (a warning).
template <class T, class Warn>
void check_lm_head(TrainerConfig const& cfg, model::GPTConfig const& m, Warn&& warn) {
  std::string_view const h = cfg.actor_rollout_ref.model.lm_head.view();
  if (h == "auto") return;
  std::int64_t const tp = std::max<std::int64_t>(T::parallel::size, training_tp(cfg));
  if (tp == 1) {
    warn(msg("actor_rollout_ref.model.lm_head=", h, " has no effect: neither the rollout (TP<1>) nor training ",
             "(actor_rollout_ref.actor.megatron.tensor_model_parallel_size=1) is tensor-parallel"));
    return;
  }
  if (h == "vocab_parallel" && m.vocab_size < tp)
    throw config_error(msg("rlflow::Trainer: actor_rollout_ref.model.lm_head=vocab_parallel splits the LM head's ", m.vocab_size,
                           " vocabulary rows over TP groups of up to ", tp, " ranks, fewer rows than ranks; set ",
                           "actor_rollout_ref.model.lm_head=replicated (or auto)"));
}

//! custom_reward_function.path is read by the default reward only.
template <class T>
void check_custom_reward(TrainerConfig const& cfg) {
  if (!cfg.custom_reward_function.path.empty() && !std::is_same_v<typename T::reward_role, roles::DefaultReward>)
    throw config_error(msg("rlflow::Trainer: custom_reward_function.path=", cfg.custom_reward_function.path.view(),
                           " is set, but the Trainer was given its own reward role, which would ignore it; drop the "
                           "reward role (the default reward loads the custom function) or clear the key"));
}

//! actor_rollout_ref.actor.megatron.tensor_model_parallel_size = T: the actor and the reference
//! train as world / T DP ranks of T-way tensor-parallel shards (check(cfg) has already checked T
//! divides the workers and n_head). What training TP does not cover yet is an error before work.
template <class T>
void check_training_tp(TrainerConfig const& cfg) {
  auto const t = training_tp(cfg);
  if (t == 1) return;
  auto const no = [&](std::string_view what, std::string_view fix) {
    throw config_error(msg("rlflow::Trainer: actor_rollout_ref.actor.megatron.tensor_model_parallel_size=", t, " (training ",
                           "tensor parallelism) does not support ", what, " yet; ", fix, ", or set the key to 1"));
  };
  using actor_role = typename T::actor_role;
  using critic_role = typename T::critic_role;
  if constexpr (T::on_cuda) no("the CUDA backend (the CUDA engines have no sharded layout)", "train on the CPU backend");
  if constexpr (T::has_critic)
    if constexpr (!requires { &critic_role::gather_critic_weights; })
      no("a custom critic role (the critic is sharded as the actor)", "use the built-in roles::ValueCritic");
  if constexpr (!requires { &actor_role::gather_actor_weights; })
    no("a custom actor role", "use the built-in roles::BasicActorRolloutRef");
  // The async modes: the trainer's group trains as in the sync mode; the rollout workers take the
  // gathered full weights (actor_weights()), so their TP<N> is independent of T.
}

//! What the async modes support here, checked before work (verl's start-up asserts of
//! separate_async are in check(cfg)). 'partial_rollout_option': TrainerOptions::partial_rollout.
template <class T>
void check_async_config(TrainerConfig const& cfg, bool partial_rollout_option) {
  constexpr int tp = T::parallel::size;
  if (!async_mode(cfg)) {
    if (cfg.async_training.partial_rollout || partial_rollout_option)
      throw config_error(msg("rlflow::Trainer: async_training.partial_rollout=true needs an async mode (the sync mode "
                             "never syncs weights during a generation); set trainer.v1.trainer_mode=colocate_async "
                             "or separate_async, or async_training.partial_rollout=false"));
    return;
  }
  if ((cfg.async_training.partial_rollout || partial_rollout_option) && tp > 1)
    throw config_error(msg("rlflow::Trainer<TP<", tp, ">>: async_training.partial_rollout=true needs rollout "
                           "TP 1 (the ranks of a TP replica could stop at different tokens); use TP<1> or "
                           "async_training.partial_rollout=false"));
  std::string const mode = cfg.trainer.v1.trainer_mode.str();
  if constexpr (T::on_cuda)
    throw config_error(msg("rlflow::Trainer<..., Backend<cuda::tag>>: trainer.v1.trainer_mode=", mode,
                           " runs its rollout workers on the CPU engines only; use trainer.v1.trainer_mode=sync with the "
                           "CUDA backend, or rlflow::Backend<rlflow::cpu::tag>"));
  // verl (trainer_separate_async.py:66-71): a reward model needs its own pool in separate_async
  // (check(cfg) rejects it without one); rlflow's reward roles score on the trainer pool
  if (cfg.is_separate_async() && cfg.reward.reward_model.enable)
    throw config_error(msg("rlflow::Trainer<SeparateAsync>: reward.reward_model.enable=true asks for a reward model on a "
                           "reward pool of its own (reward.reward_model.nnodes=", cfg.reward.reward_model.nnodes,
                           " x n_gpus_per_node=", cfg.reward.reward_model.n_gpus_per_node, "); rlflow has no "
                           "reward-model worker to place there (the reward role scores on the trainer pool "
                           "'global_pool'); set reward.reward_model.enable=false and score with a reward role"));
  if (warmup_batches(cfg) < 0)
    throw config_error(msg("rlflow::Trainer: trainer.v1.", mode, ".num_warmup_batches=", warmup_batches(cfg),
                           " must be 0 (a synchronous schedule) or more (batches generated ahead)"));
  if (cfg.is_separate_async() && cfg.rollout_devices() % tp != 0)
    throw config_error(msg("rlflow::Trainer<SeparateAsync, TP<", tp, ">>: the standalone rollout pool has ",
                           cfg.rollout_devices(), " devices (actor_rollout_ref.rollout.nnodes * n_gpus_per_node), which "
                           "do not split into replicas of ", tp, " ranks; use a multiple of ", tp));
}

//! What check_honoured_keys reads besides the config.
struct HonouredKeysInputs {
  bool from_files = false;            //!< built by Trainer(cfg): model and data from files
  bool has_val = false;               //!< a validation set was loaded
  std::int64_t vocab_size = 0;        //!< the tokenizer's
  bool partial_rollout_option = false;  //!< TrainerOptions::partial_rollout
};

//! Config keys the colocated Trainer accepts (verl's names) but does not act on: an error
//! naming the key and what rlflow does instead, or a warning where ignoring it is harmless.
//! config_help() marks the same keys (detail::trainer_unhonoured_keys). Sets trainer.device to
//! the backend's.
template <class T, class Warn>
void check_honoured_keys(TrainerConfig& cfg, HonouredKeysInputs const& in, Warn&& warn) {
  auto const& c = cfg;
  auto const instead = [](std::string_view key) {
    for (auto const& u : rlflow::detail::trainer_unhonoured_keys)
      if (u.key == key) return std::string(u.instead);
    return std::string();
  };
  auto const reject = [&](std::string_view key, std::string const& value, std::string const& fix) {
    throw config_error(msg("rlflow::Trainer: ", key, "=", value, " is not honoured: ", instead(key), "; ", fix));
  };
  // actor_rollout_ref.model.path: Trainer(cfg) loads it; the alphabet constructor rejects it itself.
  if (!in.from_files && !c.data.train_files.empty())
    throw config_error(msg("rlflow::Trainer: data.train_files=", c.data.train_files.str(),
                           " is not read by Trainer(cfg, dataset, alphabet), which trains on the PromptDataset it is "
                           "given; use the Trainer(cfg) constructor (model and data from files) or leave "
                           "data.train_files empty"));
  if (c.trainer.test_freq > 0 && !in.has_val)
    throw config_error(msg("rlflow::Trainer: trainer.test_freq=", c.trainer.test_freq,
                           " asks for validation, but there is no validation set; set data.val_files (read by the "
                           "Trainer(cfg) constructor) or trainer.test_freq=-1"));
  check_async_config<T>(cfg, in.partial_rollout_option);
  check_training_tp<T>(cfg);
  if (c.actor_rollout_ref.model.vocab_size != 0 && c.actor_rollout_ref.model.vocab_size != in.vocab_size)
    reject("actor_rollout_ref.model.vocab_size", std::to_string(c.actor_rollout_ref.model.vocab_size),
           msg("set it to 0 (or to the tokenizer's ", in.vocab_size, ")"));
  for (auto const* key : {"trainer.max_actor_ckpt_to_keep", "trainer.max_critic_ckpt_to_keep"}) {
    auto const& v = std::string_view(key) == "trainer.max_actor_ckpt_to_keep" ? c.trainer.max_actor_ckpt_to_keep
                                                                               : c.trainer.max_critic_ckpt_to_keep;
    if (v.has_value && v.stored < 0)
      throw config_error(msg("rlflow::Trainer: ", key, "=", v.stored, " must be null, 0 (keep all) or positive"));
  }
  if (!in.from_files && !c.data.val_files.empty())
    warn(msg("data.val_files=", c.data.val_files.str(),
             " is ignored by Trainer(cfg, dataset, alphabet); the Trainer(cfg) constructor reads it and validates"));
  std::string_view const device = std::is_same_v<typename T::backend::system, cpu::tag> ? "cpu" : "cuda";
  if (c.trainer.device.view() != device)
    warn(msg("trainer.device=", c.trainer.device.str(), " is ignored: ", instead("trainer.device"), " (here ", device,
             "); set trainer.device=", device, " to silence this"));
  cfg.trainer.device = config_string(device);
}

//! The dataset holds at least one batch of data.train_batch_size prompts.
inline void check_dataset_size(TrainerConfig const& cfg, PromptDataset const& train) {
  if (train.size() < cfg.data.train_batch_size)
    throw config_error(msg("rlflow::Trainer: the dataset holds ", train.size(), " prompts, fewer than one batch of data.train_batch_size=",
                           cfg.data.train_batch_size, "; lower data.train_batch_size or provide more prompts"));
}

//! The run's steps: trainer.total_training_steps, else batches per epoch x trainer.total_epochs;
//! at least one.
inline std::int64_t total_training_steps(TrainerConfig const& cfg, PromptDataset const& train) {
  std::int64_t const steps = cfg.trainer.total_training_steps
                                 ? *cfg.trainer.total_training_steps
                                 : train.batches_per_epoch(cfg.data.train_batch_size) * cfg.trainer.total_epochs;
  if (steps < 1)
    throw config_error(msg("rlflow::Trainer: no training steps (dataset of ", train.size(), " prompts, data.train_batch_size=",
                           cfg.data.train_batch_size, ", trainer.total_epochs=", cfg.trainer.total_epochs,
                           "); set trainer.total_training_steps or provide more prompts"));
  return steps;
}

}  // namespace rlflow::detail
