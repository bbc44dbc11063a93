// rlflow/detail/yaml.hpp: reads a YAML config document with yaml-cpp and flattens it into dotted
// keys (the entries TrainerConfig applies). What YAML 1.2 has and yaml-cpp reads works: nested
// block and flow maps, anchors and aliases, '<<' merge keys, multi-line scalars ('|', '>'), quoted
// strings, comments, flow and block lists, several documents separated by '---' (applied in order).
// What a config cannot hold (lists of maps, nested lists, keys that are not plain names) and what
// the parser cannot read raise rlflow::format_error "<file>:<line>: ...".
//
// yaml-cpp 0.7 is not safe on hostile text, so rlflow guards it (found by fuzz.config):
//  - YAML::LoadAll loops forever, allocating, when the parser stops advancing (a stray ',' at the
//    start of a document: jbeder/yaml-cpp#1319). rlflow drives YAML::Parser itself with its own
//    event handler and stops when a document starts where the previous one started.
//  - The parser recurses once per nesting level, so deep nesting exhausts the stack. Before
//    yaml-cpp sees the text, rlflow bounds its size, its indentation, the number of '[' / '{' and
//    the block indicators ('- ', '? ', ': ') nested on one line.
//  - Aliases share nodes, so a few lines can expand to billions of values ('billion laughs') or
//    refer to themselves. Flattening counts every node it visits, aliases expanded, and bounds the
//    map depth.
// Each limit raises rlflow::config_error naming the file, the line, the limit and the fix.
#pragma once
#include <cstddef>  // std::size_t
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>  // nlohmann::ordered_json (parse_yaml_json)
#include <rlflow/core/config.hpp>  // RLFLOW_DECL, RLFLOW_DEFINE_BODIES

#if !defined(__EMSCRIPTEN__)
#include <sstream>        // std::istringstream (YAML::Parser reads a stream)
#include <unordered_map>  // anchors

#if RLFLOW_DEFINE_BODIES  // only the bodies (impl/yaml.ipp) use yaml-cpp
#include <algorithm>           // std::all_of
#include <charconv>            // std::from_chars
#include <cstdlib>             // std::strtod
#include <limits>              // infinity, NaN
#include <yaml-cpp/eventhandler.h>  // YAML::EventHandler
#include <yaml-cpp/exceptions.h>    // YAML::Exception
#include <yaml-cpp/mark.h>          // YAML::Mark
#include <yaml-cpp/parser.h>        // YAML::Parser
#endif
#endif

#if RLFLOW_DEFINE_BODIES
#include <nlohmann/json.hpp>  // parse_yaml_json's result
#endif
#include <rlflow/core/error.hpp>  // format_error, config_error, msg

namespace rlflow::detail {

//! One leaf of a flattened YAML/JSON document: 'a.b.c' with its value as text.
struct flat_entry {
  std::string key;                 //!< dotted path
  std::string text;                //!< scalar text (unquoted), or "" for null / lists
  bool quoted = false;             //!< the scalar was quoted (so 'null' means the string "null")
  bool is_null = false;            //!< null, ~ or an empty value
  bool is_list = false;            //!< a list; the items are in 'items'
  std::vector<std::string> items;  //!< list items (unquoted)
  int line = 0;                    //!< 1-based source line (0 for JSON)
};

//! Largest config text read (a verl config is a few KB).
inline constexpr std::size_t yaml_max_bytes = std::size_t{1} << 20;
//! Deepest nesting a config document may have (verl's deepest key has 6 levels); indentation is
//! bounded at 2 * yaml_max_depth spaces, block indicators on one line at yaml_max_depth.
inline constexpr int yaml_max_depth = 64;
//! Most '[' / '{' in one document, counted everywhere (quotes and comments too, so no quoting
//! trick hides one from the count while yaml-cpp nests on it); a config holds a handful.
inline constexpr int yaml_max_flow = 256;
//! Most nodes flattening may visit, aliases expanded (rlflow has a few hundred keys).
inline constexpr std::size_t yaml_max_nodes = 100000;

//! Rejects, before parsing, what YAML forbids (a tab in indentation: format_error) and what could
//! make yaml-cpp's recursive parser run out of stack or time (config_error).
RLFLOW_DECL void yaml_precheck(std::string_view text, std::string_view source);

#if defined(__EMSCRIPTEN__)
//! The planner page (WebAssembly) takes key=value text only: there is no yaml-cpp in that build.
RLFLOW_DECL std::vector<flat_entry> parse_yaml_flat(std::string_view text, std::string_view source = "<yaml>");
#else

//! Parses a YAML config document (or several, separated by '---', applied in order) into dotted
//! entries with their 1-based lines. Throws format_error "<source>:<line>: <what>" on bad input
//! and config_error "<source>:<line>: ... limit ..." past one of the bounds above.
RLFLOW_DECL std::vector<flat_entry> parse_yaml_flat(std::string_view text, std::string_view source = "<yaml>");

#endif  // __EMSCRIPTEN__

//! Parses one YAML document into JSON, for files whose shape a dotted-key config cannot hold
//! (lists of maps, e.g. a tool configuration): maps keep their key order, aliases are expanded,
//! '<<' merge keys applied, and plain scalars typed by YAML 1.2's core schema (null, bool,
//! 64-bit integer, float, else string; quoted scalars are strings). The same guards and errors as
//! parse_yaml_flat; an empty document is null.
RLFLOW_DECL nlohmann::ordered_json parse_yaml_json(std::string_view text, std::string_view source = "<yaml>");

}  // namespace rlflow::detail

#if RLFLOW_DEFINE_BODIES
#include <rlflow/detail/impl/yaml.ipp>
#endif
