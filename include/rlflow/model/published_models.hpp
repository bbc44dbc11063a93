// rlflow/model/published_models.hpp: the shapes of models people post-train, by name, as their
// Hugging Face config.json files give them: for estimates before a folder is at hand (the planner
// page's memory per device), benchmarks and tests at real sizes. Weights come from a folder
// (model/hf_folder.hpp); these are shapes only.
#pragma once
#include <span>
#include <string>
#include <string_view>

#include <rlflow/core/error.hpp>          // config_error, msg
#include <rlflow/model/param_layout.hpp>  // GPTConfig, Arch, RopeType

namespace rlflow::model {

//! One published model: its short name, the Hugging Face repository and its shape.
struct PublishedModel {
  std::string_view name;  //!< e.g. "qwen2.5-0.5b"
  std::string_view repo;  //!< e.g. "Qwen/Qwen2.5-0.5B-Instruct"
  GPTConfig config;
};

namespace detail {
//! A Llama-family shape: hidden C, intermediate F, L layers, NH heads, NKV key/value heads, V rows.
inline GPTConfig llama_shape(Arch arch, int C, int F, int L, int NH, int NKV, int V, int max_pos, double theta, bool tied,
                             int head_dim = 0) {
  GPTConfig m;
  m.arch = arch;
  m.n_embd = C;
  m.intermediate_size = F;
  m.n_layer = L;
  m.n_head = NH;
  m.n_kv_head = NKV;
  m.head_size = head_dim;
  m.vocab_size = V;
  m.max_seq_len = max_pos;
  m.rope_theta = theta;
  m.tie_word_embeddings = tied;
  m.qkv_bias = arch == Arch::qwen2;
  m.qk_norm = arch == Arch::qwen3;
  m.rms_norm_eps = arch == Arch::llama ? 1e-5f : 1e-6f;
  return m;
}
inline GPTConfig llama3_rope(GPTConfig m, double factor) {
  m.rope_type = RopeType::llama3;
  m.rope_factor = factor;
  m.rope_low_freq_factor = 1.0;
  m.rope_high_freq_factor = 4.0;
  m.rope_original_max_position = 8192;
  return m;
}
}  // namespace detail

//! The table, smallest first within each family.
inline std::span<PublishedModel const> published_models() {
  using detail::llama_shape;
  static PublishedModel const table[] = {
      {"qwen2.5-0.5b", "Qwen/Qwen2.5-0.5B-Instruct", llama_shape(Arch::qwen2, 896, 4864, 24, 14, 2, 151936, 32768, 1e6, true)},
      {"qwen2.5-1.5b", "Qwen/Qwen2.5-1.5B-Instruct", llama_shape(Arch::qwen2, 1536, 8960, 28, 12, 2, 151936, 32768, 1e6, true)},
      {"qwen2.5-3b", "Qwen/Qwen2.5-3B-Instruct", llama_shape(Arch::qwen2, 2048, 11008, 36, 16, 2, 151936, 32768, 1e6, true)},
      {"qwen2.5-7b", "Qwen/Qwen2.5-7B-Instruct", llama_shape(Arch::qwen2, 3584, 18944, 28, 28, 4, 152064, 32768, 1e6, false)},
      {"qwen3-0.6b", "Qwen/Qwen3-0.6B", llama_shape(Arch::qwen3, 1024, 3072, 28, 16, 8, 151936, 40960, 1e6, true, 128)},
      {"qwen3-8b", "Qwen/Qwen3-8B", llama_shape(Arch::qwen3, 4096, 12288, 36, 32, 8, 151936, 40960, 1e6, false, 128)},
      {"llama-3.2-1b", "meta-llama/Llama-3.2-1B-Instruct",
       detail::llama3_rope(llama_shape(Arch::llama, 2048, 8192, 16, 32, 8, 128256, 131072, 5e5, true), 32.0)},
      {"llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct",
       detail::llama3_rope(llama_shape(Arch::llama, 4096, 14336, 32, 32, 8, 128256, 131072, 5e5, false), 8.0)},
  };
  return table;
}

//! The published model called 'name' (a short name of published_models()); config_error listing
//! the names otherwise.
inline PublishedModel const& published_model(std::string_view name) {
  std::string names;
  for (auto const& m : published_models()) {
    if (m.name == name) return m;
    names += names.empty() ? "" : ", ";
    names += m.name;
  }
  throw config_error(msg("published model '", name, "' is not in the table; one of: ", names));
}

}  // namespace rlflow::model
