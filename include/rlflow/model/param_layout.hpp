// rlflow/model/param_layout.hpp: the built-in GPT's hyper-parameters and flat parameter layout.
// Defines GPTConfig, ParamTensor, ParamLayout (named views into one flat float buffer),
// param_count and init_params (seeded, deterministic). Split out of gpt.hpp so that the
// tensor-parallel shard layout (tensor_parallel.hpp) and the GPT (gpt.hpp, which holds a shard)
// can both use it. Does not compute anything.
// Letters: C width, NH heads, V vocabulary, L layers.
#pragma once
#include <cmath>      // std::sqrt
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <rlflow/core/error.hpp>         // config_error, shape_error, key_error
#include <rlflow/model/random.hpp>  // philox4x32, normal01

namespace rlflow::model {

// ---------------------------------------------------------------------------------------------
// configuration

//! The GPT-2 hyper-parameters. value_head adds a scalar head (one value per token) for a critic.
struct GPTConfig {
  int vocab_size = 32;        //!< V, tokens
  int max_seq_len = 64;       //!< maximum positions (wpe rows)
  int n_layer = 2;            //!< L
  int n_head = 4;             //!< NH
  int n_embd = 64;            //!< C, divisible by NH
  std::uint64_t seed = 0;     //!< initialisation seed
  bool value_head = false;    //!< append a value head (critic)

  int head_dim() const { return n_embd / n_head; }

  //! Throws config_error naming the field, its value and the fix.
  void validate() const {
    auto bad = [](char const* what, auto v, char const* fix) {
      throw config_error(msg("rlflow::model::GPTConfig: ", what, " = ", v, " is invalid; ", fix));
    };
    if (vocab_size < 2) bad("vocab_size", vocab_size, "use at least 2 tokens");
    if (max_seq_len < 2) bad("max_seq_len", max_seq_len, "use at least 2 positions");
    if (n_layer < 1) bad("n_layer", n_layer, "use at least 1 layer");
    if (n_head < 1) bad("n_head", n_head, "use at least 1 head");
    if (n_embd < 1 || n_embd % n_head != 0)
      throw config_error(msg("rlflow::model::GPTConfig: n_embd = ", n_embd, " is not a positive multiple of n_head = ",
                             n_head, "; pick n_embd = n_head * head_dim"));
    // Upper bounds: sizes read from a file must not overflow the layout's int64
    // products (4 n_embd^2 overflows from n_embd = 2^31) nor loop over absurd layer counts.
    if (n_layer > max_layers) bad("n_layer", n_layer, "rlflow's GPT holds at most 4096 layers");
    std::int64_t const p = parameter_count();
    if (p < 0 || p > max_parameters)
      throw config_error(msg("rlflow::model::GPTConfig: vocab_size = ", vocab_size, ", max_seq_len = ", max_seq_len, ", n_layer = ",
                             n_layer, ", n_embd = ", n_embd, " give ", p < 0 ? std::string("more than 2^63") : std::to_string(p),
                             " parameters, above the limit of 2^36 (", max_parameters, ", 256 GiB of float32); use a smaller model"));
  }
  static constexpr int max_layers = 4096;
  static constexpr std::int64_t max_parameters = std::int64_t{1} << 36;
  //! Parameters of the layout (value head included), or -1 when the count overflows int64.
  std::int64_t parameter_count() const {
    std::int64_t const C = n_embd, V = vocab_size, T = max_seq_len, L = n_layer;
    std::int64_t emb = 0, cc = 0, per_layer = 0, layers = 0, total = 0;
    if (__builtin_add_overflow(V, T, &emb) || __builtin_mul_overflow(emb, C, &emb)) return -1;
    if (__builtin_mul_overflow(C, C, &cc) || __builtin_mul_overflow(cc, 12, &per_layer) ||
        __builtin_add_overflow(per_layer, 13 * C, &per_layer) || __builtin_mul_overflow(per_layer, L, &layers))
      return -1;
    if (__builtin_add_overflow(emb, layers, &total) || __builtin_add_overflow(total, 2 * C + (value_head ? C + 1 : 0), &total))
      return -1;
    return total;
  }
  friend bool operator==(GPTConfig const&, GPTConfig const&) = default;
};

// ---------------------------------------------------------------------------------------------
// parameter layout

//! One named parameter tensor: a view [offset, offset + numel) of the flat buffer.
struct ParamTensor {
  std::string name;                 //!< e.g. "h.0.attn.c_attn.weight"
  std::size_t offset = 0;           //!< in floats
  std::vector<std::int64_t> shape;  //!< row-major
  std::size_t numel = 0;
  bool decay = false;               //!< weight decay applies (matrices; not biases, LayerNorm, wpe)
};

//! The flat parameter layout. Order: wte (V, C), wpe (maxT, C), then per layer
//! ln_1 {weight, bias} (C), attn.c_attn {weight (3C, C) head-major rows [q_h|k_h|v_h], bias (3C)},
//! attn.c_proj {weight (C, C) stored (in, out), bias (C)}, ln_2 {weight, bias},
//! mlp.c_fc {weight (4C, C) (out, in), bias (4C)}, mlp.c_proj {weight (4C, C) stored (in, out), bias (C)},
//! then ln_f {weight, bias} and, for a critic, value_head {weight (C), bias (1)}.
//! Tensor parallelism shards heads and MLP columns as contiguous row blocks of
//! c_attn, c_proj, c_fc and mlp.c_proj, because all four are stored with the sharded axis first.
class ParamLayout {
 public:
  struct Layer {
    std::size_t ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, fcproj_w, fcproj_b;
  };

  explicit ParamLayout(GPTConfig const& cfg) {
    cfg.validate();
    std::int64_t const V = cfg.vocab_size, C = cfg.n_embd, T = cfg.max_seq_len;
    wte = add("wte", {V, C}, true);
    wpe = add("wpe", {T, C}, false);
    for (int l = 0; l < cfg.n_layer; ++l) {
      std::string const p = "h." + std::to_string(l) + ".";
      Layer L{};
      L.ln1_w = add(p + "ln_1.weight", {C}, false);
      L.ln1_b = add(p + "ln_1.bias", {C}, false);
      L.qkv_w = add(p + "attn.c_attn.weight", {3 * C, C}, true);
      L.qkv_b = add(p + "attn.c_attn.bias", {3 * C}, false);
      L.proj_w = add(p + "attn.c_proj.weight", {C, C}, true);
      L.proj_b = add(p + "attn.c_proj.bias", {C}, false);
      L.ln2_w = add(p + "ln_2.weight", {C}, false);
      L.ln2_b = add(p + "ln_2.bias", {C}, false);
      L.fc_w = add(p + "mlp.c_fc.weight", {4 * C, C}, true);
      L.fc_b = add(p + "mlp.c_fc.bias", {4 * C}, false);
      L.fcproj_w = add(p + "mlp.c_proj.weight", {4 * C, C}, true);
      L.fcproj_b = add(p + "mlp.c_proj.bias", {C}, false);
      layers.push_back(L);
    }
    lnf_w = add("ln_f.weight", {C}, false);
    lnf_b = add("ln_f.bias", {C}, false);
    if (cfg.value_head) {
      value_w = add("value_head.weight", {C}, true);
      value_b = add("value_head.bias", {1}, false);
    }
  }

  //! Total floats in the flat buffer.
  std::size_t size() const { return size_; }
  std::span<ParamTensor const> tensors() const { return tensors_; }
  //! The tensor called 'name'; throws key_error listing a few valid names.
  ParamTensor const& find(std::string_view name) const {
    for (auto const& t : tensors_)
      if (t.name == name) return t;
    throw key_error(msg("rlflow::model::ParamLayout::find: no parameter named '", name, "'; names look like 'wte', ",
                        "'h.0.attn.c_attn.weight', 'ln_f.bias' (", tensors_.size(), " tensors)"));
  }

  std::size_t wte = 0, wpe = 0, lnf_w = 0, lnf_b = 0;
  std::size_t value_w = 0, value_b = 0;  //!< valid when the config has a value head
  std::vector<Layer> layers;

 private:
  std::size_t add(std::string name, std::vector<std::int64_t> shape, bool decay) {
    std::size_t n = 1;
    for (auto d : shape) n *= static_cast<std::size_t>(d);
    tensors_.push_back(ParamTensor{std::move(name), size_, std::move(shape), n, decay});
    std::size_t const off = size_;
    size_ += n;
    return off;
  }
  std::vector<ParamTensor> tensors_;
  std::size_t size_ = 0;
};

//! Number of floats in a model's flat parameter buffer.
inline std::size_t param_count(GPTConfig const& cfg) { return ParamLayout(cfg).size(); }

//! GPT-2 initialisation from cfg.seed: weights ~ N(0, 0.02), the two residual projections
//! scaled by 1/sqrt(2L), wpe ~ N(0, 0.01), LayerNorm weights 1, biases 0. Each float's draw is
//! philox(seed, index), so the result is independent of threads and of the layout's order.
inline void init_params(GPTConfig const& cfg, std::span<float> flat) {
  ParamLayout const lay(cfg);
  if (flat.size() != lay.size())
    throw shape_error(msg("rlflow::model::init_params: buffer holds ", flat.size(), " floats but the model has ",
                          lay.size(), "; size it with param_count(cfg)"));
  double const resid = 0.02 / std::sqrt(2.0 * cfg.n_layer);
  for (auto const& t : lay.tensors()) {
    bool const is_bias = t.name.ends_with(".bias");
    bool const is_ln = t.name.find("ln_") != std::string::npos;
    float* p = flat.data() + t.offset;
    if (is_ln && !is_bias) {
      for (std::size_t i = 0; i < t.numel; ++i) p[i] = 1.0f;
    } else if (is_bias) {
      for (std::size_t i = 0; i < t.numel; ++i) p[i] = 0.0f;
    } else {
      double std = 0.02;
      if (t.name == "wpe") std = 0.01;
      if (t.name.ends_with("c_proj.weight")) std = resid;
      for (std::size_t i = 0; i < t.numel; ++i)
        p[i] = static_cast<float>(std * normal01(philox4x32(cfg.seed, t.offset + i, 0x6770u /* "gp" */)));
    }
  }
}

}  // namespace rlflow::model
