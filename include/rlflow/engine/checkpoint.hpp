// rlflow/engine/checkpoint.hpp: checkpoints of the built-in GPT as safetensors files. Defines
// save_weights / load_weights (parameters only, named as ParamLayout) and save_checkpoint /
// load_checkpoint (parameters + AdamW moments + step counter). Loading validates the whole file
// and the model configuration before it touches the engine: a bad file is a format_error and the
// engine is left as it was. verl: the actor's save_checkpoint / load_checkpoint.
#pragma once
#include <algorithm>  // std::all_of
#include <cstdint>
#include <cstdio>       // std::snprintf
#include <cstdlib>      // std::strtol, std::strtod
#include <cstring>      // std::memcpy
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <utility>      // std::move
#include <cmath>
#include <vector>

#include <nlohmann/json.hpp>                 // the config in the metadata
#include <rlflow/core/config.hpp>  // RLFLOW_DECL, RLFLOW_DEFINE_BODIES
#include <rlflow/detail/json_util.hpp>       // json_preview
#include <rlflow/core/error.hpp>                  // config_error, format_error
#include <rlflow/model/gpt.hpp>              // GPTConfig, ParamLayout
#include <rlflow/model/safetensors.hpp>     // save, File
#include <rlflow/engine/training_engine.hpp> // TrainingEngine

namespace rlflow::engine {

namespace detail {
//! The config as the metadata records it: GPT-2's seven fields, and for the Llama family the
//! architecture's fields after them.
RLFLOW_DECL std::string config_json(model::GPTConfig const& c);
//! The architecture recorded in a file's 'rlflow.gpt_config' metadata, every field validated
//! (integers in int range, never a float converted; value_head a boolean; seed, when present,
//! an unsigned integer). Throws format_error naming the file and the field.
RLFLOW_DECL model::GPTConfig read_config(safetensors::File const& f);
//! The architecture recorded in a file must equal the engine's (the seed may differ).
RLFLOW_DECL void check_config(safetensors::File const& f, model::GPTConfig const& want);
RLFLOW_DECL std::span<std::byte const> as_bytes(std::span<float const> s);
//! Copies tensor 'name' (float32 of the given shape) out of f into dst; throws format_error on mismatch.
RLFLOW_DECL void read_f32(safetensors::File const& f, std::string const& name, std::vector<std::int64_t> const& shape, float* dst);
}  // namespace detail

//! Writes the parameters (flat, ParamLayout order) as named float32 tensors.
RLFLOW_DECL void save_weights(std::filesystem::path const& path, model::GPTConfig const& cfg, std::span<float const> flat);

namespace detail {
//! The file save_checkpoint writes, from full (ParamLayout order) parameters and moments.
RLFLOW_DECL void write_checkpoint(std::filesystem::path const& path, model::GPTConfig const& cfg, std::span<float const> p,
                                  std::span<float const> m, std::span<float const> v, std::int64_t step,
                                  std::map<std::string, std::string> extra_metadata);
}  // namespace detail

namespace detail {
RLFLOW_DECL std::string lora_metadata(model::LoraLayout const& lay);
}  // namespace detail

//! The LoRA settings a checkpoint records ('rlflow.lora' metadata: "r=R;lora_alpha=A;target_modules=a,b");
//! rank 0 when the checkpoint has no adapters. A malformed record is a format_error.
RLFLOW_DECL model::LoraConfig checkpoint_lora(safetensors::File const& f);

//! The adapters ("lora.<PEFT name>") of a LoRA checkpoint, in 'lay' order.
RLFLOW_DECL std::vector<float> load_lora_adapters(safetensors::File const& f, model::LoraLayout const& lay);

//! Reads the parameters of a model with this config; the whole file is validated first. A LoRA
//! actor's checkpoint gives its policy: the base merged with the adapters (base + s B A).
RLFLOW_DECL std::vector<float> load_weights(std::filesystem::path const& path, model::GPTConfig const& cfg);

namespace detail {
//! A LoRA engine's checkpoint: the frozen base weights under their names, the adapters as
//! "lora.<PEFT name>", and the AdamW moments of the adapters only
//! ("optimizer.exp_avg.lora.<PEFT name>", ...); metadata "rlflow.lora" records r, alpha, targets.
RLFLOW_DECL void write_lora_checkpoint(std::filesystem::path const& path, TrainingEngine const& eng,
                                       std::map<std::string, std::string> extra_metadata);
}  // namespace detail

//! Parameters, AdamW moments ("optimizer.exp_avg.<name>", "optimizer.exp_avg_sq.<name>") and the
//! step counter ("optimizer.step", int64) of a training engine, written atomically. The file always
//! holds the full model (ParamLayout); a tensor-parallel engine saves with save_checkpoint_gathered.
RLFLOW_DECL void save_checkpoint(std::filesystem::path const& path, TrainingEngine const& eng,
                                 std::map<std::string, std::string> extra_metadata = {});

//! save_checkpoint for a tensor-parallel engine (training TP, verl's Megatron actor): a collective of
//! the engine's TP group, every rank calls it; the shards of the parameters and both AdamW moments
//! are gathered into the full layout and the ranks with 'write' set write the file (one of them: the
//! same file as an unsharded engine's, so it loads at any TP). The gathered copies are scratch of
//! this call; when TP rank 0 is the only writer they exist on it alone (a gather to rank 0, the
//! other ranks send their shards and allocate nothing), otherwise on every rank (an all-gather). At TP = 1 it is save_checkpoint when 'write' is set and nothing otherwise.
RLFLOW_DECL void save_checkpoint_gathered(std::filesystem::path const& path, TrainingEngine& eng, bool write,
                                          std::map<std::string, std::string> extra_metadata = {});

//! Restores what save_checkpoint (or save_checkpoint_gathered, at any TP) wrote; a tensor-parallel
//! engine keeps its shard of the full file, so a checkpoint loads at every TP degree. All tensors are read into scratch and checked before the
//! engine changes, so a failure (format_error, config_error, io_error) leaves it untouched.
//! Returns the file's metadata.
RLFLOW_DECL std::map<std::string, std::string> load_checkpoint(std::filesystem::path const& path, TrainingEngine& eng);

}  // namespace rlflow::engine

#if RLFLOW_DEFINE_BODIES
#include <rlflow/engine/impl/checkpoint.ipp>
#endif
