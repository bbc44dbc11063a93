// rlflow/roles/setup.hpp: what every built-in role is constructed from (RoleSetup: the run's
// TrainerConfig, the model shapes, the tokenizer alphabet) and the batch helpers they share
// (masks as float spans for the kernels, the global-token all-reduce, metric lists). No role here.
#pragma once
#include <cstdint>
#include <map>
#include <memory>   // std::shared_ptr
#include <random>   // std::mt19937_64
#include <span>
#include <string>
#include <type_traits>  // std::is_invocable_v
#include <vector>

#include <rlflow/core/data_proto.hpp>        // DataProto
#include <rlflow/dispatch/context.hpp>  // WorkerContext
#include <rlflow/kernels/options.hpp>   // AggInfo, AggMode
#include <rlflow/model/gpt.hpp>         // GPTConfig
#include <rlflow/model/tensor_parallel.hpp>  // LMHead
#include <rlflow/model/tokenizer.hpp>   // CharTokenizer
#include <rlflow/core/tensor.hpp>
#include <rlflow/config/trainer_config.hpp>    // TrainerConfig

namespace rlflow::roles {

//! Constructor argument of the built-in roles: one copy per worker.
struct RoleSetup {
  TrainerConfig cfg;
  model::GPTConfig policy_model;  //!< actor, rollout and reference
  model::GPTConfig critic_model;  //!< value_head = true
  std::string alphabet;           //!< CharTokenizer alphabet (the task's characters)
  //! The run's tokenizer (e.g. a BPETokenizer from model.path); null: CharTokenizer(alphabet).
  std::shared_ptr<model::Tokenizer const> tokenizer;
  //! Initial weights (ParamLayout of policy_model / critic_model, e.g. from a Hugging Face
  //! folder); null: the seeded initialisation. Shared read-only by every worker.
  std::shared_ptr<std::vector<float> const> policy_init, critic_init;
  //! CPU engines: the OpenMP threads each worker's engines use (model::layers::set_worker_threads);
  //! 0: from the machine (OMP_NUM_THREADS when set, else the cores shared by the node's workers).
  int threads_per_worker = 0;
  //! CPU: generate with the static KV-cache engine instead of the paged one (the reference the
  //! tests compare the paged engine with; TP > 1 rollout always uses it).
  bool static_rollout = false;
};

//! The tokenizer a role uses: setup.tokenizer, or a CharTokenizer over setup.alphabet.
inline std::shared_ptr<model::Tokenizer const> role_tokenizer(RoleSetup const& s) {
  if (s.tokenizer) return s.tokenizer;
  return std::make_shared<model::CharTokenizer const>(s.alphabet);
}

//! Per-rank metric lists (name -> values, e.g. one per mini-batch); collected by DPComputeMetric
//! and averaged on the driver (verl: the 'metrics' dict-of-lists of update_actor / update_critic).
using MetricLists = std::map<std::string, std::vector<double>>;

namespace detail {

inline double mask_sum(Tensor const& m) {
  double n = 0;
  for (auto v : m.span<std::int32_t>()) n += v != 0;
  return n;
}

//! Sum of x over the group's ranks (one double), through the worker's communicator.
inline double allreduce_scalar(WorkerContext const& ctx, double x) {
  if (ctx.world_size == 1) return x;
  double v[1] = {x};
  ctx.comm().allreduce_sum(std::span<double>(v, 1));
  return v[0];
}

//! Averages a flat gradient across the group's ranks (DDP's all-reduce mean).
inline void allreduce_mean(WorkerContext const& ctx, std::span<float> g) {
  if (ctx.world_size == 1) return;
  ctx.comm().allreduce_sum(g);
  float const inv = 1.0f / static_cast<float>(ctx.world_size);
  for (auto& x : g) x *= inv;
}

//! Row order of one epoch over n rows: identity, or a permutation from 'seed' when shuffling.
inline std::vector<std::int64_t> epoch_order(std::int64_t n, bool shuffle, std::uint64_t seed) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = i;
  if (shuffle) {
    std::mt19937_64 rng(seed);
    for (std::int64_t i = n - 1; i > 0; --i) {
      auto j = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(i + 1));
      std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(j)]);
    }
  }
  return order;
}

//! Throws config_error unless 'rows' splits into mini-batches of 'mini' and micro-batches of 'micro'.
inline void check_batching(const char* who, std::int64_t rows, std::int64_t mini, std::int64_t micro) {
  if (mini <= 0 || rows % mini != 0)
    throw config_error(msg(who, ": this rank holds ", rows, " rows, not a multiple of its mini-batch of ", mini,
                           " rows (ppo_mini_batch_size * rollout.n / dp); make data.train_batch_size a multiple of "
                           "ppo_mini_batch_size"));
  if (micro <= 0 || mini % micro != 0)
    throw config_error(msg(who, ": the per-rank mini-batch of ", mini, " rows is not a multiple of the micro-batch of ",
                           micro, " rows; set ppo_micro_batch_size_per_gpu to a divisor of ", mini));
}

//! actor_rollout_ref.model.lm_head (rlflow) applied to an engine that runs tensor-parallel
//! (tp > 1): "auto" keeps the engine's default (vocabulary-parallel from 256 tokens), otherwise the
//! named head. Every rank of a TP group reads the same config, so the group agrees. Engines
//! without a head choice (the CUDA ones, TP 1 only) are left as they are.
template <class Engine>
void apply_lm_head(Engine& e, TrainerConfig const& cfg, int tp) {
  std::string_view const h = cfg.actor_rollout_ref.model.lm_head.view();
  if (tp <= 1 || h == "auto") return;
  if constexpr (requires { e.set_lm_head(model::LMHead::replicated); })
    e.set_lm_head(h == "vocab_parallel" ? model::LMHead::vocab_parallel : model::LMHead::replicated);
}
//! An engine's LM head as a number for the driver: 0 replicated, 1 vocabulary-parallel, -1 an
//! engine without the choice.
template <class Engine>
std::int64_t lm_head_code(Engine const& e) {
  if constexpr (requires { e.lm_head(); }) return e.lm_head() == model::LMHead::vocab_parallel ? 1 : 0;
  else return -1;
}

}  // namespace detail
}  // namespace rlflow::roles

namespace rlflow::roles::detail {

//! One PPO-style update pass (verl: DataParallelPPOActor.update_policy / the critic's
//! update_critic): 'epochs' passes over this rank's rows in mini-batches of 'mini' rows
//! (shuffled per epoch from 'seed' when 'shuffle'), each cut into micro-batches of 'micro' rows.
//! For every mini-batch: 'info' gets the DP size, the response-token count of the whole
//! mini-batch on all ranks (all-reduced) and 'global_batch_size'; 'zero' clears the gradients;
//! 'micro_step(mc, info)' runs forward + backward of one micro-batch; the gradients 'grads()' (a
//! span) are averaged across ranks, or 'grads(ctx)' averages them itself; 'apply()' steps the
//! optimizer and records metrics.
template <class Grads, class Zero, class MicroStep, class Apply>
void for_each_mini_batch(WorkerContext const& ctx, DataProto const& data, std::int64_t mini, std::int64_t micro,
                         std::int64_t epochs, bool shuffle, std::uint64_t seed, kernels::AggInfo info, Grads&& grads,
                         Zero&& zero, MicroStep&& micro_step, Apply&& apply) {
  std::int64_t const rows = data.size();
  std::mt19937_64 rng(seed);
  for (std::int64_t epoch = 0; epoch < epochs; ++epoch) {
    DataProto epoch_data = shuffle ? data.index(epoch_order(rows, true, rng())) : data;
    for (std::int64_t s = 0; s < rows; s += mini) {
      DataProto mb = epoch_data.slice(s, s + mini);
      info.dp_size = ctx.world_size;
      info.batch_num_tokens = allreduce_scalar(ctx, mask_sum(mb.tensor("response_mask")));
      zero();
      for (std::int64_t u = 0; u < mini; u += micro) micro_step(mb.slice(u, u + micro), static_cast<kernels::AggInfo const&>(info));
      if constexpr (std::is_invocable_v<Grads&, WorkerContext const&>) grads(ctx);  // averages in place (device engines)
      else allreduce_mean(ctx, grads());
      apply();
    }
  }
}

}  // namespace rlflow::roles::detail
