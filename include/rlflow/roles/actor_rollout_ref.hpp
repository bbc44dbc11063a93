// rlflow/roles/actor_rollout_ref.hpp: roles::ActorRolloutRef (= BasicActorRolloutRef<cpu::tag>; <System, TP> runs
// the rollout as tensor-parallel replicas), the hybrid policy role (verl's
// ActorRolloutRefWorker with hybrid_engine=true): one worker holds the actor's training engine,
// the rollout engine and the frozen reference, so weights move in place (no copy across
// devices) and the rollout's memory is released while the actor trains (sleep / wake).
// Shapes: b rows of this rank's chunk, P prompt width, R = data.max_response_length.
#pragma once
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>  // std::is_same_v
#include <utility>
#include <vector>

#include <rlflow/agent/rollout_adapter.hpp>     // RolloutEngineGenerator (agent rollouts)
#include <rlflow/algorithm/advantage_step.hpp>         // rollout_correction_options
#include <rlflow/core/backend.hpp>                // cpu::par
#include <rlflow/dispatch/dispatch.hpp>      // DPComputeProto, DPComputeMetric, OneToAll
#include <rlflow/engine/checkpoint.hpp>      // save_checkpoint, load_checkpoint
#include <rlflow/engine/rollout_engine.hpp>  // RolloutEngine
#include <rlflow/roles/cpu_rollout.hpp>      // CpuRollout (the paged engine, or the static one)
#include <rlflow/engine/training_engine.hpp> // TrainingEngine
#include <rlflow/kernels/kernels.hpp>        // compute_policy_loss, agg_loss, kl_loss
#include <rlflow/dispatch/method.hpp>                 // method, methods
#include <rlflow/dispatch/role.hpp>             // actor_tag
#include <rlflow/roles/agent_rollout.hpp>    // generate_with_agent
#include <rlflow/roles/setup.hpp>            // RoleSetup, MetricLists, helpers

namespace rlflow::roles {

//! AdamW settings from verl's optim keys. total_optimizer_steps sizes the cosine schedule and
//! lr_warmup_steps_ratio (verl: lr_warmup_steps = ratio * total steps when lr_warmup_steps < 0).
inline engine::OptimizerConfig optimizer_config(OptimConfig const& o, double grad_clip, std::int64_t total_optimizer_steps) {
  engine::OptimizerConfig c;
  c.lr = static_cast<float>(o.lr);
  c.beta1 = static_cast<float>(o.betas[0]);
  c.beta2 = static_cast<float>(o.betas[1]);
  c.weight_decay = static_cast<float>(o.weight_decay);
  c.max_grad_norm = static_cast<float>(grad_clip);
  c.min_lr_ratio = static_cast<float>(o.min_lr_ratio);
  c.warmup_steps = static_cast<int>(o.lr_warmup_steps >= 0 ? o.lr_warmup_steps
                                                           : static_cast<std::int64_t>(o.lr_warmup_steps_ratio *
                                                                                       static_cast<double>(total_optimizer_steps)));
  std::string_view const sched = o.lr_scheduler_type.view();
  if (sched == "constant") {
    c.schedule = engine::LRSchedule::constant;
  } else if (sched == "cosine") {
    c.schedule = engine::LRSchedule::warmup_cosine;
    c.total_steps = static_cast<int>(total_optimizer_steps);
  } else {
    throw config_error(msg("rlflow: optim.lr_scheduler_type='", sched, "' is not supported; use constant or cosine"));
  }
  c.validate();
  return c;
}

//! The engines of the built-in roles on execution system 'System' (cpu::tag here; the cuda::tag
//! specialization is in rlflow/trainer/trainer_cuda.cuh, nvcc only) and what differs between them:
//! binding the worker's thread to its device, moving weights from the actor into the rollout,
//! averaging gradients across ranks, checkpoints and device memory counters.
template <class System>
struct engines {};

template <>
struct engines<cpu::tag> {
  using training = engine::TrainingEngine;
  using rollout = CpuRollout;
  //! false: the actor's losses run on cpu::par over host tensors in update_actor; true (CUDA):
  //! engines::actor_micro_step runs forward, the loss kernels and backward on the device.
  static constexpr bool device_losses = false;
  //! Nothing to bind on the CPU (the CUDA twin calls cudaSetDevice(local_rank) on the worker's thread).
  struct device_binding {
    explicit device_binding(WorkerContext const&) {}
  };
  //! The base weights, then (LoRA) the adapters merged into the rollout's copy: no other copy of the model.
  static void load_rollout(rollout& r, training const& t) {
    r.load_weights(t.params());
    if (t.lora_on()) r.merge_lora(t.lora_layout(), t.trainable());
  }
  //! The rollout engine of TP rank 'tp': the paged engine from actor_rollout_ref.rollout.*, the
  //! static one for a TP > 1 vocabulary-parallel LM head or RoleSetup::static_rollout.
  static rollout make_rollout(RoleSetup const& s, model::TPRank tp) { return CpuRollout(s.policy_model, tp, s.cfg, s.static_rollout); }
  //! Sets the training engine's weights from a full flat copy (weights from model.path); a
  //! training-TP engine keeps its slice.
  static void set_weights(training& t, std::vector<float> const& w) { t.load_weights(w); }
  //! Floats of the full model (a training-TP engine's params() hold only its shard).
  static std::size_t full_size(training const& t) { return t.layout().size(); }
  static void allreduce_grads(WorkerContext const& ctx, training& t) { detail::allreduce_mean(ctx, t.grads()); }
  //! The policy's weights: params(), merged with the LoRA adapters when the actor has them.
  static std::vector<float> weights(training const& t) {
    if (!t.lora_on()) return {t.params().begin(), t.params().end()};
    std::vector<float> full(t.layout().size());
    t.policy_weights(full);
    return full;
  }
  static void save(std::string const& path, training const& t) { engine::save_checkpoint(path, t); }
  static void load(std::string const& path, training& t) { engine::load_checkpoint(path, t); }
  //! Device memory counters of this worker's device (allocated, peak, reserved, peak reserved);
  //! all zero on the CPU.
  static std::vector<std::int64_t> memory_stats(bool /*reset_peak*/) { return {0, 0, 0, 0}; }
};

//! true when the engines of 'System' are visible in this translation unit.
template <class System>
concept has_engines = requires { typename engines<System>::training; };

namespace detail {
//! The actor's LoRA settings from actor_rollout_ref.model.* (A seeded from the model's seed).
inline model::LoraConfig lora_config(TrainerConfig const& cfg, model::GPTConfig const& m) {
  auto const& mc = cfg.actor_rollout_ref.model;
  model::LoraConfig lc;
  lc.rank = static_cast<int>(mc.lora_rank);
  lc.alpha = mc.lora_alpha;
  lc.target_modules = mc.target_modules.items();
  lc.seed = m.seed ^ 0x4c6f5241ull;  // "LoRA": independent of the base weights' draws
  return lc;
}
//! The rollout engine of TP rank 'tp' on engines 'E'.
template <class E>
typename E::rollout make_rollout(RoleSetup const& s, model::TPRank tp) {
  return E::make_rollout(s, tp);
}
}  // namespace detail

namespace detail {
//! The sampling parameters of a generate_sequences call: rollout.* (val_kwargs when meta_info
//! 'validate'; greedy when 'do_sample' is false), R = data.max_response_length.
inline engine::SamplingParams rollout_sampling(model::Tokenizer const& tok, TrainerConfig const& cfg, DataProto const& prompts) {
  auto const& rc = cfg.actor_rollout_ref.rollout;
  engine::SamplingParams sp;
  sp.temperature = static_cast<float>(rc.temperature);
  if (auto const* v = prompts.meta_info().find("do_sample"); v && v->is_bool() && !v->as_bool()) sp.temperature = 0.0f;
  sp.top_k = rc.top_k > 0 ? static_cast<int>(rc.top_k) : 0;
  sp.top_p = static_cast<float>(rc.top_p);
  sp.max_new_tokens = static_cast<int>(cfg.data.max_response_length);
  if (auto const* v = prompts.meta_info().find("validate"); v && v->is_bool() && v->as_bool()) {
    // verl: validation generates with rollout.val_kwargs
    auto const& vk = rc.val_kwargs;
    sp.temperature = vk.do_sample ? static_cast<float>(vk.temperature) : 0.0f;
    sp.top_k = vk.top_k > 0 ? static_cast<int>(vk.top_k) : 0;
    sp.top_p = static_cast<float>(vk.top_p);
  }
  sp.eos_id = tok.eos_id();
  sp.pad_id = tok.pad_id();
  sp.vocab_limit = tok.vocab_size();  // never an id the tokenizer cannot decode (a model's padding rows)
  return sp;
}

//! The [prompt | response] rows of a generation: input_ids and attention_mask (B, P + R) from the
//! prompts' ids and mask (B, P) and the responses and their mask (B, R). verl: the concatenation
//! in vLLMRollout.generate_sequences.
inline std::pair<Tensor, Tensor> join_prompt_response(Tensor const& ids, Tensor const& am, Tensor const& responses,
                                                      Tensor const& response_mask) {
  std::int64_t const b = ids.dim(0), P = ids.dim(1), R = responses.dim(1);
  Tensor full_ids = Tensor::empty(DType::int32, Shape{b, P + R});
  Tensor full_am = Tensor::empty(DType::int32, Shape{b, P + R});
  for (std::int64_t i = 0; i < b; ++i) {
    for (std::int64_t t = 0; t < P; ++t) {
      full_ids.at<std::int32_t>(i, t) = ids.at<std::int32_t>(i, t);
      full_am.at<std::int32_t>(i, t) = am.at<std::int32_t>(i, t);
    }
    for (std::int64_t t = 0; t < R; ++t) {
      full_ids.at<std::int32_t>(i, P + t) = responses.at<std::int32_t>(i, t);
      full_am.at<std::int32_t>(i, P + t) = response_mask.at<std::int32_t>(i, t);
    }
  }
  return {std::move(full_ids), std::move(full_am)};
}

//! The paged engine's counters of one generate call under vLLM's metric names (the trainer logs
//! them as perf/rollout/<name>, summed over the rollout ranks): prefix-cache queries and hits
//! (prompt tokens looked up / found cached), preemptions, peak KV-cache block usage and bytes,
//! prompt tokens prefilled and tokens generated.
inline Dict paged_rollout_metrics(engine::PagedMetrics const& m) {
  Dict d;
  d.set("prefix_cache_queries", static_cast<double>(m.prefix_cache_queries));
  d.set("prefix_cache_hits", static_cast<double>(m.prefix_cache_hits));
  d.set("num_preemptions", static_cast<double>(m.preemptions));
  d.set("kv_cache_peak_usage_perc", m.num_blocks ? double(m.peak_blocks_used) / m.num_blocks : 0.0);
  d.set("kv_cache_peak_bytes", static_cast<double>(m.peak_kv_bytes()));
  d.set("prompt_tokens", static_cast<double>(m.prompt_tokens_prefilled));
  d.set("generation_tokens", static_cast<double>(m.generation_tokens));
  return d;
}

//! The body of generate_sequences shared by the hybrid role and the standalone rollout
//! (trainer_async.hpp): wakes 'rollout', samples R = data.max_response_length tokens per row of
//! 'prompts' and returns the generation output (see BasicActorRolloutRef::generate_sequences).
//! 'ctl' (partial rollout, CPU engine): an abortable call; when it stops early the output also
//! holds 'partial_rollout_len' (rows) int32: the tokens so far of each unfinished row, -1 for
//! finished rows (all -1 when it ran to the end; StandaloneRollout continues such a batch).
template <class Rollout>
DataProto generate_with(Rollout& rollout, model::Tokenizer const& tok, TrainerConfig const& cfg, DataProto const& prompts,
                        engine::GenerateControl const* ctl = nullptr) {
  if (rollout.is_sleeping()) rollout.wake();
  Tensor const& ids = prompts.tensor("input_ids");
  Tensor const& am = prompts.tensor("attention_mask");
  auto seeds_t = prompts.tensor("rollout_seed").span<std::int64_t>();
  std::vector<std::uint64_t> seeds(seeds_t.begin(), seeds_t.end());
  engine::SamplingParams const sp = rollout_sampling(tok, cfg, prompts);
  engine::RolloutResult res;
  if constexpr (requires { rollout.paged(); })
    if (rollout.paged()) rollout.paged()->reset_metrics();
  if constexpr (requires { rollout.generate(ids, am, sp, seeds, *ctl); }) {
    res = ctl ? rollout.generate(ids, am, sp, seeds, *ctl) : rollout.generate(ids, am, sp, seeds);
  } else {
    res = rollout.generate(ids, am, sp, seeds);
  }
  auto [full_ids, full_am] = join_prompt_response(ids, am, res.responses, res.response_mask);
  DataProto out = DataProto::from_dict({{"prompts", ids},
                                        {"responses", res.responses},
                                        {"input_ids", full_ids},
                                        {"attention_mask", full_am},
                                        {"response_mask", res.response_mask},
                                        {"rollout_log_probs", res.log_probs},
                                        {"rollout_seed", prompts.tensor("rollout_seed")}},
                                       prompts.non_tensors());
  if constexpr (requires { rollout.paged(); })
    if (rollout.paged()) out.meta_info().set(std::string(metrics_key), paged_rollout_metrics(rollout.paged()->metrics()));
  if (ctl) {  // always present in an abortable call, so DP chunks concatenate
    std::vector<std::int32_t> len(static_cast<std::size_t>(ids.dim(0)), -1);
    for (std::size_t u = 0; u < res.unfinished.size(); ++u)
      len[static_cast<std::size_t>(res.unfinished[u])] = res.unfinished_generated.empty() ? res.generated : res.unfinished_generated[u];
    out.set_tensor("partial_rollout_len", Tensor::from(len));
  }
  return out;
}

//! generate_sequences through the agent loop on an unsharded CPU rollout, shared by the hybrid
//! role and the standalone rollout: on the paged engine every row's conversation is in flight at
//! once, tools on 'pool' (made with actor_rollout_ref.rollout.agent.num_workers threads on first
//! use); on the static engine the rows run one at a time (agent::RolloutEngineGenerator). Each row
//! seeds by its rollout_seed, so a row's output does not depend on the worker or the rows beside
//! it (on the static engine up to the products' rounding; see generate_with_agent). 'tools' is
//! loaded on first use (agent_tools). verl: AgentLoopManager.generate_sequences.
template <class Rollout>
DataProto agent_generate(Rollout& rollout, model::Tokenizer const& tok, TrainerConfig const& cfg, DataProto const& prompts,
                         std::shared_ptr<agent::ToolSet const>& tools, std::unique_ptr<agent::ToolPool>& pool) {
  if (rollout.is_sleeping()) rollout.wake();
  AgentRolloutSetup const& setup = agent_rollout_setup();
  if (!tools) tools = agent_tools(cfg, setup);
  engine::SamplingParams const sp = rollout_sampling(tok, cfg, prompts);
  if constexpr (requires { rollout.paged(); }) {
    if (engine::PagedEngine* pg = rollout.paged()) {
      if (!pool) pool = std::make_unique<agent::ToolPool>(static_cast<int>(cfg.actor_rollout_ref.rollout.agent.num_workers));
      return generate_with_agent(*pg, tok, cfg, prompts, sp, setup, *tools, pool.get());
    }
  }
  agent::RolloutEngineGenerator gen(rollout);
  return generate_with_agent(agent::generator_ref(gen), tok, cfg, prompts, sp, setup, *tools);
}

//! The training TP degree T of a worker's group (actor_rollout_ref.actor.megatron.
//! tensor_model_parallel_size; the colocated group has one mesh, so the critic uses the actor's
//! key): 1, or T on a group of a multiple of T workers built with GroupOptions::tp = T. Anything
//! else is a config_error naming 'role' (the public name of the role asking).
inline int training_tp_degree(WorkerContext const& ctx, TrainerConfig const& cfg, char const* role) {
  auto const t = cfg.actor_rollout_ref.actor.megatron.tensor_model_parallel_size;
  if (t == 1) return 1;
  if (t < 1 || ctx.world_size % t != 0 || ctx.shape.tp != t)
    throw config_error(msg(role, ": actor_rollout_ref.actor.megatron.tensor_model_parallel_size=", t,
                           " needs a group of a multiple of ", t, " workers built with GroupOptions::tp = ", t,
                           " (this group: ", ctx.world_size, " workers, tp = ", ctx.shape.tp,
                           "); the Trainer does this, a hand-built group must set GroupOptions::tp"));
  return static_cast<int>(t);
}
}  // namespace detail

//! verl: ActorRolloutRefWorker (hybrid engine). Methods keep verl's names. 'System' picks the
//! engines (engines<System>): cpu::tag, or cuda::tag with rlflow/trainer/trainer_cuda.cuh in a .cu file.
//! RolloutTP > 1: the rollout runs as replicas of RolloutTP ranks (rank = replica * RolloutTP +
//! tp_rank), each rank holding its tensor-parallel shard; generate_sequences gives a replica's
//! ranks the same chunk (verl: make_nd_compute_dataproto_dispatch_fn over the rollout mesh) and
//! returns one result per replica, while the actor still trains data-parallel on every rank.
template <class System, int RolloutTP = 1>
class BasicActorRolloutRef {
  static_assert(has_engines<System>,
                "rlflow::roles::BasicActorRolloutRef<cuda::tag>: the CUDA engines are not visible; include "
                "<rlflow/trainer/trainer_cuda.cuh> in a .cu file compiled by nvcc");
  static_assert(RolloutTP >= 1, "rlflow::roles::BasicActorRolloutRef<System, TP>: TP must be at least 1");
  static_assert(RolloutTP == 1 || std::is_same_v<System, cpu::tag>,
                "rlflow::Trainer<..., TP<N>, Backend<cuda::tag>>: tensor-parallel rollout replicas run on the CPU "
                "engines only (the CUDA engines have no sharded layout yet); use TP<1> with the CUDA backend");
  using E = engines<System>;

 public:
  static constexpr int rollout_tp = RolloutTP;
  //! verl: the rollout mesh's nd-compute dispatch. At TP = 1 it splits as DP_COMPUTE_PROTO over
  //! every rank, also when the group's own mesh has training TP groups (GroupOptions::tp > 1),
  //! so those ranks generate different chunks instead of the same one.
  using rollout_dispatch = dispatch::NDComputeProto<dispatch::MeshLayout<RolloutTP>>;
  using role_tag = actor_tag;
  static constexpr std::string_view role_name = "actor_rollout_ref";
  using system = System;

  //! Training tensor parallelism (actor_rollout_ref.actor.megatron.tensor_model_parallel_size =
  //! T > 1, CPU engines): the group's ranks form TP groups of T consecutive ranks (the group's mesh,
  //! GroupOptions::tp = T, so DPComputeProto gives a TP group's ranks the same rows and collects from
  //! tp_rank 0); the actor and the reference hold TP rank (rank % T)'s shard; gradients are averaged
  //! across the world / T DP ranks only. The TP and DP communicators are split here, the first thing
  //! every rank does (no work before it can fail on one rank only).
  RLFLOW_SC_NOINLINE BasicActorRolloutRef(WorkerContext const& ctx, RoleSetup setup, std::int64_t total_optimizer_steps = 1)
      : ctx_(&ctx),
        bind_(ctx),
        setup_(std::move(setup)),
        tok_(role_tokenizer(setup_)),
        train_tp_(training_tp_of(ctx, setup_.cfg)),
        train_mesh_(train_tp_ > 1 ? comm::split_mesh(ctx.comm(), train_tp_) : comm::MeshCommunicators{}),
        actor_(make_training(setup_.policy_model,
                             optimizer_config(setup_.cfg.actor_rollout_ref.actor.optim, setup_.cfg.actor_rollout_ref.actor.grad_clip,
                                              total_optimizer_steps))),
        ref_(make_training(setup_.policy_model, engine::OptimizerConfig{})),
        rollout_(detail::make_rollout<E>(setup_, model::TPRank{ctx.rank % RolloutTP, RolloutTP})) {
    if (setup_.threads_per_worker < 0)
      throw config_error(msg("rlflow::roles::ActorRolloutRef: threads_per_worker = ", setup_.threads_per_worker,
                             " must be >= 0 (0: from the machine); set TrainerOptions::threads_per_worker"));
    if constexpr (std::is_same_v<System, cpu::tag>)  // this worker thread's team (workers x threads)
      model::layers::set_worker_threads(setup_.threads_per_worker > 0 ? setup_.threads_per_worker
                                                                      : model::layers::default_worker_threads(ctx.local_world_size));
    detail::apply_lm_head(actor_, setup_.cfg, train_tp_);  // actor_rollout_ref.model.lm_head
    detail::apply_lm_head(ref_, setup_.cfg, train_tp_);
    detail::apply_lm_head(rollout_, setup_.cfg, RolloutTP);
    if (setup_.cfg.actor_rollout_ref.model.use_remove_padding) {  // packed sequences in the actor's and reference's passes
      if constexpr (requires { actor_.set_remove_padding(true); }) {
        actor_.set_remove_padding(true);
        ref_.set_remove_padding(true);
      } else {
        throw config_error("rlflow::roles::ActorRolloutRef: actor_rollout_ref.model.use_remove_padding=true needs a training "
                           "engine with set_remove_padding (the built-in CPU and CUDA engines have it); set it to false");
      }
    }
    if (setup_.cfg.actor_rollout_ref.model.enable_gradient_checkpointing) {  // keep each layer's input only
      if constexpr (requires { actor_.set_gradient_checkpointing(true); }) {
        actor_.set_gradient_checkpointing(true);
        ref_.set_gradient_checkpointing(true);  // forwards only: the smaller activation buffer, no recompute
      } else {
        throw config_error("rlflow::roles::ActorRolloutRef: actor_rollout_ref.model.enable_gradient_checkpointing=true needs "
                           "the CPU engines (the CUDA training engine keeps every layer's activations); set it to false");
      }
    }
    if (setup_.policy_init) {  // weights from model.path
      std::size_t const have = E::full_size(actor_);
      if (setup_.policy_init->size() != have)
        throw shape_error(msg("rlflow::roles::ActorRolloutRef: the initial weights hold ", setup_.policy_init->size(),
                              " floats but the model has ", have));
      E::set_weights(actor_, *setup_.policy_init);
    }
    if (setup_.cfg.actor_rollout_ref.model.lora_rank > 0) {  // LoRA on the actor; the reference stays the base model
      if constexpr (requires(typename E::training& t, model::LoraConfig const& lc) { t.enable_lora(lc); }) {
        if (train_tp_ > 1 || RolloutTP > 1)
          throw config_error(msg("rlflow::roles::ActorRolloutRef: actor_rollout_ref.model.lora_rank=", setup_.cfg.actor_rollout_ref.model.lora_rank,
                                 " needs training and rollout TP 1 (got ", train_tp_, " and ", RolloutTP,
                                 "); use TP<1> and actor_rollout_ref.actor.megatron.tensor_model_parallel_size=1, or lora_rank=0"));
        actor_.enable_lora(detail::lora_config(setup_.cfg, setup_.policy_model));
      } else {
        throw config_error("rlflow::roles::ActorRolloutRef: actor_rollout_ref.model.lora_rank > 0 needs the CPU engines (the CUDA "
                           "training engine trains full weights); set lora_rank=0 or use Backend<cpu::tag>");
      }
    }
    if (train_tp_ == 1) {
      E::load_rollout(rollout_, actor_);
      ref_.load_weights(actor_.params());
    } else if constexpr (std::is_same_v<System, cpu::tag>) {
      // No collective here: the reference has the actor's shard layout (a plain copy); the rollout
      // takes the same shard when its layout is the actor's, else the full initial weights
      // (model.path) or, without them, the same seeded initialisation every engine starts from.
      auto const a = actor_.params();
      std::copy(a.begin(), a.end(), ref_.params().begin());
      if (rollout_cut_as_actor()) rollout_.load_shard(a);
      else if (setup_.policy_init) rollout_.load_weights(*setup_.policy_init);
      // the DP view of this worker: for_each_mini_batch normalises and averages over the DP group
      dp_ctx_ = ctx;
      dp_ctx_.world_size = ctx.world_size / train_tp_;
      dp_ctx_.rank = (ctx.rank / train_tp_) % dp_ctx_.world_size;
      dp_ctx_.communicator = train_mesh_.dp.get();
    }
  }

  //! The training TP degree T (actor_rollout_ref.actor.megatron.tensor_model_parallel_size).
  int training_tp() const { return train_tp_; }
  //! Whether the rollout's shard layout is the actor's (same TP, wte cut alike), so a weight sync
  //! hands the actor's shard over as it is (CPU engines under training TP).
  bool rollout_cut_as_actor() const {
    if constexpr (requires { rollout_.shard_layout().split_vocab(); })
      return RolloutTP == train_tp_ && rollout_.shard_layout().split_vocab() == actor_.shard_layout().split_vocab();
    else return false;
  }
  //! The LM heads this rank's engines use (actor_rollout_ref.model.lm_head): actor, reference,
  //! rollout; 0 replicated, 1 vocabulary-parallel, -1 an engine without the choice.
  std::vector<std::int64_t> lm_heads() const {
    return {detail::lm_head_code(actor_), detail::lm_head_code(ref_), detail::lm_head_code(rollout_)};
  }

  // ---- rollout ---------------------------------------------------------------------------

  //! Samples R = data.max_response_length tokens per row. In: input_ids, attention_mask (b, P)
  //! int32 left-padded, rollout_seed (b) int64. Out: the input's non-tensor columns and
  //! rollout_seed plus prompts (b, P), responses (b, R), input_ids and attention_mask (b, P+R),
  //! response_mask (b, R) int32, rollout_log_probs (b, R). meta_info 'do_sample' = false makes it
  //! greedy. Releases the rollout memory afterwards when rollout.free_cache_engine.
  //! verl: generate_sequences
  RLFLOW_SC_NOINLINE DataProto generate_sequences(DataProto const& prompts) {
    auto const& rc = setup_.cfg.actor_rollout_ref.rollout;
    if constexpr (RolloutTP > 1) {
      if (!mesh_.tp) {  // made inside the first collective call, so a failing rank aborts it
        mesh_ = comm::split_mesh(ctx_->comm(), RolloutTP);
        rollout_.set_tp_communicator(mesh_.tp.get());
        rollout_.share_replicated();  // one copy of wte, wpe, layer norms per replica (same process)
      }
    }
    DataProto out = detail::uses_agent_loop(setup_.cfg, prompts) ? generate_with_agent_loop(prompts)
                                                                  : detail::generate_with(rollout_, *tok_, setup_.cfg, prompts);
    if (rc.free_cache_engine) rollout_.sleep();
    return out;
  }

  //! generate_sequences through the agent loop (actor_rollout_ref.rollout.multi_turn.enable, or an
  //! agent_name column): detail::agent_generate. The CPU engine with an unsharded rollout only.
  //! verl: AgentLoopManager.
  DataProto generate_with_agent_loop(DataProto const& prompts) {
    if constexpr (std::is_same_v<System, cpu::tag> && RolloutTP == 1) {
      return detail::agent_generate(rollout_, *tok_, setup_.cfg, prompts, agent_tools_, tool_pool_);
    } else {
      throw config_error("rlflow::roles::ActorRolloutRef: actor_rollout_ref.rollout.multi_turn.enable (agent rollouts) runs on "
                         "the CPU engine with an unsharded rollout (TP<1>); set multi_turn.enable=false or use TP<1>");
    }
  }

  //! Copies the actor's weights into the rollout engine in place and wakes it (verl:
  //! update_weights with the 'naive' checkpoint engine: colocated, same device). With RolloutTP
  //! > 1 each rank reshards: it copies only its TP slice (and the replicated tensors) of its own
  //! DP actor's full weights, so a replica copies one model's worth of sharded bytes in total.
  //! Training TP = T > 1: when the rollout is cut as the actor (TP T, the same LM head), each
  //! rank hands its training shard to its rollout shard directly (the layouts coincide; no full
  //! copy exists); otherwise the TP group all-gathers the full weights into one reused buffer per
  //! rank, which is resharded.
  RLFLOW_SC_NOINLINE void update_weights() {
    if (train_tp_ == 1) {
      E::load_rollout(rollout_, actor_);
    } else if constexpr (std::is_same_v<System, cpu::tag>) {
      if (rollout_cut_as_actor()) {
        rollout_.load_shard(actor_.params());
      } else {
        full_.resize(actor_.layout().size());
        actor_.gather_weights(full_);
        rollout_.load_weights(full_);
      }
    }
    rollout_.wake();
  }

  // ---- log-probs -------------------------------------------------------------------------

  //! old_log_probs and entropys (b, R) of the responses under the current actor, logits divided
  //! by rollout.temperature. verl: compute_log_prob
  RLFLOW_SC_NOINLINE DataProto compute_log_prob(DataProto const& data) {
    bool const sps = setup_.cfg.actor_rollout_ref.actor.calculate_sum_pi_squared;
    auto const& rc = setup_.cfg.actor_rollout_ref.rollout;
    detail::MicroBatching const cut{std::max<std::int64_t>(1, rc.log_prob_micro_batch_size_per_gpu.value_or(data.size())),
                                    setup_.cfg.rollout_log_prob_use_dynamic_bsz() ? rc.log_prob_max_token_len_per_gpu : 0,
                                    "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu",
                                    "rlflow::roles::ActorRolloutRef::compute_log_prob"};
    auto [lp, ent, sq] = log_probs_of(actor_, data, cut, true, sps);
    DataProto out = DataProto::from_dict({{"old_log_probs", lp}, {"entropys", ent}});
    if (sps) out.set_tensor("sum_pi_squared", sq);  // verl: actor.calculate_sum_pi_squared
    return out;
  }

  //! ref_log_prob (b, R) under the frozen reference policy. verl: compute_ref_log_prob
  RLFLOW_SC_NOINLINE DataProto compute_ref_log_prob(DataProto const& data) {
    auto const& cfg = setup_.cfg;
    detail::MicroBatching const cut{
        std::max<std::int64_t>(1, cfg.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu.value_or(data.size())),
        cfg.ref_log_prob_use_dynamic_bsz() ? cfg.actor_rollout_ref.ref.log_prob_max_token_len_per_gpu : 0,
        "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu", "rlflow::roles::ActorRolloutRef::compute_ref_log_prob"};
    Tensor lp = std::get<0>(log_probs_of(ref_, data, cut, false, false));
    return DataProto::from_dict({{"ref_log_prob", lp}});
  }

  // ---- training --------------------------------------------------------------------------

  //! PPO-style update over this rank's rows: ppo_epochs passes of mini-batches of
  //! ppo_mini_batch_size * n / dp rows, each cut into micro-batches whose gradients accumulate,
  //! then averaged across the DP ranks and applied (clip, AdamW). Losses use verl's global
  //! normalisation (token count of the whole mini-batch on all ranks). verl: update_actor
  RLFLOW_SC_NOINLINE MetricLists update_actor(DataProto const& data) {
    auto const& cfg = setup_.cfg;
    auto const& a = cfg.actor_rollout_ref.actor;
    WorkerContext const& dctx = train_tp_ > 1 ? dp_ctx_ : *ctx_;  // the DP group (every rank at T = 1)
    std::int64_t const n = cfg.actor_rollout_ref.rollout.n, dp = dctx.world_size;
    std::int64_t const mini = a.ppo_mini_batch_size * n / dp;
    // use_dynamic_bsz: micro-batches by token count (ppo_max_token_len_per_gpu), else fixed rows
    std::int64_t const micro = a.use_dynamic_bsz ? mini : a.ppo_micro_batch_size_per_gpu.value_or(mini);
    std::int64_t const rows = data.size();
    detail::check_batching("rlflow::roles::ActorRolloutRef::update_actor", rows, mini, micro);
    detail::MicroBatching const cut{micro, a.use_dynamic_bsz ? a.ppo_max_token_len_per_gpu : 0,
                                    "actor_rollout_ref.actor.ppo_max_token_len_per_gpu", "rlflow::roles::ActorRolloutRef::update_actor"};
    kernels::PolicyLossConfig pcfg;
    pcfg.mode = kernels::parse_policy_loss_mode(a.policy_loss.loss_mode.view());
    pcfg.clip_ratio = a.clip_ratio;
    pcfg.clip_ratio_low = cfg.clip_ratio_low();
    pcfg.clip_ratio_high = cfg.clip_ratio_high();
    pcfg.clip_ratio_c = a.clip_ratio_c;
    pcfg.tau_pos = a.tau_pos;
    pcfg.tau_neg = a.tau_neg;
    pcfg.clip_cov_ratio = a.policy_loss.clip_cov_ratio;
    pcfg.clip_cov_lb = a.policy_loss.clip_cov_lb;
    pcfg.clip_cov_ub = a.policy_loss.clip_cov_ub;
    pcfg.kl_cov_ratio = a.policy_loss.kl_cov_ratio;
    pcfg.ppo_kl_coef = a.policy_loss.ppo_kl_coef;
    if (a.policy_loss.dro_beta) pcfg.dro_beta = *a.policy_loss.dro_beta;
    if (cfg.algorithm.rollout_correction.bypass_mode) {  // verl: apply_bypass_mode sets loss_mode = bypass_mode
      pcfg.mode = kernels::PolicyLossMode::bypass_mode;
      pcfg.rollout_correction = rollout_correction_options(cfg.algorithm.rollout_correction);
    }
    kernels::AggMode const agg = kernels::parse_agg_mode(a.loss_agg_mode.view());
    bool const use_entropy = a.entropy_coeff != 0.0;
    bool const use_kl = a.use_kl_loss;
    kernels::KLPenalty const kl_kind = kernels::parse_kl_penalty(a.kl_loss_type.view());
    float const temperature = static_cast<float>(cfg.actor_rollout_ref.rollout.temperature);
    int const R = static_cast<int>(data.tensor("responses").dim(1));

    MetricLists m;
    kernels::AggInfo info0;
    info0.global_batch_size = static_cast<double>(a.ppo_mini_batch_size * n);
    if (a.loss_scale_factor) info0.loss_scale_factor = *a.loss_scale_factor;
    double pg_loss = 0, entropy_loss = 0, kl_value = 0;
    detail::for_each_mini_batch(
        dctx, data, mini, cut, a.ppo_epochs, a.shuffle,
        static_cast<std::uint64_t>(a.data_loader_seed + dctx.rank),  // verl: data_loader_seed + dp_rank
        info0, [&](WorkerContext const& c) { E::allreduce_grads(c, actor_); },
        [&] {
          actor_.zero_grad();
          pg_loss = entropy_loss = kl_value = 0;
        },
        [&](DataProto const& mc, kernels::AggInfo const& info) {
          std::int64_t const rows_mc = mc.size();
          kernels::Dims const d{rows_mc, R};
          if constexpr (E::device_losses) {
            E::actor_micro_step(actor_, mc, d, pcfg, agg, info, temperature, use_entropy, a.entropy_coeff, use_kl, kl_kind,
                                a.kl_loss_coef, m, pg_loss, entropy_loss, kl_value);
            return;
          }
          engine::LogProbResult fwd = actor_.forward(mc.tensor("input_ids"), mc.tensor("attention_mask"), R, temperature, use_entropy);
          std::span<std::int32_t const> const mask = mc.tensor("response_mask").span<std::int32_t>();  // verl's int32, read in place
          Tensor dlogp = Tensor::zeros(DType::float32, Shape{rows_mc, R});
          auto res = kernels::compute_policy_loss(cpu::par, d, pcfg, mc.tensor("old_log_probs").span<float>(),
                                                  fwd.log_probs.span<float>(), mc.tensor("advantages").span<float>(), mask, agg,
                                                  info, kernels::Grad{dlogp.span<float>(), 1.0, false},
                                                  mc.has_tensor("rollout_is_weights") ? mc.tensor("rollout_is_weights").span<float>()
                                                                                      : std::span<float const>{});
          pg_loss += res.loss;
          for (auto const& [key, value] : res.extra_metrics) m[key].push_back(value);  // bypass_mode: rollout_corr/*
          if (res.metrics.has_pg_clipfrac) m["actor/pg_clipfrac"].push_back(res.metrics.pg_clipfrac);
          if (res.metrics.has_ppo_kl) m["actor/ppo_kl"].push_back(res.metrics.ppo_kl);
          if (res.metrics.has_pg_clipfrac_lower) m["actor/pg_clipfrac_lower"].push_back(res.metrics.pg_clipfrac_lower);
          Tensor dent;
          if (use_entropy) {
            // loss -= entropy_coeff * agg(H): d/dH = -entropy_coeff * agg weights
            entropy_loss += kernels::agg_loss(cpu::par, d, fwd.entropy.span<float>(), mask, agg, info);
            dent = Tensor::empty(DType::float32, Shape{rows_mc, R});
            kernels::agg_loss_weights(cpu::par, d, mask, agg, info, dent.span<float>());
            for (auto& g : dent.span<float>()) g = static_cast<float>(-a.entropy_coeff * g);
          }
          if (use_kl)
            kl_value += kernels::kl_loss(cpu::par, d, kl_kind, fwd.log_probs.span<float>(), mc.tensor("ref_log_prob").span<float>(),
                                         mask, agg, info, kernels::Grad{dlogp.span<float>(), a.kl_loss_coef, true});
          actor_.backward(dlogp, dent);
        },
        [&] {
          double const grad_norm = actor_.optimizer_step();
          m["actor/pg_loss"].push_back(pg_loss);
          if (use_entropy) m["actor/entropy_loss"].push_back(entropy_loss);
          if (use_kl) {
            m["actor/kl_loss"].push_back(kl_value);
            m["actor/kl_coef"].push_back(a.kl_loss_coef);
          }
          m["actor/grad_norm"].push_back(grad_norm);
          m["actor/lr"].push_back(actor_.lr());
        });
    // Training TP: a TP group's ranks computed the same metrics; one copy per DP rank (tp_rank 0),
    // so the trainer's means weigh every DP rank once, as at T = 1.
    if (train_tp_ > 1 && ctx_->rank % train_tp_ != 0) return {};
    return m;
  }

  // ---- checkpoints -----------------------------------------------------------------------

  //! Writes the actor's weights and AdamW state to 'path' (a safetensors file of the full model).
  //! Rank 0 writes: the DP replicas are identical. Called on every rank (execute::All) so that,
  //! with training TP, the ranks of rank 0's TP group can gather the shards with it (a collective
  //! of that group; the other ranks return at once). The file is the same at every training TP.
  //! verl: save_checkpoint
  RLFLOW_SC_NOINLINE void save_checkpoint(std::string path) {
    if (train_tp_ == 1) {
      if (ctx_->rank == 0) E::save(path, actor_);
    } else if constexpr (std::is_same_v<System, cpu::tag>) {
      if (ctx_->rank < train_tp_) engine::save_checkpoint_gathered(path, actor_, ctx_->rank == 0);
    }
  }

  //! Restores the actor from 'path' on every rank (each training-TP rank keeps its shard of the
  //! full file, whatever TP wrote it) and syncs the rollout. verl: load_checkpoint
  RLFLOW_SC_NOINLINE void load_checkpoint(std::string path) {
    E::load(path, actor_);
    update_weights();
  }

  //! The actor's flat parameters (rank 0), for tests and tools.
  std::vector<float> actor_weights() const {
    check_unsharded("actor_weights");
    return E::weights(actor_);
  }
  //! The actor's full flat parameters on every rank: with training TP a collective of each TP
  //! group (all-gather of the shards); otherwise a copy. For tests, tools and the async modes.
  RLFLOW_SC_NOINLINE std::vector<float> gather_actor_weights() {
    if (train_tp_ == 1) return E::weights(actor_);
    if constexpr (std::is_same_v<System, cpu::tag>) {
      std::vector<float> full(actor_.layout().size());
      actor_.gather_weights(full);
      return full;
    } else {
      return {};
    }
  }
  //! This rank's actor gradient buffer as the last mini-batch of update_actor left it (averaged
  //! across the DP ranks, before the optimizer's clip factor; this rank's shard under training TP),
  //! for tests and tools (CPU engines).
  std::vector<float> actor_grads() const { return {actor_.grads().begin(), actor_.grads().end()}; }
  //! This rank's rollout weights (its TP shard, in ShardLayout order), for tests and tools (CPU engines).
  std::vector<float> rollout_weights() const {
    if constexpr (requires { rollout_.shard_weights(); }) return rollout_.shard_weights();
    else throw config_error("rlflow::roles::ActorRolloutRef::rollout_weights: available with the CPU engines only");
  }
  //! Bytes of the actor's kept-activation buffer (model::GPT::activation_bytes; -1 on engines
  //! without it), for tests and tools.
  std::int64_t actor_activation_bytes() const {
    if constexpr (requires { actor_.model().activation_bytes(); }) return static_cast<std::int64_t>(actor_.model().activation_bytes());
    else return -1;
  }
  //! Bytes held by the rollout's cache and activations (0 while asleep).
  std::int64_t rollout_memory_bytes() const { return static_cast<std::int64_t>(rollout_.memory_bytes()); }
  //! This worker's device memory counters {allocated, peak allocated, reserved, peak reserved}
  //! in bytes (zeros on the CPU); 'reset_peak' != 0 restarts the peaks afterwards (once per step).
  //! (An int, not a bool: dispatch's Dist<bool> would hold a std::vector<bool>.)
  std::vector<std::int64_t> memory_stats(int reset_peak) const { return E::memory_stats(reset_peak != 0); }

  using methods = rlflow::methods<
      rlflow::method<&BasicActorRolloutRef::generate_sequences, rollout_dispatch>,
      rlflow::method<&BasicActorRolloutRef::update_weights, dispatch::OneToAll>,
      rlflow::method<&BasicActorRolloutRef::compute_log_prob, dispatch::DPComputeProto>,
      rlflow::method<&BasicActorRolloutRef::compute_ref_log_prob, dispatch::DPComputeProto>,
      rlflow::method<&BasicActorRolloutRef::update_actor, dispatch::DPComputeMetric>,
      rlflow::method<&BasicActorRolloutRef::save_checkpoint, dispatch::OneToAll>,
      rlflow::method<&BasicActorRolloutRef::load_checkpoint, dispatch::OneToAll>,
      rlflow::method<&BasicActorRolloutRef::actor_weights, dispatch::OneToAll, execute::RankZero>,
      rlflow::method<&BasicActorRolloutRef::gather_actor_weights, dispatch::OneToAll>,
      rlflow::method<&BasicActorRolloutRef::training_tp, dispatch::OneToAll>,
      rlflow::method<&BasicActorRolloutRef::lm_heads, dispatch::OneToAll>,
      rlflow::method<&BasicActorRolloutRef::rollout_memory_bytes, dispatch::OneToAll>,
      rlflow::method<&BasicActorRolloutRef::rollout_weights, dispatch::OneToAll>,
      rlflow::method<&BasicActorRolloutRef::memory_stats, dispatch::OneToAll>>;

 private:
  //! Log-probs (and entropy, and the sum of squared probabilities) of 'responses' in the
  //! micro-batches of 'cut' (log_prob_micro_batch_size_per_gpu rows, or a token budget), each
  //! row's outputs written back at its own row.
  std::tuple<Tensor, Tensor, Tensor> log_probs_of(typename E::training& eng, DataProto const& data, detail::MicroBatching const& cut,
                                                  bool entropy, bool sum_pi_squared) {
    auto const& rc = setup_.cfg.actor_rollout_ref.rollout;
    std::int64_t const rows = data.size();
    int const R = static_cast<int>(data.tensor("responses").dim(1));
    Tensor lp = Tensor::empty(DType::float32, Shape{rows, R});
    Tensor ent = entropy ? Tensor::empty(DType::float32, Shape{rows, R}) : Tensor();
    Tensor sq = sum_pi_squared ? Tensor::empty(DType::float32, Shape{rows, R}) : Tensor();
    float const temperature = static_cast<float>(rc.temperature);
    auto const put = [R](Tensor const& from, Tensor& to, std::vector<std::int64_t> const& idx) {  // row i of 'from' -> row idx[i]
      auto const src = from.span<float const>();
      auto dst = to.span<float>();
      for (std::size_t i = 0; i < idx.size(); ++i)
        std::copy_n(src.begin() + std::ptrdiff_t(i) * R, R, dst.begin() + std::ptrdiff_t(idx[i]) * R);
    };
    for (auto const& idx : detail::micro_batches(cut.who, data, cut)) {
      bool const run = idx.back() - idx.front() + 1 == std::int64_t(idx.size());  // consecutive rows: a slice, no copy
      DataProto mc = run ? data.slice(idx.front(), idx.back() + 1) : data.index(idx);
      engine::LogProbResult r = eng.compute_log_prob(mc.tensor("input_ids"), mc.tensor("attention_mask"), R, temperature, entropy);
      put(r.log_probs, lp, idx);
      if (entropy) put(r.entropy, ent, idx);
      if (sum_pi_squared) put(eng.sum_pi_squared(), sq, idx);
    }
    return {lp, ent, sq};
  }

  //! The training TP degree of this worker's group (1 unless the CPU engines and T > 1).
  static int training_tp_of(WorkerContext const& ctx, TrainerConfig const& cfg) {
    auto const t = cfg.actor_rollout_ref.actor.megatron.tensor_model_parallel_size;
    if (t == 1) return 1;
    if constexpr (!std::is_same_v<System, cpu::tag>)
      throw config_error(msg("rlflow::roles::ActorRolloutRef: actor_rollout_ref.actor.megatron.tensor_model_parallel_size=", t,
                             " needs the CPU engines (the CUDA engines have no sharded layout); set it to 1"));
    return detail::training_tp_degree(ctx, cfg, "rlflow::roles::ActorRolloutRef");
  }
  //! A training engine: sharded over the training TP group when T > 1.
  typename E::training make_training(model::GPTConfig const& m, engine::OptimizerConfig const& opt) {
    if constexpr (std::is_same_v<System, cpu::tag>) {
      if (train_tp_ > 1) return typename E::training(m, opt, model::TPRank{ctx_->rank % train_tp_, train_tp_}, train_mesh_.tp.get());
    }
    return typename E::training(m, opt);
  }
  void check_unsharded(const char* fn) const {
    if (train_tp_ > 1)
      throw config_error(msg("rlflow::roles::ActorRolloutRef::", fn, ": not available with training tensor parallelism "
                             "(actor_rollout_ref.actor.megatron.tensor_model_parallel_size=", train_tp_,
                             "): the actor is sharded; use gather_actor_weights, or set the key to 1 for checkpoints"));
  }

  WorkerContext const* ctx_;
  typename E::device_binding bind_;  // before the engines: they allocate on the bound device
  RoleSetup setup_;
  std::shared_ptr<model::Tokenizer const> tok_;
  int train_tp_ = 1;                    //!< training TP degree (actor and reference)
  comm::MeshCommunicators train_mesh_;  //!< the training mesh's TP and DP groups (train_tp_ > 1)
  WorkerContext dp_ctx_;                //!< this worker seen from its DP group (train_tp_ > 1)
  std::vector<float> full_;             //!< gathered full weights (training TP != rollout TP)
  typename E::training actor_;
  typename E::training ref_;
  typename E::rollout rollout_;  // after the training engines: a device rollout sizes its pool from what they leave
  comm::MeshCommunicators mesh_;  //!< the rollout mesh's TP and DP groups (RolloutTP > 1)
  std::shared_ptr<agent::ToolSet const> agent_tools_;  //!< agent rollouts' tools, loaded on first use
  std::unique_ptr<agent::ToolPool> tool_pool_;         //!< agent rollouts' tool threads (agent.num_workers), made on first use
};

//! The CPU hybrid role with an unsharded rollout (the trainer's default). verl: ActorRolloutRefWorker
using ActorRolloutRef = BasicActorRolloutRef<cpu::tag>;

}  // namespace rlflow::roles
