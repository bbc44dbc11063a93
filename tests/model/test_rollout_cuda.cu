// tests/model/test_rollout_cuda.cu <-> include/rlflow/engine/cuda/rollout_engine.cuh,
// include/rlflow/model/cuda/sampling.cuh: the CUDA rollout engine against the CPU engine on
// random small configs of both families (GPT-2, and the Llama family's variants: Llama, Qwen2,
// Qwen3; GQA, q/k norm, biases, RoPE scalings, tied and untied heads): prefill and decode logits,
// KV-cache decode against the CPU training engine's full forward, tokens and log-probs of greedy
// and sampled generation, EOS stop, vocab_limit, sleep / wake; and the CUB sampler against
// engine::sample_token (after engine::min_p_filter) on identical logits (exactly the same tokens),
// with one set of filters per batch and with per-draw filters, rows and vocabularies.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>
#include <cstdint>
#include <random>
#include <vector>

#include <rlflow/config/device_memory_estimate.hpp>  // sampler_sort_keys
#include <rlflow/engine/rollout_engine.hpp>
#include <rlflow/engine/sampling.hpp>
#include <rlflow/engine/training_engine.hpp>
#include <rlflow/engine/cuda/rollout_engine.cuh>
#include <rlflow/model/cuda/sampling.cuh>

#include "../fixtures.hpp"  // for_each_tiny_llama, tiny_llama_config, perturbed_weights, describe

namespace {

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

rlflow::model::GPTConfig random_config(std::mt19937& g) {
  int const vocab = 20 + int(g() % 60u), layers = 1 + int(g() % 3u), heads = 1 << (g() % 3u);  // heads 1, 2, 4
  return {.vocab_size = vocab, .max_seq_len = 48, .n_layer = layers, .n_head = heads,
          .n_embd = heads * (8 * (1 + int(g() % 4u))),  // head_dim 8..32
          .seed = g()};
}

std::vector<float> random_weights(rlflow::model::GPTConfig const& cfg, std::mt19937& g) {
  std::vector<float> w(rlflow::model::param_count(cfg));
  rlflow::model::init_params(cfg, w);
  std::normal_distribution<float> d(0.0f, 0.3f);  // spread the logits so sampling is not uniform
  for (auto& x : w) x += d(g);
  return w;
}

struct Prompts {
  rlflow::Tensor ids, mask;
  std::vector<std::int32_t> hid, hmask;
};
Prompts random_prompts(int B, int P, int V, std::mt19937& g) {
  Prompts p;
  p.hid.assign(std::size_t(B) * P, 0);
  p.hmask.assign(p.hid.size(), 0);
  for (int b = 0; b < B; ++b) {
    int const len = 1 + int(g() % unsigned(P));
    for (int t = P - len; t < P; ++t) {
      p.hid[std::size_t(b) * P + t] = std::int32_t(g() % unsigned(V));
      p.hmask[std::size_t(b) * P + t] = 1;
    }
  }
  p.ids = rlflow::Tensor::from(p.hid, rlflow::Shape{B, P});
  p.mask = rlflow::Tensor::from(p.hmask, rlflow::Shape{B, P});
  return p;
}

void require_close(float a, float b) { REQUIRE(a == Approx(b).epsilon(1e-4).margin(1e-4)); }

//! Prefill and decode logits of the CUDA engine (with and without its KV cache) against the CPU
//! engine's, and the decoded logits against the CPU training engine's full forward.
void check_prefill_decode(rlflow::model::GPTConfig const& cfg, std::vector<float> const& w, std::mt19937& g) {
  int const V = cfg.vocab_size, B = 1 + int(g() % 5u), P = 3 + int(g() % 10u), steps = 6;
  INFO("V " << V << " L " << cfg.n_layer << " NH " << cfg.n_head << " C " << cfg.n_embd << " B " << B << " P " << P);
  rlflow::engine::RolloutEngine cpu(cfg);
  rlflow::engine::cuda::RolloutEngine gpu(cfg), gpu_nocache(cfg);
  cpu.load_weights(w);
  gpu.load_weights(w);
  gpu_nocache.load_weights(w);
  gpu_nocache.set_use_kv_cache(false);
  REQUIRE(gpu.weights() == w);
  auto pr = random_prompts(B, P, V, g);
  auto c0 = cpu.prefill(pr.ids, pr.mask, steps);
  std::vector<float> ref(c0.begin(), c0.end());
  auto g0 = gpu.prefill(pr.ids, pr.mask, steps);
  auto n0 = gpu_nocache.prefill(pr.ids, pr.mask, steps);
  REQUIRE(g0.size() == ref.size());
  for (std::size_t i = 0; i < ref.size(); ++i) {
    require_close(g0[i], ref[i]);
    require_close(n0[i], ref[i]);
  }
  // full sequences for the full-forward check: [prompt | tokens], mask 1 on the new tokens
  int const T = P + steps - 1;
  std::vector<std::int32_t> full(std::size_t(B) * T, 0), fmask(full.size(), 0);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < P; ++t) {
      full[std::size_t(b) * T + t] = pr.hid[std::size_t(b) * P + t];
      fmask[std::size_t(b) * T + t] = pr.hmask[std::size_t(b) * P + t];
    }
  std::vector<std::vector<float>> dec;
  for (int s = 0; s < steps - 1; ++s) {
    std::vector<std::int32_t> tok(B);
    for (int b = 0; b < B; ++b) {
      tok[std::size_t(b)] = std::int32_t(g() % unsigned(V));
      full[std::size_t(b) * T + P + s] = tok[std::size_t(b)];
      fmask[std::size_t(b) * T + P + s] = 1;
    }
    auto cs = cpu.decode(tok);
    std::vector<float> cref(cs.begin(), cs.end());
    auto gs = gpu.decode(tok);
    std::vector<float> gv(gs.begin(), gs.end());
    auto ns = gpu_nocache.decode(tok);
    for (std::size_t i = 0; i < cref.size(); ++i) {
      require_close(gv[i], cref[i]);
      require_close(ns[i], cref[i]);
    }
    dec.push_back(gv);
  }
  // KV-cache decode == the full forward's logits at the same positions (the CPU training engine's)
  rlflow::engine::TrainingEngine full_forward(cfg);
  full_forward.load_weights(w);
  rlflow::Tensor const all_t = full_forward.compute_logits(rlflow::Tensor::from(full, rlflow::Shape{B, T}),
                                                           rlflow::Tensor::from(fmask, rlflow::Shape{B, T}));
  auto const all = all_t.span<float>();
  for (int s = 0; s < steps - 1; ++s)
    for (int b = 0; b < B; ++b)
      for (int v = 0; v < V; ++v)
        require_close(dec[std::size_t(s)][std::size_t(b) * V + v], all[(std::size_t(b) * T + P + s) * V + v]);
  gpu.decode(std::vector<std::int32_t>(B, 0));  // fills the last of the S = P + steps slots
  REQUIRE_THROWS_AS(gpu.decode(std::vector<std::int32_t>(B, 0)), rlflow::value_error);  // cache full
}

//! generate() of the CUDA engine against the CPU engine's, token for token (greedy, sampling,
//! top-k, top-k + top-p; with and without EOS), and a row's tokens independent of its batch.
void check_generate(rlflow::model::GPTConfig const& cfg, std::vector<float> const& w, std::mt19937& g, int trial) {
  int const V = cfg.vocab_size, B = 1 + int(g() % 7u), P = 2 + int(g() % 12u);
  rlflow::engine::RolloutEngine cpu(cfg);
  rlflow::engine::cuda::RolloutEngine gpu(cfg);
  cpu.load_weights(w);
  gpu.load_weights(w);
  auto pr = random_prompts(B, P, V, g);
  std::vector<std::uint64_t> seeds(B);
  for (auto& s : seeds) s = g();
  rlflow::engine::SamplingParams sps[4];
  sps[0].temperature = 0.0f;                                          // greedy
  sps[1].temperature = 1.0f;                                          // plain sampling
  sps[2].temperature = 0.8f; sps[2].top_k = 6;                        // top-k
  sps[3].temperature = 1.2f; sps[3].top_k = 10; sps[3].top_p = 0.9f;  // top-k + top-p
  for (auto& sp : sps) {
    sp.max_new_tokens = 12;
    sp.eos_id = trial % 2 == 0 ? 2 : -1;
    sp.pad_id = 0;
    INFO("trial " << trial << " V " << V << " B " << B << " P " << P << " T " << sp.temperature << " top_k " << sp.top_k
                  << " top_p " << sp.top_p << " eos " << sp.eos_id);
    auto rc = cpu.generate(pr.ids, pr.mask, sp, seeds);
    auto rg = gpu.generate(pr.ids, pr.mask, sp, seeds);
    auto ct = rc.responses.span<std::int32_t>(), gt = rg.responses.span<std::int32_t>();
    auto cm = rc.response_mask.span<std::int32_t>(), gm = rg.response_mask.span<std::int32_t>();
    auto cl = rc.log_probs.span<float>(), gl = rg.log_probs.span<float>();
    REQUIRE(gt.size() == ct.size());
    for (std::size_t i = 0; i < ct.size(); ++i) {
      REQUIRE(gt[i] == ct[i]);
      REQUIRE(gm[i] == cm[i]);
      require_close(gl[i], cl[i]);
    }
    if (sp.eos_id >= 0)  // nothing after an EOS
      for (int b = 0; b < B; ++b) {
        bool done = false;
        for (int j = 0; j < sp.max_new_tokens; ++j) {
          std::size_t const at = std::size_t(b) * sp.max_new_tokens + j;
          if (done) REQUIRE((gm[at] == 0 && gt[at] == sp.pad_id));
          if (gt[at] == sp.eos_id && gm[at] == 1) done = true;
        }
      }
  }
  // a row's tokens do not depend on the batch: row 0 alone gives the same tokens
  std::vector<std::int32_t> hid(pr.hid.begin(), pr.hid.begin() + P), hm(pr.hmask.begin(), pr.hmask.begin() + P);
  auto ids1 = rlflow::Tensor::from(hid, rlflow::Shape{1, P}), m1 = rlflow::Tensor::from(hm, rlflow::Shape{1, P});
  std::vector<std::uint64_t> s1{seeds[0]};
  auto r1 = gpu.generate(ids1, m1, sps[3], s1);
  auto rb = gpu.generate(pr.ids, pr.mask, sps[3], seeds);
  for (int j = 0; j < sps[3].max_new_tokens; ++j)
    REQUIRE(r1.responses.span<std::int32_t>()[std::size_t(j)] == rb.responses.span<std::int32_t>()[std::size_t(j)]);
}

}  // namespace

TEST_CASE("CUDA sampler draws the CPU sampler's tokens on identical logits", "[model][rollout][cuda]") {
  if (!have_gpu()) {
    WARN("no GPU: CUDA sampler test skipped");
    return;
  }
  std::mt19937 g(7);
  cudaStream_t st;
  REQUIRE(cudaStreamCreate(&st) == cudaSuccess);
  rlflow::kernels::cuda::model::Sampler sampler;
  for (int V : {2, 37, 300, 1000}) {
    int const n = 9;
    std::vector<float> lg(std::size_t(n) * V);
    std::normal_distribution<float> d(0.0f, 2.0f);
    for (auto& x : lg) x = d(g);
    for (int i = 0; i < n; ++i) {  // ties, and +0 / -0, to check the (logit desc, id asc) order
      lg[std::size_t(i) * V + (V - 1)] = lg[std::size_t(i) * V];
      if (i % 3 == 0) { lg[std::size_t(i) * V] = 0.0f; lg[std::size_t(i) * V + V / 2] = -0.0f; }
    }
    float* d_lg = nullptr;
    REQUIRE(cudaMalloc(&d_lg, lg.size() * sizeof(float)) == cudaSuccess);
    REQUIRE(cudaMemcpy(d_lg, lg.data(), lg.size() * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
    struct P { float t; int k; float p; };
    for (P sp : {P{0.0f, 0, 1.0f}, P{1.0f, 0, 1.0f}, P{0.7f, 5, 1.0f}, P{1.3f, 0, 0.8f}, P{0.9f, 3, 0.5f}, P{1.0f, 1, 1.0f},
                 P{1.0f, 0, 0.05f}, P{2.0f, V + 3, 0.95f}}) {
      rlflow::engine::SamplingParams cp;
      cp.temperature = sp.t;
      cp.top_k = sp.k;
      cp.top_p = sp.p;
      for (std::uint64_t step = 0; step < 5; ++step) {
        std::vector<std::uint64_t> seeds(n);
        for (auto& s : seeds) s = (std::uint64_t(g()) << 32) | g();
        std::vector<std::int32_t> tok(n);
        std::vector<float> lp(n);
        sampler.sample(d_lg, n, V, sp.t, sp.k, sp.p, seeds.data(), step, tok.data(), lp.data(), st);
        std::vector<std::int32_t> idx(V);
        std::vector<double> w(V);
        for (int i = 0; i < n; ++i) {
          float const* row = lg.data() + std::size_t(i) * V;
          std::int32_t const want = rlflow::engine::sample_token(row, V, cp, seeds[std::size_t(i)], step, idx.data(), w.data());
          INFO("V " << V << " T " << sp.t << " top_k " << sp.k << " top_p " << sp.p << " row " << i << " step " << step);
          REQUIRE(tok[std::size_t(i)] == want);
          float const inv_t = sp.t > 0.0f ? 1.0f / sp.t : 1.0f;
          require_close(lp[std::size_t(i)], rlflow::model::layers::logprob_forward_row(row, V, want, inv_t).log_prob);
        }
      }
    }
    cudaFree(d_lg);
  }
  cudaStreamDestroy(st);
}

TEST_CASE("CUDA sampler's per-draw filters draw the CPU's min-p filter and sampler tokens, in any chunking", "[model][rollout][cuda]") {
  if (!have_gpu()) {
    WARN("no GPU: CUDA sampler test skipped");
    return;
  }
  // rows of stride ld; several draws per row (a group's first tokens), each with its own
  // vocabulary limit, temperature (0: greedy), top-k, top-p, min-p, seed and counter; sorted in one
  // chunk, in chunks of a few draws, and one draw at a time (a limit below every vocabulary)
  std::mt19937 g(11);
  cudaStream_t st;
  REQUIRE(cudaStreamCreate(&st) == cudaSuccess);
  int const rows = 7, ld = 500, n = 41;
  std::vector<float> lg(std::size_t(rows) * ld);
  std::normal_distribution<float> nd(0.0f, 2.5f);
  for (auto& x : lg) x = nd(g);
  for (int r = 0; r < rows; ++r) lg[std::size_t(r) * ld + 3] = lg[std::size_t(r) * ld + 9];  // a tie
  float* d_lg = nullptr;
  REQUIRE(cudaMalloc(&d_lg, lg.size() * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMemcpy(d_lg, lg.data(), lg.size() * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  std::vector<rlflow::kernels::cuda::model::DrawSpec> specs(n);
  for (int i = 0; i < n; ++i) {
    auto& s = specs[std::size_t(i)];
    s.row = int(g() % unsigned(rows));
    s.seed = (std::uint64_t(g()) << 32) | g();
    s.counter = g() % 1000u;
    s.temperature = i % 7 == 0 || i == n - 1 ? 0.0f : 0.3f + 0.25f * float(g() % 6u);  // the last chunk: greedy, no sort
    s.top_k = i % 3 == 0 ? 1 + int(g() % 60u) : 0;
    s.top_p = i % 4 == 1 ? 0.2f + 0.15f * float(g() % 6u) : 1.0f;
    s.min_p = i % 5 >= 3 ? (i % 10 == 9 ? 1.0f : 0.01f + 0.05f * float(g() % 5u)) : 0.0f;
    s.vocab = i % 2 == 0 ? ld : 2 + int(g() % unsigned(ld - 2));
  }
  for (std::int64_t cap : {std::int64_t{1} << 24, std::int64_t{1200}, std::int64_t{1}}) {
    rlflow::kernels::cuda::model::Sampler sampler(cap);
    std::vector<std::int32_t> tok(n);
    std::vector<float> lp(n);
    sampler.sample_draws(d_lg, rows, ld, specs.data(), n, tok.data(), lp.data(), st);
    std::vector<std::int32_t> idx(ld);
    std::vector<double> w(ld);
    std::vector<float> filt(ld);
    for (int i = 0; i < n; ++i) {
      auto const& s = specs[std::size_t(i)];
      float const* row = lg.data() + std::size_t(s.row) * ld;
      rlflow::engine::SamplingParams cp;
      cp.temperature = s.temperature;
      cp.top_k = s.top_k;
      cp.top_p = s.top_p;
      float const* src = s.min_p > 0.0f && s.temperature > 0.0f
                             ? rlflow::engine::min_p_filter(row, s.vocab, s.temperature, s.min_p, filt.data())
                             : row;
      std::int32_t const want = rlflow::engine::sample_token(src, s.vocab, cp, s.seed, s.counter, idx.data(), w.data());
      INFO("sort limit " << cap << " draw " << i << ": row " << s.row << " vocab " << s.vocab << " T " << s.temperature << " top_k "
                         << s.top_k << " top_p " << s.top_p << " min_p " << s.min_p);
      REQUIRE(tok[std::size_t(i)] == want);
      float const inv_t = s.temperature > 0.0f ? 1.0f / s.temperature : 1.0f;
      require_close(lp[std::size_t(i)], rlflow::model::layers::logprob_forward_row(row, s.vocab, want, inv_t).log_prob);
    }
  }
  // the trainer's device memory estimate counts the sampler's default chunk
  STATIC_REQUIRE(rlflow::kernels::cuda::model::Sampler::default_max_sort_keys == rlflow::detail::sampler_sort_keys);
  // a bad spec is refused before any launch, naming the draw
  rlflow::kernels::cuda::model::Sampler sampler;
  std::vector<std::int32_t> tok(n);
  std::vector<float> lp(n);
  auto bad = specs;
  bad[5].vocab = ld + 1;
  REQUIRE_THROWS_WITH(sampler.sample_draws(d_lg, rows, ld, bad.data(), n, tok.data(), lp.data(), st), Catch::Contains("draw 5"));
  bad = specs;
  bad[8].min_p = 1.5f;
  REQUIRE_THROWS_WITH(sampler.sample_draws(d_lg, rows, ld, bad.data(), n, tok.data(), lp.data(), st), Catch::Contains("min_p = 1.5"));
  bad = specs;
  bad[12].row = rows;
  REQUIRE_THROWS_WITH(sampler.sample_draws(d_lg, rows, ld, bad.data(), n, tok.data(), lp.data(), st), Catch::Contains("draw 12"));
  cudaFree(d_lg);
  cudaStreamDestroy(st);
}

TEST_CASE("CUDA rollout prefill and KV-cache decode match the CPU engine and a full forward", "[model][rollout][cuda]") {
  if (!have_gpu()) {
    WARN("no GPU: CUDA rollout test skipped");
    return;
  }
  std::mt19937 g(11);
  for (int trial = 0; trial < 4; ++trial) {
    INFO("trial " << trial);
    auto const cfg = random_config(g);
    auto const w = random_weights(cfg, g);
    check_prefill_decode(cfg, w, g);
  }
}

TEST_CASE("CUDA rollout generate matches the CPU engine token for token", "[model][rollout][cuda]") {
  if (!have_gpu()) {
    WARN("no GPU: CUDA rollout test skipped");
    return;
  }
  std::mt19937 g(23);
  for (int trial = 0; trial < 6; ++trial) {
    auto const cfg = random_config(g);
    auto const w = random_weights(cfg, g);
    check_generate(cfg, w, g, trial);
  }
}

TEST_CASE("CUDA rollout runs the Llama family as the CPU engine: logits, KV-cache decode, tokens", "[model][rollout][cuda][llama]") {
  if (!have_gpu()) {
    WARN("no GPU: CUDA rollout test skipped");
    return;
  }
  std::mt19937 g(29);
  int trial = 0;
  fixtures::for_each_tiny_llama(7, 50, [&](rlflow::model::GPTConfig const& cfg, std::vector<float> const& w) {
    INFO(fixtures::describe(cfg));
    check_prefill_decode(cfg, w, g);
    check_generate(cfg, w, g, trial++);
  });
}

TEST_CASE("CUDA rollout samples and scores only ids below vocab_limit, as the CPU engine", "[model][rollout][cuda][llama]") {
  if (!have_gpu()) {
    WARN("no GPU: CUDA rollout test skipped");
    return;
  }
  auto cfg = fixtures::tiny_llama_config(rlflow::model::Arch::qwen2, 1, 3);
  cfg.vocab_size = 64;
  int const limit = 40;  // ids 40..63 are padding rows no tokenizer decodes
  auto w = fixtures::perturbed_weights(cfg, 8, 0.2f);
  rlflow::model::ParamLayout const lay(cfg);
  for (int v = limit; v < cfg.vocab_size; ++v)  // make the padding rows the likeliest ids
    for (int k = 0; k < cfg.n_embd; ++k) w[lay.lm_head + std::size_t(v) * cfg.n_embd + std::size_t(k)] *= 40.0f;
  std::mt19937 g(31);
  auto pr = random_prompts(3, 6, 30, g);
  std::vector<std::uint64_t> seeds{1, 2, 3};
  rlflow::engine::RolloutEngine cpu(cfg);
  rlflow::engine::cuda::RolloutEngine gpu(cfg);
  cpu.load_weights(w);
  gpu.load_weights(w);
  for (float temp : {0.0f, 1.0f}) {
    rlflow::engine::SamplingParams sp;
    sp.temperature = temp;
    sp.max_new_tokens = 16;
    INFO("temperature " << temp);
    auto const unlimited = gpu.generate(pr.ids, pr.mask, sp, seeds);
    bool padded = false;  // without the limit the padding rows are drawn (the test can fail)
    for (auto t : unlimited.responses.span<std::int32_t>()) padded |= t >= limit;
    CHECK(padded);
    sp.vocab_limit = limit;
    auto const rc = cpu.generate(pr.ids, pr.mask, sp, seeds);
    auto const rg = gpu.generate(pr.ids, pr.mask, sp, seeds);
    auto const ct = rc.responses.span<std::int32_t>(), gt = rg.responses.span<std::int32_t>();
    auto const cl = rc.log_probs.span<float>(), gl = rg.log_probs.span<float>();
    for (std::size_t i = 0; i < ct.size(); ++i) {
      REQUIRE(gt[i] < limit);
      REQUIRE(gt[i] == ct[i]);
      require_close(gl[i], cl[i]);
    }
  }
  // the low-level API still returns every row's logits
  auto const lg = gpu.prefill(pr.ids, pr.mask, 4);
  REQUIRE(lg.size() == std::size_t(3) * cfg.vocab_size);
}

TEST_CASE("CUDA rollout sleep frees device memory and wake resumes", "[model][rollout][cuda]") {
  if (!have_gpu()) {
    WARN("no GPU: CUDA rollout test skipped");
    return;
  }
  std::mt19937 g(5);
  auto const gpt2 = random_config(g);
  auto const qwen3 = fixtures::tiny_llama_config(rlflow::model::Arch::qwen3, 1, 4);  // also holds RoPE tables
  for (auto const& cfg : {gpt2, qwen3}) {
    INFO("arch " << rlflow::model::arch_name(cfg.arch));
    auto const w = random_weights(cfg, g);
    rlflow::engine::cuda::RolloutEngine gpu(cfg);
    gpu.load_weights(w);
    REQUIRE_THROWS_AS(gpu.load_weights(std::vector<float>(3)), rlflow::shape_error);
    auto pr = random_prompts(3, 6, cfg.vocab_size, g);
    rlflow::engine::SamplingParams sp;
    sp.temperature = 0.9f;
    sp.top_k = 4;
    sp.max_new_tokens = 8;
    std::vector<std::uint64_t> seeds{1, 2, 3};
    auto r0 = gpu.generate(pr.ids, pr.mask, sp, seeds);
    REQUIRE(gpu.memory_bytes() > 0);
    std::size_t free0 = 0, free1 = 0, total = 0;
    REQUIRE(cudaMemGetInfo(&free0, &total) == cudaSuccess);
    gpu.sleep();
    REQUIRE(gpu.is_sleeping());
    REQUIRE(gpu.memory_bytes() == 0);
    REQUIRE(cudaMemGetInfo(&free1, &total) == cudaSuccess);
    REQUIRE(free1 >= free0);
    REQUIRE_THROWS_AS(gpu.generate(pr.ids, pr.mask, sp, seeds), rlflow::value_error);
    gpu.wake();
    auto r1 = gpu.generate(pr.ids, pr.mask, sp, seeds);
    auto a = r0.responses.span<std::int32_t>(), b = r1.responses.span<std::int32_t>();
    for (std::size_t i = 0; i < a.size(); ++i) REQUIRE(a[i] == b[i]);
    REQUIRE_THROWS_AS(gpu.generate(pr.ids, pr.mask, sp, std::vector<std::uint64_t>{1}), rlflow::shape_error);
  }
}
