// rlflow/engine/hf_export.hpp: an rlflow checkpoint (actor.safetensors of
// trainer.default_local_dir/global_step_N, or a save_weights file) exported as a Hugging Face
// folder of the checkpoint's family (config.json, model.safetensors, and the tokenizer files when
// given), which transformers' AutoModelForCausalLM.from_pretrained reads. The tool rlflow_export calls this.
// verl: the checkpoint manager's save of an HF model (hf_model/ next to the sharded checkpoint).
#pragma once
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>
#include <rlflow/engine/checkpoint.hpp>  // load_weights, detail::check_config
#include <rlflow/model/safetensors.hpp>
#include <rlflow/model/hf_folder.hpp>      // export_model

namespace rlflow::engine {

//! The GPTConfig an rlflow checkpoint file records in its 'rlflow.gpt_config' metadata.
inline model::GPTConfig checkpoint_config(safetensors::File const& f) {
  if (!f.metadata().contains("rlflow.gpt_config"))
    throw format_error(msg("rlflow::engine::checkpoint_config: ", f.path(), " has no 'rlflow.gpt_config' metadata; ",
                           "it was not written by rlflow (for a Hugging Face folder, use it directly as model.path)"));
  // every field validated (a float or 2^32 + k where an int belongs is an error, never converted)
  model::GPTConfig c = detail::read_config(f);
  c.validate();
  return c;
}

//! Exports 'checkpoint' (a .safetensors file, or a global_step_N folder holding actor.safetensors)
//! to 'out_dir' as a folder of its family in 'dtype'. A LoRA actor's checkpoint exports its merged
//! weights (base + s B A; its adapters alone: engine::export_peft). tokenizer_dir, when not empty, is a folder whose
//! tokenizer.json / vocab.json / merges.txt / tokenizer_config.json (those present) are copied alongside.
//! bos / eos ids go into config.json (-1: vocab_size - 1, GPT-2's <|endoftext|> position).
inline void export_hf(std::filesystem::path checkpoint, std::filesystem::path const& out_dir, DType dtype = DType::float32,
                      std::filesystem::path const& tokenizer_dir = {}, std::int64_t bos_id = -1, std::int64_t eos_id = -1) {
  namespace fs = std::filesystem;
  if (fs::is_directory(checkpoint)) checkpoint /= "actor.safetensors";
  auto f = safetensors::File::load(checkpoint);
  model::GPTConfig const cfg = checkpoint_config(f);
  auto const flat = load_weights(checkpoint, cfg);  // a LoRA actor's: merged
  model::hf::export_model(out_dir, cfg, flat, dtype, bos_id, eos_id);
  if (!tokenizer_dir.empty()) {
    int copied = 0;
    for (char const* name : {"tokenizer.json", "vocab.json", "merges.txt", "tokenizer_config.json", "special_tokens_map.json"}) {
      if (!fs::exists(tokenizer_dir / name)) continue;
      std::error_code ec;
      fs::copy_file(tokenizer_dir / name, out_dir / name, fs::copy_options::overwrite_existing, ec);
      if (ec) throw io_error(msg("rlflow::engine::export_hf: copying ", (tokenizer_dir / name).string(), ": ", ec.message()));
      ++copied;
    }
    if (copied == 0)
      throw io_error(msg("rlflow::engine::export_hf: ", tokenizer_dir.string(), " holds no tokenizer.json / vocab.json / merges.txt to copy"));
  }
}

}  // namespace rlflow::engine
