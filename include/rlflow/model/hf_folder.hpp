// rlflow/model/hf_folder.hpp: Hugging Face model folders (GPT-2 and the Llama family: llama,
// qwen2, qwen3). Defines read_model_config (config.json -> GPTConfig by model_type, rejecting
// what the engines do not compute), load_model / load_model_weights (model.safetensors or a
// sharded model.safetensors.index.json, F32 / F16 / BF16 converted to float32, the family's
// tensor names mapped onto ParamLayout) and export_model (the reverse: a folder transformers'
// AutoModelForCausalLM.from_pretrained reads). The GPT-2 names below (read_gpt2_config,
// load_gpt2, export_gpt2) are the same functions for GPT-2 folders. The Llama family's fields
// and mapping: hf_llama.hpp.
// verl: actor_rollout_ref.model.path handed to AutoModelForCausalLM.from_pretrained / save_pretrained.
//
// GPT-2
// Layout mapping (GPT-2's Conv1D stores weights (in, out); ParamLayout's order is in gpt.hpp):
//   wte.weight (V, C), wpe.weight (n_positions, C), ln_*.{weight,bias}: copied;
//   h.N.attn.c_attn.weight (C, 3C), columns [q heads | k heads | v heads] -> ParamLayout rows
//     head-major [q_h | k_h | v_h], each row one output (out, in): transposed and regrouped;
//   h.N.attn.c_proj.weight (C, C) and h.N.mlp.c_proj.weight (4C, C): (in, out) in both, copied;
//   h.N.mlp.c_fc.weight (C, 4C) -> (4C, C): transposed;
//   lm_head.weight: tied to wte (a file's copy, if any, must equal wte's shape and is ignored).
// Names are accepted with or without the "transformer." prefix; the causal-mask buffers
// (h.N.attn.bias / masked_bias) of old checkpoints are ignored.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <unistd.h>  // getpid
#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <rlflow/core/config.hpp>  // RLFLOW_DECL, RLFLOW_DEFINE_BODIES
#include <rlflow/detail/json_text.hpp>    // check_json_depth, json_int_in, json_preview
#include <rlflow/model/safetensors.hpp>  // File, save, TensorRecord
#include <rlflow/core/error.hpp>
#include <rlflow/model/gpt.hpp>            // GPTConfig, ParamLayout, init_params
#include <rlflow/model/hf_llama.hpp>       // llama_config_from_json, the Llama family's tensor mapping
#include <rlflow/core/tensor.hpp>               // bfloat16, float16, DType

namespace rlflow::model::hf {

namespace fs = std::filesystem;

//! The activations the built-in GPT computes: GELU with the tanh approximation (GPT-2's own).
RLFLOW_DECL bool tanh_gelu_name(std::string const& a);

namespace detail {
RLFLOW_DECL nlohmann::json read_json(fs::path const& p, char const* who);
template <class T>
T get_or(nlohmann::json const& j, char const* key, T def) {
  if (!j.contains(key) || j[key].is_null()) return def;
  return j[key].get<T>();
}
RLFLOW_DECL std::string shape_str(std::vector<std::int64_t> const& s);
}  // namespace detail

//! GPT-2 hyper-parameters from a config.json object. Throws config_error for an architecture or
//! option the built-in GPT does not compute (naming the key, the value and what is supported).
RLFLOW_DECL GPTConfig gpt2_config_from_json(nlohmann::json const& j, std::string const& where = "config.json");

//! GPTConfig of a GPT-2 folder (its config.json).
RLFLOW_DECL GPTConfig read_gpt2_config(fs::path const& folder);

//! GPTConfig of a config.json object of any supported model_type: gpt2, llama, qwen2, qwen3.
RLFLOW_DECL GPTConfig config_from_json(nlohmann::json const& j, std::string const& where = "config.json");

//! GPTConfig of a model folder of any supported family (its config.json).
RLFLOW_DECL GPTConfig read_model_config(fs::path const& folder);

//! The files holding a folder's weights: model.safetensors, or the shards listed by
//! model.safetensors.index.json (weight_map), each once.
RLFLOW_DECL std::vector<fs::path> weight_files(fs::path const& folder);

//! Which ParamLayout tensor a GPT-2 checkpoint name maps to: the name without "transformer."
//! and ".weight" for wte/wpe; empty for tensors that are ignored (attention mask buffers,
//! lm_head.weight).
RLFLOW_DECL std::string layout_name_of(std::string name);

//! One tensor of a file converted to float32 (F32, F16 or BF16), as stored.
RLFLOW_DECL std::vector<float> tensor_as_f32(engine::safetensors::File const& f, std::string const& name);

//! The shape a checkpoint stores for a ParamLayout tensor (GPT-2's Conv1D weights are (in, out)).
RLFLOW_DECL std::vector<std::int64_t> hf_shape(ParamTensor const& t, GPTConfig const& cfg);

//! Copies one HF tensor (float32, hf_shape layout) into the flat buffer at t.
RLFLOW_DECL void hf_to_layout(ParamTensor const& t, GPTConfig const& cfg, std::vector<float> const& src, float* dst);

//! The reverse of hf_to_layout: the HF tensor of t from the flat buffer.
RLFLOW_DECL std::vector<float> layout_to_hf(ParamTensor const& t, GPTConfig const& cfg, float const* src);

//! The checkpoint's name of a ParamLayout tensor: GPT-2's under "transformer." (wte / wpe with
//! ".weight"); the Llama family's as they are.
RLFLOW_DECL std::string hf_name(std::string const& layout_name, GPTConfig const& cfg);

//! The flat parameters (ParamLayout of cfg) from a folder's safetensors files. cfg must have the
//! folder's architecture; with cfg.value_head (a critic), the value head keeps its seeded
//! initialisation and the trunk comes from the files. Every file is read and validated, and
//! every tensor checked (name, shape, dtype), before anything is returned. Errors name the
//! tensor and the expected / found shapes.
RLFLOW_DECL std::vector<float> load_model_weights(fs::path const& folder, GPTConfig const& cfg);

//! The GPT-2 folder's weights (load_model_weights).
RLFLOW_DECL std::vector<float> load_gpt2_weights(fs::path const& folder, GPTConfig const& cfg);

//! A model folder read whole: its GPTConfig and flat parameters.
struct ModelCheckpoint {
  GPTConfig config;
  std::vector<float> params;
};
using GPT2Checkpoint = ModelCheckpoint;

//! config.json + weights of a model folder of any supported family. value_head: load it as a
//! critic trunk (seeded head).
RLFLOW_DECL ModelCheckpoint load_model(fs::path const& folder, bool value_head = false, std::uint64_t seed = 0);
//! config.json + weights of a GPT-2 folder (config.json must say model_type gpt2).
RLFLOW_DECL ModelCheckpoint load_gpt2(fs::path const& folder, bool value_head = false, std::uint64_t seed = 0);

//! The config.json transformers writes for a GPT2LMHeadModel of this shape.
RLFLOW_DECL nlohmann::ordered_json gpt2_config_json(GPTConfig const& cfg, std::int64_t bos_id, std::int64_t eos_id,
                                                    char const* torch_dtype = "float32");

//! Writes 'folder'/config.json and 'folder'/model.safetensors from flat parameters of cfg, with
//! transformers' names and layouts (GPT-2: "transformer.*", Conv1D layouts, no lm_head.weight:
//! tied; the Llama family: "model.*", (out, in) weights, lm_head.weight when untied). dtype:
//! float32 (bit-exact round trip), bfloat16 or float16 (rounded to nearest even). A value head
//! is not exported (the CausalLM classes have none). Both files are written atomically (temp
//! file + rename). bos / eos ids < 0: vocab_size - 1.
RLFLOW_DECL void export_model(fs::path const& folder, GPTConfig const& cfg, std::span<float const> flat,
                              DType dtype = DType::float32, std::int64_t bos_id = -1, std::int64_t eos_id = -1);

//! export_model of a GPT-2 model.
RLFLOW_DECL void export_gpt2(fs::path const& folder, GPTConfig const& cfg, std::span<float const> flat, DType dtype = DType::float32,
                             std::int64_t bos_id = -1, std::int64_t eos_id = -1);

}  // namespace rlflow::model::hf

#if RLFLOW_DEFINE_BODIES
#include <rlflow/model/impl/hf_folder.ipp>
#endif
