// A tokenizer for agent tests on random models: a few characters plus pieces that each stand for a
// whole Hermes tool call, so a random model samples tool calls often. Encoding takes the longest
// piece at each position; decoding concatenates.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <rlflow/agent/tools.hpp>
#include <rlflow/core/error.hpp>
#include <rlflow/model/tokenizer.hpp>

namespace agent_test {

class CallTokenizer final : public rlflow::model::Tokenizer {
 public:
  //! ids: 0 pad, 1 eos ('|'), then the characters of 'chars', then one piece per call in 'calls'.
  CallTokenizer(std::string_view chars, std::vector<std::string> calls) {
    pieces_.push_back("");
    pieces_.push_back("|");
    for (char c : chars) pieces_.push_back(std::string(1, c));
    for (auto& c : calls) pieces_.push_back(std::move(c));
  }
  //! Digits, '=', newline, two letters and a space; calls of the tool 'sleepy' with x = 1, 2, 3.
  static CallTokenizer sleepy() {
    std::vector<std::string> calls;
    for (int x = 1; x <= 3; ++x)
      calls.push_back("<tool_call>{\"name\": \"sleepy\", \"arguments\": {\"x\": " + std::to_string(x) + "}}</tool_call>");
    return CallTokenizer("0123456789=\nab ", std::move(calls));
  }

  std::vector<std::int32_t> encode(std::string_view text) const override {
    std::vector<std::int32_t> out;
    for (std::size_t i = 0; i < text.size();) {
      std::int32_t best = -1;
      std::size_t len = 0;
      for (std::size_t k = 1; k < pieces_.size(); ++k)
        if (pieces_[k].size() > len && text.substr(i, pieces_[k].size()) == pieces_[k]) {
          best = std::int32_t(k);
          len = pieces_[k].size();
        }
      if (best < 0)
        throw rlflow::value_error(rlflow::msg("agent_test::CallTokenizer: character code ", int(text[i]), " at ", i, " has no piece"));
      out.push_back(best);
      i += len;
    }
    return out;
  }
  std::string decode(std::span<std::int32_t const> ids, bool skip_special = true) const override {
    std::string s;
    for (auto id : ids)
      if (!(skip_special && id <= 1)) s += pieces_.at(std::size_t(id));
    return s;
  }
  int vocab_size() const override { return int(pieces_.size()); }
  std::int32_t pad_id() const override { return 0; }
  std::int32_t bos_id() const override { return -1; }
  std::int32_t eos_id() const override { return 1; }

 private:
  std::vector<std::string> pieces_;
};

// tool messages framed as "\n=<answer>\n"; user and assistant contents verbatim
inline constexpr char const* frame_template =
    "{% for m in messages %}{% if m['role'] == 'tool' %}{{ '\\n=' + m['content'] + '\\n' }}{% else %}{{ m['content'] }}{% endif %}"
    "{% endfor %}";

}  // namespace agent_test
