// rlflow/engine/paged_engine.hpp: the paged, continuously batched rollout engine for the built-in
// GPT (GPT-2 and the Llama family) on the CPU. Defines PagedEngineConfig, RequestParams,
// SampleOutput, RequestOutput, PagedMetrics and PagedEngine: requests of token ids in, sampled
// tokens and their log-probs out; a KV cache of fixed-size blocks (block_pool.hpp) read through
// per-sequence block tables; the n samples of a request prefill their prompt once and share its
// blocks (copy on write of the last partial block); automatic prefix caching by block hash; a
// scheduler that admits waiting requests whenever blocks and max_num_seqs allow, splits long
// prefills into chunks bounded by max_num_batched_tokens, runs them in one batch with the decodes,
// and preempts (frees, later recomputes) the newest sequences when blocks run out.
// vLLM: LLMEngine / EngineCore.step, v1 Scheduler, KVCacheManager; nano-vllm: nanovllm/engine/
// {llm_engine,scheduler,block_manager,model_runner}.py. verl: the rollout's vLLM engine keys
// (enable_prefix_caching, enable_chunked_prefill, max_num_batched_tokens, max_num_seqs).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <rlflow/comm/communicator.hpp>      // comm::Communicator (the TP group's all-reduce)
#include <rlflow/core/error.hpp>             // config_error, shape_error, value_error
#include <rlflow/core/tensor.hpp>
#include <rlflow/engine/block_pool.hpp>      // BlockPool, BlockTable
#include <rlflow/engine/rollout_engine.hpp>  // RolloutResult, detail::DecodeBook::check_prompts
#include <rlflow/engine/rollout_layers.hpp>  // the decoder stack both CPU rollout engines run
#include <rlflow/engine/sampling.hpp>        // SamplingParams, sample_token
#include <rlflow/engine/vocab_parallel_sampling.hpp>  // the vocabulary-parallel head's sampling
#include <rlflow/model/gpt.hpp>              // GPTConfig, init_params, detail::grow_buffer
#include <rlflow/model/layers.hpp>           // the CPU layer functions
#include <rlflow/model/tensor_parallel.hpp>  // TPRank, ShardLayout

namespace rlflow::engine {

//! The engine's scheduling and cache keys (verl: actor_rollout_ref.rollout.*, vLLM's EngineArgs).
struct PagedEngineConfig {
  int block_size = 16;             //!< positions per KV block
  std::size_t kv_cache_bytes = 0;  //!< the block pool's budget; 0: a quarter of the available memory, at most what max_num_seqs full-length sequences need
  int max_num_seqs = 256;          //!< sequences (samples) running at once
  int max_num_batched_tokens = 8192;  //!< tokens (prefill chunks plus decodes) in one step
  bool enable_chunked_prefill = true;  //!< split a prefill across steps; off: a sequence prefills in one step
  bool enable_prefix_caching = true;   //!< reuse cached full blocks of an equal token prefix across requests
  //! Every matrix product one row at a time, so a position's numbers (keys, values, logits,
  //! log-probs) never depend on what is batched with it: a request's output is the same bits under
  //! any schedule, cache state or preemption, at the cost of the products' batching (BLAS rounds a
  //! row differently with the number of rows). Agent rollouts turn it on (their batches follow the
  //! tools' timing). vLLM: VLLM_BATCH_INVARIANT; SGLang: enable_deterministic_inference.
  bool batch_invariant = false;

  void validate() const {
    auto bad = [](char const* what, double v, char const* fix) {
      throw config_error(msg("rlflow::engine::PagedEngineConfig: ", what, " = ", v, " is invalid; ", fix));
    };
    if (block_size < 1 || block_size > 1024) bad("block_size", block_size, "use 1..1024 positions per block (16 is usual)");
    if (max_num_seqs < 1) bad("max_num_seqs", max_num_seqs, "run at least one sequence");
    if (max_num_batched_tokens < 1) bad("max_num_batched_tokens", max_num_batched_tokens, "schedule at least one token per step");
  }
};

//! How one request samples (vLLM's SamplingParams). Sample k (0 <= k < n) draws its i-th token with
//! philox(seed_of(k), first_token + i), as row k of RolloutEngine::generate given seeds_of() does.
struct RequestParams {
  int n = 1;                  //!< samples of the prompt (a GRPO group)
  float temperature = 1.0f;   //!< 0: greedy
  int top_k = 0;              //!< 0: no top-k filter
  float top_p = 1.0f;         //!< 1: no nucleus filter
  float min_p = 0.0f;         //!< drop tokens whose probability is below min_p times the most likely one's (0: off)
  int max_tokens = 16;        //!< the most tokens a sample generates
  std::vector<std::int32_t> stop_token_ids;  //!< a sample ends after emitting one of these (it is kept)
  std::uint64_t seed = 0;                    //!< sample k's seed is seed + k unless 'seeds' is given
  std::vector<std::uint64_t> seeds;          //!< one seed per sample (the trainer's per-row rollout_seed), or empty
  std::uint64_t first_token = 0;             //!< the counter of the first generated token (a resumed partial rollout passes its length)
  int vocab_limit = 0;                       //!< sample and score ids [0, vocab_limit) only (0: all)

  std::uint64_t seed_of(int k) const { return seeds.empty() ? seed + std::uint64_t(k) : seeds[std::size_t(k)]; }
  //! The static engine's view of the filters (for sample_token).
  SamplingParams sampling() const {
    SamplingParams sp;
    sp.temperature = temperature;
    sp.top_k = top_k;
    sp.top_p = top_p;
    sp.max_new_tokens = max_tokens;
    sp.vocab_limit = vocab_limit;
    return sp;
  }
  //! The request of a static-engine group: the same filters, max_tokens = R, stop at EOS, sample
  //! k seeded with seeds[k].
  static RequestParams from_static(SamplingParams const& sp, std::span<std::uint64_t const> seeds) {
    RequestParams p;
    p.n = int(seeds.size());
    p.temperature = sp.temperature;
    p.top_k = sp.top_k;
    p.top_p = sp.top_p;
    p.max_tokens = sp.max_new_tokens;
    if (sp.eos_id >= 0) p.stop_token_ids = {sp.eos_id};
    p.seeds.assign(seeds.begin(), seeds.end());
    p.vocab_limit = sp.vocab_limit;
    return p;
  }
};

enum class FinishReason { stop, length, abort };

//! One sample's result: its tokens (a stop token included) and each token's log-prob under
//! softmax(logits / T) (T = 1 when greedy), as RolloutEngine reports them.
struct SampleOutput {
  std::vector<std::int32_t> tokens;
  std::vector<float> logprobs;
  FinishReason finish = FinishReason::length;
};
struct RequestOutput {
  std::string request_id;
  std::vector<std::int32_t> prompt_ids;
  std::vector<SampleOutput> samples;  //!< n, in sample order
  bool aborted = false;
};

//! Counters since construction (or reset_metrics()) and the current state.
struct PagedMetrics {
  int num_blocks = 0, blocks_used = 0, peak_blocks_used = 0;
  std::size_t block_bytes = 0;  //!< one block, all layers
  int running = 0, waiting = 0;
  std::uint64_t preemptions = 0;
  std::uint64_t prefix_cache_queries = 0, prefix_cache_hits = 0;  //!< tokens looked up / found cached at admission
  std::uint64_t prompt_tokens_prefilled = 0;  //!< prompt positions computed (recomputation after preemption included)
  std::uint64_t generation_tokens = 0;        //!< tokens sampled
  std::uint64_t steps = 0, step_tokens = 0, max_step_tokens = 0, last_step_tokens = 0;
  double block_usage() const { return num_blocks ? double(blocks_used) / num_blocks : 0.0; }
  double prefix_cache_hit_rate() const { return prefix_cache_queries ? double(prefix_cache_hits) / double(prefix_cache_queries) : 0.0; }
  std::size_t peak_kv_bytes() const { return std::size_t(peak_blocks_used) * block_bytes; }
  //! The values under vLLM's metric names (without the 'vllm:' prefix) where vLLM has one, plus
  //! the pool's own: for a metrics logger.
  std::vector<std::pair<std::string, double>> named() const {
    return {{"num_requests_running", running},
            {"num_requests_waiting", waiting},
            {"kv_cache_usage_perc", block_usage()},
            {"num_preemptions", double(preemptions)},
            {"prefix_cache_queries", double(prefix_cache_queries)},
            {"prefix_cache_hits", double(prefix_cache_hits)},
            {"prefix_cache_hit_rate", prefix_cache_hit_rate()},
            {"prompt_tokens", double(prompt_tokens_prefilled)},
            {"generation_tokens", double(generation_tokens)},
            {"kv_cache_blocks", num_blocks},
            {"kv_cache_peak_bytes", double(peak_kv_bytes())}};
  }
};

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

//! Bytes of available memory (/proc/meminfo MemAvailable), 0 when unknown.
inline std::size_t available_memory_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  std::size_t kb = 0;
  std::string unit;
  while (f >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}
}  // namespace detail

//! The paged rollout engine. Weights are a private copy (load_weights); the KV cache is one block
//! pool. With tp.size > 1 it holds TP rank tp.rank's shard (its heads' share of every block; the
//! LM head replicated or split by vocabulary rows, as RolloutEngine: set_lm_head) and 'tp_comm'
//! sums the row-parallel outputs; every rank makes the same calls and gets the same tokens.
//! The communicator may come later (set_tp_communicator), before the first request.
//! Not thread-safe: one thread drives add_request / step / abort.
//! vLLM: LLMEngine (add_request, step, abort_request), LLM.generate; verl: vLLMRollout.
class PagedEngine {
 public:
  //! Called with each sampled token's logits row (its vocabulary, before filters; this rank's
  //! slice [vocab_begin(), vocab_end()) under the vocabulary-parallel head): tests and debugging.
  //! An exception thrown from it propagates out of step() (see step()).
  using LogitsObserver = std::function<void(std::string_view request_id, int sample, int index, std::span<float const> logits)>;

  PagedEngine(model::GPTConfig const& cfg, PagedEngineConfig const& pc = {}, model::TPRank tp = {},
              comm::Communicator* tp_comm = nullptr)
      : cfg_(cfg), pc_(pc), lay_(cfg), shard_(cfg, tp, tp.size > 1 && cfg.vocab_size >= vocab_parallel_min_vocab), comm_(tp_comm) {
    cfg_.validate();
    pc_.validate();
    if (tp_comm) set_tp_communicator(tp_comm);
    weights_ = Tensor::empty(DType::float32, Shape{static_cast<std::int64_t>(shard_.size())});
    Tensor full = Tensor::empty(DType::float32, Shape{static_cast<std::int64_t>(lay_.size())});
    model::init_params(cfg_, full.span<float>());
    shard_.load(full.span<float const>(), weights_.span<float>());
    BlockPool::Shape s{cfg_.n_layer, shard_.local_kv_heads(), cfg_.head_dim(), pc_.block_size};
    std::size_t bytes = pc_.kv_cache_bytes;
    if (bytes == 0) {
      std::size_t const per_seq = std::size_t((cfg_.max_seq_len + pc_.block_size - 1) / pc_.block_size) + 1;
      std::size_t const need = per_seq * std::size_t(pc_.max_num_seqs) * s.bytes_per_block();
      std::size_t const avail = detail::available_memory_bytes() / 4;
      bytes = avail > 0 ? std::min(need, avail) : need;
    }
    int const nb = BlockPool::blocks_for_bytes(s, bytes);
    if (nb < 1)
      throw config_error(msg(who, ": kv_cache_bytes = ", bytes, " holds no block of ", s.bytes_per_block(),
                             " bytes (block_size ", pc_.block_size, "); raise kv_cache_bytes or lower block_size"));
    pool_ = std::make_unique<BlockPool>(s, nb, pc_.enable_prefix_caching);
    if (cfg_.llama_family()) model::layers::rope_tables(rope_cos_, rope_sin_, model::rope_inv_freq(cfg_), cfg_.max_seq_len);
    metrics_.num_blocks = nb;
    metrics_.block_bytes = s.bytes_per_block();
    if (shard_.split_vocab()) head_ = model::LMHead::vocab_parallel;
  }
  PagedEngine(PagedEngine const&) = delete;
  PagedEngine& operator=(PagedEngine const&) = delete;
  ~PagedEngine() { abort_all(); }

  model::GPTConfig const& config() const { return cfg_; }
  PagedEngineConfig const& engine_config() const { return pc_; }
  //! PagedEngineConfig::batch_invariant, switched at any time (a request's tokens are the same
  //! bits under any schedule only while it is on).
  void set_batch_invariant(bool on) { pc_.batch_invariant = on; }
  BlockPool const& pool() const { return *pool_; }

  //! Copies this rank's slice of a full flat parameter buffer (ParamLayout order) and drops the
  //! prefix cache (its keys and values are the old weights'). verl: update_weights.
  void load_weights(std::span<float const> flat) {
    if (flat.size() != lay_.size())
      throw shape_error(msg(who, "::load_weights: ", flat.size(), " floats for a model of ", lay_.size(),
                            " parameters; the trainer and the rollout must share one GPTConfig"));
    shard_.load(flat, weights_.span<float>());
    loaded_ = true;
    pool_->reset_cache();
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
    pool_->reset_cache();
  }
  //! As load_weights, from a buffer already in this rank's ShardLayout order (a training engine
  //! sharded alike). verl: update_weights when the training and rollout layouts coincide.
  void load_shard(std::span<float const> shard) {
    if (shard.size() != shard_.size())
      throw shape_error(msg(who, "::load_shard: ", shard.size(), " floats for a shard of ", shard_.size(),
                            "; the training engine must share this rollout's GPTConfig and TP rank"));
    std::copy(shard.begin(), shard.end(), weights_.data<float>());
    loaded_ = true;
    pool_->reset_cache();
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
        throw value_error(msg(who, "::set_lm_head: ", reqs_.size(), " requests are in flight; change the LM head on an idle engine"));
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

  void set_logits_observer(LogitsObserver f) { observer_ = std::move(f); }

  //! Queues a request; its samples start on a later step(). Checks everything first: a unique id,
  //! tokens in the vocabulary, the sampling values, prompt + max_tokens within max_seq_len and
  //! within the pool (and within max_num_batched_tokens without chunked prefill), n <= max_num_seqs.
  void add_request(std::string request_id, std::vector<std::int32_t> prompt_ids, RequestParams params) {
    check_request(request_id, prompt_ids, params);
    auto r = std::make_unique<Request>();
    r->id = std::move(request_id);
    r->prompt = std::move(prompt_ids);
    r->p = std::move(params);
    r->seqs.resize(std::size_t(r->p.n));
    r->seqs[0] = make_seq(r.get(), 0);
    waiting_.push_back(r->seqs[0].get());
    std::string const id = r->id;
    reqs_.emplace(id, std::move(r));
  }

  //! Aborts a request wherever it is (waiting, running, partly finished) and frees its blocks;
  //! returns what its samples produced so far (finish = abort for the unfinished ones), or nothing
  //! for an unknown id.
  std::optional<RequestOutput> abort(std::string const& request_id) {
    auto it = reqs_.find(request_id);
    if (it == reqs_.end()) return std::nullopt;
    Request* r = it->second.get();
    drop_from_queues(r);
    RequestOutput out = output_of(*r);
    out.aborted = true;
    for (std::size_t k = 0; k < r->seqs.size(); ++k)
      if (!r->seqs[k] || !r->seqs[k]->done) out.samples[k].finish = FinishReason::abort;
    reqs_.erase(it);
    return out;
  }
  //! Aborts every request in flight (their outputs are dropped).
  void abort_all() {
    waiting_.clear();
    running_.clear();
    reqs_.clear();  // the sequences' block tables hand their blocks back
  }

  bool has_unfinished() const { return !reqs_.empty(); }
  std::size_t num_unfinished() const { return reqs_.size(); }

  //! One engine step: schedule (admit, chunk, preempt), one batched forward of every scheduled
  //! token, sampling of the sequences whose last token was computed. Returns the requests whose
  //! samples all finished in this step. An exception (a logits observer's, an allocation's) aborts
  //! every request in flight, so no block stays held, and propagates; the engine stays usable.
  std::vector<RequestOutput> step() {
    try {
      return step_impl();
    } catch (...) {
      abort_all();
      throw;
    }
  }

  //! Runs the prompts to completion on an idle engine: request i is prompt i with params[i] (or
  //! params[0] for all); returns the outputs in prompt order. verl: generate_sequences.
  std::vector<RequestOutput> generate(std::vector<std::vector<std::int32_t>> const& prompts, std::vector<RequestParams> const& params) {
    require_comm("generate");
    if (has_unfinished())
      throw value_error(msg(who, "::generate: ", reqs_.size(), " requests are in flight; generate() runs on an idle engine "
                                 "(drive step() yourself, or abort them first)"));
    if (params.size() != 1 && params.size() != prompts.size())
      throw shape_error(msg(who, "::generate: ", params.size(), " parameter sets for ", prompts.size(),
                            " prompts; pass one for all or one per prompt"));
    for (std::size_t i = 0; i < prompts.size(); ++i) check_request(std::to_string(i), prompts[i], params[params.size() == 1 ? 0 : i]);
    for (std::size_t i = 0; i < prompts.size(); ++i) add_request(std::to_string(i), prompts[i], params[params.size() == 1 ? 0 : i]);
    std::vector<RequestOutput> out(prompts.size());
    while (has_unfinished())
      for (auto& o : step()) {
        std::size_t const i = std::stoul(o.request_id);
        out[i] = std::move(o);
      }
    return out;
  }

  //! RolloutEngine::generate's contract on the paged engine (an idle one): left-padded prompts
  //! (B, P) int32 with their mask, one seed per row; returns (B, R) responses (pad_id after EOS),
  //! response mask and log-probs, row b's tokens those RolloutEngine gives it. Consecutive rows
  //! with the same prompt (verl's n samples, repeated interleaved) become one request of n
  //! samples, so their prompt is prefilled once. 'ctl' (partial rollout): ctl.first_token is the
  //! sampling counter of the first token; ctl.abort is checked after each step that sampled a
  //! token, and when set the call aborts what is left and returns: the rows still running are in
  //! RolloutResult::unfinished, their token counts (which may differ row to row) in
  //! unfinished_generated. verl: generate_sequences (abort_all_requests for ctl.abort).
  RolloutResult generate(Tensor const& prompt_ids, Tensor const& prompt_mask, SamplingParams const& sp,
                         std::span<std::uint64_t const> seeds, GenerateControl const& ctl = {}) {
    require_comm("generate");
    sp.validate(cfg_.vocab_size);
    if (ctl.abort && shard_.split_vocab())
      throw value_error(msg(who, "::generate: an abortable generation (partial rollout) needs the replicated LM head; TP ranks "
                                 "could stop at different steps otherwise (actor_rollout_ref.model.lm_head=replicated)"));
    detail::DecodeBook::check_prompts(who, prompt_ids, prompt_mask, sp.max_new_tokens, cfg_);
    int const B = static_cast<int>(prompt_ids.dim(0)), P = static_cast<int>(prompt_ids.dim(1)), R = sp.max_new_tokens;
    if (seeds.size() != std::size_t(B))
      throw shape_error(msg(who, "::generate: ", seeds.size(), " seeds for ", B, " prompts; pass one seed per row"));
    auto const* ids = prompt_ids.data<std::int32_t>();
    auto const* mask = prompt_mask.data<std::int32_t>();
    std::vector<std::vector<std::int32_t>> prompts;
    std::vector<RequestParams> params;
    std::vector<int> first_row;
    for (int b = 0; b < B; ++b) {
      std::vector<std::int32_t> row;
      for (int t = 0; t < P; ++t)
        if (mask[std::size_t(b) * P + t]) row.push_back(ids[std::size_t(b) * P + t]);
      if (!prompts.empty() && prompts.back() == row) {
        ++params.back().n;
        params.back().seeds.push_back(seeds[std::size_t(b)]);
        continue;
      }
      prompts.push_back(std::move(row));
      params.push_back(RequestParams::from_static(sp, seeds.subspan(std::size_t(b), 1)));
      params.back().first_token = ctl.first_token;
      first_row.push_back(b);
    }
    // a group wider than max_num_seqs: split into requests of at most max_num_seqs samples
    std::vector<std::vector<std::int32_t>> rq_prompts;
    std::vector<RequestParams> rq_params;
    std::vector<int> rq_row;
    for (std::size_t g = 0; g < prompts.size(); ++g) {
      RequestParams const& all = params[g];
      for (std::size_t k0 = 0; k0 < all.seeds.size(); k0 += std::size_t(pc_.max_num_seqs)) {
        RequestParams p = all;
        std::size_t const k1 = std::min(all.seeds.size(), k0 + std::size_t(pc_.max_num_seqs));
        p.seeds.assign(all.seeds.begin() + std::ptrdiff_t(k0), all.seeds.begin() + std::ptrdiff_t(k1));
        p.n = int(k1 - k0);
        rq_prompts.push_back(prompts[g]);
        rq_params.push_back(std::move(p));
        rq_row.push_back(first_row[g] + int(k0));
      }
    }
    std::vector<RequestOutput> outs;
    if (!ctl.abort) {
      outs = generate(rq_prompts, rq_params);
    } else {  // generate()'s loop, stopping at the abort flag
      if (has_unfinished())
        throw value_error(msg(who, "::generate: ", reqs_.size(), " requests are in flight; generate() runs on an idle engine"));
      for (std::size_t i = 0; i < rq_prompts.size(); ++i) check_request(std::to_string(i), rq_prompts[i], rq_params[i]);
      for (std::size_t i = 0; i < rq_prompts.size(); ++i) add_request(std::to_string(i), rq_prompts[i], rq_params[i]);
      outs.resize(rq_prompts.size());
      std::vector<char> finished(rq_prompts.size(), 0);
      while (has_unfinished()) {
        std::uint64_t const sampled = metrics_.generation_tokens;
        for (auto& o : step()) {
          std::size_t const i = std::stoul(o.request_id);
          finished[i] = 1;
          outs[i] = std::move(o);
        }
        if (has_unfinished() && metrics_.generation_tokens != sampled && ctl.abort->load()) {
          for (std::size_t i = 0; i < outs.size(); ++i)
            if (!finished[i]) outs[i] = *abort(std::to_string(i));
        }
      }
    }
    RolloutResult res;
    res.responses = Tensor::full(Shape{B, R}, sp.pad_id);
    res.response_mask = Tensor::zeros(DType::int32, Shape{B, R});
    res.log_probs = Tensor::zeros(DType::float32, Shape{B, R});
    auto* resp = res.responses.data<std::int32_t>();
    auto* rmask = res.response_mask.data<std::int32_t>();
    auto* lp = res.log_probs.data<float>();
    for (std::size_t q = 0; q < outs.size(); ++q)
      for (std::size_t k = 0; k < outs[q].samples.size(); ++k) {
        std::size_t const b = std::size_t(rq_row[q]) + k;
        auto const& s = outs[q].samples[k];
        for (std::size_t j = 0; j < s.tokens.size(); ++j) {
          resp[b * std::size_t(R) + j] = s.tokens[j];
          rmask[b * std::size_t(R) + j] = 1;
          lp[b * std::size_t(R) + j] = s.logprobs[j];
        }
        res.generated = std::max(res.generated, int(s.tokens.size()));
        if (s.finish == FinishReason::abort) {
          res.unfinished.push_back(int(b));
          res.unfinished_generated.push_back(int(s.tokens.size()));
        }
      }
    return res;
  }

  PagedMetrics metrics() const {
    PagedMetrics m = metrics_;
    m.blocks_used = pool_->num_used();
    m.running = int(running_.size());
    m.waiting = int(waiting_.size());
    return m;
  }
  void reset_metrics() {
    metrics_ = PagedMetrics{};
    metrics_.num_blocks = pool_->num_blocks();
    metrics_.block_bytes = pool_->shape().bytes_per_block();
    metrics_.peak_blocks_used = pool_->num_used();
  }

  //! Releases the pool's storage and the activations (colocation); needs an idle engine. The next
  //! step() takes them again. verl: sleep / wake_up.
  void sleep() {
    if (has_unfinished()) throw value_error(msg(who, "::sleep: ", reqs_.size(), " requests are in flight; abort or finish them first"));
    pool_->release_storage();
    for (auto* b : {&x_, &ln_, &qkv_, &atty_, &fch_, &act_, &part_, &lnf_, &logits_}) b->release();
    sleeping_ = true;
  }
  //! Allows generation again (the storage comes back lazily with the next step()).
  void wake() { sleeping_ = false; }
  bool is_sleeping() const { return sleeping_; }
  //! Bytes held by the block pool's storage and the activations (weights excluded).
  std::size_t memory_bytes() const {
    std::size_t n = pool_->has_storage() ? pool_->bytes() : 0;
    for (auto const* b : {&x_, &ln_, &qkv_, &atty_, &fch_, &act_, &part_, &lnf_, &logits_}) n += b->bytes();
    return n;
  }

 private:
  struct Request;
  struct Seq {
    Request* req = nullptr;
    int k = 0;
    std::vector<std::int32_t> tokens;  // prompt + generated
    std::vector<float> logprobs;
    int computed = 0;                    // positions whose keys and values are in the blocks
    BlockTable table;
    std::vector<std::uint64_t> hashes;   // hash chain of the full computed blocks
    bool done = false;
    FinishReason finish = FinishReason::length;
    int generated() const { return int(tokens.size() - req->prompt.size()); }
  };
  struct Request {
    std::string id;
    std::vector<std::int32_t> prompt;
    RequestParams p;
    std::vector<std::unique_ptr<Seq>> seqs;  // sample k; samples 1..n-1 exist once sample 0 prefilled the prompt
    bool forked = false;
    int finished = 0;
  };
  struct Work {
    Seq* s;
    int start, count;
  };

  std::unique_ptr<Seq> make_seq(Request* r, int k) {
    auto s = std::make_unique<Seq>();
    s->req = r;
    s->k = k;
    s->tokens = r->prompt;
    s->table = BlockTable(pool_.get());
    return s;
  }

  //! A tensor-parallel engine runs only with its TP group's communicator.
  void require_comm(char const* where) const {
    model::TPRank const tp = shard_.shard();
    if (tp.size > 1 && !comm_)
      throw config_error(msg(who, "::", where, ": TP rank ", tp.rank, " of ", tp.size, " has no TP group communicator; pass it to "
                             "the constructor or call set_tp_communicator(c) (size ", tp.size, ", rank ", tp.rank, ") first"));
  }

  void check_request(std::string const& id, std::vector<std::int32_t> const& prompt, RequestParams const& p) const {
    require_comm("add_request");
    if (reqs_.count(id)) throw value_error(msg(who, "::add_request: request id '", id, "' is already in flight; use a unique id"));
    int const V = cfg_.vocab_size, P = int(prompt.size());
    if (P < 1) throw shape_error(msg(who, "::add_request: request '", id, "' has an empty prompt; pass at least one token"));
    for (int t = 0; t < P; ++t)
      if (prompt[std::size_t(t)] < 0 || prompt[std::size_t(t)] >= V)
        throw value_error(msg(who, "::add_request: request '", id, "': token ", prompt[std::size_t(t)], " at position ", t,
                              " is outside the vocabulary [0, ", V, ")"));
    p.sampling().validate(V);
    if (p.n < 1 || p.n > pc_.max_num_seqs)
      throw config_error(msg(who, "::add_request: request '", id, "': n = ", p.n, " must be in [1, max_num_seqs = ", pc_.max_num_seqs,
                             "]; raise max_num_seqs or split the group"));
    if (!(p.min_p >= 0.0f && p.min_p <= 1.0f))
      throw config_error(msg(who, "::add_request: request '", id, "': min_p = ", p.min_p, " must be in [0, 1] (0 = off)"));
    if (!p.seeds.empty() && int(p.seeds.size()) != p.n)
      throw shape_error(msg(who, "::add_request: request '", id, "': ", p.seeds.size(), " seeds for n = ", p.n,
                            " samples; pass one per sample or none (then sample k uses seed + k)"));
    int const Vs = p.vocab_limit > 0 ? p.vocab_limit : V;
    for (auto t : p.stop_token_ids)
      if (t < 0 || t >= Vs)
        throw value_error(msg(who, "::add_request: request '", id, "': stop token ", t, " is outside the sampled vocabulary [0, ", Vs, ")"));
    int const total = P + p.max_tokens;
    if (total > cfg_.max_seq_len)
      throw shape_error(msg(who, "::add_request: request '", id, "': prompt ", P, " + max_tokens ", p.max_tokens, " = ", total,
                            " exceeds max_seq_len = ", cfg_.max_seq_len, "; shorten the prompt or max_tokens"));
    int const blocks = (total + pc_.block_size - 1) / pc_.block_size;
    if (blocks > pool_->num_blocks())
      throw config_error(msg(who, "::add_request: request '", id, "': one sample of ", total, " positions needs ", blocks,
                             " blocks of ", pc_.block_size, " and the pool holds ", pool_->num_blocks(), "; raise kv_cache_bytes"));
    if (!pc_.enable_chunked_prefill && total > pc_.max_num_batched_tokens)
      throw config_error(msg(who, "::add_request: request '", id, "': ", total, " positions exceed max_num_batched_tokens = ",
                             pc_.max_num_batched_tokens, " and chunked prefill is off (a preempted sample recomputes them in one "
                             "step); raise max_num_batched_tokens or enable_chunked_prefill"));
  }

  // sequences a running sample stands for in max_num_seqs: an unforked request's first sample
  // reserves its siblings' slots
  static int slots(Seq const* s) { return (s->k == 0 && !s->req->forked) ? s->req->p.n : 1; }
  int used_slots() const {
    int n = 0;
    for (Seq const* s : running_) n += slots(s);
    return n;
  }

  // blocks for positions [0, upto): new blocks past the table and a private copy of a shared
  // block about to be written; false (nothing changed) when the pool lacks them
  bool reserve_blocks(Seq* s, int upto) {
    int const bs = pc_.block_size;
    int const want = (upto + bs - 1) / bs;
    int const have = s->table.size();
    int const first = s->computed / bs;  // the block the next position goes into
    bool const cow = first < have && pool_->ref_count(s->table[first]) > 1;
    int const need = std::max(want - have, 0) + (cow ? 1 : 0);
    if (need > pool_->num_free()) return false;
    if (cow) s->table.copy_on_write(first);
    for (int b = have; b < want; ++b) s->table.push_allocated(pool_->allocate());
    metrics_.peak_blocks_used = std::max(metrics_.peak_blocks_used, pool_->num_used());
    return true;
  }

  void preempt(Seq* s) {  // free and recompute later; first in line again
    running_.erase(std::find(running_.begin(), running_.end(), s));
    s->table.clear();
    s->hashes.clear();
    s->computed = 0;
    waiting_.push_front(s);
    ++metrics_.preemptions;
  }

  void drop_from_queues(Request* r) {
    auto mine = [r](Seq* s) { return s->req == r; };
    running_.erase(std::remove_if(running_.begin(), running_.end(), mine), running_.end());
    waiting_.erase(std::remove_if(waiting_.begin(), waiting_.end(), mine), waiting_.end());
  }

  RequestOutput output_of(Request const& r) const {
    RequestOutput o;
    o.request_id = r.id;
    o.prompt_ids = r.prompt;
    o.samples.resize(std::size_t(r.p.n));
    for (std::size_t k = 0; k < r.seqs.size(); ++k) {
      Seq const* s = r.seqs[k].get();
      if (!s) continue;
      o.samples[k].tokens.assign(s->tokens.begin() + std::ptrdiff_t(r.prompt.size()), s->tokens.end());
      o.samples[k].logprobs = s->logprobs;
      o.samples[k].finish = s->finish;
    }
    return o;
  }

  std::vector<Work> schedule() {
    std::vector<Work> work;
    int budget = pc_.max_num_batched_tokens;
    bool preempted = false;
    // running sequences first (decodes and unfinished prefill chunks), oldest first
    for (std::size_t i = 0; i < running_.size() && budget > 0;) {
      Seq* s = running_[i];
      int const cnt = std::min(int(s->tokens.size()) - s->computed, budget);
      bool fits = true;
      while (!reserve_blocks(s, s->computed + cnt)) {
        preempted = true;
        Seq* victim = running_.back();
        preempt(victim);
        if (victim == s) {
          fits = false;
          break;
        }
      }
      if (!fits) break;  // s was the last running sequence and went back to waiting
      work.push_back({s, s->computed, cnt});
      budget -= cnt;
      ++i;
    }
    // then waiting ones, in order, while slots, blocks and the token budget allow
    int used = used_slots();
    while (!preempted && budget > 0 && !waiting_.empty()) {
      Seq* s = waiting_.front();
      if (used + slots(s) > pc_.max_num_seqs) break;
      int const bs = pc_.block_size, len = int(s->tokens.size());
      // automatic prefix caching: full blocks of an equal prefix, always leaving a position to compute
      std::uint64_t parent = 0;
      for (int j = 0; (j + 1) * bs <= len - 1; ++j) {
        std::span<std::int32_t const> blk(s->tokens.data() + std::size_t(j) * bs, std::size_t(bs));
        std::uint64_t const h = BlockPool::hash_tokens(parent, blk);
        int const b = pool_->lookup(h, blk);
        if (b < 0) break;
        s->table.push_shared(b);
        s->hashes.push_back(h);
        parent = h;
      }
      s->computed = s->table.size() * bs;
      int const need = len - s->computed;
      int const cnt = std::min(need, budget);
      if ((!pc_.enable_chunked_prefill && cnt < need) || !reserve_blocks(s, s->computed + cnt)) {
        s->table.clear();
        s->hashes.clear();
        s->computed = 0;
        break;
      }
      metrics_.prefix_cache_queries += std::uint64_t(len);
      metrics_.prefix_cache_hits += std::uint64_t(s->computed);
      waiting_.pop_front();
      running_.push_back(s);
      used += slots(s);
      work.push_back({s, s->computed, cnt});
      budget -= cnt;
    }
    return work;
  }

  std::vector<RequestOutput> step_impl() {
    std::vector<RequestOutput> out;
    if (reqs_.empty()) return out;
    std::vector<Work> work = schedule();
    if (work.empty())
      throw value_error(msg(who, "::step: nothing could be scheduled (", waiting_.size(), " waiting, ", pool_->num_free(), " of ",
                            pool_->num_blocks(), " blocks free); raise kv_cache_bytes or max_num_batched_tokens"));
    std::uint64_t tokens = 0;
    for (auto const& w : work) {
      tokens += std::uint64_t(w.count);
      int const P = int(w.s->req->prompt.size());
      if (w.start < P) metrics_.prompt_tokens_prefilled += std::uint64_t(std::min(P, w.start + w.count) - w.start);
    }
    ++metrics_.steps;
    metrics_.step_tokens += tokens;
    metrics_.last_step_tokens = tokens;
    metrics_.max_step_tokens = std::max(metrics_.max_step_tokens, tokens);
    // the sequences whose last position is computed now sample a token
    std::vector<Seq*> rows;
    for (auto const& w : work)
      if (w.start + w.count == int(w.s->tokens.size())) rows.push_back(w.s);
    forward(work, rows);
    for (auto const& w : work) {
      w.s->computed += w.count;
      cache_full_blocks(w.s);
    }
    int const V = vocab_end() - vocab_begin();  // this rank's logits per row (all V unless vocabulary-parallel)
    float* lg = rows.empty() ? nullptr : logits_.t.data<float>();
    // the draws of this step: each sampling row, and for a request whose prompt just finished
    // prefilling, all n samples from its one row (the siblings take the prompt's blocks)
    draws_.clear();
    for (std::size_t i = 0; i < rows.size(); ++i) {
      Seq* s = rows[i];
      Request* r = s->req;
      if (s->k == 0 && r->p.n > 1 && !r->forked) {
        r->forked = true;
        for (int k = 1; k < r->p.n; ++k) {
          auto c = make_seq(r, k);
          c->table = s->table.share();
          c->hashes = s->hashes;
          c->computed = s->computed;
          running_.push_back(c.get());
          r->seqs[std::size_t(k)] = std::move(c);
        }
        for (int k = 0; k < r->p.n; ++k) draws_.push_back({r->seqs[std::size_t(k)].get(), lg + i * std::size_t(V)});
      } else {
        draws_.push_back({s, lg + i * std::size_t(V)});
      }
    }
    if (observer_)
      for (auto const& d : draws_) observer_(d.s->req->id, d.s->k, d.s->generated(), std::span<float const>(d.row, std::size_t(V)));
    int const nd = int(draws_.size());
    if (shard_.split_vocab()) {
      draw_vocab_parallel();
    } else {
      // per draw: a sample (an exp per candidate) and its log-prob (two passes, an exp each): weighed as RolloutEngine does
      RLFLOW_MODEL_OMP_FOR_IF(std::int64_t{nd} * V * model::layers::exp_weight > model::layers::parallel_threshold)
      for (int i = 0; i < nd; ++i) draw(draws_[std::size_t(i)]);
    }
    std::vector<Seq*> finished;
    for (auto const& d : draws_)
      if (record(d)) finished.push_back(d.s);
    for (Seq* s : finished) {
      s->done = true;
      s->table.clear();
      running_.erase(std::find(running_.begin(), running_.end(), s));
      Request* r = s->req;
      if (++r->finished == r->p.n) {
        out.push_back(output_of(*r));
        std::string const id = r->id;
        reqs_.erase(id);
      }
    }
    return out;
  }

  // registers the blocks that became full of computed positions under their hash chain
  void cache_full_blocks(Seq* s) {
    if (!pool_->caching()) return;
    int const bs = pc_.block_size;
    for (int j = int(s->hashes.size()); (j + 1) * bs <= s->computed; ++j) {
      std::span<std::int32_t const> blk(s->tokens.data() + std::size_t(j) * bs, std::size_t(bs));
      std::uint64_t const h = BlockPool::hash_tokens(j == 0 ? 0 : s->hashes.back(), blk);
      pool_->cache(s->table[j], h, blk);
      s->hashes.push_back(h);
    }
  }

  struct Draw {
    Seq* s;
    float* row;  // its logits (V, or this rank's slice under the vocabulary-parallel head)
    std::int32_t tok = 0;
    float logprob = 0;
  };
  // samples d.s's next token from d.row (thread-safe: reads the engine and the sequence, writes d)
  void draw(Draw& d) const {
    RequestParams const& p = d.s->req->p;
    int const Vs = p.vocab_limit > 0 ? p.vocab_limit : cfg_.vocab_size;
    thread_local std::vector<std::int32_t> idx;
    thread_local std::vector<double> w;
    thread_local std::vector<float> filt;
    idx.resize(std::size_t(Vs));
    w.resize(std::size_t(Vs));
    float const* src = d.row;
    if (p.min_p > 0.0f && p.temperature > 0.0f) {  // min-p: drop ids with p < min_p * p_max
      filt.assign(d.row, d.row + Vs);
      float m = -INFINITY;
      for (int v = 0; v < Vs; ++v) m = std::max(m, filt[std::size_t(v)]);
      double const cut = double(m) + double(p.temperature) * std::log(double(p.min_p));
      for (int v = 0; v < Vs; ++v)
        if (double(filt[std::size_t(v)]) < cut) filt[std::size_t(v)] = -INFINITY;
      src = filt.data();
    }
    std::uint64_t const counter = p.first_token + std::uint64_t(d.s->generated());
    d.tok = sample_token(src, Vs, p.sampling(), p.seed_of(d.s->k), counter, idx.data(), w.data());
    float const inv_t = p.temperature > 0.0f ? 1.0f / p.temperature : 1.0f;
    d.logprob = model::layers::logprob_forward_row(d.row, Vs, d.tok, inv_t).log_prob;
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
      q.counter = p.first_token + std::uint64_t(d.s->generated());
    }
    vp_.sample(*comm_, shard_.shard().rank, shard_.shard().size, v0, v1, cfg_.vocab_size, vp_draws_);
    for (std::size_t i = 0; i < draws_.size(); ++i) {
      draws_[i].tok = vp_draws_[i].tok;
      draws_[i].logprob = vp_draws_[i].logprob;
    }
  }
  // appends a drawn token; true when its sequence finished
  bool record(Draw const& d) {
    Seq* s = d.s;
    RequestParams const& p = s->req->p;
    s->tokens.push_back(d.tok);
    s->logprobs.push_back(d.logprob);
    ++metrics_.generation_tokens;
    if (std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), d.tok) != p.stop_token_ids.end()) {
      s->finish = FinishReason::stop;
      return true;
    }
    if (s->generated() >= p.max_tokens) {
      s->finish = FinishReason::length;
      return true;
    }
    return false;
  }

  float const* at(std::size_t off) const { return weights_.data<float>() + off; }
  float const* opt(std::size_t off) const { return off == model::ParamLayout::none ? nullptr : at(off); }

  // One forward of every scheduled position: the layer loop of RolloutEngine::run over a flat
  // batch of N tokens (all sequences' chunks one after another), with keys and values written to
  // and read from the blocks. logits_ (rows.size(), V) get the next-token logits of 'rows'.
  void forward(std::vector<Work> const& work, std::vector<Seq*> const& rows) {
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
    std::size_t const block_stride = pool_->shape().floats_per_block();
    float* base = pool_->kv(0, 0, 0, 0);
    auto weights = [this](std::size_t off) { return at(off); };
    detail::rollout_embed(cfg_, shard_, comm_, weights, tok_.data(), pos_.data(), N, x);
    auto store = [&](int l, float const* qkv, model::layers::QKVLayout const& ql) {  // the new keys and values into their blocks
      for (std::size_t i = 0; i < N; ++i) {
        int const p = pos_[i];
        int const b = (*tables_[std::size_t(seq_of_[i])])[std::size_t(p / bs)];
        for (int g = 0; g < NKV; ++g) {
          float const* src = qkv + i * QKV;
          std::memcpy(pool_->kv(b, l, 0, g) + std::size_t(p % bs) * hs, src + ql.k(g * G), sizeof(float) * hs);
          std::memcpy(pool_->kv(b, l, 1, g) + std::size_t(p % bs) * hs, src + ql.v(g * G), sizeof(float) * hs);
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
    if (nr == 0) return;
    float* last = lnf_.ensure(std::size_t(nr) * C);
    std::size_t off = 0, ri = 0;
    for (auto const& w : work) {
      off += std::size_t(w.count);
      if (ri < rows.size() && rows[ri] == w.s) std::memcpy(ln + ri++ * C, x + (off - 1) * C, sizeof(float) * C);
    }
    detail::rollout_norm(cfg_, weights, last, ln, lay.lnf_w, lay.lnf_b, nr);
    int const Vl = vocab_end() - vocab_begin();  // vocabulary-parallel: this rank's rows of the head
    detail::products_nt(pc_.batch_invariant, logits_.ensure(std::size_t(nr) * Vl), last, at(lay.lm_head), nullptr, nr, C, Vl);
  }

  static constexpr char const* who = "rlflow::engine::PagedEngine";
  model::GPTConfig cfg_;
  PagedEngineConfig pc_;
  model::ParamLayout lay_;
  model::ShardLayout shard_;
  comm::Communicator* comm_ = nullptr;
  Tensor weights_;
  std::unique_ptr<BlockPool> pool_;  // before the requests: their block tables release into it
  std::unordered_map<std::string, std::unique_ptr<Request>> reqs_;
  std::deque<Seq*> waiting_;
  std::vector<Seq*> running_;  // admission order: the newest are preempted first
  PagedMetrics metrics_;
  LogitsObserver observer_;
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
  std::vector<Draw> draws_;
};

}  // namespace rlflow::engine
