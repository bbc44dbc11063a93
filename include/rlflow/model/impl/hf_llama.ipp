// rlflow/model/impl/hf_llama.ipp: the bodies of rlflow/model/hf_llama.hpp's functions (the Llama
// family's config.json and weight layout; included by that header when RLFLOW_DEFINE_BODIES; see
// rlflow/core/config.hpp).
#pragma once

namespace rlflow::model::hf {
RLFLOW_DECL GPTConfig llama_config_from_json(nlohmann::json const& j, std::string const& where) {
  auto bad = [&](std::string const& what) { throw config_error(msg("rlflow::model::hf: ", where, ": ", what)); };
  if (!j.is_object()) bad("is not a JSON object");
  if (!j.contains("model_type") || !j["model_type"].is_string()) bad("has no model_type string");
  std::string const type = j["model_type"].get<std::string>();
  GPTConfig c;
  if (!arch_from_name(type, c.arch) || c.arch == Arch::gpt2)
    bad(msg("model_type = '", type, "' is not a Llama-family model (llama, qwen2, qwen3)"));
  auto has = [&](char const* key) { return j.contains(key) && !j[key].is_null(); };
  auto int_or = [&](char const* key, int def, int lo = 1) {
    if (!has(key)) return def;
    return static_cast<int>(rlflow::detail::json_int_in(j[key], key, lo, std::numeric_limits<int>::max(), "rlflow::model::hf", where));
  };
  auto num = [&](nlohmann::json const& o, char const* key, double def) {
    if (!o.contains(key) || o[key].is_null()) return def;
    if (!o[key].is_number()) bad(msg(key, " = ", rlflow::detail::json_preview(o[key]), " is not a number"));
    double const v = o[key].get<double>();
    if (!std::isfinite(v)) bad(msg(key, " is not finite"));
    return v;
  };
  auto flag = [&](char const* key, bool def) {
    if (!has(key)) return def;
    if (!j[key].is_boolean()) bad(msg(key, " = ", rlflow::detail::json_preview(j[key]), " is not true or false"));
    return j[key].get<bool>();
  };
  bool const qwen = c.arch == Arch::qwen2 || c.arch == Arch::qwen3;
  c.vocab_size = int_or("vocab_size", qwen ? 151936 : 32000, 2);
  c.n_embd = int_or("hidden_size", 4096);
  c.intermediate_size = int_or("intermediate_size", c.arch == Arch::llama ? 11008 : 22016);
  c.n_layer = int_or("num_hidden_layers", 32);
  c.n_head = int_or("num_attention_heads", 32);
  c.n_kv_head = int_or("num_key_value_heads", c.n_head);
  if (c.arch == Arch::qwen2) {
    if (has("head_dim") && int_or("head_dim", 0) != c.n_embd / std::max(c.n_head, 1))
      bad(msg("head_dim = ", int_or("head_dim", 0), " is not hidden_size / num_attention_heads = ", c.n_embd / std::max(c.n_head, 1),
              "; Qwen2 has no separate head_dim"));
  } else if (has("head_dim")) {
    c.head_size = int_or("head_dim", 0);
    if (c.n_head > 0 && c.head_size == c.n_embd / c.n_head && c.n_embd % c.n_head == 0) c.head_size = 0;  // the default spelt out
  } else if (c.arch == Arch::qwen3) {
    c.head_size = 128;  // Qwen3Config's default
  }
  c.max_seq_len = int_or("max_position_embeddings", c.arch == Arch::llama ? 2048 : 32768, 2);
  c.rms_norm_eps = float(num(j, "rms_norm_eps", 1e-6));
  if (!(c.rms_norm_eps > 0.0f)) bad(msg("rms_norm_eps = ", num(j, "rms_norm_eps", 1e-6), " must be a positive number"));
  c.tie_word_embeddings = flag("tie_word_embeddings", false);
  bool const attn_bias = flag("attention_bias", false);
  if (c.arch == Arch::qwen2) {
    if (has("attention_bias") && !attn_bias) bad("attention_bias = false is not Qwen2 (its q/k/v projections always carry biases)");
    c.qkv_bias = true;
    c.o_bias = false;
  } else {
    c.qkv_bias = c.o_bias = attn_bias;
  }
  c.mlp_bias = flag("mlp_bias", false);
  if (c.mlp_bias && c.arch != Arch::llama) bad("mlp_bias = true is a Llama option; Qwen MLPs have no biases");
  c.qk_norm = c.arch == Arch::qwen3;
  if (has("hidden_act")) {
    if (!j["hidden_act"].is_string() || j["hidden_act"].get<std::string>() != "silu")
      bad(msg("hidden_act = ", rlflow::detail::json_preview(j["hidden_act"]), " is not supported; the Llama family's MLP is SwiGLU (silu)"));
  }
  // what the engines do not compute: an error naming the field
  for (char const* moe : {"num_experts", "num_local_experts", "n_routed_experts", "moe_intermediate_size"})
    if (has(moe) && !(j[moe].is_number() && j[moe].get<double>() == 0))
      bad(msg(moe, " = ", rlflow::detail::json_preview(j[moe]), ": mixture-of-experts models are not supported"));
  if (flag("use_sliding_window", false))
    bad("use_sliding_window = true: sliding-window attention is not supported; set it to false (full attention)");
  if (has("quantization_config"))
    bad("quantization_config is present: quantized weights are not supported; use an F32, BF16 or F16 checkpoint");
  if (has("pretraining_tp") && int_or("pretraining_tp", 1) != 1)
    bad(msg("pretraining_tp = ", int_or("pretraining_tp", 1), " is not supported; use 1 (the same model computed in one piece)"));
  // rotary embeddings: rope_theta + rope_scaling, or transformers' newer rope_parameters (both inside)
  c.rope_theta = num(j, "rope_theta", 10000.0);
  nlohmann::json rs;
  char const* rs_key = "rope_scaling";
  if (has("rope_parameters")) {
    rs = j["rope_parameters"];
    rs_key = "rope_parameters";
    if (!rs.is_object()) bad("rope_parameters is not an object");
    if (rs.contains("rope_theta")) {
      double const t = num(rs, "rope_theta", c.rope_theta);
      if (has("rope_theta") && t != c.rope_theta)
        bad(msg("rope_theta = ", c.rope_theta, " and rope_parameters.rope_theta = ", t, " disagree"));
      c.rope_theta = t;
    }
  } else if (has("rope_scaling")) {
    rs = j["rope_scaling"];
    if (!rs.is_object()) bad("rope_scaling is not an object or null");
  }
  if (rs.is_object()) {
    std::string type_s = "default";
    for (char const* k : {"rope_type", "type"})
      if (rs.contains(k) && !rs[k].is_null()) {
        if (!rs[k].is_string()) bad(msg(rs_key, ".", k, " is not a string"));
        type_s = rs[k].get<std::string>();
        break;
      }
    if (type_s == "default") {
      c.rope_type = RopeType::none;
    } else if (type_s == "linear" || type_s == "llama3") {
      c.rope_type = type_s == "linear" ? RopeType::linear : RopeType::llama3;
      if (!rs.contains("factor")) bad(msg(rs_key, " of type ", type_s, " has no factor"));
      c.rope_factor = num(rs, "factor", 1.0);
      if (c.rope_type == RopeType::llama3) {
        for (char const* k : {"low_freq_factor", "high_freq_factor", "original_max_position_embeddings"})
          if (!rs.contains(k)) bad(msg(rs_key, " of type llama3 has no ", k));
        c.rope_low_freq_factor = num(rs, "low_freq_factor", 1.0);
        c.rope_high_freq_factor = num(rs, "high_freq_factor", 4.0);
        double const om = num(rs, "original_max_position_embeddings", 8192);
        if (!(om >= 1 && om <= 1e9) || om != std::floor(om))
          bad(msg(rs_key, ".original_max_position_embeddings = ", om, " is not a positive integer"));
        c.rope_original_max_position = int(om);
      }
    } else {
      bad(msg(rs_key, ".rope_type = '", type_s, "' is not supported; rlflow computes the rope types default, linear and llama3"));
    }
  }
  try {
    c.validate();
  } catch (config_error const& e) {
    bad(e.what());
  }
  return c;
}

RLFLOW_DECL nlohmann::ordered_json llama_config_json(GPTConfig const& cfg, std::int64_t bos_id, std::int64_t eos_id,
                                                     char const* torch_dtype) {
  char const* archs = cfg.arch == Arch::llama ? "LlamaForCausalLM" : cfg.arch == Arch::qwen2 ? "Qwen2ForCausalLM" : "Qwen3ForCausalLM";
  nlohmann::ordered_json j{{"architectures", {archs}},
                           {"model_type", arch_name(cfg.arch)},
                           {"attention_dropout", 0.0},
                           {"bos_token_id", bos_id},
                           {"eos_token_id", eos_id},
                           {"hidden_act", "silu"},
                           {"hidden_size", cfg.n_embd},
                           {"initializer_range", 0.02},
                           {"intermediate_size", cfg.intermediate_size},
                           {"max_position_embeddings", cfg.max_seq_len},
                           {"num_attention_heads", cfg.n_head},
                           {"num_hidden_layers", cfg.n_layer},
                           {"num_key_value_heads", cfg.kv_heads()},
                           {"rms_norm_eps", double(cfg.rms_norm_eps)},
                           {"rope_theta", cfg.rope_theta}};
  if (cfg.arch != Arch::qwen2) {
    j["head_dim"] = cfg.head_dim();
    j["attention_bias"] = cfg.qkv_bias;
  }
  if (cfg.arch == Arch::llama) j["mlp_bias"] = cfg.mlp_bias;
  if (cfg.arch != Arch::llama) j["use_sliding_window"] = false;
  if (cfg.rope_type == RopeType::none) {
    j["rope_scaling"] = nullptr;
  } else if (cfg.rope_type == RopeType::linear) {
    j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", cfg.rope_factor}};
  } else {
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", cfg.rope_factor},
                         {"low_freq_factor", cfg.rope_low_freq_factor},
                         {"high_freq_factor", cfg.rope_high_freq_factor},
                         {"original_max_position_embeddings", cfg.rope_original_max_position}};
  }
  j["tie_word_embeddings"] = cfg.tie_word_embeddings;
  j["torch_dtype"] = torch_dtype;
  j["use_cache"] = true;
  j["vocab_size"] = cfg.vocab_size;
  return j;
}

RLFLOW_DECL bool llama_transposed(ParamTensor const& t) {
  return t.name.ends_with("self_attn.o_proj.weight") || t.name.ends_with("mlp.down_proj.weight");
}

RLFLOW_DECL std::vector<std::int64_t> llama_hf_shape(ParamTensor const& t) {
  if (llama_transposed(t)) return {t.shape[1], t.shape[0]};
  return t.shape;
}

RLFLOW_DECL void llama_hf_to_layout(ParamTensor const& t, std::vector<float> const& src, float* dst) {
  if (!llama_transposed(t)) {
    std::memcpy(dst, src.data(), sizeof(float) * t.numel);
    return;
  }
  std::size_t const R = std::size_t(t.shape[0]), Cc = std::size_t(t.shape[1]);  // ours (R, Cc) = theirs^T (Cc, R)
  for (std::size_t c = 0; c < Cc; ++c)
    for (std::size_t r = 0; r < R; ++r) dst[r * Cc + c] = src[c * R + r];
}

RLFLOW_DECL std::vector<float> llama_layout_to_hf(ParamTensor const& t, float const* src) {
  std::vector<float> out(t.numel);
  if (!llama_transposed(t)) {
    std::memcpy(out.data(), src, sizeof(float) * t.numel);
    return out;
  }
  std::size_t const R = std::size_t(t.shape[0]), Cc = std::size_t(t.shape[1]);
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t c = 0; c < Cc; ++c) out[c * R + r] = src[r * Cc + c];
  return out;
}

RLFLOW_DECL std::string llama_layout_name_of(std::string const& name, GPTConfig const& cfg) {
  if (name.ends_with("self_attn.rotary_emb.inv_freq")) return "";
  if (name == "lm_head.weight" && cfg.tie_word_embeddings) return "";
  return name;
}

}  // namespace rlflow::model::hf
