// tests/model/test_llama.cpp <-> the Llama family (llama, qwen2, qwen3) in model/gpt.hpp,
// engine/rollout_engine.hpp and model/hf_folder.hpp: logits, greedy continuations and gradients
// against an independent PyTorch implementation (tests/model/llama_reference.py, written from
// transformers' modeling code and run here) on random tiny configurations; the rollout engine
// against the training forward; Hugging Face folders (round trip, BF16, shards) and the errors of
// malformed config.json fields and tensors.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <rlflow/config/device_memory_estimate.hpp>
#include <rlflow/engine/checkpoint.hpp>
#include <rlflow/engine/rollout_engine.hpp>
#include <rlflow/engine/training_engine.hpp>
#include <rlflow/model/gpt.hpp>
#include <rlflow/model/hf_folder.hpp>
#include <rlflow/model/published_models.hpp>

#include "fixtures.hpp"

namespace test_llama {

namespace fs = std::filesystem;
using namespace rlflow;
using model::Arch;
using model::GPTConfig;

namespace {

//! Seeded weights: the initialisation plus noise on every tensor (norm weights away from 1).
std::vector<float> tiny_weights(GPTConfig const& c, unsigned seed) { return fixtures::perturbed_weights(c, seed, 0.2f); }

std::string python() {
  if (char const* p = std::getenv("RLFLOW_TORCH_PYTHON")) return p;
  return RLFLOW_TORCH_PYTHON;
}

//! Runs the reference on (folder, in); returns its output, or null json (printing rlflow-skip)
//! when the interpreter lacks torch.
nlohmann::json run_reference(fs::path const& folder, nlohmann::json const& in, fs::path const& dir) {
  if (std::system((python() + " -c 'import torch' >/dev/null 2>&1").c_str()) != 0) {
    std::printf("rlflow-skip: %s cannot import torch (Debian's python3-torch); the PyTorch reference comparison is skipped\n",
                python().c_str());
    return nullptr;
  }
  std::ofstream(dir / "in.json") << in.dump();
  std::string const cmd = python() + " " + RLFLOW_LLAMA_REFERENCE + " " + folder.string() + " " + (dir / "in.json").string() + " " +
                          (dir / "out.json").string();
  int const rc = std::system(cmd.c_str());
  REQUIRE(rc == 0);
  std::ifstream f(dir / "out.json");
  return nlohmann::json::parse(f);
}

//! max |a - b| / max |b| over a tensor (b the reference).
double rel_err(std::vector<float> const& a, std::vector<double> const& b) {
  REQUIRE(a.size() == b.size());
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::abs(double(a[i]) - b[i]));
    den = std::max(den, std::abs(b[i]));
  }
  return num / std::max(den, 1e-30);
}

Tensor int_tensor(std::vector<std::int32_t> const& v, std::int64_t B, std::int64_t T) {
  Tensor t = Tensor::empty(DType::int32, Shape{B, T});
  std::copy(v.begin(), v.end(), t.data<std::int32_t>());
  return t;
}

}  // namespace

TEST_CASE("the Llama family equals the PyTorch reference: logits, greedy continuations, gradients", "[model][llama][torch]") {
  auto const arch = GENERATE(Arch::llama, Arch::qwen2, Arch::qwen3);
  int const k = GENERATE(0, 1, 2, 3);
  GPTConfig const c = fixtures::tiny_llama_config(arch, k, 11 + std::uint64_t(k));
  INFO(model::arch_name(arch) << " variant " << k << ": heads " << c.n_head << "/" << c.kv_heads() << " hd " << c.head_dim()
                              << " C " << c.n_embd << " tied " << c.tie_word_embeddings);
  fixtures::TempDir d;
  auto const w = tiny_weights(c, 100u + unsigned(k));
  model::hf::export_model(d.p / "m", c, w);

  int const B = 3, T = 10, steps = 32;
  std::mt19937 g(unsigned(k) * 7 + unsigned(arch));
  std::vector<std::int32_t> ids(B * T), mask(B * T, 1);
  for (auto& t : ids) t = std::int32_t(g() % unsigned(c.vocab_size));
  for (int t = 0; t < 3; ++t) mask[std::size_t(t)] = 0;          // row 0: three pads on the left
  mask[std::size_t(T)] = 0;                                        // row 1: one pad
  int const h0 = 2, R = T - h0;                                    // loss rows [2, T - 1)
  nlohmann::json in = {{"ids", nlohmann::json::array()}, {"mask", nlohmann::json::array()}, {"want", {"logits", "greedy", "grads"}},
                       {"greedy_steps", steps}, {"loss_rows", {h0, R}}};
  for (int b = 0; b < B; ++b) {
    in["ids"].push_back(std::vector<int>(ids.begin() + b * T, ids.begin() + (b + 1) * T));
    in["mask"].push_back(std::vector<int>(mask.begin() + b * T, mask.begin() + (b + 1) * T));
  }
  auto const ref = run_reference(d.p / "m", in, d.p);
  if (ref.is_null()) return;

  model::GPT m(c);
  std::copy(w.begin(), w.end(), m.params().begin());
  m.forward(ids.data(), mask.data(), B, T);
  // logits at every real position, within 1e-4 of the row's scale
  m.select_rows(0, T);
  auto const lg = m.logits_forward();
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      if (!mask[std::size_t(b * T + t)]) continue;
      std::vector<float> mine(lg.begin() + (std::size_t(b) * T + t) * c.vocab_size, lg.begin() + (std::size_t(b) * T + t + 1) * c.vocab_size);
      auto const theirs = ref["logits"][b][t].get<std::vector<double>>();
      INFO("row " << b << " position " << t);
      CHECK(rel_err(mine, theirs) < 1e-4);
    }
  // gradients of the mean log-prob of the next token over rows [h0, h0 + R - 1) with both tokens real
  m.select_rows(h0, R - 1);
  std::vector<std::int32_t> tg(std::size_t(B) * (R - 1));
  std::vector<float> lp(tg.size()), dl(tg.size(), 0.0f);
  int n = 0;
  for (int b = 0; b < B; ++b)
    for (int r = 0; r < R - 1; ++r) {
      int const t = h0 + r;
      tg[std::size_t(b * (R - 1) + r)] = ids[std::size_t(b * T + t + 1)];
      n += mask[std::size_t(b * T + t)] && mask[std::size_t(b * T + t + 1)];
    }
  for (int b = 0; b < B; ++b)
    for (int r = 0; r < R - 1; ++r) {
      int const t = h0 + r;
      if (mask[std::size_t(b * T + t)] && mask[std::size_t(b * T + t + 1)]) dl[std::size_t(b * (R - 1) + r)] = 1.0f / float(n);
    }
  m.logprob_forward(tg.data(), 1.0f, lp.data(), nullptr);
  double loss = 0;
  for (std::size_t i = 0; i < lp.size(); ++i) loss += double(dl[i]) * lp[i];
  CHECK(loss == Approx(ref["loss"].get<double>()).epsilon(1e-5));
  std::vector<float> grads(m.params().size(), 0.0f);
  m.logprob_backward(dl.data(), nullptr, grads);
  for (auto const& t : m.layout().tensors()) {
    INFO("gradient of " << t.name);
    REQUIRE(ref["grads"].contains(t.name));
    auto const mine = model::hf::layout_to_hf(t, c, grads.data() + t.offset);
    CHECK(rel_err(mine, ref["grads"][t.name].get<std::vector<double>>()) < 1e-4);
  }
  // greedy continuations of each full row through the KV-cache rollout engine
  engine::RolloutEngine eng(c);
  eng.load_weights(w);
  engine::SamplingParams sp;
  sp.temperature = 0.0f;
  sp.max_new_tokens = steps;
  sp.eos_id = -1;
  std::vector<std::uint64_t> seeds(B, 1);
  auto const res = eng.generate(int_tensor(ids, B, T), int_tensor(mask, B, T), sp, seeds);
  for (int b = 0; b < B; ++b) {
    std::vector<int> mine(res.responses.data<std::int32_t>() + b * steps, res.responses.data<std::int32_t>() + (b + 1) * steps);
    INFO("row " << b);
    CHECK(mine == ref["greedy"][b].get<std::vector<int>>());
  }
}

TEST_CASE("the Llama family's rollout engine agrees with the training forward", "[model][llama]") {
  auto const arch = GENERATE(Arch::llama, Arch::qwen2, Arch::qwen3);
  GPTConfig const c = fixtures::tiny_llama_config(arch, 1, 5);
  auto const w = tiny_weights(c, 9);
  engine::RolloutEngine eng(c);
  eng.load_weights(w);
  int const B = 3, P = 5, R = 12;
  std::vector<std::int32_t> ids = {0, 0, 4, 5, 6, 1, 2, 3, 4, 5, 0, 7, 8, 9, 10}, mask = {0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1};
  engine::SamplingParams sp;
  sp.temperature = 1.0f;
  sp.max_new_tokens = R;
  sp.eos_id = -1;
  std::vector<std::uint64_t> seeds = {3, 4, 5};
  auto const res = eng.generate(int_tensor(ids, B, P), int_tensor(mask, B, P), sp, seeds);
  // the cached decode's log-probs equal the training forward's over prompt + response
  int const T = P + R;
  std::vector<std::int32_t> full(B * T), fm(B * T, 1), tg(B * R);
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < P; ++t) full[b * T + t] = ids[b * P + t], fm[b * T + t] = mask[b * P + t];
    for (int r = 0; r < R; ++r) full[b * T + P + r] = tg[b * R + r] = res.responses.data<std::int32_t>()[b * R + r];
  }
  model::GPT m(c);
  std::copy(w.begin(), w.end(), m.params().begin());
  m.forward(full.data(), fm.data(), B, T);
  m.select_rows(P - 1, R);
  std::vector<float> lp(tg.size());
  m.logprob_forward(tg.data(), 1.0f, lp.data(), nullptr);
  for (std::size_t i = 0; i < lp.size(); ++i) CHECK(lp[i] == Approx(res.log_probs.data<float>()[i]).margin(1e-5));
  // without the cache (the whole sequence recomputed per token) the tokens are the same
  engine::RolloutEngine slow(c);
  slow.load_weights(w);
  slow.set_use_kv_cache(false);
  auto const again = slow.generate(int_tensor(ids, B, P), int_tensor(mask, B, P), sp, seeds);
  CHECK(std::equal(again.responses.data<std::int32_t>(), again.responses.data<std::int32_t>() + B * R, res.responses.data<std::int32_t>()));
}

TEST_CASE("Llama-family folders: save, load, save is byte-stable, and BF16 and sharded folders load the same weights", "[model][llama][hf]") {
  auto const arch = GENERATE(Arch::llama, Arch::qwen2, Arch::qwen3);
  GPTConfig const c = fixtures::tiny_llama_config(arch, 3, 2);
  auto const w = tiny_weights(c, 4);
  fixtures::TempDir d;
  model::hf::export_model(d.p / "a", c, w);
  auto const back = model::hf::load_model(d.p / "a", false, c.seed);  // the seed is not part of a folder
  CHECK(back.config == c);
  CHECK(back.params == w);
  model::hf::export_model(d.p / "b", back.config, back.params);
  auto slurp = [](fs::path const& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  CHECK(slurp(d.p / "a" / "model.safetensors") == slurp(d.p / "b" / "model.safetensors"));
  CHECK(slurp(d.p / "a" / "config.json") == slurp(d.p / "b" / "config.json"));
  // BF16: every weight rounded to bfloat16
  model::hf::export_model(d.p / "bf", c, w, DType::bfloat16);
  auto const bf = model::hf::load_model(d.p / "bf");
  REQUIRE(bf.params.size() == w.size());
  for (std::size_t i = 0; i < w.size(); ++i) REQUIRE(bf.params[i] == static_cast<float>(rlflow::bfloat16(w[i])));
  // sharded: the F32 tensors split over two files listed by model.safetensors.index.json
  auto const f = engine::safetensors::File::load(d.p / "a" / "model.safetensors");
  std::vector<engine::safetensors::TensorRecord> s1, s2;
  nlohmann::json idx = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
  int i = 0;
  for (auto const& name : f.names()) {
    auto const& info = f.info(name);
    bool const first = i++ % 2 == 0;
    (first ? s1 : s2).push_back({name, info.dtype, info.shape, f.bytes(name)});
    idx["weight_map"][name] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  fs::create_directories(d.p / "sh");
  engine::safetensors::save(d.p / "sh" / "model-00001-of-00002.safetensors", s1, {{"format", "pt"}});
  engine::safetensors::save(d.p / "sh" / "model-00002-of-00002.safetensors", s2, {{"format", "pt"}});
  std::ofstream(d.p / "sh" / "model.safetensors.index.json") << idx.dump();
  fs::copy_file(d.p / "a" / "config.json", d.p / "sh" / "config.json");
  CHECK(model::hf::load_model(d.p / "sh").params == w);
  // an rlflow checkpoint records the family's fields and loads back into the same config
  engine::save_weights(d.p / "ck.safetensors", c, w);
  auto const ckf = engine::safetensors::File::load(d.p / "ck.safetensors");
  CHECK(engine::detail::read_config(ckf) == c);
}

TEST_CASE("malformed Llama-family config.json fields and tensors are errors naming them, before work", "[model][llama][hf]") {
  GPTConfig const c = fixtures::tiny_llama_config(Arch::qwen3, 1, 2);
  auto const w = tiny_weights(c, 4);
  fixtures::TempDir d;
  model::hf::export_model(d.p / "ok", c, w);
  nlohmann::json base;
  std::ifstream(d.p / "ok" / "config.json") >> base;
  struct Case {
    char const* what;
    std::function<void(nlohmann::json&)> edit;
    char const* says;
  };
  std::vector<Case> const cases = {
      {"MoE", [](auto& j) { j["num_experts"] = 8; }, "num_experts"},
      {"sliding window", [](auto& j) { j["use_sliding_window"] = true; }, "use_sliding_window"},
      {"yarn", [](auto& j) { j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}}; }, "yarn"},
      {"llama3 without fields", [](auto& j) { j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}}; }, "low_freq_factor"},
      {"rope_parameters spelling", [](auto& j) { j["rope_parameters"] = {{"rope_type", "dynamic"}, {"factor", 2.0}}; }, "dynamic"},
      {"quantized", [](auto& j) { j["quantization_config"] = {{"quant_method", "gptq"}}; }, "quantization_config"},
      {"activation", [](auto& j) { j["hidden_act"] = "gelu"; }, "hidden_act"},
      {"kv heads", [](auto& j) { j["num_key_value_heads"] = 3; }, "num_key_value_heads"},
      {"odd head_dim", [](auto& j) { j["head_dim"] = 7; }, "head_dim"},
      {"float layers", [](auto& j) { j["num_hidden_layers"] = 2.5; }, "num_hidden_layers"},
      {"negative eps", [](auto& j) { j["rms_norm_eps"] = -1.0; }, "rms_norm_eps"},
      {"theta string", [](auto& j) { j["rope_theta"] = "big"; }, "rope_theta"},
      {"unknown type", [](auto& j) { j["model_type"] = "mistral"; }, "mistral"},
  };
  for (auto const& tc : cases) {
    INFO(tc.what);
    auto j = base;
    tc.edit(j);
    CHECK_THROWS_WITH(model::hf::config_from_json(j), Catch::Contains(tc.says));
  }
  // tensors: a wrong shape, a missing tensor and an unknown name are named
  auto rewrite = [&](auto&& edit) {
    fs::remove_all(d.p / "bad");
    fs::create_directories(d.p / "bad");
    fs::copy_file(d.p / "ok" / "config.json", d.p / "bad" / "config.json");
    auto const f = engine::safetensors::File::load(d.p / "ok" / "model.safetensors");
    std::vector<engine::safetensors::TensorRecord> recs;
    for (auto const& name : f.names()) recs.push_back({name, f.info(name).dtype, f.info(name).shape, f.bytes(name)});
    std::vector<float> extra(3, 0.0f);
    edit(recs, extra);
    engine::safetensors::save(d.p / "bad" / "model.safetensors", recs, {{"format", "pt"}});
  };
  using Recs = std::vector<engine::safetensors::TensorRecord>;
  rewrite([](Recs& recs, std::vector<float>&) {
    for (auto& r : recs)
      if (r.name == "model.layers.1.self_attn.k_norm.weight") r.shape = {1, r.shape[0]};
  });
  CHECK_THROWS_WITH(model::hf::load_model(d.p / "bad"), Catch::Contains("model.layers.1.self_attn.k_norm.weight"));
  rewrite([](Recs& recs, std::vector<float>&) { std::erase_if(recs, [](auto const& r) { return r.name == "model.layers.0.mlp.up_proj.weight"; }); });
  CHECK_THROWS_WITH(model::hf::load_model(d.p / "bad"), Catch::Contains("model.layers.0.mlp.up_proj.weight"));
  rewrite([](Recs& recs, std::vector<float>& extra) {
    std::span<float const> const e(extra);
    recs.push_back({"model.layers.0.mlp.experts.0.weight", DType::float32, {3}, std::as_bytes(e)});
  });
  CHECK_THROWS_WITH(model::hf::load_model(d.p / "bad"), Catch::Contains("model.layers.0.mlp.experts.0.weight"));
  // tensor-parallel sizes the model cannot be cut by are refused with the reason
  CHECK_THROWS_WITH(model::ShardLayout(c, model::TPRank{0, 3}), Catch::Contains("num_attention_heads = 4"));
  CHECK_THROWS_WITH(model::ShardLayout(c, model::TPRank{0, 4}), Catch::Contains("intermediate_size = 26"));
}

namespace {
//! |a - b| <= tol * max(|b|, 1) element-wise.
void require_close(float const* a, float const* b, std::size_t n, double tol) {
  for (std::size_t i = 0; i < n; ++i) {
    INFO("element " << i << ": " << a[i] << " vs " << b[i]);
    REQUIRE(std::abs(double(a[i]) - b[i]) <= tol * std::max(std::abs(double(b[i])), 1.0));
  }
}
//! Per parameter tensor: max |a - b| <= tol * max |b|.
void require_close_tensors(model::ParamLayout const& lay, std::vector<float> const& a, std::vector<float> const& b, double tol) {
  REQUIRE(a.size() == lay.size());
  for (auto const& t : lay.tensors()) {
    double scale = 0, err = 0;
    for (std::size_t i = t.offset; i < t.offset + t.numel; ++i) {
      scale = std::max(scale, std::abs(double(b[i])));
      err = std::max(err, std::abs(double(a[i]) - b[i]));
    }
    INFO(t.name << ": max error " << err << " against max magnitude " << scale);
    REQUIRE(err <= tol * scale);
  }
}

struct TrainOutcome {
  std::vector<float> logits, log_probs, grads, weights;
};
//! Forward (log-probs), backward and 5 AdamW steps on one batch; the full gradient of the first
//! step and the full weights at the end.
TrainOutcome train_scenario(engine::TrainingEngine& e, std::vector<float> const& full, Tensor const& ids, Tensor const& mask,
                            Tensor const& dlogp, int R) {
  TrainOutcome o;
  e.load_weights(full);
  auto const lg = e.compute_logits(ids, mask);
  o.logits.assign(lg.data<float>(), lg.data<float>() + lg.numel());
  for (int s = 0; s < 5; ++s) {
    e.zero_grad();
    auto r = e.forward(ids, mask, R, 1.0f, false);
    if (s == 0) o.log_probs.assign(r.log_probs.data<float>(), r.log_probs.data<float>() + r.log_probs.numel());
    e.backward(dlogp, Tensor());
    if (s == 0) {
      o.grads.resize(e.layout().size());
      e.gather_grads(o.grads);
    }
    e.optimizer_step();
  }
  o.weights.resize(e.layout().size());
  e.gather_weights(o.weights);
  return o;
}
}  // namespace

TEST_CASE("the Llama family at TP = 2 and 4: training (logits, log-probs, gradients, 5 steps' weights) and rollout tokens equal TP = 1",
          "[model][llama][tp]") {
  auto const arch = GENERATE(Arch::llama, Arch::qwen2, Arch::qwen3);
  bool const tied = GENERATE(true, false);
  GPTConfig c = fixtures::tiny_llama_config(arch, 0, 21);  // one KV head per 1 query head: NH = NKV
  c.n_kv_head = 4;
  c.n_head = 8;  // GQA ratio 2
  c.n_embd = arch == Arch::qwen2 ? 8 * 6 : 28;
  c.intermediate_size = 40;
  c.vocab_size = 300;  // above the vocabulary-parallel threshold: the TP head splits the vocabulary
  c.tie_word_embeddings = tied;
  c.validate();
  INFO(model::arch_name(arch) << " tied " << tied);
  auto const w = tiny_weights(c, 31);
  int const B = 3, T = 11, R = 5;
  std::mt19937 g(5);
  std::vector<std::int32_t> iv(B * T), mv(B * T, 1);
  for (auto& t : iv) t = std::int32_t(g() % unsigned(c.vocab_size));
  mv[0] = mv[1] = mv[std::size_t(T)] = 0;
  Tensor const ids = int_tensor(iv, B, T), mask = int_tensor(mv, B, T);
  Tensor dlogp = Tensor::empty(DType::float32, Shape{B, R});
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (std::int64_t i = 0; i < dlogp.numel(); ++i) dlogp.data<float>()[i] = nd(g);
  engine::OptimizerConfig opt;
  opt.lr = 1e-2f;
  opt.eps = 1e-6f;  // rounding-level gradients (the key bias's) stay rounding-level updates
  engine::TrainingEngine ref_engine(c, opt);
  auto const ref = train_scenario(ref_engine, w, ids, mask, dlogp, R);
  model::ParamLayout const lay(c);
  for (int N : {2, 4}) {
    INFO("training TP " << N);
    auto const got = fixtures::on_ranks(N, [&](int r, comm::LocalCommunicator& comm) {
      engine::TrainingEngine e(c, opt, model::TPRank{r, N}, &comm);
      return train_scenario(e, w, ids, mask, dlogp, R);
    });
    for (auto const& o : got) {
      require_close(o.logits.data(), ref.logits.data(), ref.logits.size(), 1e-5);
      require_close(o.log_probs.data(), ref.log_probs.data(), ref.log_probs.size(), 1e-5);
      require_close_tensors(lay, o.grads, ref.grads, 1e-5);
      // 5 AdamW steps (lr 1e-2) amplify the rounding of the TP reductions, most where a gradient
      // is itself at rounding level (Adam normalises it): up to ~1.1e-4 of a tensor's magnitude
      // across OpenBLAS's kernel families; a shard's optimizer state gone wrong moves weights by ~lr.
      require_close_tensors(lay, o.weights, ref.weights, 2e-4);
      REQUIRE(o.weights == got[0].weights);
    }
  }
  // rollout: TP 2, 4 and 8 (8 > num_key_value_heads = 4: each KV head on two ranks) generate the same tokens
  engine::SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_k = 20;
  sp.max_new_tokens = 8;
  sp.eos_id = -1;
  std::vector<std::uint64_t> seeds = {7, 8, 9};
  Tensor const p_ids = int_tensor(std::vector<std::int32_t>(iv.begin(), iv.begin() + B * T), B, T);
  engine::RolloutEngine one(c);
  one.load_weights(w);
  auto const want = one.generate(p_ids, mask, sp, seeds);
  for (int N : {2, 4, 8}) {
    INFO("rollout TP " << N);
    struct Gen {
      std::vector<std::int32_t> tokens;
      std::vector<float> logp;
    };
    auto const got = fixtures::on_ranks(N, [&](int r, comm::LocalCommunicator& comm) {
      engine::RolloutEngine e(c, model::TPRank{r, N}, &comm);
      e.load_weights(w);
      auto const res = e.generate(p_ids, mask, sp, seeds);
      return Gen{std::vector<std::int32_t>(res.responses.data<std::int32_t>(), res.responses.data<std::int32_t>() + res.responses.numel()),
                 std::vector<float>(res.log_probs.data<float>(), res.log_probs.data<float>() + res.log_probs.numel())};
    });
    for (auto const& o : got) {
      REQUIRE(o.tokens == std::vector<std::int32_t>(want.responses.data<std::int32_t>(),
                                                    want.responses.data<std::int32_t>() + want.responses.numel()));
      require_close(o.logp.data(), want.log_probs.data<float>(), o.logp.size(), 1e-5);
    }
  }
  // training TP above num_key_value_heads is refused with the reason
  auto comms = comm::LocalCommunicator::make_group(8);
  CHECK_THROWS_WITH(engine::TrainingEngine(c, opt, model::TPRank{0, 8}, comms[0].get()), Catch::Contains("num_key_value_heads"));
}

TEST_CASE("published shapes have their models' published parameter counts", "[model][llama][published]") {
  // the totals of the models' safetensors files (tied heads counted once)
  std::pair<char const*, std::int64_t> const published[] = {
      {"qwen2.5-0.5b", 494032768},   {"qwen2.5-1.5b", 1543714304}, {"qwen2.5-3b", 3085938688},
      {"qwen2.5-7b", 7615616512},    {"qwen3-8b", 8190735360},     {"llama-3.2-1b", 1235814400},
      {"llama-3.1-8b", 8030261248}};
  for (auto const& [name, count] : published) {
    INFO(name);
    auto const& m = model::published_model(name).config;
    m.validate();
    CHECK(model::ParamLayout(m).count() == count);
    CHECK(static_cast<std::int64_t>(model::ParamLayout(m).size()) == count);
  }
  // Qwen3-0.6B's card gives 0.44 B parameters besides the (tied) embedding
  auto const& q3 = model::published_model("qwen3-0.6b").config;
  std::int64_t const body = model::ParamLayout(q3).count() - std::int64_t{q3.vocab_size} * q3.n_embd;
  CHECK(body > 435'000'000);
  CHECK(body < 445'000'000);
  CHECK(model::published_models().size() == 8);
  CHECK_THROWS_WITH(model::published_model("qwen9"), Catch::Contains("'qwen9' is not in the table") && Catch::Contains("qwen2.5-0.5b"));
}

TEST_CASE("host memory is checked before a Qwen2.5-0.5B-shaped folder's weights are read", "[model][llama][memory]") {
  GPTConfig const m = model::published_model("qwen2.5-0.5b").config;
  CHECK(model::ParamLayout(m).size() == 494032768);  // Qwen2.5-0.5B's parameter count (tied head)
  TrainerConfig cfg;  // a small GRPO step per worker: 4 prompts x 2 samples, 64 + 64 tokens, micro-batches of 2
  cfg.trainer.n_gpus_per_node = 2;
  cfg.data.train_batch_size = 4;
  cfg.data.max_prompt_length = 64;
  cfg.data.max_response_length = 64;
  cfg.actor_rollout_ref.rollout.n = 2;
  cfg.actor_rollout_ref.actor.ppo_mini_batch_size = 4;
  cfg.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 2;
  cfg.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 2;
  cfg.actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu = 2;
  auto const e = estimate_device_memory(cfg, m);
  CHECK(e.actor_state == 4 * 494032768LL * 4 + 494032768LL);
  CHECK_THROWS_WITH(check_host_memory(cfg, m, std::int64_t{1} << 30, "model/config.json"),
                    Catch::Contains("model/config.json (494032768 parameters)") && Catch::Contains("1 GiB are available") &&
                        Catch::Contains("lower trainer.n_gpus_per_node"));
  INFO(e.breakdown());
  CHECK(e.total() < std::int64_t{20} << 30);  // about 19 GiB: the engines' weights and AdamW state dominate
  CHECK_NOTHROW(check_host_memory(cfg, m, std::int64_t{64} << 30, "model/config.json"));
  CHECK_NOTHROW(check_host_memory(cfg, m, -1, "model/config.json"));  // unknown: not checked
}

TEST_CASE("SamplingParams::vocab_limit: the rollout never samples a padding row of the embedding", "[model][llama][sampling]") {
  GPTConfig c = fixtures::tiny_llama_config(Arch::qwen2, 1, 3);
  c.vocab_size = 64;
  int const limit = 40;  // ids 40..63 are padding rows no tokenizer decodes
  auto w = tiny_weights(c, 8);
  model::ParamLayout const lay(c);
  for (int v = limit; v < c.vocab_size; ++v)  // make the padding rows the likeliest ids
    for (int k = 0; k < c.n_embd; ++k) w[lay.lm_head + std::size_t(v) * c.n_embd + std::size_t(k)] *= 40.0f;
  std::vector<std::int32_t> ids(2 * 6), mask(ids.size(), 1);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = std::int32_t(i % 30);
  std::vector<std::uint64_t> seeds = {1, 2};
  for (int N : {1, 2}) {
    auto const run = [&](int r, comm::LocalCommunicator* comm, engine::SamplingParams const& sp) {
      engine::RolloutEngine e(c, model::TPRank{r, N}, comm);
      if (N > 1) e.set_lm_head(model::LMHead::vocab_parallel);
      e.load_weights(w);
      return e.generate(int_tensor(ids, 2, 6), int_tensor(mask, 2, 6), sp, seeds);
    };
    for (float temp : {0.0f, 1.0f}) {
      engine::SamplingParams sp;
      sp.temperature = temp;
      sp.max_new_tokens = 16;
      INFO("TP " << N << " temperature " << temp);
      auto results = fixtures::on_ranks(N, [&](int r, comm::LocalCommunicator& comm) {
        engine::SamplingParams unlimited = sp;
        engine::SamplingParams limited = sp;
        limited.vocab_limit = limit;
        return std::pair{run(r, &comm, unlimited), run(r, &comm, limited)};
      });
      auto const& [unlimited, limited] = results[0];
      bool padded = false;  // without the limit the padding rows are drawn (the test can fail)
      for (std::int64_t i = 0; i < unlimited.responses.numel(); ++i) padded |= unlimited.responses.data<std::int32_t>()[i] >= limit;
      CHECK(padded);
      for (std::int64_t i = 0; i < limited.responses.numel(); ++i) REQUIRE(limited.responses.data<std::int32_t>()[i] < limit);
    }
  }
  engine::SamplingParams bad;
  bad.vocab_limit = 65;
  CHECK_THROWS_WITH(bad.validate(64), Catch::Contains("vocab_limit"));
}

}  // namespace test_llama
