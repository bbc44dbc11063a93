// rlflow/model/impl/hf_folder.ipp: the bodies of rlflow/model/hf_folder.hpp's functions (Hugging Face
// folders: config.json, weight files, layout conversion, export; included by that header when
// RLFLOW_DEFINE_BODIES; see rlflow/core/config.hpp).
#pragma once

namespace rlflow::model::hf {
RLFLOW_DECL bool tanh_gelu_name(std::string const& a) {
  return a == "gelu_new" || a == "gelu_pytorch_tanh" || a == "gelu_fast";
}

namespace detail {
RLFLOW_DECL nlohmann::json read_json(fs::path const& p, char const* who) {
  std::error_code ec;
  if (fs::is_directory(p, ec)) throw io_error(msg("rlflow::model::hf::", who, ": ", p.string(), " is a folder, not a JSON file"));
  std::ifstream in(p, std::ios::binary);
  if (!in) throw io_error(msg("rlflow::model::hf::", who, ": cannot open ", p.string(), "; a Hugging Face model folder holds config.json and model.safetensors"));
  std::string const text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  // config.json and the shard index nest 2-3 levels; refuse deep text before parsing
  rlflow::detail::check_json_depth(text, 32, msg("rlflow::model::hf::", who), p.string());
  try {
    return nlohmann::json::parse(text);
  } catch (nlohmann::json::exception const& e) {
    throw format_error(msg("rlflow::model::hf::", who, ": ", p.string(), " is not valid JSON (", e.what(), ")"));
  }
}

RLFLOW_DECL std::string shape_str(std::vector<std::int64_t> const& s) {
  std::string o = "(";
  for (std::size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
  return o + ")";
}

}  // namespace detail
RLFLOW_DECL GPTConfig gpt2_config_from_json(nlohmann::json const& j, std::string const& where) {
  auto bad = [&](std::string const& what) {
    throw config_error(msg("rlflow::model::hf: ", where, ": ", what));
  };
  if (!j.is_object()) bad("is not a JSON object");
  if (j.contains("model_type") && !j["model_type"].is_string() && !j["model_type"].is_null())
    bad(msg("model_type = ", rlflow::detail::json_preview(j["model_type"]), " is not a string"));
  std::string const type = detail::get_or<std::string>(j, "model_type", "");
  if (type != "gpt2")
    bad(msg("model_type = '", type, "' is not supported; the built-in GPT loads GPT-2-family models (model_type 'gpt2': "
            "gpt2, distilgpt2, gpt2-medium, ...)"));
  GPTConfig c;
  // integers read exactly: a float (1e300) or a value beyond int (2^32 + k) is an error, never
  // converted (undefined behaviour) or narrowed (k layers)
  auto int_or = [&](char const* key, int def) {
    if (!j.contains(key) || j[key].is_null()) return def;
    return static_cast<int>(rlflow::detail::json_int_in(j[key], key, 0, std::numeric_limits<int>::max(), "rlflow::model::hf", where));
  };
  try {
    c.n_layer = int_or("n_layer", 12);
    c.n_head = int_or("n_head", 12);
    c.n_embd = int_or("n_embd", 768);
    c.vocab_size = int_or("vocab_size", 50257);
    c.max_seq_len = int_or("n_positions", int_or("n_ctx", 1024));
    if (j.contains("layer_norm_epsilon") && !j["layer_norm_epsilon"].is_null() && !j["layer_norm_epsilon"].is_number())
      bad(msg("layer_norm_epsilon = ", rlflow::detail::json_preview(j["layer_norm_epsilon"]), " is not a number"));
    double const eps = detail::get_or<double>(j, "layer_norm_epsilon", 1e-5);
    if (std::abs(eps - 1e-5) > 1e-12)
      bad(msg("layer_norm_epsilon = ", eps, " is not supported; the built-in GPT's LayerNorm uses GPT-2's 1e-5"));
    std::string const act = detail::get_or<std::string>(j, "activation_function", "gelu_new");
    if (!tanh_gelu_name(act))
      bad(msg("activation_function = '", act, "' is not supported; the built-in GPT computes GELU's tanh approximation "
              "(gelu_new, gelu_pytorch_tanh, gelu_fast)"));
    if (j.contains("n_inner") && !j["n_inner"].is_null() && int_or("n_inner", 0) != 4 * std::int64_t{c.n_embd})
      bad(msg("n_inner = ", int_or("n_inner", 0), " is not supported; the built-in GPT's MLP is 4 * n_embd = ", 4 * std::int64_t{c.n_embd}));
    if (!detail::get_or<bool>(j, "scale_attn_weights", true))
      bad("scale_attn_weights = false is not supported; the built-in GPT scales attention by 1/sqrt(head_dim)");
    if (detail::get_or<bool>(j, "scale_attn_by_inverse_layer_idx", false))
      bad("scale_attn_by_inverse_layer_idx = true is not supported by the built-in GPT");
    if (!detail::get_or<bool>(j, "tie_word_embeddings", true))
      bad("tie_word_embeddings = false is not supported; the built-in GPT's LM head is tied to wte");
    if (detail::get_or<bool>(j, "add_cross_attention", false))
      bad("add_cross_attention = true is not supported by the built-in GPT");
  } catch (nlohmann::json::exception const& e) {
    bad(msg("a hyper-parameter has the wrong JSON type (", e.what(), ")"));
  }
  try {
    c.validate();
  } catch (config_error const& e) {
    bad(e.what());
  }
  return c;
}

RLFLOW_DECL GPTConfig read_gpt2_config(fs::path const& folder) {
  return gpt2_config_from_json(detail::read_json(folder / "config.json", "read_gpt2_config"), (folder / "config.json").string());
}

RLFLOW_DECL GPTConfig config_from_json(nlohmann::json const& j, std::string const& where) {
  if (j.is_object() && j.contains("model_type") && j["model_type"].is_string()) {
    Arch a{};
    std::string const type = j["model_type"].get<std::string>();
    if (arch_from_name(type, a)) return a == Arch::gpt2 ? gpt2_config_from_json(j, where) : llama_config_from_json(j, where);
    throw config_error(msg("rlflow::model::hf: ", where, ": model_type = '", type,
                           "' is not supported; rlflow computes gpt2, llama (Llama 2/3), qwen2 (Qwen2, Qwen2.5) and qwen3 (dense) models"));
  }
  return gpt2_config_from_json(j, where);  // names the missing or malformed model_type
}

RLFLOW_DECL GPTConfig read_model_config(fs::path const& folder) {
  return config_from_json(detail::read_json(folder / "config.json", "read_model_config"), (folder / "config.json").string());
}

RLFLOW_DECL std::vector<fs::path> weight_files(fs::path const& folder) {
  if (fs::exists(folder / "model.safetensors")) return {folder / "model.safetensors"};
  fs::path const idx = folder / "model.safetensors.index.json";
  if (!fs::exists(idx)) {
    std::string hint = fs::exists(folder / "pytorch_model.bin")
                           ? "; the folder holds pytorch_model.bin (a pickle): convert it once with python -c \"from "
                             "transformers import AutoModelForCausalLM as M; M.from_pretrained('DIR').save_pretrained('DIR', "
                             "safe_serialization=True)\""
                           : "";
    throw io_error(msg("rlflow::model::hf: ", folder.string(), " has neither model.safetensors nor model.safetensors.index.json", hint));
  }
  auto j = detail::read_json(idx, "weight_files");
  if (!j.contains("weight_map") || !j["weight_map"].is_object())
    throw format_error(msg("rlflow::model::hf: ", idx.string(), " has no 'weight_map' object"));
  std::vector<fs::path> files;
  std::set<std::string> seen;
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    if (!it.value().is_string()) throw format_error(msg("rlflow::model::hf: ", idx.string(), ": weight_map['", it.key(), "'] is not a file name"));
    std::string const f = it.value().get<std::string>();
    // a shard is a plain file name beside the index (transformers writes model-0000k-of-0000n.safetensors):
    // never a path that leaves the folder
    if (f.empty() || f == "." || f == ".." || f.find('/') != std::string::npos || f.find('\\') != std::string::npos ||
        f.find('\0') != std::string::npos)
      throw format_error(msg("rlflow::model::hf: ", idx.string(), ": weight_map['", it.key(), "'] = '", f,
                             "' is not a plain file name in the model folder; shards sit beside the index"));
    if (seen.insert(f).second) files.push_back(folder / f);
  }
  return files;
}

RLFLOW_DECL std::string layout_name_of(std::string name) {
  if (name.starts_with("transformer.")) name = name.substr(12);
  if (name == "wte.weight") return "wte";
  if (name == "wpe.weight") return "wpe";
  if (name == "lm_head.weight") return "";
  if (name.starts_with("h.") && (name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias"))) return "";
  return name;
}

RLFLOW_DECL std::vector<float> tensor_as_f32(engine::safetensors::File const& f, std::string const& name) {
  auto const& info = f.info(name);
  auto const bytes = f.bytes(name);
  std::size_t const n = engine::safetensors::detail::numel(info.shape);
  std::vector<float> out(n);
  switch (info.dtype) {
    case DType::float32: std::memcpy(out.data(), bytes.data(), n * 4); break;
    case DType::bfloat16:
      for (std::size_t i = 0; i < n; ++i) {
        bfloat16 h;
        std::memcpy(&h.bits, bytes.data() + 2 * i, 2);
        out[i] = static_cast<float>(h);
      }
      break;
    case DType::float16:
      for (std::size_t i = 0; i < n; ++i) {
        float16 h;
        std::memcpy(&h.bits, bytes.data() + 2 * i, 2);
        out[i] = static_cast<float>(h);
      }
      break;
    default:
      throw dtype_error(msg("rlflow::model::hf: tensor '", name, "' in ", f.path(), " is ", dtype_name(info.dtype),
                            "; model weights must be F32, F16 or BF16"));
  }
  return out;
}

RLFLOW_DECL std::vector<std::int64_t> hf_shape(ParamTensor const& t, GPTConfig const& cfg) {
  if (cfg.llama_family()) return llama_hf_shape(t);
  std::int64_t const C = cfg.n_embd;
  if (t.name.ends_with("attn.c_attn.weight")) return {C, 3 * C};
  if (t.name.ends_with("mlp.c_fc.weight")) return {C, 4 * C};
  return t.shape;  // wte, wpe, LayerNorms, biases, c_proj weights (already (in, out))
}

RLFLOW_DECL void hf_to_layout(ParamTensor const& t, GPTConfig const& cfg, std::vector<float> const& src, float* dst) {
  if (cfg.llama_family()) return llama_hf_to_layout(t, src, dst);
  int const C = cfg.n_embd, hs = cfg.head_dim();
  if (t.name.ends_with("attn.c_attn.weight")) {
    // HF column j = part * C + head * hs + d  ->  our row (head * 3 + part) * hs + d, one input per column.
    for (int j = 0; j < 3 * C; ++j) {
      int const part = j / C, head = (j % C) / hs, d = j % hs;
      std::size_t const row = std::size_t((head * 3 + part) * hs + d);
      for (int c = 0; c < C; ++c) dst[row * C + c] = src[std::size_t(c) * 3 * C + j];
    }
  } else if (t.name.ends_with("attn.c_attn.bias")) {
    for (int j = 0; j < 3 * C; ++j) {
      int const part = j / C, head = (j % C) / hs, d = j % hs;
      dst[(head * 3 + part) * hs + d] = src[std::size_t(j)];
    }
  } else if (t.name.ends_with("mlp.c_fc.weight")) {
    for (int o = 0; o < 4 * C; ++o)
      for (int c = 0; c < C; ++c) dst[std::size_t(o) * C + c] = src[std::size_t(c) * 4 * C + o];
  } else {
    std::memcpy(dst, src.data(), sizeof(float) * t.numel);
  }
}

RLFLOW_DECL std::vector<float> layout_to_hf(ParamTensor const& t, GPTConfig const& cfg, float const* src) {
  if (cfg.llama_family()) return llama_layout_to_hf(t, src);
  int const C = cfg.n_embd, hs = cfg.head_dim();
  std::vector<float> out(t.numel);
  if (t.name.ends_with("attn.c_attn.weight")) {
    for (int j = 0; j < 3 * C; ++j) {
      int const part = j / C, head = (j % C) / hs, d = j % hs;
      std::size_t const row = std::size_t((head * 3 + part) * hs + d);
      for (int c = 0; c < C; ++c) out[std::size_t(c) * 3 * C + j] = src[row * C + c];
    }
  } else if (t.name.ends_with("attn.c_attn.bias")) {
    for (int j = 0; j < 3 * C; ++j) {
      int const part = j / C, head = (j % C) / hs, d = j % hs;
      out[std::size_t(j)] = src[(head * 3 + part) * hs + d];
    }
  } else if (t.name.ends_with("mlp.c_fc.weight")) {
    for (int o = 0; o < 4 * C; ++o)
      for (int c = 0; c < C; ++c) out[std::size_t(c) * 4 * C + o] = src[std::size_t(o) * C + c];
  } else {
    std::memcpy(out.data(), src, sizeof(float) * t.numel);
  }
  return out;
}

RLFLOW_DECL std::string hf_name(std::string const& layout_name, GPTConfig const& cfg) {
  if (cfg.llama_family()) return layout_name;
  return layout_name == "wte" || layout_name == "wpe" ? "transformer." + layout_name + ".weight" : "transformer." + layout_name;
}

RLFLOW_DECL std::vector<float> load_model_weights(fs::path const& folder, GPTConfig const& cfg) {
  ParamLayout const lay(cfg);
  auto const files = weight_files(folder);
  {  // before allocating: the files must be able to hold the model config.json describes (2 bytes a weight at least)
    std::uintmax_t have = 0;
    for (auto const& f : files) {
      std::error_code ec;
      auto const n = fs::file_size(f, ec);
      if (ec) throw io_error(msg("rlflow::model::hf: cannot read the size of ", f.string(), ": ", ec.message()));
      have += n;
    }
    std::uintmax_t const need = 2 * std::uintmax_t(lay.size() - (cfg.value_head ? std::size_t(cfg.n_embd) + 1 : 0));
    if (have < need)
      throw format_error(msg("rlflow::model::hf: ", folder.string(), ": config.json describes ", lay.size(),
                             " parameters (at least ", need, " bytes in F16/BF16) but the weight files hold ", have,
                             " bytes; config.json and the weights do not belong together"));
  }
  std::vector<float> flat(lay.size());
  init_params(cfg, flat);
  std::map<std::string, bool> filled;
  for (auto const& t : lay.tensors())
    if (!t.name.starts_with("value_head.")) filled[t.name] = false;
  for (auto const& file : files) {
    auto f = engine::safetensors::File::load(file);
    for (auto const& name : f.names()) {
      std::string const ln = cfg.llama_family() ? llama_layout_name_of(name, cfg) : layout_name_of(name);
      auto const& info = f.info(name);
      if (ln.empty()) {
        if (name.ends_with("lm_head.weight") &&
            info.shape != std::vector<std::int64_t>{cfg.vocab_size, cfg.n_embd})
          throw shape_error(msg("rlflow::model::hf: tensor '", name, "' in ", file.string(), " has shape ",
                                detail::shape_str(info.shape), " but the tied LM head expects ",
                                detail::shape_str({cfg.vocab_size, cfg.n_embd}), " (vocab_size, n_embd) from config.json"));
        continue;
      }
      auto it = filled.find(ln);
      if (it == filled.end())
        throw key_error(msg("rlflow::model::hf: tensor '", name, "' in ", file.string(), " is not part of a ", arch_name(cfg.arch),
                            " model with n_layer = ", cfg.n_layer, " (names look like '",
                            cfg.llama_family() ? "model.layers.0.self_attn.q_proj.weight" : "transformer.h.0.attn.c_attn.weight",
                            "'); the file does not match config.json"));
      if (it->second)
        throw key_error(msg("rlflow::model::hf: tensor '", name, "' appears twice (", file.string(), ")"));
      ParamTensor const& t = lay.find(ln);
      auto const want = hf_shape(t, cfg);
      if (info.shape != want)
        throw shape_error(msg("rlflow::model::hf: tensor '", name, "' in ", file.string(), " has shape ",
                              detail::shape_str(info.shape), " but config.json implies ", detail::shape_str(want),
                              "; the weights do not match config.json"));
      hf_to_layout(t, cfg, tensor_as_f32(f, name), flat.data() + t.offset);
      it->second = true;
    }
  }
  for (auto const& [name, ok] : filled)
    if (!ok) {
      ParamTensor const& t = lay.find(name);
      std::string const hf = hf_name(name, cfg);
      throw key_error(msg("rlflow::model::hf: ", folder.string(), " lacks tensor '", hf, "' of shape ",
                          detail::shape_str(hf_shape(t, cfg)), "; the checkpoint is incomplete"));
    }
  return flat;
}

RLFLOW_DECL std::vector<float> load_gpt2_weights(fs::path const& folder, GPTConfig const& cfg) { return load_model_weights(folder, cfg); }

RLFLOW_DECL ModelCheckpoint load_model(fs::path const& folder, bool value_head, std::uint64_t seed) {
  ModelCheckpoint c;
  c.config = read_model_config(folder);
  c.config.value_head = value_head;
  c.config.seed = seed;
  c.params = load_model_weights(folder, c.config);
  return c;
}

RLFLOW_DECL ModelCheckpoint load_gpt2(fs::path const& folder, bool value_head, std::uint64_t seed) {
  ModelCheckpoint c;
  c.config = read_gpt2_config(folder);
  c.config.value_head = value_head;
  c.config.seed = seed;
  c.params = load_model_weights(folder, c.config);
  return c;
}

RLFLOW_DECL nlohmann::ordered_json gpt2_config_json(GPTConfig const& cfg, std::int64_t bos_id, std::int64_t eos_id,
                                                    char const* torch_dtype) {
  return nlohmann::ordered_json{{"architectures", {"GPT2LMHeadModel"}},
                                {"model_type", "gpt2"},
                                {"activation_function", "gelu_new"},
                                {"attn_pdrop", 0.1},
                                {"bos_token_id", bos_id},
                                {"embd_pdrop", 0.1},
                                {"eos_token_id", eos_id},
                                {"initializer_range", 0.02},
                                {"layer_norm_epsilon", 1e-5},
                                {"n_ctx", cfg.max_seq_len},
                                {"n_embd", cfg.n_embd},
                                {"n_head", cfg.n_head},
                                {"n_inner", nullptr},
                                {"n_layer", cfg.n_layer},
                                {"n_positions", cfg.max_seq_len},
                                {"resid_pdrop", 0.1},
                                {"scale_attn_weights", true},
                                {"tie_word_embeddings", true},
                                {"torch_dtype", torch_dtype},
                                {"use_cache", true},
                                {"vocab_size", cfg.vocab_size}};
}

RLFLOW_DECL void export_model(fs::path const& folder, GPTConfig const& cfg, std::span<float const> flat,
                              DType dtype, std::int64_t bos_id, std::int64_t eos_id) {
  ParamLayout const lay(cfg);
  if (flat.size() != lay.size())
    throw shape_error(msg("rlflow::model::hf::export_model: ", flat.size(), " floats for a model of ", lay.size(), " parameters"));
  if (dtype != DType::float32 && dtype != DType::bfloat16 && dtype != DType::float16)
    throw dtype_error(msg("rlflow::model::hf::export_model: dtype ", dtype_name(dtype), " is not a weight type; use float32, bfloat16 or float16"));
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) throw io_error(msg("rlflow::model::hf::export_model: cannot create ", folder.string(), ": ", ec.message()));
  std::vector<std::vector<std::byte>> store;
  std::vector<engine::safetensors::TensorRecord> recs;
  for (auto const& t : lay.tensors()) {
    if (t.name.starts_with("value_head.")) continue;
    auto v = layout_to_hf(t, cfg, flat.data() + t.offset);
    std::vector<std::byte> b(v.size() * dtype_size(dtype));
    if (dtype == DType::float32) std::memcpy(b.data(), v.data(), b.size());
    for (std::size_t i = 0; dtype != DType::float32 && i < v.size(); ++i) {
      std::uint16_t const bits = dtype == DType::bfloat16 ? bfloat16(v[i]).bits : float16(v[i]).bits;
      std::memcpy(b.data() + 2 * i, &bits, 2);
    }
    store.push_back(std::move(b));
    std::string const name = hf_name(t.name, cfg);
    recs.push_back({name, dtype, hf_shape(t, cfg), std::span<std::byte const>(store.back())});
  }
  engine::safetensors::save(folder / "model.safetensors", recs, {{"format", "pt"}});
  char const* td = dtype == DType::float32 ? "float32" : dtype == DType::bfloat16 ? "bfloat16" : "float16";
  std::int64_t const bos = bos_id < 0 ? cfg.vocab_size - 1 : bos_id, eos = eos_id < 0 ? cfg.vocab_size - 1 : eos_id;
  std::string const text = (cfg.llama_family() ? llama_config_json(cfg, bos, eos, td) : gpt2_config_json(cfg, bos, eos, td)).dump(2) + "\n";
  fs::path const tmp = folder / ("config.json.tmp." + std::to_string(::getpid()));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw io_error(msg("rlflow::model::hf::export_model: cannot write ", tmp.string()));
    out << text;
    if (!out.flush()) throw io_error(msg("rlflow::model::hf::export_model: writing ", tmp.string(), " failed"));
  }
  fs::rename(tmp, folder / "config.json", ec);
  if (ec) throw io_error(msg("rlflow::model::hf::export_model: renaming ", tmp.string(), ": ", ec.message()));
}

RLFLOW_DECL void export_gpt2(fs::path const& folder, GPTConfig const& cfg, std::span<float const> flat, DType dtype,
                             std::int64_t bos_id, std::int64_t eos_id) {
  export_model(folder, cfg, flat, dtype, bos_id, eos_id);
}

}  // namespace rlflow::model::hf
