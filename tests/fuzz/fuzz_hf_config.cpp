// Fuzz target: a Hugging Face model folder's JSON files: config.json (read_model_config: the
// hyper-parameters of GPT-2 and the Llama family, and what the engines support) and model.safetensors.index.json
// (weight_files: the shard list). The input is config.json, a marker line, the index. The
// weights themselves are safetensors (fuzz_safetensors). Silent accept: a config accepted with
// a field that differs from the file's integer (a narrowed or converted value), whose parameter
// count does not fit, or that does not round-trip through the config.json rlflow writes; a
// shard path that leaves the folder.
#include "fuzz/fuzz_driver.hpp"

#include <rlflow/model/hf_folder.hpp>

namespace fuzz_hf_config {


using namespace rlflow;
namespace fs = std::filesystem;

namespace {
constexpr std::string_view sep = "\n--8<--\n";
fs::path dir() { return fuzz::scratch_dir("hf"); }
//! The file's value of an integer key equals the config's (absent: the default was used).
bool same_int(nlohmann::json const& j, char const* key, std::int64_t got) {
  if (!j.contains(key) || j[key].is_null()) return true;
  auto const& v = j[key];
  if (v.is_number_unsigned()) return v.get<std::uint64_t>() == static_cast<std::uint64_t>(got) && got >= 0;
  return v.is_number_integer() && v.get<std::int64_t>() == got;
}
}  // namespace

std::vector<std::string> fuzz_seeds() {
  model::GPTConfig const c{.vocab_size = 50, .max_seq_len = 16, .n_layer = 2, .n_head = 2, .n_embd = 8};
  std::string const cfg = model::hf::gpt2_config_json(c, 49, 49).dump(2);
  std::string const idx = R"({"metadata": {"total_size": 1234}, "weight_map": {"transformer.wte.weight": "model-00001-of-00002.safetensors",
 "transformer.h.0.ln_1.weight": "model-00001-of-00002.safetensors", "transformer.ln_f.bias": "model-00002-of-00002.safetensors"}})";
  model::GPTConfig q{.vocab_size = 61, .max_seq_len = 64, .n_layer = 2, .n_head = 4, .n_embd = 24};
  q.arch = model::Arch::qwen2;
  q.n_kv_head = 2;
  q.intermediate_size = 40;
  q.qkv_bias = true;
  model::GPTConfig q3 = q;
  q3.arch = model::Arch::qwen3;
  q3.qkv_bias = false;
  q3.qk_norm = true;
  q3.head_size = 16;
  q3.tie_word_embeddings = false;
  model::GPTConfig l = q;
  l.arch = model::Arch::llama;
  l.qkv_bias = false;
  l.rope_type = model::RopeType::llama3;
  l.rope_factor = 8;
  l.rope_original_max_position = 8192;
  return {model::hf::llama_config_json(q, 1, 2).dump(2) + std::string(sep) + idx,
          model::hf::llama_config_json(q3, 1, 2).dump(2) + std::string(sep) + idx,
          model::hf::llama_config_json(l, 1, 2).dump(2) + std::string(sep) + idx,
          R"({"model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
 "num_key_value_heads": 2, "max_position_embeddings": 32768, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "tie_word_embeddings": true,
 "use_sliding_window": false, "sliding_window": 32768, "vocab_size": 151936, "hidden_act": "silu"})" + std::string(sep) + idx,
          R"({"model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32,
 "num_key_value_heads": 8, "head_dim": 64, "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0,
 "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}, "vocab_size": 128256})" + std::string(sep) + idx,
          cfg + std::string(sep) + idx,
          R"({"model_type": "gpt2", "n_layer": 12, "n_head": 12, "n_embd": 768, "vocab_size": 50257, "n_positions": 1024,
 "n_inner": null, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-05, "scale_attn_weights": true})" +
              std::string(sep) + idx};
}

fuzz::outcome fuzz_one(std::string_view in) {
  auto const at = in.find(sep);
  std::string const cfg(in.substr(0, at)), idx(at == std::string_view::npos ? std::string_view{} : in.substr(at + sep.size()));
  std::ofstream(dir() / "config.json", std::ios::binary | std::ios::trunc) << cfg;
  std::ofstream(dir() / "model.safetensors.index.json", std::ios::binary | std::ios::trunc) << idx;
  bool silent = false;
  std::exception_ptr first_error;
  try {
    auto const c = model::hf::read_model_config(dir());
    auto const j = nlohmann::json::parse(cfg);
    if (c.llama_family()) {
      silent |= !same_int(j, "num_hidden_layers", c.n_layer) || !same_int(j, "num_attention_heads", c.n_head) ||
                !same_int(j, "hidden_size", c.n_embd) || !same_int(j, "vocab_size", c.vocab_size) ||
                !same_int(j, "intermediate_size", c.intermediate_size) || !same_int(j, "num_key_value_heads", c.kv_heads()) ||
                !same_int(j, "max_position_embeddings", c.max_seq_len);
      if (j.contains("head_dim") && !j["head_dim"].is_null()) silent |= !same_int(j, "head_dim", c.head_dim());
      auto const back = model::hf::config_from_json(nlohmann::json::parse(model::hf::llama_config_json(c, 0, 0).dump()));
      silent |= !(back == c);
    } else {
      silent |= !same_int(j, "n_layer", c.n_layer) || !same_int(j, "n_head", c.n_head) || !same_int(j, "n_embd", c.n_embd) ||
                !same_int(j, "vocab_size", c.vocab_size);
      if (j.contains("n_positions") && !j["n_positions"].is_null()) silent |= !same_int(j, "n_positions", c.max_seq_len);
      auto const back = model::hf::gpt2_config_from_json(nlohmann::json::parse(model::hf::gpt2_config_json(c, 0, 0).dump()));
      silent |= !(back == c);
    }
    silent |= model::ParamLayout(c).size() == 0;  // sizes derived without overflow (ParamLayout checks them)
  } catch (rlflow::error const&) {
    first_error = std::current_exception();
  }
  try {
    for (auto const& f : model::hf::weight_files(dir())) {
      auto const rel = f.lexically_normal().lexically_relative(dir());
      if (rel.empty() || rel.is_absolute() || *rel.begin() == ".." || rel.has_parent_path()) silent = true;
    }
  } catch (rlflow::error const&) {
    if (!first_error) first_error = std::current_exception();
  }
  if (silent) return fuzz::outcome::silent_accept;
  if (first_error) std::rethrow_exception(first_error);
  return fuzz::outcome::accepted;
}

}  // namespace fuzz_hf_config
RLFLOW_FUZZ_TARGET(hf_config)
