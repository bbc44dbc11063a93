// rlflow/data/data_files.hpp: dataset files in verl's RL schema (data.train_files / data.val_files)
// read into PromptItems. Defines ChatTemplate (the documented plain-text rendering of a chat
// message list: a prefix and suffix per role, then a generation prompt; GPT-2 has no template of
// its own), parse_file_list ("a.jsonl", "a.jsonl,b.jsonl" or "[a.jsonl, b.jsonl]"), read_rows
// (one JSON-lines or JSON-array file) and load_prompt_files (several files, data.prompt_key,
// data.max_prompt_length with data.filter_overlong_prompts). Parquet is refused with the one-line
// conversion (Debian packages no Arrow C++). verl: RLHFDataset (verl/utils/dataset/rl_dataset.py).
//
// A row: {"data_source": "openai/gsm8k",
//         "prompt": [{"role": "user", "content": "..."}]   (or a plain string),
//         "reward_model": {"style": "rule", "ground_truth": "72"},
//         "extra_info": {...}}                               (kept as JSON text)
#pragma once
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include <rlflow/core/config.hpp>  // RLFLOW_DECL, RLFLOW_DEFINE_BODIES
#include <rlflow/data/data.hpp>   // PromptItem, PromptDataset
#include <rlflow/detail/json_text.hpp>  // check_json_depth, json_preview
#include <rlflow/core/error.hpp>

namespace rlflow {

//! How a chat message list becomes prompt text: for each message, roles[role].prefix + content +
//! roles[role].suffix; then generation_prompt (the start of the assistant's turn the model
//! completes). A role missing from 'roles' is an error naming it.
struct ChatTemplate {
  struct Affixes {
    std::string prefix, suffix;
  };
  std::map<std::string, Affixes> roles = {
      {"system", {"", "\n\n"}}, {"user", {"User: ", "\n"}}, {"assistant", {"Assistant: ", "\n"}}};
  std::string generation_prompt = "Assistant:";

  //! The text of a message list (verl: tokenizer.apply_chat_template(add_generation_prompt=True)).
  std::string render(nlohmann::json const& messages, std::string const& where = "") const;
};

//! Options of load_prompt_files (verl's data.* keys).
struct DataFileOptions {
  std::string prompt_key = "prompt";   //!< data.prompt_key
  ChatTemplate chat_template;
  //! When set, renders chat-message prompts instead of chat_template (a model's own Jinja
  //! chat_template, HfChatTemplate, with add_generation_prompt).
  std::function<std::string(nlohmann::json const&)> render_messages;
  //! data.max_prompt_length with data.filter_overlong_prompts: rows whose prompt has more tokens
  //! are dropped (and counted). 0: no filter.
  std::int64_t max_prompt_length = 0;
  bool filter_overlong_prompts = false;
  //! Tokens of a rendered prompt as the trainer will feed it (BOS included); needed by the filter.
  std::function<std::int64_t(std::string const&)> prompt_tokens;
};

//! What load_prompt_files read.
struct LoadedPrompts {
  std::vector<PromptItem> items;
  std::int64_t rows_read = 0;
  std::int64_t filtered_overlong = 0;
};

//! data.train_files as a list: one path, comma-separated paths, or a YAML/JSON-style list
//! "[a.jsonl, 'b.jsonl']". Empty entries are dropped.
RLFLOW_DECL std::vector<std::string> parse_file_list(std::string_view v);

//! Deepest JSON nesting accepted in a data file row (verl's rows nest 3 levels; dump() and the
//! walks over a row recurse per level, so deeper text is refused before it is parsed).
inline constexpr std::size_t max_data_row_depth = 64;

//! The rows of one file: JSON lines (.jsonl, or .json holding one object per line) or a .json
//! array. Blank lines are skipped; a malformed line is a format_error naming the file and line.
RLFLOW_DECL std::vector<nlohmann::json> read_rows(std::filesystem::path const& path);

//! One row as a PromptItem (verl's fields). 'where' names the file and row in errors.
RLFLOW_DECL PromptItem prompt_item(nlohmann::json const& row, DataFileOptions const& o, std::string const& where);

//! Reads every file of 'files' (parse_file_list) in order. With filter_overlong_prompts, rows
//! whose prompt_tokens exceed max_prompt_length are dropped and counted (verl:
//! filter_overlong_prompts); an empty result is an error.
RLFLOW_DECL LoadedPrompts load_prompt_files(std::vector<std::string> const& files, DataFileOptions const& o);

}  // namespace rlflow

#if RLFLOW_DEFINE_BODIES
#include <rlflow/data/impl/data_files.ipp>
#endif
