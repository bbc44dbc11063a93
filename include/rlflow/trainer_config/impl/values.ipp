// rlflow/trainer_config/impl/values.ipp: the bodies of the non-template functions declared in
// rlflow/trainer_config/values.hpp (see RLFLOW_DECL in rlflow/core/config.hpp).
#pragma once

namespace rlflow {

RLFLOW_DECL std::vector<std::string> string_list::items() const {
  std::vector<std::string> out;
  std::string_view v = joined.view();
  while (!v.empty()) {
    auto const comma = v.find(',');
    out.emplace_back(v.substr(0, comma));
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace rlflow
