// rlflow/detail/json_text.hpp: bounds on JSON text read from files. nlohmann's parser
// is iterative, but dump(), the recursive walks that follow a parse (flattening, copying values
// into messages) and the value's own copy constructor recurse once per nesting level, so a
// hostile file such as "[[[[...]]]]" of a few megabytes would overflow the stack after a
// successful parse. json_nesting_depth measures the nesting of the text (strings and escapes
// skipped) in one pass without allocating, so a reader can refuse deep text before parsing it;
// json_int_in reads an integer field without a float-to-int conversion or a narrowing.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>
#include <rlflow/detail/json_util.hpp>  // json_preview
#include <rlflow/core/error.hpp>

namespace rlflow::detail {

//! The deepest nesting of '[' and '{' in JSON text (0 for a scalar), ignoring brackets inside
//! strings. Malformed text is measured as far as it goes (the parser reports the syntax error).
inline std::size_t json_nesting_depth(std::string_view text) {
  std::size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char const c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest) deepest = depth;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

//! Throws format_error "<who>: <where> nests JSON <d> levels deep; at most <limit> ..." when the
//! text is deeper than 'limit'.
inline void check_json_depth(std::string_view text, std::size_t limit, std::string const& who, std::string const& where) {
  if (auto const d = json_nesting_depth(text); d > limit)
    throw format_error(msg(who, ": ", where, " nests JSON ", d, " levels deep; at most ", limit,
                           " levels are accepted (a deeper document is damaged or hostile: reading it would exhaust the stack)"));
}

//! j[key] as an integer in [lo, hi]: a float, a string, or a value outside the range is a
//! config_error naming 'where' and the key (nlohmann's get<int>() would convert 1e300 with
//! undefined behaviour and narrow 2^32 + k to k).
inline std::int64_t json_int_in(nlohmann::json const& v, std::string const& key, std::int64_t lo, std::int64_t hi,
                                std::string const& who, std::string const& where) {
  auto fail = [&](std::string const& what) {
    throw config_error(msg(who, ": ", where, ": ", key, " = ", json_preview(v), " ", what, "; use an integer in [", lo, ", ", hi, "]"));
  };
  if (!v.is_number_integer()) fail(msg("is ", v.type_name(), ", not an integer"));
  if (v.is_number_unsigned()) {
    auto const u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(hi) || static_cast<std::int64_t>(u) < lo) fail("is out of range");  // 0 parses as unsigned
    return static_cast<std::int64_t>(u);
  }
  auto const x = v.get<std::int64_t>();
  if (x < lo || x > hi) fail("is out of range");
  return x;
}

}  // namespace rlflow::detail
