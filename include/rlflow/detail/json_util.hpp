// rlflow/detail/json_util.hpp: json_preview, a bounded text of a JSON value for error messages.
// nlohmann's dump() recurses once per nesting level, so dumping a hostile, deeply nested value
// would overflow the stack; a preview prints scalars (cut to 80 characters) and only the type
// of arrays and objects.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace rlflow::detail {

template <class Json>
std::string json_preview(Json const& v) {
  if (v.is_structured()) return std::string(v.type_name()) + " of " + std::to_string(v.size()) + " entries";
  std::string s = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

}  // namespace rlflow::detail
