// rlflow/rewards/gsm8k.hpp: the GSM8K rule reward as free functions. verl:
// verl/utils/reward_score/gsm8k.py (extract_solution, compute_score), behaviour for behaviour:
// only the last 300 characters of the response are searched; "strict" takes the last
// "#### <number>" (commas removed), "flexible" the last number-like run that is not "" or "."
// (verl's quirk kept: when every run is invalid, the first one is returned); the answer must
// equal the ground truth string exactly. Numbers are runs of [0-9.,] with an optional leading '-'.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rlflow::rewards {

enum class GSM8KMethod { strict, flexible };

namespace detail {
inline bool gsm8k_num_char(char c) { return (c >= '0' && c <= '9') || c == '.' || c == ','; }

//! The last 'n' characters (code points, as Python's str slicing) of UTF-8 text.
inline std::string_view last_chars(std::string_view s, std::size_t n) {
  std::size_t count = 0, i = s.size();
  while (i > 0) {
    --i;
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80 && ++count == n) return s.substr(i);
  }
  return s;
}

//! Python's re.findall(r"\-?[0-9\.\,]+") from position p: the match starting at p, if any.
inline std::size_t number_at(std::string_view s, std::size_t p) {
  std::size_t q = p;
  if (q < s.size() && s[q] == '-' && q + 1 < s.size() && gsm8k_num_char(s[q + 1])) ++q;
  std::size_t const start = q;
  while (q < s.size() && gsm8k_num_char(s[q])) ++q;
  return q > start ? q - p : 0;
}
}  // namespace detail

inline constexpr std::size_t gsm8k_solution_clip_chars = 300;  //!< verl: _SOLUTION_CLIP_CHARS

//! verl: gsm8k.extract_solution. std::nullopt when no answer is found.
inline std::optional<std::string> gsm8k_extract_solution(std::string_view solution, GSM8KMethod method = GSM8KMethod::strict) {
  std::string_view const s = detail::last_chars(solution, gsm8k_solution_clip_chars);
  if (method == GSM8KMethod::strict) {
    std::optional<std::string> last;
    for (std::size_t p = 0; p < s.size();) {
      if (s.substr(p, 5) == "#### ") {
        if (std::size_t const n = detail::number_at(s, p + 5)) {
          last = std::string(s.substr(p + 5, n));
          p += 5 + n;
          continue;
        }
      }
      ++p;
    }
    if (!last) return std::nullopt;
    std::string out;
    for (char c : *last)
      if (c != ',' && c != '$') out.push_back(c);
    return out;
  }
  std::vector<std::string_view> found;
  for (std::size_t p = 0; p < s.size();) {
    if (std::size_t const n = detail::number_at(s, p)) {
      found.push_back(s.substr(p, n));
      p += n;
    } else {
      ++p;
    }
  }
  if (found.empty()) return std::nullopt;
  for (auto it = found.rbegin(); it != found.rend(); ++it)
    if (*it != "" && *it != ".") return std::string(*it);
  return std::string(found.front());  // Python's loop variable keeps the last value visited
}

//! verl: gsm8k.compute_score(solution_str, ground_truth, method, format_score, score):
//! 'score' for the right answer, 'format_score' for a wrong one, 0 when none is found.
inline double gsm8k_compute_score(std::string_view solution, std::string_view ground_truth,
                                  GSM8KMethod method = GSM8KMethod::strict, double format_score = 0.0, double score = 1.0) {
  auto const a = gsm8k_extract_solution(solution, method);
  if (!a) return 0.0;
  return *a == ground_truth ? score : format_score;
}

//! The scorer shape of roles::RuleReward<Score>: verl's default for data_source 'openai/gsm8k' (strict).
struct GSM8KScore {
  static double score(std::string_view response, std::string_view ground_truth) {
    return gsm8k_compute_score(response, ground_truth);
  }
};
//! The flexible variant (any last number).
struct GSM8KFlexibleScore {
  static double score(std::string_view response, std::string_view ground_truth) {
    return gsm8k_compute_score(response, ground_truth, GSM8KMethod::flexible);
  }
};

}  // namespace rlflow::rewards
