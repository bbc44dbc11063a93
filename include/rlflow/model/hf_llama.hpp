// rlflow/model/hf_llama.hpp: the Llama family's Hugging Face config.json and tensor layout.
// Defines llama_config_from_json (config.json of model_type llama, qwen2 or qwen3 -> GPTConfig,
// refusing what the engines do not compute, naming the field and its value),
// llama_config_json (the config.json transformers reads back) and the tensor mapping between
// transformers' names and shapes and ParamLayout (o_proj and down_proj are stored transposed).
// verl: actor_rollout_ref.model.path handed to AutoConfig / AutoModelForCausalLM.
// transformers: LlamaConfig, Qwen2Config, Qwen3Config; modeling_rope_utils (rope_scaling).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <rlflow/core/config.hpp>  // RLFLOW_DECL, RLFLOW_DEFINE_BODIES
#include <rlflow/core/error.hpp>
#include <rlflow/detail/json_text.hpp>     // json_int_in, json_preview
#include <rlflow/model/param_layout.hpp>   // GPTConfig, ParamLayout, Arch, RopeType

namespace rlflow::model::hf {

//! Hyper-parameters of a Llama-family config.json object (model_type llama, qwen2 or qwen3).
//! Read: vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
//! num_key_value_heads (default: num_attention_heads), head_dim (llama, qwen3; default
//! hidden_size / num_attention_heads), max_position_embeddings, rms_norm_eps, rope_theta,
//! rope_scaling or rope_parameters (rope_type/type default, linear, llama3), attention_bias,
//! mlp_bias (llama), tie_word_embeddings, hidden_act (silu only). Refused with the field named:
//! MoE fields, an enabled sliding window, another rope type, quantized weights, another activation.
RLFLOW_DECL GPTConfig llama_config_from_json(nlohmann::json const& j, std::string const& where = "config.json");

//! The config.json transformers writes for this Llama-family model (LlamaForCausalLM,
//! Qwen2ForCausalLM or Qwen3ForCausalLM).
RLFLOW_DECL nlohmann::ordered_json llama_config_json(GPTConfig const& cfg, std::int64_t bos_id, std::int64_t eos_id,
                                                     char const* torch_dtype = "float32");

//! Whether a Llama-family ParamLayout tensor is stored transposed from transformers' (out, in)
//! (o_proj and down_proj: (in, out), so tensor parallelism cuts contiguous rows).
RLFLOW_DECL bool llama_transposed(ParamTensor const& t);
//! The shape transformers stores for a Llama-family ParamLayout tensor.
RLFLOW_DECL std::vector<std::int64_t> llama_hf_shape(ParamTensor const& t);
//! One transformers tensor (float32, llama_hf_shape) into the flat buffer at t.
RLFLOW_DECL void llama_hf_to_layout(ParamTensor const& t, std::vector<float> const& src, float* dst);
//! The reverse of llama_hf_to_layout.
RLFLOW_DECL std::vector<float> llama_layout_to_hf(ParamTensor const& t, float const* src);
//! Which ParamLayout tensor a Llama-family checkpoint name maps to: the name itself; empty for
//! tensors ignored (old checkpoints' rotary inv_freq buffers; lm_head.weight when tied).
RLFLOW_DECL std::string llama_layout_name_of(std::string const& name, GPTConfig const& cfg);

}  // namespace rlflow::model::hf

#if RLFLOW_DEFINE_BODIES
#include <rlflow/model/impl/hf_llama.ipp>
#endif
