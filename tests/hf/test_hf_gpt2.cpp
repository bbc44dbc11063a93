// tests/hf/test_hf_gpt2.cpp <-> include/rlflow/model/hf_folder.hpp: a GPT-2 folder written here
// with Hugging Face's names and layouts (Conv1D (in, out) weights, c_attn columns [q | k | v])
// loads into the built-in GPT and gives the logits of an independent double-precision forward
// written from GPT-2's definition over the HF tensors; shards, prefixes, F16 / BF16; export then
// load is bit-exact; truncated, misnamed and misshaped files are errors naming the tensor.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>
#include <rlflow/engine/hf_export.hpp>
#include <rlflow/model/hf_folder.hpp>

#include "fixtures.hpp"

namespace test_hf_gpt2 {

namespace fs = std::filesystem;
using rlflow::DType;
using rlflow::model::GPTConfig;
namespace st = rlflow::engine::safetensors;
namespace hf = rlflow::model::hf;

namespace {

using fixtures::TempDir;

// A GPT-2 checkpoint in Hugging Face's layout: name -> (shape, float values).
struct HFTensor {
  std::vector<std::int64_t> shape;
  std::vector<float> v;
};
using HFModel = std::map<std::string, HFTensor>;

struct Dims {
  int V = 37, P = 16, L = 2, NH = 4, C = 32;
};

HFModel random_hf_model(Dims d, unsigned seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> n(0.0f, 0.3f);
  HFModel m;
  auto add = [&](std::string const& name, std::vector<std::int64_t> shape, float mean = 0.0f, float scale = 1.0f) {
    std::size_t k = 1;
    for (auto s : shape) k *= std::size_t(s);
    HFTensor t{shape, std::vector<float>(k)};
    for (auto& x : t.v) x = mean + scale * n(g);
    m[name] = std::move(t);
  };
  std::int64_t const C = d.C;
  add("transformer.wte.weight", {d.V, C});
  add("transformer.wpe.weight", {d.P, C});
  for (int l = 0; l < d.L; ++l) {
    std::string const p = "transformer.h." + std::to_string(l) + ".";
    add(p + "ln_1.weight", {C}, 1.0f);
    add(p + "ln_1.bias", {C});
    add(p + "attn.c_attn.weight", {C, 3 * C});
    add(p + "attn.c_attn.bias", {3 * C});
    add(p + "attn.c_proj.weight", {C, C});
    add(p + "attn.c_proj.bias", {C});
    add(p + "ln_2.weight", {C}, 1.0f);
    add(p + "ln_2.bias", {C});
    add(p + "mlp.c_fc.weight", {C, 4 * C});
    add(p + "mlp.c_fc.bias", {4 * C});
    add(p + "mlp.c_proj.weight", {4 * C, C}, 0.0f, 0.5f);
    add(p + "mlp.c_proj.bias", {C});
  }
  add("transformer.ln_f.weight", {C}, 1.0f);
  add("transformer.ln_f.bias", {C});
  return m;
}

nlohmann::json hf_config(Dims d) {
  return {{"architectures", {"GPT2LMHeadModel"}}, {"model_type", "gpt2"}, {"activation_function", "gelu_new"},
          {"layer_norm_epsilon", 1e-5}, {"n_ctx", d.P}, {"n_positions", d.P}, {"n_embd", d.C}, {"n_head", d.NH},
          {"n_layer", d.L}, {"vocab_size", d.V}, {"n_inner", nullptr}, {"tie_word_embeddings", true}};
}

void write_text(fs::path const& p, std::string const& s) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << s;
}

// Writes the tensors (optionally renamed / as F16 / BF16) to one safetensors file.
void write_tensors(fs::path const& file, HFModel const& m, DType dt = DType::float32,
                   std::map<std::string, std::string> const& rename = {}) {
  std::vector<std::vector<std::byte>> store;
  std::vector<st::TensorRecord> recs;
  for (auto const& [name, t] : m) {
    std::vector<std::byte> b(t.v.size() * rlflow::dtype_size(dt));
    for (std::size_t i = 0; i < t.v.size(); ++i) {
      if (dt == DType::float32) std::memcpy(b.data() + 4 * i, &t.v[i], 4);
      else {
        std::uint16_t const bits = dt == DType::bfloat16 ? rlflow::bfloat16(t.v[i]).bits : rlflow::float16(t.v[i]).bits;
        std::memcpy(b.data() + 2 * i, &bits, 2);
      }
    }
    store.push_back(std::move(b));
    auto it = rename.find(name);
    recs.push_back({it == rename.end() ? name : it->second, dt, t.shape, std::span<std::byte const>(store.back())});
  }
  st::save(file, recs, {{"format", "pt"}});
}

void write_folder(fs::path const& dir, Dims d, HFModel const& m, DType dt = DType::float32) {
  write_text(dir / "config.json", hf_config(d).dump(2));
  write_tensors(dir / "model.safetensors", m, dt);
}

// ---- the reference: GPT-2's forward over the HF tensors, in double, plain loops -----------------
double gelu_tanh(double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }

std::vector<double> ref_logits(Dims d, HFModel const& m, std::vector<int> const& ids) {
  int const T = int(ids.size()), C = d.C, hs = C / d.NH, V = d.V;
  auto W = [&](std::string const& n) -> std::vector<float> const& { return m.at("transformer." + n).v; };
  auto layernorm = [&](std::vector<double> const& x, std::string const& p) {
    auto const& w = W(p + ".weight");
    auto const& b = W(p + ".bias");
    std::vector<double> y(x.size());
    for (int t = 0; t < T; ++t) {
      double mu = 0, var = 0;
      for (int c = 0; c < C; ++c) mu += x[t * C + c];
      mu /= C;
      for (int c = 0; c < C; ++c) var += (x[t * C + c] - mu) * (x[t * C + c] - mu);
      var /= C;
      for (int c = 0; c < C; ++c) y[t * C + c] = (x[t * C + c] - mu) / std::sqrt(var + 1e-5) * w[c] + b[c];
    }
    return y;
  };
  // Conv1D: y = x W + b with W (in, out)
  auto conv1d = [&](std::vector<double> const& x, int in, int out, std::string const& p) {
    auto const& w = W(p + ".weight");
    auto const& b = W(p + ".bias");
    std::vector<double> y(std::size_t(T) * out);
    for (int t = 0; t < T; ++t)
      for (int o = 0; o < out; ++o) {
        double s = b[o];
        for (int i = 0; i < in; ++i) s += x[t * in + i] * double(w[std::size_t(i) * out + o]);
        y[std::size_t(t) * out + o] = s;
      }
    return y;
  };
  std::vector<double> x(std::size_t(T) * C);
  for (int t = 0; t < T; ++t)
    for (int c = 0; c < C; ++c) x[t * C + c] = double(W("wte.weight")[ids[t] * C + c]) + W("wpe.weight")[t * C + c];
  for (int l = 0; l < d.L; ++l) {
    std::string const p = "h." + std::to_string(l) + ".";
    auto h = layernorm(x, p + "ln_1");
    auto qkv = conv1d(h, C, 3 * C, p + "attn.c_attn");  // split(C, dim=2): q | k | v, heads inside each
    std::vector<double> y(std::size_t(T) * C, 0.0);
    for (int hd = 0; hd < d.NH; ++hd)
      for (int t = 0; t < T; ++t) {
        std::vector<double> s(std::size_t(t) + 1);
        double mx = -1e300;
        for (int j = 0; j <= t; ++j) {
          double a = 0;
          for (int e = 0; e < hs; ++e) a += qkv[t * 3 * C + hd * hs + e] * qkv[j * 3 * C + C + hd * hs + e];
          s[j] = a / std::sqrt(double(hs));
          mx = std::max(mx, s[j]);
        }
        double z = 0;
        for (auto& v : s) z += (v = std::exp(v - mx));
        for (int j = 0; j <= t; ++j)
          for (int e = 0; e < hs; ++e) y[t * C + hd * hs + e] += s[j] / z * qkv[j * 3 * C + 2 * C + hd * hs + e];
      }
    auto a = conv1d(y, C, C, p + "attn.c_proj");
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += a[i];
    h = layernorm(x, p + "ln_2");
    auto f = conv1d(h, C, 4 * C, p + "mlp.c_fc");
    for (auto& v : f) v = gelu_tanh(v);
    auto o = conv1d(f, 4 * C, C, p + "mlp.c_proj");
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += o[i];
  }
  auto hf_ = layernorm(x, "ln_f");
  std::vector<double> logits(std::size_t(T) * V);
  for (int t = 0; t < T; ++t)
    for (int v = 0; v < V; ++v) {
      double s = 0;
      for (int c = 0; c < C; ++c) s += hf_[t * C + c] * double(W("wte.weight")[std::size_t(v) * C + c]);
      logits[std::size_t(t) * V + v] = s;
    }
  return logits;
}

std::vector<float> model_logits(GPTConfig const& cfg, std::vector<float> const& params, std::vector<int> const& ids) {
  rlflow::model::GPT g(cfg);
  std::copy(params.begin(), params.end(), g.params().begin());
  int const T = int(ids.size());
  std::vector<std::int32_t> id(ids.begin(), ids.end()), mask(ids.size(), 1);
  g.forward(id.data(), mask.data(), 1, T);
  g.select_rows(0, T);
  auto s = g.logits_forward();
  return {s.begin(), s.end()};
}

double max_rel_err(std::vector<float> const& got, std::vector<double> const& want) {
  double scale = 0, err = 0;
  for (auto w : want) scale = std::max(scale, std::abs(w));
  for (std::size_t i = 0; i < want.size(); ++i) err = std::max(err, std::abs(double(got[i]) - want[i]));
  return err / scale;
}

std::vector<int> random_ids(Dims d, int T, unsigned seed) {
  std::mt19937 g(seed);
  std::vector<int> ids(static_cast<std::size_t>(T), 0);
  for (auto& x : ids) x = int(g() % unsigned(d.V));
  return ids;
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (std::exception const& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace

TEST_CASE("a GPT-2 folder loads and its logits equal GPT-2's forward in double", "[hf][gpt2]") {
  Dims const d;
  for (unsigned seed : {1u, 2u, 3u}) {
    TempDir dir;
    auto m = random_hf_model(d, seed);
    write_folder(dir.p, d, m);
    auto ck = hf::load_gpt2(dir.p);
    CHECK(ck.config.vocab_size == d.V);
    CHECK(ck.config.max_seq_len == d.P);
    CHECK(ck.config.n_layer == d.L);
    CHECK(ck.config.n_head == d.NH);
    CHECK(ck.config.n_embd == d.C);
    auto ids = random_ids(d, d.P, seed + 10);
    auto want = ref_logits(d, m, ids);
    auto got = model_logits(ck.config, ck.params, ids);
    REQUIRE(got.size() == want.size());
    double const e = max_rel_err(got, want);
    INFO("seed " << seed << " max |err| / max |logit| = " << e);
    CHECK(e < 1e-5);
    // a wrong mapping (no transposes) is caught by this comparison: loading the raw tensors
    // straight into the layout gives different logits
    std::vector<float> naive(ck.params.size());
    rlflow::model::ParamLayout lay(ck.config);
    for (auto const& t : lay.tensors()) {
      std::string const n = t.name == "wte" || t.name == "wpe" ? "transformer." + t.name + ".weight" : "transformer." + t.name;
      std::copy(m.at(n).v.begin(), m.at(n).v.end(), naive.begin() + std::ptrdiff_t(t.offset));
    }
    CHECK(max_rel_err(model_logits(ck.config, naive, ids), want) > 1e-3);
  }
}

TEST_CASE("sharded folders, names without 'transformer.', mask buffers and a tied lm_head load alike", "[hf][gpt2]") {
  Dims const d;
  auto m = random_hf_model(d, 7);
  TempDir a, b, c;
  write_folder(a.p, d, m);
  auto const base = hf::load_gpt2(a.p).params;

  // two shards + index
  HFModel s1, s2;
  nlohmann::json wm = nlohmann::json::object();
  int k = 0;
  for (auto const& [n, t] : m) {
    bool const first = (k++ % 2) == 0;
    (first ? s1 : s2)[n] = t;
    wm[n] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  write_text(b.p / "config.json", hf_config(d).dump());
  write_tensors(b.p / "model-00001-of-00002.safetensors", s1);
  write_tensors(b.p / "model-00002-of-00002.safetensors", s2);
  write_text(b.p / "model.safetensors.index.json", nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", wm}}.dump());
  CHECK(hf::load_gpt2(b.p).params == base);

  // the original openai checkpoint's style: no prefix, attention bias buffers, an lm_head copy
  HFModel m2;
  std::map<std::string, std::string> rename;
  for (auto const& [n, t] : m) m2[n.substr(12)] = t;
  m2["h.0.attn.bias"] = HFTensor{{1, 1, d.P, d.P}, std::vector<float>(std::size_t(d.P) * d.P, 1.0f)};
  m2["lm_head.weight"] = m.at("transformer.wte.weight");
  write_text(c.p / "config.json", hf_config(d).dump());
  write_tensors(c.p / "model.safetensors", m2);
  CHECK(hf::load_gpt2(c.p).params == base);
}

TEST_CASE("F16 and BF16 checkpoints convert to float32 on load", "[hf][gpt2]") {
  Dims const d;
  for (DType dt : {DType::bfloat16, DType::float16}) {
    auto m = random_hf_model(d, 11);
    TempDir half, rounded;
    write_folder(half.p, d, m, dt);
    // the same values rounded to the 16-bit type, stored as F32: must load to identical floats
    for (auto& [n, t] : m)
      for (auto& x : t.v) x = dt == DType::bfloat16 ? float(rlflow::bfloat16(x)) : float(rlflow::float16(x));
    write_folder(rounded.p, d, m, DType::float32);
    auto const p16 = hf::load_gpt2(half.p).params;
    CHECK(p16 == hf::load_gpt2(rounded.p).params);
    auto ids = random_ids(d, 9, 5);
    CHECK(max_rel_err(model_logits(hf::load_gpt2(half.p).config, p16, ids), ref_logits(d, m, ids)) < 1e-5);
  }
}

TEST_CASE("export then load round-trips bit for bit, in transformers' names and layout", "[hf][gpt2]") {
  Dims const d;
  TempDir src, out, out2;
  auto m = random_hf_model(d, 21);
  write_folder(src.p, d, m);
  auto ck = hf::load_gpt2(src.p);
  hf::export_gpt2(out.p, ck.config, ck.params, DType::float32, 5, 6);
  auto back = hf::load_gpt2(out.p);
  CHECK(back.config == ck.config);
  CHECK(back.params == ck.params);
  // the exported tensors are exactly the HF tensors we wrote (names, shapes, values)
  auto f = st::File::load(out.p / "model.safetensors");
  CHECK(f.names().size() == m.size());
  for (auto const& [n, t] : m) {
    REQUIRE(f.contains(n));
    CHECK(f.info(n).shape == t.shape);
    CHECK(hf::tensor_as_f32(f, n) == t.v);
  }
  auto cfg = nlohmann::json::parse(std::ifstream(out.p / "config.json"));
  CHECK(cfg["model_type"] == "gpt2");
  CHECK(cfg["architectures"][0] == "GPT2LMHeadModel");
  CHECK(cfg["n_layer"] == d.L);
  CHECK(cfg["bos_token_id"] == 5);
  CHECK(cfg["eos_token_id"] == 6);
  // a critic's value head is not exported; the trunk still round-trips
  GPTConfig vc = ck.config;
  vc.value_head = true;
  std::vector<float> vp(rlflow::model::param_count(vc));
  rlflow::model::init_params(vc, vp);
  std::copy(ck.params.begin(), ck.params.end(), vp.begin());
  hf::export_gpt2(out2.p, vc, vp);
  CHECK(hf::load_gpt2(out2.p).params == ck.params);
  auto critic = hf::load_gpt2(out2.p, /*value_head=*/true, vc.seed);
  CHECK(critic.params == vp);
  // BF16 export loads to the rounded values
  TempDir ob;
  hf::export_gpt2(ob.p, ck.config, ck.params, DType::bfloat16);
  auto rb = hf::load_gpt2(ob.p).params;
  for (std::size_t i = 0; i < rb.size(); ++i) REQUIRE(rb[i] == float(rlflow::bfloat16(ck.params[i])));
}

TEST_CASE("bad folders are errors naming the tensor and the shapes", "[hf][gpt2]") {
  Dims const d;
  auto m = random_hf_model(d, 31);

  SECTION("truncated file") {
    TempDir dir;
    write_folder(dir.p, d, m);
    auto const file = dir.p / "model.safetensors";
    // the last tensor in the data section loses its last float
    std::string last;
    {
      auto f = st::File::load(file);
      std::size_t end = 0;
      for (auto const& n : f.names())
        if (f.info(n).end > end) end = f.info(n).end, last = n;
    }
    fs::resize_file(file, fs::file_size(file) - 4);
    auto e = error_of([&] { hf::load_gpt2(dir.p); });
    INFO(e);
    CHECK(e.find("'" + last + "'") != std::string::npos);
    CHECK(e.find("truncated") != std::string::npos);
  }
  SECTION("misnamed tensor") {
    TempDir dir;
    write_text(dir.p / "config.json", hf_config(d).dump());
    write_tensors(dir.p / "model.safetensors", m, DType::float32, {{"transformer.h.1.mlp.c_fc.weight", "transformer.h.1.mlp.fc_in.weight"}});
    auto e = error_of([&] { hf::load_gpt2(dir.p); });
    INFO(e);
    CHECK(e.find("'transformer.h.1.mlp.fc_in.weight'") != std::string::npos);
  }
  SECTION("missing tensor") {
    TempDir dir;
    auto m2 = m;
    m2.erase("transformer.h.0.ln_2.bias");
    write_folder(dir.p, d, m2);
    auto e = error_of([&] { hf::load_gpt2(dir.p); });
    INFO(e);
    CHECK(e.find("lacks tensor 'transformer.h.0.ln_2.bias' of shape (32)") != std::string::npos);
  }
  SECTION("misshaped tensor: c_attn stored (out, in)") {
    TempDir dir;
    auto m2 = m;
    m2["transformer.h.1.attn.c_attn.weight"].shape = {3 * d.C, d.C};
    write_folder(dir.p, d, m2);
    auto e = error_of([&] { hf::load_gpt2(dir.p); });
    INFO(e);
    CHECK(e.find("'transformer.h.1.attn.c_attn.weight'") != std::string::npos);
    CHECK(e.find("has shape (96, 32) but config.json implies (32, 96)") != std::string::npos);
  }
  SECTION("config.json disagreeing with the weights") {
    TempDir dir;
    write_folder(dir.p, d, m);
    Dims d2 = d;
    d2.L = 3;
    write_text(dir.p / "config.json", hf_config(d2).dump());
    auto e = error_of([&] { hf::load_gpt2(dir.p); });
    INFO(e);
    CHECK(e.find("lacks tensor 'transformer.h.2.") != std::string::npos);
  }
  SECTION("unknown architecture and unsupported options") {
    TempDir dir;
    write_folder(dir.p, d, m);
    auto cfg = hf_config(d);
    cfg["model_type"] = "llama";
    write_text(dir.p / "config.json", cfg.dump());
    CHECK_THROWS_AS(hf::load_gpt2(dir.p), rlflow::config_error);
    CHECK(error_of([&] { hf::load_gpt2(dir.p); }).find("model_type = 'llama' is not supported") != std::string::npos);
    cfg = hf_config(d);
    cfg["activation_function"] = "gelu";
    write_text(dir.p / "config.json", cfg.dump());
    CHECK(error_of([&] { hf::load_gpt2(dir.p); }).find("activation_function = 'gelu'") != std::string::npos);
    cfg = hf_config(d);
    cfg["layer_norm_epsilon"] = 1e-6;
    write_text(dir.p / "config.json", cfg.dump());
    CHECK(error_of([&] { hf::load_gpt2(dir.p); }).find("layer_norm_epsilon") != std::string::npos);
  }
  SECTION("no weights") {
    TempDir dir;
    write_text(dir.p / "config.json", hf_config(d).dump());
    CHECK_THROWS_AS(hf::load_gpt2(dir.p), rlflow::io_error);
  }
}

TEST_CASE("an rlflow checkpoint exports to a GPT-2 folder that loads back bit for bit", "[hf][gpt2][export]") {
  GPTConfig const c{.vocab_size = 29, .max_seq_len = 12, .n_layer = 2, .n_head = 2, .n_embd = 16, .seed = 9};
  std::vector<float> flat(rlflow::model::param_count(c));
  rlflow::model::init_params(c, flat);
  TempDir dir, out, tok;
  fs::create_directories(dir.p / "global_step_3");
  rlflow::engine::save_weights(dir.p / "global_step_3" / "actor.safetensors", c, flat);
  write_text(tok.p / "vocab.json", "{}");
  write_text(tok.p / "merges.txt", "#version: 0.2\n");
  rlflow::engine::export_hf(dir.p / "global_step_3", out.p, DType::float32, tok.p);
  auto back = hf::load_gpt2(out.p, false, c.seed);
  CHECK(back.config == c);
  CHECK(back.params == flat);
  CHECK(fs::exists(out.p / "vocab.json"));
  CHECK(fs::exists(out.p / "merges.txt"));
  // a file rlflow did not write is refused with the reason
  CHECK(error_of([&] { rlflow::engine::export_hf(out.p / "model.safetensors", dir.p / "x"); }).find("rlflow.gpt_config") !=
        std::string::npos);
}

}  // namespace test_hf_gpt2
