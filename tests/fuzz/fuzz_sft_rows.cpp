// Fuzz target: SFT rows (rlflow/trainer/sft.hpp, sft_row): one JSON row of a data file made into
// tokens and a loss mask. The first input byte picks the road ('m': multi-turn through the plain
// chat template, data.multiturn.enable; anything else: single-turn, the raw prompt), the rest is
// the row. The tokenizer is the character tokenizer of printable ASCII and the newline (one token
// per character, so the mask's text can be read back exactly).
// Silent accept: a row accepted whose tokens or mask break the law: multi-turn, the maximal runs
// of mask-1 tokens are " " + content + "\n" of each assistant message in order and the text is
// the plain template's; single-turn, the text is BOS + prompt + response + EOS with the mask on
// the response and EOS; always loss_mask[0] == 0 and at most data.max_length tokens.
#include "fuzz/fuzz_driver.hpp"

#include <rlflow/trainer/sft.hpp>

namespace fuzz_sft_rows {

using namespace rlflow;
using json = nlohmann::json;

namespace {
model::CharTokenizer const& tokenizer() {
  static model::CharTokenizer const tok = [] {
    std::string cs = "\n";
    for (char c = ' '; c <= '~'; ++c) cs += c;
    return model::CharTokenizer(cs);
  }();
  return tok;
}
}  // namespace

std::vector<std::string> fuzz_seeds() {
  return {
      "m{\"messages\": [{\"role\": \"system\", \"content\": \"be brief\"}, {\"role\": \"user\", \"content\": \"2+3?\"}, "
      "{\"role\": \"assistant\", \"content\": \"5\"}, {\"role\": \"user\", \"content\": \"and 4+4?\"}, "
      "{\"role\": \"assistant\", \"content\": \"8\\nsure\"}]}",
      "m{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"\"}, "
      "{\"role\": \"assistant\", \"content\": \"again\"}, {\"role\": \"user\", \"content\": \"bye\"}]}",
      "s{\"question\": \"abc=\", \"answer\": \"cba\"}",
      "s{\"question\": \"a very long prompt that data.max_length cuts because it runs past sixty-four characters\", "
      "\"answer\": \"x\"}",
  };
}

fuzz::outcome fuzz_one(std::string_view in) {
  if (in.empty()) throw format_error("empty input");
  bool const multi = in[0] == 'm';
  rlflow::detail::check_json_depth(in.substr(1), max_data_row_depth, "fuzz_sft_rows", "the row");
  json row;
  try {
    row = json::parse(in.substr(1));
  } catch (json::exception const& e) {
    throw format_error(msg("not JSON: ", e.what()));
  }
  SftConfig c;
  c.data.multiturn_enable = multi;
  c.data.max_length = 64;
  c.data.truncation = "error";
  auto const& tok = tokenizer();
  SftExample const e = sft_row(row, c, multi ? SftFormat::plain() : SftFormat::raw(), tok, "row");
  if (e.input_ids.size() != e.loss_mask.size() || e.input_ids.size() > 64 || e.loss_mask.empty() || e.loss_mask[0] != 0)
    return fuzz::outcome::silent_accept;
  std::string const text = tok.decode(e.input_ids, false);
  if (!multi) {
    std::string const p = row["question"], r = row["answer"];
    if (text != "<bos>" + p + r + "<eos>") return fuzz::outcome::silent_accept;
    for (std::size_t t = 0; t < e.loss_mask.size(); ++t)
      if (e.loss_mask[t] != (t > p.size() ? 1 : 0)) return fuzz::outcome::silent_accept;
    return fuzz::outcome::accepted;
  }
  // the plain template's text up to the last assistant message, and its assistant runs
  auto const& m = row["messages"];
  std::size_t last = 0;
  for (std::size_t i = 0; i < m.size(); ++i)
    if (m[i]["role"] == "assistant") last = i;
  std::string want = "<bos>";
  std::vector<std::string> runs;
  for (std::size_t i = 0; i <= last; ++i) {
    std::string const role = m[i]["role"], content = m[i]["content"];
    if (role == "system") want += content + "\n\n";
    else if (role == "user") want += "User: " + content + "\n";
    else {
      want += "Assistant: " + content + "\n";
      runs.push_back(" " + content + "\n");
    }
  }
  if (text != want) return fuzz::outcome::silent_accept;
  std::vector<std::string> got;
  for (std::size_t i = 0; i < e.loss_mask.size();) {
    if (!e.loss_mask[i]) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < e.loss_mask.size() && e.loss_mask[j]) ++j;
    got.push_back(tok.decode(std::span<std::int32_t const>(e.input_ids).subspan(i, j - i), false));
    i = j;
  }
  return got == runs ? fuzz::outcome::accepted : fuzz::outcome::silent_accept;
}

}  // namespace fuzz_sft_rows
RLFLOW_FUZZ_TARGET(sft_rows)
