// CPU tests of the CUDA backend's host-side pieces (rlflow/core/device_memory.hpp,
// rlflow/config/device_memory_estimate.hpp): the device memory counters against a serial model, the
// per-worker estimate against independent counts of the parts that have a closed form, and the
// pre-work rejections (device count, estimate above free memory) with their messages.
#include <catch2/catch.hpp>

#include <rlflow/core/device_memory.hpp>
#include <rlflow/config/device_memory_estimate.hpp>
#include <rlflow/config/config_limits.hpp>    // check_size_limits
#include <rlflow/engine/training_engine.hpp>  // the CPU engine's activation buffer (checkpointing)

#include <random>
#include <thread>
#include <vector>

#include "../../examples/common/reverse_task.hpp"
#include "fixtures.hpp"

using namespace rlflow;

TEST_CASE("DeviceMemoryCounter matches a serial model of allocated / reserved and their peaks", "[device][memory]") {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 20; ++trial) {
    DeviceMemoryCounter c;
    std::int64_t alloc = 0, res = 0, peak_a = 0, peak_r = 0;
    std::vector<std::int64_t> live;  // blocks in use (reserved + used), like device_buffer
    std::vector<std::int64_t> cached;  // reserved, not used, like a caching resource's free list
    for (int op = 0; op < 500; ++op) {
      int const kind = static_cast<int>(rng() % 5);
      std::int64_t const b = 16 + static_cast<std::int64_t>(rng() % 100000);
      if (kind == 0 || live.empty()) {  // fresh malloc
        c.reserve(b);
        c.use(b);
        res += b;
        alloc += b;
        live.push_back(b);
      } else if (kind == 1) {  // free to the driver
        std::int64_t const x = live.back();
        live.pop_back();
        c.unuse(x);
        c.unreserve(x);
        alloc -= x;
        res -= x;
      } else if (kind == 2) {  // return to a cache
        std::int64_t const x = live.back();
        live.pop_back();
        c.unuse(x);
        alloc -= x;
        cached.push_back(x);
      } else if (kind == 3 && !cached.empty()) {  // cache hit
        std::int64_t const x = cached.back();
        cached.pop_back();
        c.use(x);
        alloc += x;
        live.push_back(x);
      } else if (kind == 4 && rng() % 10 == 0) {
        c.reset_peak();
        peak_a = alloc;
        peak_r = res;
      }
      peak_a = std::max(peak_a, alloc);
      peak_r = std::max(peak_r, res);
      auto s = c.stats();
      REQUIRE(s.allocated == alloc);
      REQUIRE(s.reserved == res);
      REQUIRE(s.peak_allocated == peak_a);
      REQUIRE(s.peak_reserved == peak_r);
    }
  }
}

TEST_CASE("DeviceMemoryCounter is exact under concurrent use and the peak bounds every thread's high point",
          "[device][memory]") {
  DeviceMemoryCounter c;
  constexpr int threads = 4, rounds = 20000;
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&c, t] {
      for (int i = 0; i < rounds; ++i) {
        std::int64_t const b = 1 + (i * 7 + t) % 997;
        c.reserve(b);
        c.use(b);
        c.unuse(b);
        c.unreserve(b);
      }
      c.reserve(1000 + t);  // each thread leaves 1000 + t reserved
    });
  for (auto& t : ts) t.join();
  auto s = c.stats();
  REQUIRE(s.allocated == 0);
  REQUIRE(s.reserved == 4 * 1000 + 0 + 1 + 2 + 3);
  REQUIRE(s.peak_reserved >= s.reserved);
  REQUIRE(s.peak_allocated >= 996);  // one thread alone reached its largest block
  REQUIRE(s.peak_allocated <= threads * 997);
  // devices have separate counters; out-of-range ids clamp to the edge counters
  device_memory_counter(3).use(5);
  REQUIRE(device_memory_counter(3).stats().allocated == 5);
  REQUIRE(device_memory_counter(4).stats().allocated == 0);
  device_memory_counter(3).unuse(5);
  REQUIRE(&device_memory_counter(-1) == &device_memory_counter(0));
  REQUIRE(&device_memory_counter(1000) == &device_memory_counter(max_accounted_devices - 1));
}

namespace {
//! GPT-2 parameter count from the architecture (tied LM head): embeddings, per block two
//! LayerNorms, qkv, proj, fc, fc-proj with biases, the final LayerNorm.
std::int64_t gpt_params(model::GPTConfig const& m) {
  std::int64_t const C = m.n_embd, V = m.vocab_size, S = m.max_seq_len, L = m.n_layer;
  std::int64_t const block = 2 * C + (3 * C * C + 3 * C) + (C * C + C) + 2 * C + (4 * C * C + 4 * C) + (4 * C * C + C);
  return V * C + S * C + L * block + 2 * C;
}
}  // namespace

TEST_CASE("estimate_device_memory: closed-form parts, sums and monotonicity", "[device][memory]") {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 30; ++trial) {
    TrainerConfig c = examples::grpo_reverse_config();
    c.trainer.n_gpus_per_node = 1 + static_cast<std::int64_t>(rng() % 4);
    c.data.max_prompt_length = 4 + static_cast<std::int64_t>(rng() % 60);
    c.data.max_response_length = 2 + static_cast<std::int64_t>(rng() % 60);
    c.actor_rollout_ref.model.n_layer = 1 + static_cast<std::int64_t>(rng() % 4);
    c.actor_rollout_ref.model.n_head = 1 << (rng() % 3);
    c.actor_rollout_ref.model.n_embd = c.actor_rollout_ref.model.n_head * (8 + static_cast<std::int64_t>(rng() % 4) * 8);
    c.data.train_batch_size = 32;
    c.actor_rollout_ref.rollout.n = 1 + static_cast<std::int64_t>(rng() % 8);
    auto const m = fixtures::policy_gpt(c, 7 + static_cast<int>(rng() % 50));
    auto const e = estimate_device_memory(c, m);
    std::int64_t const P = gpt_params(m);
    std::int64_t const workers = c.trainer.n_gpus_per_node;
    std::int64_t const rows = (32 * c.actor_rollout_ref.rollout.n + workers - 1) / workers;
    std::int64_t const S = c.data.max_prompt_length + c.data.max_response_length;
    REQUIRE(e.rows_per_worker == rows);
    REQUIRE(e.slots == S);
    REQUIRE(e.actor_state == 17 * P);  // 4 float buffers + a byte mask
    REQUIRE(e.ref_state == 17 * P);
    REQUIRE(e.rollout_weights == 4 * P);
    // the block pool: without a device, each row's blocks at full length, at most the pool (max_num_seqs
    // sequences of S positions in whole blocks); on a device (a cap), the pool it commits: the
    // default capped, or kv_cache_bytes in whole blocks
    std::int64_t const bs = c.actor_rollout_ref.rollout.block_size, block = m.n_layer * 2LL * bs * m.n_embd * 4;
    std::int64_t const per_seq = (S + bs - 1) / bs + 1;
    REQUIRE(e.kv_cache == std::min(rows, c.actor_rollout_ref.rollout.max_num_seqs) * per_seq * block);
    REQUIRE(paged_pool_bytes(c, m) == c.actor_rollout_ref.rollout.max_num_seqs * per_seq * block);
    REQUIRE(estimate_device_memory(c, m, 5 * block + 3).kv_cache == 5 * block);
    REQUIRE(estimate_device_memory(c, m, std::int64_t(1) << 62).kv_cache == paged_pool_bytes(c, m));
    TrainerConfig fixed = c;
    fixed.actor_rollout_ref.rollout.kv_cache_bytes = 7 * block + 1;
    REQUIRE(estimate_device_memory(fixed, m, 2 * block).kv_cache == 7 * block);
    TrainerConfig few = c;  // a pool smaller than the rows' blocks bounds the estimate
    few.actor_rollout_ref.rollout.max_num_seqs = 1;
    REQUIRE(estimate_device_memory(few, m).kv_cache == per_seq * block);
    REQUIRE(e.total() == e.actor_state + e.ref_state + e.rollout_weights + e.kv_cache + e.rollout_activations +
                             e.train_activations);
    // the kept activations alone (ActivationLayout) bound the training part from below: per layer
    // at least the attention probabilities (B NH T T) of the largest micro-batch
    std::int64_t const lp = std::min<std::int64_t>(rows, *c.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu);
    REQUIRE(e.train_activations >= 4LL * m.n_layer * lp * m.n_head * S * S);
    REQUIRE(e.rollout_activations >= 4LL * rows * m.vocab_size);
    // a top-k or top-p filter (training or validation) adds the sampler's sort keys (in, out and
    // CUB's alternate buffer for the step's draws, at most 2^24 keys at once), the draws' segment
    // offsets and CUB's alignment
    for (int which = 0; which < 3; ++which) {
      TrainerConfig f = c;
      auto& r = f.actor_rollout_ref.rollout;
      r.top_k = r.val_kwargs.top_k = -1;
      r.top_p = r.val_kwargs.top_p = 1.0;
      std::int64_t const plain = estimate_device_memory(f, m).rollout_activations;
      if (which == 0) r.top_p = 0.9;
      if (which == 1) r.top_k = m.vocab_size - 1;
      if (which == 2) r.val_kwargs.top_k = m.vocab_size / 2;
      std::int64_t const draws = std::min<std::int64_t>(rows, r.max_num_seqs);
      REQUIRE(estimate_device_memory(f, m).rollout_activations - plain ==
              24 * std::min<std::int64_t>(draws * m.vocab_size, std::int64_t{1} << 24) + 8 * draws + 1024);
      r.top_k = m.vocab_size;  // keeps every id: no filter
      r.top_p = 1.0;
      r.val_kwargs.top_k = 0;
      REQUIRE(estimate_device_memory(f, m).rollout_activations == plain);
    }
    // more rows per device, longer sequences or a bigger micro-batch never need less
    TrainerConfig more = c;
    more.actor_rollout_ref.rollout.n *= 2;
    REQUIRE(estimate_device_memory(more, m).total() > e.total());
    TrainerConfig longer = c;
    longer.data.max_response_length += bs;
    auto m2 = m;
    m2.max_seq_len += static_cast<int>(bs);
    REQUIRE(estimate_device_memory(longer, m2).kv_cache > e.kv_cache);
    REQUIRE(estimate_device_memory(longer, m2).train_activations > e.train_activations);
  }
}

TEST_CASE("estimate_device_memory with enable_gradient_checkpointing: the engine's own activation buffers, less memory",
          "[device][memory][checkpointing]") {
  std::mt19937_64 rng(13);
  for (int trial = 0; trial < 12; ++trial) {
    TrainerConfig c = examples::grpo_reverse_config();
    c.trainer.n_gpus_per_node = 1 + static_cast<std::int64_t>(rng() % 3);
    c.data.max_prompt_length = 4 + static_cast<std::int64_t>(rng() % 12);
    c.data.max_response_length = 2 + static_cast<std::int64_t>(rng() % 12);
    c.actor_rollout_ref.model.n_layer = 1 + static_cast<std::int64_t>(rng() % 4);
    c.actor_rollout_ref.model.n_head = 1 << (rng() % 3);
    c.actor_rollout_ref.model.n_embd = c.actor_rollout_ref.model.n_head * (8 + static_cast<std::int64_t>(rng() % 2) * 8);
    c.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 1 + static_cast<std::int64_t>(rng() % 4);
    auto m = fixtures::policy_gpt(c, 7 + static_cast<int>(rng() % 20));
    if (trial % 2) m = model::builtin_model(m, model::Arch(1 + trial % 3));
    INFO("trial " << trial << ", arch " << model::arch_name(m.arch) << ", layers " << m.n_layer);
    std::int64_t const S = c.data.max_prompt_length + c.data.max_response_length, R = c.data.max_response_length;
    std::int64_t const micro = *c.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu;
    // the CPU engines' kept activations for the PPO micro-batch, with and without checkpointing
    Tensor ids = Tensor::zeros(DType::int32, Shape{micro, S}), mask = Tensor::full(Shape{micro, S}, std::int32_t{1});
    engine::TrainingEngine keep(m), ckpt(m);
    ckpt.set_gradient_checkpointing(true);
    keep.forward(ids, mask, static_cast<int>(R));
    ckpt.forward(ids, mask, static_cast<int>(R));
    std::int64_t const kept_bytes = static_cast<std::int64_t>(keep.model().activation_bytes());
    std::int64_t const ckpt_bytes = static_cast<std::int64_t>(ckpt.model().activation_bytes());
    // the estimate's training part moves by exactly the engine's difference (the other terms are the same)
    std::int64_t const f_keep = detail::train_activation_floats(m, micro, S, R, true, false);
    std::int64_t const f_ckpt = detail::train_activation_floats(m, micro, S, R, true, true);
    REQUIRE(4 * (f_keep - f_ckpt) == kept_bytes - ckpt_bytes);
    // one layer kept whatever L is: L (N, C) rows plus one layer's activations
    std::int64_t const N = micro * S;
    REQUIRE(ckpt_bytes == 4 * (m.n_layer * N * m.n_embd) + (kept_bytes - 4 * N * m.n_embd) / m.n_layer);
    TrainerConfig on = c;
    on.actor_rollout_ref.model.enable_gradient_checkpointing = true;
    auto const e_off = estimate_device_memory(c, m), e_on = estimate_device_memory(on, m);
    REQUIRE(e_on.total() - e_on.train_activations == e_off.total() - e_off.train_activations);
    if (m.n_layer == 1) {
      REQUIRE(e_on.train_activations == e_off.train_activations);
      continue;
    }
    REQUIRE(e_on.train_activations < e_off.train_activations);
    // check_host_memory counts it: a budget between the two needs refuses only the kept activations
    std::int64_t const P = model::ParamLayout(m).count(), workers = c.trainer.n_gpus_per_node;
    auto need = [&](DeviceMemoryEstimate const& e) { return workers * (e.total() - e.ref_state + P * 5); };
    std::int64_t const budget = (need(e_on) + need(e_off)) / 2;
    REQUIRE_THROWS_AS(check_host_memory(c, m, budget, "model"), config_error);
    REQUIRE_NOTHROW(check_host_memory(on, m, budget, "model"));
  }
}

TEST_CASE("check_size_limits counts the checkpointed activations and names the key as a fix", "[device][memory][checkpointing]") {
  TrainerConfig c = examples::grpo_reverse_config();
  c.actor_rollout_ref.model.n_layer = 24;
  c.actor_rollout_ref.model.n_embd = 512;
  c.actor_rollout_ref.model.n_head = 8;
  c.data.max_prompt_length = 512;
  c.data.max_response_length = 512;
  c.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 64;
  c.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 64;
  // activations of one micro-batch: 64 x 1024 tokens x 512 x (24 x 24, or 24 + 24) floats per worker
  long double const tokens = 64.0L * 1024, W = static_cast<long double>(c.trainer.nnodes * c.trainer.n_gpus_per_node);
  long double const kept = 4.0L * tokens * 512 * 24 * 24 * W, ckpt = 4.0L * tokens * 512 * 48 * W;
  auto const budget = static_cast<std::uint64_t>((kept + ckpt) / 2);
  REQUIRE_THROWS_WITH(check_size_limits(c, 16, 64, false, budget),
                      Catch::Contains("the activations of one micro-batch") && Catch::Contains("enable_gradient_checkpointing=true"));
  c.actor_rollout_ref.model.enable_gradient_checkpointing = true;
  try {  // whatever else may not fit this budget, the activations do
    check_size_limits(c, 16, 64, false, budget);
  } catch (config_error const& e) {
    REQUIRE_THAT(e.what(), !Catch::Contains("the activations of one micro-batch"));
  }
}

TEST_CASE("check_cuda_training_keys rejects activation checkpointing by its key", "[device][memory][checkpointing]") {
  TrainerConfig c = examples::grpo_reverse_config();
  REQUIRE_NOTHROW(check_cuda_training_keys(c));
  c.critic.model.enable_gradient_checkpointing = true;  // the critic runs on the CPU engine
  REQUIRE_NOTHROW(check_cuda_training_keys(c));
  c.actor_rollout_ref.model.enable_gradient_checkpointing = true;
  REQUIRE_THROWS_AS(check_cuda_training_keys(c), config_error);
  REQUIRE_THROWS_WITH(check_cuda_training_keys(c), Catch::Contains("actor_rollout_ref.model.enable_gradient_checkpointing=true") &&
                                                       Catch::Contains("set it to false"));
}

TEST_CASE("check_device_count rejects more workers than devices, nnodes above 1 and no device", "[device][memory]") {
  TrainerConfig c = examples::grpo_reverse_config();
  c.trainer.nnodes = 1;
  c.trainer.n_gpus_per_node = 2;
  REQUIRE_NOTHROW(check_device_count(c, 2));
  REQUIRE_NOTHROW(check_device_count(c, 8));
  REQUIRE_THROWS_AS(check_device_count(c, 1), config_error);
  REQUIRE_THROWS_WITH(check_device_count(c, 1), Catch::Contains("trainer.n_gpus_per_node=2") &&
                                                     Catch::Contains("only 1 CUDA device is visible") &&
                                                     Catch::Contains("set trainer.n_gpus_per_node=1"));
  REQUIRE_THROWS_WITH(check_device_count(c, 0), Catch::Contains("no CUDA device") && Catch::Contains("cpu::tag"));
  c.trainer.nnodes = 2;
  REQUIRE_THROWS_WITH(check_device_count(c, 16), Catch::Contains("trainer.nnodes=2") && Catch::Contains("trainer.nnodes=1"));
}

TEST_CASE("check_device_memory rejects an estimate above the free memory, naming the numbers and the fix",
          "[device][memory]") {
  TrainerConfig c = examples::grpo_reverse_config();
  c.trainer.n_gpus_per_node = 1;
  auto const e = estimate_device_memory(c, fixtures::policy_gpt(c, 7));
  REQUIRE(e.total() > 0);
  REQUIRE_NOTHROW(check_device_memory(e, 0, e.total(), e.total() * 2));
  REQUIRE_NOTHROW(check_device_memory(e, 3, std::int64_t(141) << 30, std::int64_t(141) << 30));
  REQUIRE_THROWS_AS(check_device_memory(e, 1, e.total() - 1, e.total() * 2), config_error);
  // 1.5 GiB free of 2 GiB against an estimate of 3 GiB (parts set by hand)
  DeviceMemoryEstimate big;
  big.kv_cache = std::int64_t(3) << 30;
  big.rows_per_worker = 256;
  big.slots = 9;
  REQUIRE_THROWS_WITH(check_device_memory(big, 1, std::int64_t(3) << 29, std::int64_t(2) << 30),
                      Catch::Contains("needs an estimated 3 GiB") && Catch::Contains("KV cache 3 GiB (256 rows x 9 slots)") &&
                          Catch::Contains("device 1 has 1.5 GiB free of 2 GiB") &&
                          Catch::Contains("ppo_micro_batch_size_per_gpu") && Catch::Contains("n_gpus_per_node"));
}
