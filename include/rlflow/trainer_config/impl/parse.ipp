// rlflow/trainer_config/impl/parse.ipp: the bodies of the non-template functions declared in rlflow/trainer_config/parse.hpp (see RLFLOW_DECL in rlflow/core/config.hpp).
#pragma once

namespace rlflow {

namespace detail {

RLFLOW_DECL std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t const up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0u : 1u)});
      diag = up;
    }
  }
  return row[b.size()];
}

RLFLOW_DECL std::string closest(std::string_view word, std::vector<std::string_view> const& candidates) {
  std::string_view best;
  std::size_t best_score = static_cast<std::size_t>(-1);
  for (auto c : candidates) {
    std::size_t score = edit_distance(word, c) * 4;
    if (c.size() > word.size() && c.substr(c.size() - word.size()) == word && c[c.size() - word.size() - 1] == '.')
      score = 0;
    else {
      // the last segments match closely: prefer it over keys that only share the prefix
      auto const last = [](std::string_view s) { auto p = s.rfind('.'); return p == s.npos ? s : s.substr(p + 1); };
      if (last(word) == last(c)) score = std::min(score, 1 + edit_distance(word, c));
    }
    if (score < best_score) {
      best_score = score;
      best = c;
    }
  }
  return std::string(best);
}

RLFLOW_DECL std::vector<std::string_view> key_names() {
  std::vector<std::string_view> out;
  for (auto const& k : config_keys) out.push_back(k.name);
  return out;
}

RLFLOW_DECL std::vector<std::string_view> split_choices(std::string_view choices) {
  std::vector<std::string_view> out;
  while (!choices.empty()) {
    auto const bar = choices.find('|');
    out.push_back(choices.substr(0, bar));
    if (bar == std::string_view::npos) break;
    choices.remove_prefix(bar + 1);
  }
  return out;
}

RLFLOW_DECL key_info const* find_key(std::string_view name) {
  for (auto const& k : config_keys)
    if (k.name == name) return &k;
  return nullptr;
}

RLFLOW_DECL std::string key_suggestion(std::string_view name) {
  auto const section = [](std::string_view s) { auto p = s.rfind('.'); return p == s.npos ? std::string_view{} : s.substr(0, p); };
  auto const leaf = [](std::string_view s) { auto p = s.rfind('.'); return p == s.npos ? s : s.substr(p + 1); };
  std::vector<std::string_view> candidates = key_names();
  for (auto const& r : verl_key_rules) candidates.push_back(r.key);
  // a bare or partial key ('train_batch_size', 'rollout.n'): the first key that ends with it (rlflow's
  // table before verl's other keys; the actor's before the critic's)
  for (auto c : candidates)
    if (c.size() > name.size() && c.substr(c.size() - name.size()) == name && c[c.size() - name.size() - 1] == '.')
      return std::string(c);
  // a typo in the last part: the same section, at most a quarter of the letters changed (1 to 3)
  std::size_t const limit = std::clamp<std::size_t>(leaf(name).size() / 4, 1, 3);
  std::string_view best;
  std::size_t best_d = limit + 1;
  for (auto c : candidates) {
    if (section(c) != section(name)) continue;
    std::size_t const d = edit_distance(leaf(name), leaf(c));
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return std::string(best);
}

RLFLOW_DECL key_info const& require_key(std::string_view name, std::string_view where) {
  if (auto const* k = find_key(name)) return *k;
  std::string const pre = where.empty() ? "" : std::string(where) + ": ";
  if (name.size() > 200)  // no key is that long; the edit distance would cost O(length) per key
    throw config_error(msg(pre, "unknown config key '", std::string(name.substr(0, 80)), "...' (", name.size(),
                           " characters; no key is longer than 200); run with --help to list every key"));
  if (find_verl_key(name) != nullptr)
    throw config_error(msg(pre, "'", std::string(name), "' is one of verl's keys that rlflow accepts on the command line "
                           "and in files but does not store; it has no value to read (docs/configuration.md lists them)"));
  std::string const hint = key_suggestion(name);
  if (hint.empty()) {
    auto const dot = name.rfind('.');
    throw config_error(msg(pre, "unknown config key '", std::string(name), "'",
                           dot == std::string_view::npos ? std::string()
                                                         : msg(" (no key of section '", std::string(name.substr(0, dot)),
                                                               "' is close)"),
                           "; run with --help to list every key"));
  }
  throw config_error(msg(pre, "unknown config key '", std::string(name), "'; did you mean '", hint,
                         "'? (run with --help to list every key)"));
}

RLFLOW_DECL std::string format_number(double v) {
  std::ostringstream os;
  os.precision(15);
  os << v;
  return os.str();
}

RLFLOW_DECL std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& ch : out) ch = static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
  return out;
}

RLFLOW_DECL bool is_null_text(std::string_view v) {
  auto const l = lower(v);
  return l == "null" || l == "none" || l == "~";
}

RLFLOW_DECL std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

RLFLOW_DECL std::int64_t parse_integer(key_info const& k, std::string_view v, std::string_view where) {
  v = trim(v);
  if (!v.empty() && v.front() == '+') v.remove_prefix(1);
  std::int64_t out = 0;
  auto const [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || ptr != v.data() + v.size() || v.empty())
    throw config_error(msg(where, "key '", k.name, "' expects an integer, got '", std::string(v), "'; write e.g. ",
                           k.name, "=8"));
  return out;
}

RLFLOW_DECL double parse_number(key_info const& k, std::string_view v, std::string_view where) {
  std::string s(trim(v));
  char* end = nullptr;
  double const out = s.empty() ? 0.0 : std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(out))
    throw config_error(msg(where, "key '", k.name, "' expects a finite number, got '", s, "'; write e.g. ", k.name,
                           "=0.5"));
  return out;
}

RLFLOW_DECL bool parse_boolean(key_info const& k, std::string_view v, std::string_view where) {
  auto const l = lower(trim(v));
  if (l == "true" || l == "yes" || l == "on" || l == "1") return true;
  if (l == "false" || l == "no" || l == "off" || l == "0") return false;
  throw config_error(msg(where, "key '", k.name, "' expects true or false, got '", std::string(v), "'; write ",
                         k.name, "=true or ", k.name, "=false"));
}

RLFLOW_DECL std::vector<std::string> parse_list_text(std::string_view v) {
  v = trim(v);
  if (v.size() >= 2 && v.front() == '[' && v.back() == ']') v = v.substr(1, v.size() - 2);
  std::vector<std::string> out;
  while (true) {
    auto const comma = v.find(',');
    auto item = trim(v.substr(0, comma));
    if (item.size() >= 2 && (item.front() == '\'' || item.front() == '"') && item.back() == item.front())
      item = item.substr(1, item.size() - 2);
    if (!item.empty()) out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
  }
  return out;
}

RLFLOW_DECL void check_choice(key_info const& k, std::string_view v, std::string_view where) {
  if (one_of(v, k.choices)) return;
  std::vector<std::string_view> options;
  for (auto c : split_choices(k.choices))
    if (c != "null") options.push_back(c);
  std::string list;
  for (auto c : options) list += (list.empty() ? "" : ", ") + std::string(c);
  throw config_error(msg(where, "key '", k.name, "' = '", std::string(v), "' is not one of: ", list,
                         v.size() > 200 ? std::string() : msg("; did you mean '", closest(v, options), "'?")));
}

RLFLOW_DECL void store(TrainerConfig& cfg, key_info const& k, std::string_view text, bool quoted, bool is_null,
                  std::vector<std::string> const* list_items, std::string_view where) {
  void* p = k.ref(cfg);
  bool const null_value = is_null || (!quoted && is_null_text(text));
  auto const need_not_null = [&] {
    if (null_value)
      throw config_error(msg(where, "key '", k.name, "' cannot be null (it is a ", kind_name(k.kind),
                             "); give a value, e.g. the default"));
  };
  if (list_items != nullptr && k.kind != key_kind::list && k.kind != key_kind::number_pair)
    throw config_error(msg(where, "key '", k.name, "' expects a ", kind_name(k.kind), ", got a list"));
  switch (k.kind) {
    case key_kind::integer:
      need_not_null();
      *static_cast<std::int64_t*>(p) = parse_integer(k, text, where);
      break;
    case key_kind::number:
      need_not_null();
      *static_cast<double*>(p) = parse_number(k, text, where);
      break;
    case key_kind::boolean:
      need_not_null();
      *static_cast<bool*>(p) = parse_boolean(k, text, where);
      break;
    case key_kind::null_integer:
      *static_cast<nullable<std::int64_t>*>(p) =
          null_value ? nullable<std::int64_t>{} : nullable<std::int64_t>{parse_integer(k, text, where)};
      break;
    case key_kind::null_number:
      *static_cast<nullable<double>*>(p) =
          null_value ? nullable<double>{} : nullable<double>{parse_number(k, text, where)};
      break;
    case key_kind::null_boolean:
      *static_cast<nullable<bool>*>(p) = null_value ? nullable<bool>{} : nullable<bool>{parse_boolean(k, text, where)};
      break;
    case key_kind::string: {
      std::string_view v = null_value ? std::string_view{} : text;
      if (!quoted && v.size() >= 2 && (v.front() == '\'' || v.front() == '"') && v.back() == v.front())
        v = v.substr(1, v.size() - 2);
      check_choice(k, v, where);
      if (v.size() > 255)
        throw config_error(msg(where, "key '", k.name, "' value has ", v.size(), " characters; at most 255 fit"));
      static_cast<config_string*>(p)->assign(v);
      break;
    }
    case key_kind::list: {
      std::vector<std::string> items = list_items ? *list_items : null_value ? std::vector<std::string>{}
                                                                             : parse_list_text(text);
      std::string joined;
      for (auto const& it : items) {
        check_choice(k, it, where);
        joined += (joined.empty() ? "" : ",") + it;
      }
      if (joined.size() > 255) throw config_error(msg(where, "key '", k.name, "' list is too long (255 characters)"));
      static_cast<string_list*>(p)->joined.assign(joined);
      break;
    }
    case key_kind::number_pair: {
      need_not_null();
      std::vector<std::string> items = list_items ? *list_items : parse_list_text(text);
      if (items.size() != 2)
        throw config_error(msg(where, "key '", k.name, "' expects two numbers, e.g. ", k.name, "=[0.9,0.999]; got ",
                               items.size(), " values"));
      auto& arr = *static_cast<std::array<double, 2>*>(p);
      arr = {parse_number(k, items[0], where), parse_number(k, items[1], where)};
      break;
    }
  }
}

RLFLOW_DECL std::string value_text(TrainerConfig const& cfg, key_info const& k) {
  void* p = k.ref(const_cast<TrainerConfig&>(cfg));
  switch (k.kind) {
    case key_kind::integer: return std::to_string(*static_cast<std::int64_t*>(p));
    case key_kind::number: return format_number(*static_cast<double*>(p));
    case key_kind::boolean: return *static_cast<bool*>(p) ? "true" : "false";
    case key_kind::null_integer: {
      auto const& v = *static_cast<nullable<std::int64_t>*>(p);
      return v.has_value ? std::to_string(v.stored) : "null";
    }
    case key_kind::null_number: {
      auto const& v = *static_cast<nullable<double>*>(p);
      return v.has_value ? format_number(v.stored) : "null";
    }
    case key_kind::null_boolean: {
      auto const& v = *static_cast<nullable<bool>*>(p);
      return v.has_value ? (v.stored ? "true" : "false") : "null";
    }
    case key_kind::string: {
      auto const& v = *static_cast<config_string*>(p);
      return v.empty() && one_of("", k.choices) && !k.choices.empty() ? "null" : v.str();
    }
    case key_kind::list: {
      std::string out = "[";
      for (auto const& it : static_cast<string_list*>(p)->items()) out += (out.size() > 1 ? ", " : "") + it;
      return out + "]";
    }
    case key_kind::number_pair: {
      auto const& a = *static_cast<std::array<double, 2>*>(p);
      std::string out = "[";  // appended piecewise: g++ 12 -O3 warns (-Wrestrict) on "[" + std::string
      out += format_number(a[0]);
      out += ", ";
      out += format_number(a[1]);
      out += "]";
      return out;
    }
  }
  return "";
}

RLFLOW_DECL nlohmann::json value_json(TrainerConfig const& cfg, key_info const& k) {
  void* p = k.ref(const_cast<TrainerConfig&>(cfg));
  switch (k.kind) {
    case key_kind::integer: return *static_cast<std::int64_t*>(p);
    case key_kind::number: return *static_cast<double*>(p);
    case key_kind::boolean: return *static_cast<bool*>(p);
    case key_kind::null_integer: {
      auto const& v = *static_cast<nullable<std::int64_t>*>(p);
      return v.has_value ? nlohmann::json(v.stored) : nlohmann::json(nullptr);
    }
    case key_kind::null_number: {
      auto const& v = *static_cast<nullable<double>*>(p);
      return v.has_value ? nlohmann::json(v.stored) : nlohmann::json(nullptr);
    }
    case key_kind::null_boolean: {
      auto const& v = *static_cast<nullable<bool>*>(p);
      return v.has_value ? nlohmann::json(v.stored) : nlohmann::json(nullptr);
    }
    case key_kind::string: {
      auto const& v = *static_cast<config_string*>(p);
      if (v.empty() && !k.choices.empty() && one_of("", k.choices)) return nullptr;
      return v.str();
    }
    case key_kind::list: return static_cast<string_list*>(p)->items();
    case key_kind::number_pair: {
      auto const& a = *static_cast<std::array<double, 2>*>(p);
      return nlohmann::json::array({a[0], a[1]});
    }
  }
  return nullptr;
}

RLFLOW_DECL void flatten_json(nlohmann::json const& j, std::string const& prefix, std::vector<flat_entry>& out,
                         std::string_view source, int depth) {
  if (depth > 16)  // the deepest key has 5 parts; a deeper document is not a config (and must not exhaust the stack)
    throw format_error(msg(source, ": config nesting deeper than 16 levels at '", prefix.substr(0, 200),
                           "...'; config keys have at most 5 parts"));
  if (!j.is_object())
    throw format_error(msg(source, ": expected a JSON object of config keys at '", prefix.empty() ? "<root>" : prefix,
                           "', got ", j.type_name()));
  for (auto it = j.begin(); it != j.end(); ++it) {
    std::string const key = prefix.empty() ? it.key() : prefix + "." + it.key();
    auto const& v = it.value();
    if (v.is_object()) {
      flatten_json(v, key, out, source, depth + 1);
      continue;
    }
    flat_entry e;
    e.key = key;
    if (v.is_null()) {
      e.is_null = true;
    } else if (v.is_array()) {
      e.is_list = true;
      for (auto const& item : v) {
        if (item.is_structured())
          throw format_error(msg(source, ": key '", key, "' holds a nested ", item.type_name(),
                                 " inside its list; list items must be plain values"));
        e.items.push_back(item.is_string() ? item.get<std::string>() : item.dump());
      }
    } else if (v.is_string()) {
      e.text = v.get<std::string>();
      e.quoted = true;
    } else {
      e.text = v.dump();
    }
    out.push_back(std::move(e));
  }
}

RLFLOW_DECL void apply_entries(TrainerConfig& cfg, std::vector<flat_entry> const& entries, std::string_view source) {
  for (auto const& e : entries) {
    std::string const where = e.line > 0 ? msg(source, ":", e.line, ": ") : msg(source, ": ");
    apply_key(cfg, e.key, e.text, e.quoted, e.is_null, e.is_list ? &e.items : nullptr, where);
  }
}

RLFLOW_DECL std::string read_text_file(std::string const& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw io_error(msg("rlflow config: '", path, "' is a directory, not a config file; pass a .yaml, .yml or .json file to --config"));
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec))
    throw io_error(msg("rlflow config: '", path, "' is not a regular file; pass a .yaml, .yml or .json file to --config"));
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw io_error(msg("rlflow config: cannot open '", path, "'; check the path given to --config"));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

RLFLOW_DECL std::string verl_value_text(std::string_view text, bool quoted, bool is_null, std::vector<std::string> const* items) {
  auto const one = [](std::string_view v, bool q) {
    v = trim(v);
    if (!q && v.size() >= 2 && (v.front() == '\'' || v.front() == '"') && v.back() == v.front()) v = v.substr(1, v.size() - 2);
    if (!q && is_null_text(v)) return std::string("null");
    std::string s(v);
    char* end = nullptr;
    double const x = s.empty() ? 0.0 : std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size() && std::isfinite(x)) return format_number(x);
    return lower(s);
  };
  if (is_null) return "null";
  std::vector<std::string> list;
  if (items != nullptr) list = *items;
  else if (!quoted && trim(text).substr(0, 1) == "[") list = parse_list_text(text);
  else return one(text, quoted);
  std::string out = "[";
  for (auto const& it : list) out += (out.size() > 1 ? ", " : "") + one(it, false);
  return out + "]";
}

RLFLOW_DECL void apply_key(TrainerConfig& cfg, std::string_view name, std::string_view text, bool quoted, bool is_null,
                           std::vector<std::string> const* list_items, std::string_view where) {
  if (auto const* k = find_key(name)) return store(cfg, *k, text, quoted, is_null, list_items, where);
  auto const* r = find_verl_key(name);
  if (r == nullptr) {
    require_key(name, where.size() >= 2 ? where.substr(0, where.size() - 2) : where);  // throws, with a suggestion
    return;
  }
  switch (r->use) {
    case verl_key_use::alias:
      return store(cfg, require_key(r->why), text, quoted, is_null, list_items, where);
    case verl_key_use::no_effect: {
      auto const row = static_cast<std::size_t>(r - verl_key_rules);
      cfg.verl_keys_without_effect[row / 64] |= std::uint64_t{1} << (row % 64);
      return;
    }
    case verl_key_use::rejected: {
      // verl's default means the feature is off: nothing to do
      if (verl_value_text(text, quoted, is_null, list_items) == verl_value_text(r->verl_default, false, false, nullptr)) return;
      throw config_error(msg(where, "verl key '", r->key, "' is not supported here: ", r->why, "; ", r->instead,
                             " (verl's default '", r->verl_default, "' is accepted)"));
    }
  }
}

RLFLOW_DECL std::vector<std::string> verl_key_notices(TrainerConfig const& cfg) {
  std::vector<std::string> out;
  for (std::size_t row = 0; row < verl_key_rule_count; ++row)
    if ((cfg.verl_keys_without_effect[row / 64] >> (row % 64)) & 1u)
      out.push_back(msg(verl_key_rules[row].key, " has no effect here: ", verl_key_rules[row].why));
  return out;
}

RLFLOW_DECL std::string verl_keys_markdown() {
  std::ostringstream os;
  os << "| verl key | rlflow |\n| --- | --- |\n";
  for (auto const& r : verl_key_rules) {
    os << "| `" << r.key << "` | ";
    switch (r.use) {
      case verl_key_use::alias: os << "same as `" << r.why << "`"; break;
      case verl_key_use::no_effect: os << "no effect (notice): " << r.why; break;
      case verl_key_use::rejected: os << "rejected unless `" << r.verl_default << "`: " << r.why << "; " << r.instead; break;
    }
    os << " |\n";
  }
  return os.str();
}

}  // namespace detail

RLFLOW_DECL void TrainerConfig::set(std::string_view key, std::string_view value) {
  detail::apply_key(*this, detail::trim(key), value, false, false, nullptr, "");
}

RLFLOW_DECL std::string TrainerConfig::get(std::string_view key) const {
  return detail::value_text(*this, detail::require_key(key));
}

RLFLOW_DECL void TrainerConfig::apply_overrides(std::vector<std::string> const& overrides) {
  for (auto const& o : overrides) {
    std::string_view s = o;
    if (s.substr(0, 2) == "++") s.remove_prefix(2);
    else if (s.substr(0, 1) == "+") s.remove_prefix(1);
    auto const eq = s.find('=');
    if (eq == std::string_view::npos || eq == 0)
      throw config_error(msg("override '", o, "' is not 'key=value'; write e.g. data.train_batch_size=1024"));
    set(s.substr(0, eq), s.substr(eq + 1));
  }
}

RLFLOW_DECL void TrainerConfig::apply_json(nlohmann::json const& j, std::string_view source) {
  std::vector<detail::flat_entry> entries;
  detail::flatten_json(j, "", entries, source);
  detail::apply_entries(*this, entries, source);
}

RLFLOW_DECL void TrainerConfig::apply_text(std::string_view text, std::string_view format, std::string_view source) {
  if (format == "json") {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (nlohmann::json::exception const& e) {  // parse_error, and out_of_range for numbers beyond a double
      throw format_error(msg(source, ": invalid JSON: ", e.what()));
    }
    apply_json(j, source);
  } else if (format == "yaml") {
    detail::apply_entries(*this, detail::parse_yaml_flat(text, source), source);
  } else {
    throw config_error(msg("rlflow config: unknown format '", std::string(format), "' for ", std::string(source),
                           "; use yaml or json (.yaml, .yml, .json)"));
  }
}

RLFLOW_DECL void TrainerConfig::apply_file(std::string const& path) {
  auto const dot = path.rfind('.');
  std::string const ext = dot == std::string::npos ? "" : detail::lower(path.substr(dot + 1));
  std::string const format = ext == "json" ? "json" : (ext == "yaml" || ext == "yml") ? "yaml" : ext;
  if (format != "json" && format != "yaml")
    throw config_error(msg("rlflow config: '", path, "' has extension '.", ext,
                           "'; config files must end in .yaml, .yml or .json"));
  apply_text(detail::read_text_file(path), format, path);
}

RLFLOW_DECL nlohmann::json TrainerConfig::to_json() const {
  nlohmann::json out = nlohmann::json::object();
  for (auto const& k : detail::config_keys) {
    nlohmann::json* node = &out;
    std::string_view name = k.name;
    while (true) {
      auto const dot = name.find('.');
      if (dot == std::string_view::npos) break;
      node = &(*node)[std::string(name.substr(0, dot))];
      name.remove_prefix(dot + 1);
    }
    (*node)[std::string(name)] = detail::value_json(*this, k);
  }
  return out;
}

RLFLOW_DECL TrainerConfig TrainerConfig::from_file(std::string const& path) {
  TrainerConfig cfg;
  cfg.apply_file(path);
  return cfg;
}

RLFLOW_DECL CommandLine parse_command_line(int argc, char const* const* argv, TrainerConfig const& defaults) {
  CommandLine cl;
  cl.config = defaults;
  for (int i = 1; i < argc; ++i) {
    std::string_view const a = argv[i];
    if (a == "--help" || a == "-h") {
      cl.help = true;
    } else if (a == "--json") {
      cl.json = true;
    } else if (a == "--config" || a == "-c") {
      if (i + 1 >= argc) throw config_error(msg("'", a, "' needs a file: --config path/to/config.yaml"));
      cl.config_files.emplace_back(argv[++i]);
    } else if (a.substr(0, 9) == "--config=") {
      cl.config_files.emplace_back(a.substr(9));
    } else if (a.find('=') != std::string_view::npos && a.substr(0, 2) != "--") {
      cl.overrides.emplace_back(a);
    } else {
      throw config_error(msg("unknown argument '", a,
                             "'; pass key=value overrides (e.g. data.train_batch_size=512), --config FILE, --json or "
                             "--help"));
    }
  }
  for (auto const& f : cl.config_files) cl.config.apply_file(f);
  cl.config.apply_overrides(cl.overrides);
  return cl;
}

RLFLOW_DECL TrainerConfig TrainerConfig::from_args(int argc, char const* const* argv, TrainerConfig const& defaults) {
  CommandLine cl = parse_command_line(argc, argv, defaults);
  if (cl.help)
    throw help_requested(msg("usage: ", argc > 0 && argv[0] ? argv[0] : "trainer", " [--config FILE] [key=value ...]\n\n",
                             config_help(defaults)));
  return std::move(cl.config);
}

RLFLOW_DECL TrainerConfig TrainerConfig::from_args(int argc, char const* const* argv) {
  return from_args(argc, argv, TrainerConfig{});
}

RLFLOW_DECL std::string interpolate(TrainerConfig const& cfg, std::string_view text) {
  std::string out;
  while (true) {
    auto const start = text.find("${");
    if (start == std::string_view::npos) break;
    auto const end = text.find('}', start);
    if (end == std::string_view::npos)
      throw config_error(msg("unterminated '${' in '", std::string(text), "'; close it with '}'"));
    out += text.substr(0, start);
    out += cfg.get(text.substr(start + 2, end - start - 2));
    text.remove_prefix(end + 1);
  }
  return out + std::string(text);
}

RLFLOW_DECL std::string config_reference_markdown() {
  TrainerConfig const defaults{};
  std::ostringstream os;
  os << "| key | default | type | choices | meaning |\n| --- | --- | --- | --- | --- |\n";
  for (auto const& k : detail::config_keys) {
    std::string choices(k.choices);
    for (auto& ch : choices)
      if (ch == '|') ch = ',';
    auto const v = detail::value_text(defaults, k);
    os << "| `" << k.name << "` | " << (v.empty() ? std::string("(empty)") : "`" + v + "`") << " | " << detail::kind_name(k.kind) << " | "
       << (choices.empty() ? "" : "`" + choices + "`") << " | " << k.help << " |\n";
  }
  return os.str();
}

namespace detail {

RLFLOW_DECL std::string_view unhonoured_note(std::string_view key) {
  for (auto const& u : trainer_unhonoured_keys)
    if (u.key == key) return u.instead;
  return {};
}

}  // namespace detail

RLFLOW_DECL std::string config_help(TrainerConfig const& defaults) {
  std::ostringstream os;
  os << "rlflow configuration keys (override with key=value; load files with --config FILE.{yaml,json}).\n"
        "Keys marked [not honoured] are accepted for verl compatibility but the Trainer does not act on them:\n"
        "it rejects a non-default value (or warns where ignoring it is harmless). Every other key is honoured.\n"
        "verl's other keys (FSDP, vLLM, profiler, ...) are accepted with a start-up notice or rejected with the\n"
        "rlflow equivalent; docs/configuration.md lists each.\n";
  for (auto const& k : detail::config_keys) {
    os << "  " << k.name << " = " << detail::value_text(defaults, k) << "  (" << detail::kind_name(k.kind);
    if (!k.choices.empty()) os << ": " << k.choices;
    os << ")\n      " << k.help << "\n";
    if (auto const note = detail::unhonoured_note(k.name); !note.empty()) os << "      [not honoured] " << note << "\n";
  }
  return os.str();
}

}  // namespace rlflow
