// rlflow/roles/standalone_rollout.hpp: the rollout worker of the async roads
// (roles::StandaloneRollout: the standalone rollout pool of separate_async, the rollout workers
// of colocate_async), with the test hooks of the async trainers (AsyncHooks) and the
// partial-rollout control it shares with the producer (RolloutControl).
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <rlflow/core/data_proto.hpp>               // DataProto
#include <rlflow/roles/actor_rollout_ref.hpp>  // engines, detail::generate_with
#include <rlflow/dispatch/worker_group.hpp>             // WorkerContext, methods

namespace rlflow {

//! Test hooks of the asynchronous trainers (random delays, injected failures). Every hook is
//! optional. rlflow's own (verl has none).
struct AsyncHooks {
  //! On each rollout worker's thread, before it generates its chunk of the batch of 'step'.
  std::function<void(std::int64_t step, int rank)> in_generate;
  //! On the driver, when step 'step' has taken its batch and before it trains on it.
  std::function<void(std::int64_t step, DataProto const& batch)> before_train;
  //! In the checkpoint engine, before the weights of 'version' move to the rollout workers.
  std::function<void(std::int64_t version)> on_sync;
  //! On each rollout worker's thread, before it loads weights sent by the checkpoint engine.
  std::function<void(int rank)> in_update_weights;
};

//! Shared by the producer and its rollout workers: partial rollout on/off and the abort flag a
//! weight publication raises (verl: abort_all_requests before a weight sync).
struct RolloutControl {
  bool partial_rollout = false;
  std::atomic<bool> abort{false};
};

namespace roles {

//! A rollout worker of its own (the standalone rollout pool of separate_async, or the rollout
//! workers that share the trainer's devices in colocate_async): one rollout engine holding its
//! tensor-parallel shard (rank = replica * TP + tp_rank), no actor, no reference. CPU engines
//! only. verl: the standalone rollout replica (RolloutReplica / LLMServer on its own pool).
template <class System, int TP = 1>
class StandaloneRollout {
  static_assert(std::is_same_v<System, cpu::tag>,
                "rlflow::Trainer<..., SeparateAsync, Backend<cuda::tag>>: the standalone rollout runs on the CPU engines "
                "only; use rlflow::Backend<rlflow::cpu::tag> or rlflow::Colocate<N>");
  using E = engines<System>;

 public:
  using role_tag = rollout_tag;
  static constexpr std::string_view role_name = "rollout";
  using rollout_dispatch = std::conditional_t<TP == 1, dispatch::DPComputeProto,
                                              dispatch::NDComputeProto<dispatch::MeshLayout<TP>>>;

  RLFLOW_SC_NOINLINE StandaloneRollout(WorkerContext const& ctx, RoleSetup setup, std::shared_ptr<AsyncHooks const> hooks,
                    std::shared_ptr<RolloutControl const> control = nullptr)
      : ctx_(&ctx),
        setup_(std::move(setup)),
        tok_(role_tokenizer(setup_)),
        rollout_(detail::make_rollout<E>(setup_, model::TPRank{ctx.rank % TP, TP})),
        hooks_(std::move(hooks)),
        control_(std::move(control)) {
    detail::apply_lm_head(rollout_, setup_.cfg, TP);  // actor_rollout_ref.model.lm_head
    // this worker thread's team, by the trainer workers' rule (TrainerOptions::threads_per_worker)
    model::layers::set_worker_threads(setup_.threads_per_worker > 0 ? setup_.threads_per_worker
                                                                    : model::layers::default_worker_threads(ctx.local_world_size));
  }

  //! Same contract as the hybrid role's generate_sequences (the same code runs, the agent loop
  //! included); meta_info 'global_step' names the step for the in_generate hook. Never sleeps: the
  //! pool only generates. A partial rollout never aborts an agent batch: its conversations run to
  //! their end and a weight sync waits for them.
  //! verl: generate_sequences (AsyncLLMServerManager.generate on a standalone replica)
  RLFLOW_SC_NOINLINE DataProto generate_sequences(DataProto const& prompts) {
    if constexpr (TP > 1) {
      if (!mesh_.tp) {
        mesh_ = comm::split_mesh(ctx_->comm(), TP);
        rollout_.set_tp_communicator(mesh_.tp.get());
      }
    }
    if (hooks_ && hooks_->in_generate) {
      std::int64_t step = -1;
      if (auto const* v = prompts.meta_info().find("global_step"); v && v->is_int()) step = v->as_int();
      hooks_->in_generate(step, ctx_->rank);
    }
    if (detail::uses_agent_loop(setup_.cfg, prompts)) {  // agent batches run to their end (no partial rollout)
      if constexpr (TP == 1)
        return detail::agent_generate(rollout_, *tok_, setup_.cfg, prompts, agent_tools_, tool_pool_);
      else
        throw config_error(msg("rlflow::roles::StandaloneRollout: actor_rollout_ref.rollout.multi_turn.enable (agent rollouts) ",
                               "runs on an unsharded rollout; the rollout has TP ", TP, "; use TP<1> or multi_turn.enable=false"));
    }
    if (!control_ || !control_->partial_rollout || TP > 1) return detail::generate_with(rollout_, *tok_, setup_.cfg, prompts);
    engine::GenerateControl gc;
    gc.abort = &control_->abort;
    if (prompts.has_tensor("partial_rollout_len")) return continue_partial(prompts, gc);
    return detail::generate_with(rollout_, *tok_, setup_.cfg, prompts, &gc);
  }

  //! Releases the rollout engine's KV cache and activations (colocate_async: the memory goes back
  //! to training while the rollout idles); returns the bytes released. The next generation
  //! re-acquires them. verl: sleep_replicas / release_kv_cache.
  RLFLOW_SC_NOINLINE std::int64_t sleep() {
    auto const held = static_cast<std::int64_t>(rollout_.memory_bytes());
    rollout_.sleep();
    return held;
  }
  //! Bytes the rollout engine holds now (KV cache and activations, weights excluded).
  std::int64_t memory_bytes() const { return static_cast<std::int64_t>(rollout_.memory_bytes()); }

  //! Loads a full flat copy of the policy's weights; each rank keeps its TP shard.
  //! verl: the checkpoint engine's receive side (update_weights on the replica)
  RLFLOW_SC_NOINLINE void update_weights(std::shared_ptr<std::vector<float> const> weights) {
    if (hooks_ && hooks_->in_update_weights) hooks_->in_update_weights(ctx_->rank);
    rollout_.load_weights(std::span<float const>(*weights));
    rollout_.wake();
  }

  //! This rank's rollout weights (its TP shard), for tests and tools.
  std::vector<float> rollout_weights() const { return {rollout_.weights().begin(), rollout_.weights().end()}; }
  //! This rank's LM head (actor_rollout_ref.model.lm_head): 0 replicated, 1 vocabulary-parallel.
  std::int64_t lm_head() const { return detail::lm_head_code(rollout_); }

  using methods = rlflow::methods<rlflow::method<&StandaloneRollout::generate_sequences, rollout_dispatch>,
                                  rlflow::method<&StandaloneRollout::update_weights, dispatch::OneToAll>,
                                  rlflow::method<&StandaloneRollout::sleep, dispatch::OneToAll>,
                                  rlflow::method<&StandaloneRollout::memory_bytes, dispatch::OneToAll>,
                                  rlflow::method<&StandaloneRollout::rollout_weights, dispatch::OneToAll>,
                                  rlflow::method<&StandaloneRollout::lm_head, dispatch::OneToAll>>;

 private:
  //! Continues the unfinished rows of an aborted generation (its output, 'partial_rollout_len'
  //! >= 0) with the weights loaded now: each row's prompt and tokens so far are the new prompt,
  //! the sampling counter goes on at its token index, so every token stays a function of (seed,
  //! index, the weights that drew it). Rows with the same length go in one call. verl:
  //! resume_generation (the partial rollout continues with the new weights).
  RLFLOW_SC_NOINLINE DataProto continue_partial(DataProto const& part, engine::GenerateControl gc) {
    if (rollout_.is_sleeping()) rollout_.wake();
    Tensor const& pids = part.tensor("prompts");
    Tensor const& am_full = part.tensor("attention_mask");
    Tensor responses = part.tensor("responses").clone();
    Tensor rmask = part.tensor("response_mask").clone();
    Tensor lp = part.tensor("rollout_log_probs").clone();
    auto const len = part.tensor("partial_rollout_len").span<std::int32_t>();
    auto const seeds_all = part.tensor("rollout_seed").span<std::int64_t>();
    std::int64_t const B = pids.dim(0), P = pids.dim(1), R = responses.dim(1);
    engine::SamplingParams const sp = detail::rollout_sampling(*tok_, setup_.cfg, part);
    std::map<std::int32_t, std::vector<std::int64_t>> groups;
    for (std::int64_t r = 0; r < B; ++r)
      if (len[static_cast<std::size_t>(r)] >= 0) groups[len[static_cast<std::size_t>(r)]].push_back(r);
    std::vector<std::int32_t> new_len(static_cast<std::size_t>(B), -1);
    for (auto const& [j, rows] : groups) {
      auto const nb = static_cast<std::int64_t>(rows.size());
      Tensor ids = Tensor::empty(DType::int32, Shape{nb, P + j});
      Tensor am = Tensor::empty(DType::int32, Shape{nb, P + j});
      std::vector<std::uint64_t> seeds(static_cast<std::size_t>(nb));
      for (std::int64_t i = 0; i < nb; ++i) {
        std::int64_t const r = rows[static_cast<std::size_t>(i)];
        for (std::int64_t t = 0; t < P; ++t) {
          ids.at<std::int32_t>(i, t) = pids.at<std::int32_t>(r, t);
          am.at<std::int32_t>(i, t) = am_full.at<std::int32_t>(r, t);
        }
        for (std::int64_t t = 0; t < j; ++t) {
          ids.at<std::int32_t>(i, P + t) = responses.at<std::int32_t>(r, t);
          am.at<std::int32_t>(i, P + t) = 1;
        }
        seeds[static_cast<std::size_t>(i)] = static_cast<std::uint64_t>(seeds_all[static_cast<std::size_t>(r)]);
      }
      engine::SamplingParams sp2 = sp;
      sp2.max_new_tokens = static_cast<int>(R - j);
      gc.first_token = static_cast<std::uint64_t>(j);
      engine::RolloutResult res = rollout_.generate(ids, am, sp2, seeds, gc);
      for (std::int64_t i = 0; i < nb; ++i) {
        std::int64_t const r = rows[static_cast<std::size_t>(i)];
        for (std::int64_t t = 0; t < R - j; ++t) {
          responses.at<std::int32_t>(r, j + t) = res.responses.at<std::int32_t>(i, t);
          rmask.at<std::int32_t>(r, j + t) = res.response_mask.at<std::int32_t>(i, t);
          lp.at<float>(r, j + t) = res.log_probs.at<float>(i, t);
        }
      }
      for (std::size_t u = 0; u < res.unfinished.size(); ++u)
        new_len[static_cast<std::size_t>(rows[static_cast<std::size_t>(res.unfinished[u])])] =
            j + (res.unfinished_generated.empty() ? res.generated : res.unfinished_generated[u]);
    }
    auto [full_ids, full_am] = detail::join_prompt_response(pids, am_full, responses, rmask);
    return DataProto::from_dict({{"prompts", pids},
                                 {"responses", responses},
                                 {"input_ids", full_ids},
                                 {"attention_mask", full_am},
                                 {"response_mask", rmask},
                                 {"rollout_log_probs", lp},
                                 {"rollout_seed", part.tensor("rollout_seed")},
                                 {"partial_rollout_len", Tensor::from(new_len)}},
                                part.non_tensors());
  }

  WorkerContext const* ctx_;
  RoleSetup setup_;
  std::shared_ptr<model::Tokenizer const> tok_;
  typename E::rollout rollout_;
  std::shared_ptr<AsyncHooks const> hooks_;
  std::shared_ptr<RolloutControl const> control_;
  comm::MeshCommunicators mesh_;
  std::shared_ptr<agent::ToolSet const> agent_tools_;  //!< agent rollouts' tools, loaded on first use
  std::unique_ptr<agent::ToolPool> tool_pool_;         //!< agent rollouts' tool threads (agent.num_workers), made on first use
};

}  // namespace roles

}  // namespace rlflow
