// rlflow/agent/tool_parser.hpp: tool calls in a model's decoded text, Hermes format
// (Qwen2.5 / Qwen3, NousResearch Hermes):
//   <tool_call>
//   {"name": "calculator", "arguments": {"expression": "12*34"}}
//   </tool_call>
// verl: verl/experimental/agent_loop/tool_parser.py, HermesToolParser.extract_tool_calls.
#pragma once
#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace rlflow::agent {

//! Key order kept, so tool schemas render through chat templates' 'tojson' as Python's json.dumps.
using json = nlohmann::ordered_json;

//! JSON text for messages: invalid UTF-8 (YAML and tools pass bytes through) shown as U+FFFD
//! instead of throwing.
inline std::string show_json(json const& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

//! One call the model wrote. A malformed call (bad JSON, no name, arguments that are not an
//! object) has 'error' set and is answered with that text instead of running a tool.
struct ToolCall {
  std::string name;                   //!< the function's name (empty when malformed)
  json arguments = json::object();    //!< the arguments object
  std::string error;                  //!< why the call is malformed; empty when it is well formed
  std::string raw;                    //!< the text between the tags
  bool malformed() const { return !error.empty(); }
};

//! What one assistant turn's text holds: the text with the calls taken out, and the calls in order.
struct ParsedTurn {
  std::string content;
  std::vector<ToolCall> calls;
};

//! verl: HermesToolParser. Every complete '<tool_call>...</tool_call>' pair is a call (the text
//! between is JSON with "name" and "arguments"); an opening tag without its closing tag is plain
//! text, as in verl. Unlike verl, which logs and drops a malformed call, the call stays in the
//! list with its error, so the model is told what was wrong and the metrics count it.
class HermesToolParser {
 public:
  static constexpr std::string_view start_tag = "<tool_call>";
  static constexpr std::string_view end_tag = "</tool_call>";
  //! A call's JSON deeper than this is malformed (bounds the parser's work on hostile text).
  static constexpr int max_json_depth = 64;

  ParsedTurn parse(std::string_view text) const {
    ParsedTurn out;
    std::size_t pos = 0;
    while (pos <= text.size()) {
      std::size_t const s = text.find(start_tag, pos);
      if (s == std::string_view::npos) break;
      std::size_t const e = text.find(end_tag, s + start_tag.size());
      if (e == std::string_view::npos) break;
      out.content.append(text.substr(pos, s - pos));
      out.calls.push_back(parse_call(text.substr(s + start_tag.size(), e - s - start_tag.size())));
      pos = e + end_tag.size();
    }
    if (pos < text.size()) out.content.append(text.substr(pos));
    return out;
  }

  //! One call's text (between the tags).
  static ToolCall parse_call(std::string_view body) {
    ToolCall c;
    c.raw = std::string(body);
    int depth = 0, deepest = 0;
    bool in_str = false;
    for (std::size_t i = 0; i < body.size(); ++i) {  // nesting bound before nlohmann sees the text
      char const ch = body[i];
      if (in_str) {
        if (ch == '\\') ++i;
        else if (ch == '"') in_str = false;
      } else if (ch == '"') in_str = true;
      else if (ch == '{' || ch == '[') deepest = std::max(deepest, ++depth);
      else if (ch == '}' || ch == ']') --depth;
    }
    if (deepest > max_json_depth) {
      c.error = "the tool call's JSON nests deeper than " + std::to_string(max_json_depth) +
                " levels; write {\"name\": ..., \"arguments\": {...}}";
      return c;
    }
    json j = json::parse(body.begin(), body.end(), nullptr, false);
    if (j.is_discarded()) {
      c.error = "the tool call is not valid JSON; write {\"name\": \"<tool>\", \"arguments\": {...}} between the tags";
      return c;
    }
    if (!j.is_object()) {
      c.error = std::string("the tool call is a JSON ") + j.type_name() + ", not an object; write {\"name\": \"<tool>\", \"arguments\": {...}}";
      return c;
    }
    auto const n = j.find("name");
    if (n == j.end() || !n->is_string() || n->get_ref<std::string const&>().empty()) {
      c.error = "the tool call has no \"name\" string; write {\"name\": \"<tool>\", \"arguments\": {...}}";
      return c;
    }
    c.name = n->get<std::string>();
    auto const a = j.find("arguments");
    if (a == j.end() || a->is_null()) return c;  // a function without parameters
    if (a->is_string()) {  // some models write the arguments as a JSON string
      json inner = json::parse(a->get_ref<std::string const&>(), nullptr, false);
      if (!inner.is_discarded() && inner.is_object()) {
        c.arguments = std::move(inner);
        return c;
      }
    }
    if (!a->is_object()) {
      c.error = "the \"arguments\" of the call to '" + c.name + "' are a JSON " + a->type_name() +
                ", not an object; write \"arguments\": {\"<parameter>\": ...}";
      return c;
    }
    c.arguments = *a;
    return c;
  }
};

}  // namespace rlflow::agent
