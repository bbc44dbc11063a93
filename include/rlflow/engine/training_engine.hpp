// rlflow/engine/training_engine.hpp: the training engine of the built-in GPT (policy or critic).
// Defines LogProbResult and TrainingEngine: per-token log-probs and entropy of padded (B, T)
// batches (verl's alignment: column j is response token j), backward from per-token loss
// gradients, gradient accumulation, and the AdamW step; optionally over the rows' real tokens
// only (set_remove_padding: packed sequences, same shapes in and out), optionally keeping each
// layer's input only and recomputing the rest in the backward (set_gradient_checkpointing).
// Buffers are allocated once and reused.
// Does not compute losses (kernels/) or communicate across data-parallel ranks (the trainer
// averages grads() across them). Training tensor parallelism (Megatron-style, an engine built with
// a TPRank of size N > 1 and its TP group's communicator): the engine holds one rank's shard of
// the parameters, gradients and AdamW moments; the GPT all-reduces within the TP group, the
// gradient norm is the full model's, and load_weights / gather_weights convert from / to the full
// layout; the LM head is replicated or vocabulary-parallel (set_lm_head, model::GPT).
// Letters: B sequences, T = P + R positions (left-padded prompt P, right-padded response R), V vocabulary.
#pragma once
#include <cmath>  // std::sqrt
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <rlflow/core/error.hpp>             // shape_error, dtype_error, value_error
#include <rlflow/core/tensor.hpp>            // Tensor in and out
#include <rlflow/model/gpt.hpp>         // GPT, GPTConfig, ParamLayout
#include <rlflow/engine/optimizer.hpp>  // AdamW, OptimizerConfig

namespace rlflow::engine {

//! Per-token outputs of compute_log_prob / forward: both (B, R) float32; entropy is undefined
//! when it was not asked for.
struct LogProbResult {
  Tensor log_probs;  //!< (B, R) log p(response token j | everything before it)
  Tensor entropy;    //!< (B, R) entropy of the distribution that produced response token j
};

namespace detail {
inline void check_batch(char const* fn, Tensor const& ids, Tensor const& mask, int R) {
  if (ids.dtype() != DType::int32 || mask.dtype() != DType::int32)
    throw dtype_error(msg("rlflow::engine::TrainingEngine::", fn, ": input_ids is ", dtype_name(ids.dtype()),
                          " and attention_mask is ", dtype_name(mask.dtype()), "; both must be int32"));
  if (ids.rank() != 2 || !(ids.shape() == mask.shape()))
    throw shape_error(msg("rlflow::engine::TrainingEngine::", fn, ": input_ids ", ids.shape().str(), " and attention_mask ",
                          mask.shape().str(), " must be the same (B, T)"));
  if (R < 1 || R > ids.dim(1) - 1)
    throw shape_error(msg("rlflow::engine::TrainingEngine::", fn, ": response_length = ", R, " must be in [1, T - 1 = ",
                          ids.dim(1) - 1, "]; the first position has no predecessor to predict it"));
}
//! The rows of a padded (B, T) batch packed end to end without their padding (attention_mask 0),
//! and the positions that score response column j of row b: the token before padded position
//! T - R + j, when both that token and the scored one are real (a column whose token or
//! predecessor is padding has no score: 0 in the outputs, as verl's pad_input leaves it).
//! verl: dp_actor's use_remove_padding (unpad_input / index_first_axis, pad_input).
struct PackedBatch {
  std::vector<std::int32_t> ids;      //!< (N) the real tokens, row after row
  std::vector<std::int32_t> cu;       //!< (B + 1) token offsets of the rows
  std::vector<std::int32_t> head;     //!< packed index of each scored position's predecessor
  std::vector<std::int32_t> slot;     //!< b R + j of each scored position
  std::vector<std::int32_t> targets;  //!< the scored tokens
  void pack(std::int32_t const* in_ids, std::int32_t const* mask, int B, int T, int R) {
    ids.clear(), head.clear(), slot.clear(), targets.clear();
    cu.assign(std::size_t(B) + 1, 0);
    for (int b = 0; b < B; ++b) {
      std::int32_t const* m = mask + std::size_t(b) * T;
      std::int32_t const* x = in_ids + std::size_t(b) * T;
      for (int t = 0; t < T; ++t) {
        if (m[t] == 0) continue;
        int const p = t + 1;  // the position this token predicts
        if (p >= T - R && p < T && m[p] != 0) {
          head.push_back(std::int32_t(ids.size()));
          slot.push_back(b * R + (p - (T - R)));
          targets.push_back(x[p]);
        }
        ids.push_back(x[t]);
      }
      cu[std::size_t(b) + 1] = std::int32_t(ids.size());
    }
  }
};

inline void check_grad(char const* fn, char const* name, Tensor const& g, std::int64_t B, int R) {
  if (g.dtype() != DType::float32 || g.rank() != 2 || g.dim(0) != B || g.dim(1) != R)
    throw shape_error(msg("rlflow::engine::TrainingEngine::", fn, ": ", name, " is ", g.describe(), " but the last forward was (",
                          B, ", ", R, ") float32"));
}
}  // namespace detail

//! Training engine for the built-in GPT. A policy uses compute_log_prob / forward / backward;
//! a critic (GPTConfig::value_head = true) uses compute_values / forward_values / backward_values.
//! Gradients accumulate across backward calls until zero_grad() (micro-batch accumulation); the
//! caller scales the loss gradients (e.g. by 1 / number of micro-batches).
//! verl: DataParallelPPOActor (compute_log_prob, update_policy) and DataParallelPPOCritic.
class TrainingEngine {
 public:
  explicit TrainingEngine(model::GPTConfig const& cfg, OptimizerConfig const& opt = {})
      : model_(cfg), optim_(opt, model_.layout().size(), decay_mask(model_.shard_layout(), model_.layout())), opt_(opt) {}
  //! Training tensor parallelism: TP rank tp.rank of a group of tp.size (tp_comm: the group's
  //! communicator). params(), grads() and the optimizer hold this rank's shard (shard_layout()).
  //! verl: actor_rollout_ref.actor.megatron.tensor_model_parallel_size (MegatronPPOActor).
  TrainingEngine(model::GPTConfig const& cfg, OptimizerConfig const& opt, model::TPRank tp, comm::Communicator* tp_comm)
      : model_(cfg, tp, tp_comm), optim_(opt, model_.shard_layout().size(), decay_mask(model_.shard_layout(), model_.layout())),
        opt_(opt), comm_(tp_comm) {
    mark_split();
  }

  model::GPTConfig const& config() const { return model_.config(); }
  //! The full model's layout (checkpoints, weight sync).
  model::ParamLayout const& layout() const { return model_.layout(); }
  //! This rank's layout: params(), grads() and the optimizer's state follow it (layout() at TP = 1).
  model::ShardLayout const& shard_layout() const { return model_.shard_layout(); }
  model::TPRank tp() const { return model_.tp(); }
  //! The TP group's communicator (null when not tensor-parallel).
  comm::Communicator* tp_communicator() const { return comm_; }
  //! The LM head's split under training TP (model::GPT::set_lm_head): every rank of the TP group
  //! must choose the same. Default: vocab_parallel at tp.size > 1 when vocab_size >=
  //! model::training_vocab_parallel_min_vocab, replicated otherwise. The vocabulary-parallel head
  //! holds wte's own rows only, so a change at tp.size > 1 re-cuts the weights (locally, see
  //! model::GPT::set_lm_head) and rebuilds the gradient buffer and the optimizer's (still empty)
  //! state: allowed before the first optimizer step only.
  void set_lm_head(model::LMHead h) {
    bool const split = h == model::LMHead::vocab_parallel && tp().size > 1;
    if (split == shard_layout().split_vocab()) {
      model_.set_lm_head(h);
      return;
    }
    if (step() > 0)
      throw config_error(msg("rlflow::engine::TrainingEngine::set_lm_head: the LM head decides how wte is sharded (whole, or by "
                             "vocabulary rows), so it can change only before the first optimizer step; this engine has taken ",
                             step(), "; choose the head (actor_rollout_ref.model.lm_head) before training"));
    model_.set_lm_head(h);  // the weights cut again
    std::size_t const n = shard_layout().size();
    grads_ = Tensor{};  // allocated again, at the new size, on first use
    optim_ = AdamW(opt_, n, decay_mask(shard_layout(), layout()));
    mark_split();
  }
  model::LMHead lm_head() const { return model_.lm_head(); }

  //! LoRA (model::GPT::enable_lora): adapters on the linears 'lc' targets; from then on grads(),
  //! the optimizer's moments and optimizer_step() cover the adapters only (trainable()), the base
  //! weights (params()) stay frozen and get no gradient buffer, and policy_weights() merges
  //! base + adapters for a rollout. Before the first optimizer step only; TP = 1, policy only.
  //! verl: actor_rollout_ref.model.lora_rank / lora_alpha / target_modules (PEFT get_peft_model).
  void enable_lora(model::LoraConfig const& lc) {
    if (step() > 0)
      throw config_error(msg("rlflow::engine::TrainingEngine::enable_lora: the engine has taken ", step(),
                             " optimizer steps of full fine-tuning; add adapters before training"));
    model_.enable_lora(lc);
    grads_ = Tensor{};
    optim_ = AdamW(opt_, model_.trainable_size(), std::vector<std::uint8_t>(model_.trainable_size(), 1));
  }
  bool lora_on() const { return model_.lora_on(); }
  model::LoraLayout const& lora_layout() const { return model_.lora_layout(); }
  //! What the optimizer updates: the adapters under LoRA (lora_layout() order), else params().
  std::span<float> trainable() { return lora_on() ? model_.lora_params() : model_.params(); }
  std::span<float const> trainable() const { return lora_on() ? model_.lora_params() : model_.params(); }
  //! The policy's weights in full layout(): params() merged with s B A under LoRA (PEFT's
  //! merge_and_unload), else a copy of params(). TP = 1.
  void policy_weights(std::span<float> full) const {
    if (full.size() != layout().size() || tp().size > 1)
      throw shape_error(msg("rlflow::engine::TrainingEngine::policy_weights: ", full.size(), " floats for a model of ",
                            layout().size(), " parameters (TP 1 only)"));
    auto const p = params();
    std::copy(p.begin(), p.end(), full.begin());
    if (lora_on()) model::lora_merge(lora_layout(), model_.lora_params(), full);
  }
  model::GPT& model() { return model_; }
  model::GPT const& model() const { return model_; }
  AdamW& optimizer() { return optim_; }
  AdamW const& optimizer() const { return optim_; }

  //! The flat parameter buffer (layout()); write to it to load weights.
  std::span<float> params() { return model_.params(); }
  std::span<float const> params() const { return model_.params(); }
  //! The flat gradient buffer (trainable(): the adapters under LoRA): all-reduce (average) it
  //! across data-parallel ranks before optimizer_step().
  std::span<float> grads() { return grad_buffer().span<float>(); }
  std::span<float const> grads() const { return grad_buffer().span<float const>(); }

  //! Packed sequences (verl: actor_rollout_ref.model.use_remove_padding): forward / backward /
  //! forward_values run over the rows' real tokens only, end to end, attention bounded per row
  //! and positions restarting per row (model::GPT::forward_packed). Inputs and outputs keep their
  //! padded (B, T) / (B, R) shapes; an output column whose token or predecessor is padding is 0
  //! (its gradient input is ignored). The scored values equal the padded path's to rounding.
  void set_remove_padding(bool on) {
    if (tp().size > 1 && on)
      throw config_error(msg("rlflow::engine::TrainingEngine::set_remove_padding: packed sequences are not available with training "
                             "tensor parallelism (TP ", tp().size, "); set actor_rollout_ref.model.use_remove_padding=false (and "
                             "critic.model.use_remove_padding=false) or actor_rollout_ref.actor.megatron.tensor_model_parallel_size=1"));
    packed_ = on;
    last_ = Last::none;
  }
  bool remove_padding() const { return packed_; }

  //! Activation checkpointing (verl: actor_rollout_ref.model.enable_gradient_checkpointing,
  //! critic.model.enable_gradient_checkpointing): forwards keep each layer's input only and the
  //! backward recomputes each layer's activations before back-propagating through it
  //! (model::GPT::set_activation_checkpointing). Activation memory L (N, C) + one layer's instead
  //! of L layers'; gradients bit-identical. Takes effect from the next forward.
  void set_gradient_checkpointing(bool on) { model_.set_activation_checkpointing(on); }
  bool gradient_checkpointing() const { return model_.activation_checkpointing(); }

  //! Log-probs (and entropy) of the last R tokens: log_probs[b, j] = log softmax(logits[b, T-R-1+j] / temperature)
  //! [ids[b, T-R+j]]. input_ids, attention_mask (B, T) int32. verl: actor.compute_log_prob.
  LogProbResult compute_log_prob(Tensor const& input_ids, Tensor const& attention_mask, int response_length,
                                 float temperature = 1.0f, bool calculate_entropy = true) {
    return forward(input_ids, attention_mask, response_length, temperature, calculate_entropy);
  }

  //! As compute_log_prob, keeping the activations for backward().
  LogProbResult forward(Tensor const& input_ids, Tensor const& attention_mask, int response_length,
                        float temperature = 1.0f, bool calculate_entropy = true) {
    detail::check_batch("forward", input_ids, attention_mask, response_length);
    int const B = static_cast<int>(input_ids.dim(0)), T = static_cast<int>(input_ids.dim(1)), R = response_length;
    if (packed_) return forward_packed(input_ids, attention_mask, B, T, R, temperature, calculate_entropy);
    model_.forward(input_ids.data<std::int32_t>(), attention_mask.data<std::int32_t>(), B, T);
    model_.select_rows(T - R - 1, R);
    targets_.resize(std::size_t(B) * R);
    auto const* ids = input_ids.data<std::int32_t>();
    for (int b = 0; b < B; ++b)
      for (int j = 0; j < R; ++j) targets_[std::size_t(b) * R + j] = ids[std::size_t(b) * T + (T - R + j)];
    LogProbResult out;
    out.log_probs = Tensor::empty(DType::float32, Shape{B, R});
    if (calculate_entropy) out.entropy = Tensor::empty(DType::float32, Shape{B, R});
    model_.logprob_forward(targets_.data(), temperature, out.log_probs.data<float>(),
                           calculate_entropy ? out.entropy.data<float>() : nullptr);
    last_ = Last::logprob;
    last_packed_ = false;
    lastB_ = B;
    lastR_ = R;
    return out;
  }

  //! Sum of squared probabilities (B, R) at the temperature of the last forward() /
  //! compute_log_prob(): sum_v pi(v | prefix)^2 for every scored position. Call it before the next
  //! forward. verl: actor.calculate_sum_pi_squared (the optimal token baseline's input).
  Tensor sum_pi_squared() const {
    if (last_ != Last::logprob)
      throw value_error("rlflow::engine::TrainingEngine::sum_pi_squared: no scored batch; call compute_log_prob() or forward() first");
    if (last_packed_) {
      Tensor out = Tensor::zeros(DType::float32, Shape{lastB_, lastR_});
      if (pk_.slot.empty()) return out;
      std::vector<float> q(pk_.slot.size());
      model_.sum_pi_squared(q.data());
      scatter(q.data(), out);
      return out;
    }
    Tensor out = Tensor::empty(DType::float32, Shape{lastB_, lastR_});
    model_.sum_pi_squared(out.data<float>());
    return out;
  }

  //! Accumulates into grads() the gradient of sum(dlogp * log_probs + dentropy * entropy) for the
  //! last forward(); dlogp, dentropy (B, R) float32, dentropy may be undefined (no entropy term).
  void backward(Tensor const& dlogp, Tensor const& dentropy = {}) {
    if (last_ != Last::logprob)
      throw value_error("rlflow::engine::TrainingEngine::backward: no pending forward(); call forward() (not compute_values) first");
    detail::check_grad("backward", "dlogp", dlogp, lastB_, lastR_);
    if (dentropy.defined()) detail::check_grad("backward", "dentropy", dentropy, lastB_, lastR_);
    if (last_packed_) {
      if (!pk_.slot.empty()) {
        std::size_t const n = pk_.slot.size();
        buf_.resize(2 * n);
        gather(dlogp, buf_.data());
        if (dentropy.defined()) gather(dentropy, buf_.data() + n);
        model_.logprob_backward(buf_.data(), dentropy.defined() ? buf_.data() + n : nullptr, grads());
      }
      last_ = Last::none;
      return;
    }
    model_.logprob_backward(dlogp.data<float>(), dentropy.defined() ? dentropy.data<float>() : nullptr, grads());
    last_ = Last::none;
  }

  //! forward() then backward() with loss gradients known in advance; returns the forward's outputs.
  LogProbResult forward_backward(Tensor const& input_ids, Tensor const& attention_mask, int response_length,
                                 Tensor const& dlogp, Tensor const& dentropy = {}, float temperature = 1.0f) {
    LogProbResult r = forward(input_ids, attention_mask, response_length, temperature, dentropy.defined());
    backward(dlogp, dentropy);
    return r;
  }

  //! Values (B, R) aligned like the log-probs: values[b, j] = value head at position T-R-1+j
  //! (the state before response token j). verl: critic.compute_values.
  Tensor compute_values(Tensor const& input_ids, Tensor const& attention_mask, int response_length) {
    return forward_values(input_ids, attention_mask, response_length);
  }
  Tensor forward_values(Tensor const& input_ids, Tensor const& attention_mask, int response_length) {
    detail::check_batch("forward_values", input_ids, attention_mask, response_length);
    int const B = static_cast<int>(input_ids.dim(0)), T = static_cast<int>(input_ids.dim(1)), R = response_length;
    if (!config().value_head)
      throw config_error("rlflow::engine::TrainingEngine::forward_values: the model has no value head; build the critic with GPTConfig::value_head = true");
    if (packed_) {
      Tensor v = Tensor::zeros(DType::float32, Shape{B, R});
      if (pack(input_ids, attention_mask, B, T, R)) {
        buf_.resize(pk_.slot.size());
        model_.value_forward(buf_.data());
        scatter(buf_.data(), v);
      }
      last_ = Last::value;
      return v;
    }
    last_packed_ = false;
    model_.forward(input_ids.data<std::int32_t>(), attention_mask.data<std::int32_t>(), B, T);
    model_.select_rows(T - R - 1, R);
    Tensor v = Tensor::empty(DType::float32, Shape{B, R});
    model_.value_forward(v.data<float>());
    last_ = Last::value;
    lastB_ = B;
    lastR_ = R;
    return v;
  }
  //! Accumulates into grads() the gradient of sum(dvalues * values) for the last forward_values().
  void backward_values(Tensor const& dvalues) {
    if (last_ != Last::value)
      throw value_error("rlflow::engine::TrainingEngine::backward_values: no pending forward_values(); call it first");
    detail::check_grad("backward_values", "dvalues", dvalues, lastB_, lastR_);
    if (last_packed_) {
      if (!pk_.slot.empty()) {
        buf_.resize(pk_.slot.size());
        gather(dvalues, buf_.data());
        model_.value_backward(buf_.data(), grads());
      }
      last_ = Last::none;
      return;
    }
    model_.value_backward(dvalues.data<float>(), grads());
    last_ = Last::none;
  }
  Tensor forward_backward_values(Tensor const& input_ids, Tensor const& attention_mask, int response_length,
                                 Tensor const& dvalues) {
    Tensor v = forward_values(input_ids, attention_mask, response_length);
    backward_values(dvalues);
    return v;
  }

  //! Logits (B, T, V) at every position (for tests and inspection; not on the training path).
  Tensor compute_logits(Tensor const& input_ids, Tensor const& attention_mask) {
    detail::check_batch("compute_logits", input_ids, attention_mask, 1);
    int const B = static_cast<int>(input_ids.dim(0)), T = static_cast<int>(input_ids.dim(1)), V = config().vocab_size;
    model_.forward(input_ids.data<std::int32_t>(), attention_mask.data<std::int32_t>(), B, T);
    model_.select_rows(0, T);
    auto lg = model_.logits_forward();
    Tensor out = Tensor::empty(DType::float32, Shape{B, T, V});
    std::copy(lg.begin(), lg.end(), out.data<float>());
    last_ = Last::none;
    return out;
  }

  //! Clip + AdamW with the scheduled learning rate; returns the pre-clip gradient norm. Does not
  //! zero the gradients (call zero_grad()).
  //! Tensor parallel: the norm is the full model's (the split floats' squares summed over the TP
  //! group, the replicated ones counted once), so every rank clips by the same factor.
  float optimizer_step() {
    if (tp().size == 1) return optim_.step(trainable(), grads());
    return optim_.step(params(), grads(), grad_norm());
  }
  //! The full model's gradient L2 norm (a collective of the TP group when tensor-parallel).
  double grad_norm() {
    auto const g = grads();
    if (tp().size == 1) return AdamW::grad_norm(g);
    double s[2] = {0.0, 0.0};  // {split, replicated}
    for (std::size_t i = 0; i < g.size(); ++i) s[split_[i] ? 0 : 1] += double(g[i]) * double(g[i]);
    double split_sum[1] = {s[0]};
    comm_->allreduce_sum(std::span<double>(split_sum, 1));
    return std::sqrt(split_sum[0] + s[1]);
  }
  void zero_grad() {
    auto g = grads();
    std::fill(g.begin(), g.end(), 0.0f);
  }
  //! The learning rate the next optimizer_step() uses.
  float lr() const { return optim_.lr(); }
  //! Optimizer steps taken.
  std::int64_t step() const { return optim_.steps_taken(); }

  //! Copies a full flat parameter buffer (layout()) in; a TP rank keeps its slice.
  void load_weights(std::span<float const> flat) {
    if (flat.size() != layout().size())
      throw shape_error(msg("rlflow::engine::TrainingEngine::load_weights: ", flat.size(), " floats for a model of ",
                            layout().size(), " parameters; check the GPTConfig of both sides"));
    shard_layout().load(flat, params());
  }
  //! Writes the full model's parameters (layout()) into 'full'. Tensor parallel: a collective of
  //! the TP group (all-gather of the shards); every rank gets the whole buffer.
  void gather_weights(std::span<float> full) {
    if (full.size() != layout().size())
      throw shape_error(msg("rlflow::engine::TrainingEngine::gather_weights: ", full.size(), " floats for a model of ",
                            layout().size(), " parameters"));
    model_.gather_full(params(), full);
  }
  //! As gather_weights, for the gradient buffer (tests; a checkpoint of the full model).
  void gather_grads(std::span<float> full) {
    if (full.size() != layout().size())
      throw shape_error(msg("rlflow::engine::TrainingEngine::gather_grads: ", full.size(), " floats for a model of ",
                            layout().size(), " parameters"));
    model_.gather_full(grads(), full);
  }
  //! Writes the full model's AdamW moments (exp_avg into 'm', exp_avg_sq into 'v', both layout())
  //! for a checkpoint. Tensor parallel: a collective of the TP group, as gather_weights.
  void gather_optimizer_state(std::span<float> m, std::span<float> v) {
    if (m.size() != layout().size() || v.size() != layout().size())
      throw shape_error(msg("rlflow::engine::TrainingEngine::gather_optimizer_state: ", m.size(), " and ", v.size(),
                            " floats for a model of ", layout().size(), " parameters"));
    model_.gather_full(optim_.m(), m);
    model_.gather_full(optim_.v(), v);
  }
  //! gather_weights and gather_optimizer_state to TP rank 0 only (a checkpoint save: one rank
  //! writes): a collective of the TP group; on TP rank 0 'p', 'm' and 'v' (each layout().size())
  //! receive the full model's parameters, exp_avg and exp_avg_sq; the other ranks pass empty
  //! spans, allocate nothing and send their shards (comm::Communicator::gather).
  void gather_state_to_rank0(std::span<float> p, std::span<float> m, std::span<float> v) {
    bool const root = this->tp().rank == 0;
    std::size_t const want = root ? layout().size() : 0;
    if (p.size() != want || m.size() != want || v.size() != want)
      throw shape_error(msg("rlflow::engine::TrainingEngine::gather_state_to_rank0: TP rank ", this->tp().rank, " passed ",
                            p.size(), ", ", m.size(), " and ", v.size(), " floats; ",
                            root ? msg("TP rank 0 receives the full model of ", want, " parameters") : "the other ranks pass empty spans"));
    model_.gather_full(params(), p, 0);
    model_.gather_full(optim_.m(), m, 0);
    model_.gather_full(optim_.v(), v, 0);
  }

 private:
  enum class Last { none, logprob, value };
  //! Packs the batch and runs the packed trunk and the head rows; false when no column is scored
  //! (nothing ran). Sets lastB_, lastR_ and last_packed_.
  bool pack(Tensor const& input_ids, Tensor const& attention_mask, int B, int T, int R) {
    pk_.pack(input_ids.data<std::int32_t>(), attention_mask.data<std::int32_t>(), B, T, R);
    lastB_ = B;
    lastR_ = R;
    last_packed_ = true;
    if (pk_.slot.empty()) return false;
    model_.forward_packed(pk_.ids.data(), pk_.cu.data(), B);
    model_.select_tokens(pk_.head);
    return true;
  }
  LogProbResult forward_packed(Tensor const& input_ids, Tensor const& attention_mask, int B, int T, int R, float temperature,
                               bool calculate_entropy) {
    LogProbResult out;
    out.log_probs = Tensor::zeros(DType::float32, Shape{B, R});
    if (calculate_entropy) out.entropy = Tensor::zeros(DType::float32, Shape{B, R});
    if (pack(input_ids, attention_mask, B, T, R)) {
      std::size_t const n = pk_.slot.size();
      buf_.resize(2 * n);
      model_.logprob_forward(pk_.targets.data(), temperature, buf_.data(), calculate_entropy ? buf_.data() + n : nullptr);
      scatter(buf_.data(), out.log_probs);
      if (calculate_entropy) scatter(buf_.data() + n, out.entropy);
    }
    last_ = Last::logprob;
    return out;
  }
  //! out (B, R) at the scored slots := v (one per scored position).
  void scatter(float const* v, Tensor& out) const {
    float* o = out.data<float>();
    for (std::size_t i = 0; i < pk_.slot.size(); ++i) o[pk_.slot[i]] = v[i];
  }
  //! v (one per scored position) := g (B, R) at the scored slots.
  void gather(Tensor const& g, float* v) const {
    float const* x = g.data<float>();
    for (std::size_t i = 0; i < pk_.slot.size(); ++i) v[i] = x[pk_.slot[i]];
  }

  static std::vector<std::uint8_t> decay_mask(model::ShardLayout const& sl, model::ParamLayout const& lay) {
    std::vector<std::uint8_t> m(lay.size(), 0);
    for (auto const& t : lay.tensors())
      if (t.decay) std::fill(m.begin() + std::ptrdiff_t(t.offset), m.begin() + std::ptrdiff_t(t.offset + t.numel), 1);
    if (sl.shard().size == 1) return m;
    std::vector<std::uint8_t> s(sl.size(), 0);
    for (auto const& sg : sl.segments())
      std::copy_n(m.begin() + std::ptrdiff_t(sg.src), sg.count, s.begin() + std::ptrdiff_t(sg.dst));
    return s;
  }
  // split_[i] = 1 for the shard's floats split across the TP group (ShardLayout::split_segments
  // and the split wte's zero padding), 0 for the replicated ones; empty at TP = 1.
  void mark_split() {
    if (tp().size == 1) return;
    model::ShardLayout const& sl = shard_layout();
    split_.assign(sl.size(), 1);
    for (auto const& sg : sl.replicated_segments())
      std::fill_n(split_.begin() + std::ptrdiff_t(sg.dst), sg.count, std::uint8_t{0});
  }

  model::GPT model_;
  AdamW optim_;
  OptimizerConfig opt_;                 //!< what optim_ was built from (set_lm_head rebuilds it)
  comm::Communicator* comm_ = nullptr;  //!< the TP group (tensor-parallel only)
  std::vector<std::uint8_t> split_;     //!< per shard float: 1 if split across the TP group
  //! The gradient buffer, allocated (zero) on first use: an engine that never trains (the
  //! reference policy) holds no gradients.
  Tensor& grad_buffer() const {
    if (!grads_.defined()) grads_ = Tensor::zeros(DType::float32, Shape{static_cast<std::int64_t>(model_.trainable_size())});
    return grads_;
  }
  mutable Tensor grads_;
  std::vector<std::int32_t> targets_;
  Last last_ = Last::none;
  bool packed_ = false;       //!< set_remove_padding
  bool last_packed_ = false;  //!< the pending forward was packed
  detail::PackedBatch pk_;    //!< the packed batch of the last packed forward
  std::vector<float> buf_;    //!< per scored position outputs / gradients
  std::int64_t lastB_ = 0;
  int lastR_ = 0;
};

}  // namespace rlflow::engine
