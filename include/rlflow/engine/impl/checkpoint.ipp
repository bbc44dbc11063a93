// rlflow/engine/impl/checkpoint.ipp: the bodies of rlflow/engine/checkpoint.hpp's functions (rlflow
// checkpoints: config metadata, weights, LoRA adapters, save and load; included by that header when
// RLFLOW_DEFINE_BODIES; see rlflow/core/config.hpp).
#pragma once

namespace rlflow::engine {
namespace detail {
RLFLOW_DECL std::string config_json(model::GPTConfig const& c) {
  nlohmann::ordered_json j = {{"vocab_size", c.vocab_size}, {"max_seq_len", c.max_seq_len}, {"n_layer", c.n_layer},
                              {"n_head", c.n_head}, {"n_embd", c.n_embd}, {"seed", c.seed}, {"value_head", c.value_head}};
  if (c.llama_family()) {
    j["arch"] = model::arch_name(c.arch);
    j["n_kv_head"] = c.n_kv_head;
    j["head_size"] = c.head_size;
    j["intermediate_size"] = c.intermediate_size;
    j["rms_norm_eps"] = double(c.rms_norm_eps);
    j["rope_theta"] = c.rope_theta;
    j["rope_type"] = int(c.rope_type);
    j["rope_factor"] = c.rope_factor;
    j["rope_low_freq_factor"] = c.rope_low_freq_factor;
    j["rope_high_freq_factor"] = c.rope_high_freq_factor;
    j["rope_original_max_position"] = c.rope_original_max_position;
    j["qkv_bias"] = c.qkv_bias;
    j["o_bias"] = c.o_bias;
    j["mlp_bias"] = c.mlp_bias;
    j["qk_norm"] = c.qk_norm;
    j["tie_word_embeddings"] = c.tie_word_embeddings;
  }
  return j.dump();
}

RLFLOW_DECL model::GPTConfig read_config(safetensors::File const& f) {
  auto it = f.metadata().find("rlflow.gpt_config");
  if (it == f.metadata().end())
    throw format_error(msg("rlflow::engine: ", f.path(), " has no 'rlflow.gpt_config' metadata; it was not written by rlflow::engine::save_*"));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(it->second);
  } catch (nlohmann::json::exception const& e) {
    throw format_error(msg("rlflow::engine: ", f.path(), " has malformed 'rlflow.gpt_config' metadata (", e.what(), ")"));
  }
  if (!j.is_object())
    throw format_error(msg("rlflow::engine: ", f.path(), " has 'rlflow.gpt_config' metadata that is not a JSON object"));
  // every field an integer in range (a float read as int would be undefined behaviour)
  auto const int_field = [&](const char* name, std::int64_t lo) -> int {
    auto it2 = j.find(name);
    if (it2 == j.end() || !it2->is_number_integer())
      throw format_error(msg("rlflow::engine: ", f.path(), ": 'rlflow.gpt_config' field '", name, "' is ",
                             it2 == j.end() ? std::string("missing") : rlflow::detail::json_preview(*it2), "; expected an integer"));
    if (it2->is_number_unsigned() ? it2->get<std::uint64_t>() > 0x7fffffffull
                                  : (it2->get<std::int64_t>() < lo || it2->get<std::int64_t>() > 0x7fffffffll))
      throw format_error(msg("rlflow::engine: ", f.path(), ": 'rlflow.gpt_config' field '", name, "' = ", rlflow::detail::json_preview(*it2),
                             " is out of range [", lo, ", 2147483647]"));
    return static_cast<int>(it2->get<std::int64_t>());
  };
  model::GPTConfig got;
  got.vocab_size = int_field("vocab_size", 1);
  got.max_seq_len = int_field("max_seq_len", 1);
  got.n_layer = int_field("n_layer", 1);
  got.n_head = int_field("n_head", 1);
  got.n_embd = int_field("n_embd", 1);
  auto vh = j.find("value_head");
  if (vh == j.end() || !vh->is_boolean())
    throw format_error(msg("rlflow::engine: ", f.path(), ": 'rlflow.gpt_config' field 'value_head' is ",
                           vh == j.end() ? std::string("missing") : rlflow::detail::json_preview(*vh), "; expected true or false"));
  got.value_head = vh->get<bool>();
  if (auto ar = j.find("arch"); ar != j.end()) {
    if (!ar->is_string() || !model::arch_from_name(ar->get<std::string>(), got.arch))
      throw format_error(msg("rlflow::engine: ", f.path(), ": 'rlflow.gpt_config' field 'arch' is ", rlflow::detail::json_preview(*ar),
                             "; expected gpt2, llama, qwen2 or qwen3"));
    auto const flag = [&](char const* name) {
      auto b = j.find(name);
      if (b == j.end() || !b->is_boolean())
        throw format_error(msg("rlflow::engine: ", f.path(), ": 'rlflow.gpt_config' field '", name, "' is ",
                               b == j.end() ? std::string("missing") : rlflow::detail::json_preview(*b), "; expected true or false"));
      return b->get<bool>();
    };
    auto const real = [&](char const* name) {
      auto d = j.find(name);
      if (d == j.end() || !d->is_number() || !std::isfinite(d->get<double>()))
        throw format_error(msg("rlflow::engine: ", f.path(), ": 'rlflow.gpt_config' field '", name, "' is ",
                               d == j.end() ? std::string("missing") : rlflow::detail::json_preview(*d), "; expected a finite number"));
      return d->get<double>();
    };
    got.n_kv_head = int_field("n_kv_head", 0);
    got.head_size = int_field("head_size", 0);
    got.intermediate_size = int_field("intermediate_size", 1);
    got.rms_norm_eps = float(real("rms_norm_eps"));
    got.rope_theta = real("rope_theta");
    int const rt = int_field("rope_type", 0);
    if (rt > int(model::RopeType::llama3))
      throw format_error(msg("rlflow::engine: ", f.path(), ": 'rlflow.gpt_config' field 'rope_type' = ", rt, " is not 0, 1 or 2"));
    got.rope_type = model::RopeType(rt);
    got.rope_factor = real("rope_factor");
    got.rope_low_freq_factor = real("rope_low_freq_factor");
    got.rope_high_freq_factor = real("rope_high_freq_factor");
    got.rope_original_max_position = int_field("rope_original_max_position", 1);
    got.qkv_bias = flag("qkv_bias");
    got.o_bias = flag("o_bias");
    got.mlp_bias = flag("mlp_bias");
    got.qk_norm = flag("qk_norm");
    got.tie_word_embeddings = flag("tie_word_embeddings");
  }
  if (auto sd = j.find("seed"); sd != j.end()) {
    if (!sd->is_number_unsigned() && !(sd->is_number_integer() && sd->get<std::int64_t>() >= 0))
      throw format_error(msg("rlflow::engine: ", f.path(), ": 'rlflow.gpt_config' field 'seed' is ", rlflow::detail::json_preview(*sd),
                             "; expected an unsigned integer"));
    got.seed = sd->get<std::uint64_t>();
  }
  return got;
}

RLFLOW_DECL void check_config(safetensors::File const& f, model::GPTConfig const& want) {
  model::GPTConfig got = read_config(f);
  got.seed = want.seed;
  if (!(got == want))
    throw config_error(msg("rlflow::engine: ", f.path(), " holds a model with config ", config_json(got),
                           " but the engine was built with ", config_json(want), "; build the engine with the file's GPTConfig"));
}

RLFLOW_DECL std::span<std::byte const> as_bytes(std::span<float const> s) { return std::as_bytes(s); }

RLFLOW_DECL void read_f32(safetensors::File const& f, std::string const& name, std::vector<std::int64_t> const& shape, float* dst) {
  if (!f.contains(name)) throw format_error(msg("rlflow::engine: ", f.path(), " lacks tensor '", name, "'"));
  auto const& i = f.info(name);
  if (i.dtype != DType::float32 || i.shape != shape)
    throw format_error(msg("rlflow::engine: tensor '", name, "' in ", f.path(), " is ", dtype_name(i.dtype), " of ", i.shape.size(),
                           " dims; expected float32 of the model's shape"));
  auto b = f.bytes(name);
  std::memcpy(dst, b.data(), b.size());
}

}  // namespace detail
RLFLOW_DECL void save_weights(std::filesystem::path const& path, model::GPTConfig const& cfg, std::span<float const> flat) {
  model::ParamLayout const lay(cfg);
  if (flat.size() != lay.size())
    throw shape_error(msg("rlflow::engine::save_weights: ", flat.size(), " floats for a model of ", lay.size(), " parameters"));
  std::vector<safetensors::TensorRecord> recs;
  for (auto const& t : lay.tensors())
    recs.push_back({t.name, DType::float32, t.shape, detail::as_bytes(flat.subspan(t.offset, t.numel))});
  safetensors::save(path, recs, {{"format", "pt"}, {"rlflow.gpt_config", detail::config_json(cfg)}});
}

namespace detail {
RLFLOW_DECL void write_checkpoint(std::filesystem::path const& path, model::GPTConfig const& cfg, std::span<float const> p,
                                  std::span<float const> m, std::span<float const> v, std::int64_t step,
                                  std::map<std::string, std::string> extra_metadata) {
  model::ParamLayout const lay(cfg);
  std::vector<safetensors::TensorRecord> recs;
  for (auto const& t : lay.tensors()) recs.push_back({t.name, DType::float32, t.shape, as_bytes(p.subspan(t.offset, t.numel))});
  for (auto const& t : lay.tensors())
    recs.push_back({"optimizer.exp_avg." + t.name, DType::float32, t.shape, as_bytes(m.subspan(t.offset, t.numel))});
  for (auto const& t : lay.tensors())
    recs.push_back({"optimizer.exp_avg_sq." + t.name, DType::float32, t.shape, as_bytes(v.subspan(t.offset, t.numel))});
  recs.push_back({"optimizer.step", DType::int64, {1}, std::as_bytes(std::span<std::int64_t const>(&step, 1))});
  extra_metadata["format"] = "pt";
  extra_metadata["rlflow.gpt_config"] = config_json(cfg);
  safetensors::save(path, recs, extra_metadata);
}

}  // namespace detail
namespace detail {
RLFLOW_DECL std::string lora_metadata(model::LoraLayout const& lay) {
  std::string t;
  for (auto const& k : lay.kinds()) t += (t.empty() ? "" : ",") + k;
  char alpha[40];
  std::snprintf(alpha, sizeof alpha, "%.17g", lay.config().alpha);  // exact round trip
  return msg("r=", lay.rank(), ";lora_alpha=", alpha, ";target_modules=", t);
}

}  // namespace detail
RLFLOW_DECL model::LoraConfig checkpoint_lora(safetensors::File const& f) {
  model::LoraConfig lc;
  auto const it = f.metadata().find("rlflow.lora");
  if (it == f.metadata().end()) return lc;
  std::string const& s = it->second;
  auto bad = [&](char const* what) {
    throw format_error(msg("rlflow::engine::checkpoint_lora: ", f.path(), ": metadata rlflow.lora = '", s.substr(0, 120), "' ", what,
                           "; it should read r=R;lora_alpha=A;target_modules=a,b as rlflow writes it"));
  };
  std::string r, a, t;
  std::size_t pos = 0;
  int fields = 0;
  while (pos <= s.size()) {
    std::size_t const end = std::min(s.find(';', pos), s.size());
    std::string const kv = s.substr(pos, end - pos);
    if (kv.starts_with("r=")) r = kv.substr(2), fields |= 1;
    else if (kv.starts_with("lora_alpha=")) a = kv.substr(11), fields |= 2;
    else if (kv.starts_with("target_modules=")) t = kv.substr(15), fields |= 4;
    else bad("has an unknown field");
    pos = end + 1;
  }
  if (fields != 7) bad("lacks a field");
  char* e = nullptr;
  long const rank = std::strtol(r.c_str(), &e, 10);
  if (r.empty() || *e || rank < 1 || rank > model::LoraConfig::max_rank) bad("has a bad rank");
  double const alpha = std::strtod(a.c_str(), &e);
  if (a.empty() || *e || !std::isfinite(alpha) || !(alpha > 0.0)) bad("has a bad lora_alpha");
  lc.rank = int(rank);
  lc.alpha = alpha;
  lc.target_modules.clear();
  for (std::size_t p = 0; p <= t.size();) {
    std::size_t const end = std::min(t.find(',', p), t.size());
    lc.target_modules.push_back(t.substr(p, end - p));
    p = end + 1;
  }
  return lc;
}

RLFLOW_DECL std::vector<float> load_lora_adapters(safetensors::File const& f, model::LoraLayout const& lay) {
  std::vector<float> a(lay.size());
  for (auto const& t : lay.tensors()) detail::read_f32(f, "lora." + t.name, t.shape, a.data() + t.offset);
  return a;
}

RLFLOW_DECL std::vector<float> load_weights(std::filesystem::path const& path, model::GPTConfig const& cfg) {
  auto f = safetensors::File::load(path);
  detail::check_config(f, cfg);
  model::ParamLayout const lay(cfg);
  std::vector<float> out(lay.size());
  for (auto const& t : lay.tensors()) detail::read_f32(f, t.name, t.shape, out.data() + t.offset);
  if (model::LoraConfig const lc = checkpoint_lora(f); lc.enabled()) {
    model::LoraLayout const ll(cfg, lc);
    model::lora_merge(ll, load_lora_adapters(f, ll), out);
  }
  return out;
}

namespace detail {
RLFLOW_DECL void write_lora_checkpoint(std::filesystem::path const& path, TrainingEngine const& eng,
                                       std::map<std::string, std::string> extra_metadata) {
  model::ParamLayout const& lay = eng.layout();
  model::LoraLayout const& ll = eng.lora_layout();
  auto const p = eng.params();
  auto const a = eng.trainable();
  auto const m = eng.optimizer().m(), v = eng.optimizer().v();
  std::int64_t const step = eng.step();
  std::vector<safetensors::TensorRecord> recs;
  for (auto const& t : lay.tensors()) recs.push_back({t.name, DType::float32, t.shape, as_bytes(p.subspan(t.offset, t.numel))});
  for (auto const& t : ll.tensors()) recs.push_back({"lora." + t.name, DType::float32, t.shape, as_bytes(a.subspan(t.offset, t.numel))});
  for (auto const& t : ll.tensors())
    recs.push_back({"optimizer.exp_avg.lora." + t.name, DType::float32, t.shape, as_bytes(m.subspan(t.offset, t.numel))});
  for (auto const& t : ll.tensors())
    recs.push_back({"optimizer.exp_avg_sq.lora." + t.name, DType::float32, t.shape, as_bytes(v.subspan(t.offset, t.numel))});
  recs.push_back({"optimizer.step", DType::int64, {1}, std::as_bytes(std::span<std::int64_t const>(&step, 1))});
  extra_metadata["format"] = "pt";
  extra_metadata["rlflow.gpt_config"] = config_json(eng.config());
  extra_metadata["rlflow.lora"] = lora_metadata(ll);
  safetensors::save(path, recs, extra_metadata);
}

}  // namespace detail
RLFLOW_DECL void save_checkpoint(std::filesystem::path const& path, TrainingEngine const& eng,
                                 std::map<std::string, std::string> extra_metadata) {
  if (eng.tp().size > 1)
    throw config_error(msg("rlflow::engine::save_checkpoint: the engine is tensor-parallel rank ", eng.tp().rank, " of ",
                           eng.tp().size, " and holds a shard; call save_checkpoint_gathered on every rank of its TP group"));
  if (eng.lora_on()) {
    detail::write_lora_checkpoint(path, eng, std::move(extra_metadata));
    return;
  }
  detail::write_checkpoint(path, eng.config(), eng.params(), eng.optimizer().m(), eng.optimizer().v(), eng.step(),
                           std::move(extra_metadata));
}

RLFLOW_DECL void save_checkpoint_gathered(std::filesystem::path const& path, TrainingEngine& eng, bool write,
                                          std::map<std::string, std::string> extra_metadata) {
  if (eng.tp().size == 1) {
    if (write) save_checkpoint(path, eng, std::move(extra_metadata));
    return;
  }
  // Which ranks write (one flag each, summed over the group): when only TP rank 0 does (the
  // roles' case), the shards are gathered to it alone and the other ranks allocate nothing.
  std::vector<double> writers(std::size_t(eng.tp().size), 0.0);
  writers[std::size_t(eng.tp().rank)] = write ? 1.0 : 0.0;
  eng.tp_communicator()->allreduce_sum(std::span<double>(writers));
  bool const rank0_only = std::all_of(writers.begin() + 1, writers.end(), [](double w) { return w == 0.0; });
  std::size_t const n = rank0_only && eng.tp().rank != 0 ? 0 : eng.layout().size();
  std::vector<float> p(n), m(n), v(n);
  if (rank0_only) {
    eng.gather_state_to_rank0(p, m, v);
  } else {
    eng.gather_weights(p);
    eng.gather_optimizer_state(m, v);
  }
  if (write) detail::write_checkpoint(path, eng.config(), p, m, v, eng.step(), std::move(extra_metadata));
}

RLFLOW_DECL std::map<std::string, std::string> load_checkpoint(std::filesystem::path const& path, TrainingEngine& eng) {
  auto f = safetensors::File::load(path);
  detail::check_config(f, eng.config());
  if (!f.contains("optimizer.step") || f.info("optimizer.step").dtype != DType::int64 || f.bytes("optimizer.step").size() != 8)
    throw format_error(msg("rlflow::engine::load_checkpoint: ", f.path(), " lacks the int64 'optimizer.step'; it holds weights only (use load_weights)"));
  auto const& lay = eng.layout();
  auto const lora_meta = f.metadata().find("rlflow.lora");
  bool const file_lora = lora_meta != f.metadata().end();
  if (file_lora != eng.lora_on() || (file_lora && lora_meta->second != detail::lora_metadata(eng.lora_layout())))
    throw config_error(msg("rlflow::engine::load_checkpoint: ", f.path(), " was saved ",
                           file_lora ? "with LoRA adapters (" + lora_meta->second + ")" : std::string("without LoRA"),
                           " but the engine has ", eng.lora_on() ? "LoRA (" + detail::lora_metadata(eng.lora_layout()) + ")" : std::string("no LoRA"),
                           "; set actor_rollout_ref.model.lora_rank, lora_alpha and target_modules as the run that saved it"));
  if (eng.lora_on()) {
    auto const& ll = eng.lora_layout();
    std::vector<float> p(lay.size()), a(ll.size()), m(ll.size()), v(ll.size());
    for (auto const& t : lay.tensors()) detail::read_f32(f, t.name, t.shape, p.data() + t.offset);
    for (auto const& t : ll.tensors()) {
      detail::read_f32(f, "lora." + t.name, t.shape, a.data() + t.offset);
      detail::read_f32(f, "optimizer.exp_avg.lora." + t.name, t.shape, m.data() + t.offset);
      detail::read_f32(f, "optimizer.exp_avg_sq.lora." + t.name, t.shape, v.data() + t.offset);
    }
    std::int64_t step = 0;
    std::memcpy(&step, f.bytes("optimizer.step").data(), 8);
    if (step < 0) throw format_error(msg("rlflow::engine::load_checkpoint: ", f.path(), " records a negative step ", step));
    std::copy(p.begin(), p.end(), eng.params().begin());
    std::copy(a.begin(), a.end(), eng.trainable().begin());
    std::copy(m.begin(), m.end(), eng.optimizer().m().begin());
    std::copy(v.begin(), v.end(), eng.optimizer().v().begin());
    eng.optimizer().set_steps_taken(step);
    return f.metadata();
  }
  std::size_t const n = lay.size();
  std::vector<float> p(n), m(n), v(n);
  for (auto const& t : lay.tensors()) {
    detail::read_f32(f, t.name, t.shape, p.data() + t.offset);
    detail::read_f32(f, "optimizer.exp_avg." + t.name, t.shape, m.data() + t.offset);
    detail::read_f32(f, "optimizer.exp_avg_sq." + t.name, t.shape, v.data() + t.offset);
  }
  std::int64_t step = 0;
  std::memcpy(&step, f.bytes("optimizer.step").data(), 8);
  if (step < 0) throw format_error(msg("rlflow::engine::load_checkpoint: ", f.path(), " records a negative step ", step));
  // commit: nothing below can fail. A tensor-parallel engine keeps its slice of the full file.
  model::ShardLayout const& sl = eng.shard_layout();
  sl.load(p, eng.params());
  sl.load(m, eng.optimizer().m());
  sl.load(v, eng.optimizer().v());
  eng.optimizer().set_steps_taken(step);
  return f.metadata();
}

}  // namespace rlflow::engine
