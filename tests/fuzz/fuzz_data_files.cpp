// Fuzz target: dataset files in verl's RL schema (data.train_files: JSON lines or a JSON array;
// read_rows, prompt_item, load_prompt_files with the overlong filter). The first input byte picks
// the file's extension ('a': .json, anything else: .jsonl), the rest is the file. Parquet is
// refused by its extension before any byte is read (rlflow reads no Parquet), so it has no target.
// Silent accept: the file is accepted but the rows counted differ from the file's own rows (a
// dropped or invented line: for JSON lines, one row per non-blank line; for an array, its size),
// or a kept prompt differs from what the row says (a string, or its messages rendered).
#include "fuzz/fuzz_driver.hpp"

#include <rlflow/data/data_files.hpp>

#include <unistd.h>

namespace fuzz_data_files {

using namespace rlflow;
namespace fs = std::filesystem;

namespace {
fs::path scratch(char kind) {
  static fs::path const base = fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
  static std::string const pid = std::to_string(::getpid());
  struct Cleanup {  // both scratch files removed at exit
    ~Cleanup() {
      std::error_code ec;
      fs::remove(base / ("rlflow_fuzz_data_" + pid + ".json"), ec);
      fs::remove(base / ("rlflow_fuzz_data_" + pid + ".jsonl"), ec);
    }
  };
  static Cleanup const cleanup;
  return base / ("rlflow_fuzz_data_" + pid + (kind == 'a' ? ".json" : ".jsonl"));
}
}  // namespace

std::vector<std::string> fuzz_seeds() {
  return {
      "l{\"data_source\": \"openai/gsm8k\", \"prompt\": [{\"role\": \"user\", \"content\": \"What is 2+3?\"}], "
      "\"reward_model\": {\"style\": \"rule\", \"ground_truth\": \"5\"}, \"extra_info\": {\"split\": \"train\", \"index\": 0}}\n"
      "\n{\"prompt\": \"plain text prompt\", \"reward_model\": {\"ground_truth\": 72}}\r\n"
      "{\"data_source\": \"x\", \"prompt\": [{\"role\": \"system\", \"content\": \"be brief\"}, {\"role\": \"user\", \"content\": \"hi\"}], "
      "\"reward_model\": null, \"extra_info\": [1, {\"a\": [2, 3]}]}\n",
      "a[{\"prompt\": \"abc\", \"reward_model\": {\"ground_truth\": [1, 2]}}, {\"prompt\": [{\"role\": \"assistant\", \"content\": \"\\u00e9\"}]}]",
      "l{\"prompt\": \"a very long prompt that the overlong filter drops because it has more than sixty-four bytes in it\"}\n"
      "{\"prompt\": \"short\"}",
  };
}

fuzz::outcome fuzz_one(std::string_view in) {
  if (in.empty()) throw format_error("empty input");
  char const kind = in[0];
  std::string const text(in.substr(1));
  auto const path = scratch(kind);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  DataFileOptions o;
  o.max_prompt_length = 64;
  o.filter_overlong_prompts = true;
  o.prompt_tokens = [](std::string const& s) { return static_cast<std::int64_t>(s.size()); };
  auto const got = load_prompt_files({path.string()}, o);
  // the law, from the text itself
  std::vector<nlohmann::json> rows;
  auto const first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '[') {  // read_rows' rule: the extension only names the file
    for (auto& r : nlohmann::json::parse(text)) rows.push_back(r);
  } else {
    std::size_t pos = 0;
    while (pos <= text.size()) {
      auto e = text.find('\n', pos);
      if (e == std::string::npos) e = text.size();
      auto const l = std::string_view(text).substr(pos, e - pos);
      if (l.find_first_not_of(" \t\r") != std::string_view::npos) rows.push_back(nlohmann::json::parse(l));
      pos = e + 1;
    }
  }
  if (got.rows_read != static_cast<std::int64_t>(rows.size())) return fuzz::outcome::silent_accept;
  if (got.rows_read != static_cast<std::int64_t>(got.items.size()) + got.filtered_overlong) return fuzz::outcome::silent_accept;
  std::size_t k = 0;
  for (auto const& r : rows) {
    auto const& p = r.at("prompt");
    std::string const want = p.is_string() ? p.get<std::string>() : o.chat_template.render(p);
    if (static_cast<std::int64_t>(want.size()) > o.max_prompt_length) continue;
    if (k >= got.items.size() || got.items[k].prompt != want) return fuzz::outcome::silent_accept;
    ++k;
  }
  return k == got.items.size() ? fuzz::outcome::accepted : fuzz::outcome::silent_accept;
}

}  // namespace fuzz_data_files
RLFLOW_FUZZ_TARGET(data_files)
