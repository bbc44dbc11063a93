// rlflow/model/param_layout.hpp: the built-in GPT's hyper-parameters and flat parameter layout.
// Defines GPTConfig, ParamTensor, ParamLayout (named views into one flat float buffer),
// param_count and init_params (seeded, deterministic), and ActivationLayout (where a trunk
// forward keeps its activations). Split out of gpt.hpp so that the
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

//! The model families the engines compute. gpt2: LayerNorm, learned positions, GELU MLP, tied
//! head. The Llama family (llama, qwen2, qwen3): RMSNorm, rotary positions, SwiGLU MLP,
//! grouped-query attention; qwen2 adds q/k/v biases, qwen3 per-head q/k RMSNorm.
enum class Arch : std::uint8_t { gpt2, llama, qwen2, qwen3 };

//! Hugging Face's model_type of an architecture ("gpt2", "llama", "qwen2", "qwen3").
inline char const* arch_name(Arch a) {
  switch (a) {
    case Arch::gpt2: return "gpt2";
    case Arch::llama: return "llama";
    case Arch::qwen2: return "qwen2";
    case Arch::qwen3: return "qwen3";
  }
  return "?";
}
//! The Arch named 'name' (a model_type); false when it names none.
inline bool arch_from_name(std::string_view name, Arch& out) {
  for (Arch a : {Arch::gpt2, Arch::llama, Arch::qwen2, Arch::qwen3})
    if (name == arch_name(a)) {
      out = a;
      return true;
    }
  return false;
}

//! How rotary position frequencies are scaled (transformers' rope_scaling / rope_parameters
//! rope_type): none ("default"), linear (positions divided by factor), llama3 (Llama-3.1's
//! wavelength-dependent smoothing between low_freq_factor and high_freq_factor).
enum class RopeType : std::uint8_t { none, linear, llama3 };

//! The model's hyper-parameters: GPT-2's, and for the Llama family the fields transformers'
//! LlamaConfig / Qwen2Config / Qwen3Config carry. value_head adds a scalar head (one value per
//! token) for a critic. Fields of the other family keep their defaults (validate() checks it).
struct GPTConfig {
  int vocab_size = 32;        //!< V, tokens (embedding rows)
  int max_seq_len = 64;       //!< maximum positions (wpe rows; max_position_embeddings)
  int n_layer = 2;            //!< L
  int n_head = 4;             //!< NH, query heads
  int n_embd = 64;            //!< C, the residual width (hidden_size)
  std::uint64_t seed = 0;     //!< initialisation seed
  bool value_head = false;    //!< append a value head (critic)

  Arch arch = Arch::gpt2;
  int n_kv_head = 0;          //!< NKV key/value heads (grouped-query attention); 0: n_head
  int head_size = 0;          //!< hd, explicit head_dim (Qwen3); 0: n_embd / n_head
  int intermediate_size = 0;  //!< F, the MLP width; 0: 4 n_embd (GPT-2)
  float rms_norm_eps = 1e-6f;
  double rope_theta = 10000.0;
  RopeType rope_type = RopeType::none;
  double rope_factor = 1.0;                  //!< linear and llama3
  double rope_low_freq_factor = 1.0;         //!< llama3
  double rope_high_freq_factor = 4.0;        //!< llama3
  int rope_original_max_position = 8192;     //!< llama3: original_max_position_embeddings
  bool qkv_bias = false;      //!< q/k/v projections carry biases (qwen2 always; llama attention_bias)
  bool o_bias = false;        //!< o_proj carries a bias (llama attention_bias)
  bool mlp_bias = false;      //!< gate/up/down projections carry biases (llama mlp_bias)
  bool qk_norm = false;       //!< per-head RMSNorm of q and k before RoPE (qwen3)
  bool tie_word_embeddings = true;  //!< the LM head is wte (GPT-2 always)

  bool llama_family() const { return arch != Arch::gpt2; }
  int head_dim() const { return head_size > 0 ? head_size : n_embd / n_head; }
  int kv_heads() const { return n_kv_head > 0 ? n_kv_head : n_head; }
  int ff_dim() const { return intermediate_size > 0 ? intermediate_size : 4 * n_embd; }
  //! Rows of the fused q|k|v projection: (NH + 2 NKV) hd.
  int qkv_dim() const { return (n_head + 2 * kv_heads()) * head_dim(); }
  //! Width of the attention output (NH hd; C for GPT-2).
  int attn_dim() const { return n_head * head_dim(); }

  //! Throws config_error naming the field, its value and the fix.
  void validate() const {
    auto bad = [](char const* what, auto v, char const* fix) {
      throw config_error(msg("rlflow::model::GPTConfig: ", what, " = ", v, " is invalid; ", fix));
    };
    if (vocab_size < 2) bad("vocab_size", vocab_size, "use at least 2 tokens");
    if (max_seq_len < 2) bad("max_seq_len", max_seq_len, "use at least 2 positions");
    if (n_layer < 1) bad("n_layer", n_layer, "use at least 1 layer");
    if (n_head < 1) bad("n_head", n_head, "use at least 1 head");
    if (n_head > max_heads) bad("n_head", n_head, "rlflow's models hold at most 65536 heads");
    if (!llama_family()) {
      if (n_embd < 1 || n_embd % n_head != 0)
        throw config_error(msg("rlflow::model::GPTConfig: n_embd = ", n_embd, " is not a positive multiple of n_head = ",
                               n_head, "; pick n_embd = n_head * head_dim"));
      if (n_kv_head != 0 || head_size != 0 || intermediate_size != 0 || rope_type != RopeType::none || qkv_bias || o_bias ||
          mlp_bias || qk_norm || !tie_word_embeddings)
        throw config_error("rlflow::model::GPTConfig: arch = gpt2 takes none of the Llama-family fields (n_kv_head, head_size, "
                           "intermediate_size, rope_*, qkv_bias, o_bias, mlp_bias, qk_norm, tie_word_embeddings = false); "
                           "set arch to llama, qwen2 or qwen3, or leave them at their defaults");
    } else {
      if (n_embd < 1 || n_embd > max_width) bad("n_embd", n_embd, "use a hidden_size in [1, 2^20]");
      if (n_kv_head < 0 || n_kv_head > n_head || n_head % kv_heads() != 0)
        throw config_error(msg("rlflow::model::GPTConfig: num_key_value_heads = ", n_kv_head, " must divide num_attention_heads = ",
                               n_head, " (grouped-query attention shares each key/value head among n_head / n_kv_head heads)"));
      if (head_size < 0 || head_size > 4096 || head_size % 2 != 0 || (head_size == 0 && (n_embd % n_head != 0 || (n_embd / n_head) % 2)))
        throw config_error(msg("rlflow::model::GPTConfig: head_dim = ", head_dim(), " (head_size ", head_size, ", hidden_size ",
                               n_embd, ", heads ", n_head, ") must be a positive even number up to 4096 (rotary embeddings pair "
                               "its halves); set head_dim explicitly or make hidden_size a multiple of 2 num_attention_heads"));
      if (intermediate_size < 1 || intermediate_size > (1 << 24)) bad("intermediate_size", intermediate_size, "use a positive MLP width up to 2^24");
      if (!(rms_norm_eps > 0.0f) || !(rms_norm_eps < 1.0f)) bad("rms_norm_eps", rms_norm_eps, "use a small positive epsilon such as 1e-6");
      if (!(rope_theta > 1.0) || !(rope_theta < 1e12)) bad("rope_theta", rope_theta, "use a base above 1 such as 10000 or 1000000");
      if (rope_type != RopeType::none && (!(rope_factor >= 1.0) || !(rope_factor < 1e6)))
        bad("rope_scaling.factor", rope_factor, "use a scaling factor >= 1");
      if (rope_type == RopeType::llama3 &&
          (!(rope_low_freq_factor > 0.0) || !(rope_high_freq_factor > rope_low_freq_factor) || rope_original_max_position < 1))
        throw config_error(msg("rlflow::model::GPTConfig: llama3 rope_scaling needs 0 < low_freq_factor (", rope_low_freq_factor,
                               ") < high_freq_factor (", rope_high_freq_factor, ") and original_max_position_embeddings (",
                               rope_original_max_position, ") >= 1"));
      if (qk_norm != (arch == Arch::qwen3))
        throw config_error(msg("rlflow::model::GPTConfig: qk_norm = ", qk_norm, " does not fit arch = ", arch_name(arch),
                               " (qwen3 normalises q and k per head; llama and qwen2 do not)"));
      if (arch == Arch::qwen2 && (!qkv_bias || o_bias))
        throw config_error("rlflow::model::GPTConfig: arch = qwen2 has q/k/v biases and no o_proj bias (qkv_bias = true, o_bias = false)");
    }
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
  static constexpr int max_heads = 65536;
  static constexpr int max_width = 1 << 20;
  static constexpr std::int64_t max_parameters = std::int64_t{1} << 36;
  //! Parameters of the layout (value head included), or -1 when the count overflows int64.
  std::int64_t parameter_count() const {
    std::int64_t const C = n_embd, V = vocab_size, T = max_seq_len, L = n_layer;
    std::int64_t emb = 0, cc = 0, per_layer = 0, layers = 0, total = 0;
    if (llama_family()) {  // every factor is bounded by validate's checks above: int64 holds the products
      std::int64_t const hd = head_dim(), Q = std::int64_t(n_head) * hd, KV = std::int64_t(kv_heads()) * hd, F = intermediate_size;
      per_layer = 2 * C /*norms*/ + (Q + 2 * KV) * C + Q * C + 3 * F * C + (qkv_bias ? Q + 2 * KV : 0) + (o_bias ? C : 0) +
                  (mlp_bias ? 2 * F + C : 0) + (qk_norm ? 2 * hd : 0);
      if (__builtin_mul_overflow(V, C, &emb) || __builtin_mul_overflow(emb, tie_word_embeddings ? 1 : 2, &emb)) return -1;
      if (__builtin_mul_overflow(per_layer, L, &layers) || __builtin_add_overflow(emb, layers, &total) ||
          __builtin_add_overflow(total, C + (value_head ? C + 1 : 0), &total))
        return -1;
      return total;
    }
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

//! The built-in model of a shape (vocab_size, max_seq_len, n_layer, n_head, n_embd, seed taken
//! from 'shape') in architecture 'arch': GPT-2 as it is; the Llama family with n_head / 2
//! key/value heads (n_head when odd), head_dim n_embd / n_head, a SwiGLU MLP of 3 n_embd, tied
//! embeddings, qwen2's q/k/v biases, qwen3's q/k norms.
inline GPTConfig builtin_model(GPTConfig shape, Arch arch) {
  if (arch == Arch::gpt2) return shape;
  shape.arch = arch;
  shape.n_kv_head = shape.n_head % 2 == 0 ? shape.n_head / 2 : shape.n_head;
  shape.intermediate_size = 3 * shape.n_embd;
  shape.qkv_bias = arch == Arch::qwen2;
  shape.qk_norm = arch == Arch::qwen3;
  shape.tie_word_embeddings = true;
  return shape;
}

//! Offsets are 64-bit everywhere (also where size_t is 32-bit, as in the planner page's
//! WebAssembly), so estimates of large models do not wrap.
//! Where each activation of a (B, T) trunk forward sits in one flat float buffer: the embedding
//! output res0, then per layer ln1, its mean and rstd, qkv, the attention probabilities, the
//! attention output, res2, ln2 (+ mean, rstd), fc, gelu(fc) and res3. The CPU GPT and the CUDA
//! training engine keep the same activations for their backward passes and share this layout.
//! The Llama family: RMSNorms keep no mean (size 0), qkv is (N, (NH + 2 NKV) hd) after q/k norm
//! and RoPE, atty (N, NH hd), fch the (N, 2F) gate|up product and fch_gelu silu(gate) * up
//! (N, F); with q/k norm, qkv_raw keeps the projection and qk_rstd the per-head rstd (N (NH + NKV)).
//! Checkpointed (activation checkpointing, transformers' gradient_checkpointing): the residual
//! stream entering every layer and the last layer's output, (L + 1) x (N, C), then one layer's
//! other activations, shared by every layer (layer(l) names the same offsets for all l except
//! res3, which is the stream slot l + 1): L (N, C) + one layer's floats in all, against L layers'.
//! The backward recomputes each layer's activations from its stream slot before using them.
class ActivationLayout {
 public:
  //! Offsets (in floats) of one layer's activations.
  struct Layer {
    std::uint64_t ln1, ln1_mean, ln1_rstd, qkv, att, atty, res2, ln2, ln2_mean, ln2_rstd, fch, fch_gelu, res3, qkv_raw, qk_rstd;
  };

  ActivationLayout() = default;
  ActivationLayout(GPTConfig const& cfg, int B, int T, bool checkpointed = false)
      : ActivationLayout(cfg, std::uint64_t(B) * T, std::uint64_t(B) * std::uint64_t(cfg.n_head) * T * T, checkpointed) {}
  //! n tokens with att floats of attention probabilities (packed sequences: layers::varlen_probs_floats).
  ActivationLayout(GPTConfig const& cfg, std::uint64_t n, std::uint64_t att, bool checkpointed = false)
      : n_(n), c_(std::uint64_t(cfg.n_embd)), att_(att), ckpt_(checkpointed) {
    bool const llama = cfg.llama_family();
    qkv_ = llama ? std::uint64_t(cfg.qkv_dim()) : 3 * c_;
    atty_ = std::uint64_t(cfg.attn_dim());
    ff_ = std::uint64_t(cfg.ff_dim());
    fc_ = llama ? 2 * ff_ : ff_;
    mean_ = llama ? 0 : n_;
    raw_ = cfg.qk_norm ? n_ * qkv_ : 0;
    qkr_ = cfg.qk_norm ? n_ * std::uint64_t(cfg.n_head + cfg.kv_heads()) : 0;
    layers0_ = n_ * c_;
    per_layer_ = n_ * c_ /*ln1*/ + mean_ + n_ + n_ * qkv_ + att_ + n_ * atty_ + n_ * c_ /*res2*/ + n_ * c_ /*ln2*/ + mean_ + n_ +
                 n_ * fc_ + n_ * ff_ + n_ * c_ /*res3*/ + raw_ + qkr_;
    size_ = layers0_ + std::uint64_t(cfg.n_layer) * per_layer_;
    if (ckpt_) {  // the stream slots res0 .. res_L, then one layer without its res3 (a stream slot)
      layers0_ = (std::uint64_t(cfg.n_layer) + 1) * n_ * c_;
      size_ = layers0_ + per_layer_ - n_ * c_;
    }
  }

  //! Floats the whole buffer needs.
  std::uint64_t size() const { return size_; }
  //! Floats of one layer's activations (res3 included).
  std::uint64_t per_layer() const { return per_layer_; }
  //! One layer's activations are shared by every layer (the backward recomputes them).
  bool checkpointed() const { return ckpt_; }
  //! The embedding output (the residual stream entering layer 0).
  std::uint64_t res0() const { return 0; }
  //! The residual stream entering layer l (res0, or layer l-1's res3).
  std::uint64_t residual_in(int l) const { return l == 0 ? res0() : layer(l - 1).res3; }
  Layer layer(int l) const {
    std::uint64_t o = layers0_ + (ckpt_ ? 0 : std::uint64_t(l) * per_layer_);
    auto take = [&](std::uint64_t n) { std::uint64_t const r = o; o += n; return r; };
    Layer A{};
    A.ln1 = take(n_ * c_);
    A.ln1_mean = take(mean_);
    A.ln1_rstd = take(n_);
    A.qkv = take(n_ * qkv_);
    A.att = take(att_);
    A.atty = take(n_ * atty_);
    A.res2 = take(n_ * c_);
    A.ln2 = take(n_ * c_);
    A.ln2_mean = take(mean_);
    A.ln2_rstd = take(n_);
    A.fch = take(n_ * fc_);
    A.fch_gelu = take(n_ * ff_);
    A.res3 = ckpt_ ? (std::uint64_t(l) + 1) * n_ * c_ : take(n_ * c_);
    A.qkv_raw = take(raw_);
    A.qk_rstd = take(qkr_);
    return A;
  }

 private:
  std::uint64_t n_ = 0, c_ = 0, att_ = 0, layers0_ = 0, per_layer_ = 0, size_ = 0;
  std::uint64_t qkv_ = 0, atty_ = 0, ff_ = 0, fc_ = 0, mean_ = 0, raw_ = 0, qkr_ = 0;
  bool ckpt_ = false;
};

//! RoPE inverse frequencies (hd / 2) of a Llama-family config, computed in double: theta^(-2i/hd),
//! then the rope_scaling of the config (linear: / factor; llama3: transformers'
//! _compute_llama3_parameters: wavelengths above original/low_freq_factor divided by factor,
//! below original/high_freq_factor kept, smoothly interpolated between).
inline std::vector<double> rope_inv_freq(GPTConfig const& c) {
  int const hd = c.head_dim();
  std::vector<double> f(std::size_t(hd / 2));
  for (int i = 0; i < hd / 2; ++i) f[std::size_t(i)] = 1.0 / std::pow(c.rope_theta, double(2 * i) / double(hd));
  if (c.rope_type == RopeType::linear)
    for (auto& x : f) x /= c.rope_factor;
  if (c.rope_type == RopeType::llama3) {
    double const old = c.rope_original_max_position, lo = old / c.rope_low_freq_factor, hi = old / c.rope_high_freq_factor;
    double const pi = 3.14159265358979323846;
    for (auto& x : f) {
      double const wavelen = 2.0 * pi / x;
      if (wavelen > lo) {
        x /= c.rope_factor;
      } else if (wavelen >= hi) {  // medium: smooth between scaled and unscaled
        double const s = (old / wavelen - c.rope_low_freq_factor) / (c.rope_high_freq_factor - c.rope_low_freq_factor);
        x = (1.0 - s) * x / c.rope_factor + s * x;
      }
    }
  }
  return f;
}

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

//! The flat parameter layout.
//! GPT-2 order: wte (V, C), wpe (maxT, C), then per layer
//! ln_1 {weight, bias} (C), attn.c_attn {weight (3C, C) head-major rows [q_h|k_h|v_h], bias (3C)},
//! attn.c_proj {weight (C, C) stored (in, out), bias (C)}, ln_2 {weight, bias},
//! mlp.c_fc {weight (4C, C) (out, in), bias (4C)}, mlp.c_proj {weight (4C, C) stored (in, out), bias (C)},
//! then ln_f {weight, bias} and, for a critic, value_head {weight (C), bias (1)}.
//! Tensor parallelism shards heads and MLP columns as contiguous row blocks of
//! c_attn, c_proj, c_fc and mlp.c_proj, because all four are stored with the sharded axis first.
//! Llama family, transformers' names (Q = NH hd, KV = NKV hd, F intermediate): model.embed_tokens
//! (V, C), then per layer model.layers.N. input_layernorm (C); self_attn. q_proj, k_proj, v_proj
//! weights (Q, C), (KV, C), (KV, C) adjacent (one fused (Q + 2 KV, C) product), their biases
//! adjacent (qkv_bias); q_norm, k_norm (hd) (qk_norm); o_proj.weight stored (in, out) = (Q, C),
//! the transpose of transformers' (C, Q), and its bias (o_bias); post_attention_layernorm (C);
//! mlp. gate_proj, up_proj weights (F, C) adjacent (one (2F, C) product), their biases adjacent
//! (mlp_bias); down_proj.weight stored (in, out) = (F, C), transposed, and its bias; then
//! model.norm (C), lm_head.weight (V, C) unless tied, and a critic's value_head.
//! The Layer offsets name the same roles in both families (ln1 = input_layernorm, qkv = the fused
//! q|k|v, proj = o_proj, ln2 = post_attention_layernorm, fc = gate|up, fcproj = down_proj); a
//! tensor the model lacks is at ParamLayout::none.
class ParamLayout {
 public:
  static constexpr std::size_t none = ~std::size_t{0};
  struct Layer {
    std::size_t ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, fcproj_w, fcproj_b;
    std::size_t q_norm = none, k_norm = none;
  };

  explicit ParamLayout(GPTConfig const& cfg) {
    cfg.validate();
    if (cfg.llama_family()) {
      build_llama(cfg);
      return;
    }
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
    lm_head = wte;
    if (cfg.value_head) {
      value_w = add("value_head.weight", {C}, true);
      value_b = add("value_head.bias", {1}, false);
    }
  }

  //! Total floats in the flat buffer.
  std::size_t size() const { return size_; }
  //! The same count summed in 64 bits from the tensors' shapes: right also where size_t is
  //! 32-bit (the planner page's WebAssembly estimates models of billions of parameters).
  std::int64_t count() const {
    std::int64_t n = 0;
    for (auto const& t : tensors_) {
      std::int64_t e = 1;
      for (auto d : t.shape) e *= d;
      n += e;
    }
    return n;
  }
  std::span<ParamTensor const> tensors() const { return tensors_; }
  //! The tensor called 'name'; throws key_error listing a few valid names.
  ParamTensor const& find(std::string_view name) const {
    for (auto const& t : tensors_)
      if (t.name == name) return t;
    throw key_error(msg("rlflow::model::ParamLayout::find: no parameter named '", name, "'; names look like 'wte', ",
                        "'h.0.attn.c_attn.weight', 'ln_f.bias' (", tensors_.size(), " tensors)"));
  }

  std::size_t wte = 0, wpe = none, lnf_w = 0, lnf_b = none;
  std::size_t lm_head = 0;               //!< the LM head's (V, C) rows: wte when tied
  std::size_t value_w = 0, value_b = 0;  //!< valid when the config has a value head
  std::vector<Layer> layers;

 private:
  void build_llama(GPTConfig const& cfg) {
    std::int64_t const V = cfg.vocab_size, C = cfg.n_embd, hd = cfg.head_dim(), Q = std::int64_t(cfg.n_head) * hd,
                       KV = std::int64_t(cfg.kv_heads()) * hd, F = cfg.intermediate_size;
    wte = add("model.embed_tokens.weight", {V, C}, true);
    for (int l = 0; l < cfg.n_layer; ++l) {
      std::string const p = "model.layers." + std::to_string(l) + ".";
      Layer L{none, none, none, none, none, none, none, none, none, none, none, none};
      L.ln1_w = add(p + "input_layernorm.weight", {C}, false);
      L.qkv_w = add(p + "self_attn.q_proj.weight", {Q, C}, true);
      add(p + "self_attn.k_proj.weight", {KV, C}, true);
      add(p + "self_attn.v_proj.weight", {KV, C}, true);
      if (cfg.qkv_bias) {
        L.qkv_b = add(p + "self_attn.q_proj.bias", {Q}, false);
        add(p + "self_attn.k_proj.bias", {KV}, false);
        add(p + "self_attn.v_proj.bias", {KV}, false);
      }
      if (cfg.qk_norm) {
        L.q_norm = add(p + "self_attn.q_norm.weight", {hd}, false);
        L.k_norm = add(p + "self_attn.k_norm.weight", {hd}, false);
      }
      L.proj_w = add(p + "self_attn.o_proj.weight", {Q, C}, true);
      if (cfg.o_bias) L.proj_b = add(p + "self_attn.o_proj.bias", {C}, false);
      L.ln2_w = add(p + "post_attention_layernorm.weight", {C}, false);
      L.fc_w = add(p + "mlp.gate_proj.weight", {F, C}, true);
      add(p + "mlp.up_proj.weight", {F, C}, true);
      if (cfg.mlp_bias) {
        L.fc_b = add(p + "mlp.gate_proj.bias", {F}, false);
        add(p + "mlp.up_proj.bias", {F}, false);
      }
      L.fcproj_w = add(p + "mlp.down_proj.weight", {F, C}, true);
      if (cfg.mlp_bias) L.fcproj_b = add(p + "mlp.down_proj.bias", {C}, false);
      layers.push_back(L);
    }
    lnf_w = add("model.norm.weight", {C}, false);
    lm_head = cfg.tie_word_embeddings ? wte : add("lm_head.weight", {V, C}, true);
    if (cfg.value_head) {
      value_w = add("value_head.weight", {C}, true);
      value_b = add("value_head.bias", {1}, false);
    }
  }

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
//! (c_proj; o_proj and down_proj in the Llama family) scaled by 1/sqrt(2L), wpe ~ N(0, 0.01),
//! norm weights 1, biases 0. Each float's draw is
//! philox(seed, index), so the result is independent of threads and of the layout's order.
inline void init_params(GPTConfig const& cfg, std::span<float> flat) {
  ParamLayout const lay(cfg);
  if (flat.size() != lay.size())
    throw shape_error(msg("rlflow::model::init_params: buffer holds ", flat.size(), " floats but the model has ",
                          lay.size(), "; size it with param_count(cfg)"));
  double const resid = 0.02 / std::sqrt(2.0 * cfg.n_layer);
  for (auto const& t : lay.tensors()) {
    bool const is_bias = t.name.ends_with(".bias");
    bool const is_ln = t.name.find("ln_") != std::string::npos || t.name.find("norm") != std::string::npos;
    float* p = flat.data() + t.offset;
    if (is_ln && !is_bias) {
      for (std::size_t i = 0; i < t.numel; ++i) p[i] = 1.0f;
    } else if (is_bias) {
      for (std::size_t i = 0; i < t.numel; ++i) p[i] = 0.0f;
    } else {
      double std = 0.02;
      if (t.name == "wpe") std = 0.01;
      if (t.name.ends_with("c_proj.weight") || t.name.ends_with("o_proj.weight") || t.name.ends_with("down_proj.weight")) std = resid;
      for (std::size_t i = 0; i < t.numel; ++i)
        p[i] = static_cast<float>(std * normal01(philox4x32(cfg.seed, t.offset + i, 0x6770u /* "gp" */)));
    }
  }
}

}  // namespace rlflow::model
