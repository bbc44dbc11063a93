// rlflow/detail/yaml.hpp: a small YAML subset reader that flattens a config file into dotted keys.
// Supports block maps by indentation, scalars (plain, 'single' and "double" quoted), comments,
// flow lists '[a, b]', block lists '- item', null/~ and document markers. Does not support
// anchors, flow maps, multi-line scalars (| >), tabs for indentation or hydra 'defaults' lists;
// those raise rlflow::format_error naming the file and line.
#pragma once
#include <cstddef>      // std::size_t
#include <string>
#include <string_view>
#include <vector>

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

inline std::string_view yaml_trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

//! Removes a trailing '# comment' that is outside quotes (a '#' must follow a space or start the line).
inline std::string_view yaml_strip_comment(std::string_view s) {
  char quote = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    char const c = s[i];
    if (quote) {
      if (c == quote) quote = 0;
      continue;
    }
    if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '#' && (i == 0 || s[i - 1] == ' ' || s[i - 1] == '\t')) {
      return s.substr(0, i);
    }
  }
  return s;
}

//! Parses one scalar: strips quotes, recognises null. Sets text/quoted/is_null of 'e'.
inline void yaml_scalar(std::string_view raw, flat_entry& e, std::string_view source) {
  raw = yaml_trim(raw);
  if (raw.size() >= 2 && (raw.front() == '"' || raw.front() == '\'') && raw.back() == raw.front()) {
    std::string out;
    for (std::size_t i = 1; i + 1 < raw.size(); ++i) {
      char c = raw[i];
      if (raw.front() == '"' && c == '\\' && i + 2 < raw.size()) {
        char const n = raw[++i];
        c = n == 'n' ? '\n' : n == 't' ? '\t' : n;
      } else if (raw.front() == '\'' && c == '\'' && i + 2 < raw.size() && raw[i + 1] == '\'') {
        ++i;  // '' inside single quotes is one quote
      }
      out.push_back(c);
    }
    e.text = std::move(out);
    e.quoted = true;
    return;
  }
  if (!raw.empty() && (raw.front() == '"' || raw.front() == '\''))
    throw format_error(msg(source, ":", e.line, ": unterminated quoted string ", std::string(raw),
                           "; close the quote"));
  if (!raw.empty() && (raw.front() == '|' || raw.front() == '>'))
    throw format_error(msg(source, ":", e.line, ": multi-line scalars ('|' or '>') are not supported for key '", e.key,
                           "'; write the value on one line"));
  if (!raw.empty() && (raw.front() == '&' || raw.front() == '*' || raw.front() == '{'))
    throw format_error(msg(source, ":", e.line, ": anchors, aliases and flow maps are not supported (key '", e.key,
                           "'); write nested keys as an indented block"));
  if (raw.empty() || raw == "~" || raw == "null" || raw == "Null" || raw == "NULL") {
    e.is_null = true;
    e.text.clear();
    return;
  }
  e.text = std::string(raw);
}

//! Parses a flow list '[a, "b", 3]' into e.items.
inline void yaml_flow_list(std::string_view raw, flat_entry& e, std::string_view source) {
  raw = yaml_trim(raw);
  if (raw.size() < 2 || raw.back() != ']')
    throw format_error(msg(source, ":", e.line, ": flow list for key '", e.key, "' is not closed with ']'"));
  std::string_view body = raw.substr(1, raw.size() - 2);
  e.is_list = true;
  std::size_t start = 0;
  char quote = 0;
  auto push = [&](std::string_view piece) {
    piece = yaml_trim(piece);
    if (piece.empty()) return;
    flat_entry item;
    item.line = e.line;
    item.key = e.key;
    yaml_scalar(piece, item, source);
    e.items.push_back(item.text);
  };
  for (std::size_t i = 0; i < body.size(); ++i) {
    char const c = body[i];
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '[' || c == '{') {
      throw format_error(msg(source, ":", e.line, ": nested lists or maps inside '", e.key, "' are not supported"));
    } else if (c == ',') {
      push(body.substr(start, i - start));
      start = i + 1;
    }
  }
  push(body.substr(start));
}

//! Flattens a YAML document (the subset above) into dotted keys in file order. 'source' names
//! the file in error messages.
inline std::vector<flat_entry> parse_yaml_flat(std::string_view text, std::string_view source = "<yaml>") {
  std::vector<flat_entry> out;
  struct frame {
    int indent;
    std::string prefix;  // dotted prefix including the trailing '.'
  };
  std::vector<frame> stack{{-1, ""}};
  // A key with no value opens either a nested map or a block list; decided by the next line.
  std::string pending_key;
  int pending_indent = -1, pending_line = 0;
  flat_entry* open_list = nullptr;
  int open_list_indent = -1;

  auto flush_pending_as_null = [&] {
    if (pending_key.empty()) return;
    flat_entry e;
    e.key = pending_key;
    e.is_null = true;
    e.line = pending_line;
    out.push_back(e);
    pending_key.clear();
  };

  int line_no = 0;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t const nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() + 1 : nl + 1;
    ++line_no;
    std::string_view body = yaml_strip_comment(line);
    if (yaml_trim(body).empty()) continue;
    if (yaml_trim(body) == "---" || yaml_trim(body) == "...") continue;
    int indent = 0;
    while (indent < static_cast<int>(body.size()) && body[indent] == ' ') ++indent;
    if (body[indent] == '\t')
      throw format_error(msg(source, ":", line_no, ": tab used for indentation; indent with spaces"));
    std::string_view content = yaml_trim(body.substr(indent));

    if (content.front() == '-' && (content.size() == 1 || content[1] == ' ')) {  // block list item
      if (!pending_key.empty() && indent >= pending_indent) {
        flat_entry e;
        e.key = pending_key;
        e.is_list = true;
        e.line = pending_line;
        out.push_back(e);
        open_list = &out.back();
        open_list_indent = indent;
        pending_key.clear();
      }
      if (open_list == nullptr || indent != open_list_indent)
        throw format_error(msg(source, ":", line_no, ": list item '", std::string(content),
                               "' does not belong to a key; put it under 'key:'"));
      flat_entry item;
      item.key = open_list->key;
      item.line = line_no;
      std::string_view v = yaml_trim(content.substr(1));
      if (v.find(": ") != std::string_view::npos || (!v.empty() && v.back() == ':'))
        throw format_error(msg(source, ":", line_no, ": lists of maps are not supported (key '", open_list->key, "')"));
      yaml_scalar(v, item, source);
      open_list->items.push_back(item.text);
      continue;
    }
    open_list = nullptr;

    // key: value
    std::size_t colon = std::string_view::npos;
    {
      char quote = 0;
      for (std::size_t i = 0; i < content.size(); ++i) {
        char const c = content[i];
        if (quote) {
          if (c == quote) quote = 0;
        } else if (c == '"' || c == '\'') {
          quote = c;
        } else if (c == ':' && (i + 1 == content.size() || content[i + 1] == ' ')) {
          colon = i;
          break;
        }
      }
    }
    if (colon == std::string_view::npos)
      throw format_error(msg(source, ":", line_no, ": expected 'key: value', got '", std::string(content), "'"));
    std::string key(yaml_trim(content.substr(0, colon)));
    if (key.size() >= 2 && (key.front() == '"' || key.front() == '\'') && key.back() == key.front())
      key = key.substr(1, key.size() - 2);
    if (key.empty()) throw format_error(msg(source, ":", line_no, ": empty key"));

    if (!pending_key.empty()) {
      if (indent > pending_indent) {
        stack.push_back({indent, pending_key + "."});
        pending_key.clear();
      } else {
        flush_pending_as_null();
      }
    }
    while (stack.size() > 1 && indent < stack.back().indent) stack.pop_back();
    if (stack.size() == 1 && stack.back().indent < 0) stack.back().indent = indent;
    if (indent != stack.back().indent)
      throw format_error(msg(source, ":", line_no, ": inconsistent indentation (", indent, " spaces; expected ",
                             stack.back().indent, ") before '", key, "'"));

    std::string full = stack.back().prefix + key;
    std::string_view value = yaml_trim(content.substr(colon + 1));
    if (value.empty()) {
      pending_key = full;
      pending_indent = indent;
      pending_line = line_no;
      continue;
    }
    flat_entry e;
    e.key = full;
    e.line = line_no;
    if (value.front() == '[')
      yaml_flow_list(value, e, source);
    else
      yaml_scalar(value, e, source);
    out.push_back(std::move(e));
  }
  flush_pending_as_null();
  return out;
}

}  // namespace rlflow::detail
