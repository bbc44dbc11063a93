// Fuzz target: a tool configuration file (actor_rollout_ref.rollout.multi_turn.tool_config_path,
// verl's YAML shape: tools: - class_name, config, tool_schema), read by agent::tools_from_config
// with the built-in classes (calculator, subprocess; nothing is run). The input is the YAML text.
// Silent accept: an accepted file whose tools have an empty or repeated name, or whose schemas do
// not round-trip through the OpenAI form the chat template receives.
#include "fuzz/fuzz_driver.hpp"

#include <rlflow/agent/tool_config.hpp>

namespace fuzz_tool_config {

using namespace rlflow;

std::vector<std::string> fuzz_seeds() {
  return {R"(tools:
  - class_name: calculator
    config: {type: native}
    tool_schema:
      type: function
      function:
        name: calculator
        description: Exact integer arithmetic
        parameters:
          type: object
          properties:
            expression: {type: string, description: "e.g. (12+3)*-45"}
          required: [expression]
)",
          R"(tools:
  - class_name: subprocess
    config:
      type: native
      command: [python3, -I, -]
      timeout_s: 5
      memory_mb: 512
      network: false
      max_output_bytes: 4096
      stdin_argument: code
    tool_schema: &schema
      type: function
      function: {name: python, description: Runs Python, parameters: {type: object, properties: {code: {type: string}}, required: [code]}}
  - class_name: calculator
    tool_schema:
      <<: *schema
      function: {name: calc}
)",
          "tools:\n", "tools: []\n"};
}

fuzz::outcome fuzz_one(std::string_view in) {
  static agent::ToolRegistry const registry = agent::ToolRegistry::builtin();
  auto const set = agent::tools_from_config(in, registry, "fuzz.yaml");
  bool silent = false;
  for (std::size_t i = 0; i < set.tools().size(); ++i) {
    auto const& s = set.tools()[i].schema;
    silent |= s.name.empty();
    for (std::size_t k = 0; k < i; ++k) silent |= set.tools()[k].schema.name == s.name;
    auto const back = agent::ToolSchema::from_openai(s.openai(), "round trip");
    silent |= back.name != s.name || back.description != s.description || agent::show_json(back.parameters) != agent::show_json(s.parameters);
  }
  return silent ? fuzz::outcome::silent_accept : fuzz::outcome::accepted;
}

}  // namespace fuzz_tool_config
RLFLOW_FUZZ_TARGET(tool_config)
