// rlflow/detail/yaml.hpp: reads a YAML config document with yaml-cpp and flattens it into dotted
// keys (the entries TrainerConfig applies). Everything YAML 1.2 has that yaml-cpp reads works
// (anchors and aliases, flow maps, multi-line scalars, several documents); what a config cannot
// hold (lists of maps, nested lists, keys that are not scalars) and what the parser cannot read
// raise rlflow::format_error naming the file and line. Guards before yaml-cpp sees the text: tab
// indentation, nesting deeper than yaml_max_depth, and alias expansion past yaml_max_entries.
#pragma once
#include <cstddef>  // std::size_t
#include <string>
#include <string_view>
#include <vector>

#if !defined(__EMSCRIPTEN__)
#include <yaml-cpp/yaml.h>  // YAML::LoadAll, YAML::Node, YAML::Exception
#endif

#include <rlflow/error.hpp>  // format_error, msg

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

//! Deepest map nesting a config document may have (verl's deepest key has 6 levels).
inline constexpr int yaml_max_depth = 64;
//! Most leaves a document may flatten to (aliases can multiply them; rlflow has a few hundred keys).
inline constexpr std::size_t yaml_max_entries = 100000;

//! Rejects, before parsing, what YAML forbids or what could make yaml-cpp's recursive parser
//! exhaust the stack (it recurses once per nesting level): a tab in indentation, indentation past
//! 2 * yaml_max_depth spaces, and more than yaml_max_flow '[' / '{' in the whole text (counted
//! everywhere, quotes and comments included, so no quoting trick hides one; a real config has a
//! handful).
inline constexpr int yaml_max_flow = 256;
inline void yaml_precheck(std::string_view text, std::string_view source) {
  // compact nested block sequences ("- - - x") nest without indentation: bound them per line
  for (std::size_t pos = 0, no = 1; pos < text.size(); ++no) {
    std::size_t const nl = text.find('\n', pos);
    std::string_view ln = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    int marks = 0;
    while (true) {
      while (!ln.empty() && ln.front() == ' ') ln.remove_prefix(1);
      if (ln.size() >= 2 && (ln[0] == '-' || ln[0] == '?' || ln[0] == ':') && ln[1] == ' ') {
        ln.remove_prefix(2);
        if (++marks > yaml_max_depth)
          throw format_error(msg(source, ":", no, ": more than ", yaml_max_depth, " nested block indicators on one line"));
      } else {
        break;
      }
    }
  }
  int line = 1, indent = 0, flow = 0;
  bool at_line_start = true;
  for (char const c : text) {
    if (c == '\n') {
      ++line;
      at_line_start = true;
      indent = 0;
      continue;
    }
    if (at_line_start) {
      if (c == ' ') {
        if (++indent > 2 * yaml_max_depth)
          throw format_error(msg(source, ":", line, ": indentation deeper than ", 2 * yaml_max_depth,
                                 " spaces; a config nests at most ", yaml_max_depth, " levels"));
        continue;
      }
      if (c == '\t') throw format_error(msg(source, ":", line, ": tab used for indentation; indent with spaces"));
      at_line_start = false;
    }
    if ((c == '[' || c == '{') && ++flow > yaml_max_flow)
      throw format_error(msg(source, ":", line, ": more than ", yaml_max_flow,
                             " '[' or '{' in one config file; a config holds a few flow lists at most"));
  }
}

#if defined(__EMSCRIPTEN__)
//! The planner page (WebAssembly) takes key=value text only: there is no yaml-cpp in that build.
inline std::vector<flat_entry> parse_yaml_flat(std::string_view text, std::string_view source = "<yaml>") {
  yaml_precheck(text, source);
  throw format_error(msg(source, ": YAML config files are not read in the WebAssembly planner; use key=value lines"));
}
#else
inline int yaml_line(YAML::Node const& n) { return n.Mark().line >= 0 ? n.Mark().line + 1 : 0; }

//! Appends the leaves of map 'm' under 'prefix' to 'out'.
inline void yaml_flatten(YAML::Node const& m, std::string const& prefix, std::vector<flat_entry>& out,
                         std::string_view source, int depth) {
  if (depth > yaml_max_depth)
    throw format_error(msg(source, ":", yaml_line(m), ": maps nested deeper than ", yaml_max_depth, " levels (through aliases?) under '",
                           prefix, "'"));
  for (auto const& kv : m) {
    YAML::Node const& k = kv.first;
    YAML::Node const& v = kv.second;
    if (!k.IsScalar())
      throw format_error(msg(source, ":", yaml_line(k), ": a key must be a plain name, not a list or map (under '",
                             prefix.empty() ? "<root>" : prefix, "')"));
    std::string const key = prefix.empty() ? k.Scalar() : prefix + "." + k.Scalar();
    if (k.Scalar().empty()) throw format_error(msg(source, ":", yaml_line(k), ": empty key under '", prefix, "'"));
    if (out.size() >= yaml_max_entries)
      throw format_error(msg(source, ": more than ", yaml_max_entries, " config values (aliases expanding?); a config has a few hundred"));
    flat_entry e;
    e.key = key;
    e.line = yaml_line(k);
    if (v.IsMap()) {
      yaml_flatten(v, key, out, source, depth + 1);
      continue;
    }
    if (!v.IsDefined() || v.IsNull()) {
      e.is_null = true;
    } else if (v.IsScalar()) {
      e.text = v.Scalar();
      e.quoted = v.Tag() == "!";  // yaml-cpp tags quoted scalars with the non-specific tag '!'
    } else if (v.IsSequence()) {
      e.is_list = true;
      for (auto const& item : v) {
        if (!item.IsScalar() && !item.IsNull())
          throw format_error(msg(source, ":", yaml_line(item), ": nested lists or maps inside '", key, "' are not supported"));
        e.items.push_back(item.IsNull() ? std::string() : item.Scalar());
      }
    }
    out.push_back(std::move(e));
  }
}

//! Parses a YAML config document (or several, separated by '---', applied in order) into dotted
//! entries with their 1-based lines. Throws format_error "<source>:<line>: <what>" on bad input.
inline std::vector<flat_entry> parse_yaml_flat(std::string_view text, std::string_view source = "<yaml>") {
  yaml_precheck(text, source);
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(std::string(text));
  } catch (YAML::Exception const& e) {
    throw format_error(msg(source, ":", e.mark.line >= 0 ? e.mark.line + 1 : 0, ": invalid YAML: ", e.msg));
  }
  std::vector<flat_entry> out;
  for (auto const& d : docs) {
    if (!d.IsDefined() || d.IsNull()) continue;  // an empty document
    if (!d.IsMap())
      throw format_error(msg(source, ":", yaml_line(d), ": expected 'key: value' lines (a YAML map), got ",
                             d.IsSequence() ? "a list" : "'" + (d.IsScalar() ? d.Scalar() : std::string()) + "'"));
    try {
      yaml_flatten(d, "", out, source, 1);
    } catch (YAML::Exception const& e) {
      throw format_error(msg(source, ":", e.mark.line >= 0 ? e.mark.line + 1 : 0, ": invalid YAML: ", e.msg));
    }
  }
  return out;
}

#endif  // __EMSCRIPTEN__

}  // namespace rlflow::detail
