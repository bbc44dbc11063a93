// rlflow/data/impl/data_files.ipp: the bodies of rlflow/data/data_files.hpp's non-template functions (included
// by that header when RLFLOW_DEFINE_BODIES; see rlflow/core/config.hpp).
#pragma once

namespace rlflow {

RLFLOW_DECL std::string ChatTemplate::render(nlohmann::json const& messages, std::string const& where) const {
  std::string out;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    auto const& m = messages[i];
    if (!m.is_object() || !m.contains("role") || !m.contains("content") || !m["role"].is_string() || !m["content"].is_string())
      throw format_error(msg("rlflow::ChatTemplate: ", where, "message ", i, " is ", detail::json_preview(m),
                             "; chat messages are {\"role\": string, \"content\": string}"));
    std::string const role = m["role"].get<std::string>();
    auto it = roles.find(role);
    if (it == roles.end())
      throw format_error(msg("rlflow::ChatTemplate: ", where, "message ", i, " has role '", role,
                             "', which the chat template does not know; add it to ChatTemplate::roles (known: system, user, assistant)"));
    out += it->second.prefix + m["content"].get<std::string>() + it->second.suffix;
  }
  return out + generation_prompt;
}

RLFLOW_DECL std::vector<std::string> parse_file_list(std::string_view v) {
  auto trim = [](std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    if (s.size() >= 2 && (s.front() == '\'' || s.front() == '"') && s.back() == s.front()) s = s.substr(1, s.size() - 2);
    return s;
  };
  v = trim(v);
  if (!v.empty() && v.front() == '[') {
    if (v.back() != ']') throw config_error(msg("rlflow: the file list '", v, "' opens '[' but does not close it"));
    v = v.substr(1, v.size() - 2);
  }
  std::vector<std::string> out;
  while (!v.empty()) {
    auto const c = v.find(',');
    auto const e = trim(v.substr(0, c));
    if (!e.empty()) out.emplace_back(e);
    if (c == std::string_view::npos) break;
    v.remove_prefix(c + 1);
  }
  return out;
}

namespace detail {
RLFLOW_DECL std::string parquet_hint(std::string const& path) {
  std::string stem = path.substr(0, path.size() - 8);
  return msg("rlflow: '", path, "' is a Parquet file, which rlflow does not read (Debian packages no Arrow C++); ",
             "convert it once to JSON lines with: python -c \"import pandas as pd; pd.read_parquet('", path,
             "').to_json('", stem, ".jsonl', orient='records', lines=True, force_ascii=False)\" and use ", stem, ".jsonl");
}
}  // namespace detail

RLFLOW_DECL std::vector<nlohmann::json> read_rows(std::filesystem::path const& path) {
  std::string const p = path.string();
  if (p.ends_with(".parquet")) throw config_error(detail::parquet_hint(p));
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw io_error(msg("rlflow: the data file '", p, "' is a folder; data.train_files / data.val_files list files (.jsonl or .json)"));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw io_error(msg("rlflow: cannot open the data file '", p, "'; check data.train_files / data.val_files"));
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw io_error(msg("rlflow: reading the data file '", p, "' failed"));
  std::string const text = ss.str();
  std::vector<nlohmann::json> rows;
  std::size_t const first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '[') {  // a JSON array
    detail::check_json_depth(text, max_data_row_depth + 1, "rlflow", p);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (nlohmann::json::exception const& e) {
      throw format_error(msg("rlflow: ", p, " starts like a JSON array but does not parse (", e.what(), ")"));
    }
    for (auto& r : j) rows.push_back(std::move(r));
    return rows;
  }
  std::size_t line = 0, pos = 0;
  while (pos < text.size()) {
    std::size_t e = text.find('\n', pos);
    if (e == std::string::npos) e = text.size();
    ++line;
    std::string_view l(text.data() + pos, e - pos);
    pos = e + 1;
    if (l.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    detail::check_json_depth(l, max_data_row_depth, "rlflow", msg(p, " line ", line));
    try {
      rows.push_back(nlohmann::json::parse(l));
    } catch (nlohmann::json::exception const& ex) {
      throw format_error(msg("rlflow: ", p, " line ", line, " is not valid JSON (", ex.what(),
                             "); JSON-lines files hold one JSON object per line"));
    }
  }
  return rows;
}

RLFLOW_DECL PromptItem prompt_item(nlohmann::json const& row, DataFileOptions const& o, std::string const& where) {
  if (!row.is_object()) throw format_error(msg("rlflow: ", where, " is not a JSON object"));
  PromptItem it;
  if (!row.contains(o.prompt_key))
    throw format_error(msg("rlflow: ", where, " has no field '", o.prompt_key, "' (data.prompt_key); its fields are ",
                           [&] {
                             std::string k;
                             for (auto i = row.begin(); i != row.end(); ++i) k += (k.empty() ? "" : ", ") + i.key();
                             return k;
                           }()));
  auto const& pr = row[o.prompt_key];
  if (pr.is_string()) it.prompt = pr.get<std::string>();
  else if (pr.is_array() && o.render_messages) {
    try {
      it.prompt = o.render_messages(pr);
    } catch (rlflow::error const& e) {
      throw format_error(msg("rlflow: ", where, ": the model's chat template failed on this prompt: ", e.what()));
    }
  } else if (pr.is_array()) {
    it.prompt = o.chat_template.render(pr, where + ": ");
  }
  else
    throw format_error(msg("rlflow: ", where, ": field '", o.prompt_key, "' is ", pr.type_name(),
                           "; it must be a string or a list of chat messages {role, content}"));
  it.data_source = "";
  if (row.contains("data_source")) {
    if (!row["data_source"].is_string()) throw format_error(msg("rlflow: ", where, ": data_source must be a string"));
    it.data_source = row["data_source"].get<std::string>();
  }
  if (row.contains("reward_model") && !row["reward_model"].is_null()) {
    auto const& rm = row["reward_model"];
    if (!rm.is_object()) throw format_error(msg("rlflow: ", where, ": reward_model must be an object {ground_truth, style}"));
    if (rm.contains("ground_truth")) {
      auto const& gt = rm["ground_truth"];
      it.ground_truth = gt.is_string() ? gt.get<std::string>() : gt.dump();  // numbers / lists as JSON text
    }
  }
  if (row.contains("extra_info") && !row["extra_info"].is_null()) it.extra_info = row["extra_info"].dump();
  return it;
}

RLFLOW_DECL LoadedPrompts load_prompt_files(std::vector<std::string> const& files, DataFileOptions const& o) {
  if (files.empty()) throw config_error("rlflow: no data files given; set data.train_files=path/to/train.jsonl");
  if (o.filter_overlong_prompts && o.max_prompt_length > 0 && !o.prompt_tokens)
    throw config_error("rlflow::load_prompt_files: filter_overlong_prompts needs DataFileOptions::prompt_tokens (a tokenizer)");
  LoadedPrompts out;
  for (auto const& f : files) {
    auto rows = read_rows(f);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      PromptItem it = prompt_item(rows[i], o, msg(f, " row ", i + 1));
      ++out.rows_read;
      if (o.filter_overlong_prompts && o.max_prompt_length > 0 && o.prompt_tokens(it.prompt) > o.max_prompt_length) {
        ++out.filtered_overlong;
        continue;
      }
      out.items.push_back(std::move(it));
    }
  }
  if (out.items.empty())
    throw config_error(msg("rlflow: the data files hold no usable rows (", out.rows_read, " read, ", out.filtered_overlong,
                           " longer than data.max_prompt_length=", o.max_prompt_length, ")"));
  return out;
}

}  // namespace rlflow
