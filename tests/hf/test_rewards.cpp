// tests/hf/test_rewards.cpp <-> include/rlflow/rewards/gsm8k.hpp, math.hpp: verl's GSM8K
// extraction (strict and flexible) against the same regular expressions run by std::regex on
// random strings, its edge cases (clip to the last 300 characters, commas, verl's quirks), and
// the \boxed{} matcher's normalisations on hand-worked cases.
#include <catch2/catch.hpp>

#include <random>
#include <regex>
#include <string>

#include <rlflow/rewards/custom.hpp>
#include <rlflow/rewards/gsm8k.hpp>
#include <rlflow/rewards/math.hpp>
#include <rlflow/tasks/reward_score.hpp>

namespace test_rewards {

using namespace rlflow::rewards;

namespace {
// verl's extract_solution with std::regex doing re.findall (an independent implementation).
std::optional<std::string> regex_extract(std::string s, GSM8KMethod m) {
  if (s.size() > 300) s = s.substr(s.size() - 300);  // ASCII inputs: characters are bytes
  std::vector<std::string> found;
  std::regex const re(m == GSM8KMethod::strict ? "#### (\\-?[0-9\\.\\,]+)" : "(\\-?[0-9\\.\\,]+)");
  for (std::sregex_iterator it(s.begin(), s.end(), re), end; it != end; ++it) found.push_back((*it)[1].str());
  if (found.empty()) return std::nullopt;
  if (m == GSM8KMethod::strict) {
    std::string out;
    for (char c : found.back())
      if (c != ',' && c != '$') out += c;
    return out;
  }
  std::string last;
  for (auto it = found.rbegin(); it != found.rend(); ++it) {
    last = *it;
    if (last != "" && last != ".") break;
  }
  return last;
}
}  // namespace

TEST_CASE("gsm8k extraction equals the regular expressions on random strings", "[rewards][gsm8k]") {
  std::mt19937_64 g(3);
  std::string const alphabet = "####  --0123456789..,,a$x\n";
  int found_strict = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string s(g() % 420, ' ');
    for (auto& c : s) c = alphabet[g() % alphabet.size()];
    if (g() % 3 == 0) s += "#### " + std::to_string(int(g() % 2000) - 1000);
    for (auto m : {GSM8KMethod::strict, GSM8KMethod::flexible}) {
      auto const want = regex_extract(s, m);
      REQUIRE(gsm8k_extract_solution(s, m) == want);
      if (m == GSM8KMethod::strict && want) ++found_strict;
    }
  }
  CHECK(found_strict > 5000);  // the comparison covered both outcomes
}

TEST_CASE("gsm8k scoring: verl's cases and quirks", "[rewards][gsm8k]") {
  CHECK(gsm8k_compute_score("She sold 48 + 24 = 72 clips.\n#### 72", "72") == 1.0);
  CHECK(gsm8k_compute_score("#### 1,234", "1234") == 1.0);
  CHECK(gsm8k_compute_score("#### -5", "-5") == 1.0);
  CHECK(gsm8k_compute_score("#### 3 then #### 4", "4") == 1.0);
  CHECK(gsm8k_compute_score("#### 3 then #### 4", "3") == 0.0);
  CHECK(gsm8k_compute_score("####72", "72") == 0.0);  // strict needs "#### "
  CHECK(gsm8k_compute_score("####72", "72", GSM8KMethod::flexible) == 1.0);
  CHECK(gsm8k_compute_score("#### $5", "5") == 0.0);
  CHECK(gsm8k_compute_score("#### 7", "8", GSM8KMethod::strict, 0.1) == 0.1);  // format_score
  CHECK(gsm8k_compute_score("no answer", "8", GSM8KMethod::strict, 0.1) == 0.0);
  // only the last 300 characters are searched (characters, not bytes)
  CHECK(gsm8k_compute_score("#### 5" + std::string(300, 'x'), "5") == 0.0);
  CHECK(gsm8k_compute_score("#### 5" + std::string(294, 'x'), "5") == 1.0);
  std::string accents;
  for (int i = 0; i < 294; ++i) accents += "\xc3\xa9";  // 294 characters, 588 bytes
  CHECK(gsm8k_compute_score("#### 5" + accents, "5") == 1.0);
  // flexible: the last run of [0-9.,] that is not "" or "."; verl compares it as it is
  CHECK(gsm8k_extract_solution("3 apples and 4.", GSM8KMethod::flexible) == "4.");
  CHECK(gsm8k_extract_solution("a-5", GSM8KMethod::flexible) == "-5");
  CHECK(gsm8k_extract_solution("3 . and ,", GSM8KMethod::flexible) == ",");
  CHECK(gsm8k_extract_solution(". x .", GSM8KMethod::flexible) == ".");  // every run invalid: the first
  CHECK(gsm8k_extract_solution("- x", GSM8KMethod::flexible) == std::nullopt);
  CHECK(GSM8KScore::score("#### 9", "9") == 1.0);
  CHECK(GSM8KFlexibleScore::score("it is 9", "9") == 1.0);
}

TEST_CASE("the boxed{} matcher: hendrycks normalisations as verl's math.py", "[rewards][math]") {
  CHECK(math_compute_score("so \\boxed{\\frac{1}{2}}", "0.5") == 1.0);
  CHECK(math_compute_score("\\boxed{\\dfrac12}", "\\frac{1}{2}") == 1.0);
  CHECK(math_compute_score("\\boxed{1/2}", "\\frac{1}{2}") == 1.0);
  CHECK(math_compute_score("\\boxed{01/2}", "\\frac{1}{2}") == 0.0);  // int("01") formats back as "1"
  CHECK(math_compute_score("\\boxed{10\\%}", "10") == 1.0);
  CHECK(math_compute_score("\\boxed{x = 5}", "5") == 1.0);
  CHECK(math_compute_score("\\boxed{5 \\text{ cm}}", "5") == 1.0);
  CHECK(math_compute_score("\\boxed{\\sqrt2}", "\\sqrt{2}") == 1.0);
  CHECK(math_compute_score("\\boxed{90^\\circ}", "90") == 1.0);
  CHECK(math_compute_score("\\boxed{\\left( 1, 2 \\right)}", "(1,2)") == 1.0);
  CHECK(math_compute_score("\\boxed{.5}", "0.5") == 1.0);
  CHECK(math_compute_score("\\boxed{0.50}", "\\frac{1}{2}") == 0.0);  // only "0.5" itself is rewritten
  CHECK(math_compute_score("\\boxed{1} then \\boxed{2}", "2") == 1.0);
  CHECK(math_compute_score("\\boxed{1} then \\boxed{2}", "1") == 0.0);
  CHECK(math_compute_score("\\boxed{\\frac{a}{b}}", "\\frac{a}{b}") == 1.0);
  CHECK(math_compute_score("no box 5", "5") == 0.0);
  CHECK(math_compute_score("\\boxed{5", "5") == 0.0);    // unclosed
  CHECK(math_compute_score("\\fbox{5}", "5") == 0.0);    // remove_boxed asserts "\boxed{"
  CHECK(math_compute_score("\\boxed 5", "5") == 0.0);    // no brace: last_boxed_only_string finds none
  CHECK(math_compute_score("\\boxed{\\sqrt}", "\\sqrt") == 1.0);  // strip raises: raw strings compared
  CHECK(math_compute_score("\\boxed{\\sqrt}", "\\sqrt{}") == 0.0);
  CHECK(last_boxed_only_string("a \\boxed{{x}} b") == "\\boxed{{x}}");
  CHECK(math_strip_string("\\frac1{72}") == "\\frac{1}{72}");
  CHECK(math_strip_string("k = \\frac{\\sqrt3}{2}") == "\\frac{\\sqrt{3}}{2}");
  CHECK(MathBoxedScore::score("\\boxed{4}", "4") == 1.0);
}

TEST_CASE("custom_reward_function: a scorer from a shared library", "[rewards][custom]") {
  CustomScore const s(RLFLOW_CUSTOM_SCORE_LIB);
  CHECK(s("gsm8k", "the answer is 42", "42") == 1.0);
  CHECK(s("gsm8k", "the answer is 41", "42") == 0.0);
  CHECK(s("gsm8k", "42", "42", "{\"index\": 1}") == 1.5);
  CHECK(s("length", "abcd", "") == 4.0);
  CustomScore const o(RLFLOW_CUSTOM_SCORE_LIB, "other_score");
  CHECK(o("x", "y", "z") == -1.0);
  CHECK_THROWS_WITH(CustomScore(RLFLOW_CUSTOM_SCORE_LIB, "my_score"),
                    Catch::Contains("has no symbol 'my_score' (custom_reward_function.name)"));
  CHECK_THROWS_WITH(CustomScore("/nonexistent/libscore.so"), Catch::Contains("cannot load custom_reward_function.path=/nonexistent/libscore.so"));
  CHECK_THROWS_WITH(CustomScore("reward.py"), Catch::Contains("is a Python file"));
  CHECK_THROWS_AS(CustomScore(""), rlflow::config_error);
}

TEST_CASE("the data_source registry holds verl's gsm8k and MATH scorers", "[rewards][registry]") {
  using rlflow::tasks::default_compute_score;
  CHECK(default_compute_score("openai/gsm8k", "so #### 1,200", "1200") == 1.0);
  CHECK(default_compute_score("openai/gsm8k", "so 1200", "1200") == 0.0);  // strict, as verl's default
  CHECK(default_compute_score("lighteval/MATH", "\\boxed{\\frac12}", "0.5") == 1.0);
  CHECK(default_compute_score("DigitalLearningGmbH/MATH-lighteval", "\\boxed{3}", "4") == 0.0);
  CHECK(default_compute_score("reverse", "cba", "cba") == 1.0);
}

}  // namespace test_rewards
