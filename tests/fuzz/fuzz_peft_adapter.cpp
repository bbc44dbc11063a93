// Fuzz target: a PEFT LoRA adapter folder (engine/peft.hpp): adapter_config.json (rank, alpha,
// target modules, the refused PEFT options) and adapter_model.safetensors (header, names, shapes,
// dtypes, values), read against a Qwen2-shaped and a GPT-2-shaped base model. The input is the
// JSON, a marker line, the safetensors bytes. Silent accept: an adapter accepted whose rank or
// alpha differs from the JSON's, whose buffer does not match its layout, that holds a non-finite
// value, or that does not round-trip through the folder save_peft writes.
#include "fuzz/fuzz_driver.hpp"

#include <rlflow/engine/peft.hpp>

namespace fuzz_peft_adapter {

using namespace rlflow;
namespace fs = std::filesystem;

namespace {
constexpr std::string_view sep = "\n--8<--\n";
fs::path dir() { return fuzz::scratch_dir("peft"); }

std::vector<model::GPTConfig> bases() {
  model::GPTConfig q{.vocab_size = 23, .max_seq_len = 16, .n_layer = 2, .n_head = 4, .n_embd = 16};
  q.arch = model::Arch::qwen2;
  q.n_kv_head = 2;
  q.intermediate_size = 24;
  q.qkv_bias = true;
  model::GPTConfig g{.vocab_size = 23, .max_seq_len = 16, .n_layer = 1, .n_head = 2, .n_embd = 8};
  return {q, g};
}

std::string read_file(fs::path const& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

//! A folder save_peft writes for 'base', as one fuzz input.
std::string folder_input(model::GPTConfig const& base, model::LoraConfig const& lc, std::uint64_t seed) {
  model::LoraLayout const lay(base, lc);
  std::vector<float> a(lay.size());
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = float(model::uniform01(model::philox4x32(seed, i)) - 0.5);
  engine::save_peft(dir() / "seed", lay, a, "Qwen/Qwen2.5-0.5B");
  return read_file(dir() / "seed" / "adapter_config.json") + std::string(sep) + read_file(dir() / "seed" / "adapter_model.safetensors");
}
}  // namespace

std::vector<std::string> fuzz_seeds() {
  auto const b = bases();
  model::LoraConfig l1;
  l1.rank = 2;
  l1.alpha = 4;
  l1.target_modules = {"q_proj", "v_proj", "down_proj"};
  model::LoraConfig l2;
  l2.rank = 1;
  l2.alpha = 2.5;
  model::LoraConfig l3;
  l3.rank = 2;
  l3.target_modules = {"c_attn", "c_proj"};
  return {folder_input(b[0], l1, 1), folder_input(b[0], l2, 2), folder_input(b[1], l3, 3), folder_input(b[1], l2, 4)};
}

fuzz::outcome fuzz_one(std::string_view in) {
  auto const at = in.find(sep);
  std::string_view const json = in.substr(0, at);
  std::string_view const st = at == std::string_view::npos ? std::string_view{} : in.substr(at + sep.size());
  std::vector<std::byte> bytes(st.size());
  if (!st.empty()) std::memcpy(bytes.data(), st.data(), st.size());
  auto const f = engine::safetensors::File::from_bytes(std::move(bytes), "adapter_model.safetensors");
  bool silent = false, any = false;
  std::exception_ptr first_error;
  for (auto const& base : bases()) {
    try {
      auto const p = engine::parse_peft(json, f, base);
      any = true;
      auto const j = nlohmann::json::parse(json);
      model::LoraLayout const lay(base, p.config);
      silent |= !j.contains("r") || !j["r"].is_number_integer() || j["r"].get<std::int64_t>() != p.config.rank;
      if (j.contains("lora_alpha")) silent |= !j["lora_alpha"].is_number() || j["lora_alpha"].get<double>() != p.config.alpha;
      silent |= p.adapters.size() != lay.size();
      for (float x : p.adapters) silent |= !std::isfinite(x);
      engine::save_peft(dir() / "back", lay, p.adapters);
      auto const back = engine::load_peft(dir() / "back", base);
      silent |= back.adapters != p.adapters || back.config.rank != p.config.rank || back.config.alpha != p.config.alpha;
    } catch (rlflow::error const&) {
      if (!first_error) first_error = std::current_exception();
    }
  }
  if (silent) return fuzz::outcome::silent_accept;
  if (!any && first_error) std::rethrow_exception(first_error);
  return fuzz::outcome::accepted;
}

}  // namespace fuzz_peft_adapter
RLFLOW_FUZZ_TARGET(peft_adapter)
