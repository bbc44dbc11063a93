// rlflow/detail/impl/yaml.ipp: the bodies of the functions declared in rlflow/detail/yaml.hpp (see RLFLOW_DECL in
// rlflow/core/config.hpp), with yaml_tree and the flattening helpers that only they use.
#pragma once

namespace rlflow::detail {

RLFLOW_DECL void yaml_precheck(std::string_view text, std::string_view source) {
  if (text.size() > yaml_max_bytes) {
    int line = 1;
    for (std::size_t i = 0; i < yaml_max_bytes; ++i) line += text[i] == '\n';
    throw config_error(msg(source, ":", line, ": the config text is ", text.size(), " bytes, more than the limit of ",
                           yaml_max_bytes, " (1 MiB); a config is a few KB: pass the data files by path "
                           "(data.train_files) instead of inlining them"));
  }
  int line = 1, indent = 0, flow = 0, marks = 0;
  bool at_line_start = true;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char const c = text[i];
    if (c == '\n') {
      ++line;
      at_line_start = true;
      indent = 0;
      marks = 0;
      continue;
    }
    if (at_line_start) {
      if (c == ' ') {
        if (++indent > 2 * yaml_max_depth)
          throw config_error(msg(source, ":", line, ": indentation deeper than the limit of ", 2 * yaml_max_depth,
                                 " spaces (", yaml_max_depth, " levels); a config nests 6 levels: un-indent the line"));
        continue;
      }
      if (c == '\t') throw format_error(msg(source, ":", line, ": tab used for indentation; indent with spaces"));
      // compact nested block collections ("- - - x", "? ? x") nest without indentation
      if ((c == '-' || c == '?' || c == ':') && i + 1 < text.size() && text[i + 1] == ' ') {
        if (++marks > yaml_max_depth)
          throw config_error(msg(source, ":", line, ": more than the limit of ", yaml_max_depth,
                                 " nested block indicators ('- ', '? ', ': ') on one line; write one list item per line"));
        ++i;  // the space; more indicators may follow
        continue;
      }
      at_line_start = false;
    }
    if ((c == '[' || c == '{') && ++flow > yaml_max_flow)
      throw config_error(msg(source, ":", line, ": more than the limit of ", yaml_max_flow,
                             " '[' or '{' in one config file; a config holds a few flow lists: write maps as "
                             "indented blocks"));
  }
}

#if defined(__EMSCRIPTEN__)
//! The planner page (WebAssembly) takes key=value text only: there is no yaml-cpp in that build.
RLFLOW_DECL std::vector<flat_entry> parse_yaml_flat(std::string_view text, std::string_view source) {
  yaml_precheck(text, source);
  throw format_error(msg(source, ": YAML config files are not read in the WebAssembly planner; use key=value lines"));
}
RLFLOW_DECL nlohmann::ordered_json parse_yaml_json(std::string_view text, std::string_view source) {
  yaml_precheck(text, source);
  throw format_error(msg(source, ": YAML files are not read in the WebAssembly planner"));
}
#else

//! The nodes of a YAML stream as yaml-cpp's parser reports them. An alias is the index of the
//! anchored node (not a copy), so the tree stays as small as the text; it may even be cyclic
//! ('&a [*a]'): flattening bounds the walk.
class yaml_tree final : public YAML::EventHandler {
 public:
  enum class kind { null, scalar, seq, map };
  struct node {
    kind k = kind::null;
    std::string text;              //!< scalar text
    bool quoted = false;           //!< a quoted scalar or one tagged !!str
    int line = 0;                  //!< 1-based
    int pos = -1;                  //!< character offset of the scalar (its anchor or tag first)
    std::vector<std::size_t> kids; //!< seq: items; map: key, value, key, value, ...
  };
  std::vector<node> nodes;
  std::vector<std::size_t> roots;  //!< one per document
  int doc_start = -1;              //!< character offset where the last document started

 private:
  std::vector<std::size_t> open_;                          // collections being filled
  std::unordered_map<YAML::anchor_t, std::size_t> anchors_;  // per document

  static int line_of(YAML::Mark const& m) { return m.line >= 0 ? m.line + 1 : 0; }
  void add(std::size_t i) {
    if (open_.empty()) roots.push_back(i);
    else nodes[open_.back()].kids.push_back(i);
  }
  std::size_t make(kind k, YAML::Mark const& m, YAML::anchor_t anchor) {
    nodes.push_back(node{k, {}, false, line_of(m), -1, {}});
    std::size_t const i = nodes.size() - 1;
    if (anchor != YAML::NullAnchor) anchors_[anchor] = i;
    add(i);
    return i;
  }

 public:
  void OnDocumentStart(YAML::Mark const& m) override {
    doc_start = m.pos;
    anchors_.clear();
    open_.clear();
  }
  void OnDocumentEnd() override {}
  void OnNull(YAML::Mark const& m, YAML::anchor_t anchor) override { make(kind::null, m, anchor); }
  void OnAlias(YAML::Mark const& m, YAML::anchor_t anchor) override {
    auto const it = anchors_.find(anchor);
    if (it == anchors_.end()) {  // yaml-cpp reports an undefined anchor itself; kept for safety
      make(kind::null, m, YAML::NullAnchor);
      return;
    }
    add(it->second);
  }
  void OnScalar(YAML::Mark const& m, std::string const& tag, YAML::anchor_t anchor, std::string const& value) override {
    std::size_t const i = make(kind::scalar, m, anchor);
    nodes[i].text = value;
    nodes[i].pos = m.pos;
    // yaml-cpp tags quoted scalars with the non-specific tag '!', plain ones with '?'
    nodes[i].quoted = tag == "!" || tag == "tag:yaml.org,2002:str";
  }
  void OnSequenceStart(YAML::Mark const& m, std::string const&, YAML::anchor_t anchor, YAML::EmitterStyle::value) override {
    open_.push_back(make(kind::seq, m, anchor));
  }
  void OnSequenceEnd() override {
    if (!open_.empty()) open_.pop_back();
  }
  void OnMapStart(YAML::Mark const& m, std::string const&, YAML::anchor_t anchor, YAML::EmitterStyle::value) override {
    open_.push_back(make(kind::map, m, anchor));
  }
  void OnMapEnd() override {
    if (!open_.empty()) open_.pop_back();
  }
};

//! Rejects a quoted scalar whose closing quote never comes. yaml-cpp reports end of input inside
//! a quoted scalar only on the quote's own line: once it has read a line break it folds every
//! following line into the scalar and ends it at end of input, so 'b: "x' would swallow the rest
//! of the file (later keys silently keep their defaults). Each quoted scalar yaml-cpp reported is
//! scanned from its opening quote ("...": backslash escapes; '...': '' escapes).
inline void yaml_check_quotes(yaml_tree const& t, std::string_view text, std::string_view source) {
  for (auto const& n : t.nodes) {
    if (n.k != yaml_tree::kind::scalar || n.pos < 0) continue;
    std::size_t i = static_cast<std::size_t>(n.pos);
    while (i < text.size() && (text[i] == '&' || text[i] == '!')) {  // anchor or tag before the scalar
      while (i < text.size() && text[i] != ' ' && text[i] != '\n') ++i;
      while (i < text.size() && text[i] == ' ') ++i;
    }
    if (i >= text.size() || (text[i] != '"' && text[i] != '\'')) continue;  // a plain or block scalar
    char const q = text[i];
    bool closed = false;
    for (std::size_t j = i + 1; j < text.size() && !closed; ++j) {
      if (q == '"' && text[j] == '\\') ++j;
      else if (q == '\'' && text[j] == '\'' && j + 1 < text.size() && text[j + 1] == '\'') ++j;
      else closed = text[j] == q;
    }
    if (!closed)
      throw format_error(msg(source, ":", n.line, ": invalid YAML: unterminated ", q == '"' ? "double" : "single",
                             " quote: the ", q, " opened here is never closed, so the rest of the file would be read as ",
                             "one string; close the quote"));
  }
}

//! A plain scalar YAML reads as null.
inline bool yaml_null_text(std::string_view s) { return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL"; }

//! Appends the leaves of map node 'm' under 'prefix' to 'out'. 'visited' counts every node the
//! walk reaches (aliases expanded); 'depth' is the map nesting (aliases included).
inline void yaml_flatten(yaml_tree const& t, std::size_t m, std::string const& prefix, std::vector<flat_entry>& out,
                         std::string_view source, int depth, std::size_t& visited) {
  auto const& map = t.nodes[m];
  if (depth > yaml_max_depth)
    throw config_error(msg(source, ":", map.line, ": maps nested deeper than the limit of ", yaml_max_depth,
                           " levels under '", prefix, "' (an alias inside its own anchor?); a config nests 6 levels: "
                           "remove the alias that refers to a map it is in"));
  auto count = [&](std::size_t n, int line) {
    visited += n;
    if (visited > yaml_max_nodes)
      throw config_error(msg(source, ":", line, ": the document expands to more than the limit of ", yaml_max_nodes,
                             " values (aliases of aliases?); a config has a few hundred: write the values out or "
                             "alias each section once"));
  };
  count(map.kids.size() / 2 + 1, map.line);
  // '<<' merge keys first (YAML's merge: the map's own keys win, so they are applied after; of
  // several merged maps the first listed wins, so they are applied last-to-first)
  for (int pass = 0; pass < 2; ++pass) {
    for (std::size_t i = 0; i + 1 < map.kids.size(); i += 2) {
      auto const& k = t.nodes[map.kids[i]];
      auto const& v = t.nodes[map.kids[i + 1]];
      bool const merge = k.k == yaml_tree::kind::scalar && !k.quoted && k.text == "<<";
      if (merge != (pass == 0)) continue;
      if (merge) {
        std::vector<std::size_t> sources;
        if (v.k == yaml_tree::kind::map) sources.push_back(map.kids[i + 1]);
        if (v.k == yaml_tree::kind::seq) sources.assign(v.kids.rbegin(), v.kids.rend());
        count(sources.size(), k.line);
        if (sources.empty() && v.k != yaml_tree::kind::seq)
          throw format_error(msg(source, ":", k.line, ": the merge key '<<' under '", prefix.empty() ? "<root>" : prefix,
                                 "' needs a map or a list of maps (e.g. '<<: *defaults')"));
        for (std::size_t const s : sources) {
          if (t.nodes[s].k != yaml_tree::kind::map)
            throw format_error(msg(source, ":", t.nodes[s].line, ": the merge key '<<' under '",
                                   prefix.empty() ? "<root>" : prefix, "' lists something that is not a map; merge maps only"));
          yaml_flatten(t, s, prefix, out, source, depth + 1, visited);
        }
        continue;
      }
      if (k.k != yaml_tree::kind::scalar)
        throw format_error(msg(source, ":", k.line, ": a key must be a plain name, not a list, map or null (under '",
                               prefix.empty() ? "<root>" : prefix, "')"));
      if (k.text.empty())
        throw format_error(msg(source, ":", k.line, ": empty key under '", prefix.empty() ? "<root>" : prefix, "'"));
      std::string const key = prefix.empty() ? k.text : prefix + "." + k.text;
      if (v.k == yaml_tree::kind::map) {
        yaml_flatten(t, map.kids[i + 1], key, out, source, depth + 1, visited);
        continue;
      }
      flat_entry e;
      e.key = key;
      e.line = k.line;
      if (v.k == yaml_tree::kind::null || (v.k == yaml_tree::kind::scalar && !v.quoted && yaml_null_text(v.text))) {
        e.is_null = true;
      } else if (v.k == yaml_tree::kind::scalar) {
        e.text = v.text;
        e.quoted = v.quoted;
      } else {  // a list
        e.is_list = true;
        count(v.kids.size(), v.line);
        for (std::size_t const c : v.kids) {
          auto const& item = t.nodes[c];
          if (item.k == yaml_tree::kind::seq || item.k == yaml_tree::kind::map)
            throw format_error(msg(source, ":", item.line, ": nested lists or maps inside '", key,
                                   "' are not supported; a config list holds plain values"));
          e.items.push_back(item.k == yaml_tree::kind::null ? std::string() : item.text);
        }
      }
      out.push_back(std::move(e));
    }
  }
}

//! The text of 1-based line 'line' of 'text' (for messages).
inline std::string yaml_line_text(std::string_view text, int line) {
  std::size_t pos = 0;
  for (int l = 1; l < line && pos < text.size(); ++l) {
    std::size_t const nl = text.find('\n', pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
  }
  std::size_t const end = text.find('\n', pos);
  std::string out(text.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos));
  if (out.size() > 60) {
    out.resize(57);
    out += "...";
  }
  return out;
}

//! Reads 'text' into 'tree' with the guards above (precheck, the stalled-parser stop, unterminated
//! quotes); format_error "<source>:<line>: ..." on bad input.
inline void yaml_read_tree(std::string_view text, std::string_view source, yaml_tree& tree) {
  yaml_precheck(text, source);
  std::istringstream in{std::string(text)};
  try {
    YAML::Parser parser(in);
    int last_start = -1;
    while (parser.HandleNextDocument(tree)) {
      if (tree.doc_start == last_start) {  // the parser stopped advancing (jbeder/yaml-cpp#1319)
        int line = 1;
        for (int i = 0; i < tree.doc_start && i < static_cast<int>(text.size()); ++i) line += text[static_cast<std::size_t>(i)] == '\n';
        throw format_error(msg(source, ":", line, ": invalid YAML: cannot read '", yaml_line_text(text, line),
                               "'; write 'key: value' lines"));
      }
      last_start = tree.doc_start;
    }
  } catch (YAML::Exception const& e) {
    yaml_check_quotes(tree, text, source);  // an unterminated quote is named where it opens, not at end of input
    throw format_error(msg(source, ":", e.mark.line >= 0 ? e.mark.line + 1 : 0, ": invalid YAML: ", e.msg));
  }
  yaml_check_quotes(tree, text, source);
}

//! Parses a YAML config document (or several, separated by '---', applied in order) into dotted
//! entries with their 1-based lines. Throws format_error "<source>:<line>: <what>" on bad input
//! and config_error "<source>:<line>: ... limit ..." past one of the bounds above.
RLFLOW_DECL std::vector<flat_entry> parse_yaml_flat(std::string_view text, std::string_view source) {
  yaml_tree tree;
  yaml_read_tree(text, source, tree);
  std::vector<flat_entry> out;
  std::size_t visited = 0;
  for (std::size_t const r : tree.roots) {
    auto const& d = tree.nodes[r];
    if (d.k == yaml_tree::kind::null) continue;  // an empty document
    if (d.k != yaml_tree::kind::map)
      throw format_error(msg(source, ":", d.line, ": expected 'key: value' lines (a YAML map), got ",
                             d.k == yaml_tree::kind::seq ? std::string("a list") : "'" + d.text + "'"));
    yaml_flatten(tree, r, "", out, source, 1, visited);
  }
  return out;
}

//! A plain scalar's value under YAML 1.2's core schema: null, bool, integer, float, else string.
inline nlohmann::ordered_json yaml_scalar_json(yaml_tree::node const& n) {
  if (n.k == yaml_tree::kind::null) return nullptr;
  std::string const& s = n.text;
  if (n.quoted) return s;
  if (yaml_null_text(s)) return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  std::size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0;
  bool const digits = i < s.size() && std::all_of(s.begin() + static_cast<std::ptrdiff_t>(i), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (digits) {
    std::int64_t v = 0;
    auto const r = std::from_chars(s.data() + (s[0] == '+'), s.data() + s.size(), v);
    if (r.ec == std::errc() && r.ptr == s.data() + s.size()) return v;
    return s;  // an integer too large for 64 bits stays text
  }
  if (s == ".inf" || s == ".Inf" || s == ".INF" || s == "+.inf") return std::numeric_limits<double>::infinity();
  if (s == "-.inf" || s == "-.Inf" || s == "-.INF") return -std::numeric_limits<double>::infinity();
  if (s == ".nan" || s == ".NaN" || s == ".NAN") return std::numeric_limits<double>::quiet_NaN();
  bool num = i < s.size(), dot = false, exp = false, any = false;
  for (std::size_t j = i; j < s.size() && num; ++j) {
    char const c = s[j];
    if (c >= '0' && c <= '9') any = true;
    else if (c == '.' && !dot && !exp) dot = true;
    else if ((c == 'e' || c == 'E') && any && !exp && j + 1 < s.size()) {
      exp = true;
      if (s[j + 1] == '-' || s[j + 1] == '+') ++j;
      any = false;
    } else num = false;
  }
  if (num && any && (dot || exp)) {
    char* end = nullptr;
    double const d = std::strtod(s.c_str(), &end);
    if (end == s.c_str() + s.size()) return d;
  }
  return s;
}

//! Node 'i' as JSON, aliases expanded ('path' names it in messages; merge keys applied).
inline nlohmann::ordered_json yaml_node_json(yaml_tree const& t, std::size_t i, std::string const& path, std::string_view source,
                                             int depth, std::size_t& visited) {
  auto const& n = t.nodes[i];
  if (++visited > yaml_max_nodes)
    throw config_error(msg(source, ":", n.line, ": the document expands to more than the limit of ", yaml_max_nodes,
                           " values (aliases of aliases?); write the values out or alias each section once"));
  if (depth > yaml_max_depth)
    throw config_error(msg(source, ":", n.line, ": values nested deeper than the limit of ", yaml_max_depth, " levels at '", path,
                           "' (an alias inside its own anchor?); remove the alias that refers to a node it is in"));
  if (n.k == yaml_tree::kind::null || n.k == yaml_tree::kind::scalar) return yaml_scalar_json(n);
  if (n.k == yaml_tree::kind::seq) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (std::size_t c = 0; c < n.kids.size(); ++c)
      out.push_back(yaml_node_json(t, n.kids[c], path + "[" + std::to_string(c) + "]", source, depth + 1, visited));
    return out;
  }
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  // '<<' merge keys: the map's own keys win, and of several merged maps the first listed wins
  for (std::size_t c = 0; c + 1 < n.kids.size(); c += 2) {
    auto const& k = t.nodes[n.kids[c]];
    if (k.k == yaml_tree::kind::scalar && !k.quoted && k.text == "<<") continue;
    if (k.k != yaml_tree::kind::scalar)
      throw format_error(msg(source, ":", k.line, ": a key must be a plain name, not a list, map or null (under '",
                             path.empty() ? "<root>" : path, "')"));
    std::string const child = path.empty() ? k.text : path + "." + k.text;
    out[k.text] = yaml_node_json(t, n.kids[c + 1], child, source, depth + 1, visited);
  }
  for (std::size_t c = 0; c + 1 < n.kids.size(); c += 2) {
    auto const& k = t.nodes[n.kids[c]];
    if (!(k.k == yaml_tree::kind::scalar && !k.quoted && k.text == "<<")) continue;
    auto const merged = yaml_node_json(t, n.kids[c + 1], path, source, depth + 1, visited);
    std::vector<nlohmann::ordered_json const*> maps;
    if (merged.is_object()) maps.push_back(&merged);
    else if (merged.is_array())
      for (auto const& m : merged) maps.push_back(&m);
    for (auto const* m : maps) {
      if (!m->is_object())
        throw format_error(msg(source, ":", k.line, ": the merge key '<<' under '", path.empty() ? "<root>" : path,
                               "' needs a map or a list of maps (e.g. '<<: *defaults')"));
      for (auto it = m->begin(); it != m->end(); ++it)
        if (!out.contains(it.key())) out[it.key()] = it.value();
    }
    if (maps.empty())
      throw format_error(msg(source, ":", k.line, ": the merge key '<<' under '", path.empty() ? "<root>" : path,
                             "' needs a map or a list of maps (e.g. '<<: *defaults')"));
  }
  return out;
}

RLFLOW_DECL nlohmann::ordered_json parse_yaml_json(std::string_view text, std::string_view source) {
  yaml_tree tree;
  yaml_read_tree(text, source, tree);
  nlohmann::ordered_json out;
  bool seen = false;
  std::size_t visited = 0;
  for (std::size_t const r : tree.roots) {
    if (tree.nodes[r].k == yaml_tree::kind::null) continue;  // an empty document
    if (seen)
      throw format_error(msg(source, ":", tree.nodes[r].line, ": a second YAML document; this file holds one (remove the '---')"));
    seen = true;
    out = yaml_node_json(tree, r, "", source, 1, visited);
  }
  return out;
}

#endif  // __EMSCRIPTEN__

}  // namespace rlflow::detail
