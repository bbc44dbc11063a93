// rlflow/roles/setup.hpp: what every built-in role is constructed from (RoleSetup: the run's
// TrainerConfig, the model shapes, the tokenizer alphabet) and the batch helpers they share
// (masks as float spans for the kernels, the global-token all-reduce, metric lists). No role here.
#pragma once
#include <cstdint>
#include <algorithm>  // std::sort, std::max_element
#include <map>
#include <memory>   // std::shared_ptr
#include <numeric>  // std::accumulate
#include <queue>    // std::priority_queue (Karmarkar-Karp)
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
  //! tests compare the paged engine with). Without it every rollout, at any TP and with either LM
  //! head, runs on the paged engine (roles::CpuRollout).
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

//! How a mini-batch (or a log-prob pass) is cut into micro-batches: 'rows' rows each, or, with
//! max_tokens > 0 (verl: use_dynamic_bsz), by token count: as few micro-batches as hold at most
//! max_tokens real tokens (attention_mask) each, balanced by Karmarkar-Karp. 'key' names the
//! token budget's config key in errors.
struct MicroBatching {
  std::int64_t rows = 1;
  std::int64_t max_tokens = 0;
  char const* key = "";                //!< the token budget's config key
  char const* who = "rlflow::roles";   //!< the caller, for errors
};

//! Real tokens (nonzero attention_mask) of each row of 'data'.
inline std::vector<std::int64_t> row_token_counts(DataProto const& data) {
  Tensor const& am = data.tensor("attention_mask");
  std::int64_t const B = am.dim(0), T = am.dim(1);
  std::vector<std::int64_t> n(static_cast<std::size_t>(B), 0);
  auto const m = am.span<std::int32_t const>();
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t) n[std::size_t(b)] += m[std::size_t(b * T + t)] != 0;
  return n;
}

//! Splits items of the given sizes into k sets of near-equal sums with the Karmarkar-Karp
//! largest differencing method: every item starts as a k-way partial partition (itself and k - 1
//! empty sets); the two partials of the largest spread (max sum - min sum) merge, largest set of one
//! with the smallest of the other, until one remains. Each set's indices ascend; sets are ordered by
//! their first index (deterministic). verl: seqlen_balancing.karmarkar_karp (equal_size=False).
inline std::vector<std::vector<std::int64_t>> karmarkar_karp(std::vector<std::int64_t> const& sizes, std::int64_t k) {
  struct Part {
    std::vector<std::pair<std::int64_t, std::vector<std::int64_t>>> sets;  // (sum, indices), sums descending
    std::int64_t id = 0;
    std::int64_t spread() const { return sets.front().first - sets.back().first; }
  };
  auto const by_spread = [](Part const& a, Part const& b) {
    return a.spread() != b.spread() ? a.spread() < b.spread() : a.id > b.id;  // largest spread, then oldest, first
  };
  std::priority_queue<Part, std::vector<Part>, decltype(by_spread)> q(by_spread);
  std::int64_t next = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    Part p;
    p.sets.assign(static_cast<std::size_t>(k), {});
    p.sets[0] = {sizes[i], {std::int64_t(i)}};
    p.id = next++;
    q.push(std::move(p));
  }
  if (q.empty()) return {};
  while (q.size() > 1) {
    Part a = q.top();
    q.pop();
    Part b = q.top();
    q.pop();
    Part m;
    m.id = next++;
    m.sets.resize(static_cast<std::size_t>(k));
    for (std::size_t j = 0; j < std::size_t(k); ++j) {
      auto& x = a.sets[j];
      auto& y = b.sets[std::size_t(k) - 1 - j];
      m.sets[j].first = x.first + y.first;
      m.sets[j].second = std::move(x.second);
      m.sets[j].second.insert(m.sets[j].second.end(), y.second.begin(), y.second.end());
    }
    std::stable_sort(m.sets.begin(), m.sets.end(), [](auto const& u, auto const& v) { return u.first > v.first; });
    q.push(std::move(m));
  }
  Part last = q.top();
  std::vector<std::vector<std::int64_t>> out;
  for (auto& [sum, idx] : last.sets) {
    if (idx.empty()) continue;
    std::sort(idx.begin(), idx.end());
    out.push_back(std::move(idx));
  }
  std::sort(out.begin(), out.end(), [](auto const& u, auto const& v) { return u.front() < v.front(); });
  return out;
}

//! The micro-batches (row indices of 'data') of a MicroBatching: consecutive runs of 'rows' rows,
//! or token-budget sets: k = ceil(total tokens / max_tokens) Karmarkar-Karp sets, k raised until
//! every set holds at most max_tokens tokens. A row longer than the budget is a config_error.
//! verl: seqlen_balancing.rearrange_micro_batches.
inline std::vector<std::vector<std::int64_t>> micro_batches(char const* who, DataProto const& data, MicroBatching const& mb) {
  std::int64_t const n = data.size();
  std::vector<std::vector<std::int64_t>> out;
  if (mb.max_tokens <= 0) {
    std::int64_t const step = std::max<std::int64_t>(1, mb.rows);
    for (std::int64_t s = 0; s < n; s += step) {
      out.emplace_back();
      for (std::int64_t i = s; i < std::min(n, s + step); ++i) out.back().push_back(i);
    }
    return out;
  }
  std::vector<std::int64_t> const len = row_token_counts(data);
  for (std::size_t i = 0; i < len.size(); ++i)
    if (len[i] > mb.max_tokens)
      throw config_error(msg(who, ": row ", i, " holds ", len[i], " tokens, more than ", mb.key, "=", mb.max_tokens,
                             " allows in one micro-batch; raise ", mb.key, " to at least data.max_prompt_length + "
                             "data.max_response_length"));
  std::int64_t const total = std::accumulate(len.begin(), len.end(), std::int64_t{0});
  for (std::int64_t k = std::max<std::int64_t>(1, (total + mb.max_tokens - 1) / mb.max_tokens); k <= n; ++k) {
    out = karmarkar_karp(len, k);
    bool fits = true;
    for (auto const& set : out) {
      std::int64_t s = 0;
      for (auto i : set) s += len[std::size_t(i)];
      fits = fits && s <= mb.max_tokens;
    }
    if (fits) return out;
  }
  return out;  // k = n: one row per micro-batch, each within the budget
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
//! (shuffled per epoch from 'seed' when 'shuffle'), each cut into micro-batches by 'micro' (fixed
//! rows, or a token budget: MicroBatching). Every micro-batch's loss is normalised by the whole
//! mini-batch (the AggInfo below), so the accumulated gradient does not depend on the cut.
//! For every mini-batch: 'info' gets the DP size, the response-token count of the whole
//! mini-batch on all ranks (all-reduced) and 'global_batch_size'; 'zero' clears the gradients;
//! 'micro_step(mc, info)' runs forward + backward of one micro-batch; the gradients 'grads()' (a
//! span) are averaged across ranks, or 'grads(ctx)' averages them itself; 'apply()' steps the
//! optimizer and records metrics.
template <class Grads, class Zero, class MicroStep, class Apply>
void for_each_mini_batch(WorkerContext const& ctx, DataProto const& data, std::int64_t mini, MicroBatching const& micro,
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
      if (micro.max_tokens <= 0) {
        for (std::int64_t u = 0; u < mini; u += micro.rows)
          micro_step(mb.slice(u, u + micro.rows), static_cast<kernels::AggInfo const&>(info));
      } else {
        for (auto const& idx : micro_batches(micro.who, mb, micro))
          micro_step(mb.index(idx), static_cast<kernels::AggInfo const&>(info));
      }
      if constexpr (std::is_invocable_v<Grads&, WorkerContext const&>) grads(ctx);  // averages in place (device engines)
      else allreduce_mean(ctx, grads());
      apply();
    }
  }
}

}  // namespace rlflow::roles::detail
