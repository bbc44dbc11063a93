// Fuzz target: a model's decoded turn as the agent loop parses it (agent::HermesToolParser, the
// Hermes <tool_call>{"name": ..., "arguments": {...}}</tool_call> format) and answers its calls
// (agent::ToolSet::call with the exact calculator and an echo tool). The input is the text.
// Silent accept: a well-formed call whose raw text does not parse to an object with that name and
// those arguments, a raw text holding the closing tag, a tool answer that throws, or a
// calculator answer that is neither an error nor an integer.
#include "fuzz/fuzz_driver.hpp"

#include <rlflow/agent/tools.hpp>

namespace fuzz_tool_call {

using namespace rlflow;
using agent::json;

std::vector<std::string> fuzz_seeds() {
  return {"<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"(12+3)*-45\"}}\n</tool_call>",
          "Let me compute.<tool_call>{\"name\": \"calculator\", \"arguments\": \"{\\\"expression\\\": \\\"2*2\\\"}\"}</tool_call> done",
          "<tool_call>{\"name\": \"echo\", \"arguments\": {\"text\": \"hi\"}}</tool_call><tool_call>{\"name\": \"nope\"}</tool_call>",
          "<tool_call>{\"name\": \"calculator\", \"arguments\": {</tool_call>",
          "<tool_call>[[[[1]]]]</tool_call> <tool_call>{\"name\": \"calculator\", \"arguments\": {\"expression\": \"99999999999*99999999999-1\"}}",
          "<think>\nplain\n</think>\n\nno calls here"};
}

fuzz::outcome fuzz_one(std::string_view in) {
  static agent::ToolSet const tools = [] {
    agent::ToolSet t;
    t.add(agent::calculator_tool());
    agent::ToolSchema s;
    s.name = "echo";
    t.add(agent::Tool{s, [](json const& a, json const&) {
                        agent::ToolResult r;
                        r.text = agent::show_json(a);
                        return r;
                      }});
    return t;
  }();
  auto const p = agent::HermesToolParser().parse(in);
  bool silent = false;
  for (auto const& c : p.calls) {
    silent |= c.raw.find(agent::HermesToolParser::end_tag) != std::string::npos;
    if (!c.malformed()) {
      json const j = json::parse(c.raw, nullptr, false);
      silent |= j.is_discarded() || !j.is_object() || !j.contains("name") || j["name"] != c.name || !c.arguments.is_object();
    }
    try {
      auto const r = tools.call(c, nullptr);
      if (c.name == "calculator" && !r.error) {
        std::string_view d = r.text;
        if (!d.empty() && d[0] == '-') d.remove_prefix(1);
        silent |= d.empty() || d.find_first_not_of("0123456789") != std::string_view::npos || (d.size() > 1 && d[0] == '0');
      }
    } catch (...) {
      silent = true;
    }
  }
  return silent ? fuzz::outcome::silent_accept : fuzz::outcome::accepted;
}

}  // namespace fuzz_tool_call
RLFLOW_FUZZ_TARGET(tool_call)
