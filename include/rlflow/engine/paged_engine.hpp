// rlflow/engine/paged_engine.hpp: the paged, continuously batched rollout engine for the built-in
// GPT (GPT-2 and the Llama family) on the CPU: PagedCore's scheduler (paged_core.hpp) over a host
// block store, with the decoder stack of engine/rollout_layers.hpp reading and writing keys and
// values through the sequences' block tables, at any rollout TP and with either LM head.
// vLLM: LLMEngine with the v1 model runner (CPU); nano-vllm: nanovllm/engine/model_runner.py.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include <rlflow/comm/communicator.hpp>      // comm::Communicator (the TP group's all-reduce)
#include <rlflow/core/error.hpp>             // config_error, shape_error, value_error
#include <rlflow/core/tensor.hpp>
#include <rlflow/engine/block_pool.hpp>      // BlockPool
#include <rlflow/engine/paged_core.hpp>      // PagedCore, PagedEngineConfig, RequestParams, ...
#include <rlflow/engine/rollout_layers.hpp>  // the decoder stack both CPU rollout engines run
#include <rlflow/engine/vocab_parallel_sampling.hpp>  // the vocabulary-parallel head's sampling
#include <rlflow/model/gpt.hpp>              // GPTConfig, init_params, detail::grow_buffer
#include <rlflow/model/layers.hpp>           // the CPU layer functions
#include <rlflow/model/lora.hpp>             // LoraLayout, lora_merge
#include <rlflow/model/tensor_parallel.hpp>  // TPRank, ShardLayout

namespace rlflow::engine {

namespace detail {
//! One query against the first n_keys positions of a sequence whose keys and values sit in blocks:
//! the position j's key is kbase + table[j / bs] * block_stride + (j % bs) * hd (likewise vbase).
//! The arithmetic of layers::attend_one with every key valid, in the same order, so a paged and a
//! contiguous cache give the same bits.
RLFLOW_SIMD_CLONES inline void attend_paged(float* y, float const* q, float const* kbase, float const* vbase,
                                            int const* table, int bs, std::size_t block_stride, int n_keys, int hs, float scale) {
  float* fv = model::layers::detail::thread_scratch(3 * std::size_t(n_keys));
  float* bias = fv + n_keys;
  float* probs = bias + n_keys;
  for (int j = 0; j < n_keys; ++j) {
    fv[j] = 1.0f;
    bias[j] = 0.0f;
  }
  auto at = [&](float const* base, int j) {
    return base + std::size_t(table[j / bs]) * block_stride + std::size_t(j % bs) * std::size_t(hs);
  };
  for (int j = 0; j < n_keys; ++j) probs[j] = model::layers::dot(q, at(kbase, j), hs) * scale;
  model::layers::detail::masked_softmax(probs, fv, bias, n_keys);
  for (int d = 0; d < hs; ++d) y[d] = 0.0f;
  int j = 0;
  for (; j + 4 <= n_keys; j += 4) {
    float const p0 = probs[j], p1 = probs[j + 1], p2 = probs[j + 2], p3 = probs[j + 3];
    float const* v0 = at(vbase, j);
    float const* v1 = at(vbase, j + 1);
    float const* v2 = at(vbase, j + 2);
    float const* v3 = at(vbase, j + 3);
    for (int d = 0; d < hs; ++d) y[d] += (p0 * v0[d] + p1 * v1[d]) + (p2 * v2[d] + p3 * v3[d]);
  }
  for (; j < n_keys; ++j) {
    float const p = probs[j];
    float const* vj = at(vbase, j);
    for (int d = 0; d < hs; ++d) y[d] += p * vj[d];
  }
}

}  // namespace detail

//! The paged rollout engine on the CPU. Weights are a private copy (load_weights); the KV cache is
//! one block pool in host memory (taken on the first step, never zeroed: pages no block touched
//! stay unmapped). With tp.size > 1 it holds TP rank tp.rank's shard (its heads' share of every
//! block; the LM head replicated or split by vocabulary rows, as RolloutEngine: set_lm_head) and
//! 'tp_comm' sums the row-parallel outputs; every rank makes the same calls and gets the same
//! tokens. The communicator may come later (set_tp_communicator), before the first request.
//! Not thread-safe: one thread drives add_request / step / abort.
//! vLLM: LLMEngine (add_request, step, abort_request), LLM.generate; verl: vLLMRollout.
class PagedEngine : public PagedCore<PagedEngine> {
  using Core = PagedCore<PagedEngine>;
  friend Core;

 public:
  static constexpr char const* who = "rlflow::engine::PagedEngine";

  PagedEngine(model::GPTConfig const& cfg, PagedEngineConfig const& pc = {}, model::TPRank tp = {},
              comm::Communicator* tp_comm = nullptr)
      : Core(cfg, pc), lay_(cfg_), shard_(cfg_, tp, tp.size > 1 && cfg_.vocab_size >= vocab_parallel_min_vocab), comm_(tp_comm) {
    if (tp_comm) set_tp_communicator(tp_comm);
    weights_ = Tensor::empty(DType::float32, Shape{static_cast<std::int64_t>(shard_.size())});
    Tensor full = Tensor::empty(DType::float32, Shape{static_cast<std::int64_t>(lay_.size())});
    model::init_params(cfg_, full.span<float>());
    shard_.load(full.span<float const>(), weights_.span<float>());
    // the default budget: a quarter of the available memory, at most what max_num_seqs full-length sequences need
    BlockPool::Shape const s{cfg_.n_layer, shard_.local_kv_heads(), cfg_.head_dim(), pc_.block_size};
    std::size_t const need = full_budget_bytes(s), avail = detail::available_memory_bytes() / 4;
    init_pool(s, avail > 0 ? std::min(need, avail) : need);
    if (cfg_.llama_family()) model::layers::rope_tables(rope_cos_, rope_sin_, model::rope_inv_freq(cfg_), cfg_.max_seq_len);
    if (shard_.split_vocab()) head_ = model::LMHead::vocab_parallel;
  }

  //! Copies this rank's slice of a full flat parameter buffer (ParamLayout order) and drops the
  //! prefix cache (its keys and values are the old weights'). verl: update_weights.
  void load_weights(std::span<float const> flat) {
    if (flat.size() != lay_.size())
      throw shape_error(msg(who, "::load_weights: ", flat.size(), " floats for a model of ", lay_.size(),
                            " parameters; the trainer and the rollout must share one GPTConfig"));
    shard_.load(flat, weights_.span<float>());
    loaded_ = true;
    mutable_pool().reset_cache();
  }
  //! Adds LoRA adapters into the loaded weights (W += s B A, model::lora_merge): after
  //! load_weights of the base, the engine samples from base + adapters. Merging costs r in out
  //! multiply-adds per module once per sync, where applying the adapters on the fly would cost
  //! 2 r (in + out) per token and module (docs/trainer.md, LoRA). TP 1. PEFT: merge_and_unload.
  void merge_lora(model::LoraLayout const& lay, std::span<float const> adapters) {
    if (shard_.shard().size > 1)
      throw config_error(msg(who, "::merge_lora: LoRA adapters merge into a rollout of TP 1 only (this one has TP ",
                             shard_.shard().size, "); set actor_rollout_ref.rollout.tensor_model_parallel_size=1"));
    model::lora_merge(lay, adapters, weights_.span<float>());
    mutable_pool().reset_cache();
  }
  //! As load_weights, from a buffer already in this rank's ShardLayout order (a training engine
  //! sharded alike). verl: update_weights when the training and rollout layouts coincide.
  void load_shard(std::span<float const> shard) {
    if (shard.size() != shard_.size())
      throw shape_error(msg(who, "::load_shard: ", shard.size(), " floats for a shard of ", shard_.size(),
                            "; the training engine must share this rollout's GPTConfig and TP rank"));
    std::copy(shard.begin(), shard.end(), weights_.data<float>());
    loaded_ = true;
    mutable_pool().reset_cache();
  }
  //! This rank's weights (ShardLayout order; the full model when not tensor-parallel).
  std::span<float const> weights() const { return weights_.span<float const>(); }
  model::ShardLayout const& shard_layout() const { return shard_; }
  //! Gives a tensor-parallel engine its TP group's communicator (size tp.size, this rank at
  //! tp.rank), when the group is made after the engine (the roles split the mesh on the first
  //! generation). Required before the first request at tp.size > 1. RolloutEngine::set_tp_communicator.
  void set_tp_communicator(comm::Communicator* c) {
    model::TPRank const tp = shard_.shard();
    if (!c || c->size() != tp.size || c->rank() != tp.rank)
      throw config_error(msg(who, ": TP rank ", tp.rank, " of ", tp.size, " needs its TP group's communicator (size ", tp.size,
                             ", rank ", tp.rank, "); got ", c ? msg("size ", c->size(), ", rank ", c->rank()) : std::string("none")));
    comm_ = c;
  }
  //! Chooses the LM head of a tensor-parallel engine, as RolloutEngine::set_lm_head (no effect at
  //! TP = 1; every rank of the group chooses the same). Default: vocab_parallel when vocab_size >=
  //! vocab_parallel_min_vocab. vocab_parallel: the rank holds wte's rows [vocab_begin(),
  //! vocab_end()) only and computes their logits; the tokens and log-probs are RolloutEngine's with
  //! the same head (detail::VocabParallelSampler), the logits observer sees the rank's slice. The
  //! weights are cut again locally: to vocab_parallel at any time (the rank keeps its rows), to
  //! replicated only before the first load (the seeded weights are cut again); on an idle engine.
  void set_lm_head(model::LMHead h) {
    if (h == model::LMHead::vocab_parallel && cfg_.vocab_size < shard_.shard().size)
      throw config_error(msg(who, "::set_lm_head: a vocabulary-parallel head needs vocab_size (", cfg_.vocab_size,
                             ") >= the TP size (", shard_.shard().size, "); use LMHead::replicated"));
    bool const split = h == model::LMHead::vocab_parallel && shard_.shard().size > 1;
    if (split != shard_.split_vocab()) {
      if (has_unfinished())
        throw value_error(msg(who, "::set_lm_head: ", num_unfinished(), " requests are in flight; change the LM head on an idle engine"));
      if (!split && loaded_)
        throw config_error(msg(who, "::set_lm_head: TP rank ", shard_.shard().rank, " holds wte's vocabulary rows [", vocab_begin(),
                               ", ", vocab_end(), ") only and has loaded weights, so it cannot take the replicated head's whole "
                               "wte; choose the head before load_weights (actor_rollout_ref.model.lm_head)"));
      weights_ = model::recut_for_head(cfg_, shard_, weights_, split);
    }
    head_ = h;
  }
  model::LMHead lm_head() const { return head_; }
  //! This rank's vocabulary rows [vocab_begin(), vocab_end()) (all of them unless vocabulary-parallel).
  int vocab_begin() const { return shard_.vocab_begin(); }
  int vocab_end() const { return shard_.vocab_end(); }


  //! Releases the pool's storage and the activations (colocation); needs an idle engine. The next
  //! step() takes them again. verl: sleep / wake_up.
  void sleep() {
    if (has_unfinished()) throw value_error(msg(who, "::sleep: ", num_unfinished(), " requests are in flight; abort or finish them first"));
    kv_.reset();
    mutable_pool().reset_cache();  // the cached blocks' keys and values are gone
    for (auto* b : {&x_, &ln_, &qkv_, &atty_, &fch_, &act_, &part_, &lnf_, &logits_}) b->release();
    sleeping_ = true;
  }
  //! Allows generation again (the storage comes back lazily with the next step()).
  void wake() { sleeping_ = false; }
  bool is_sleeping() const { return sleeping_; }
  //! Whether the block pool's storage is allocated (from the first step until sleep()).
  bool has_kv_storage() const { return kv_ != nullptr; }
  //! Bytes held by the block pool's storage and the activations (weights excluded).
  std::size_t memory_bytes() const {
    std::size_t n = kv_ ? pool().bytes() : 0;
    for (auto const* b : {&x_, &ln_, &qkv_, &atty_, &fch_, &act_, &part_, &lnf_, &logits_}) n += b->bytes();
    return n;
  }

 private:
  // ---- PagedCore's hooks ----
  void check_ready(char const* where) const { require_comm(where); }
  void check_abortable() const {
    if (shard_.split_vocab())
      throw value_error(msg(who, "::generate: an abortable generation (partial rollout) needs the replicated LM head; TP ranks "
                                 "could stop at different steps otherwise (actor_rollout_ref.model.lm_head=replicated)"));
  }
  void check_positions(std::string const&, int) const {}  // max_seq_len is the only bound
  void copy_block(int from, int to) {
    std::memcpy(kv(to, 0, 0, 0), kv(from, 0, 0, 0), pool().shape().bytes_per_block());
  }
  void sample_draws() {
    if (shard_.split_vocab()) draw_vocab_parallel();
    else draw_host();
  }
  //! Keys (k = 0) or values (k = 1) of block b, layer l, KV head g: (block_size, hd) floats.
  float* kv(int b, int l, int k, int g) {
    if (!kv_) kv_.reset(new float[std::size_t(pool().num_blocks()) * pool().shape().floats_per_block()]);
    return kv_.get() + pool().offset(b, l, k, g);
  }

  //! A tensor-parallel engine runs only with its TP group's communicator.
  void require_comm(char const* where) const {
    model::TPRank const tp = shard_.shard();
    if (tp.size > 1 && !comm_)
      throw config_error(msg(who, "::", where, ": TP rank ", tp.rank, " of ", tp.size, " has no TP group communicator; pass it to "
                             "the constructor or call set_tp_communicator(c) (size ", tp.size, ", rank ", tp.rank, ") first"));
  }

  // every draw of the step under the vocabulary-parallel head, collectively over the TP group:
  // ids at or beyond a request's vocab_limit masked to -inf in its row (the siblings of a fork
  // share the row and the limit), then RolloutEngine's draw (detail::VocabParallelSampler)
  void draw_vocab_parallel() {
    int const v0 = vocab_begin(), v1 = vocab_end();
    vp_draws_.resize(draws_.size());
    vp_sp_.resize(draws_.size());
    for (std::size_t i = 0; i < draws_.size(); ++i) {
      Draw const& d = draws_[i];
      RequestParams const& p = d.s->req->p;
      if (p.vocab_limit > 0 && p.vocab_limit < cfg_.vocab_size) detail::mask_vocab_beyond(d.row, 1, v0, v1, p.vocab_limit);
      vp_sp_[i] = p.sampling();
      auto& q = vp_draws_[i];
      q = {};
      q.row = d.row;
      q.sp = &vp_sp_[i];
      q.min_p = p.min_p;
      q.seed = p.seed_of(d.s->k);
      q.counter = draw_counter(d);
    }
    vp_.sample(*comm_, shard_.shard().rank, shard_.shard().size, v0, v1, cfg_.vocab_size, vp_draws_);
    for (std::size_t i = 0; i < draws_.size(); ++i) {
      draws_[i].tok = vp_draws_[i].tok;
      draws_[i].logprob = vp_draws_[i].logprob;
    }
  }

  float const* at(std::size_t off) const { return weights_.data<float>() + off; }
  float const* opt(std::size_t off) const { return off == model::ParamLayout::none ? nullptr : at(off); }

  // One forward of every scheduled position: the layer loop of RolloutEngine::run over a flat
  // batch of N tokens (all sequences' chunks one after another), with keys and values written to
  // and read from the blocks. Returns the next-token logits of 'rows' (rows.size(), this rank's
  // vocabulary columns), or null when no row samples.
  float* forward(std::vector<Work> const& work, std::vector<Seq*> const& rows) {
    bool const llama = cfg_.llama_family();
    int const C = cfg_.n_embd, NH = shard_.local_heads(), hs = cfg_.head_dim();
    int const Cl = shard_.local_embd(), F = shard_.local_ff();
    int const NKV = shard_.local_kv_heads(), G = NH / NKV;
    int const QKV = (NH + 2 * NKV) * hs;
    int const bs = pc_.block_size;
    bool const tp = shard_.shard().size > 1;
    auto const& lay = shard_;
    std::size_t N = 0;
    for (auto const& w : work) N += std::size_t(w.count);
    tok_.resize(N);
    pos_.resize(N);
    seq_of_.resize(N);
    std::size_t t = 0;
    for (std::size_t wi = 0; wi < work.size(); ++wi)
      for (int k = 0; k < work[wi].count; ++k, ++t) {
        tok_[t] = work[wi].s->tokens[std::size_t(work[wi].start + k)];
        pos_[t] = work[wi].start + k;
        seq_of_[t] = int(wi);
      }
    tables_.resize(work.size());
    for (std::size_t wi = 0; wi < work.size(); ++wi) tables_[wi] = &work[wi].s->table.ids();
    float* fch = fch_.ensure(N * F * (llama ? 2 : 1));
    detail::RolloutLayerBuffers const buf{x_.ensure(N * C), ln_.ensure(N * C), qkv_.ensure(N * std::size_t(QKV)), atty_.ensure(N * Cl),
                                          fch, llama ? act_.ensure(N * F) : fch, tp ? part_.ensure(N * C) : nullptr};
    float* x = buf.x;
    float* ln = buf.ln;
    int max_keys = 0;
    for (auto const& w : work) max_keys = std::max(max_keys, w.start + w.count);
    float const scale = 1.0f / std::sqrt(static_cast<float>(hs));
    std::size_t const block_stride = pool().shape().floats_per_block();
    float* base = kv(0, 0, 0, 0);
    auto weights = [this](std::size_t off) { return at(off); };
    detail::rollout_embed(cfg_, shard_, comm_, weights, tok_.data(), pos_.data(), N, x);
    auto store = [&](int l, float const* qkv, model::layers::QKVLayout const& ql) {  // the new keys and values into their blocks
      for (std::size_t i = 0; i < N; ++i) {
        int const p = pos_[i];
        int const b = (*tables_[std::size_t(seq_of_[i])])[std::size_t(p / bs)];
        for (int g = 0; g < NKV; ++g) {
          float const* src = qkv + i * QKV;
          std::memcpy(kv(b, l, 0, g) + std::size_t(p % bs) * hs, src + ql.k(g * G), sizeof(float) * hs);
          std::memcpy(kv(b, l, 1, g) + std::size_t(p % bs) * hs, src + ql.v(g * G), sizeof(float) * hs);
        }
      }
    };
    auto attend = [&](int l, float* atty, float const* qkv, model::layers::QKVLayout const& ql) {
      std::size_t const head_off = std::size_t(bs) * hs;
      std::size_t const k_layer = std::size_t(l) * 2 * NKV * head_off, v_layer = k_layer + std::size_t(NKV) * head_off;
      RLFLOW_MODEL_OMP_FOR_IF(std::int64_t(N) * NH * max_keys * hs > model::layers::parallel_threshold)
      for (std::int64_t q = 0; q < std::int64_t(N) * NH; ++q) {
        int const h = int(q % NH);
        std::size_t const i = std::size_t(q / NH);
        int const g = h / G;
        std::vector<int> const& tbl = *tables_[std::size_t(seq_of_[i])];
        detail::attend_paged(atty + i * Cl + std::size_t(h) * hs, qkv + i * QKV + ql.q(h),
                             base + k_layer + std::size_t(g) * head_off, base + v_layer + std::size_t(g) * head_off, tbl.data(), bs,
                             block_stride, pos_[i] + 1, hs, scale);
      }
    };
    detail::rollout_layers(cfg_, shard_, comm_, weights, pos_.data(), N, buf, rope_cos_.data(), rope_sin_.data(), pc_.batch_invariant,
                           store, attend);
    // final norm and the LM head on the sampling rows only (each a work item's last position)
    int const nr = int(rows.size());
    if (nr == 0) return nullptr;
    float* last = lnf_.ensure(std::size_t(nr) * C);
    std::size_t off = 0, ri = 0;
    for (auto const& w : work) {
      off += std::size_t(w.count);
      if (ri < rows.size() && rows[ri] == w.s) std::memcpy(ln + ri++ * C, x + (off - 1) * C, sizeof(float) * C);
    }
    detail::rollout_norm(cfg_, weights, last, ln, lay.lnf_w, lay.lnf_b, nr);
    int const Vl = vocab_end() - vocab_begin();  // vocabulary-parallel: this rank's rows of the head
    float* lg = logits_.ensure(std::size_t(nr) * Vl);
    detail::products_nt(pc_.batch_invariant, lg, last, at(lay.lm_head), nullptr, nr, C, Vl);
    return lg;
  }


  model::ParamLayout lay_;
  model::ShardLayout shard_;
  comm::Communicator* comm_ = nullptr;
  Tensor weights_;
  std::unique_ptr<float[]> kv_;  // the block pool's storage: num_blocks * floats_per_block
  std::vector<float> rope_cos_, rope_sin_;
  model::detail::grow_buffer x_, ln_, qkv_, atty_, fch_, act_, part_, lnf_, logits_;
  bool sleeping_ = false;
  bool loaded_ = false;  // load_weights or load_shard has run (set_lm_head cannot cut wte whole again then)
  model::LMHead head_ = model::LMHead::replicated;
  detail::VocabParallelSampler vp_;
  std::vector<detail::VocabParallelDraw> vp_draws_;
  std::vector<SamplingParams> vp_sp_;
  std::vector<std::int32_t> tok_, pos_;
  std::vector<int> seq_of_;
  std::vector<std::vector<int> const*> tables_;
};

}  // namespace rlflow::engine
