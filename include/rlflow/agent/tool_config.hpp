// rlflow/agent/tool_config.hpp: the tool configuration file (actor_rollout_ref.rollout.multi_turn.
// tool_config_path), verl's YAML shape:
//   tools:
//     - class_name: calculator            # a class registered in a ToolRegistry
//       config: {type: native}            # the class's settings
//       tool_schema:                      # what the model sees (OpenAI function schema)
//         type: function
//         function:
//           name: calculator
//           description: Exact integer arithmetic
//           parameters: {type: object, properties: {expression: {type: string}}, required: [expression]}
// verl: verl/tools/utils/tool_registry.py (initialize_tools_from_config).
#pragma once
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <rlflow/agent/tools.hpp>
#include <rlflow/detail/yaml.hpp>

namespace rlflow::agent {

//! One entry of the file's 'tools' list.
struct ToolConfigEntry {
  std::string class_name;
  json config = json::object();
  ToolSchema schema;
  std::string where;  //!< "<file>: tools[i]" for messages
};

//! Most entries a tool configuration file may list.
inline constexpr std::size_t tool_config_max_tools = 1024;

//! Parses the text of a tool configuration file ('source' names it in errors). Errors name the
//! entry and the field: "<source>: tools[1].tool_schema.function.name: missing ...".
inline std::vector<ToolConfigEntry> parse_tool_config(std::string_view text, std::string const& source = "<tool config>") {
  json const doc = detail::parse_yaml_json(text, source);
  if (!doc.is_object() || !doc.contains("tools"))
    throw config_error(msg(source, ": a tool configuration holds a 'tools' list (tools: - class_name: ..., config: {...}, ",
                           "tool_schema: {type: function, function: {...}}), got ", doc.is_object() ? "no 'tools' key" : doc.type_name()));
  for (auto it = doc.begin(); it != doc.end(); ++it)
    if (it.key() != "tools") throw config_error(msg(source, ": unknown top-level key '", it.key(), "'; the file holds 'tools' only"));
  json const& list = doc["tools"];
  if (list.is_null()) return {};
  if (!list.is_array()) throw config_error(msg(source, ": tools: expected a list of entries, got a ", list.type_name()));
  if (list.size() > tool_config_max_tools)
    throw config_error(msg(source, ": tools lists ", list.size(), " entries, more than the limit of ", tool_config_max_tools));
  std::vector<ToolConfigEntry> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    ToolConfigEntry e;
    e.where = msg(source, ": tools[", i, "]");
    json const& t = list[i];
    if (!t.is_object()) throw config_error(msg(e.where, ": expected a map with class_name, config and tool_schema, got a ", t.type_name()));
    for (auto it = t.begin(); it != t.end(); ++it)
      if (it.key() != "class_name" && it.key() != "config" && it.key() != "tool_schema")
        throw config_error(msg(e.where, ".", it.key(), ": unknown key; an entry has class_name, config and tool_schema"));
    auto const c = t.find("class_name");
    if (c == t.end() || !c->is_string() || c->get_ref<std::string const&>().empty())
      throw config_error(msg(e.where, ".class_name: missing or not text; name a registered tool class (calculator, subprocess, ...)"));
    e.class_name = c->get<std::string>();
    if (auto const cf = t.find("config"); cf != t.end() && !cf->is_null()) {
      if (!cf->is_object()) throw config_error(msg(e.where, ".config: expected a map, got a ", cf->type_name()));
      e.config = *cf;
    }
    auto const s = t.find("tool_schema");
    if (s == t.end()) throw config_error(msg(e.where, ".tool_schema: missing; give {type: function, function: {name, description, parameters}}"));
    e.schema = ToolSchema::from_openai(*s, e.where + ".tool_schema");
    for (auto const& prev : out)
      if (prev.schema.name == e.schema.name)
        throw config_error(msg(e.where, ".tool_schema.function.name: '", e.schema.name, "' is also the name of ", prev.where,
                               "; give each tool its own name"));
    out.push_back(std::move(e));
  }
  return out;
}

//! The tools of a configuration text, each made by its class in 'registry'.
inline ToolSet tools_from_config(std::string_view text, ToolRegistry const& registry, std::string const& source = "<tool config>") {
  ToolSet set;
  for (auto& e : parse_tool_config(text, source)) set.add(registry.make(e.class_name, std::move(e.schema), e.config, e.where));
  return set;
}

//! The tools of the file at 'path' (multi_turn.tool_config_path).
inline ToolSet load_tool_config(std::filesystem::path const& path, ToolRegistry const& registry = ToolRegistry::builtin()) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw io_error(msg("actor_rollout_ref.rollout.multi_turn.tool_config_path = '", path.string(),
                       "' cannot be read; point it at a YAML file with a 'tools' list"));
  std::ostringstream ss;
  ss << in.rdbuf();
  return tools_from_config(ss.str(), registry, path.string());
}

}  // namespace rlflow::agent
