// rlflow/roles/critic.hpp: roles::ValueCritic, the built-in critic: the GPT trunk with a value
// head, trained with verl's clipped value loss (verl: CriticWorker / DataParallelPPOCritic).
// Shapes: b rows of this rank's chunk, R = response width.
#pragma once
#include <cstdint>
#include <random>
#include <string>

#include <rlflow/backend.hpp>
#include <rlflow/dispatch/dispatch.hpp>
#include <rlflow/engine/checkpoint.hpp>
#include <rlflow/engine/training_engine.hpp>
#include <rlflow/kernels/kernels.hpp>
#include <rlflow/method.hpp>
#include <rlflow/roles/actor_rollout_ref.hpp>  // optimizer_config
#include <rlflow/roles/role.hpp>
#include <rlflow/roles/setup.hpp>

namespace rlflow::roles {

//! verl: CriticWorker. values[b, j] is V of the state before response token j.
class ValueCritic {
 public:
  using role_tag = critic_tag;
  static constexpr std::string_view role_name = "critic";

  ValueCritic(WorkerContext const& ctx, RoleSetup setup, std::int64_t total_optimizer_steps = 1)
      : ctx_(&ctx),
        setup_(std::move(setup)),
        critic_(setup_.critic_model,
                optimizer_config(setup_.cfg.critic.optim, setup_.cfg.critic.grad_clip, total_optimizer_steps)) {
    if (setup_.critic_init) {  // trunk from critic.model.path (the value head keeps its seeded init)
      if (setup_.critic_init->size() != critic_.params().size())
        throw shape_error(msg("rlflow::roles::ValueCritic: the initial weights hold ", setup_.critic_init->size(),
                              " floats but the model has ", critic_.params().size()));
      std::copy(setup_.critic_init->begin(), setup_.critic_init->end(), critic_.params().begin());
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
    std::int64_t const n = cfg.actor_rollout_ref.rollout.n, dp = ctx_->world_size;
    std::int64_t const mini = cfg.critic_ppo_mini_batch_size() * n / dp;
    std::int64_t const micro = c.ppo_micro_batch_size_per_gpu.value_or(mini);
    std::int64_t const rows = data.size();
    detail::check_batching("rlflow::roles::ValueCritic::update_critic", rows, mini, micro);
    kernels::AggMode const agg = kernels::parse_agg_mode(cfg.critic_loss_agg_mode());
    int const R = static_cast<int>(data.tensor("responses").dim(1));
    MetricLists m;
    kernels::AggInfo info0;
    info0.global_batch_size = static_cast<double>(cfg.critic_ppo_mini_batch_size() * n);
    double vf_loss = 0;
    detail::for_each_mini_batch(
        *ctx_, data, mini, micro, cfg.critic_ppo_epochs(), cfg.critic_shuffle(),
        static_cast<std::uint64_t>(cfg.actor_rollout_ref.actor.data_loader_seed + ctx_->rank), info0,
        [&] { return critic_.grads(); },
        [&] {
          critic_.zero_grad();
          vf_loss = 0;
        },
        [&](DataProto const& mc, kernels::AggInfo const& info) {
          kernels::Dims const d{micro, R};
          Tensor vpred = critic_.forward_values(mc.tensor("input_ids"), mc.tensor("attention_mask"), R);
          auto fmask = detail::float_mask(mc.tensor("response_mask"));
          Tensor dv = Tensor::zeros(DType::float32, Shape{micro, R});
          auto res = kernels::compute_value_loss(cpu::par, d, vpred.span<float>(), mc.tensor("values").span<float>(),
                                                 mc.tensor("returns").span<float>(), std::span<float const>(fmask),
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
    return m;
  }

  void save_checkpoint(std::string path) const { engine::save_checkpoint(path, critic_); }
  void load_checkpoint(std::string path) { engine::load_checkpoint(path, critic_); }
  std::vector<float> critic_weights() const { return {critic_.params().begin(), critic_.params().end()}; }

  using methods = rlflow::methods<
      rlflow::method<&ValueCritic::compute_values, dispatch::DPComputeProto>,
      rlflow::method<&ValueCritic::update_critic, dispatch::DPComputeMetric>,
      rlflow::method<&ValueCritic::save_checkpoint, dispatch::OneToAll, execute::RankZero>,
      rlflow::method<&ValueCritic::load_checkpoint, dispatch::OneToAll>,
      rlflow::method<&ValueCritic::critic_weights, dispatch::OneToAll, execute::RankZero>>;

 private:
  WorkerContext const* ctx_;
  RoleSetup setup_;
  engine::TrainingEngine critic_;
};

}  // namespace rlflow::roles
