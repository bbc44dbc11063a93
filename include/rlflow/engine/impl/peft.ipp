// rlflow/engine/impl/peft.ipp: the bodies of rlflow/engine/peft.hpp's functions (PEFT adapter folders:
// parse, load, apply, save, export; included by that header when RLFLOW_DEFINE_BODIES; see
// rlflow/core/config.hpp).
#pragma once

namespace rlflow::engine {
namespace detail {
RLFLOW_DECL std::size_t gpt2_qkv_row(int j, int C, int hs) {
  int const part = j / C, head = (j % C) / hs, d = j % hs;
  return std::size_t((head * 3 + part) * hs + d);
}

RLFLOW_DECL bool permuted_rows(model::GPTConfig const& cfg, model::LoraModule const& m) {
  return !cfg.llama_family() && m.site == model::LoraSite::qkv;
}

}  // namespace detail
RLFLOW_DECL model::LoraConfig parse_adapter_config(std::string_view text, std::string const& where) {
  rlflow::detail::check_json_depth(text, 16, "rlflow::engine::peft", where);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (nlohmann::json::exception const& e) {
    throw format_error(msg("rlflow::engine::peft: ", where, " is not valid JSON (", e.what(), ")"));
  }
  if (!j.is_object()) detail::peft_bad(where, "adapter_config.json must hold a JSON object");
  auto str = [&](char const* k) -> std::string {
    if (!j.contains(k) || j[k].is_null()) return {};
    if (!j[k].is_string()) detail::peft_bad(where, msg(k, " = ", rlflow::detail::json_preview(j[k]), " is not a string"));
    return j[k].get<std::string>();
  };
  auto flag = [&](char const* k) {
    if (!j.contains(k) || j[k].is_null()) return false;
    if (!j[k].is_boolean()) detail::peft_bad(where, msg(k, " = ", rlflow::detail::json_preview(j[k]), " is not true or false"));
    return j[k].get<bool>();
  };
  auto empty_or_null = [&](char const* k) {
    return !j.contains(k) || j[k].is_null() || ((j[k].is_object() || j[k].is_array()) && j[k].empty());
  };
  if (std::string const t = str("peft_type"); !t.empty() && t != "LORA")
    detail::peft_bad(where, msg("peft_type = '", t, "'; rlflow reads LoRA adapters only (peft_type LORA)"));
  if (flag("use_dora")) detail::peft_bad(where, "use_dora = true (DoRA) is not supported; export a plain LoRA adapter");
  if (flag("use_rslora"))
    detail::peft_bad(where, "use_rslora = true (scaling lora_alpha / sqrt(r)) is not supported; rlflow scales by lora_alpha / r");
  if (std::string const b = str("bias"); !b.empty() && b != "none")
    detail::peft_bad(where, msg("bias = '", b, "'; rlflow's adapters train no biases (bias = \"none\")"));
  for (char const* k : {"modules_to_save", "layers_to_transform", "rank_pattern", "alpha_pattern"})
    if (!empty_or_null(k))
      detail::peft_bad(where, msg(k, " = ", rlflow::detail::json_preview(j[k]), " is not supported; rlflow adapts every layer's targeted "
                                  "modules with one rank and alpha (leave it null or empty)"));
  if (!j.contains("r")) detail::peft_bad(where, "the rank 'r' is missing");
  model::LoraConfig lc;
  lc.rank = int(rlflow::detail::json_int_in(j["r"], "r", 1, model::LoraConfig::max_rank, "rlflow::engine::peft", where));
  if (j.contains("lora_alpha")) {
    if (!j["lora_alpha"].is_number())
      detail::peft_bad(where, msg("lora_alpha = ", rlflow::detail::json_preview(j["lora_alpha"]), " is not a number"));
    lc.alpha = j["lora_alpha"].get<double>();
    if (!std::isfinite(lc.alpha) || !(lc.alpha > 0.0) || lc.alpha > 1e9)
      detail::peft_bad(where, msg("lora_alpha = ", lc.alpha, " must be a positive number"));
  } else {
    lc.alpha = 8.0;  // PEFT's LoraConfig default
  }
  if (!j.contains("target_modules") || j["target_modules"].is_null())
    detail::peft_bad(where, "target_modules is missing; it names the adapted modules ('all-linear' or a list)");
  auto const& t = j["target_modules"];
  lc.target_modules.clear();
  if (t.is_string()) {
    if (t.get<std::string>() != "all-linear")
      detail::peft_bad(where, msg("target_modules = ", rlflow::detail::json_preview(t), " is a regular expression; rlflow reads "
                                  "'all-linear' or a list of module names"));
    lc.target_modules.push_back("all-linear");
  } else if (t.is_array() && !t.empty() && t.size() <= 64) {
    for (auto const& e : t) {
      if (!e.is_string()) detail::peft_bad(where, msg("target_modules holds ", rlflow::detail::json_preview(e), ", not a module name"));
      lc.target_modules.push_back(e.get<std::string>());
    }
  } else {
    detail::peft_bad(where, msg("target_modules = ", rlflow::detail::json_preview(t), " must be 'all-linear' or a list of 1 to 64 names"));
  }
  return lc;
}

RLFLOW_DECL PeftAdapter parse_peft(std::string_view config_text, safetensors::File const& f, model::GPTConfig const& cfg,
                                   std::string const& where) {
  PeftAdapter out;
  out.config = parse_adapter_config(config_text, where);
  model::LoraLayout const lay(cfg, out.config);  // checks the module names against the family
  std::size_t want = 0;
  std::vector<std::string> expected;
  int const C = cfg.n_embd, hs = cfg.head_dim(), r = lay.rank();
  auto name_of = [](model::LoraModule const& m, int ab) {
    return "base_model.model." + m.path + (ab == 0 ? ".lora_A.weight" : ".lora_B.weight");
  };
  for (auto const& m : lay.modules())  // names and shapes first: nothing is allocated for a file that does not fit
    for (int ab = 0; ab < 2; ++ab) {
      std::string const name = name_of(m, ab);
      std::vector<std::int64_t> const shape = ab == 0 ? std::vector<std::int64_t>{r, m.in} : std::vector<std::int64_t>{m.out, r};
      if (!f.contains(name))
        throw format_error(msg("rlflow::engine::peft: ", f.path(), " lacks '", name, "' (adapter_config.json targets ", m.kind,
                               " with r = ", r, "); the adapter does not fit this base model"));
      auto const& info = f.info(name);
      if (info.shape != shape)
        throw format_error(msg("rlflow::engine::peft: '", name, "' in ", f.path(), " has shape ", model::hf::detail::shape_str(info.shape),
                               " but the base model (", arch_name(cfg.arch), ", hidden ", C, ") and r = ", r, " need ",
                               model::hf::detail::shape_str(shape), "; the adapter was trained on another model or rank"));
      ++want;
      expected.push_back(name);
    }
  out.adapters.assign(lay.size(), 0.0f);
  for (auto const& m : lay.modules())
    for (int ab = 0; ab < 2; ++ab) {
      std::string const name = name_of(m, ab);
      std::vector<float> const v = model::hf::tensor_as_f32(f, name);
      for (float x : v)
        if (!std::isfinite(x)) throw format_error(msg("rlflow::engine::peft: '", name, "' in ", f.path(), " holds a non-finite value"));
      float* dst = out.adapters.data() + (ab == 0 ? m.a : m.b);
      if (ab == 1 && detail::permuted_rows(cfg, m)) {
        for (int jr = 0; jr < m.out; ++jr)
          std::memcpy(dst + detail::gpt2_qkv_row(jr, C, hs) * std::size_t(r), v.data() + std::size_t(jr) * r, sizeof(float) * std::size_t(r));
      } else {
        std::memcpy(dst, v.data(), sizeof(float) * v.size());
      }
    }
  if (f.names().size() != want)  // every wanted tensor is there: the others are extra
    for (auto const& n : f.names())
      if (std::find(expected.begin(), expected.end(), n) == expected.end())
        throw format_error(msg("rlflow::engine::peft: ", f.path(), " holds '", n, "', which is not a LoRA tensor of the modules ",
                               "adapter_config.json targets (", want, " tensors); fix target_modules or the file"));
  return out;
}

RLFLOW_DECL PeftAdapter load_peft(std::filesystem::path const& dir, model::GPTConfig const& cfg) {
  auto const cfg_path = dir / "adapter_config.json";
  std::ifstream in(cfg_path, std::ios::binary);
  if (!in)
    throw io_error(msg("rlflow::engine::load_peft: cannot open ", cfg_path.string(), "; a PEFT adapter folder holds adapter_config.json "
                       "and adapter_model.safetensors"));
  std::string const text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  auto f = safetensors::File::load(dir / "adapter_model.safetensors");
  PeftAdapter a = parse_peft(text, f, cfg, cfg_path.string());
  try {
    auto const j = nlohmann::json::parse(text);
    if (j.contains("base_model_name_or_path") && j["base_model_name_or_path"].is_string())
      a.base_model_name_or_path = j["base_model_name_or_path"].get<std::string>();
  } catch (nlohmann::json::exception const&) {
  }
  return a;
}

RLFLOW_DECL void apply_peft(TrainingEngine& e, PeftAdapter const& a) {
  e.enable_lora(a.config);
  if (e.trainable().size() != a.adapters.size())
    throw shape_error(msg("rlflow::engine::apply_peft: ", a.adapters.size(), " adapter floats for a layout of ", e.trainable().size()));
  std::copy(a.adapters.begin(), a.adapters.end(), e.trainable().begin());
}

RLFLOW_DECL void save_peft(std::filesystem::path const& dir, model::LoraLayout const& lay, std::span<float const> adapters,
                           std::string const& base_model_name_or_path) {
  if (adapters.size() != lay.size())
    throw shape_error(msg("rlflow::engine::save_peft: ", adapters.size(), " adapter floats for a layout of ", lay.size()));
  std::filesystem::create_directories(dir);
  model::GPTConfig const& cfg = lay.model();
  int const C = cfg.n_embd, hs = cfg.head_dim(), r = lay.rank();
  std::vector<std::vector<float>> store;  // row-permuted copies (GPT-2 c_attn's lora_B)
  store.reserve(lay.modules().size());
  std::vector<safetensors::TensorRecord> recs;
  for (auto const& m : lay.modules()) {
    std::string const n = "base_model.model." + m.path;
    recs.push_back({n + ".lora_A.weight", DType::float32, {r, m.in}, std::as_bytes(adapters.subspan(m.a, std::size_t(r) * m.in))});
    std::span<float const> b = adapters.subspan(m.b, std::size_t(m.out) * r);
    if (detail::permuted_rows(cfg, m)) {
      auto& p = store.emplace_back(b.size());
      for (int jr = 0; jr < m.out; ++jr)
        std::memcpy(p.data() + std::size_t(jr) * r, b.data() + detail::gpt2_qkv_row(jr, C, hs) * std::size_t(r), sizeof(float) * std::size_t(r));
      b = p;
    }
    recs.push_back({n + ".lora_B.weight", DType::float32, {m.out, r}, std::as_bytes(b)});
  }
  safetensors::save(dir / "adapter_model.safetensors", recs, {{"format", "pt"}});
  nlohmann::ordered_json j;
  j["peft_type"] = "LORA";
  j["task_type"] = "CAUSAL_LM";
  j["base_model_name_or_path"] = base_model_name_or_path;
  j["r"] = r;
  double const alpha = lay.config().alpha;
  if (alpha == std::floor(alpha) && alpha < 1e9) j["lora_alpha"] = std::int64_t(alpha);
  else j["lora_alpha"] = alpha;
  j["target_modules"] = std::vector<std::string>(lay.kinds().begin(), lay.kinds().end());
  j["lora_dropout"] = 0.0;
  j["bias"] = "none";
  j["fan_in_fan_out"] = !cfg.llama_family();  // GPT-2's Conv1D stores (in, out)
  j["use_rslora"] = false;
  j["use_dora"] = false;
  j["modules_to_save"] = nullptr;
  j["inference_mode"] = true;
  std::ofstream out(dir / "adapter_config.json", std::ios::binary | std::ios::trunc);
  out << j.dump(2) << "\n";
  if (!out) throw io_error(msg("rlflow::engine::save_peft: cannot write ", (dir / "adapter_config.json").string()));
}

RLFLOW_DECL void save_peft(std::filesystem::path const& dir, TrainingEngine const& e, std::string const& base_model_name_or_path) {
  if (!e.lora_on())
    throw config_error("rlflow::engine::save_peft: the engine has no LoRA adapters (actor_rollout_ref.model.lora_rank = 0); "
                       "export full weights with export_hf");
  save_peft(dir, e.lora_layout(), e.trainable(), base_model_name_or_path);
}

RLFLOW_DECL void export_peft(std::filesystem::path checkpoint, std::filesystem::path const& out_dir,
                             std::string const& base_model_name_or_path) {
  if (std::filesystem::is_directory(checkpoint)) checkpoint /= "actor.safetensors";
  auto f = safetensors::File::load(checkpoint);
  model::GPTConfig const cfg = checkpoint_config(f);
  model::LoraConfig const lc = checkpoint_lora(f);
  if (!lc.enabled())
    throw config_error(msg("rlflow::engine::export_peft: ", f.path(), " holds no LoRA adapters (the run trained full weights, "
                           "actor_rollout_ref.model.lora_rank=0); export its weights as a model folder (rlflow_export without --peft)"));
  model::LoraLayout const lay(cfg, lc);
  save_peft(out_dir, lay, load_lora_adapters(f, lay), base_model_name_or_path);
}

RLFLOW_DECL void export_merged_hf(std::filesystem::path const& dir, TrainingEngine const& e, DType dtype,
                                  std::int64_t bos_id, std::int64_t eos_id) {
  std::vector<float> full(e.layout().size());
  e.policy_weights(full);
  model::hf::export_model(dir, e.config(), full, dtype, bos_id, eos_id);
}

}  // namespace rlflow::engine
