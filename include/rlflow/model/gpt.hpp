// rlflow/model/gpt.hpp: the built-in policy model, a GPT-2 (llm.c's train_gpt2.c as the anchor).
// Defines GPT: the CPU trunk forward/backward over padded (B, T) batches, or over packed rows
// (forward_packed: sequences end to end, attention bounded per sequence), with an LM head (tied to
// wte; fused log-softmax, log-prob, entropy) or a value head (critic); GPTConfig, ParamLayout and
// init_params live in param_layout.hpp (included). Training tensor parallelism (Megatron-style):
// a GPT built with a TPRank of size N > 1 and its TP group's communicator holds one rank's shard
// (tensor_parallel.hpp) and all-reduces the row-parallel outputs in forward and the column-parallel
// input gradients in backward; the replicated tensors get identical gradients on every rank.
// The LM head is replicated or vocabulary-parallel (set_lm_head; default from V >=
// training_vocab_parallel_min_vocab). Vocabulary-parallel, rank r holds wte's rows [V r / N,
// V (r + 1) / N) only (Megatron's VocabParallelEmbedding; ShardLayout with split_vocab): it
// computes their logits, and the log-softmax, log-prob, entropy and sum of squared probabilities
// come from all-reduces of the rows' max and partial sums; the embedding lookup is one all-reduce
// (each token's row from its owner, zeros elsewhere); backward all-reduces the head's input
// gradient, and each rank keeps the wte gradient of its own rows. Replicated, every rank holds
// wte whole.
// Activation checkpointing (set_activation_checkpointing): the forward keeps each layer's input
// only and the backward recomputes one layer at a time (bit-identical gradients).
// Does not own an optimizer or a KV cache: see engine/training_engine.hpp, engine/rollout_engine.hpp.
// Letters: B sequences, T positions, C width, NH heads, hs = C / NH, V vocabulary, L layers,
// R response positions (the head rows).
#pragma once
#include <algorithm>  // std::max
#include <cmath>      // std::sqrt
#include <cstddef>
#include <cstring>    // std::memcpy, std::memset
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <rlflow/core/error.hpp>         // config_error, shape_error, key_error
#include <rlflow/core/tensor.hpp>        // Tensor: flat buffers through the caching host resource
#include <rlflow/model/layers.hpp>  // the CPU layer functions
#include <rlflow/model/lora.hpp>    // LoraLayout, lora_forward / lora_backward (adapters)
#include <rlflow/model/param_layout.hpp>     // GPTConfig, ParamLayout, init_params
#include <rlflow/model/tensor_parallel.hpp>  // TPRank, ShardLayout
#include <rlflow/comm/communicator.hpp>  // comm::Communicator (the TP group's all-reduces)

namespace rlflow::model {

//! The vocabulary size from which a training-TP GPT (tp.size > 1) defaults to the
//! vocabulary-parallel LM head (BM_TrainLMHead, docs/model.md); below it the head is replicated.
inline constexpr int training_vocab_parallel_min_vocab = 256;

// ---------------------------------------------------------------------------------------------
// the model

namespace detail {
//! A grow-only float buffer: reallocates (through Tensor's caching resource) only when a larger
//! size is asked for, so steady-state steps never touch fresh memory.
struct grow_buffer {
  Tensor t;
  memory_resource* mr = nullptr;  //!< null: the default caching host resource
  float* ensure(std::size_t n) {
    if (!t.defined() || static_cast<std::size_t>(t.numel()) < n) {
      t = Tensor();  // give the old block back before taking the larger one
      t = Tensor::empty(DType::float32, Shape{static_cast<std::int64_t>(std::max<std::size_t>(n, 1))}, mr);
    }
    return t.data<float>();
  }
  void release() { t = Tensor(); }
  std::size_t bytes() const { return t.defined() ? t.nbytes() : 0; }
};

//! Position ids from an attention mask (verl / HF): pos = max(cumsum(mask) - 1, 0).
inline void positions_from_mask(std::int32_t* pos, std::uint8_t* valid, std::int32_t const* mask, int B, int T) {
  for (int b = 0; b < B; ++b) {
    std::int32_t c = 0;
    for (int t = 0; t < T; ++t) {
      std::int32_t const m = mask[std::size_t(b) * T + t];
      valid[std::size_t(b) * T + t] = m != 0;
      c += m != 0;
      pos[std::size_t(b) * T + t] = c > 0 ? c - 1 : 0;
    }
  }
}
}  // namespace detail

//! The CPU GPT: parameters plus the activations of the last forward. Trunk code is shared by the
//! LM head (policy) and the value head (critic). Call order for training:
//!   {forward(ids, mask) -> select_rows(h0, R) | forward_packed(ids, cu_seqlens, n) -> select_tokens(rows)}
//!   -> {logprob_forward | value_forward}
//!   -> {logprob_backward | value_backward}(grads).
//! Gradients accumulate (+=) into a caller-owned flat buffer laid out like params().
class GPT {
 public:
  explicit GPT(GPTConfig const& cfg) : cfg_(cfg), lay_(cfg), sl_(cfg, TPRank{}) {
    params_ = Tensor::empty(DType::float32, Shape{static_cast<std::int64_t>(lay_.size())});
    init_params(cfg_, params_.span<float>());
  }
  //! Training tensor parallelism: holds TP rank tp.rank's shard of the seeded initial weights;
  //! 'tp_comm' is the TP group (size tp.size, this rank at tp.rank). Every rank of the group must
  //! make the same calls with the same batch. tp.size = 1 is the plain GPT (tp_comm may be null).
  //! verl: Megatron-LM's ColumnParallelLinear / RowParallelLinear (tensor_model_parallel_size).
  GPT(GPTConfig const& cfg, TPRank tp, comm::Communicator* tp_comm)
      : cfg_(cfg), lay_(cfg), sl_(cfg, tp, tp.size > 1 && cfg.vocab_size >= training_vocab_parallel_min_vocab), comm_(tp_comm) {
    if (cfg.llama_family() && tp.size > cfg.kv_heads())
      throw config_error(msg("rlflow::model::GPT: training tensor parallelism of size ", tp.size, " exceeds num_key_value_heads = ",
                             cfg.kv_heads(), "; a key/value head would be replicated across ranks, which only the rollout does "
                             "(Megatron splits query groups too); use a training TP that divides ", cfg.kv_heads()));
    if (tp.size > 1 && (!tp_comm || tp_comm->size() != tp.size || tp_comm->rank() != tp.rank))
      throw config_error(msg("rlflow::model::GPT: TP rank ", tp.rank, " of ", tp.size, " needs its TP group's communicator (size ",
                             tp.size, ", rank ", tp.rank, "); got ",
                             tp_comm ? msg("size ", tp_comm->size(), ", rank ", tp_comm->rank()) : std::string("none")));
    params_ = Tensor::empty(DType::float32, Shape{static_cast<std::int64_t>(sl_.size())});
    if (tp.size == 1) {
      init_params(cfg_, params_.span<float>());
    } else {
      Tensor full = Tensor::empty(DType::float32, Shape{static_cast<std::int64_t>(lay_.size())});
      init_params(cfg_, full.span<float>());
      sl_.load(full.span<float const>(), params_.span<float>());
      if (sl_.split_vocab()) head_ = LMHead::vocab_parallel;
    }
  }

  //! The LM head's split across the TP group (every rank must choose the same, before a forward).
  //! Default: vocab_parallel when tp.size > 1 and vocab_size >= training_vocab_parallel_min_vocab.
  //! Both heads give the same log-probs, entropies, sum_pi_squared and gradients to rounding;
  //! logits_forward() (compute_logits, inspection only) returns the full logits with either.
  //! At tp.size > 1 the head decides how wte is cut (by vocabulary rows, or whole), and a change
  //! re-cuts params() locally (no collective): to vocab_parallel at any time (the rank keeps its
  //! rows of the whole wte); to replicated only while the weights are the seeded initial ones
  //! (before anything wrote params()), since the rank lacks the other ranks' rows. params() then
  //! has the new shard_layout()'s size (a gradient buffer must follow it).
  //! verl: Megatron's vocab_parallel_log_probs_from_logits / vocab_parallel_entropy.
  void set_lm_head(LMHead h) {
    if (h == LMHead::vocab_parallel && cfg_.vocab_size < sl_.shard().size)
      throw config_error(msg("rlflow::model::GPT::set_lm_head: the vocabulary-parallel head needs vocab_size (", cfg_.vocab_size,
                             ") >= the TP size (", sl_.shard().size, "); use LMHead::replicated"));
    bool const split = h == LMHead::vocab_parallel && sl_.shard().size > 1;
    if (split != sl_.split_vocab()) {
      if (!split && !pristine_)
        throw config_error(msg("rlflow::model::GPT::set_lm_head: TP rank ", tp().rank, " holds wte's vocabulary rows [", vocab_begin(),
                               ", ", vocab_end(), ") only and its weights have been written, so it cannot take the replicated "
                               "head's whole wte; choose the head right after constructing the model (actor_rollout_ref.model."
                               "lm_head), before loading weights"));
      params_ = recut_for_head(cfg_, sl_, params_, split);
      B_ = 0;  // the activations belong to the old cut
      head_rows_ = 0;
    }
    head_ = h;
    rows_.clear();  // the last forward's row statistics belong to the other head
  }

  //! full (layout()) := a buffer in shard_layout() order ('mine': parameters, gradients or
  //! optimizer moments) put back together from the TP group's shards. At tp.size > 1 a
  //! collective (all-gather; root >= 0: a gather to TP rank 'root', whose 'full' only is
  //! written, the others pass an empty span); at TP = 1 a copy.
  void gather_full(std::span<float const> mine, std::span<float> full, int root = -1) {
    TPRank const tp = sl_.shard();
    if (mine.size() != sl_.size())
      throw shape_error(msg("rlflow::model::GPT::gather_full: ", mine.size(), " floats for a shard of ", sl_.size()));
    if (tp.size == 1) {
      std::copy(mine.begin(), mine.end(), full.begin());
      return;
    }
    if (root >= 0 && tp.rank != root) {
      comm_->gather(mine, {}, root);
      return;
    }
    gathered_.resize(mine.size() * std::size_t(tp.size));
    if (root >= 0) comm_->gather(mine, std::span<float>(gathered_), root);
    else comm_->allgather(mine, std::span<float>(gathered_));
    unshard(cfg_, tp.size, sl_.split_vocab(), gathered_, full);
  }
  LMHead lm_head() const { return head_; }
  //! This rank's vocabulary rows [vocab_begin(), vocab_end()) of the LM head (all of them unless
  //! vocabulary-parallel at tp.size > 1).
  int vocab_begin() const { return sl_.vocab_begin(); }
  int vocab_end() const { return sl_.vocab_end(); }

  GPTConfig const& config() const { return cfg_; }
  //! The full model's layout (what a checkpoint and a weight sync use).
  ParamLayout const& layout() const { return lay_; }
  //! This rank's layout: params() and the gradient buffer follow it (equal to layout() at TP = 1).
  ShardLayout const& shard_layout() const { return sl_; }
  TPRank tp() const { return sl_.shard(); }
  //! The rank's parameters (shard_layout() order). Mutable access counts as a write (set_lm_head).
  std::span<float> params() {
    pristine_ = false;
    return params_.span<float>();
  }
  std::span<float const> params() const { return params_.span<float const>(); }

  //! Adds LoRA adapters (model/lora.hpp) to the linears 'lc' targets, A seeded from lc.seed and B
  //! zero (the outputs stay the base model's until B trains). From then on the backward passes
  //! write the adapters' gradients only (the gradient buffer follows lora_layout(), size
  //! trainable_size()) and params() are the frozen base weights. Policy models at TP = 1 only.
  //! PEFT: get_peft_model(model, LoraConfig); verl: actor_rollout_ref.model.lora_rank.
  void enable_lora(LoraConfig const& lc) {
    if (cfg_.value_head)
      throw config_error("rlflow::model::GPT::enable_lora: LoRA adapts the policy only; the critic (value head) trains full weights "
                         "(leave critic.model.lora_rank at 0)");
    if (sl_.shard().size > 1)
      throw config_error(msg("rlflow::model::GPT::enable_lora: LoRA is not available with training tensor parallelism (TP ",
                             sl_.shard().size, "); set actor_rollout_ref.actor.megatron.tensor_model_parallel_size=1 or lora_rank=0"));
    LoraLayout lay(cfg_, lc);
    Tensor t = Tensor::empty(DType::float32, Shape{static_cast<std::int64_t>(std::max<std::size_t>(lay.size(), 1))});
    init_lora(lay, t.span<float>().first(lay.size()));
    lora_lay_ = std::move(lay);
    lora_ = std::move(t);
  }
  bool lora_on() const { return lora_.defined(); }
  LoraLayout const& lora_layout() const { return lora_lay_; }
  //! The adapters (lora_layout() order); empty without LoRA.
  std::span<float> lora_params() { return lora_on() ? lora_.span<float>().first(lora_lay_.size()) : std::span<float>{}; }
  std::span<float const> lora_params() const {
    return lora_on() ? lora_.span<float const>().first(lora_lay_.size()) : std::span<float const>{};
  }
  //! Floats a gradient buffer holds: the adapters under LoRA, else this rank's parameters.
  std::size_t trainable_size() const { return lora_on() ? lora_lay_.size() : sl_.size(); }

  //! Trunk forward over ids (B, T) int32 with attention mask (B, T) (nonzero = real token);
  //! positions follow the mask, so left padding does not shift a sequence. Keeps activations.
  void forward(std::int32_t const* ids, std::int32_t const* mask, int B, int T) {
    if (B < 1 || T < 1) throw shape_error(msg("rlflow::model::GPT::forward: empty batch (B = ", B, ", T = ", T, ")"));
    if (T > cfg_.max_seq_len)
      throw shape_error(msg("rlflow::model::GPT::forward: T = ", T, " positions exceed max_seq_len = ", cfg_.max_seq_len,
                            "; shorten the sequences or raise GPTConfig::max_seq_len"));
    int const V = cfg_.vocab_size;
    for (std::int64_t i = 0; i < std::int64_t{B} * T; ++i)
      if (ids[i] < 0 || ids[i] >= V)
        throw value_error(msg("rlflow::model::GPT::forward: token ", ids[i], " at (", i / T, ", ", i % T,
                              ") is outside the vocabulary [0, ", V, "); check the tokenizer and GPTConfig::vocab_size"));
    B_ = B;
    T_ = T;
    packed_ = false;
    al_ = ActivationLayout(cfg_, B, T, ckpt_);
    ids_.assign(ids, ids + std::size_t(B) * T);
    pos_.resize(std::size_t(B) * T);
    valid_.resize(std::size_t(B) * T);
    detail::positions_from_mask(pos_.data(), valid_.data(), mask, B, T);
    trunk_forward();
  }

  //! Packed trunk forward (no padding): ids (N) holds nseq sequences end to end, sequence s at
  //! [cu_seqlens[s], cu_seqlens[s + 1]) (cu_seqlens: nseq + 1 offsets from 0 to N, non-decreasing).
  //! Attention stays inside each sequence and positions restart at 0 per sequence, so every token
  //! gets the activations it has in forward() over the padded rows. Head rows: select_tokens().
  //! verl: use_remove_padding (unpad_input and flash-attn's varlen kernels).
  void forward_packed(std::int32_t const* ids, std::int32_t const* cu_seqlens, int nseq) {
    if (nseq < 1) throw shape_error(msg("rlflow::model::GPT::forward_packed: nseq = ", nseq, " must be >= 1"));
    if (cu_seqlens[0] != 0)
      throw shape_error(msg("rlflow::model::GPT::forward_packed: cu_seqlens[0] = ", cu_seqlens[0], " must be 0"));
    int longest = 0;
    for (int s = 0; s < nseq; ++s) {
      int const n = cu_seqlens[s + 1] - cu_seqlens[s];
      if (n < 0)
        throw shape_error(msg("rlflow::model::GPT::forward_packed: cu_seqlens decreases at sequence ", s, " (", cu_seqlens[s],
                              " then ", cu_seqlens[s + 1], "); offsets must be non-decreasing"));
      longest = std::max(longest, n);
    }
    int const N = cu_seqlens[nseq];
    if (N < 1) throw shape_error("rlflow::model::GPT::forward_packed: no tokens (cu_seqlens[nseq] = 0)");
    if (longest > cfg_.max_seq_len)
      throw shape_error(msg("rlflow::model::GPT::forward_packed: a sequence of ", longest, " tokens exceeds max_seq_len = ",
                            cfg_.max_seq_len, "; shorten the sequences or raise GPTConfig::max_seq_len"));
    int const V = cfg_.vocab_size;
    for (int i = 0; i < N; ++i)
      if (ids[i] < 0 || ids[i] >= V)
        throw value_error(msg("rlflow::model::GPT::forward_packed: token ", ids[i], " at packed index ", i,
                              " is outside the vocabulary [0, ", V, "); check the tokenizer and GPTConfig::vocab_size"));
    B_ = 1;
    T_ = N;
    packed_ = true;
    nseq_ = nseq;
    cu_.assign(cu_seqlens, cu_seqlens + nseq + 1);
    off_.resize(std::size_t(nseq) + 1);
    off_[0] = 0;
    int const NH = sl_.local_heads();
    for (int s = 0; s < nseq; ++s) {
      std::size_t const n = std::size_t(cu_[std::size_t(s) + 1] - cu_[std::size_t(s)]);
      off_[std::size_t(s) + 1] = off_[std::size_t(s)] + std::size_t(NH) * n * n;
    }
    al_ = ActivationLayout(cfg_, std::size_t(N), off_.back(), ckpt_);
    ids_.assign(ids, ids + N);
    pos_.resize(std::size_t(N));
    valid_.assign(std::size_t(N), 1);
    for (int s = 0; s < nseq; ++s)
      for (int i = cu_[std::size_t(s)]; i < cu_[std::size_t(s) + 1]; ++i) pos_[std::size_t(i)] = i - cu_[std::size_t(s)];
    trunk_forward();
  }

 private:
  //! The trunk over ids_, pos_, valid_ (and the packed offsets) with al_ set.
  void trunk_forward() {
    float* a = acts_.ensure(al_.size());
    int const C = cfg_.n_embd;
    std::size_t const N = std::size_t(B_) * T_;
    float const* P = params_.data<float>();
    if (cfg_.llama_family()) {
      forward_llama();
      head_rows_ = 0;
      return;
    }
    if (sl_.split_vocab()) {  // vocabulary-parallel embedding: my rows or zeros, summed over the group
      layers::embedding_slice_forward(a + al_.res0(), ids_.data(), P + sl_.wte, vocab_begin(), vocab_end(), int(N), C);
      comm_->allreduce_sum(std::span<float>(a + al_.res0(), N * C));
      layers::add_positions(a + al_.res0(), pos_.data(), P + sl_.wpe, int(N), C);
    } else {
      layers::encoder_forward(a + al_.res0(), ids_.data(), pos_.data(), P + sl_.wte, P + sl_.wpe, int(N), C);
    }
    gpt2_layers(0, cfg_.n_layer);
    head_rows_ = 0;
  }
  //! GPT-2's layers [l0, l1) from the residual stream entering l0 (the checkpointed backward
  //! recomputes one layer at a time with the forward's ops).
  void gpt2_layers(int l0, int l1) {
    float* a = acts_.t.data<float>();
    int const C = cfg_.n_embd, NH = sl_.local_heads();
    int const Cl = sl_.local_embd(), F = sl_.local_ff();
    std::size_t const N = std::size_t(B_) * T_;
    float const* P = params_.data<float>();
    for (int l = l0; l < l1; ++l) {
      auto const& W = sl_.layers[std::size_t(l)];
      ActivationLayout::Layer const A = al_.layer(l);
      float const* res = a + al_.residual_in(l);
      layers::layernorm_forward(a + A.ln1, a + A.ln1_mean, a + A.ln1_rstd, res, P + W.ln1_w, P + W.ln1_b, int(N), C);
      layers::linear_nt_forward(a + A.qkv, a + A.ln1, P + W.qkv_w, P + W.qkv_b, int(N), C, 3 * Cl);
      lora_fwd(l, LoraSite::qkv, a + A.qkv, 3 * Cl, a + A.ln1, N);
      attention(a + A.atty, a + A.att, a + A.qkv, layers::QKVLayout::gpt2(Cl, NH));
      row_parallel_forward(a + A.res2, res, a + A.atty, P + W.proj_w, P + W.proj_b, int(N), Cl);
      lora_fwd(l, LoraSite::proj, a + A.res2, C, a + A.atty, N);
      layers::layernorm_forward(a + A.ln2, a + A.ln2_mean, a + A.ln2_rstd, a + A.res2, P + W.ln2_w, P + W.ln2_b,
                                int(N), C);
      layers::linear_nt_forward(a + A.fch, a + A.ln2, P + W.fc_w, P + W.fc_b, int(N), C, F);
      lora_fwd(l, LoraSite::fc, a + A.fch, F, a + A.ln2, N);
      layers::gelu_forward(a + A.fch_gelu, a + A.fch, std::int64_t(N) * F);
      row_parallel_forward(a + A.res3, a + A.res2, a + A.fch_gelu, P + W.fcproj_w, P + W.fcproj_b, int(N), F);
      lora_fwd(l, LoraSite::fcproj, a + A.res3, C, a + A.fch_gelu, N);
    }
  }
  //! Attention over this forward's rows: padded (B_, T_) with valid_, or per packed sequence.
  void attention(float* y, float* probs, float const* qkv, layers::QKVLayout L) const {
    if (packed_) layers::attention_forward_varlen(y, probs, qkv, cu_.data(), off_.data(), nseq_, L);
    else layers::attention_forward(y, probs, qkv, valid_.data(), B_, T_, L);
  }
  void attention_grad(float* dqkv, float const* dy, float const* qkv, float const* probs, layers::QKVLayout L) const {
    if (packed_) layers::attention_backward_varlen(dqkv, dy, qkv, probs, cu_.data(), off_.data(), nseq_, L);
    else layers::attention_backward(dqkv, dy, qkv, probs, B_, T_, L);
  }

 public:

  //! Applies the final LayerNorm to positions [h0, h0 + R) of every sequence (the head rows).
  void select_rows(int h0, int R) {
    if (B_ == 0) throw value_error("rlflow::model::GPT::select_rows: call forward first");
    if (h0 < 0 || R < 1 || h0 + R > T_)
      throw shape_error(msg("rlflow::model::GPT::select_rows: rows [", h0, ", ", h0 + R, ") are outside [0, ", T_, ")"));
    if (packed_) throw value_error("rlflow::model::GPT::select_rows: the last forward was packed; use select_tokens");
    head_idx_.resize(std::size_t(B_) * R);
    for (int b = 0; b < B_; ++b)
      for (int j = 0; j < R; ++j) head_idx_[std::size_t(b) * R + j] = b * T_ + h0 + j;
    head_forward();
  }

  //! Applies the final norm to the given token rows of the last forward (indices into its B*T, or
  //! N packed, rows, in the order the head's outputs take): the head rows of a packed forward.
  void select_tokens(std::span<std::int32_t const> rows) {
    if (B_ == 0) throw value_error("rlflow::model::GPT::select_tokens: call forward first");
    if (rows.empty() || rows.size() > std::size_t(B_) * T_)
      throw shape_error(msg("rlflow::model::GPT::select_tokens: ", rows.size(), " rows selected; select 1 to ", B_ * T_,
                            " (the last forward's rows)"));
    for (std::size_t r = 0; r < rows.size(); ++r)
      if (rows[r] < 0 || rows[r] >= B_ * T_)
        throw shape_error(msg("rlflow::model::GPT::select_tokens: row ", rows[r], " (entry ", r, ") is outside [0, ", B_ * T_, ")"));
    head_idx_.assign(rows.begin(), rows.end());
    head_forward();
  }

 private:
  //! The final norm over the rows head_idx_ names.
  void head_forward() {
    int const C = cfg_.n_embd;
    head_rows_ = head_idx_.size();
    float* hin = head_in_.ensure(head_rows_ * C);
    float const* last = acts_.t.data<float>() + al_.layer(cfg_.n_layer - 1).res3;
    for (std::size_t r = 0; r < head_rows_; ++r)
      std::memcpy(hin + r * C, last + std::size_t(head_idx_[r]) * C, sizeof(float) * C);
    float const* P = params_.data<float>();
    if (cfg_.llama_family())
      layers::rmsnorm_forward(lnf_.ensure(head_rows_ * C), lnf_rstd_.ensure(head_rows_), hin, P + sl_.lnf_w,
                              layers::RowSet{std::int64_t(head_rows_), C, 1, std::size_t(C)}, cfg_.rms_norm_eps);
    else
      layers::layernorm_forward(lnf_.ensure(head_rows_ * C), lnf_mean_.ensure(head_rows_), lnf_rstd_.ensure(head_rows_),
                                hin, P + sl_.lnf_w, P + sl_.lnf_b, int(head_rows_), C);
  }

 public:

  //! Logits (B*R, V) of the head rows (lnf lm_head^T; the tied head is wte). Returns a view valid until the
  //! next call. Vocabulary-parallel: a collective of the TP group (each rank's slice, all-gathered).
  std::span<float const> logits_forward() {
    need_head("logits_forward");
    int const C = cfg_.n_embd, V = cfg_.vocab_size;
    if (vocab_parallel()) return gathered_logits();
    float* lg = logits_.ensure(head_rows_ * V);
    layers::linear_nt_forward(lg, lnf_.t.data<float>(), params_.data<float>() + sl_.lm_head, nullptr, int(head_rows_), C, V);
    return {lg, head_rows_ * std::size_t(V)};
  }

  //! log_prob / entropy (B*R) of targets (B*R) under softmax(logits / temperature); entropy may be null.
  void logprob_forward(std::int32_t const* targets, float temperature, float* log_prob, float* entropy) {
    if (!(temperature > 0.0f))
      throw value_error(msg("rlflow::model::GPT::logprob_forward: temperature = ", temperature, " must be > 0"));
    int const V = cfg_.vocab_size;
    for (std::size_t r = 0; r < head_rows_; ++r)
      if (targets[r] < 0 || targets[r] >= V)
        throw value_error(msg("rlflow::model::GPT::logprob_forward: target token ", targets[r], " (row ", r,
                              ") is outside the vocabulary [0, ", V, ")"));
    inv_temp_ = 1.0f / temperature;
    targets_.assign(targets, targets + head_rows_);
    if (vocab_parallel()) {
      vocab_parallel_logprob_forward(log_prob, entropy);
      return;
    }
    logits_forward();
    rows_.resize(head_rows_);
    float const* lg = logits_.t.data<float>();
    RLFLOW_MODEL_OMP_FOR_IF(std::int64_t(head_rows_) * V * layers::exp_weight > layers::parallel_threshold)
    for (std::int64_t r = 0; r < std::int64_t(head_rows_); ++r) {
      rows_[std::size_t(r)] = layers::logprob_forward_row(lg + std::size_t(r) * V, V, targets[r], inv_temp_);
      log_prob[r] = rows_[std::size_t(r)].log_prob;
      if (entropy) entropy[r] = rows_[std::size_t(r)].entropy;
    }
  }

  //! Sum of squared probabilities (B*R) of the rows the last logprob_forward() scored, at its
  //! temperature. verl: calculate_sum_pi_squared.
  void sum_pi_squared(float* out) const {
    if (rows_.size() != head_rows_ || head_rows_ == 0)
      throw value_error("rlflow::model::GPT::sum_pi_squared: call logprob_forward first");
    int const V = vocab_end() - vocab_begin();  // vocabulary-parallel: this rank's slice, summed below
    float const* lg = logits_.t.data<float>();
    if (vocab_parallel()) {
      if (stats_.size() < head_rows_) stats_.resize(head_rows_);
      double* part = stats_.data();  // (rows) partial sums over the slice, then over the group
      RLFLOW_MODEL_OMP_FOR_IF(std::int64_t(head_rows_) * V * layers::exp_weight > layers::parallel_threshold)
      for (std::int64_t r = 0; r < std::int64_t(head_rows_); ++r) {
        double s = 0.0;
        float const* z = lg + std::size_t(r) * V;
        double const lse = double(rows_[std::size_t(r)].lse);
        for (int v = 0; v < V; ++v) s += std::exp(2.0 * (double(z[v]) * inv_temp_ - lse));
        part[r] = s;
      }
      comm_->allreduce_sum(std::span<double>(part, head_rows_));
      for (std::size_t r = 0; r < head_rows_; ++r) out[r] = float(part[r]);
      return;
    }
    RLFLOW_MODEL_OMP_FOR_IF(std::int64_t(head_rows_) * V * layers::exp_weight > layers::parallel_threshold)
    for (std::int64_t r = 0; r < std::int64_t(head_rows_); ++r)
      out[r] = layers::sum_pi_squared_row(lg + std::size_t(r) * V, V, inv_temp_, rows_[std::size_t(r)].lse);
  }

  //! Backward of sum(dlogp * log_prob + dentropy * entropy) (dentropy may be null) into grads (+=).
  void logprob_backward(float const* dlogp, float const* dentropy, std::span<float> grads) {
    need_head("logprob_backward");
    if (rows_.size() != head_rows_) throw value_error("rlflow::model::GPT::logprob_backward: call logprob_forward first");
    check_grads(grads);
    if (vocab_parallel()) {
      vocab_parallel_logprob_backward(dlogp, dentropy, grads);
      return;
    }
    int const V = cfg_.vocab_size, C = cfg_.n_embd;
    float* dlg = dlogits_.ensure(head_rows_ * V);
    float const* lg = logits_.t.data<float>();
    RLFLOW_MODEL_OMP_FOR_IF(std::int64_t(head_rows_) * V * layers::exp_weight > layers::parallel_threshold)
    for (std::int64_t r = 0; r < std::int64_t(head_rows_); ++r)
      layers::logprob_backward_row(dlg + std::size_t(r) * V, lg + std::size_t(r) * V, V, targets_[std::size_t(r)],
                                   inv_temp_, rows_[std::size_t(r)], dlogp[r], dentropy ? dentropy[r] : 0.0f);
    float* dlnf = dlnf_.ensure(head_rows_ * C);
    layers::linear_nt_backward(dlnf, lora_on() ? nullptr : grads.data() + sl_.lm_head, nullptr, dlg, lnf_.t.data<float>(),
                               params_.data<float>() + sl_.lm_head, int(head_rows_), C, V);
    backward_from_head(grads);
  }

  //! Values (B*R) of the head rows: lnf . value_head.weight + value_head.bias.
  void value_forward(float* values) {
    need_head("value_forward");
    need_value_head("value_forward");
    int const C = cfg_.n_embd;
    float const* P = params_.data<float>();
    float const* x = lnf_.t.data<float>();
    for (std::size_t r = 0; r < head_rows_; ++r) {
      float s = P[sl_.value_b];
      for (int c = 0; c < C; ++c) s += x[r * C + c] * P[sl_.value_w + c];
      values[r] = s;
    }
  }

  //! Backward of sum(dvalues * values) into grads (+=).
  void value_backward(float const* dvalues, std::span<float> grads) {
    need_head("value_backward");
    need_value_head("value_backward");
    check_grads(grads);
    int const C = cfg_.n_embd;
    float const* P = params_.data<float>();
    float const* x = lnf_.t.data<float>();
    float* dlnf = dlnf_.ensure(head_rows_ * C);
    float* G = grads.data();
    for (std::size_t r = 0; r < head_rows_; ++r) {
      float const d = dvalues[r];
      G[sl_.value_b] += d;
      for (int c = 0; c < C; ++c) {
        G[sl_.value_w + c] += d * x[r * C + c];
        dlnf[r * C + c] = d * P[sl_.value_w + c];
      }
    }
    backward_from_head(grads);
  }

  //! Activation checkpointing: from the next forward on, the forward keeps only the residual
  //! stream entering each layer and the last layer's output (ActivationLayout, checkpointed), and
  //! the backward recomputes each layer's activations from its input, one layer at a time, into
  //! one shared layer buffer, with the forward's ops in the forward's order: the gradients are
  //! bit-identical to the kept-activation ones, for about one more trunk forward per backward.
  //! Padded and packed rows, both heads, every family and tensor parallelism.
  //! verl: model.enable_gradient_checkpointing (transformers' gradient_checkpointing_enable).
  void set_activation_checkpointing(bool on) { ckpt_ = on; }
  bool activation_checkpointing() const { return ckpt_; }
  //! Bytes of the kept-activation buffer (grow-only: the largest forward's ActivationLayout so far).
  std::size_t activation_bytes() const { return acts_.bytes(); }

  //! Bytes held by activations and scratch (not parameters).
  std::size_t workspace_bytes() const {
    return acts_.bytes() + grads_ws_.bytes() + part_.bytes() + head_in_.bytes() + lnf_.bytes() + lnf_mean_.bytes() + lnf_rstd_.bytes() +
           logits_.bytes() + dlogits_.bytes() + dlnf_.bytes() + maxima_.bytes() + gather_.bytes() + full_logits_.bytes();
  }
  int batch() const { return B_; }
  int seq_len() const { return T_; }

 private:
  void need_head(char const* fn) const {
    if (head_rows_ == 0)
      throw value_error(msg("rlflow::model::GPT::", fn, ": no head rows; call forward then select_rows first"));
  }
  void need_value_head(char const* fn) const {
    if (!cfg_.value_head)
      throw config_error(msg("rlflow::model::GPT::", fn, ": the model has no value head; set GPTConfig::value_head = true"));
  }
  void check_grads(std::span<float> grads) const {
    if (grads.size() != trainable_size())
      throw shape_error(msg("rlflow::model::GPT: gradient buffer holds ", grads.size(), " floats but the model (this rank's shard) has ",
                            trainable_size(), lora_on() ? " adapter parameters (LoRA: only the adapters train)" : " parameters"));
  }

  //! out (M, C) = res + b + inp (M, K) w (K, C) (the residual joins without a copy); tensor-parallel:
  //! the product is this rank's partial
  //! (its K rows), summed over the TP group (rank order) before it joins the replicated stream.
  void row_parallel_forward(float* out, float const* res, float const* inp, float const* w, float const* b, int M, int K) {
    int const C = cfg_.n_embd;
    if (sl_.shard().size == 1) {
      layers::linear_nn_forward_residual(out, res, inp, w, b, M, K, C);
      return;
    }
    float* part = part_.ensure(std::size_t(M) * C);
    layers::linear_nn_forward(part, inp, w, nullptr, M, K, C, false);
    comm_->allreduce_sum(std::span<float>(part, std::size_t(M) * C));
    for (std::size_t i = 0; i < std::size_t(M); ++i)
      for (int c = 0; c < C; ++c) out[i * C + c] = (res[i * C + c] + (b ? b[c] : 0.0f)) + part[i * C + c];
  }
  //! The vocabulary-parallel head at tp.size > 1 (set_lm_head keeps the cut in step with the head).
  bool vocab_parallel() const { return sl_.split_vocab(); }

  //! logits_forward() of the vocabulary-parallel head: this rank's (rows, Vl) slice, all-gathered
  //! (each rank's slot padded to vocab_rows()) and put in place in (rows, V).
  std::span<float const> gathered_logits() {
    int const C = cfg_.n_embd, V = cfg_.vocab_size, N = sl_.shard().size, Vw = sl_.vocab_rows();
    std::size_t const rows = head_rows_, slot = rows * std::size_t(Vw);
    float* g = gather_.ensure(slot * std::size_t(N + 1));  // [0, slot): mine; then the group's
    layers::linear_nt_forward(g, lnf_.t.data<float>(), params_.data<float>() + sl_.lm_head, nullptr, int(rows), C,
                              vocab_end() - vocab_begin());
    comm_->allgather(std::span<float const>(g, slot), std::span<float>(g + slot, slot * std::size_t(N)));
    float* out = full_logits_.ensure(rows * std::size_t(V));
    for (int q = 0; q < N; ++q) {
      int const b = vocab_slice_begin(V, q, N), w = vocab_slice_begin(V, q + 1, N) - b;
      float const* src = g + slot * std::size_t(q + 1);  // (rows, w)
      for (std::size_t r = 0; r < rows; ++r)
        std::memcpy(out + r * std::size_t(V) + std::size_t(b), src + r * std::size_t(w), sizeof(float) * std::size_t(w));
    }
    return {out, rows * std::size_t(V)};
  }

  //! The vocabulary-parallel head's forward on the head rows (targets_ and inv_temp_ set): this
  //! rank's logits (rows, Vl) = lnf wte[v0, v0 + Vl)^T into logits_; per row the global max logit
  //! (an all-gather of the ranks' maxima: exact, a float max), then one all-reduce (double, rank
  //! order) of the slice's sum exp(z - m), sum z exp(z - m) and the target's z (on its owner, 0
  //! elsewhere): lse = m + log(s), log_prob = z_t - lse, entropy = lse - sz / s, as
  //! layers::logprob_forward_row computes them over the whole row. Every rank gets the same bits.
  void vocab_parallel_logprob_forward(float* log_prob, float* entropy) {
    int const C = cfg_.n_embd, N = sl_.shard().size, v0 = vocab_begin(), Vl = vocab_end() - v0;
    std::size_t const rows = head_rows_;
    float* lg = logits_.ensure(rows * std::size_t(Vl));
    layers::linear_nt_forward(lg, lnf_.t.data<float>(), params_.data<float>() + sl_.lm_head, nullptr, int(rows), C, Vl);  // my rows
    float* mx = maxima_.ensure(rows * std::size_t(N + 1));  // [0, rows): mine; then the group's (N, rows)
    for (std::size_t r = 0; r < rows; ++r) mx[r] = *std::max_element(lg + r * Vl, lg + (r + 1) * Vl);
    comm_->allgather(std::span<float const>(mx, rows), std::span<float>(mx + rows, rows * std::size_t(N)));
    stats_.resize(rows * 3);
    double* st = stats_.data();
    double const it = double(inv_temp_);
    RLFLOW_MODEL_OMP_FOR_IF(std::int64_t(rows) * Vl * layers::exp_weight > layers::parallel_threshold)
    for (std::int64_t r = 0; r < std::int64_t(rows); ++r) {
      float m = mx[rows + std::size_t(r)];
      for (int q = 1; q < N; ++q) m = std::max(m, mx[rows * std::size_t(q + 1) + std::size_t(r)]);
      double const md = double(m) * it;  // = max_v double(z_v) * it: the product is monotone in z
      float const* z = lg + std::size_t(r) * Vl;
      double s = 0.0, sz = 0.0;
      for (int v = 0; v < Vl; ++v) {
        double const zv = double(z[v]) * it;
        double const e = std::exp(zv - md);
        s += e;
        sz += e * zv;
      }
      int const t = targets_[std::size_t(r)] - v0;
      st[3 * r] = s;
      st[3 * r + 1] = sz;
      st[3 * r + 2] = (t >= 0 && t < Vl) ? double(z[t]) * it : 0.0;
    }
    comm_->allreduce_sum(std::span<double>(st, rows * 3));
    rows_.resize(rows);
    for (std::size_t r = 0; r < rows; ++r) {
      float m = mx[rows + r];
      for (int q = 1; q < N; ++q) m = std::max(m, mx[rows * std::size_t(q + 1) + r]);
      double const lse = double(m) * it + std::log(st[3 * r]);
      rows_[r] = {float(st[3 * r + 2] - lse), float(lse - st[3 * r + 1] / st[3 * r]), float(lse)};
      log_prob[r] = rows_[r].log_prob;
      if (entropy) entropy[r] = rows_[r].entropy;
    }
  }

  //! The vocabulary-parallel head's backward: this rank's dlogits (rows, Vl); the head's input
  //! gradient dlnf = sum over the group of dlogits wte[v0, v0 + Vl) (one all-reduce of (rows, C));
  //! the wte gradient of this rank's rows accumulates into its own rows (no other rank has them).
  void vocab_parallel_logprob_backward(float const* dlogp, float const* dentropy, std::span<float> grads) {
    int const C = cfg_.n_embd, v0 = vocab_begin(), Vl = vocab_end() - v0;
    std::size_t const rows = head_rows_;
    float* dlg = dlogits_.ensure(rows * std::size_t(Vl));
    float const* lg = logits_.t.data<float>();
    RLFLOW_MODEL_OMP_FOR_IF(std::int64_t(rows) * Vl * layers::exp_weight > layers::parallel_threshold)
    for (std::int64_t r = 0; r < std::int64_t(rows); ++r)
      layers::logprob_backward_row(dlg + std::size_t(r) * Vl, lg + std::size_t(r) * Vl, Vl, targets_[std::size_t(r)] - v0, inv_temp_,
                                   rows_[std::size_t(r)], dlogp[r], dentropy ? dentropy[r] : 0.0f);
    float* dlnf = dlnf_.ensure(rows * C);
    layers::linear_nt_backward(dlnf, grads.data() + sl_.lm_head, nullptr, dlg, lnf_.t.data<float>(),
                               params_.data<float>() + sl_.lm_head, int(rows), C, Vl);
    comm_->allreduce_sum(std::span<float>(dlnf, rows * C));
    backward_from_head(grads);
  }

  //! g (N, C) += the head rows' input gradient dhin (head_rows_, C) at their token rows (+=: a
  //! row may be selected twice).
  void scatter_head_grad(float* g, float const* dhin) const {
    int const C = cfg_.n_embd;
    for (std::size_t r = 0; r < head_rows_; ++r) {
      float* dst = g + std::size_t(head_idx_[r]) * C;
      for (int c = 0; c < C; ++c) dst[c] += dhin[r * C + c];
    }
  }

  //! Sums a replicated activation's gradient over the TP group (no-op at TP = 1).
  void tp_allreduce(float* x, std::size_t n) {
    if (sl_.shard().size > 1) comm_->allreduce_sum(std::span<float>(x, n));
  }

  //! dlnf_ (B*R, C) holds d(loss)/d(ln_f output) of the head rows; backprop to every parameter.
  void backward_from_head(std::span<float> grads) {
    if (cfg_.llama_family()) {
      backward_llama(grads);
      return;
    }
    int const C = cfg_.n_embd, NH = sl_.local_heads(), B = B_, T = T_, Cl = sl_.local_embd(), F = sl_.local_ff();
    std::size_t const N = std::size_t(B) * T;
    float const* P = params_.data<float>();
    float* G = lora_on() ? nullptr : grads.data();  // LoRA: the base weights are frozen
    float* GL = grads.data();
    float* a = acts_.t.data<float>();
    // scratch: g (N, C) residual gradient, dln (N, C), dqkv (N, 3C), datty (N, C), dfch (N, 4C)
    float* ws = grads_ws_.ensure(N * C * 10);
    float* g = ws;
    float* dln = g + N * C;
    float* dqkv = dln + N * C;
    float* datty = dqkv + N * 3 * C;
    float* dfch = datty + N * C;
    // final LayerNorm on the head rows, scattered into the residual gradient
    std::memset(g, 0, sizeof(float) * N * C);
    float* dhin = dln;  // (B*R, C) fits in (N, C)
    std::memset(dhin, 0, sizeof(float) * head_rows_ * C);
    layers::layernorm_backward(dhin, opt(G, sl_.lnf_w), opt(G, sl_.lnf_b), dlnf_.t.data<float>(), head_in_.t.data<float>(),
                               P + sl_.lnf_w, lnf_mean_.t.data<float>(), lnf_rstd_.t.data<float>(), int(head_rows_), C);
    scatter_head_grad(g, dhin);
    for (int l = cfg_.n_layer - 1; l >= 0; --l) {
      if (al_.checkpointed()) gpt2_layers(l, l + 1);  // this layer's activations again, from its input
      auto const& W = sl_.layers[std::size_t(l)];
      ActivationLayout::Layer const A = al_.layer(l);
      float const* res = a + al_.residual_in(l);
      // res3 = res2 + gelu(fc(ln2(res2))) Wp + bp : g is d res3
      layers::linear_nn_backward(dfch, opt(G, W.fcproj_w), opt(G, W.fcproj_b), g, a + A.fch_gelu, P + W.fcproj_w, int(N), F, C);
      lora_bwd(l, LoraSite::fcproj, dfch, g, C, a + A.fch_gelu, N, GL);
      layers::gelu_backward(dfch, a + A.fch, dfch, std::int64_t(N) * F);
      layers::linear_nt_backward(dln, opt(G, W.fc_w), opt(G, W.fc_b), dfch, a + A.ln2, P + W.fc_w, int(N), C, F);
      lora_bwd(l, LoraSite::fc, dln, dfch, F, a + A.ln2, N, GL);
      tp_allreduce(dln, N * C);  // column-parallel input gradient: sum of the ranks' partials
      layers::layernorm_backward(g, opt(G, W.ln2_w), opt(G, W.ln2_b), dln, a + A.res2, P + W.ln2_w, a + A.ln2_mean,
                                 a + A.ln2_rstd, int(N), C);  // g is now d res2
      layers::linear_nn_backward(datty, opt(G, W.proj_w), opt(G, W.proj_b), g, a + A.atty, P + W.proj_w, int(N), Cl, C);
      lora_bwd(l, LoraSite::proj, datty, g, C, a + A.atty, N, GL);
      attention_grad(dqkv, datty, a + A.qkv, a + A.att, layers::QKVLayout::gpt2(Cl, NH));
      layers::linear_nt_backward(dln, opt(G, W.qkv_w), opt(G, W.qkv_b), dqkv, a + A.ln1, P + W.qkv_w, int(N), C, 3 * Cl);
      lora_bwd(l, LoraSite::qkv, dln, dqkv, 3 * Cl, a + A.ln1, N, GL);
      tp_allreduce(dln, N * C);
      layers::layernorm_backward(g, opt(G, W.ln1_w), opt(G, W.ln1_b), dln, res, P + W.ln1_w, a + A.ln1_mean, a + A.ln1_rstd,
                                 int(N), C);  // g is now d res
    }
    if (G) layers::encoder_backward(opt(G, sl_.wte), opt(G, sl_.wpe), g, ids_.data(), pos_.data(), int(N), C, vocab_begin(), vocab_end());
  }

  //! A parameter the model may lack (ParamLayout::none): null then.
  //! Also null when 'base' is (the base weights' gradients under LoRA: frozen).
  static float* opt(float* base, std::size_t off) { return off == ParamLayout::none || !base ? nullptr : base + off; }
  static float const* opt(float const* base, std::size_t off) { return off == ParamLayout::none || !base ? nullptr : base + off; }
  //! The adapters of (layer, site) added to a site's output (no-op without LoRA).
  void lora_fwd(int l, LoraSite site, float* out, int ld, float const* x, std::size_t N) {
    if (lora_on()) lora_forward(lora_lay_, lora_.data<float>(), l, site, out, ld, x, int(N), lora_ws_);
  }
  //! Their backward: adapter gradients into GL (the gradient buffer under LoRA), dx += their input gradient.
  void lora_bwd(int l, LoraSite site, float* dx, float const* dy, int ld, float const* x, std::size_t N, float* GL) {
    if (lora_on()) lora_backward(lora_lay_, lora_.data<float>(), GL, l, site, dx, dy, ld, x, int(N), lora_ws_);
  }
  //! This rank's heads: NH / tp query heads and their NKV / tp key/value heads.
  layers::QKVLayout qkv_layout() const {
    return layers::QKVLayout::grouped(sl_.local_heads(), sl_.local_kv_heads(), cfg_.head_dim());
  }
  //! The rotary tables up to the largest position of the batch.
  void ensure_rope() {
    std::int32_t mx = 0;
    for (auto p : pos_) mx = std::max(mx, p);
    if (inv_freq_.empty()) inv_freq_ = rope_inv_freq(cfg_);
    layers::rope_tables(rope_cos_, rope_sin_, inv_freq_, int(mx) + 1);
  }

  //! The Llama family's trunk (transformers' LlamaDecoderLayer): x += o_proj(attn(rope(qk_norm(
  //! qkv(rms1(x)))))); x += down(silu(gate(rms2(x))) * up(rms2(x))). ids_, pos_, valid_, al_ set.
  //! Tensor parallel: this rank's heads and MLP columns (shard_layout()), the row-parallel o_proj
  //! and down_proj summed over the group as for GPT-2.
  void forward_llama() {
    int const C = cfg_.n_embd;
    std::size_t const N = std::size_t(B_) * T_;
    float const* P = params_.data<float>();
    float* a = acts_.t.data<float>();
    ensure_rope();
    if (sl_.split_embedding()) {  // vocabulary-parallel embedding (tied): my rows or zeros, summed over the group
      layers::embedding_slice_forward(a + al_.res0(), ids_.data(), P + sl_.wte, vocab_begin(), vocab_end(), int(N), C);
      comm_->allreduce_sum(std::span<float>(a + al_.res0(), N * C));
    } else {
      layers::embedding_forward(a + al_.res0(), ids_.data(), P + sl_.wte, int(N), C);
    }
    llama_layers(0, cfg_.n_layer);
  }
  //! The Llama family's layers [l0, l1) from the residual stream entering l0 (rope tables set; the
  //! checkpointed backward recomputes one layer at a time with the forward's ops).
  void llama_layers(int l0, int l1) {
    int const C = cfg_.n_embd, NH = sl_.local_heads(), NKV = sl_.local_kv_heads(), hd = cfg_.head_dim();
    int const QKV = (NH + 2 * NKV) * hd, Q = NH * hd, F = sl_.local_ff();
    std::size_t const N = std::size_t(B_) * T_;
    float const* P = params_.data<float>();
    float* a = acts_.t.data<float>();
    float const eps = cfg_.rms_norm_eps;
    layers::RowSet const rows{std::int64_t(N), C, 1, std::size_t(C)};
    for (int l = l0; l < l1; ++l) {
      auto const& W = sl_.layers[std::size_t(l)];
      ActivationLayout::Layer const A = al_.layer(l);
      float const* res = a + al_.residual_in(l);
      float* qkv = a + A.qkv;
      layers::rmsnorm_forward(a + A.ln1, a + A.ln1_rstd, res, P + W.ln1_w, rows, eps);
      layers::linear_nt_forward(qkv, a + A.ln1, P + W.qkv_w, opt(P, W.qkv_b), int(N), C, QKV);
      lora_fwd(l, LoraSite::qkv, qkv, QKV, a + A.ln1, N);
      if (cfg_.qk_norm) {
        std::memcpy(a + A.qkv_raw, qkv, sizeof(float) * N * std::size_t(QKV));
        layers::rmsnorm_forward(qkv, a + A.qk_rstd, qkv, P + W.q_norm, layers::RowSet{std::int64_t(N) * NH, hd, NH, std::size_t(QKV)}, eps);
        layers::rmsnorm_forward(qkv + Q, a + A.qk_rstd + N * NH, qkv + Q, P + W.k_norm,
                                layers::RowSet{std::int64_t(N) * NKV, hd, NKV, std::size_t(QKV)}, eps);
      }
      layers::rope_apply(qkv, pos_.data(), std::int64_t(N), NH, hd, std::size_t(QKV), rope_cos_.data(), rope_sin_.data(), false);
      layers::rope_apply(qkv + Q, pos_.data(), std::int64_t(N), NKV, hd, std::size_t(QKV), rope_cos_.data(), rope_sin_.data(), false);
      attention(a + A.atty, a + A.att, qkv, qkv_layout());
      row_parallel_forward(a + A.res2, res, a + A.atty, P + W.proj_w, opt(P, W.proj_b), int(N), Q);
      lora_fwd(l, LoraSite::proj, a + A.res2, C, a + A.atty, N);
      layers::rmsnorm_forward(a + A.ln2, a + A.ln2_rstd, a + A.res2, P + W.ln2_w, rows, eps);
      layers::linear_nt_forward(a + A.fch, a + A.ln2, P + W.fc_w, opt(P, W.fc_b), int(N), C, 2 * F);
      lora_fwd(l, LoraSite::fc, a + A.fch, 2 * F, a + A.ln2, N);
      layers::swiglu_forward(a + A.fch_gelu, a + A.fch, std::int64_t(N), F);
      row_parallel_forward(a + A.res3, a + A.res2, a + A.fch_gelu, P + W.fcproj_w, opt(P, W.fcproj_b), int(N), F);
      lora_fwd(l, LoraSite::fcproj, a + A.res3, C, a + A.fch_gelu, N);
    }
  }

  //! backward_from_head for the Llama family (dlnf_ holds d(loss)/d(final norm output)).
  void backward_llama(std::span<float> grads) {
    int const C = cfg_.n_embd, NH = sl_.local_heads(), NKV = sl_.local_kv_heads(), hd = cfg_.head_dim(), B = B_, T = T_;
    int const QKV = (NH + 2 * NKV) * hd, Q = NH * hd, F = sl_.local_ff();
    std::size_t const N = std::size_t(B) * T;
    float const* P = params_.data<float>();
    float* G = lora_on() ? nullptr : grads.data();  // LoRA: the base weights are frozen
    float* GL = grads.data();
    float* a = acts_.t.data<float>();
    layers::RowSet const rows{std::int64_t(N), C, 1, std::size_t(C)};
    // scratch: g (N, C) residual gradient, dln (N, C), dqkv (N, QKV), datty (N, Q), dfch (N, 2F), dh (N, F)
    std::size_t const need = N * (2 * std::size_t(C) + std::size_t(QKV) + std::size_t(Q) + 3 * std::size_t(F));
    float* g = grads_ws_.ensure(need);
    float* dln = g + N * C;
    float* dqkv = dln + N * C;
    float* datty = dqkv + N * QKV;
    float* dfch = datty + N * Q;
    float* dh = dfch + N * 2 * F;
    std::memset(g, 0, sizeof(float) * N * C);
    float* dhin = dln;  // (B*R, C) fits in (N, C)
    std::memset(dhin, 0, sizeof(float) * head_rows_ * C);
    layers::rmsnorm_backward(dhin, opt(G, sl_.lnf_w), dlnf_.t.data<float>(), head_in_.t.data<float>(), P + sl_.lnf_w,
                             lnf_rstd_.t.data<float>(), layers::RowSet{std::int64_t(head_rows_), C, 1, std::size_t(C)});
    scatter_head_grad(g, dhin);
    for (int l = cfg_.n_layer - 1; l >= 0; --l) {
      if (al_.checkpointed()) llama_layers(l, l + 1);  // this layer's activations again, from its input
      auto const& W = sl_.layers[std::size_t(l)];
      ActivationLayout::Layer const A = al_.layer(l);
      float const* res = a + al_.residual_in(l);
      // res3 = res2 + (silu(gate) * up) Wd + bd : g is d res3
      layers::linear_nn_backward(dh, opt(G, W.fcproj_w), opt(G, W.fcproj_b), g, a + A.fch_gelu, P + W.fcproj_w, int(N), F, C);
      lora_bwd(l, LoraSite::fcproj, dh, g, C, a + A.fch_gelu, N, GL);
      layers::swiglu_backward(dfch, a + A.fch, dh, std::int64_t(N), F);
      layers::linear_nt_backward(dln, opt(G, W.fc_w), opt(G, W.fc_b), dfch, a + A.ln2, P + W.fc_w, int(N), C, 2 * F);
      lora_bwd(l, LoraSite::fc, dln, dfch, 2 * F, a + A.ln2, N, GL);
      tp_allreduce(dln, N * C);  // column-parallel input gradient: sum of the ranks' partials
      layers::rmsnorm_backward(g, opt(G, W.ln2_w), dln, a + A.res2, P + W.ln2_w, a + A.ln2_rstd, rows);  // g is now d res2
      layers::linear_nn_backward(datty, opt(G, W.proj_w), opt(G, W.proj_b), g, a + A.atty, P + W.proj_w, int(N), Q, C);
      lora_bwd(l, LoraSite::proj, datty, g, C, a + A.atty, N, GL);
      attention_grad(dqkv, datty, a + A.qkv, a + A.att, qkv_layout());
      layers::rope_apply(dqkv, pos_.data(), std::int64_t(N), NH, hd, std::size_t(QKV), rope_cos_.data(), rope_sin_.data(), true);
      layers::rope_apply(dqkv + Q, pos_.data(), std::int64_t(N), NKV, hd, std::size_t(QKV), rope_cos_.data(), rope_sin_.data(), true);
      if (cfg_.qk_norm) {
        // the norms' weights are shared by every head: at TP each rank has its heads' part of the
        // gradient, summed over the group before it joins the accumulated one
        bool const tp = sl_.shard().size > 1;
        float* qk = tp ? qk_grad_.ensure(2 * std::size_t(hd)) : nullptr;
        if (tp) std::memset(qk, 0, sizeof(float) * 2 * std::size_t(hd));
        layers::rmsnorm_backward(dqkv, tp ? qk : opt(G, W.q_norm), dqkv, a + A.qkv_raw, P + W.q_norm, a + A.qk_rstd,
                                 layers::RowSet{std::int64_t(N) * NH, hd, NH, std::size_t(QKV)}, false);
        layers::rmsnorm_backward(dqkv + Q, tp ? qk + hd : opt(G, W.k_norm), dqkv + Q, a + A.qkv_raw + Q, P + W.k_norm,
                                 a + A.qk_rstd + N * NH, layers::RowSet{std::int64_t(N) * NKV, hd, NKV, std::size_t(QKV)}, false);
        if (tp) {
          comm_->allreduce_sum(std::span<float>(qk, 2 * std::size_t(hd)));
          for (int i = 0; i < hd; ++i) G[W.q_norm + std::size_t(i)] += qk[i], G[W.k_norm + std::size_t(i)] += qk[hd + i];
        }
      }
      layers::linear_nt_backward(dln, opt(G, W.qkv_w), opt(G, W.qkv_b), dqkv, a + A.ln1, P + W.qkv_w, int(N), C, QKV);
      lora_bwd(l, LoraSite::qkv, dln, dqkv, QKV, a + A.ln1, N, GL);
      tp_allreduce(dln, N * C);
      layers::rmsnorm_backward(g, opt(G, W.ln1_w), dln, res, P + W.ln1_w, a + A.ln1_rstd, rows);  // g is now d res
    }
    if (!G) return;  // LoRA: the embedding is frozen
    if (sl_.split_embedding())
      layers::embedding_backward(opt(G, sl_.wte), g, ids_.data(), int(N), C, vocab_begin(), vocab_end());
    else
      layers::embedding_backward(opt(G, sl_.wte), g, ids_.data(), int(N), C);
  }

  GPTConfig cfg_;
  ParamLayout lay_;
  ShardLayout sl_;
  std::vector<double> inv_freq_;             //!< the Llama family's RoPE inverse frequencies
  std::vector<float> rope_cos_, rope_sin_;   //!< (positions, hd / 2) tables, grown on demand
  comm::Communicator* comm_ = nullptr;  //!< the TP group (tensor-parallel only)
  detail::grow_buffer part_;            //!< (N, C) partial sums of a row-parallel product
  detail::grow_buffer qk_grad_;         //!< one backward's q/k norm weight gradients (TP: summed over the group)
  Tensor params_;
  int B_ = 0, T_ = 0;
  bool packed_ = false;              //!< the last forward was forward_packed
  bool ckpt_ = false;                //!< set_activation_checkpointing
  int nseq_ = 0;                     //!< packed: sequences
  std::vector<std::int32_t> cu_;     //!< packed: nseq + 1 token offsets
  std::vector<std::size_t> off_;     //!< packed: nseq + 1 attention-probability offsets (floats)
  std::vector<std::int32_t> head_idx_;  //!< the head rows' token rows
  std::size_t head_rows_ = 0;
  float inv_temp_ = 1.0f;
  ActivationLayout al_;
  detail::grow_buffer acts_, grads_ws_, head_in_, lnf_, lnf_mean_, lnf_rstd_, logits_, dlogits_, dlnf_;
  std::vector<std::int32_t> ids_, pos_, targets_;
  std::vector<std::uint8_t> valid_;
  std::vector<layers::logprob_row> rows_;
  LMHead head_ = LMHead::replicated;
  bool pristine_ = true;  //!< params() still holds the seeded initial weights (nothing took a mutable view)
  detail::grow_buffer maxima_, gather_, full_logits_;  //!< vocabulary-parallel head: row maxima, logits_forward()'s gather
  std::vector<float> gathered_;                          //!< gather_full's receive buffer
  mutable std::vector<double> stats_;   //!< vocabulary-parallel head: per-row partial sums
  LoraLayout lora_lay_;  //!< the adapters' layout (enable_lora)
  Tensor lora_;          //!< the adapters (lora_lay_ order); undefined without LoRA
  LoraScratch lora_ws_;
};

}  // namespace rlflow::model
