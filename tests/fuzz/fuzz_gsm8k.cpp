// Fuzz target: GSM8K rows into verl's RL schema (data/gsm8k.hpp, tools/rlflow_prepare_gsm8k): one
// row's JSON text through gsm8k_rl_row. Silent accept: a row accepted whose ground truth is not
// the first '#### <number>' of its answer with the commas removed (checked here by a scan of its
// own), whose prompt is not the question with verl's instruction, or that carries other values.
#include "fuzz/fuzz_driver.hpp"

#include <rlflow/data/gsm8k.hpp>

namespace fuzz_gsm8k {

using namespace rlflow;

namespace {
//! re.search("#### (\-?[0-9\.\,]+)") written as a scan over every start position.
bool first_final(std::string const& a, std::string& out) {
  auto in_set = [](char c) { return (c >= '0' && c <= '9') || c == '.' || c == ','; };
  for (std::size_t s = 0; s + 5 <= a.size(); ++s) {
    if (a.compare(s, 5, "#### ") != 0) continue;
    for (std::size_t minus : {1u, 0u}) {  // the regex's '-?' tries the minus first
      std::size_t p = s + 5;
      if (minus && !(p < a.size() && a[p] == '-')) continue;
      p += minus;
      std::size_t q = p;
      while (q < a.size() && in_set(a[q])) ++q;
      if (q == p) continue;
      out.clear();
      for (std::size_t k = s + 5; k < q; ++k)
        if (a[k] != ',') out += a[k];
      return true;
    }
  }
  return false;
}
}  // namespace

std::vector<std::string> fuzz_seeds() {
  return {R"({"question": "Natalia sold clips to 48 of her friends in April. How many?", "answer": "48/2 = <<48/2=24>>24\n#### 72"})",
          R"({"question": "q", "answer": "#### -1,234.5"})", R"({"question": "q", "answer": "#### x #### 7"})",
          R"({"question": "\u00e9", "answer": "####7"})", R"({"question": 3, "answer": "#### 7"})"};
}

fuzz::outcome fuzz_one(std::string_view in) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (nlohmann::json::exception const& e) {
    throw format_error(msg("not JSON: ", e.what()));
  }
  auto const row = data::gsm8k_rl_row(j, "train", 5, "row");
  std::string want;
  if (!j.is_object() || !j.contains("answer") || !j["answer"].is_string() || !first_final(j["answer"].get<std::string>(), want))
    return fuzz::outcome::silent_accept;
  if (row["reward_model"]["ground_truth"] != want) return fuzz::outcome::silent_accept;
  std::string const q = j["question"].get<std::string>();
  if (row["prompt"][0]["content"] != q + " " + std::string(data::gsm8k_instruction) || row["extra_info"]["question"] != q ||
      row["extra_info"]["answer"] != j["answer"] || row["extra_info"]["index"] != 5 || row["data_source"] != "openai/gsm8k")
    return fuzz::outcome::silent_accept;
  return fuzz::outcome::accepted;
}

}  // namespace fuzz_gsm8k
RLFLOW_FUZZ_TARGET(gsm8k)
