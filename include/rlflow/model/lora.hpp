// rlflow/model/lora.hpp: low-rank adapters (LoRA) on the built-in GPT's linear layers.
// Defines LoraConfig (rank, alpha, target modules), LoraLayout (the adapters' flat buffer: one
// A (r, in) and one B (out, r) per targeted module, named as PEFT's adapter_model.safetensors
// names them), init_lora (PEFT's init: A kaiming-uniform(a = sqrt 5), B zero), and the three
// computations the engines need: lora_forward (out += s B A x), lora_backward (dA, dB, dx) and
// lora_merge (W += s B A into a ParamLayout buffer). s = lora_alpha / r.
// PEFT: LoraConfig, LoraLayer / Linear (update_layer, reset_lora_parameters, merge); verl:
// actor_rollout_ref.model.lora_rank, lora_alpha, target_modules.
// Letters: N rows, K in features, O out features, r rank.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <rlflow/core/error.hpp>           // config_error, shape_error
#include <rlflow/model/layers.hpp>         // layers::sgemm
#include <rlflow/model/param_layout.hpp>   // GPTConfig, ParamLayout
#include <rlflow/model/random.hpp>         // philox4x32, uniform01

namespace rlflow::model {

//! Where in a block a linear sits; the engines call the adapters once per site and layer. The
//! Llama family's fused products hold several modules (qkv: q|k|v; fc: gate|up).
enum class LoraSite : std::uint8_t { qkv, proj, fc, fcproj };

//! LoRA hyper-parameters. rank 0 = no adapters. target_modules: {"all-linear"} (every projection
//! of a block; PEFT's all-linear, which leaves out the embedding and the LM head) or Hugging Face
//! module names: q_proj k_proj v_proj o_proj gate_proj up_proj down_proj (Llama family), c_attn
//! c_proj c_fc (GPT-2; c_proj is both attention's and the MLP's, as PEFT matches it).
//! verl: lora_rank (default 0), lora_alpha (16), target_modules (all-linear).
struct LoraConfig {
  int rank = 0;
  double alpha = 16.0;
  std::vector<std::string> target_modules{"all-linear"};
  std::uint64_t seed = 0;  //!< A's initialisation seed
  bool enabled() const { return rank > 0; }
  float scaling() const { return rank > 0 ? float(alpha / double(rank)) : 0.0f; }
  static constexpr int max_rank = 65536;
};

//! The module names a family's blocks have (what target_modules may list).
inline std::vector<std::string> lora_module_names(GPTConfig const& cfg) {
  if (cfg.llama_family()) return {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  return {"c_attn", "c_proj", "c_fc"};
}

//! One adapted module: rows [out0, out0 + out) of a site's output, its input width, and where its
//! A (r, in) and B (out, r) sit in the adapter buffer.
struct LoraModule {
  std::string path;  //!< Hugging Face module path, e.g. "model.layers.0.self_attn.q_proj"
  std::string kind;  //!< its name in target_modules, e.g. "q_proj"
  int layer = 0;
  LoraSite site = LoraSite::qkv;
  int out0 = 0, out = 0, in = 0;
  std::size_t a = 0, b = 0;  //!< offsets (floats) of A and B in the adapter buffer
};

//! The adapters of a model: module list and the flat buffer's layout (A then B per module, in
//! layer and site order). tensors() names them as PEFT does:
//! "base_model.model.<path>.lora_A.weight" (r, in) and "....lora_B.weight" (out, r).
class LoraLayout {
 public:
  LoraLayout() = default;
  //! Throws config_error for a bad rank, alpha or module name (naming the valid ones).
  LoraLayout(GPTConfig const& cfg, LoraConfig const& lc) : cfg_(cfg), lc_(lc) {
    if (lc.rank < 1 || lc.rank > LoraConfig::max_rank)
      throw config_error(msg("rlflow::model::LoraLayout: lora_rank = ", lc.rank, " is invalid; use a rank in [1, ",
                             LoraConfig::max_rank, "] (actor_rollout_ref.model.lora_rank; 0 turns LoRA off)"));
    if (!std::isfinite(lc.alpha) || !(lc.alpha > 0.0))
      throw config_error(msg("rlflow::model::LoraLayout: lora_alpha = ", lc.alpha, " must be a positive number (the scaling is "
                             "lora_alpha / lora_rank; verl's default is 16)"));
    auto const names = lora_module_names(cfg);
    if (lc.target_modules.empty())
      throw config_error("rlflow::model::LoraLayout: target_modules is empty; use 'all-linear' or a list of module names");
    bool all = false;
    for (auto const& t : lc.target_modules) {
      if (t == "all-linear") {
        all = true;
        continue;
      }
      if (std::find(names.begin(), names.end(), t) == names.end()) {
        std::string valid;
        for (auto const& n : names) valid += (valid.empty() ? "" : ", ") + n;
        throw config_error(msg("rlflow::model::LoraLayout: target module '", t, "' is not a linear layer of a ", arch_name(cfg.arch),
                               " block; use 'all-linear' or some of: ", valid, " (embedding and LM head are not adapted)"));
      }
    }
    auto want = [&](std::string_view n) {
      return all || std::find(lc.target_modules.begin(), lc.target_modules.end(), n) != lc.target_modules.end();
    };
    int const C = cfg.n_embd, F = cfg.ff_dim();
    for (int l = 0; l < cfg.n_layer; ++l) {
      if (cfg.llama_family()) {
        std::string const p = "model.layers." + std::to_string(l) + ".";
        int const Q = cfg.attn_dim(), KV = cfg.kv_heads() * cfg.head_dim();
        if (want("q_proj")) add(p + "self_attn.q_proj", "q_proj", l, LoraSite::qkv, 0, Q, C);
        if (want("k_proj")) add(p + "self_attn.k_proj", "k_proj", l, LoraSite::qkv, Q, KV, C);
        if (want("v_proj")) add(p + "self_attn.v_proj", "v_proj", l, LoraSite::qkv, Q + KV, KV, C);
        if (want("o_proj")) add(p + "self_attn.o_proj", "o_proj", l, LoraSite::proj, 0, C, Q);
        if (want("gate_proj")) add(p + "mlp.gate_proj", "gate_proj", l, LoraSite::fc, 0, F, C);
        if (want("up_proj")) add(p + "mlp.up_proj", "up_proj", l, LoraSite::fc, F, F, C);
        if (want("down_proj")) add(p + "mlp.down_proj", "down_proj", l, LoraSite::fcproj, 0, C, F);
      } else {
        std::string const p = "transformer.h." + std::to_string(l) + ".";
        if (want("c_attn")) add(p + "attn.c_attn", "c_attn", l, LoraSite::qkv, 0, 3 * C, C);
        if (want("c_proj")) add(p + "attn.c_proj", "c_proj", l, LoraSite::proj, 0, C, C);
        if (want("c_fc")) add(p + "mlp.c_fc", "c_fc", l, LoraSite::fc, 0, F, C);
        if (want("c_proj")) add(p + "mlp.c_proj", "c_proj", l, LoraSite::fcproj, 0, C, F);
      }
    }
    for (auto const& m : modules_)
      if (std::find(kinds_.begin(), kinds_.end(), m.kind) == kinds_.end()) kinds_.push_back(m.kind);
  }

  GPTConfig const& model() const { return cfg_; }
  LoraConfig const& config() const { return lc_; }
  int rank() const { return lc_.rank; }
  float scaling() const { return lc_.scaling(); }
  std::size_t size() const { return size_; }
  std::span<LoraModule const> modules() const { return modules_; }
  //! The module kinds adapted (distinct, in block order): adapter_config.json's target_modules.
  std::span<std::string const> kinds() const { return kinds_; }
  //! PEFT's tensor names and shapes: per module lora_A then lora_B.
  std::span<ParamTensor const> tensors() const { return tensors_; }
  //! Modules of (layer, site), a contiguous run of modules().
  std::span<LoraModule const> at(int layer, LoraSite site) const {
    auto b = std::find_if(modules_.begin(), modules_.end(), [&](auto const& m) { return m.layer == layer && m.site == site; });
    auto e = std::find_if(b, modules_.end(), [&](auto const& m) { return m.layer != layer || m.site != site; });
    return {modules_.data() + (b - modules_.begin()), std::size_t(e - b)};
  }

 private:
  void add(std::string path, std::string kind, int layer, LoraSite site, int out0, int out, int in) {
    std::int64_t const r = lc_.rank;
    LoraModule m{std::move(path), std::move(kind), layer, site, out0, out, in, size_, 0};
    size_ += std::size_t(r) * std::size_t(in);
    m.b = size_;
    size_ += std::size_t(out) * std::size_t(r);
    std::string const n = "base_model.model." + m.path;
    tensors_.push_back(ParamTensor{n + ".lora_A.weight", m.a, {r, in}, std::size_t(r) * std::size_t(in), true});
    tensors_.push_back(ParamTensor{n + ".lora_B.weight", m.b, {out, r}, std::size_t(out) * std::size_t(r), true});
    modules_.push_back(std::move(m));
  }
  GPTConfig cfg_;
  LoraConfig lc_;
  std::vector<LoraModule> modules_;
  std::vector<ParamTensor> tensors_;
  std::vector<std::string> kinds_;
  std::size_t size_ = 0;
};

//! PEFT's initialisation: A ~ kaiming_uniform(a = sqrt 5), i.e. U(-1/sqrt(in), 1/sqrt(in)), each
//! float drawn from philox(seed, index) (independent of threads); B = 0, so the adapted model
//! starts equal to the base model.
inline void init_lora(LoraLayout const& lay, std::span<float> flat) {
  if (flat.size() != lay.size())
    throw shape_error(msg("rlflow::model::init_lora: buffer holds ", flat.size(), " floats for adapters of ", lay.size()));
  for (auto const& m : lay.modules()) {
    double const bound = 1.0 / std::sqrt(double(m.in));
    std::size_t const na = std::size_t(lay.rank()) * std::size_t(m.in);
    for (std::size_t i = 0; i < na; ++i)
      flat[m.a + i] = float((2.0 * uniform01(philox4x32(lay.config().seed, m.a + i, 0x6c6fu /* "lo" */)) - 1.0) * bound);
    std::fill_n(flat.begin() + std::ptrdiff_t(m.b), std::size_t(m.out) * std::size_t(lay.rank()), 0.0f);
  }
}

//! Scratch of the adapter products: (N, r) floats, grown on demand.
struct LoraScratch {
  std::vector<float> u, du;
};

//! out (N, ld) columns [out0, out0 + out) += s (x A^T) B^T for every module of (layer, site);
//! x (N, K) is the site's input. PEFT: lora.Linear.forward (dropout 0).
inline void lora_forward(LoraLayout const& lay, float const* P, int layer, LoraSite site, float* out, int ld, float const* x, int N,
                         LoraScratch& ws) {
  int const r = lay.rank();
  for (auto const& m : lay.at(layer, site)) {
    ws.u.resize(std::size_t(N) * std::size_t(r));
    layers::sgemm(CblasNoTrans, CblasTrans, N, r, m.in, 1.0f, x, m.in, P + m.a, m.in, 0.0f, ws.u.data(), r);
    layers::sgemm(CblasNoTrans, CblasTrans, N, m.out, r, lay.scaling(), ws.u.data(), r, P + m.b, r, 1.0f, out + m.out0, ld);
  }
}

//! Backward of lora_forward for (layer, site): with dy (N, ld) the gradient of the site's
//! output and x its input, dA += du^T x, dB += s dy^T u and dx (N, K) += du A (skipped when dx
//! is null), where u = x A^T (recomputed) and du = s dy B.
inline void lora_backward(LoraLayout const& lay, float const* P, float* G, int layer, LoraSite site, float* dx, float const* dy, int ld,
                          float const* x, int N, LoraScratch& ws) {
  int const r = lay.rank();
  float const s = lay.scaling();
  for (auto const& m : lay.at(layer, site)) {
    ws.u.resize(std::size_t(N) * std::size_t(r));
    ws.du.resize(std::size_t(N) * std::size_t(r));
    layers::sgemm(CblasNoTrans, CblasTrans, N, r, m.in, 1.0f, x, m.in, P + m.a, m.in, 0.0f, ws.u.data(), r);
    layers::sgemm(CblasTrans, CblasNoTrans, m.out, r, N, s, dy + m.out0, ld, ws.u.data(), r, 1.0f, G + m.b, r);
    layers::sgemm(CblasNoTrans, CblasNoTrans, N, r, m.out, s, dy + m.out0, ld, P + m.b, r, 0.0f, ws.du.data(), r);
    layers::sgemm(CblasTrans, CblasNoTrans, r, m.in, N, 1.0f, ws.du.data(), r, x, m.in, 1.0f, G + m.a, m.in);
    if (dx) layers::sgemm(CblasNoTrans, CblasNoTrans, N, m.in, r, 1.0f, ws.du.data(), r, P + m.a, m.in, 1.0f, dx, m.in);
  }
}

//! full (ParamLayout order) += s B A for every module: the merged weights a rollout samples from.
//! Column-parallel sites (qkv, fc) store W (out, in); row-parallel ones (proj, fcproj) store it
//! (in, out), so they take the transpose. PEFT: LoraLayer.merge / merge_and_unload.
inline void lora_merge(LoraLayout const& lay, std::span<float const> adapters, std::span<float> full) {
  ParamLayout const pl(lay.model());
  if (adapters.size() != lay.size() || full.size() != pl.size())
    throw shape_error(msg("rlflow::model::lora_merge: ", adapters.size(), " adapter floats (want ", lay.size(), ") and ", full.size(),
                          " weights (want ", pl.size(), ")"));
  int const r = lay.rank();
  float const s = lay.scaling();
  float const* P = adapters.data();
  for (auto const& m : lay.modules()) {
    auto const& L = pl.layers[std::size_t(m.layer)];
    if (m.site == LoraSite::qkv || m.site == LoraSite::fc) {
      float* W = full.data() + (m.site == LoraSite::qkv ? L.qkv_w : L.fc_w) + std::size_t(m.out0) * std::size_t(m.in);
      layers::sgemm(CblasNoTrans, CblasNoTrans, m.out, m.in, r, s, P + m.b, r, P + m.a, m.in, 1.0f, W, m.in);
    } else {
      float* W = full.data() + (m.site == LoraSite::proj ? L.proj_w : L.fcproj_w);  // (in, out)
      layers::sgemm(CblasTrans, CblasTrans, m.in, m.out, r, s, P + m.a, m.in, P + m.b, r, 1.0f, W + m.out0, m.out);
    }
  }
}

}  // namespace rlflow::model
