// rlflow/engine/rollout_engine.hpp: batched generation for the built-in GPT with a KV cache
// (llm.c has none: it re-runs the whole sequence per token). Defines RolloutResult and
// RolloutEngine: prefill of left-padded prompts, then one decode step per token for the rows
// still running, per-row stop at EOS or max_new_tokens, counter-based sampling, the rollout's
// log-probs, sleep / wake (release and re-acquire the cache), in-place weight updates.
// Tensor parallel: an engine built with a TPRank of size N > 1 and the TP group's communicator
// holds one rank's shard (model/tensor_parallel.hpp: heads and MLP columns split, KV cache split
// by heads, LM head replicated or split by vocabulary rows: set_lm_head) and all-reduces the two
// row-parallel outputs of every layer; the N ranks of a replica call it together and get
// identical tokens. Does not train. Letters: B sequences, P prompt width, R = max_new_tokens,
// S = P + R cache slots, C width, NH heads, hs = C / NH, V vocabulary, L layers.
#pragma once
#include <atomic>
#include <algorithm>  // std::copy, std::fill, std::max, std::partial_sort
#include <cmath>      // std::exp, std::log
#include <cstdint>
#include <cstring>    // std::memcpy
#include <memory>     // std::shared_ptr (the replica's shared replicated tensors)
#include <span>
#include <vector>

#include <rlflow/core/error.hpp>             // shape_error, dtype_error, value_error
#include <rlflow/core/memory.hpp>            // caching_host_resource: the engine's own, so sleep() frees for real
#include <rlflow/core/tensor.hpp>            // Tensor in and out
#include <rlflow/model/gpt.hpp>         // GPTConfig, ParamLayout, init_params, detail::grow_buffer
#include <rlflow/model/layers.hpp>      // the CPU layer functions
#include <rlflow/model/tensor_parallel.hpp>  // TPRank, ShardLayout
#include <rlflow/comm/communicator.hpp>  // comm::Communicator (the TP group's all-reduce)
#include <rlflow/engine/rollout_layers.hpp>  // the decoder stack both CPU rollout engines run
#include <rlflow/engine/sampling.hpp>   // SamplingParams, sample_token
#include <rlflow/engine/vocab_parallel_sampling.hpp>  // the vocabulary-parallel head's sampling

namespace rlflow::engine {

//! How a tensor-parallel rollout computes the LM head (tied to wte): model::LMHead (replicated or
//! vocabulary-parallel; defined next to TPRank so that training TP shares it).
using LMHead = model::LMHead;

//! The vocabulary size from which a tensor-parallel RolloutEngine defaults to the
//! vocabulary-parallel head: measured faster at V = 256, 1024 and 8192 for TP = 2 and 4, and a
//! wash within noise at V = 64 (BM_LMHead, docs/model.md).
inline constexpr int vocab_parallel_min_vocab = 256;

//! What generate() returns; all (B, R) with R = max_new_tokens.
struct RolloutResult {
  Tensor responses;      //!< int32: sampled tokens, pad_id after EOS
  Tensor response_mask;  //!< int32: 1 for generated tokens (EOS included), 0 after
  Tensor log_probs;      //!< float32: log softmax(logits / T)[token] (T = 1 when greedy); 0 where masked
  //! Rows still generating when GenerateControl::abort stopped the call (empty when it ran to
  //! the end); each has exactly 'generated' tokens (the rest of its row is masked).
  std::vector<int> unfinished;
  //! The tokens each row of 'unfinished' holds, when rows may differ (PagedEngine); empty: 'generated' each.
  std::vector<int> unfinished_generated;
  int generated = 0;  //!< token slots the call produced (R unless aborted, or fewer if every row stopped); CPU engine only
};

//! Optional controls of RolloutEngine::generate for partial rollout (verl: abort_all_requests,
//! then resume_generation with new weights). CPU engine, replicated LM head only.
struct GenerateControl {
  //! Checked after each generated token; when set the call returns at once with the rows still
  //! running listed in RolloutResult::unfinished.
  std::atomic<bool> const* abort = nullptr;
  //! The sampling counter of the first generated token: a continuation of a partial rollout
  //! whose rows hold j tokens passes j, so every token stays a function of (seed, index).
  std::uint64_t first_token = 0;
};

namespace detail {

//! The host-side token bookkeeping of a KV-cached decode, shared by the CPU and the CUDA rollout
//! engine (which keeps it on the host too): the (B, S) grid of tokens and valid flags, how many
//! valid tokens each row has consumed so far (its next position), the rows still running and
//! the number of filled slots. 'who' names the engine in error messages.
struct DecodeBook {
  int B = 0, S = 0, filled = 0;
  std::vector<std::int32_t> seq, n_valid, next;
  std::vector<std::uint8_t> seq_valid;
  std::vector<int> active;

  //! Checks left-padded prompts (B, P) int32 for a prefill reserving max_new_tokens slots.
  static void check_prompts(char const* who, Tensor const& prompt_ids, Tensor const& prompt_mask, int max_new_tokens,
                            model::GPTConfig const& cfg) {
    if (prompt_ids.dtype() != DType::int32 || prompt_mask.dtype() != DType::int32)
      throw dtype_error(msg(who, "::prefill: prompt_ids is ", dtype_name(prompt_ids.dtype()), " and the mask is ",
                            dtype_name(prompt_mask.dtype()), "; both must be int32"));
    if (prompt_ids.rank() != 2 || !(prompt_ids.shape() == prompt_mask.shape()) || prompt_ids.dim(0) < 1 || prompt_ids.dim(1) < 1)
      throw shape_error(msg(who, "::prefill: prompt_ids ", prompt_ids.shape().str(), " and mask ", prompt_mask.shape().str(),
                            " must be the same non-empty (B, P)"));
    int const B = static_cast<int>(prompt_ids.dim(0)), P = static_cast<int>(prompt_ids.dim(1));
    if (max_new_tokens < 1 || P + max_new_tokens > cfg.max_seq_len)
      throw shape_error(msg(who, "::prefill: prompt width ", P, " + max_new_tokens ", max_new_tokens, " exceeds max_seq_len = ",
                            cfg.max_seq_len, "; shorten the prompts or the responses"));
    auto const* ids = prompt_ids.data<std::int32_t>();
    auto const* mask = prompt_mask.data<std::int32_t>();
    for (int b = 0; b < B; ++b) {
      if (mask[std::size_t(b) * P + P - 1] == 0)
        throw value_error(msg(who, "::prefill: prompt row ", b, " ends in padding; prompts must be left-padded (mask[b, P-1] = 1)"));
      for (int t = 0; t < P; ++t)
        if (ids[std::size_t(b) * P + t] < 0 || ids[std::size_t(b) * P + t] >= cfg.vocab_size)
          throw value_error(msg(who, "::prefill: token ", ids[std::size_t(b) * P + t], " at (", b, ", ", t,
                                ") is outside the vocabulary [0, ", cfg.vocab_size, ")"));
    }
  }

  //! Starts a sequence of checked prompts: S = P + max_new_tokens slots per row, every row running.
  void reset(Tensor const& prompt_ids, Tensor const& prompt_mask, int max_new_tokens) {
    int const b_rows = static_cast<int>(prompt_ids.dim(0)), P = static_cast<int>(prompt_ids.dim(1));
    auto const* ids = prompt_ids.data<std::int32_t>();
    auto const* mask = prompt_mask.data<std::int32_t>();
    B = b_rows;
    S = P + max_new_tokens;
    filled = 0;
    seq.assign(std::size_t(B) * S, 0);
    seq_valid.assign(std::size_t(B) * S, 0);
    n_valid.assign(std::size_t(B), 0);
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < P; ++t) {
        seq[std::size_t(b) * S + t] = ids[std::size_t(b) * P + t];
        seq_valid[std::size_t(b) * S + t] = mask[std::size_t(b) * P + t] != 0;
      }
    run_all_rows();
  }

  void run_all_rows() {
    active.resize(std::size_t(B));
    for (int b = 0; b < B; ++b) active[std::size_t(b)] = b;
  }

  //! decode(tokens): every row takes one token.
  void check_decode(char const* who, std::size_t n_tokens) const {
    if (B == 0) throw value_error(msg(who, "::decode: call prefill first"));
    if (n_tokens != std::size_t(B)) throw shape_error(msg(who, "::decode: ", n_tokens, " tokens for ", B, " rows"));
  }

  //! Writes tokens[i] into slot 'filled' of row active[i], then counts the slot filled.
  void append(char const* who, std::span<std::int32_t const> tokens, int vocab_size) {
    if (filled >= S)
      throw value_error(msg(who, "::decode: the cache is full (", S, " slots); prefill with a larger max_new_tokens"));
    for (std::size_t i = 0; i < active.size(); ++i) {
      if (tokens[i] < 0 || tokens[i] >= vocab_size)
        throw value_error(msg(who, "::decode: token ", tokens[i], " for row ", active[i], " is outside the vocabulary [0, ",
                              vocab_size, ")"));
      std::size_t const at = std::size_t(active[i]) * S + filled;
      seq[at] = tokens[i];
      seq_valid[at] = 1;
    }
    ++filled;
  }

  //! Tokens and positions of slots [s0, s0 + n) of the running rows, row after row; a position is
  //! max(cumsum(mask) - 1, 0), so left padding does not shift a sequence. Consumes the slots'
  //! valid flags into n_valid (forget_positions() rewinds the running rows to slot 0).
  void gather(int s0, int n, std::int32_t* tok, std::int32_t* pos) {
    for (std::size_t i = 0; i < active.size(); ++i) {
      int const r = active[i];
      std::int32_t& nv = n_valid[std::size_t(r)];
      for (int k = 0; k < n; ++k) {
        std::size_t const at = std::size_t(r) * S + s0 + k;
        tok[i * std::size_t(n) + k] = seq[at];
        pos[i * std::size_t(n) + k] = seq_valid[at] ? nv++ : std::max(nv - 1, 0);
      }
    }
  }
  void forget_positions() {
    for (int r : active) n_valid[std::size_t(r)] = 0;
  }

  //! Drops the running rows whose token in next[] is EOS (next[i] belongs to active[i]);
  //! returns how many still run.
  std::size_t drop_finished(std::int32_t eos_id) {
    std::size_t keep = 0;
    for (std::size_t i = 0; i < active.size(); ++i)
      if (next[i] != eos_id) {
        active[keep] = active[i];
        next[keep] = next[i];
        ++keep;
      }
    active.resize(keep);
    next.resize(keep);
    return keep;
  }

  //! The empty result of generate: responses pad_id, mask and log-probs 0, all (B, R).
  RolloutResult empty_result(int R, std::int32_t pad_id) const {
    RolloutResult out;
    out.responses = Tensor::full(Shape{B, R}, pad_id);
    out.response_mask = Tensor::zeros(DType::int32, Shape{B, R});
    out.log_probs = Tensor::zeros(DType::float32, Shape{B, R});
    return out;
  }
};

//! The replicated tensors a replica's ranks share (RolloutEngine::share_replicated) and the count
//! of parts written into them, one per rank and load.
struct SharedReplicated {
  Tensor buf;
  std::atomic<std::uint64_t> written{0};
};

}  // namespace detail

//! Generation engine for the built-in GPT. Weights are a private copy (load_weights); the KV
//! cache and activations live in an own caching resource that sleep() hands back to the system.
//! With tp.size > 1 it holds TP rank tp.rank's shard and 'tp_comm' (the replica's TP group, of
//! size tp.size) sums the row-parallel outputs; every rank of the group must make the same calls.
//! verl: vLLMRollout.generate_sequences, sleep / wake_up, update_weights.
class RolloutEngine {
 public:
  explicit RolloutEngine(model::GPTConfig const& cfg, model::TPRank tp = {}, comm::Communicator* tp_comm = nullptr)
      : cfg_(cfg), lay_(cfg), shard_(cfg, tp, tp.size > 1 && cfg.vocab_size >= vocab_parallel_min_vocab), comm_(tp_comm) {
    if (comm_) set_tp_communicator(comm_);
    weights_ = Tensor::empty(DType::float32, Shape{static_cast<std::int64_t>(shard_.size())});
    if (tp.size == 1) {
      model::init_params(cfg_, weights_.span<float>());
    } else {
      Tensor full = Tensor::empty(DType::float32, Shape{static_cast<std::int64_t>(lay_.size())});
      model::init_params(cfg_, full.span<float>());
      shard_.load(full.span<float const>(), weights_.span<float>());
    }
    for (auto* b : buffers()) b->mr = &mr_;
    if (shard_.split_vocab()) head_ = LMHead::vocab_parallel;
  }
  RolloutEngine(RolloutEngine const&) = delete;
  RolloutEngine& operator=(RolloutEngine const&) = delete;

  model::GPTConfig const& config() const { return cfg_; }
  model::ParamLayout const& layout() const { return lay_; }
  //! This rank's parameter layout (equal to layout() when not tensor-parallel).
  model::ShardLayout const& shard_layout() const { return shard_; }
  model::TPRank tp() const { return shard_.shard(); }
  //! Sets the TP group's communicator (size tp().size, this rank at tp().rank); a TP engine needs
  //! one before its first prefill. A role may make it lazily, inside the first collective call.
  void set_tp_communicator(comm::Communicator* c) {
    model::TPRank const tp = shard_.shard();
    if (!c || c->size() != tp.size || c->rank() != tp.rank)
      throw config_error(msg(who, ": TP rank ", tp.rank, " of ", tp.size, " needs its TP group's communicator (size ", tp.size,
                             ", rank ", tp.rank, "); got ", c ? msg("size ", c->size(), ", rank ", c->rank()) : "none"));
    comm_ = c;
  }
  //! Chooses the LM head of a tensor-parallel engine (no effect at TP = 1). Every rank of the
  //! group must choose the same. Default: vocab_parallel when vocab_size >= vocab_parallel_min_vocab. vocab_parallel: prefill() and decode() return this rank's
  //! vocabulary slice (B, vocab_end() - vocab_begin()) of the logits; generate() gives the same
  //! tokens and log-probs (to rounding) as the replicated head and never gathers full logits
  //! (except top_p < 1 without top_k, whose nucleus needs every logit's rank: that case gathers).
  //! The vocabulary-parallel head holds wte's own rows only (ShardLayout with split_vocab), so a
  //! change of head cuts the weights again, locally: to vocab_parallel at any time (the rank keeps
  //! its rows), to replicated only before the first load (the seeded weights are cut again); never
  //! after share_replicated().
  void set_lm_head(LMHead h) {
    if (h == LMHead::vocab_parallel && cfg_.vocab_size < shard_.shard().size)
      throw config_error(msg(who, "::set_lm_head: a vocabulary-parallel head needs vocab_size (", cfg_.vocab_size,
                             ") >= the TP size (", shard_.shard().size, "); use LMHead::replicated"));
    bool const split = h == LMHead::vocab_parallel && shard_.shard().size > 1;
    if (split != shard_.split_vocab()) reshard(split);
    head_ = h;
  }
  LMHead lm_head() const { return head_; }
  //! This rank's vocabulary rows [vocab_begin(), vocab_end()) (all of them unless vocabulary-parallel).
  int vocab_begin() const { return shard_.vocab_begin(); }
  int vocab_end() const { return shard_.vocab_end(); }

  //! This rank's own weight buffer (ShardLayout order; the full model when not tensor-parallel).
  //! After share_replicated() its replicated tensors are no longer updated: see shard_weights().
  std::span<float const> weights() const { return weights_.span<float const>(); }

  //! Copies this rank's slice of a full flat parameter buffer (ParamLayout order) into the
  //! engine's weights, in place: one memcpy per contiguous run (ShardLayout::segments), so a TP
  //! rank copies its shard and the replicated tensors only. After share_replicated(), a collective
  //! of the TP group: after one barrier (no rank still reads the shared copy) each rank copies its
  //! split tensors and 1/N of the replicated ones into the replica's one shared copy and counts its
  //! part done, and returns; the next forward waits until every rank's part is there (see
  //! share_replicated). verl: update_weights (resharding).
  void load_weights(std::span<float const> flat) {
    if (flat.size() != lay_.size())
      throw shape_error(msg("rlflow::engine::RolloutEngine::load_weights: ", flat.size(), " floats for a model of ",
                            lay_.size(), " parameters; the trainer and the rollout must share one GPTConfig"));
    loaded_ = true;
    if (!shared_) {
      shard_.load(flat, weights_.span<float>());
      return;
    }
    begin_shared_load();
    float* own = weights_.data<float>();
    for (auto const& sg : shard_.split_segments()) std::memcpy(own + sg.dst, flat.data() + sg.src, sizeof(float) * sg.count);
    fill_replicated(flat.data(), true);
    end_shared_load();
  }

  //! Adds LoRA adapters into the loaded weights (W += s B A, model::lora_merge), as
  //! PagedEngine::merge_lora. TP 1 only. PEFT: merge_and_unload.
  void merge_lora(model::LoraLayout const& lay, std::span<float const> adapters) {
    if (shard_.shard().size > 1 || shared_)
      throw config_error(msg("rlflow::engine::RolloutEngine::merge_lora: LoRA adapters merge into a rollout of TP 1 only (this one "
                             "has TP ", shard_.shard().size, "); set actor_rollout_ref.rollout.tensor_model_parallel_size=1"));
    model::lora_merge(lay, adapters, weights_.span<float>());
  }
  //! As load_weights, from a buffer already in this rank's ShardLayout order (a training engine
  //! sharded like this rollout: same GPTConfig and TPRank), so no full copy of the model exists:
  //! one memcpy of the shard, or, after share_replicated(), a collective of the TP group (one
  //! barrier, as load_weights) copying the split tensors and 1/N of the replicated ones
  //! (those are identical on every rank of a training TP group). verl: update_weights when the
  //! training and rollout TP layouts coincide.
  void load_shard(std::span<float const> shard) {
    if (shard.size() != shard_.size())
      throw shape_error(msg("rlflow::engine::RolloutEngine::load_shard: ", shard.size(), " floats for TP rank ", tp().rank,
                            " of ", tp().size, " whose shard holds ", shard_.size(),
                            "; the training engine must be sharded with the same GPTConfig and TP size"));
    float* own = weights_.data<float>();
    loaded_ = true;
    if (!shared_) {
      std::memcpy(own, shard.data(), sizeof(float) * shard.size());
      return;
    }
    begin_shared_load();
    for (auto const& sg : shard_.split_segments()) std::memcpy(own + sg.dst, shard.data() + sg.dst, sizeof(float) * sg.count);
    fill_replicated(shard.data(), false);
    end_shared_load();
  }

  //! Collective of the TP group: the replica's ranks keep one copy of the replicated tensors
  //! (wte, wpe, layer norms, row-parallel biases) instead of one each, read in place by every
  //! rank (zero-copy). Needs a communicator whose ranks share memory (comm::LocalCommunicator);
  //! returns false and changes nothing otherwise (or at TP = 1).
  //! A weight sync into the shared copy takes one TP barrier, before the copies (no rank still
  //! reads the copy: an aborted barrier leaves every rank's weights as they were); instead of a
  //! second barrier after them, each rank counts its part written (one count per rank and load)
  //! and the next forward waits until the counts of this load are all there. In the Trainer they
  //! are by then (the ranks load in one group call and generate in the next), so that wait is a
  //! single atomic load.
  bool share_replicated() {
    if (shard_.shard().size == 1 || !comm_) return false;
    std::shared_ptr<void> mine;
    if (shard_.shard().rank == 0) {
      auto st = std::make_shared<detail::SharedReplicated>();
      st->buf = Tensor::empty(DType::float32, Shape{static_cast<std::int64_t>(std::max<std::size_t>(shard_.replicated_size(), 1))});
      mine = st;
    }
    std::shared_ptr<void> got = comm_->share(mine, 0);
    if (!got) return false;
    shared_ = std::static_pointer_cast<detail::SharedReplicated>(got);
    version_ = 0;
    rep_base_.clear();
    std::size_t c = 0;
    for (auto const& sg : shard_.replicated_segments()) {
      rep_base_.push_back(c);
      c += sg.count;
    }
    fill_replicated(weights_.data<float>(), false);  // the ranks' replicated tensors are identical
    comm_->barrier();
    return true;
  }
  bool shares_replicated() const { return shared_ != nullptr; }
  //! Where the replica's shared replicated tensors live (null unless share_replicated()); waits
  //! until every rank of the replica has written its part of the last load.
  float const* shared_replicated_data() const { return shared_ ? ready_replicated() : nullptr; }
  //! This rank's weights in ShardLayout order as the engine uses them (the replicated tensors
  //! from the shared copy after share_replicated(), once every rank has written its part).
  std::vector<float> shard_weights() const {
    auto w = weights_.span<float const>();
    std::vector<float> out(w.begin(), w.end());
    if (shared_) {
      float const* rep = ready_replicated();
      auto const rs = shard_.replicated_segments();
      for (std::size_t k = 0; k < rs.size(); ++k)
        std::memcpy(out.data() + rs[k].dst, rep + rep_base_[k], sizeof(float) * rs[k].count);
    }
    return out;
  }

  //! Releases the KV cache and all activations (colocation: give the memory to the trainer).
  void sleep() {
    for (auto* b : buffers()) b->release();
    mr_.release_cached();
    sleeping_ = true;
    book_.B = book_.S = book_.filled = 0;
  }
  //! Allows generation again; buffers are re-acquired lazily by the next generate().
  void wake() { sleeping_ = false; }
  bool is_sleeping() const { return sleeping_; }
  //! Bytes held by the cache and activations (weights excluded).
  std::size_t memory_bytes() const {
    std::size_t n = 0;
    for (auto* b : const_cast<RolloutEngine*>(this)->buffers()) n += b->bytes();
    return n;
  }

  //! false: recompute the whole sequence for every new token (the llm.c way); for benchmarks
  //! and tests. Tokens and log-probs are the same either way.
  void set_use_kv_cache(bool on) { use_cache_ = on; }

  //! Generates R = sp.max_new_tokens tokens for every row of prompt_ids (B, P) int32, left-padded
  //! (prompt_mask (B, P) int32, last column all ones). seeds (B): row b's tokens depend only on
  //! seeds[b], its prompt and the weights. verl: generate_sequences.
  RolloutResult generate(Tensor const& prompt_ids, Tensor const& prompt_mask, SamplingParams const& sp,
                         std::span<std::uint64_t const> seeds, GenerateControl const& ctl = {}) {
    sp.validate(cfg_.vocab_size);
    if (ctl.abort && vocab_parallel())
      throw value_error(msg(who, ": an abortable generation (partial rollout) needs the replicated LM head; TP ranks "
                                 "could stop at different tokens otherwise"));
    int const R = sp.max_new_tokens;
    prefill(prompt_ids, prompt_mask, R);
    int const B = book_.B, V = cfg_.vocab_size;
    int const Vs = sp.vocab_limit > 0 ? sp.vocab_limit : V;  // the ids sampled and scored: the row's first Vs logits
    if (seeds.size() != std::size_t(B))
      throw shape_error(msg("rlflow::engine::RolloutEngine::generate: ", seeds.size(), " seeds for ", B,
                            " prompts; pass one seed per row"));
    RolloutResult out = book_.empty_result(R, sp.pad_id);
    auto* resp = out.responses.data<std::int32_t>();
    auto* rmask = out.response_mask.data<std::int32_t>();
    auto* lp = out.log_probs.data<float>();
    float const inv_t = sp.temperature > 0.0f ? 1.0f / sp.temperature : 1.0f;
    idx_.resize(std::size_t(B) * V);
    w_.resize(std::size_t(B) * V);
    auto& active = book_.active;
    auto& next = book_.next;
    next.resize(std::size_t(B));
    // active (after prefill: every row) lists the rows whose logits sit in logits_ rows 0..n-1
    for (int j = 0; j < R; ++j) {
      int const n = static_cast<int>(active.size());
      float const* lg = logits_.t.data<float>();
      if (vocab_parallel()) {
        if (Vs < V) detail::mask_vocab_beyond(logits_.t.data<float>(), n, vocab_begin(), vocab_end(), Vs);
        sample_vocab_parallel(n, sp, seeds, std::uint64_t(j) + ctl.first_token);
        for (int i = 0; i < n; ++i) {
          int const r = active[std::size_t(i)];
          resp[std::size_t(r) * R + j] = next[std::size_t(i)];
          rmask[std::size_t(r) * R + j] = 1;
          lp[std::size_t(r) * R + j] = vp_lp_[std::size_t(i)];
        }
        if (j == R - 1) break;
        if (book_.drop_finished(sp.eos_id) == 0) break;
        step_rows(next);
        continue;
      }
      // per row: a sample (an exp per candidate) and its log-prob (two passes, an exp each): weighed x16
      RLFLOW_MODEL_OMP_FOR_IF(std::int64_t{n} * V * model::layers::exp_weight > model::layers::parallel_threshold)
      for (int i = 0; i < n; ++i) {
        int const r = active[std::size_t(i)];
        float const* row = lg + std::size_t(i) * V;
        std::int32_t const tok = sample_token(row, Vs, sp, seeds[std::size_t(r)], std::uint64_t(j) + ctl.first_token,
                                              idx_.data() + std::size_t(i) * V, w_.data() + std::size_t(i) * V);
        resp[std::size_t(r) * R + j] = tok;
        rmask[std::size_t(r) * R + j] = 1;
        lp[std::size_t(r) * R + j] = model::layers::logprob_forward_row(row, Vs, tok, inv_t).log_prob;
        next[std::size_t(i)] = tok;
      }
      out.generated = j + 1;
      if (j == R - 1) break;
      // drop the rows that just emitted EOS, then run one step for the rest
      if (book_.drop_finished(sp.eos_id) == 0) break;
      if (ctl.abort && ctl.abort->load(std::memory_order_acquire)) {
        out.unfinished.assign(active.begin(), active.end());
        break;
      }
      step_rows(next);
    }
    return out;
  }

  // ---- low-level API (tests, custom decoding loops) ----------------------------------------

  //! Resets the cache and runs the prompts (B, P); returns the logits (B, V) that predict the
  //! first new token. Reserves room for max_new_tokens more positions.
  std::span<float const> prefill(Tensor const& prompt_ids, Tensor const& prompt_mask, int max_new_tokens) {
    if (sleeping_) throw value_error("rlflow::engine::RolloutEngine: the engine is asleep; call wake() before generating");
    if (shard_.shard().size > 1 && !comm_)
      throw value_error(msg(who, ": TP rank ", shard_.shard().rank, " of ", shard_.shard().size,
                            " has no TP communicator; call set_tp_communicator first"));
    detail::DecodeBook::check_prompts(who, prompt_ids, prompt_mask, max_new_tokens, cfg_);
    book_.reset(prompt_ids, prompt_mask, max_new_tokens);
    int const B = book_.B, P = static_cast<int>(prompt_ids.dim(1));
    std::size_t const hs = std::size_t(cfg_.head_dim());
    int const kv_heads = shard_.local_kv_heads();
    kv_.ensure(std::size_t(cfg_.n_layer) * 2 * B * std::size_t(kv_heads) * book_.S * hs);
    if (cfg_.llama_family()) {
      if (inv_freq_.empty()) inv_freq_ = model::rope_inv_freq(cfg_);
      model::layers::rope_tables(rope_cos_, rope_sin_, inv_freq_, book_.S);
    }
    run(0, P);
    book_.filled = P;
    return {logits_.t.data<float>(), std::size_t(B) * std::size_t(vocab_end() - vocab_begin())};
  }

  //! Appends one token per row (B) and returns the next logits (B, V).
  std::span<float const> decode(std::span<std::int32_t const> tokens) {
    book_.check_decode(who, tokens.size());
    book_.run_all_rows();
    step_rows(tokens);
    return {logits_.t.data<float>(), std::size_t(book_.B) * std::size_t(vocab_end() - vocab_begin())};
  }

 private:
  std::vector<model::detail::grow_buffer*> buffers() {
    return {&kv_, &x_, &ln_, &qkv_, &atty_, &fch_, &probs_, &lnf_, &logits_, &part_, &act_};
  }

  // appends tokens[i] for rows book_.active[i] at slot book_.filled, then computes their next logits
  void step_rows(std::span<std::int32_t const> tokens) {
    book_.append(who, tokens, cfg_.vocab_size);
    if (use_cache_) {
      run(book_.filled - 1, 1);
    } else {  // the llm.c way: forget the cache, recompute slots [0, filled) of the running rows
      book_.forget_positions();
      run(0, book_.filled);
    }
  }

  // Forward of slots [s0, s0 + n) of the running rows (tokens from the book), writing their keys
  // and values into the cache; logits_ (|active|, V) get the last slot's next-token logits.
  // Tensor parallel: this rank's NH / tp heads (Cl = their width) and 4C / tp MLP columns; the
  // residual stream x is replicated, the two row-parallel products are summed over the TP group.
  // The Llama family: RMSNorm, q/k norm and RoPE at the rows' positions before the keys enter the
  // cache (so a cached key keeps its rotation), grouped KV heads (B, NKV, S, hd), SwiGLU; at TP the
  // rank's NKV / tp key/value heads (one replicated head when tp > NKV, as vLLM does).
  void run(int s0, int n) {
    if (shared_) cur_rep_ = ready_replicated();  // every rank's part of this version written
    bool const llama = cfg_.llama_family();
    int const C = cfg_.n_embd, NH = shard_.local_heads(), hs = cfg_.head_dim();
    int const Cl = shard_.local_embd(), F = shard_.local_ff();
    int const NKV = shard_.local_kv_heads(), G = NH / NKV;
    int const QKV = (NH + 2 * NKV) * hs;  // floats of a token's q|k|v row (3 Cl for GPT-2)
    bool const tp = shard_.shard().size > 1;
    auto const& active = book_.active;
    int const nr = static_cast<int>(active.size()), S = book_.S, B = book_.B;
    std::size_t const N = std::size_t(nr) * n;
    auto const& lay = shard_;
    tok_.resize(N);
    pos_.resize(N);
    book_.gather(s0, n, tok_.data(), pos_.data());
    float* fch = fch_.ensure(N * F * (llama ? 2 : 1));
    detail::RolloutLayerBuffers const buf{x_.ensure(N * C), ln_.ensure(N * C), qkv_.ensure(N * std::size_t(QKV)), atty_.ensure(N * Cl),
                                          fch, llama ? act_.ensure(N * F) : fch, tp ? part_.ensure(N * C) : nullptr};
    float* x = buf.x;
    float* ln = buf.ln;
    float* probs = probs_.ensure(N * std::size_t(NH) * S);
    float* kv = kv_.t.data<float>();
    std::size_t const head_stride = std::size_t(S) * hs, row_stride = std::size_t(NKV) * head_stride;
    std::size_t const layer_stride = 2 * std::size_t(B) * row_stride;
    float const scale = 1.0f / std::sqrt(static_cast<float>(hs));
    auto weights = [this](std::size_t off) { return at(off); };
    detail::rollout_embed(cfg_, shard_, comm_, weights, tok_.data(), pos_.data(), N, x);
    // the cache of layer l: (B, NKV, S, hs) keys then values, this rank's key/value heads
    auto store = [&](int l, float const* qkv, model::layers::QKVLayout const& ql) {
      float* kc = kv + std::size_t(l) * layer_stride;
      float* vc = kc + std::size_t(B) * row_stride;
      for (int i = 0; i < nr; ++i)
        for (int k = 0; k < n; ++k)
          for (int g = 0; g < NKV; ++g) {
            float const* src = qkv + (std::size_t(i) * n + k) * QKV;
            std::size_t const dst = std::size_t(active[std::size_t(i)]) * row_stride + g * head_stride + std::size_t(s0 + k) * hs;
            std::memcpy(kc + dst, src + ql.k(g * G), sizeof(float) * hs);
            std::memcpy(vc + dst, src + ql.v(g * G), sizeof(float) * hs);
          }
    };
    auto attend = [&](int l, float* atty, float const* qkv, model::layers::QKVLayout const& ql) {
      float const* kc = kv + std::size_t(l) * layer_stride;
      float const* vc = kc + std::size_t(B) * row_stride;
      RLFLOW_MODEL_OMP_FOR_IF(std::int64_t(N) * NH * (s0 + n) * hs > model::layers::parallel_threshold)
      for (std::int64_t q = 0; q < std::int64_t(N) * NH; ++q) {
        int const h = int(q % NH);
        std::size_t const tokn = std::size_t(q / NH);
        int const i = int(tokn / std::size_t(n)), k = int(tokn % std::size_t(n));
        int const r = active[std::size_t(i)];
        std::size_t const base = std::size_t(r) * row_stride + std::size_t(h / G) * head_stride;
        model::layers::attend_one(atty + tokn * Cl + std::size_t(h) * hs, probs + std::size_t(q) * S, qkv + tokn * QKV + ql.q(h),
                                  kc + base, hs, vc + base, hs, book_.seq_valid.data() + std::size_t(r) * S, s0 + k + 1, hs, scale);
      }
    };
    detail::rollout_layers(cfg_, shard_, comm_, weights, pos_.data(), N, buf, rope_cos_.data(), rope_sin_.data(),
                           /*one_row=*/false, store, attend);
    // final norm and the LM head (replicated; tied to wte unless the model has lm_head) on the
    // last slot of each row only
    float* last = lnf_.ensure(std::size_t(nr) * C);
    for (int i = 0; i < nr; ++i) std::memcpy(ln + std::size_t(i) * C, x + (std::size_t(i) * n + n - 1) * C, sizeof(float) * C);
    detail::rollout_norm(cfg_, weights, last, ln, lay.lnf_w, lay.lnf_b, nr);
    int const Vl = vocab_end() - vocab_begin();  // vocabulary-parallel: this rank's rows of wte (the ones it holds)
    detail::products_nt(false, logits_.ensure(std::size_t(nr) * Vl), last, at(lay.lm_head), nullptr, nr, C, Vl);
  }
  // at(off), or null for a tensor the model lacks (model::ParamLayout::none)
  float const* opt(std::size_t off) const { return off == model::ParamLayout::none ? nullptr : at(off); }

  //! The vocabulary-parallel head at TP > 1 (set_lm_head keeps the cut in step with the head).
  bool vocab_parallel() const { return shard_.split_vocab(); }

  // set_lm_head's new cut of the weights (model::recut_for_head): wte split by vocabulary rows
  // (the rank keeps its rows) or whole (the seeded weights cut again: nothing loaded yet).
  void reshard(bool split) {
    if (shared_)
      throw config_error(msg(who, "::set_lm_head: the LM head decides how wte is cut, and this TP rank already shares the "
                                  "replica's replicated tensors (share_replicated, the first generate of a TP role); choose the "
                                  "head before that"));
    if (!split && loaded_)
      throw config_error(msg(who, "::set_lm_head: TP rank ", tp().rank, " holds wte's vocabulary rows [", vocab_begin(), ", ",
                             vocab_end(), ") only and has loaded weights, so it cannot take the replicated head's whole wte; "
                             "choose the head before load_weights (actor_rollout_ref.model.lm_head)"));
    weights_ = model::recut_for_head(cfg_, shard_, weights_, split);
  }

  // The weights of the tensor at shard offset 'off': the rank's own buffer, or the replica's
  // shared copy for a replicated tensor after share_replicated().
  float const* at(std::size_t off) const {
    if (shared_) {
      auto const rs = shard_.replicated_segments();
      for (std::size_t k = 0; k < rs.size(); ++k)
        if (off >= rs[k].dst && off < rs[k].dst + rs[k].count) return cur_rep_ + rep_base_[k] + (off - rs[k].dst);
    }
    return weights_.data<float>() + off;
  }
  // The shared copy, once every rank has written its part of this rank's last load (version_
  // loads since share_replicated(); every rank that passed a load's barrier writes its part, so
  // the wait ends).
  float const* ready_replicated() const {
    std::uint64_t const want = std::uint64_t(shard_.shard().size) * version_;
    for (std::uint64_t w = shared_->written.load(std::memory_order_acquire); w < want;
         w = shared_->written.load(std::memory_order_acquire))
      shared_->written.wait(w, std::memory_order_acquire);
    return shared_->buf.data<float>();
  }
  // Before a load writes the shared copy: every rank has finished its forwards with the previous
  // weights (they called this load) and has written its part of the previous load (its barrier
  // comes after the previous load's writes), so nobody reads or writes the copy but this load.
  // An aborted barrier throws before version_ moves: no rank has written anything.
  void begin_shared_load() {
    comm_->barrier();
    ++version_;
  }
  void end_shared_load() {
    shared_->written.fetch_add(1, std::memory_order_acq_rel);
    shared_->written.notify_all();
  }
  // Writes this rank's part [R r / N, R (r + 1) / N) of the shared replicated copy (R floats in
  // replicated_segments() order) from 'base': a full buffer (from_full) or a shard buffer.
  void fill_replicated(float const* base, bool from_full) {
    std::size_t const R = shard_.replicated_size(), N = std::size_t(shard_.shard().size), r = std::size_t(shard_.shard().rank);
    std::size_t const a = R * r / N, b = R * (r + 1) / N;
    auto const rs = shard_.replicated_segments();
    float* dst = shared_->buf.data<float>();
    for (std::size_t k = 0; k < rs.size(); ++k) {
      std::size_t const c0 = rep_base_[k], c1 = c0 + rs[k].count;
      std::size_t const lo = std::max(a, c0), hi = std::min(b, c1);
      if (lo >= hi) continue;
      std::memcpy(dst + lo, base + (from_full ? rs[k].src : rs[k].dst) + (lo - c0), sizeof(float) * (hi - lo));
    }
  }

  // Vocabulary-parallel sampling of the n running rows from this rank's logit slice (n, Vl):
  // writes book_.next[i] and vp_lp_[i] (the log-prob under softmax(logits / T), T = 1 when greedy),
  // as generate() does with the replicated head (detail::VocabParallelSampler, shared with PagedEngine).
  void sample_vocab_parallel(int n, SamplingParams const& sp, std::span<std::uint64_t const> seeds, std::uint64_t step) {
    int const v0 = vocab_begin(), Vl = vocab_end() - v0;
    float const* lg = logits_.t.data<float>();
    vp_draws_.resize(std::size_t(n));
    for (int i = 0; i < n; ++i) {
      auto& d = vp_draws_[std::size_t(i)];
      d = {};
      d.row = lg + std::size_t(i) * Vl;
      d.sp = &sp;
      d.seed = seeds[std::size_t(book_.active[std::size_t(i)])];
      d.counter = step;
    }
    vp_.sample(*comm_, tp().rank, tp().size, v0, vocab_end(), cfg_.vocab_size, vp_draws_);
    vp_lp_.resize(std::size_t(n));
    for (int i = 0; i < n; ++i) {
      book_.next[std::size_t(i)] = vp_draws_[std::size_t(i)].tok;
      vp_lp_[std::size_t(i)] = vp_draws_[std::size_t(i)].logprob;
    }
  }

  model::GPTConfig cfg_;
  model::ParamLayout lay_;
  model::ShardLayout shard_;
  bool loaded_ = false;  //!< load_weights or load_shard has run (set_lm_head cannot cut wte whole again then)
  comm::Communicator* comm_ = nullptr;  //!< the TP group (tensor-parallel only)
  Tensor weights_;
  caching_host_resource mr_;
  model::detail::grow_buffer kv_, x_, ln_, qkv_, atty_, fch_, probs_, lnf_, logits_, part_, act_;
  std::vector<double> inv_freq_;            //!< the Llama family's RoPE inverse frequencies
  std::vector<float> rope_cos_, rope_sin_;  //!< (positions, hd / 2), grown to the cache's slots
  static constexpr char const* who = "rlflow::engine::RolloutEngine";
  detail::DecodeBook book_;
  bool sleeping_ = false, use_cache_ = true;
  LMHead head_ = LMHead::replicated;
  std::shared_ptr<detail::SharedReplicated> shared_;  //!< the replica's copy of the replicated tensors (share_replicated)
  std::uint64_t version_ = 0;                         //!< loads since share_replicated()
  float const* cur_rep_ = nullptr;                    //!< the current version's buffer, set by run()
  std::vector<std::size_t> rep_base_;                 //!< where each replicated segment starts in it
  // vocabulary-parallel sampling (its scratch reused across steps)
  detail::VocabParallelSampler vp_;
  std::vector<detail::VocabParallelDraw> vp_draws_;
  std::vector<float> vp_lp_;
  std::vector<std::int32_t> tok_, pos_, idx_;
  std::vector<double> w_;
};

}  // namespace rlflow::engine
