// rlflow/rewards/math.hpp: the \boxed{} math rule reward as free functions. verl:
// verl/utils/reward_score/math.py (from lm-evaluation-harness' hendrycks_math): the last
// \boxed{...} (or \fbox{...}) of the response, its content normalised by strip_string (fracs,
// sqrt, units after "\text{ ", percent, degrees, "k = " prefixes, spaces, 0.5 -> \frac{1}{2},
// a/b -> \frac{a}{b}) and compared as strings. Python's exceptions are kept where they change the
// result: a normalisation that raises makes is_equiv compare the raw strings; a malformed box
// (remove_boxed's assertions) scores 0. String positions count characters (code points).
#pragma once
#include <algorithm>  // std::min
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rlflow::rewards {

namespace math_detail {

struct python_exception {};  //!< where verl's Python code would raise

inline std::vector<std::string> split(std::string_view s, std::string_view sep) {
  std::vector<std::string> out;
  std::size_t p = 0;
  while (true) {
    auto const q = s.find(sep, p);
    if (q == std::string_view::npos) {
      out.emplace_back(s.substr(p));
      return out;
    }
    out.emplace_back(s.substr(p, q - p));
    p = q + sep.size();
  }
}
inline std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  std::string out;
  std::size_t p = 0;
  while (true) {
    auto const q = s.find(from, p);
    if (q == std::string::npos) break;
    out.append(s, p, q - p);
    out.append(to);
    p = q + from.size();
  }
  out.append(s, p);
  return out;
}
//! Bytes of the UTF-8 character starting s[i].
inline std::size_t char_len(std::string_view s, std::size_t i) {
  unsigned char const c = static_cast<unsigned char>(s[i]);
  std::size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
  return std::min(n, s.size() - i);
}
inline std::size_t char_count(std::string_view s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

inline std::string fix_fracs(std::string const& string) {
  auto substrs = split(string, "\\frac");
  std::string new_str = substrs[0];
  for (std::size_t k = 1; k < substrs.size(); ++k) {
    std::string const& substr = substrs[k];
    new_str += "\\frac";
    if (substr.empty()) throw python_exception{};  // substr[0]: IndexError
    if (substr[0] == '{') {
      new_str += substr;
      continue;
    }
    std::size_t const la = char_len(substr, 0);
    if (char_count(substr) < 2) return string;
    std::string const a = substr.substr(0, la);
    std::string const b = substr.substr(la, char_len(substr, la));
    std::string const post = substr.substr(la + b.size());
    if (b != "{") new_str += "{" + a + "}{" + b + "}" + post;
    else new_str += "{" + a + "}" + b + post;
  }
  return new_str;
}

//! str(int(x)) == x: an integer written canonically (Python's int() then format).
inline bool canonical_int(std::string_view x) {
  if (!x.empty() && x[0] == '-') x.remove_prefix(1);
  if (x.empty() || (x.size() > 1 && x[0] == '0')) return false;
  for (char c : x)
    if (c < '0' || c > '9') return false;
  return true;
}
inline std::string fix_a_slash_b(std::string const& string) {
  auto const parts = split(string, "/");
  if (parts.size() != 2) return string;
  if (!canonical_int(parts[0]) || !canonical_int(parts[1]) || parts[0] == "-0" || parts[1] == "-0") return string;
  return "\\frac{" + parts[0] + "}{" + parts[1] + "}";
}

inline std::string remove_right_units(std::string const& string) {
  if (string.find("\\text{ ") == std::string::npos) return string;
  auto const splits = split(string, "\\text{ ");
  if (splits.size() != 2) throw python_exception{};  // assert len(splits) == 2
  return splits[0];
}

inline std::string fix_sqrt(std::string const& string) {
  if (string.find("\\sqrt") == std::string::npos) return string;
  auto const splits = split(string, "\\sqrt");
  std::string out = splits[0];
  for (std::size_t k = 1; k < splits.size(); ++k) {
    std::string const& s = splits[k];
    if (s.empty()) throw python_exception{};  // split[0]: IndexError
    if (s[0] != '{') {
      std::size_t const la = char_len(s, 0);
      out += "\\sqrt{" + s.substr(0, la) + "}" + s.substr(la);
    } else {
      out += "\\sqrt" + s;
    }
  }
  return out;
}

}  // namespace math_detail

//! verl: math.strip_string. Throws math_detail::python_exception where Python raises.
inline std::string math_strip_string(std::string string) {
  using namespace math_detail;
  string = replace_all(string, "\n", "");
  string = replace_all(string, "\\!", "");
  string = replace_all(string, "\\\\", "\\");
  string = replace_all(string, "tfrac", "frac");
  string = replace_all(string, "dfrac", "frac");
  string = replace_all(string, "\\left", "");
  string = replace_all(string, "\\right", "");
  string = replace_all(string, "^{\\circ}", "");
  string = replace_all(string, "^\\circ", "");
  string = replace_all(string, "\\$", "");
  string = remove_right_units(string);
  string = replace_all(string, "\\%", "");
  string = replace_all(string, " .", " 0.");
  string = replace_all(string, "{.", "{0.");
  if (string.empty()) return string;
  if (string[0] == '.') string = "0" + string;
  if (auto const eq = split(string, "="); eq.size() == 2 && char_count(eq[0]) <= 2) string = eq[1];
  string = fix_sqrt(string);
  string = replace_all(string, " ", "");
  string = fix_fracs(string);
  if (string == "0.5") string = "\\frac{1}{2}";
  string = fix_a_slash_b(string);
  return string;
}

//! verl: math.is_equiv (strip_string on both; if that raises, the raw strings are compared).
inline bool math_is_equiv(std::optional<std::string> const& a, std::optional<std::string> const& b) {
  if (!a && !b) return true;
  if (!a || !b) return false;
  try {
    return math_strip_string(*a) == math_strip_string(*b);
  } catch (math_detail::python_exception const&) {
    return *a == *b;
  }
}

//! verl: math.last_boxed_only_string: from the last "\boxed" (else "\fbox") to the brace that
//! closes its first "{"; std::nullopt when there is none.
inline std::optional<std::string> last_boxed_only_string(std::string_view s) {
  auto idx = s.rfind("\\boxed");
  if (idx == std::string_view::npos) {
    idx = s.rfind("\\fbox");
    if (idx == std::string_view::npos) return std::nullopt;
  }
  int open = 0;
  for (std::size_t i = idx; i < s.size(); ++i) {
    if (s[i] == '{') ++open;
    if (s[i] == '}') {
      --open;
      if (open == 0) return std::string(s.substr(idx, i + 1 - idx));
    }
  }
  return std::nullopt;
}

//! verl: math.remove_boxed ("\boxed " prefix, or "\boxed{...}"); throws where Python asserts.
inline std::string remove_boxed(std::string_view s) {
  if (s.find("\\boxed ") != std::string_view::npos) {
    if (!s.starts_with("\\boxed ")) throw math_detail::python_exception{};
    return std::string(s.substr(7));
  }
  if (!s.starts_with("\\boxed{") || !s.ends_with("}")) throw math_detail::python_exception{};
  return std::string(s.substr(7, s.size() - 8));
}

//! verl: math.compute_score: 1 when the last boxed answer is equivalent to the ground truth.
inline double math_compute_score(std::string_view solution, std::string_view ground_truth) {
  try {
    auto const boxed = last_boxed_only_string(solution);
    if (!boxed) return 0.0;
    return math_is_equiv(remove_boxed(*boxed), std::string(ground_truth)) ? 1.0 : 0.0;
  } catch (math_detail::python_exception const&) {
    return 0.0;
  }
}

//! The scorer shape of roles::RuleReward<Score>: verl's default for 'lighteval/MATH'.
struct MathBoxedScore {
  static double score(std::string_view response, std::string_view ground_truth) {
    return math_compute_score(response, ground_truth);
  }
};

}  // namespace rlflow::rewards
