// rlflow/roles/cpu_rollout.hpp: the CPU roles' rollout engine: the paged, continuously batched
// engine (engine::PagedEngine) configured from actor_rollout_ref.rollout.*, at any rollout TP and
// with either LM head, or the static KV-cache engine (engine::RolloutEngine) as the tests'
// reference (RoleSetup::static_rollout).
// verl: the rollout worker's inference engine (vLLMRollout).
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <rlflow/config/trainer_config.hpp>  // TrainerConfig, RolloutConfig
#include <rlflow/core/error.hpp>
#include <rlflow/engine/paged_engine.hpp>    // PagedEngine, PagedEngineConfig
#include <rlflow/engine/rollout_engine.hpp>  // RolloutEngine, GenerateControl

namespace rlflow::roles {

//! The paged engines' keys from actor_rollout_ref.rollout.* (vLLM's EngineArgs as verl passes
//! them; the CUDA engine also takes gpu_memory_utilization, checked here) and the sequences' planned
//! length from data.*; a bad value is a config_error naming the key.
inline engine::PagedEngineConfig paged_engine_config(TrainerConfig const& cfg) {
  RolloutConfig const& rc = cfg.actor_rollout_ref.rollout;
  auto bad = [](char const* key, std::int64_t v, char const* fix) {
    throw config_error(msg("actor_rollout_ref.rollout.", key, "=", v, " is invalid; ", fix));
  };
  if (rc.block_size < 1 || rc.block_size > 1024) bad("block_size", rc.block_size, "use 1..1024 positions per block (16 is usual)");
  if (rc.max_num_seqs < 1 || rc.max_num_seqs > (std::int64_t(1) << 30)) bad("max_num_seqs", rc.max_num_seqs, "run at least one sequence");
  if (rc.max_num_batched_tokens < 1 || rc.max_num_batched_tokens > (std::int64_t(1) << 30))
    bad("max_num_batched_tokens", rc.max_num_batched_tokens, "schedule at least one token per step (verl: 8192)");
  if (rc.kv_cache_bytes < 0) bad("kv_cache_bytes", rc.kv_cache_bytes, "use a byte budget, or 0 to derive it");
  if (!(rc.gpu_memory_utilization > 0.0 && rc.gpu_memory_utilization <= 1.0))
    throw config_error(msg("actor_rollout_ref.rollout.gpu_memory_utilization=", rc.gpu_memory_utilization,
                           " is invalid; use a fraction in (0, 1] of the device's memory (verl's default 0.5)"));
  engine::PagedEngineConfig pc;
  pc.block_size = static_cast<int>(rc.block_size);
  pc.max_num_seqs = static_cast<int>(rc.max_num_seqs);
  pc.max_num_batched_tokens = static_cast<int>(rc.max_num_batched_tokens);
  pc.enable_chunked_prefill = rc.enable_chunked_prefill;
  pc.enable_prefix_caching = rc.enable_prefix_caching;
  pc.kv_cache_bytes = static_cast<std::size_t>(rc.kv_cache_bytes);
  // the default pool plans for the trainer's sequences: prompt + response (verl's max_model_len)
  pc.planned_seq_len = static_cast<int>(std::min<std::int64_t>(cfg.data.max_prompt_length + cfg.data.max_response_length, 1 << 30));
  return pc;
}

//! One CPU rollout engine with the static engine's interface. The paged engine runs at every
//! rollout TP and every actor_rollout_ref.model.lm_head value (the head it names; for auto, the
//! vocabulary-parallel head from engine::vocab_parallel_min_vocab tokens at TP > 1); the static engine runs only when
//! 'use_static' asks for it (the tests' reference). Both give the same tokens for the same seeds.
//! The TP group's communicator reaches either engine (set_tp_communicator, before the first
//! generation). The paged engine keeps its own copy of the replicated tensors: share_replicated()
//! shares nothing there and answers false.
class CpuRollout {
 public:
  CpuRollout(model::GPTConfig const& model, model::TPRank tp, TrainerConfig const& cfg, bool use_static) {
    if (use_static) st_ = std::make_unique<engine::RolloutEngine>(model, tp);
    else pg_ = std::make_unique<engine::PagedEngine>(model, paged_engine_config(cfg), tp);
  }

  model::GPTConfig const& config() const { return pg_ ? pg_->config() : st_->config(); }
  //! The paged engine (its metrics), or null when the static one runs.
  engine::PagedEngine* paged() { return pg_.get(); }
  engine::PagedEngine const* paged() const { return pg_.get(); }

  void load_weights(std::span<float const> flat) { pg_ ? pg_->load_weights(flat) : st_->load_weights(flat); }
  void load_shard(std::span<float const> shard) { pg_ ? pg_->load_shard(shard) : st_->load_shard(shard); }
  //! W += s B A into the loaded weights (LoRA; TP 1).
  void merge_lora(model::LoraLayout const& lay, std::span<float const> adapters) {
    pg_ ? pg_->merge_lora(lay, adapters) : st_->merge_lora(lay, adapters);
  }
  std::span<float const> weights() const { return pg_ ? pg_->weights() : st_->weights(); }
  std::vector<float> shard_weights() const {
    if (pg_) return {pg_->weights().begin(), pg_->weights().end()};
    return st_->shard_weights();
  }
  model::ShardLayout const& shard_layout() const { return pg_ ? pg_->shard_layout() : st_->shard_layout(); }
  void set_tp_communicator(comm::Communicator* c) { pg_ ? pg_->set_tp_communicator(c) : st_->set_tp_communicator(c); }
  //! The static engine's shared replicated tensors; false (nothing shared) on the paged engine.
  bool share_replicated() { return st_ ? st_->share_replicated() : false; }
  //! The engine's head choice (PagedEngine::set_lm_head, RolloutEngine::set_lm_head).
  void set_lm_head(model::LMHead h) { pg_ ? pg_->set_lm_head(h) : st_->set_lm_head(h); }
  model::LMHead lm_head() const { return pg_ ? pg_->lm_head() : st_->lm_head(); }

  void sleep() { pg_ ? pg_->sleep() : st_->sleep(); }
  void wake() { pg_ ? pg_->wake() : st_->wake(); }
  bool is_sleeping() const { return pg_ ? pg_->is_sleeping() : st_->is_sleeping(); }
  std::size_t memory_bytes() const { return pg_ ? pg_->memory_bytes() : st_->memory_bytes(); }

  engine::RolloutResult generate(Tensor const& ids, Tensor const& mask, engine::SamplingParams const& sp,
                                 std::span<std::uint64_t const> seeds, engine::GenerateControl const& ctl = {}) {
    return pg_ ? pg_->generate(ids, mask, sp, seeds, ctl) : st_->generate(ids, mask, sp, seeds, ctl);
  }

 private:
  std::unique_ptr<engine::PagedEngine> pg_;
  std::unique_ptr<engine::RolloutEngine> st_;
};

}  // namespace rlflow::roles
