// rlflow/core/impl/value.ipp: the bodies of rlflow/core/value.hpp's non-template functions
// (included by that header when RLFLOW_DEFINE_BODIES; see rlflow/core/config.hpp).
#pragma once

namespace rlflow {

RLFLOW_DECL std::string Dict::key_list() const {
  std::string s;
  for (auto const& it : items_) s += (s.empty() ? "'" : ", '") + it.first + "'";
  return s.empty() ? "(none)" : s;
}

RLFLOW_DECL Value const& Dict::get(std::string_view key) const {
  if (auto const* p = find(key)) return *p;
  throw key_error(msg("rlflow::Dict: no key '", key, "'; available keys: ", key_list()));
}

RLFLOW_DECL void Dict::set(std::string key, Value v) {
  if (auto* p = find(key)) { *p = std::move(v); return; }
  items_.emplace_back(std::move(key), std::move(v));
}

RLFLOW_DECL bool Dict::erase(std::string_view key) {
  for (auto it = items_.begin(); it != items_.end(); ++it)
    if (it->first == key) { items_.erase(it); return true; }
  return false;
}

RLFLOW_DECL std::vector<std::string> Dict::keys() const {
  std::vector<std::string> k;
  k.reserve(items_.size());
  for (auto const& it : items_) k.push_back(it.first);
  return k;
}

RLFLOW_DECL bool operator==(Dict const& a, Dict const& b) {
  if (a.size() != b.size()) return false;
  for (auto const& it : a.items_) {
    Value const* o = b.find(it.first);
    if (!o || !(it.second == *o)) return false;
  }
  return true;
}

RLFLOW_DECL bool operator==(Value const& a, Value const& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case ValueKind::none: return true;
    case ValueKind::boolean: return a.as_bool() == b.as_bool();
    case ValueKind::integer: return a.as_int() == b.as_int();
    case ValueKind::floating: {
      double x = a.as_double(), y = b.as_double();
      return x == y || (std::isnan(x) && std::isnan(y));
    }
    case ValueKind::string: return a.as_string() == b.as_string();
    case ValueKind::list: {
      auto const& l = a.as_list();
      auto const& r = b.as_list();
      if (l.size() != r.size()) return false;
      for (std::size_t i = 0; i < l.size(); ++i)
        if (!(l[i] == r[i])) return false;
      return true;
    }
    case ValueKind::dict: return a.as_dict() == b.as_dict();
  }
  return false;
}

RLFLOW_DECL std::string Value::repr() const {
  switch (kind()) {
    case ValueKind::none: return "None";
    case ValueKind::boolean: return std::get<bool>(v_) ? "True" : "False";
    case ValueKind::integer: return std::to_string(std::get<std::int64_t>(v_));
    case ValueKind::floating: return msg(std::get<double>(v_));
    case ValueKind::string: return "'" + std::get<std::string>(v_) + "'";
    case ValueKind::list: {
      std::string s = "[";
      auto const& l = std::get<List>(v_);
      for (std::size_t i = 0; i < l.size(); ++i) {
        if (i) s += ", ";
        if (i == 8 && l.size() > 10) { s += msg("... (", l.size(), " items)"); break; }
        s += l[i].repr();
      }
      return s + "]";
    }
    case ValueKind::dict: {
      std::string s = "{";
      bool first = true;
      for (auto const& it : std::get<Dict>(v_)) {
        s += (first ? "'" : ", '") + it.first + "': " + it.second.repr();
        first = false;
      }
      return s + "}";
    }
  }
  return "?";
}

}  // namespace rlflow
