// tests/model/test_lora.cpp <-> include/rlflow/model/lora.hpp, model/gpt.hpp (enable_lora),
// engine/training_engine.hpp (LoRA training), engine/paged_engine.hpp (merge_lora),
// engine/checkpoint.hpp (LoRA checkpoints), engine/peft.hpp (PEFT adapter folders): LoRA on the
// GPT-2 and Llama families over random weights, adapters and tokens. References: the base model
// (step 0), the merged full-weight model (logits, and the adapters' gradients by the chain rule
// from the full model's weight gradients), finite differences, and the rollout engine.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <rlflow/engine/checkpoint.hpp>
#include <rlflow/engine/paged_engine.hpp>
#include <rlflow/engine/peft.hpp>
#include <rlflow/engine/training_engine.hpp>

#include "fixtures.hpp"

namespace test_lora {

using rlflow::DType;
using rlflow::Shape;
using rlflow::Tensor;
using rlflow::engine::TrainingEngine;
using rlflow::model::Arch;
using rlflow::model::GPTConfig;
using rlflow::model::LoraConfig;
using rlflow::model::LoraSite;

namespace {

GPTConfig lora_cfg(Arch arch) {
  GPTConfig c;
  c.arch = arch;
  c.vocab_size = 37;
  c.max_seq_len = 32;
  c.n_layer = 2;
  c.seed = 11;
  if (arch == Arch::gpt2) {
    c.n_head = 2;
    c.n_embd = 16;
  } else {
    c.n_head = 4;
    c.n_kv_head = 2;
    c.n_embd = 24;
    c.head_size = arch == Arch::qwen3 ? 10 : 0;
    c.intermediate_size = 30;
    c.qkv_bias = arch == Arch::qwen2;
    c.qk_norm = arch == Arch::qwen3;
    c.tie_word_embeddings = arch != Arch::llama;
    c.rope_theta = 500.0;
  }
  c.validate();
  return c;
}

LoraConfig lora_of(Arch arch, int r, bool all) {
  LoraConfig lc;
  lc.rank = r;
  lc.alpha = 2.5 * r;
  lc.seed = 5;
  if (!all) lc.target_modules = arch == Arch::gpt2 ? std::vector<std::string>{"c_attn", "c_proj"}
                                                   : std::vector<std::string>{"q_proj", "v_proj", "o_proj", "down_proj"};
  return lc;
}

struct Batch {
  Tensor ids, mask;
  int R;
};
//! B rows of [left-padded prompt (P) | right-padded response (R)].
Batch random_batch(std::mt19937& g, int B, int P, int R, int V) {
  Batch x{Tensor::empty(DType::int32, Shape{B, P + R}), Tensor::empty(DType::int32, Shape{B, P + R}), R};
  std::uniform_int_distribution<int> tok(0, V - 1), plen(1, P), rlen(1, R);
  for (int b = 0; b < B; ++b) {
    int const pl = plen(g), rl = rlen(g);
    for (int t = 0; t < P + R; ++t) {
      bool const real = (t < P && t >= P - pl) || (t >= P && t < P + rl);
      x.ids.at<std::int32_t>(b, t) = real ? tok(g) : 0;
      x.mask.at<std::int32_t>(b, t) = real ? 1 : 0;
    }
  }
  return x;
}

void randomize(std::span<float> v, std::mt19937& g, float sd) {
  std::normal_distribution<float> n(0.0f, sd);
  for (auto& x : v) x = n(g);
}

Tensor random_grad(std::mt19937& g, int B, int R) {
  Tensor t = Tensor::empty(DType::float32, Shape{B, R});
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = n(g);
  return t;
}

double rel_err(float a, float b) { return std::abs(double(a) - double(b)) / std::max(1.0, std::abs(double(b))); }

//! A LoRA engine with random base weights and random (nonzero) adapters.
void random_lora_engine(TrainingEngine& e, GPTConfig const& cfg, LoraConfig const& lc, std::mt19937& g) {
  e.load_weights(fixtures::perturbed_weights(cfg, 3, 0.3f));
  e.enable_lora(lc);
  randomize(e.trainable(), g, 0.2f);
}

}  // namespace

TEST_CASE("step 0 logits equal the base model's", "[lora]") {
  auto const arch = GENERATE(Arch::gpt2, Arch::llama, Arch::qwen2, Arch::qwen3);
  auto const all = GENERATE(true, false);
  GPTConfig const cfg = lora_cfg(arch);
  std::mt19937 g(17);
  auto const w = fixtures::perturbed_weights(cfg, 3, 0.3f);
  TrainingEngine base(cfg), lora(cfg);
  base.load_weights(w);
  lora.load_weights(w);
  lora.enable_lora(lora_of(arch, 4, all));
  auto const a = lora.trainable();
  REQUIRE(std::any_of(a.begin(), a.end(), [](float x) { return x != 0.0f; }));  // A is random
  Batch x = random_batch(g, 3, 6, 5, cfg.vocab_size);
  Tensor const l0 = base.compute_logits(x.ids, x.mask), l1 = lora.compute_logits(x.ids, x.mask);
  for (std::int64_t i = 0; i < l0.numel(); ++i) REQUIRE(l1.data<float>()[i] == l0.data<float>()[i]);
}

TEST_CASE("adapters on the fly equal the merged weights", "[lora]") {
  auto const arch = GENERATE(Arch::gpt2, Arch::llama, Arch::qwen2, Arch::qwen3);
  auto const all = GENERATE(true, false);
  GPTConfig const cfg = lora_cfg(arch);
  std::mt19937 g(23);
  TrainingEngine lora(cfg), merged(cfg);
  random_lora_engine(lora, cfg, lora_of(arch, 3, all), g);
  std::vector<float> full(lora.layout().size());
  lora.policy_weights(full);
  merged.load_weights(full);
  Batch x = random_batch(g, 3, 7, 6, cfg.vocab_size);
  Tensor const l0 = merged.compute_logits(x.ids, x.mask), l1 = lora.compute_logits(x.ids, x.mask);
  double worst = 0.0, moved = 0.0;
  TrainingEngine base(cfg);
  base.load_weights(std::vector<float>(lora.params().begin(), lora.params().end()));
  Tensor const lb = base.compute_logits(x.ids, x.mask);
  for (std::int64_t i = 0; i < l0.numel(); ++i) {
    worst = std::max(worst, rel_err(l1.data<float>()[i], l0.data<float>()[i]));
    moved = std::max(moved, std::abs(double(l1.data<float>()[i]) - double(lb.data<float>()[i])));
  }
  CHECK(worst < 1e-5);
  CHECK(moved > 1e-3);  // the adapters do change the outputs
}

TEST_CASE("adapter gradients equal the chain rule through the merged model, and finite differences", "[lora]") {
  auto const arch = GENERATE(Arch::gpt2, Arch::llama, Arch::qwen2, Arch::qwen3);
  GPTConfig const cfg = lora_cfg(arch);
  LoraConfig const lc = lora_of(arch, 3, true);
  std::mt19937 g(29);
  TrainingEngine lora(cfg), merged(cfg);
  random_lora_engine(lora, cfg, lc, g);
  std::vector<float> full(lora.layout().size());
  lora.policy_weights(full);
  merged.load_weights(full);
  Batch x = random_batch(g, 3, 6, 5, cfg.vocab_size);
  Tensor const dl = random_grad(g, 3, 5), de = random_grad(g, 3, 5);
  lora.forward_backward(x.ids, x.mask, x.R, dl, de, 0.9f);
  merged.forward_backward(x.ids, x.mask, x.R, dl, de, 0.9f);
  REQUIRE(lora.grads().size() == lora.lora_layout().size());
  // dA = s B^T dW, dB = s dW A^T, with dW (out, in) the merged model's gradient of the module's rows
  auto const& ll = lora.lora_layout();
  auto const P = lora.trainable();
  auto const G = lora.grads();
  auto const GW = merged.grads();
  rlflow::model::ParamLayout const pl(cfg);
  int const r = ll.rank();
  double const s = ll.scaling();
  double worst = 0.0, scale = 0.0;
  for (auto const& m : ll.modules()) {
    auto const& L = pl.layers[std::size_t(m.layer)];
    bool const nt = m.site == LoraSite::qkv || m.site == LoraSite::fc;
    std::size_t const w0 = m.site == LoraSite::qkv ? L.qkv_w : m.site == LoraSite::fc ? L.fc_w : m.site == LoraSite::proj ? L.proj_w : L.fcproj_w;
    auto dW = [&](int o, int i) {
      return double(nt ? GW[w0 + std::size_t(m.out0 + o) * std::size_t(m.in) + std::size_t(i)]
                       : GW[w0 + std::size_t(i) * std::size_t(m.out) + std::size_t(o)]);
    };
    for (int k = 0; k < r; ++k)
      for (int i = 0; i < m.in; ++i) {
        double want = 0.0;
        for (int o = 0; o < m.out; ++o) want += s * double(P[m.b + std::size_t(o) * r + std::size_t(k)]) * dW(o, i);
        worst = std::max(worst, std::abs(double(G[m.a + std::size_t(k) * m.in + std::size_t(i)]) - want));
        scale = std::max(scale, std::abs(want));
      }
    for (int o = 0; o < m.out; ++o)
      for (int k = 0; k < r; ++k) {
        double want = 0.0;
        for (int i = 0; i < m.in; ++i) want += s * dW(o, i) * double(P[m.a + std::size_t(k) * m.in + std::size_t(i)]);
        worst = std::max(worst, std::abs(double(G[m.b + std::size_t(o) * r + std::size_t(k)]) - want));
        scale = std::max(scale, std::abs(want));
      }
  }
  CHECK(scale > 1e-3);
  CHECK(worst <= 1e-4 * scale);

  // finite differences of L = sum(dl * logp + de * entropy) on a few random adapter entries
  auto loss = [&] {
    auto const out = lora.compute_log_prob(x.ids, x.mask, x.R, 0.9f, true);
    double L = 0.0;
    for (std::int64_t i = 0; i < dl.numel(); ++i)
      L += double(dl.data<float>()[i]) * out.log_probs.data<float>()[i] + double(de.data<float>()[i]) * out.entropy.data<float>()[i];
    return L;
  };
  std::uniform_int_distribution<std::size_t> pick(0, P.size() - 1);
  std::vector<float> const grad(G.begin(), G.end());
  for (int t = 0; t < 12; ++t) {
    std::size_t const i = pick(g);
    float const keep = P[i];
    float const h = 1e-2f;
    P[i] = keep + h;
    double const up = loss();
    P[i] = keep - h;
    double const down = loss();
    P[i] = keep;
    double const fd = (up - down) / (2.0 * double(h));
    CHECK(std::abs(fd - double(grad[i])) <= 2e-2 * std::max(1.0, std::abs(fd)));
  }
}

TEST_CASE("training moves the adapters only, optimizer state covers the adapters", "[lora]") {
  auto const arch = GENERATE(Arch::gpt2, Arch::qwen2);
  GPTConfig const cfg = lora_cfg(arch);
  std::mt19937 g(31);
  rlflow::engine::OptimizerConfig oc;
  oc.lr = 1e-2f;
  oc.weight_decay = 0.1f;
  TrainingEngine e(cfg, oc);
  e.load_weights(fixtures::perturbed_weights(cfg, 3, 0.3f));
  e.enable_lora(lora_of(arch, 4, true));
  std::vector<float> const base(e.params().begin(), e.params().end());
  std::vector<float> const a0(e.trainable().begin(), e.trainable().end());
  for (int step = 0; step < 3; ++step) {
    Batch x = random_batch(g, 4, 5, 4, cfg.vocab_size);
    e.zero_grad();
    e.forward_backward(x.ids, x.mask, x.R, random_grad(g, 4, 4));
    e.optimizer_step();
  }
  REQUIRE(std::equal(base.begin(), base.end(), e.params().begin()));
  std::size_t changed = 0;
  for (std::size_t i = 0; i < a0.size(); ++i) changed += a0[i] != e.trainable()[i];
  CHECK(changed > a0.size() / 2);
  CHECK(e.grads().size() == e.lora_layout().size());
  CHECK(e.optimizer().m().size() == e.lora_layout().size());
}

TEST_CASE("after a sync the rollout samples from base + adapters: its log-probs equal the trainer's", "[lora]") {
  auto const arch = GENERATE(Arch::gpt2, Arch::llama, Arch::qwen3);
  GPTConfig const cfg = lora_cfg(arch);
  std::mt19937 g(37);
  TrainingEngine e(cfg);
  random_lora_engine(e, cfg, lora_of(arch, 4, true), g);
  rlflow::engine::PagedEngineConfig pc;
  pc.block_size = 4;
  rlflow::engine::PagedEngine pe(cfg, pc);
  for (int sync = 0; sync < 2; ++sync) {
    if (sync == 1) randomize(e.trainable(), g, 0.2f);  // the adapters trained on
    pe.load_weights(e.params());
    pe.merge_lora(e.lora_layout(), e.trainable());
    int const B = 4, P = 5, R = 6;
    std::vector<std::int32_t> ids(std::size_t(B) * P), mask(std::size_t(B) * P, 1);
    for (auto& t : ids) t = 3 + std::int32_t(g() % unsigned(cfg.vocab_size - 3));
    std::vector<std::uint64_t> seeds;
    for (int b = 0; b < B; ++b) seeds.push_back(g());
    rlflow::engine::SamplingParams sp;
    sp.max_new_tokens = R;
    auto const out = pe.generate(Tensor::from(ids, Shape{B, P}), Tensor::from(mask, Shape{B, P}), sp, seeds);
    Tensor full_ids = Tensor::empty(DType::int32, Shape{B, P + R}), full_mask = Tensor::empty(DType::int32, Shape{B, P + R});
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < P + R; ++t) {
        full_ids.at<std::int32_t>(b, t) = t < P ? ids[std::size_t(b) * P + t] : out.responses.at<std::int32_t>(b, t - P);
        full_mask.at<std::int32_t>(b, t) = t < P ? 1 : out.response_mask.at<std::int32_t>(b, t - P);
      }
    auto const lp = e.compute_log_prob(full_ids, full_mask, R, 1.0f, false);
    int scored = 0;
    for (int b = 0; b < B; ++b)
      for (int j = 0; j < R; ++j)
        if (out.response_mask.at<std::int32_t>(b, j)) {
          CHECK(rel_err(out.log_probs.at<float>(b, j), lp.log_probs.at<float>(b, j)) < 1e-5);
          ++scored;
        }
    CHECK(scored > 0);
  }
}

TEST_CASE("a LoRA checkpoint resumes exactly", "[lora]") {
  auto const arch = GENERATE(Arch::gpt2, Arch::qwen3);
  GPTConfig const cfg = lora_cfg(arch);
  LoraConfig const lc = lora_of(arch, 2, false);
  auto const dir = std::filesystem::temp_directory_path() / ("rlflow_lora_ckpt_" + std::to_string(int(arch)));
  std::filesystem::create_directories(dir);
  std::mt19937 g(41);
  std::vector<Batch> xs;
  std::vector<Tensor> ds;
  for (int i = 0; i < 4; ++i) xs.push_back(random_batch(g, 3, 5, 4, cfg.vocab_size)), ds.push_back(random_grad(g, 3, 4));
  rlflow::engine::OptimizerConfig oc;
  oc.lr = 1e-2f;
  auto train = [&](TrainingEngine& e, int from, int to) {
    for (int i = from; i < to; ++i) {
      e.zero_grad();
      e.forward_backward(xs[std::size_t(i)].ids, xs[std::size_t(i)].mask, 4, ds[std::size_t(i)]);
      e.optimizer_step();
    }
  };
  auto const w = fixtures::perturbed_weights(cfg, 3, 0.3f);
  TrainingEngine a(cfg, oc), b(cfg, oc);
  a.load_weights(w);
  a.enable_lora(lc);
  train(a, 0, 2);
  rlflow::engine::save_checkpoint(dir / "ckpt.safetensors", a);
  train(a, 2, 4);
  b.enable_lora(lc);
  rlflow::engine::load_checkpoint(dir / "ckpt.safetensors", b);
  REQUIRE(b.step() == 2);
  train(b, 2, 4);
  REQUIRE(std::equal(a.trainable().begin(), a.trainable().end(), b.trainable().begin()));
  REQUIRE(std::equal(a.params().begin(), a.params().end(), b.params().begin()));
  REQUIRE(std::equal(a.optimizer().v().begin(), a.optimizer().v().end(), b.optimizer().v().begin()));
  // a checkpoint with other adapters (or none) is refused by name
  TrainingEngine c(cfg, oc);
  CHECK_THROWS_WITH(rlflow::engine::load_checkpoint(dir / "ckpt.safetensors", c), Catch::Contains("lora_rank"));
  TrainingEngine d(cfg, oc);
  d.enable_lora(lora_of(arch, 3, false));
  CHECK_THROWS_WITH(rlflow::engine::load_checkpoint(dir / "ckpt.safetensors", d), Catch::Contains("r=2"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("bad LoRA settings are refused by name", "[lora]") {
  GPTConfig const cfg = lora_cfg(Arch::qwen2);
  TrainingEngine e(cfg);
  LoraConfig lc;
  lc.rank = -1;
  CHECK_THROWS_WITH(e.enable_lora(lc), Catch::Contains("lora_rank = -1"));
  lc.rank = 4;
  lc.target_modules = {"q_proj", "c_attn"};
  CHECK_THROWS_WITH(e.enable_lora(lc), Catch::Contains("'c_attn'") && Catch::Contains("gate_proj"));
  lc.target_modules = {"all-linear"};
  lc.alpha = 0.0;
  CHECK_THROWS_WITH(e.enable_lora(lc), Catch::Contains("lora_alpha"));
  GPTConfig critic = cfg;
  critic.value_head = true;
  TrainingEngine cr(critic);
  CHECK_THROWS_WITH(cr.enable_lora(lora_of(Arch::qwen2, 2, true)), Catch::Contains("critic"));
}

TEST_CASE("a PEFT export reloads to the same logits, bad folders are refused by name", "[lora][peft]") {
  auto const arch = GENERATE(Arch::gpt2, Arch::llama, Arch::qwen2, Arch::qwen3);
  auto const all = GENERATE(true, false);
  GPTConfig const cfg = lora_cfg(arch);
  std::mt19937 g(43);
  TrainingEngine a(cfg), b(cfg);
  random_lora_engine(a, cfg, lora_of(arch, 3, all), g);
  auto const dir = std::filesystem::temp_directory_path() / ("rlflow_peft_" + std::to_string(int(arch)) + (all ? "a" : "l"));
  std::filesystem::remove_all(dir);
  rlflow::engine::save_peft(dir, a, "Qwen/Qwen2.5-0.5B");
  auto const p = rlflow::engine::load_peft(dir, cfg);
  CHECK(p.config.rank == 3);
  CHECK(p.config.alpha == 7.5);
  CHECK(p.base_model_name_or_path == "Qwen/Qwen2.5-0.5B");
  b.load_weights(std::vector<float>(a.params().begin(), a.params().end()));
  rlflow::engine::apply_peft(b, p);
  REQUIRE(std::equal(a.trainable().begin(), a.trainable().end(), b.trainable().begin()));
  Batch x = random_batch(g, 2, 5, 4, cfg.vocab_size);
  Tensor const la = a.compute_logits(x.ids, x.mask), lb = b.compute_logits(x.ids, x.mask);
  for (std::int64_t i = 0; i < la.numel(); ++i) REQUIRE(la.data<float>()[i] == lb.data<float>()[i]);
  // the merged export is the HF folder of the merged weights
  rlflow::engine::export_merged_hf(dir / "merged", a);
  auto const merged = rlflow::model::hf::load_model(dir / "merged");
  std::vector<float> want(a.layout().size());
  a.policy_weights(want);
  REQUIRE(merged.params.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) REQUIRE(merged.params[i] == want[i]);
  // another base model (wider) or another family does not fit
  GPTConfig wide = cfg;
  wide.n_embd = arch == Arch::gpt2 ? 24 : 32;
  CHECK_THROWS_WITH(rlflow::engine::load_peft(dir, wide), Catch::Contains("shape") && Catch::Contains("lora_"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("adapter_config.json fields are checked", "[lora][peft]") {
  using rlflow::engine::parse_adapter_config;
  CHECK(parse_adapter_config(R"({"r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj"]})", "t").rank == 8);
  CHECK(parse_adapter_config(R"({"r": 8, "target_modules": "all-linear"})", "t").alpha == 8.0);
  CHECK_THROWS_WITH(parse_adapter_config(R"({"r": 0, "target_modules": "all-linear"})", "t"), Catch::Contains("r = 0"));
  CHECK_THROWS_WITH(parse_adapter_config(R"({"r": 4.5, "target_modules": "all-linear"})", "t"), Catch::Contains("r = 4.5"));
  CHECK_THROWS_WITH(parse_adapter_config(R"({"r": 4, "target_modules": ".*proj"})", "t"), Catch::Contains("regular expression"));
  CHECK_THROWS_WITH(parse_adapter_config(R"({"r": 4, "target_modules": "all-linear", "use_dora": true})", "t"), Catch::Contains("use_dora"));
  CHECK_THROWS_WITH(parse_adapter_config(R"({"r": 4, "target_modules": "all-linear", "use_rslora": true})", "t"), Catch::Contains("use_rslora"));
  CHECK_THROWS_WITH(parse_adapter_config(R"({"r": 4, "target_modules": "all-linear", "bias": "all"})", "t"), Catch::Contains("bias"));
  CHECK_THROWS_WITH(parse_adapter_config(R"({"r": 4, "target_modules": "all-linear", "peft_type": "IA3"})", "t"), Catch::Contains("IA3"));
  CHECK_THROWS_WITH(parse_adapter_config(R"({"r": 4, "target_modules": ["q_proj"], "lora_alpha": -1})", "t"), Catch::Contains("lora_alpha"));
  CHECK_THROWS_WITH(parse_adapter_config(R"({"r": 4, "target_modules": ["q_proj"], "modules_to_save": ["lm_head"]})", "t"),
                    Catch::Contains("modules_to_save"));
  CHECK_THROWS_WITH(parse_adapter_config(R"([1, 2])", "t"), Catch::Contains("object"));
  CHECK_THROWS_WITH(parse_adapter_config(R"({"r": 4)", "t"), Catch::Contains("not valid JSON"));
}

TEST_CASE("a LoRA checkpoint exports and loads as its merged weights, and its PEFT adapters", "[lora][peft]") {
  auto const arch = GENERATE(Arch::gpt2, Arch::qwen2);
  GPTConfig const cfg = lora_cfg(arch);
  std::mt19937 g(47);
  TrainingEngine e(cfg);
  random_lora_engine(e, cfg, lora_of(arch, 2, true), g);
  auto const dir = std::filesystem::temp_directory_path() / ("rlflow_lora_export_" + std::to_string(int(arch)));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  rlflow::engine::save_checkpoint(dir / "actor.safetensors", e);
  rlflow::engine::export_hf(dir / "actor.safetensors", dir / "hf");
  std::vector<float> want(e.layout().size());
  e.policy_weights(want);
  auto const m = rlflow::model::hf::load_model(dir / "hf");
  REQUIRE(m.params == want);
  REQUIRE(rlflow::engine::load_weights(dir / "actor.safetensors", cfg) == want);  // e.g. TrainerOptions::init_weights
  rlflow::engine::export_peft(dir, dir / "peft", "base");
  auto const p = rlflow::engine::load_peft(dir / "peft", cfg);
  REQUIRE(std::equal(p.adapters.begin(), p.adapters.end(), e.trainable().begin(), e.trainable().end()));
  CHECK(p.config.alpha == e.lora_layout().config().alpha);
  TrainingEngine plain(cfg);
  plain.load_weights(want);
  rlflow::engine::save_checkpoint(dir / "plain.safetensors", plain);
  CHECK_THROWS_WITH(rlflow::engine::export_peft(dir / "plain.safetensors", dir / "peft2"), Catch::Contains("no LoRA adapters"));
  std::filesystem::remove_all(dir);
}

}  // namespace test_lora
