// rlflow/engine/paged_core.hpp: what the paged, continuously batched rollout engines share,
// whatever runs their forward: the request API (RequestParams, RequestOutput, PagedMetrics,
// PagedEngineConfig) and PagedCore, the scheduler and bookkeeping of requests, samples, block
// tables and the prefix cache. The n samples of a request prefill their prompt once and share its
// blocks (copy on write of the last partial block); full blocks are cached by hash across
// requests; waiting requests are admitted whenever blocks and max_num_seqs allow, long prefills
// split into chunks bounded by max_num_batched_tokens run in one batch with the decodes, and the
// newest sequences are preempted (freed, later recomputed) when blocks run out. Sampling runs on
// the host from each step's logits rows (sample_token: the static engines' draws). The engines
// derive from PagedCore (CRTP) and supply the block storage and the forward: the CPU's
// engine::PagedEngine (paged_engine.hpp) and the GPU's engine::cuda::PagedEngine
// (cuda/paged_engine.cuh).
// vLLM: LLMEngine / EngineCore.step, v1 Scheduler, KVCacheManager; nano-vllm: nanovllm/engine/
// {llm_engine,scheduler,block_manager}.py. verl: the rollout's vLLM engine keys
// (enable_prefix_caching, enable_chunked_prefill, max_num_batched_tokens, max_num_seqs).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
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

#include <rlflow/core/error.hpp>             // config_error, shape_error, value_error
#include <rlflow/core/tensor.hpp>
#include <rlflow/engine/block_pool.hpp>      // BlockPool, BlockTable
#include <rlflow/engine/rollout_engine.hpp>  // RolloutResult, GenerateControl, detail::DecodeBook::check_prompts
#include <rlflow/engine/sampling.hpp>        // SamplingParams, sample_token
#include <rlflow/model/gpt.hpp>              // GPTConfig
#include <rlflow/model/layers.hpp>           // logprob_forward_row, RLFLOW_MODEL_OMP_FOR_IF

namespace rlflow::engine {

//! The engine's scheduling and cache keys (verl: actor_rollout_ref.rollout.*, vLLM's EngineArgs).
struct PagedEngineConfig {
  int block_size = 16;             //!< positions per KV block
  std::size_t kv_cache_bytes = 0;  //!< the block pool's budget; 0: derived (the engine's share of memory, at most what max_num_seqs sequences of planned_seq_len positions need)
  //! The positions a sequence is planned to hold when the default budget is derived (0: the
  //! model's max_seq_len); the trainer passes prompt + response length (verl's max_model_len rule).
  //! It sizes the pool only: a longer request (up to max_seq_len) still runs.
  int planned_seq_len = 0;
  int max_num_seqs = 256;          //!< sequences (samples) running at once
  int max_num_batched_tokens = 8192;  //!< tokens (prefill chunks plus decodes) in one step
  bool enable_chunked_prefill = true;  //!< split a prefill across steps; off: a sequence prefills in one step
  bool enable_prefix_caching = true;   //!< reuse cached full blocks of an equal token prefix across requests
  //! Every matrix product sums each row on its own (model/stable_products.hpp, or one BLAS call
  //! per row), so a position's numbers (keys, values, logits, log-probs) never depend on what is
  //! batched with it: a request's output is the same bits under any schedule, cache state or
  //! preemption (BLAS rounds a row differently with the number of rows). Agent rollouts turn it on (their batches follow the
  //! tools' timing). vLLM: VLLM_BATCH_INVARIANT; SGLang: enable_deterministic_inference.
  bool batch_invariant = false;

  void validate() const {
    auto bad = [](char const* what, double v, char const* fix) {
      throw config_error(msg("rlflow::engine::PagedEngineConfig: ", what, " = ", v, " is invalid; ", fix));
    };
    if (block_size < 1 || block_size > 1024) bad("block_size", block_size, "use 1..1024 positions per block (16 is usual)");
    if (max_num_seqs < 1) bad("max_num_seqs", max_num_seqs, "run at least one sequence");
    if (max_num_batched_tokens < 1) bad("max_num_batched_tokens", max_num_batched_tokens, "schedule at least one token per step");
    if (planned_seq_len < 0) bad("planned_seq_len", planned_seq_len, "use the positions a sequence holds, or 0 for the model's max_seq_len");
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

//! The scheduler and request bookkeeping of a paged rollout engine 'Derived', which supplies:
//!   static constexpr char const* who;                 its name in messages
//!   float* forward(std::vector<Work> const&, std::vector<Seq*> const& rows);
//!       computes every scheduled position (keys and values into their blocks) and returns the
//!       logits (rows.size(), vocab_end() - vocab_begin()) of the sampling rows: on the host
//!       while observing(), else wherever sample_draws() reads them (PagedCore only offsets them)
//!   void copy_block(int from, int to);                a block's keys and values (copy on write)
//!   void sample_draws();                              fills draws_ (draw_host(), collectively, or on a device)
//!   void check_ready(char const* where) const;        throws when the engine cannot run yet
//!   void check_abortable() const;                     throws when generate() cannot stop early
//!   void check_positions(std::string const& id, int total) const;
//!                                                     throws when a sample of 'total' positions cannot run
//!   int vocab_begin() const, vocab_end() const;       the logits columns this engine computes
//! and calls init_pool() from its constructor. Not thread-safe: one thread drives add_request /
//! step / abort.
template <class Derived>
class PagedCore {
 public:
  //! Called with each sampled token's logits row (its vocabulary, before filters; this rank's
  //! slice [vocab_begin(), vocab_end()) under the vocabulary-parallel head): tests and debugging.
  //! An exception thrown from it propagates out of step() (see step()).
  using LogitsObserver = std::function<void(std::string_view request_id, int sample, int index, std::span<float const> logits)>;

  PagedCore(PagedCore const&) = delete;
  PagedCore& operator=(PagedCore const&) = delete;

  model::GPTConfig const& config() const { return cfg_; }
  PagedEngineConfig const& engine_config() const { return pc_; }
  //! PagedEngineConfig::batch_invariant, switched at any time (a request's tokens are the same
  //! bits under any schedule only while it is on).
  void set_batch_invariant(bool on) { pc_.batch_invariant = on; }
  BlockPool const& pool() const { return *pool_; }

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
    self().check_ready("generate");
    if (has_unfinished())
      throw value_error(msg(Derived::who, "::generate: ", reqs_.size(), " requests are in flight; generate() runs on an idle engine "
                                 "(drive step() yourself, or abort them first)"));
    if (params.size() != 1 && params.size() != prompts.size())
      throw shape_error(msg(Derived::who, "::generate: ", params.size(), " parameter sets for ", prompts.size(),
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
    self().check_ready("generate");
    sp.validate(cfg_.vocab_size);
    if (ctl.abort) self().check_abortable();
    detail::DecodeBook::check_prompts(Derived::who, prompt_ids, prompt_mask, sp.max_new_tokens, cfg_);
    int const B = static_cast<int>(prompt_ids.dim(0)), P = static_cast<int>(prompt_ids.dim(1)), R = sp.max_new_tokens;
    if (seeds.size() != std::size_t(B))
      throw shape_error(msg(Derived::who, "::generate: ", seeds.size(), " seeds for ", B, " prompts; pass one seed per row"));
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
        throw value_error(msg(Derived::who, "::generate: ", reqs_.size(), " requests are in flight; generate() runs on an idle engine"));
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


 protected:
  PagedCore(model::GPTConfig const& cfg, PagedEngineConfig const& pc) : cfg_(cfg), pc_(pc) {
    cfg_.validate();
    pc_.validate();
  }
  ~PagedCore() { abort_all(); }
  //! Whether a logits observer is set (it reads the rows forward() returns on the host).
  bool observing() const { return bool(observer_); }

  //! Makes the block pool: pc.kv_cache_bytes, or 'default_bytes' when that is 0.
  void init_pool(BlockPool::Shape s, std::size_t default_bytes) {
    std::size_t const bytes = pc_.kv_cache_bytes ? pc_.kv_cache_bytes : default_bytes;
    int const nb = BlockPool::blocks_for_bytes(s, bytes);
    if (nb < 1)
      throw config_error(msg(Derived::who, ": kv_cache_bytes = ", bytes, " holds no block of ", s.bytes_per_block(),
                             " bytes (block_size ", pc_.block_size, "); raise kv_cache_bytes or lower block_size"));
    pool_ = std::make_unique<BlockPool>(s, nb, pc_.enable_prefix_caching);
    metrics_.num_blocks = nb;
    metrics_.block_bytes = s.bytes_per_block();
  }
  //! Bytes max_num_seqs sequences of planned_seq_len positions (max_seq_len at most) need: the
  //! default budget's upper bound.
  std::size_t full_budget_bytes(BlockPool::Shape const& s) const {
    int const len = pc_.planned_seq_len > 0 ? std::min(pc_.planned_seq_len, cfg_.max_seq_len) : cfg_.max_seq_len;
    std::size_t const per_seq = std::size_t((len + pc_.block_size - 1) / pc_.block_size) + 1;
    return per_seq * std::size_t(pc_.max_num_seqs) * s.bytes_per_block();
  }
  BlockPool& mutable_pool() { return *pool_; }
  Derived& self() { return static_cast<Derived&>(*this); }
  Derived const& self() const { return static_cast<Derived const&>(*this); }

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


  void check_request(std::string const& id, std::vector<std::int32_t> const& prompt, RequestParams const& p) const {
    self().check_ready("add_request");
    if (reqs_.count(id)) throw value_error(msg(Derived::who, "::add_request: request id '", id, "' is already in flight; use a unique id"));
    int const V = cfg_.vocab_size, P = int(prompt.size());
    if (P < 1) throw shape_error(msg(Derived::who, "::add_request: request '", id, "' has an empty prompt; pass at least one token"));
    for (int t = 0; t < P; ++t)
      if (prompt[std::size_t(t)] < 0 || prompt[std::size_t(t)] >= V)
        throw value_error(msg(Derived::who, "::add_request: request '", id, "': token ", prompt[std::size_t(t)], " at position ", t,
                              " is outside the vocabulary [0, ", V, ")"));
    p.sampling().validate(V);
    if (p.n < 1 || p.n > pc_.max_num_seqs)
      throw config_error(msg(Derived::who, "::add_request: request '", id, "': n = ", p.n, " must be in [1, max_num_seqs = ", pc_.max_num_seqs,
                             "]; raise max_num_seqs or split the group"));
    if (!(p.min_p >= 0.0f && p.min_p <= 1.0f))
      throw config_error(msg(Derived::who, "::add_request: request '", id, "': min_p = ", p.min_p, " must be in [0, 1] (0 = off)"));
    if (!p.seeds.empty() && int(p.seeds.size()) != p.n)
      throw shape_error(msg(Derived::who, "::add_request: request '", id, "': ", p.seeds.size(), " seeds for n = ", p.n,
                            " samples; pass one per sample or none (then sample k uses seed + k)"));
    int const Vs = sampled_vocab(p);
    for (auto t : p.stop_token_ids)
      if (t < 0 || t >= Vs)
        throw value_error(msg(Derived::who, "::add_request: request '", id, "': stop token ", t, " is outside the sampled vocabulary [0, ", Vs, ")"));
    int const total = P + p.max_tokens;
    if (total > cfg_.max_seq_len)
      throw shape_error(msg(Derived::who, "::add_request: request '", id, "': prompt ", P, " + max_tokens ", p.max_tokens, " = ", total,
                            " exceeds max_seq_len = ", cfg_.max_seq_len, "; shorten the prompt or max_tokens"));
    self().check_positions(id, total);
    int const blocks = (total + pc_.block_size - 1) / pc_.block_size;
    if (blocks > pool_->num_blocks())
      throw config_error(msg(Derived::who, "::add_request: request '", id, "': one sample of ", total, " positions needs ", blocks,
                             " blocks of ", pc_.block_size, " and the pool holds ", pool_->num_blocks(), "; raise kv_cache_bytes"));
    if (!pc_.enable_chunked_prefill && total > pc_.max_num_batched_tokens)
      throw config_error(msg(Derived::who, "::add_request: request '", id, "': ", total, " positions exceed max_num_batched_tokens = ",
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
    if (cow) s->table.copy_on_write(first, [this](int from, int to) { self().copy_block(from, to); });
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
      throw value_error(msg(Derived::who, "::step: nothing could be scheduled (", waiting_.size(), " waiting, ", pool_->num_free(), " of ",
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
    float* lg = self().forward(work, rows);  // null when no row samples
    for (auto const& w : work) {
      w.s->computed += w.count;
      cache_full_blocks(w.s);
    }
    int const V = self().vocab_end() - self().vocab_begin();  // this rank's logits per row (all V unless vocabulary-parallel)
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
    self().sample_draws();
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
  // the ids a request samples and scores: [0, vocab_limit), or the whole vocabulary
  int sampled_vocab(RequestParams const& p) const { return p.vocab_limit > 0 ? p.vocab_limit : cfg_.vocab_size; }
  // the philox counter of a draw's token: the request's first_token plus the sample's tokens so far
  static std::uint64_t draw_counter(Draw const& d) { return d.s->req->p.first_token + std::uint64_t(d.s->generated()); }
  // samples d.s's next token from d.row (thread-safe: reads the engine and the sequence, writes d)
  void draw(Draw& d) const {
    RequestParams const& p = d.s->req->p;
    int const Vs = sampled_vocab(p);
    thread_local std::vector<std::int32_t> idx;
    thread_local std::vector<double> w;
    thread_local std::vector<float> filt;
    idx.resize(std::size_t(Vs));
    w.resize(std::size_t(Vs));
    float const* src = d.row;
    if (p.min_p > 0.0f && p.temperature > 0.0f) {  // min-p: drop ids with p < min_p * p_max
      filt.resize(std::size_t(Vs));
      src = min_p_filter(d.row, Vs, p.temperature, p.min_p, filt.data());
    }
    d.tok = sample_token(src, Vs, p.sampling(), p.seed_of(d.s->k), draw_counter(d), idx.data(), w.data());
    float const inv_t = p.temperature > 0.0f ? 1.0f / p.temperature : 1.0f;
    d.logprob = model::layers::logprob_forward_row(d.row, Vs, d.tok, inv_t).log_prob;
  }
  // every draw of the step on the host, in parallel
  void draw_host() {
    int const nd = int(draws_.size());
    [[maybe_unused]] int const V = cfg_.vocab_size;  // read by the OpenMP condition only
    // per draw: a sample (an exp per candidate) and its log-prob (two passes, an exp each): weighed as RolloutEngine does
    RLFLOW_MODEL_OMP_FOR_IF(std::int64_t{nd} * V * model::layers::exp_weight > model::layers::parallel_threshold)
    for (int i = 0; i < nd; ++i) draw(draws_[std::size_t(i)]);
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


  model::GPTConfig cfg_;
  PagedEngineConfig pc_;
  std::unique_ptr<BlockPool> pool_;  // before the requests: their block tables release into it
  std::unordered_map<std::string, std::unique_ptr<Request>> reqs_;
  std::deque<Seq*> waiting_;
  std::vector<Seq*> running_;  // admission order: the newest are preempted first
  PagedMetrics metrics_;
  LogitsObserver observer_;
  std::vector<Draw> draws_;
};

}  // namespace rlflow::engine
