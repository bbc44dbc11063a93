// rlflow/tasks/string_tasks.hpp: verifiable string tasks for examples and tests: reverse or sort
// a short string over a small alphabet, with a rule-based reward that gives partial credit.
// Prompts look like "abc=", the expected response "cba" (then EOS). No model code here.
#pragma once
#include <algorithm>  // std::sort, std::reverse
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <rlflow/data/data.hpp>   // PromptDataset, PromptItem
#include <rlflow/core/error.hpp>  // config_error

namespace rlflow::tasks {

enum class StringOp { reverse, sort };

//! A generator of (prompt, ground truth) pairs and the scoring rule for them.
struct StringTask {
  StringOp op = StringOp::reverse;
  std::string alphabet = "abcd";
  int min_len = 2;
  int max_len = 3;
  char separator = '=';

  //! Characters the tokenizer must know: the alphabet and the separator.
  std::string charset() const { return alphabet + separator; }

  std::string answer(std::string s) const {
    if (op == StringOp::reverse) std::reverse(s.begin(), s.end());
    else std::sort(s.begin(), s.end());
    return s;
  }

  //! 'count' prompts drawn from a seeded generator (same seed, same dataset).
  PromptDataset make_dataset(std::int64_t count, std::uint64_t seed, bool shuffle = true) const {
    if (alphabet.empty() || min_len < 1 || max_len < min_len)
      throw config_error(msg("rlflow::tasks::StringTask: need a non-empty alphabet and 1 <= min_len <= max_len (got '",
                             alphabet, "', ", min_len, ", ", max_len, ")"));
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int> len_d(min_len, max_len);
    std::uniform_int_distribution<std::size_t> ch_d(0, alphabet.size() - 1);
    std::vector<PromptItem> items;
    items.reserve(static_cast<std::size_t>(count));
    for (std::int64_t i = 0; i < count; ++i) {
      std::string s(static_cast<std::size_t>(len_d(rng)), ' ');
      for (auto& c : s) c = alphabet[ch_d(rng)];
      items.push_back({s + separator, answer(s), op == StringOp::reverse ? "reverse" : "sort", ""});
    }
    return PromptDataset(std::move(items), shuffle, seed);
  }

  //! Partial credit in [0, 1]: characters in the right place, divided by the longer of the
  //! response and the answer (so extra characters cost as much as missing ones).
  static double score(std::string_view response, std::string_view ground_truth) {
    std::size_t const denom = std::max(response.size(), ground_truth.size());
    if (denom == 0) return 1.0;
    std::size_t hits = 0;
    for (std::size_t i = 0; i < std::min(response.size(), ground_truth.size()); ++i) hits += response[i] == ground_truth[i];
    return static_cast<double>(hits) / static_cast<double>(denom);
  }
};

}  // namespace rlflow::tasks
