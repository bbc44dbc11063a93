// rlflow/tasks/addition.hpp: a harder verifiable task than string reversal: add two numbers of
// up to 'digits' digits ("12+34=" -> "46"), with a per-digit reward. The data source is
// "addition" (scored by roles::DefaultReward through tasks::ScoreRegistry). No model code here;
// what it takes to learn it is in docs/trainer.md, "The addition task".
#pragma once
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <rlflow/data/data.hpp>   // PromptDataset, PromptItem
#include <rlflow/core/error.hpp>  // config_error

namespace rlflow::tasks {

//! "a+b=" -> the decimal sum, operands drawn uniformly from [0, 10^digits).
struct AdditionTask {
  int digits = 2;         //!< operand digits (1..4)
  //! Zero-padded operands and answer ("05+27=" -> "032"): every prompt and answer has one
  //! length, so each digit sits at a fixed position (what a tiny model learns; see docs).
  bool fixed_width = false;
  char separator = '=';
  //! Answers written least significant digit first ("12+34=" -> "64"; with fixed_width
  //! "05+27=" -> "230"), as in the "reversed addition" literature: output digit k then depends
  //! only on the operand digits at position k and the carry out of the digit the model has just
  //! written, instead of on every lower position. The data source is then "addition_reversed"
  //! (scored by score_reversed: digits compared from the left, units with units). With this
  //! repo's tiny GPT and per-token RL it did not help (docs/trainer.md, "The addition task").
  bool reversed_answer = false;
  //! A curriculum by mixture: this fraction of the generated prompts (0 to 1) have both operands
  //! below 10 ("03+05=" with fixed_width), the rest are drawn as without it. On such a prompt the
  //! tens digit is the carry of a0 + b0, a coarse function of the units sum that a tiny model
  //! learns early, and the features it builds then serve the units digit of every prompt
  //! (docs/trainer.md, "The addition task"). Those rows carry extra_info kCurriculumTag, so a
  //! monitor can leave them out of a score meant for the uniform prompts. 0: no such rows, and
  //! the same prompts as before the option existed.
  double single_digit_fraction = 0.0;
  //! extra_info of the rows added by single_digit_fraction.
  static constexpr std::string_view kCurriculumTag = R"({"curriculum":"single_digit"})";

  //! Characters the tokenizer must know: the digits, '+' and the separator.
  std::string charset() const { return std::string("0123456789+") + separator; }
  //! Longest answer in characters (digits + 1); max_response_length needs one more for EOS.
  int max_answer_length() const { return digits + 1; }
  //! Longest prompt in characters ("99+99=": 2 * digits + 2); max_prompt_length needs one more for BOS.
  int max_prompt_length() const { return 2 * digits + 2; }

  //! The decimal text of v, zero-padded to 'width' characters when fixed_width.
  std::string number(std::int64_t v, int width) const {
    std::string s = std::to_string(v);
    if (fixed_width && static_cast<int>(s.size()) < width) s.insert(0, static_cast<std::size_t>(width) - s.size(), '0');
    return s;
  }
  std::string prompt(std::int64_t a, std::int64_t b) const { return number(a, digits) + "+" + number(b, digits) + separator; }
  std::string answer(std::int64_t a, std::int64_t b) const {
    std::string s = number(a + b, max_answer_length());
    if (reversed_answer) std::reverse(s.begin(), s.end());
    return s;
  }
  //! The data source of the generated rows: "addition", or "addition_reversed" with reversed_answer.
  std::string_view data_source() const { return reversed_answer ? "addition_reversed" : "addition"; }

  //! 'count' prompts from a seeded generator (same seed, same dataset); data source data_source().
  //! With single_digit_fraction > 0 each prompt is, with that probability, one with both
  //! operands below 10, tagged extra_info kCurriculumTag.
  PromptDataset make_dataset(std::int64_t count, std::uint64_t seed, bool shuffle = true) const {
    if (digits < 1 || digits > 4)
      throw config_error(msg("rlflow::tasks::AdditionTask: digits=", digits, " is out of range; use 1 to 4"));
    if (!(single_digit_fraction >= 0.0 && single_digit_fraction <= 1.0))
      throw config_error(msg("rlflow::tasks::AdditionTask: single_digit_fraction=", single_digit_fraction,
                             " is out of range; use 0 (uniform operands) to 1 (operands below 10 only)"));
    std::int64_t hi = 1;
    for (int i = 0; i < digits; ++i) hi *= 10;
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<std::int64_t> d(0, hi - 1);
    std::vector<PromptItem> items;
    items.reserve(static_cast<std::size_t>(count));
    std::uniform_int_distribution<std::int64_t> small(0, 9);
    std::bernoulli_distribution easy(single_digit_fraction);
    for (std::int64_t i = 0; i < count; ++i) {
      // draw the coin only when the option is on: without it the generator's stream is unchanged
      if (single_digit_fraction > 0.0 && easy(rng)) {
        std::int64_t const a = small(rng), b = small(rng);
        items.push_back({prompt(a, b), answer(a, b), std::string(data_source()), std::string(kCurriculumTag)});
      } else {
        std::int64_t const a = d(rng), b = d(rng);
        items.push_back({prompt(a, b), answer(a, b), std::string(data_source()), ""});
      }
    }
    return PromptDataset(std::move(items), shuffle, seed);
  }

  //! Per-digit credit in [0, 1]: digits compared from the right (units with units, tens with
  //! tens), divided by the longer of the response and the answer, so a missing or an extra
  //! character costs as much as a wrong one; an exact answer scores 1, an empty one 0 (an
  //! empty answer scores 1 only when the truth is empty).
  static double score(std::string_view response, std::string_view ground_truth) {
    std::size_t const n = std::max(response.size(), ground_truth.size());
    if (n == 0) return 1.0;
    std::size_t hits = 0;
    for (std::size_t k = 1; k <= std::min(response.size(), ground_truth.size()); ++k)
      hits += response[response.size() - k] == ground_truth[ground_truth.size() - k];
    return static_cast<double>(hits) / static_cast<double>(n);
  }
  //! score for reversed answers (data source "addition_reversed"): the same per-digit credit with
  //! the digits compared from the left (units first), divided by the longer length.
  static double score_reversed(std::string_view response, std::string_view ground_truth) {
    std::size_t const n = std::max(response.size(), ground_truth.size());
    if (n == 0) return 1.0;
    std::size_t hits = 0;
    for (std::size_t k = 0; k < std::min(response.size(), ground_truth.size()); ++k) hits += response[k] == ground_truth[k];
    return static_cast<double>(hits) / static_cast<double>(n);
  }
};

}  // namespace rlflow::tasks
