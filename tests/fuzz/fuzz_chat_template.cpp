// Fuzz target: a Hugging Face chat template (the `chat_template` string of a model folder's
// tokenizer_config.json), parsed by jinja::Template and rendered by HfChatTemplate with a fixed
// conversation (system, user, assistant with <think> and a tool call, tool result) and tools. The
// input is the template source. Tight limits bound loops, recursion and output. Silent accept: a
// render longer than Limits::max_output_bytes, or two renders of the same template and data that
// differ (rendering must be deterministic; templates calling strftime_now are exempt).
#include "fuzz/fuzz_driver.hpp"

#include <rlflow/data/chat_template.hpp>

namespace fuzz_chat_template {

using namespace rlflow;

namespace {
jinja::Limits limits() {
  jinja::Limits l;
  l.max_output_bytes = 1 << 20;
  l.max_steps = 200000;
  l.max_depth = 40;
  l.max_range = 10000;
  return l;
}
nlohmann::ordered_json const& messages() {
  static auto const m = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "What is 6 x 7? ünïcödé 🙂"},
    {"role": "assistant", "content": "<think>\nmultiply\n</think>\n\nLet me check.",
     "tool_calls": [{"type": "function", "function": {"name": "calc", "arguments": {"expr": "6*7", "exact": true}}}]},
    {"role": "tool", "content": "42"},
    {"role": "assistant", "content": "It is 42.", "reasoning_content": "easy"},
    {"role": "user", "content": "<tool_response>x</tool_response>"}])");
  return m;
}
nlohmann::ordered_json const& tools() {
  static auto const t = nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "calc",
    "description": "Evaluates arithmetic", "parameters": {"type": "object", "properties": {"expr": {"type": "string"}},
    "required": ["expr"]}}}])");
  return t;
}
}  // namespace

std::vector<std::string> fuzz_seeds() {
  return {HfChatTemplate::named_source("chatml"), HfChatTemplate::named_source("llama3"), HfChatTemplate::named_source("plain"),
          // the constructs the Qwen-style templates use: namespaces, reversed loops, string methods, tool calls
          "{%- if tools %}\n  {{- '<|im_start|>system\\n# Tools\\n<tools>' }}\n  {%- for tool in tools %}\n    {{- '\\n' + tool | tojson }}\n"
          "  {%- endfor %}\n{%- endif %}\n{%- set ns = namespace(last=messages|length - 1, multi=true) %}\n"
          "{%- for message in messages[::-1] %}\n  {%- set index = (messages|length - 1) - loop.index0 %}\n"
          "  {%- if ns.multi and message.role == 'user' and not message.content.startswith('<tool_response>') %}\n"
          "    {%- set ns.multi = false %}{%- set ns.last = index %}\n  {%- endif %}\n{%- endfor %}\n"
          "{%- for message in messages %}\n  {%- if message.role == 'assistant' and '</think>' in message.content %}\n"
          "    {{- message.content.split('</think>')[-1].lstrip('\\n') }}\n  {%- elif message.tool_calls %}\n"
          "    {%- for tc in message.tool_calls %}{{- tc.function.arguments | tojson(indent=2) }}{%- endfor %}\n"
          "  {%- else %}\n    {{- '<|im_start|>' + message.role + '\\n' + message.content | trim + '<|im_end|>\\n' }}\n  {%- endif %}\n"
          "{%- endfor %}\n{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
          "{%- if enable_thinking is defined and enable_thinking is false %}{{ '<think>\\n\\n</think>\\n\\n' }}{% endif %}{%- endif %}",
          "{% macro render(m, sep=': ') %}{{ m.role | upper }}{{ sep }}{{ m['content'] }}{% endmacro %}"
          "{% for m in messages if m.role != 'tool' %}{{ loop.index }}/{{ loop.length }} {{ render(m) }}\n{% else %}none{% endfor %}"
          "{# comment #}{% set x, y = [1, 2] %}{{ x + y * 3 // 2 ~ (1.5 ** 2) }}{{ d | default({'a': [1, none]}) }}",
          "{% for i in range(3) %}{% if i is odd %}{% continue %}{% endif %}{{ i }}{% endfor %}{% set b %}block{% endset %}"
          "{{ b.replace('o', '0') }}{{ [3, 1, 2] | reverse | join(',') }}{{ {'k': 'v'}.get('k') }}{{ 'a,b'.split(',') | first }}"
          "{{ raise_exception('stop') if false else 'go' }}{{ messages | selectattr('role', 'equalto', 'user') | list | length }}"};
}

fuzz::outcome fuzz_one(std::string_view in) {
  HfChatTemplate const t(in, limits());
  auto const extra = nlohmann::ordered_json{{"enable_thinking", false}};
  std::string const a = t.render(messages(), tools(), true, extra, "<s>", "</s>");
  std::string const b = t.render(messages(), tools(), true, extra, "<s>", "</s>");
  if (a.size() > limits().max_output_bytes) return fuzz::outcome::silent_accept;
  if (a != b && in.find("strftime_now") == std::string_view::npos) return fuzz::outcome::silent_accept;
  return fuzz::outcome::accepted;
}

}  // namespace fuzz_chat_template
RLFLOW_FUZZ_TARGET(chat_template)
