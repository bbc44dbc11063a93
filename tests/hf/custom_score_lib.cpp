// tests/hf/custom_score_lib.cpp: a custom scorer library for test_rewards (custom_reward_function).
#include <cstring>
#include <string>

extern "C" double compute_score(char const* data_source, char const* solution, char const* ground_truth,
                                char const* extra_info_json) {
  if (std::strcmp(data_source, "length") == 0) return double(std::strlen(solution));
  std::string const s(solution), g(ground_truth);
  return (s.find(g) != std::string::npos ? 1.0 : 0.0) + (std::strlen(extra_info_json) > 0 ? 0.5 : 0.0);
}

extern "C" double other_score(char const*, char const*, char const*, char const*) { return -1.0; }
