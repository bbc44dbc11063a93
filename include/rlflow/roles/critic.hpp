// rlflow/roles/critic.hpp: roles::ValueCritic, the built-in critic: the GPT trunk with a value
// head, trained with verl's clipped value loss (verl: CriticWorker / DataParallelPPOCritic), with
// training tensor parallelism when the actor has it (verl: MegatronPPOCritic).
// Shapes: b rows of this rank's chunk, R = response width.
#pragma once
#include <cstdint>
#include <random>
#include <string>

#include <rlflow/core/backend.hpp>
#include <rlflow/dispatch/dispatch.hpp>
#include <rlflow/engine/checkpoint.hpp>
#include <rlflow/engine/training_engine.hpp>
#include <rlflow/kernels/kernels.hpp>
#include <rlflow/dispatch/method.hpp>
#include <rlflow/roles/actor_rollout_ref.hpp>  // optimizer_config
#include <rlflow/dispatch/role.hpp>
#include <rlflow/roles/setup.hpp>

namespace rlflow::roles {

//! verl: CriticWorker. values[b, j] is V of the state before response token j.
//! Training TP (actor_rollout_ref.actor.megatron.tensor_model_parallel_size = T > 1): the critic
//! shares the colocated group's dp x tp mesh with the actor (a TP group's T ranks receive the same
//! rows), so it is sharded the same way: TP rank (rank % T) of the critic's own TP communicator,
//! gradients averaged over the world / T DP ranks, metrics from tp_rank 0. verl: MegatronPPOCritic
//! (critic.megatron.tensor_model_parallel_size, which verl's recipes set equal to the actor's).
class ValueCritic {
 public:
  using role_tag = critic_tag;
  static constexpr std::string_view role_name = "critic";

  ValueCritic(WorkerContext const& ctx, RoleSetup setup, std::int64_t total_optimizer_steps = 1)
      : ctx_(&ctx),
        setup_(std::move(setup)),
        train_tp_(training_tp_of(ctx, setup_.cfg)),
        mesh_(train_tp_ > 1 ? comm::split_mesh(ctx.comm(), train_tp_) : comm::MeshCommunicators{}),
        critic_(make_engine(optimizer_config(setup_.cfg.critic.optim, setup_.cfg.critic.grad_clip, total_optimizer_steps))) {
    if (setup_.critic_init) {  // trunk from critic.model.path (the value head keeps its seeded init)
      if (setup_.critic_init->size() != critic_.layout().size())
        throw shape_error(msg("rlflow::roles::ValueCritic: the initial weights hold ", setup_.critic_init->size(),
                              " floats but the model has ", critic_.layout().size()));
      critic_.load_weights(*setup_.critic_init);  // a TP rank keeps its slice
    }
    if (setup_.cfg.critic.model.use_remove_padding) critic_.set_remove_padding(true);  // packed sequences
    if (setup_.cfg.critic.model.enable_gradient_checkpointing) critic_.set_gradient_checkpointing(true);  // recomputed layers
    if (train_tp_ > 1) {  // the DP view of this worker, as the actor's
      dp_ctx_ = ctx;
      dp_ctx_.world_size = ctx.world_size / train_tp_;
      dp_ctx_.rank = (ctx.rank / train_tp_) % dp_ctx_.world_size;
      dp_ctx_.communicator = mesh_.dp.get();
    }
  }

  //! values (b, R) float. verl: compute_values
  DataProto compute_values(DataProto const& data) {
    int const R = static_cast<int>(data.tensor("responses").dim(1));
    Tensor v = critic_.compute_values(data.tensor("input_ids"), data.tensor("attention_mask"), R);
    return DataProto::from_dict({{"values", v}});
  }

  //! ppo_epochs passes of mini-batches over this rank's rows; clipped value loss against
  //! 'returns' with the old 'values'; gradients averaged across DP ranks. verl: update_critic
  MetricLists update_critic(DataProto const& data) {
    auto const& cfg = setup_.cfg;
    auto const& c = cfg.critic;
    WorkerContext const& dctx = train_tp_ > 1 ? dp_ctx_ : *ctx_;  // the DP group (every rank at T = 1)
    std::int64_t const n = cfg.actor_rollout_ref.rollout.n, dp = dctx.world_size;
    std::int64_t const mini = cfg.critic_ppo_mini_batch_size() * n / dp;
    // critic.use_dynamic_bsz: micro-batches by token count (critic.ppo_max_token_len_per_gpu), else fixed rows
    std::int64_t const micro = c.use_dynamic_bsz ? mini : c.ppo_micro_batch_size_per_gpu.value_or(mini);
    std::int64_t const rows = data.size();
    detail::check_batching("rlflow::roles::ValueCritic::update_critic", rows, mini, micro);
    detail::MicroBatching const cut{micro, c.use_dynamic_bsz ? c.ppo_max_token_len_per_gpu : 0, "critic.ppo_max_token_len_per_gpu",
                                    "rlflow::roles::ValueCritic::update_critic"};
    kernels::AggMode const agg = kernels::parse_agg_mode(cfg.critic_loss_agg_mode());
    int const R = static_cast<int>(data.tensor("responses").dim(1));
    MetricLists m;
    kernels::AggInfo info0;
    info0.global_batch_size = static_cast<double>(cfg.critic_ppo_mini_batch_size() * n);
    double vf_loss = 0;
    detail::for_each_mini_batch(
        dctx, data, mini, cut, cfg.critic_ppo_epochs(), cfg.critic_shuffle(),
        static_cast<std::uint64_t>(cfg.actor_rollout_ref.actor.data_loader_seed + dctx.rank), info0,
        [&] { return critic_.grads(); },
        [&] {
          critic_.zero_grad();
          vf_loss = 0;
        },
        [&](DataProto const& mc, kernels::AggInfo const& info) {
          kernels::Dims const d{mc.size(), R};
          Tensor vpred = critic_.forward_values(mc.tensor("input_ids"), mc.tensor("attention_mask"), R);
          Tensor dv = Tensor::zeros(DType::float32, Shape{mc.size(), R});
          auto res = kernels::compute_value_loss(cpu::par, d, vpred.span<float>(), mc.tensor("values").span<float>(),
                                                 mc.tensor("returns").span<float>(), mc.tensor("response_mask").span<std::int32_t>(),
                                                 c.cliprange_value, agg, info, kernels::Grad{dv.span<float>(), 1.0, false});
          vf_loss += res.vf_loss;
          m["critic/vf_clipfrac"].push_back(res.vf_clipfrac);
          m["critic/vpred_mean"].push_back(res.vpred_mean);
          critic_.backward_values(dv);
        },
        [&] {
          double const grad_norm = critic_.optimizer_step();
          m["critic/vf_loss"].push_back(vf_loss);
          m["critic/grad_norm"].push_back(grad_norm);
          m["critic/lr"].push_back(critic_.lr());
        });
    // Training TP: one copy of the metrics per DP rank (tp_rank 0), as the actor's
    if (train_tp_ > 1 && ctx_->rank % train_tp_ != 0) return {};
    return m;
  }

  //! Rank 0 writes the critic (the full model, at every TP); called on every rank so that with
  //! training TP rank 0's TP group gathers the shards with it (see engine::save_checkpoint_gathered).
  void save_checkpoint(std::string path) {
    if (ctx_->rank < train_tp_) engine::save_checkpoint_gathered(path, critic_, ctx_->rank == 0);
  }
  //! Every rank loads the full file and keeps its shard (a checkpoint of any TP).
  void load_checkpoint(std::string path) { engine::load_checkpoint(path, critic_); }
  //! The critic's flat parameters (rank 0; the full model only at training TP 1).
  std::vector<float> critic_weights() const {
    if (train_tp_ > 1)
      throw config_error(msg("rlflow::roles::ValueCritic::critic_weights: the critic is sharded (training TP ", train_tp_,
                             "); use gather_critic_weights"));
    return {critic_.params().begin(), critic_.params().end()};
  }
  //! This rank's critic gradient buffer as the last mini-batch of update_critic left it (for tests and tools).
  std::vector<float> critic_grads() const { return {critic_.grads().begin(), critic_.grads().end()}; }
  //! Bytes of the critic's kept-activation buffer (model::GPT::activation_bytes), for tests and tools.
  std::int64_t activation_bytes() const { return static_cast<std::int64_t>(critic_.model().activation_bytes()); }
  //! The full critic on every rank: with training TP an all-gather of each TP group's shards.
  std::vector<float> gather_critic_weights() {
    std::vector<float> full(critic_.layout().size());
    critic_.gather_weights(full);
    return full;
  }

  using methods = rlflow::methods<
      rlflow::method<&ValueCritic::compute_values, dispatch::DPComputeProto>,
      rlflow::method<&ValueCritic::update_critic, dispatch::DPComputeMetric>,
      rlflow::method<&ValueCritic::save_checkpoint, dispatch::OneToAll>,
      rlflow::method<&ValueCritic::load_checkpoint, dispatch::OneToAll>,
      rlflow::method<&ValueCritic::critic_weights, dispatch::OneToAll, execute::RankZero>,
      rlflow::method<&ValueCritic::gather_critic_weights, dispatch::OneToAll>>;

 private:
  //! The training TP degree T (the actor's key: the colocated group has one mesh).
  static int training_tp_of(WorkerContext const& ctx, TrainerConfig const& cfg) {
    return detail::training_tp_degree(ctx, cfg, "rlflow::roles::ValueCritic");
  }
  engine::TrainingEngine make_engine(engine::OptimizerConfig const& opt) {
    if (train_tp_ > 1)
      return engine::TrainingEngine(setup_.critic_model, opt, model::TPRank{ctx_->rank % train_tp_, train_tp_}, mesh_.tp.get());
    return engine::TrainingEngine(setup_.critic_model, opt);
  }

  WorkerContext const* ctx_;
  RoleSetup setup_;
  int train_tp_ = 1;               //!< training TP degree (the actor's)
  comm::MeshCommunicators mesh_;   //!< the critic's TP and DP groups (train_tp_ > 1)
  WorkerContext dp_ctx_;           //!< this worker seen from its DP group (train_tp_ > 1)
  engine::TrainingEngine critic_;
};

}  // namespace rlflow::roles
