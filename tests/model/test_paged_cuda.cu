// tests/model/test_paged_cuda.cu <-> include/rlflow/engine/cuda/paged_engine.cuh,
// include/rlflow/engine/cuda/rollout_layers.cuh, the paged kernels of model/cuda/gpt_layers.cuh:
// the CUDA paged engine against the CPU paged engine (GPT-2 and every tiny Llama-family variant:
// tokens, log-probs and every sampled row's logits; requests with their own filters, sampled on
// the device), against the static CUDA engine on a
// left-padded batch, its invariance under the schedule (max_num_seqs, block_size, chunk size,
// arrival order, caching, forced preemption), chunked against one-shot prefill logits, one
// prefill per group, the pool's bookkeeping (no leak after runs, aborts and an exception), sleep /
// wake, device-to-device weights, and its input errors.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <rlflow/engine/cuda/paged_engine.cuh>
#include <rlflow/engine/cuda/rollout_engine.cuh>
#include <rlflow/engine/paged_engine.hpp>

#include "../fixtures.hpp"  // for_each_tiny_llama, perturbed_weights, describe
#include "paged_groups.hpp"  // Group, random_groups, params_of, prompts_of

namespace test_paged_cuda {

using rlflow::Shape;
using rlflow::Tensor;
using rlflow::engine::PagedEngineConfig;
using rlflow::engine::PagedMetrics;
using rlflow::engine::RequestOutput;
using rlflow::engine::RequestParams;
using rlflow::engine::SamplingParams;
using rlflow::model::Arch;
using rlflow::model::GPTConfig;
using CpuPaged = rlflow::engine::PagedEngine;
using GpuPaged = rlflow::engine::cuda::PagedEngine;

namespace {

using paged_groups::Group;
using paged_groups::params_of;
using paged_groups::prompts_of;
using paged_groups::random_groups;

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

GPTConfig gpt2_config() {
  GPTConfig c;
  c.vocab_size = 41;
  c.max_seq_len = 64;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 16;
  c.seed = 7;
  c.validate();
  return c;
}

SamplingParams sampled(int R, bool greedy = false) {
  SamplingParams sp;
  sp.temperature = greedy ? 0.0f : 0.9f;
  sp.top_k = 20;
  sp.top_p = 0.95f;
  sp.max_new_tokens = R;
  sp.eos_id = 2;
  return sp;
}

// same tokens; log-probs within 1e-4 (the device sums in another order than the CPU)
void require_same(RequestOutput const& a, RequestOutput const& b) {
  REQUIRE(a.samples.size() == b.samples.size());
  for (std::size_t k = 0; k < a.samples.size(); ++k) {
    REQUIRE(a.samples[k].tokens == b.samples[k].tokens);
    REQUIRE(a.samples[k].finish == b.samples[k].finish);
    REQUIRE(a.samples[k].logprobs.size() == b.samples[k].logprobs.size());
    for (std::size_t j = 0; j < a.samples[k].logprobs.size(); ++j)
      REQUIRE(a.samples[k].logprobs[j] == Approx(b.samples[k].logprobs[j]).margin(1e-4));
  }
}

// every sampled row's logits, keyed by (request, sample, token index)
using LogitsLog = std::map<std::tuple<std::string, int, int>, std::vector<float>>;
template <class Engine>
void record_logits(Engine& e, LogitsLog& log) {
  e.set_logits_observer([&log](std::string_view id, int k, int index, std::span<float const> lg) {
    log[{std::string(id), k, index}].assign(lg.begin(), lg.end());
  });
}
// max |a - b| over a row within 'rel' of the row's largest |logit|
void require_rows_close(LogitsLog const& a, LogitsLog const& b, double rel) {
  REQUIRE(a.size() == b.size());
  for (auto const& [key, row] : a) {
    auto const& other = b.at(key);
    REQUIRE(other.size() == row.size());
    double diff = 0, scale = 0;
    for (std::size_t v = 0; v < row.size(); ++v) {
      diff = std::max(diff, std::abs(double(row[v]) - double(other[v])));
      scale = std::max(scale, std::abs(double(row[v])));
    }
    INFO("request " << std::get<0>(key) << " sample " << std::get<1>(key) << " token " << std::get<2>(key) << ": max |diff| "
                    << diff << ", max |logit| " << scale);
    REQUIRE(diff <= rel * std::max(scale, 1.0));
  }
}

std::size_t pool_bytes(GPTConfig const& c, int bs, int blocks) {
  return std::size_t(blocks) * rlflow::engine::BlockPool::Shape{c.n_layer, c.kv_heads(), c.head_dim(), bs}.bytes_per_block();
}

//! The CUDA and CPU paged engines on the same requests: tokens, log-probs, finish reasons, every
//! sampled row's logits (1e-4 of the row's scale), prefilled prompt tokens; both pools empty after.
void check_against_cpu(GPTConfig const& cfg, std::vector<float> const& w, bool greedy, unsigned seed) {
  INFO(fixtures::describe(cfg) << (greedy ? " greedy" : " sampled"));
  PagedEngineConfig pc;
  pc.block_size = 4;
  CpuPaged cpu(cfg, pc);
  GpuPaged gpu(cfg, pc);
  cpu.load_weights(w);
  gpu.load_weights(w);
  REQUIRE(gpu.weights() == w);
  LogitsLog lc, lg;
  record_logits(cpu, lc);
  record_logits(gpu, lg);
  auto const gs = random_groups(5, 3, cfg.vocab_size, seed);
  auto const sp = sampled(20, greedy);
  auto const oc = cpu.generate(prompts_of(gs), params_of(gs, sp));
  auto const og = gpu.generate(prompts_of(gs), params_of(gs, sp));
  for (std::size_t i = 0; i < gs.size(); ++i) require_same(og[i], oc[i]);
  require_rows_close(lg, lc, 1e-4);
  REQUIRE(gpu.pool().num_used() == 0);
  REQUIRE(gpu.metrics().prompt_tokens_prefilled == cpu.metrics().prompt_tokens_prefilled);
  REQUIRE(gpu.metrics().generation_tokens == cpu.metrics().generation_tokens);
}

}  // namespace

TEST_CASE("CUDA paged engine gives the CPU paged engine's tokens and logits, GPT-2 and the Llama family", "[model][paged][cuda]") {
  if (!have_gpu()) {
    WARN("no CUDA device: skipped");
    return;
  }
  for (bool greedy : {true, false}) {
    GPTConfig const g2 = gpt2_config();
    check_against_cpu(g2, fixtures::perturbed_weights(g2, 3, 0.3f), greedy, 11);
    fixtures::for_each_tiny_llama(101, 7, [&](GPTConfig const& cfg, std::vector<float> const& w) {
      check_against_cpu(cfg, w, greedy, 13 + unsigned(cfg.vocab_size));
    });
  }
}

TEST_CASE("CUDA paged engine samples each request with its own filters, as the CPU engine does", "[model][paged][cuda]") {
  if (!have_gpu()) {
    WARN("no CUDA device: skipped");
    return;
  }
  // one step's draws mix greedy, temperature, top-k, top-p, min-p and a vocabulary limit; the
  // device samples them from its own logits rows (no observer) and from the rows it copies to an
  // observer: both give the CPU engine's tokens
  GPTConfig const cfg = gpt2_config();
  auto const w = fixtures::perturbed_weights(cfg, 5, 0.5f);
  auto const gs = random_groups(12, 3, cfg.vocab_size, 29);
  std::mt19937 g(31);
  std::vector<RequestParams> ps;
  for (std::size_t i = 0; i < gs.size(); ++i) {
    RequestParams p = RequestParams::from_static(sampled(16, i % 6 == 0), gs[i].seeds);
    p.temperature = i % 6 == 0 ? 0.0f : 0.4f + 0.2f * float(i % 5);
    p.top_k = i % 3 == 1 ? 1 + int(g() % 30u) : 0;
    p.top_p = i % 4 == 2 ? 0.3f + 0.1f * float(g() % 6u) : 1.0f;
    p.min_p = i % 5 == 3 || i % 5 == 4 || i == 10 ? 0.02f + 0.1f * float(g() % 4u) : 0.0f;  // 10: with top-p
    if (i == 9) p.min_p = 1.0f;  // the most likely ids only
    p.vocab_limit = i % 2 == 1 ? 25 + int(g() % 10u) : 0;
    ps.push_back(p);
  }
  PagedEngineConfig pc;
  pc.block_size = 4;
  CpuPaged cpu(cfg, pc);
  cpu.load_weights(w);
  auto const want = cpu.generate(prompts_of(gs), ps);
  for (bool observe : {false, true}) {
    INFO((observe ? "with" : "without") << " a logits observer");
    GpuPaged gpu(cfg, pc);
    gpu.load_weights(w);
    LogitsLog seen;
    if (observe) record_logits(gpu, seen);
    auto const got = gpu.generate(prompts_of(gs), ps);
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < gs.size(); ++i) {
      INFO("request " << i << ": T " << ps[i].temperature << " top_k " << ps[i].top_k << " top_p " << ps[i].top_p << " min_p "
                      << ps[i].min_p << " vocab_limit " << ps[i].vocab_limit);
      require_same(got[i], want[i]);
      if (ps[i].vocab_limit > 0)
        for (auto const& smp : got[i].samples)
          for (std::int32_t t : smp.tokens) REQUIRE(t < ps[i].vocab_limit);
    }
    REQUIRE(seen.empty() != observe);
    REQUIRE(gpu.pool().num_used() == 0);
  }
}

TEST_CASE("CUDA paged engine's generate of a left-padded batch equals the static CUDA engine's", "[model][paged][cuda]") {
  if (!have_gpu()) {
    WARN("no CUDA device: skipped");
    return;
  }
  for (Arch arch : {Arch::gpt2, Arch::qwen3}) {
    GPTConfig const cfg = arch == Arch::gpt2 ? gpt2_config() : fixtures::tiny_llama_config(arch, 1, 5);
    INFO(fixtures::describe(cfg));
    auto const w = fixtures::perturbed_weights(cfg, 17, 0.3f);
    rlflow::engine::cuda::RolloutEngine st(cfg);
    GpuPaged pg(cfg);
    st.load_weights(w);
    pg.load_weights(w);
    // 4 prompts x 3 samples, verl's repeat-interleaved rows, left-padded to P
    std::mt19937 g(23);
    int const n = 3, G = 4, P = 14, B = G * n;
    std::vector<std::int32_t> ids(std::size_t(B) * P, 0), mask(ids.size(), 0);
    std::vector<std::uint64_t> seeds;
    for (int i = 0; i < G; ++i) {
      int const len = 2 + int(g() % unsigned(P - 1));
      std::vector<std::int32_t> p;
      for (int t = 0; t < len; ++t) p.push_back(3 + std::int32_t(g() % unsigned(cfg.vocab_size - 3)));
      for (int k = 0; k < n; ++k) {
        int const b = i * n + k;
        for (int t = 0; t < len; ++t) {
          ids[std::size_t(b) * P + (P - len + t)] = p[std::size_t(t)];
          mask[std::size_t(b) * P + (P - len + t)] = 1;
        }
        seeds.push_back(g());
      }
    }
    Tensor const ti = Tensor::from(ids, Shape{B, P}), tm = Tensor::from(mask, Shape{B, P});
    std::uint64_t prompt_positions = 0;  // each group's prompt once
    for (int i = 0; i < G; ++i)
      for (int t = 0; t < P; ++t) prompt_positions += std::uint64_t(mask[std::size_t(i * n) * P + t]);
    for (bool greedy : {true, false}) {
      auto const sp = sampled(18, greedy);
      auto const a = st.generate(ti, tm, sp, seeds);
      pg.reset_metrics();
      auto const b = pg.generate(ti, tm, sp, seeds);
      REQUIRE(std::vector<std::int32_t>(b.responses.span<std::int32_t>().begin(), b.responses.span<std::int32_t>().end()) ==
              std::vector<std::int32_t>(a.responses.span<std::int32_t>().begin(), a.responses.span<std::int32_t>().end()));
      REQUIRE(std::vector<std::int32_t>(b.response_mask.span<std::int32_t>().begin(), b.response_mask.span<std::int32_t>().end()) ==
              std::vector<std::int32_t>(a.response_mask.span<std::int32_t>().begin(), a.response_mask.span<std::int32_t>().end()));
      auto const la = a.log_probs.span<float>(), lb = b.log_probs.span<float>();
      for (std::size_t j = 0; j < la.size(); ++j) REQUIRE(lb[j] == Approx(la[j]).margin(1e-4));
      // each group's prompt once (no prompt fills a block of 16, so none comes from the prefix cache)
      REQUIRE(pg.metrics().prompt_tokens_prefilled == prompt_positions);
    }
  }
}

TEST_CASE("CUDA paged engine's outputs do not depend on the schedule", "[model][paged][cuda]") {
  if (!have_gpu()) {
    WARN("no CUDA device: skipped");
    return;
  }
  for (Arch arch : {Arch::gpt2, Arch::qwen3}) {
    GPTConfig const cfg = arch == Arch::gpt2 ? gpt2_config() : fixtures::tiny_llama_config(arch, 3, 9);
    INFO(fixtures::describe(cfg));
    auto const w = fixtures::perturbed_weights(cfg, 5, 0.3f);
    SamplingParams const sp = sampled(24);
    auto const gs = random_groups(7, 3, cfg.vocab_size, 21, 1, 36);
    auto run = [&](PagedEngineConfig pc, bool reversed, PagedMetrics* m = nullptr) {
      return paged_groups::run_groups<GpuPaged>(cfg, pc, w, gs, sp, reversed, m);
    };
    auto const ref = run(PagedEngineConfig{}, false);
    auto check = [&](std::vector<RequestOutput> const& o) {
      for (std::size_t i = 0; i < gs.size(); ++i) require_same(o[i], ref[i]);
    };
    for (int s : {3, 7}) {
      PagedEngineConfig pc;
      pc.max_num_seqs = s;
      check(run(pc, false));
    }
    for (int b : {1, 3, 64}) {
      PagedEngineConfig pc;
      pc.block_size = b;
      check(run(pc, false));
    }
    for (int c : {1, 13}) {
      PagedEngineConfig pc;
      pc.max_num_batched_tokens = c;
      pc.block_size = 4;
      PagedMetrics m;
      check(run(pc, false, &m));
      REQUIRE(m.max_step_tokens == std::uint64_t(c));
    }
    check(run(PagedEngineConfig{}, true));
    {
      PagedEngineConfig pc;
      pc.enable_prefix_caching = false;
      pc.enable_chunked_prefill = false;
      pc.max_num_batched_tokens = 64;
      check(run(pc, false));
    }
    for (int b : {4, 8}) {  // a pool of one longest sample and a little more: preemption
      PagedEngineConfig pc;
      pc.block_size = b;
      int const blocks = (36 + 24 + b - 1) / b + 2;
      pc.kv_cache_bytes = pool_bytes(cfg, b, blocks);
      PagedMetrics m;
      check(run(pc, false, &m));
      REQUIRE(m.num_blocks == blocks);
      REQUIRE(m.preemptions > 0);
    }
  }
}

TEST_CASE("CUDA paged engine: chunked prefill gives the one-shot prefill's logits", "[model][paged][cuda]") {
  if (!have_gpu()) {
    WARN("no CUDA device: skipped");
    return;
  }
  for (Arch arch : {Arch::gpt2, Arch::llama, Arch::qwen3}) {
    GPTConfig const cfg = arch == Arch::gpt2 ? gpt2_config() : fixtures::tiny_llama_config(arch, 1, 31);
    INFO(fixtures::describe(cfg));
    auto const w = fixtures::perturbed_weights(cfg, 8, 0.3f);
    auto const gs = random_groups(4, 1, cfg.vocab_size, 31, 20, 50);
    SamplingParams const sp = sampled(3, true);
    auto logits_of = [&](int chunk) {
      PagedEngineConfig pc;
      pc.max_num_batched_tokens = chunk;
      pc.block_size = 4;
      GpuPaged pe(cfg, pc);
      pe.load_weights(w);
      LogitsLog log;
      record_logits(pe, log);
      pe.generate(prompts_of(gs), params_of(gs, sp));
      LogitsLog first;
      for (auto const& [key, row] : log)
        if (std::get<2>(key) == 0) first[key] = row;
      return first;
    };
    auto const one = logits_of(4096);
    REQUIRE(one.size() == gs.size());
    for (int chunk : {1, 6, 17}) {
      INFO("chunk " << chunk);
      require_rows_close(logits_of(chunk), one, 1e-5);
    }
  }
}

TEST_CASE("CUDA paged engine prefills a group's prompt once and never leaks a block", "[model][paged][cuda]") {
  if (!have_gpu()) {
    WARN("no CUDA device: skipped");
    return;
  }
  GPTConfig const cfg = fixtures::tiny_llama_config(Arch::qwen3, 1, 41);
  auto const w = fixtures::perturbed_weights(cfg, 9, 0.3f);
  int const bs = 8, R = 20;
  for (int n : {1, 8})
    for (int P : {5, 37}) {
      INFO("n " << n << " P " << P);
      auto gs = random_groups(1, n, cfg.vocab_size, 41);
      gs[0].prompt.resize(std::size_t(P), 5);
      PagedEngineConfig pc;
      pc.block_size = bs;
      GpuPaged pe(cfg, pc);
      pe.load_weights(w);
      paged_groups::run_group_once(pe, gs[0], bs, sampled(R));
    }
  // aborts and an exception from sampling hand every block back; the engine stays usable
  auto const gs = random_groups(4, 3, cfg.vocab_size, 43);
  auto const params = params_of(gs, sampled(16));
  PagedEngineConfig pc;
  pc.block_size = 4;
  GpuPaged pe(cfg, pc);
  pe.load_weights(w);
  auto const ref = pe.generate(prompts_of(gs), params);
  for (std::size_t i = 0; i < gs.size(); ++i) pe.add_request("a" + std::to_string(i), gs[i].prompt, params[i]);
  pe.step();
  pe.step();
  REQUIRE(pe.abort("a1").has_value());
  REQUIRE(pe.pool().num_used() > 0);
  pe.abort_all();
  REQUIRE(pe.pool().num_used() == 0);
  int calls = 0;
  pe.set_logits_observer([&](std::string_view, int, int index, std::span<float const>) {
    if (index == 5 && ++calls == 4) throw std::runtime_error("observer fails");
  });
  for (std::size_t i = 0; i < gs.size(); ++i) pe.add_request("r" + std::to_string(i), gs[i].prompt, params[i]);
  REQUIRE_THROWS_WITH([&] {
    while (pe.has_unfinished()) pe.step();
  }(), "observer fails");
  REQUIRE_FALSE(pe.has_unfinished());
  REQUIRE(pe.pool().num_used() == 0);
  pe.set_logits_observer(nullptr);
  auto const again = pe.generate(prompts_of(gs), params);
  for (std::size_t i = 0; i < gs.size(); ++i) require_same(again[i], ref[i]);
}

TEST_CASE("CUDA paged engine: sleep frees the device memory, device-to-device weights, input errors", "[model][paged][cuda]") {
  if (!have_gpu()) {
    WARN("no CUDA device: skipped");
    return;
  }
  GPTConfig const cfg = fixtures::tiny_llama_config(Arch::llama, 2, 61);
  auto const w = fixtures::perturbed_weights(cfg, 12, 0.3f);
  auto const gs = random_groups(3, 2, cfg.vocab_size, 63);
  auto const params = params_of(gs, sampled(12));
  GpuPaged pe(cfg);
  pe.load_weights(w);
  REQUIRE_FALSE(pe.has_kv_storage());
  auto const ref = pe.generate(prompts_of(gs), params);
  REQUIRE(pe.has_kv_storage());
  REQUIRE(pe.memory_bytes() >= pe.pool().bytes());
  pe.add_request("x", gs[0].prompt, params[0]);
  REQUIRE_THROWS_WITH(pe.sleep(), Catch::Contains("1 requests are in flight"));
  pe.abort("x");
  pe.sleep();
  REQUIRE(pe.is_sleeping());
  REQUIRE(pe.memory_bytes() == 0);
  pe.wake();
  auto const again = pe.generate(prompts_of(gs), params);
  for (std::size_t i = 0; i < gs.size(); ++i) require_same(again[i], ref[i]);
  // weights from another engine's device copy: the same outputs as from the host
  GpuPaged other(cfg);
  other.load_weights_device(pe.device_weights(), pe.layout().size(), pe.stream());
  REQUIRE(other.weights() == w);
  auto const dev = other.generate(prompts_of(gs), params);
  for (std::size_t i = 0; i < gs.size(); ++i) require_same(dev[i], ref[i]);
  // errors name the thing and the fix, before any work
  REQUIRE_THROWS_WITH(pe.load_weights(std::vector<float>(3)), Catch::Contains("3 floats for a model of"));
  REQUIRE_THROWS_WITH(GpuPaged(cfg, {}, 1.5), Catch::Contains("gpu_memory_utilization = 1.5"));
  std::vector<std::int32_t> bad = gs[0].prompt;
  bad.back() = cfg.vocab_size;
  REQUIRE_THROWS_WITH(pe.add_request("b", bad, params[0]), Catch::Contains("outside the vocabulary"));
  GPTConfig longer = cfg;
  longer.max_seq_len = rlflow::kernels::cuda::model::layers::max_attention_keys + 100;
  PagedEngineConfig pc;
  pc.kv_cache_bytes = pool_bytes(longer, 16, 800);
  GpuPaged lp(longer, pc);
  RequestParams p;
  p.max_tokens = rlflow::kernels::cuda::model::layers::max_attention_keys;
  REQUIRE_THROWS_WITH(lp.add_request("long", {3, 4}, p), Catch::Contains("attention kernel"));
  REQUIRE_FALSE(lp.has_unfinished());
}

TEST_CASE("CUDA paged engine: an abortable generation stops after a sampling step and frees every block", "[model][paged][cuda]") {
  if (!have_gpu()) {
    WARN("no CUDA device: skipped");
    return;
  }
  GPTConfig const cfg = gpt2_config();
  auto const w = fixtures::perturbed_weights(cfg, 71, 0.3f);
  GpuPaged pe(cfg);
  pe.load_weights(w);
  int const B = 6, P = 5;
  std::vector<std::int32_t> ids(std::size_t(B) * P);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = 3 + std::int32_t(i % 31);
  std::vector<std::int32_t> const mask(ids.size(), 1);
  std::vector<std::uint64_t> seeds{1, 2, 3, 4, 5, 6};
  SamplingParams sp = sampled(20);
  sp.eos_id = -1;
  std::atomic<bool> stop{true};
  rlflow::engine::GenerateControl ctl;
  ctl.abort = &stop;
  auto const r = pe.generate(Tensor::from(ids, Shape{B, P}), Tensor::from(mask, Shape{B, P}), sp, seeds, ctl);
  REQUIRE(r.unfinished.size() == std::size_t(B));  // every row stopped after its first token
  for (int g : r.unfinished_generated) REQUIRE(g == 1);
  REQUIRE_FALSE(pe.has_unfinished());
  REQUIRE(pe.pool().num_used() == 0);
  // the first token is the one a full run gives
  auto const full = pe.generate(Tensor::from(ids, Shape{B, P}), Tensor::from(mask, Shape{B, P}), sp, seeds);
  for (int b = 0; b < B; ++b) REQUIRE(r.responses.at<std::int32_t>(b, 0) == full.responses.at<std::int32_t>(b, 0));
}

}  // namespace test_paged_cuda
