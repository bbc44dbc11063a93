// rlflow/data/gsm8k.hpp: GSM8K rows into verl's RL schema, as verl's
// examples/data_preprocess/gsm8k.py writes them. Defines gsm8k_instruction, gsm8k_solution (the
// number after "#### " of an answer) and gsm8k_rl_row (one {question, answer} row -> {data_source,
// prompt, ability, reward_model, extra_info}); the tool rlflow_prepare_gsm8k converts files.
// verl: examples/data_preprocess/gsm8k.py (extract_solution, make_map_fn).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>
#include <rlflow/core/error.hpp>  // format_error, msg

namespace rlflow::data {

//! The instruction verl appends to every question (gsm8k.py's instruction_following).
inline constexpr std::string_view gsm8k_instruction = "Let's think step by step and output the final answer after \"####\".";

//! verl's extract_solution: the first "#### " followed by a run of [-]?[0-9.,]+ (re.search of
//! "#### (\-?[0-9\.\,]+)"), with the commas removed. Throws format_error naming 'where' when the
//! answer has none (verl asserts).
inline std::string gsm8k_solution(std::string_view answer, std::string_view where = "answer") {
  auto digitish = [](char c) { return (c >= '0' && c <= '9') || c == '.' || c == ','; };
  for (std::size_t at = answer.find("#### "); at != std::string_view::npos; at = answer.find("#### ", at + 1)) {
    std::size_t i = at + 5, j = i;
    if (j < answer.size() && answer[j] == '-' && j + 1 < answer.size() && digitish(answer[j + 1])) ++j;
    std::size_t const run = j;
    while (j < answer.size() && digitish(answer[j])) ++j;
    if (j == run) continue;  // no number here: re.search goes on to the next "#### "
    std::string out;
    for (std::size_t k = i; k < j; ++k)
      if (answer[k] != ',') out += answer[k];
    return out;
  }
  std::string const head(answer.substr(0, 80));
  throw format_error(msg("rlflow::data::gsm8k_solution: ", where, " has no final answer '#### <number>' (it starts '", head,
                         answer.size() > 80 ? "...'" : "'", "); GSM8K answers end with a line '#### 72'"));
}

//! One GSM8K row ({"question": string, "answer": string with "#### n"}) in verl's RL schema:
//! {data_source: "openai/gsm8k", prompt: [{role: user, content: question + " " + instruction}],
//! ability: "math", reward_model: {style: "rule", ground_truth: n}, extra_info: {split, index,
//! answer, question}}. 'where' names the row in errors (a file and line).
inline nlohmann::ordered_json gsm8k_rl_row(nlohmann::json const& row, std::string_view split, std::int64_t index,
                                           std::string_view where = "row") {
  if (!row.is_object()) throw format_error(msg("rlflow::data::gsm8k_rl_row: ", where, " is not a JSON object"));
  for (char const* k : {"question", "answer"})
    if (!row.contains(k) || !row[k].is_string())
      throw format_error(msg("rlflow::data::gsm8k_rl_row: ", where, " has no string field '", k,
                             "'; GSM8K rows are {\"question\": ..., \"answer\": \"... #### 72\"}"));
  std::string const question = row["question"].get<std::string>(), answer = row["answer"].get<std::string>();
  std::string const solution = gsm8k_solution(answer, msg(where, ": answer"));
  nlohmann::ordered_json out;
  out["data_source"] = "openai/gsm8k";
  out["prompt"] = nlohmann::ordered_json::array(
      {nlohmann::ordered_json{{"role", "user"}, {"content", question + " " + std::string(gsm8k_instruction)}}});
  out["ability"] = "math";
  out["reward_model"] = {{"style", "rule"}, {"ground_truth", solution}};
  out["extra_info"] = {{"split", std::string(split)}, {"index", index}, {"answer", answer}, {"question", question}};
  return out;
}

}  // namespace rlflow::data
