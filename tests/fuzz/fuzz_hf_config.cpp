// Fuzz target: a Hugging Face GPT-2 folder's JSON files: config.json (read_gpt2_config: the
// hyper-parameters and what the built-in GPT supports) and model.safetensors.index.json
// (weight_files: the shard list). The input is config.json, a marker line, the index. The
// weights themselves are safetensors (fuzz_safetensors). Silent accept: a config accepted with
// a field that differs from the file's integer (a narrowed or converted value), whose parameter
// count does not fit, or that does not round-trip through the config.json rlflow writes; a
// shard path that leaves the folder.
#define RLFLOW_FUZZ_NAME "hf_config"
#include "fuzz/fuzz_driver.hpp"

#include <rlflow/model/hf_folder.hpp>


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
  return {cfg + std::string(sep) + idx,
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
    auto const c = model::hf::read_gpt2_config(dir());
    auto const j = nlohmann::json::parse(cfg);
    silent |= !same_int(j, "n_layer", c.n_layer) || !same_int(j, "n_head", c.n_head) || !same_int(j, "n_embd", c.n_embd) ||
              !same_int(j, "vocab_size", c.vocab_size);
    if (j.contains("n_positions") && !j["n_positions"].is_null()) silent |= !same_int(j, "n_positions", c.max_seq_len);
    auto const back = model::hf::gpt2_config_from_json(nlohmann::json::parse(model::hf::gpt2_config_json(c, 0, 0).dump()));
    silent |= !(back == c);
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
