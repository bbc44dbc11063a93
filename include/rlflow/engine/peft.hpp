// rlflow/engine/peft.hpp: LoRA adapters as a PEFT adapter folder (adapter_config.json and
// adapter_model.safetensors), written from a training engine and read back (checked against the
// base model: rank, module names, shapes), and the merged full weights as a Hugging Face folder.
// PEFT: PeftModel.save_pretrained / PeftModel.from_pretrained, LoraConfig's JSON, and the tensor
// names base_model.model.<module>.lora_A.weight (r, in) / lora_B.weight (out, r).
// GPT-2's c_attn rows are head-major inside rlflow ([q_h | k_h | v_h] per head); its lora_B rows
// are written in Hugging Face's [q | k | v] order and read back.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include <rlflow/core/config.hpp>  // RLFLOW_DECL, RLFLOW_DEFINE_BODIES
#include <rlflow/core/error.hpp>
#include <rlflow/detail/json_text.hpp>         // check_json_depth, json_int_in, json_preview
#include <rlflow/engine/checkpoint.hpp>        // safetensors I/O (save, File), checkpoint_lora
#include <rlflow/engine/hf_export.hpp>         // checkpoint_config
#include <rlflow/engine/training_engine.hpp>   // TrainingEngine
#include <rlflow/model/hf_folder.hpp>          // export_model, tensor_as_f32
#include <rlflow/model/lora.hpp>               // LoraConfig, LoraLayout

namespace rlflow::engine {

//! Adapters read from a PEFT folder: their LoraConfig (rank, alpha, targets) and the adapter
//! buffer in LoraLayout(model, config) order.
struct PeftAdapter {
  model::LoraConfig config;
  std::vector<float> adapters;
  std::string base_model_name_or_path;
};

namespace detail {
//! rlflow's c_attn row of Hugging Face's output column j (part * C + head * hs + d).
RLFLOW_DECL std::size_t gpt2_qkv_row(int j, int C, int hs);
//! True for a module whose lora_B rows rlflow keeps in another order than Hugging Face.
RLFLOW_DECL bool permuted_rows(model::GPTConfig const& cfg, model::LoraModule const& m);
[[noreturn]] inline void peft_bad(std::string const& where, std::string const& what) {
  throw config_error(msg("rlflow::engine::peft: ", where, ": ", what));
}
}  // namespace detail

//! LoraConfig from adapter_config.json text. Accepts PEFT's LoRA settings that rlflow computes:
//! peft_type LORA, r, lora_alpha, target_modules ("all-linear" or a list of module names), and
//! refuses by name those it does not (use_dora, use_rslora, bias other than "none",
//! modules_to_save, layers_to_transform, rank_pattern / alpha_pattern, a regex target string).
RLFLOW_DECL model::LoraConfig parse_adapter_config(std::string_view text, std::string const& where);

//! Adapters from adapter_config.json text and adapter_model.safetensors (already validated as a
//! file) for base model 'cfg': every tensor the config implies must be there with its shape
//! ((r, in) for lora_A, (out, r) for lora_B), F32, F16 or BF16, finite, and no other tensor.
RLFLOW_DECL PeftAdapter parse_peft(std::string_view config_text, safetensors::File const& f, model::GPTConfig const& cfg,
                                   std::string const& where = "adapter_config.json");

//! Reads a PEFT adapter folder (adapter_config.json, adapter_model.safetensors) for base model 'cfg'.
RLFLOW_DECL PeftAdapter load_peft(std::filesystem::path const& dir, model::GPTConfig const& cfg);

//! Adds the adapters of 'a' to an engine without adapters (enable_lora, then the adapter values).
RLFLOW_DECL void apply_peft(TrainingEngine& e, PeftAdapter const& a);

//! Writes the adapters of 'lay' as a PEFT folder: adapter_config.json (peft_type LORA, r,
//! lora_alpha, target_modules, base_model_name_or_path, task_type CAUSAL_LM) and
//! adapter_model.safetensors (float32, PEFT's names). PEFT: save_pretrained.
RLFLOW_DECL void save_peft(std::filesystem::path const& dir, model::LoraLayout const& lay, std::span<float const> adapters,
                           std::string const& base_model_name_or_path = "");

//! save_peft of a LoRA engine's adapters.
RLFLOW_DECL void save_peft(std::filesystem::path const& dir, TrainingEngine const& e, std::string const& base_model_name_or_path = "");

//! The adapters of a LoRA actor's checkpoint (a .safetensors file, or a global_step_N folder
//! holding actor.safetensors) as a PEFT folder (rlflow_export --peft).
RLFLOW_DECL void export_peft(std::filesystem::path checkpoint, std::filesystem::path const& out_dir,
                             std::string const& base_model_name_or_path = "");

//! The merged weights (base + s B A, PEFT's merge_and_unload) as a Hugging Face folder of the
//! model's family (model::hf::export_model).
RLFLOW_DECL void export_merged_hf(std::filesystem::path const& dir, TrainingEngine const& e, DType dtype = DType::float32,
                                  std::int64_t bos_id = -1, std::int64_t eos_id = -1);

}  // namespace rlflow::engine

#if RLFLOW_DEFINE_BODIES
#include <rlflow/engine/impl/peft.ipp>
#endif
