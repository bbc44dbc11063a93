// rlflow/model/impl/hf_tokenizer.ipp: the bodies of rlflow/model/hf_tokenizer.hpp's functions:
// reading tokenizer.json and tokenizer_config.json, pre-tokenizer splits, BPE merges, decoding
// (included by that header when RLFLOW_DEFINE_BODIES; see rlflow/core/config.hpp).
#pragma once

namespace rlflow::model {

namespace hf_detail {

RLFLOW_DECL void split_piece(PreStep const& st, std::string_view text, Span piece, std::vector<Span>& out) {
  thread_local std::vector<std::pair<Span, bool>> parts;
  parts.clear();
  std::size_t last = piece.begin;
  auto on_match = [&](std::size_t s, std::size_t e) {
    if (s > last) parts.push_back({{last, s}, false});
    parts.push_back({{s, e}, true});
    last = e;
  };
  std::string_view const sub = text.substr(piece.begin, piece.end - piece.begin);
  if (st.use_literal) {
    if (!st.literal.empty())
      for (std::size_t p = sub.find(st.literal); p != std::string_view::npos; p = sub.find(st.literal, p + st.literal.size()))
        on_match(piece.begin + p, piece.begin + p + st.literal.size());
  } else {
    st.regex.for_each_match(sub, [&](std::size_t s, std::size_t e) { on_match(piece.begin + s, piece.begin + e); });
  }
  if (piece.end > last) parts.push_back({{last, piece.end}, false});
  if (st.invert)
    for (auto& p : parts) p.second = !p.second;
  switch (st.behavior) {
    case Behavior::removed:
      for (auto const& [sp, m] : parts)
        if (!m) out.push_back(sp);
      break;
    case Behavior::isolated:
      for (auto const& [sp, m] : parts) out.push_back(sp);
      break;
    case Behavior::merged_with_previous: {
      bool prev = false;
      std::size_t const first = out.size();
      for (auto const& [sp, m] : parts) {
        if (m && !prev && out.size() > first) out.back().end = sp.end;
        else out.push_back(sp);
        prev = m;
      }
      break;
    }
    case Behavior::merged_with_next: {
      bool prev = false;
      std::size_t const first = out.size();
      for (std::size_t k = parts.size(); k-- > 0;) {
        auto const& [sp, m] = parts[k];
        if (m && !prev && out.size() > first) out.back().begin = sp.begin;
        else out.push_back(sp);
        prev = m;
      }
      std::reverse(out.begin() + std::ptrdiff_t(first), out.end());
      break;
    }
    case Behavior::contiguous: {
      bool prev = false;
      std::size_t const first = out.size();
      for (auto const& [sp, m] : parts) {
        if (m == prev && out.size() > first) out.back().end = sp.end;
        else out.push_back(sp);
        prev = m;
      }
      break;
    }
  }
}

RLFLOW_DECL std::string read_file(std::filesystem::path const& f) {
  std::ifstream in(f, std::ios::binary);
  if (!in) throw io_error(msg(who, ": cannot open ", f.string()));
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) throw io_error(msg(who, ": reading ", f.string(), " failed"));
  return text;
}

RLFLOW_DECL nlohmann::json parse(std::string_view text, std::string const& where) {
  // tokenizer.json nests a few levels (pre_tokenizer Sequence inside post_processor Sequence...)
  rlflow::detail::check_json_depth(text, 16, who, where);
  try {
    return nlohmann::json::parse(text);
  } catch (nlohmann::json::exception const& e) {
    throw format_error(msg(who, ": ", where, " is not valid JSON (", e.what(), ")"));
  }
}

}  // namespace hf_detail

RLFLOW_DECL HFTokenizer HFTokenizer::from_json(std::string_view tokenizer_json, std::string_view config_json, std::string const& where,
                                                   std::string const& config_where) {
  HFTokenizer t;
  t.load_config(config_json, config_where);
  t.load(hf_detail::parse(tokenizer_json, where), where);
  return t;
}

RLFLOW_DECL HFTokenizer HFTokenizer::from_folder(std::filesystem::path const& dir) {
  auto const tj = dir / "tokenizer.json", tc = dir / "tokenizer_config.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(tj, ec))
    throw io_error(msg(hf_detail::who, ": ", dir.string(), " lacks tokenizer.json; set actor_rollout_ref.model.tokenizer_path to ",
                       "the folder holding it"));
  std::string const cfg = std::filesystem::is_regular_file(tc, ec) ? hf_detail::read_file(tc) : std::string();
  return from_json(hf_detail::read_file(tj), cfg, tj.string(), tc.string());
}

RLFLOW_DECL std::string HFTokenizer::decode(std::span<std::int32_t const> ids, bool skip_special) const {
  std::string out;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    std::int32_t const id = ids[i];
    if (id < 0 || std::size_t(id) >= bytes_.size() || !known_[std::size_t(id)])
      throw value_error(msg(hf_detail::who, "::decode: id ", id, " at position ", i, " is not a token of this vocabulary (",
                            "ids in [0, ", bytes_.size(), ")", id >= 0 && std::size_t(id) < bytes_.size() ? ", this one unassigned" : "",
                            ")"));
    if (skip_special && special_[std::size_t(id)]) continue;
    out += bytes_[std::size_t(id)];
  }
  return out;
}

RLFLOW_DECL std::int32_t HFTokenizer::token_id(std::string const& token) const {
  auto it = ids_.find(token);
  return it == ids_.end() ? -1 : it->second;
}

RLFLOW_DECL std::string HFTokenizer::type_of(nlohmann::json const& j, std::string const& where, std::string const& field) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    bad(where, field, msg("is ", rlflow::detail::json_preview(j), "; expected an object with a string 'type'"));
  return j["type"].get<std::string>();
}

RLFLOW_DECL bool HFTokenizer::flag(nlohmann::json const& j, char const* k, bool def, std::string const& where, std::string const& field) {
  if (!j.contains(k) || j[k].is_null()) return def;
  if (!j[k].is_boolean()) bad(where, field + "." + k, msg("is ", rlflow::detail::json_preview(j[k]), "; expected true or false"));
  return j[k].get<bool>();
}

RLFLOW_DECL void HFTokenizer::load_config(std::string_view text, std::string const& where) {
  if (text.empty()) return;
  auto const j = hf_detail::parse(text, where);
  if (!j.is_object()) bad(where, "the file", "is not a JSON object");
  auto token = [&](char const* k) -> std::string {
    if (!j.contains(k) || j[k].is_null()) return {};
    auto const& v = j[k];
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
    bad(where, k, msg("is ", rlflow::detail::json_preview(v), "; expected a string or an AddedToken object with a string 'content'"));
  };
  cfg_.eos_token = token("eos_token");
  cfg_.pad_token = token("pad_token");
  cfg_.bos_token = token("bos_token");
  for (auto [k, dst] : {std::pair{"add_bos_token", &cfg_.add_bos_token}, std::pair{"add_eos_token", &cfg_.add_eos_token}})
    if (j.contains(k) && !j[k].is_null()) {
      if (!j[k].is_boolean()) bad(where, k, msg("is ", rlflow::detail::json_preview(j[k]), "; expected true or false"));
      *dst = j[k].get<bool>();
    }
  if (j.contains("chat_template") && !j["chat_template"].is_null()) {
    auto const& c = j["chat_template"];
    if (c.is_string()) {
      cfg_.chat_template = c.get<std::string>();
    } else if (c.is_array()) {  // [{"name": ..., "template": ...}]: the one named "default"
      for (auto const& e : c)
        if (e.is_object() && e.value("name", nlohmann::json()) == "default" && e.contains("template") && e["template"].is_string())
          cfg_.chat_template = e["template"].get<std::string>();
      if (cfg_.chat_template.empty()) bad(where, "chat_template", "is a list without a {\"name\": \"default\", \"template\": string} entry");
    } else {
      bad(where, "chat_template", msg("is ", rlflow::detail::json_preview(c), "; expected a string"));
    }
  }
  if (j.contains("model_max_length") && !j["model_max_length"].is_null()) {
    auto const& v = j["model_max_length"];
    if (v.is_number_unsigned()) cfg_.model_max_length = std::int64_t(std::min<std::uint64_t>(v.get<std::uint64_t>(), std::uint64_t(cfg_.model_max_length)));
    else if (v.is_number_integer() && v.get<std::int64_t>() > 0) cfg_.model_max_length = v.get<std::int64_t>();
    else if (v.is_number_float() && v.get<double>() >= 1) cfg_.model_max_length = v.get<double>() >= 9.2e18 ? cfg_.model_max_length : std::int64_t(v.get<double>());
    else bad(where, "model_max_length", msg("is ", rlflow::detail::json_preview(v), "; expected a positive number"));
  }
}

RLFLOW_DECL void HFTokenizer::load(nlohmann::json const& j, std::string const& where) {
  using namespace bpe_detail;
  if (!j.is_object()) bad(where, "the file", "is not a JSON object");
  // model: byte-level BPE
  if (!j.contains("model")) bad(where, "model", "is missing; a tokenizer.json holds the model (type BPE)");
  auto const& m = j["model"];
  if (m.contains("type") && !(m["type"].is_string() && m["type"] == "BPE"))
    bad(where, "model.type", msg("is ", rlflow::detail::json_preview(m["type"]), "; rlflow reads BPE models only"));
  if (!m.is_object() || !m.contains("vocab") || !m["vocab"].is_object()) bad(where, "model.vocab", "is missing or not a {token: id} object");
  if (!m.contains("merges") || !m["merges"].is_array()) bad(where, "model.merges", "is missing or not a list");
  if (m.contains("dropout") && !m["dropout"].is_null() && !(m["dropout"].is_number() && m["dropout"].get<double>() == 0.0))
    bad(where, "model.dropout", msg("is ", rlflow::detail::json_preview(m["dropout"]), "; BPE dropout is for training, rlflow encodes without it (set null)"));
  for (char const* k : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (m.contains(k) && !m[k].is_null() && !(m[k].is_string() && m[k].get<std::string>().empty()))
      bad(where, msg("model.", k), msg("is ", rlflow::detail::json_preview(m[k]), "; rlflow's byte-level BPE has no subword affixes (set null)"));
  if (flag(m, "byte_fallback", false, where, "model")) bad(where, "model.byte_fallback", "is true; byte-level BPE never needs <0xNN> fallback tokens (set false)");
  ignore_merges_ = flag(m, "ignore_merges", false, where, "model");

  auto id_of = [&](nlohmann::json const& v, std::string const& field) -> std::int32_t {
    bool const ok = v.is_number_unsigned() ? v.get<std::uint64_t>() <= std::uint64_t(max_token_id)
                                           : v.is_number_integer() && v.get<std::int64_t>() >= 0 && v.get<std::int64_t>() <= max_token_id;
    if (!ok) bad(where, field, msg("is ", rlflow::detail::json_preview(v), "; expected an integer id in [0, ", max_token_id, "]"));
    return std::int32_t(v.get<std::int64_t>());
  };
  std::int32_t max_id = -1;
  std::vector<std::pair<std::string, std::int32_t>> vocab;
  vocab.reserve(m["vocab"].size());
  for (auto it = m["vocab"].begin(); it != m["vocab"].end(); ++it) {
    vocab.emplace_back(it.key(), id_of(it.value(), msg("model.vocab['", it.key(), "']")));
    max_id = std::max(max_id, vocab.back().second);
  }
  // added tokens
  struct Added {
    std::string content;
    std::int32_t id;
    bool special, normalized;
  };
  std::vector<Added> added;
  if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
    if (!j["added_tokens"].is_array()) bad(where, "added_tokens", "is not a list");
    std::size_t k = 0;
    for (auto const& a : j["added_tokens"]) {
      std::string const f = msg("added_tokens[", k++, "]");
      if (!a.is_object() || !a.contains("content") || !a["content"].is_string() || !a.contains("id"))
        bad(where, f, "is not an object with a string 'content' and an integer 'id'");
      std::string const content = a["content"].get<std::string>();
      if (content.empty()) bad(where, f + ".content", "is empty; an added token needs text");
      for (char const* opt : {"single_word", "lstrip", "rstrip"})
        if (flag(a, opt, false, where, f))
          bad(where, msg(f, ".", opt), msg("is true for '", content, "'; rlflow matches added tokens exactly and does not implement ", opt));
      bool const special = flag(a, "special", false, where, f);
      added.push_back({content, id_of(a["id"], f + ".id"), special, flag(a, "normalized", !special, where, f)});
      max_id = std::max(max_id, added.back().id);
    }
  }
  if (max_id < 0) bad(where, "model.vocab", "is empty");
  std::size_t const n = std::size_t(max_id) + 1;
  bytes_.assign(n, std::string());
  known_.assign(n, false);
  special_.assign(n, false);
  in_model_.assign(n, false);
  std::array<int, 0x200> byte_of{};
  byte_of.fill(-1);
  for (int b = 0; b < 256; ++b) byte_of[bytes_to_unicode()[std::size_t(b)]] = b;
  // the ByteLevel decoder: a token whose characters all come from the byte map stands for those
  // bytes, any other token for its own UTF-8 text
  auto token_bytes_of = [&](std::string const& tok) {
    std::string b;
    for (std::size_t i = 0; i < tok.size();) {
      auto const ch = decode_utf8(tok, i);
      if (!ch.ok || ch.cp >= 0x200 || byte_of[ch.cp] < 0) return tok;
      b.push_back(char(byte_of[ch.cp]));
      i += std::size_t(ch.len);
    }
    return b;
  };
  ids_.reserve(vocab.size() + added.size());
  for (auto const& [tok, id] : vocab) {
    if (known_[std::size_t(id)]) bad(where, msg("model.vocab['", tok, "']"), msg("has the id ", id, ", which another token already has"));
    known_[std::size_t(id)] = true;
    in_model_[std::size_t(id)] = true;
    ids_.emplace(tok, id);
    bytes_[std::size_t(id)] = token_bytes_of(tok);
  }
  for (int b = 0; b < 256; ++b) {
    std::string u;
    append_utf8(u, bytes_to_unicode()[std::size_t(b)]);
    auto it = ids_.find(u);
    if (it == ids_.end())
      bad(where, "model.vocab", msg("lacks the token of byte ", b, " ('", u, "'); a byte-level BPE vocabulary holds all 256 byte tokens"));
    byte_id_[std::size_t(b)] = it->second;
    byte_str_[std::size_t(b)] = u;
  }
  // merges: "a b" or ["a", "b"]
  auto const& ms = m["merges"];
  merges_.reserve(ms.size() * 2);
  for (std::size_t r = 0; r < ms.size(); ++r) {
    auto const& e = ms[r];
    std::string a, b;
    if (e.is_string()) {
      std::string const s = e.get<std::string>();
      auto const sp = s.find(' ');
      if (sp == std::string::npos || sp == 0 || sp + 1 == s.size() || s.find(' ', sp + 1) != std::string::npos)
        bad(where, msg("model.merges[", r, "]"), msg("'", s, "' is not two tokens separated by one space"));
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      a = e[0].get<std::string>();
      b = e[1].get<std::string>();
    } else {
      bad(where, msg("model.merges[", r, "]"), msg("is ", rlflow::detail::json_preview(e), "; expected \"a b\" or [\"a\", \"b\"]"));
    }
    auto ia = ids_.find(a), ib = ids_.find(b), im = ids_.find(a + b);
    if (ia == ids_.end() || ib == ids_.end() || im == ids_.end())
      bad(where, msg("model.merges[", r, "]"), msg("'", a, " ", b, "' uses a token missing from model.vocab ('",
                                                     ia == ids_.end() ? a : ib == ids_.end() ? b : a + b, "')"));
    merges_.emplace(key(ia->second, ib->second), Merge{std::int32_t(r), im->second});
  }
  // normalizer: null or NFC (alone or in a Sequence)
  if (j.contains("normalizer") && !j["normalizer"].is_null()) {
    auto const& nz = j["normalizer"];
    auto one = [&](nlohmann::json const& x, std::string const& field) {
      std::string const t = type_of(x, where, field);
      if (t != "NFC")
        bad(where, field + ".type", msg("is '", t, "'; rlflow applies no normalizer but NFC (a tokenizer.json with another ",
                                        "normalizer cannot be read)"));
      nfc_ = true;
    };
    if (type_of(nz, where, "normalizer") == "Sequence") {
      if (!nz.contains("normalizers") || !nz["normalizers"].is_array()) bad(where, "normalizer.normalizers", "is missing or not a list");
      for (std::size_t k = 0; k < nz["normalizers"].size(); ++k) one(nz["normalizers"][k], msg("normalizer.normalizers[", k, "]"));
    } else {
      one(nz, "normalizer");
    }
  }
  for (std::size_t k = 0; k < added.size(); ++k) {
    auto const& a = added[k];
    // an added token decodes to its text (the ByteLevel decoder agrees for the printable ASCII
    // of real files' added tokens), so text holding it round-trips
    known_[std::size_t(a.id)] = true;
    bytes_[std::size_t(a.id)] = a.content;
    ids_.emplace(a.content, a.id);
    if (a.special) special_[std::size_t(a.id)] = true;
    if (a.normalized && nfc_ && nfc(a.content) != a.content)
      bad(where, msg("added_tokens[", k, "].content"), msg("'", a.content, "' is normalized but not in NFC; write it in NFC"));
    (a.normalized ? normalized_added_ : raw_added_).add(a.content, a.id);
  }
  raw_added_.finish();
  normalized_added_.finish();
  load_pre_tokenizer(j, where);
  load_post_processor(j, where);
  // decoder: ByteLevel (alone or in a Sequence)
  if (!j.contains("decoder") || j["decoder"].is_null()) bad(where, "decoder", "is missing; rlflow decodes byte-level BPE (decoder type ByteLevel)");
  {
    auto const& d = j["decoder"];
    std::string const t = type_of(d, where, "decoder");
    bool ok = t == "ByteLevel";
    if (t == "Sequence" && d.contains("decoders") && d["decoders"].is_array() && d["decoders"].size() == 1)
      ok = type_of(d["decoders"][0], where, "decoder.decoders[0]") == "ByteLevel";
    if (!ok) bad(where, "decoder.type", msg("is '", t, "'; rlflow decodes byte-level BPE only (decoder type ByteLevel)"));
  }
  // special ids from the config
  auto need = [&](std::string const& field, std::string const& t) {
    auto it = ids_.find(t);
    if (it == ids_.end())
      throw config_error(msg(hf_detail::who, ": tokenizer_config.json's ", field, " '", t, "' is not a token of ", where,
                             "; set it to one of its added tokens"));
    return it->second;
  };
  std::string eos = cfg_.eos_token;
  if (eos.empty()) {
    if (ids_.count("<|endoftext|>")) eos = "<|endoftext|>";  // GPT-2's files name no EOS
    else
      throw config_error(msg(hf_detail::who, ": no eos_token: ", where, " comes without a tokenizer_config.json naming one ",
                             "and has no <|endoftext|>; put the model's tokenizer_config.json beside it"));
  }
  eos_ = need("eos_token", eos);
  bos_ = cfg_.bos_token.empty() ? -1 : need("bos_token", cfg_.bos_token);
  pad_ = cfg_.pad_token.empty() ? eos_ : need("pad_token", cfg_.pad_token);
}

RLFLOW_DECL void HFTokenizer::load_pre_tokenizer(nlohmann::json const& j, std::string const& where) {
  using hf_detail::Behavior;
  if (!j.contains("pre_tokenizer") || j["pre_tokenizer"].is_null())
    bad(where, "pre_tokenizer", "is missing; byte-level BPE needs a ByteLevel pre-tokenizer (alone or last in a Sequence)");
  auto const& p = j["pre_tokenizer"];
  std::vector<std::pair<nlohmann::json const*, std::string>> list;
  if (type_of(p, where, "pre_tokenizer") == "Sequence") {
    if (!p.contains("pretokenizers") || !p["pretokenizers"].is_array()) bad(where, "pre_tokenizer.pretokenizers", "is missing or not a list");
    for (std::size_t k = 0; k < p["pretokenizers"].size(); ++k) list.push_back({&p["pretokenizers"][k], msg("pre_tokenizer.pretokenizers[", k, "]")});
  } else {
    list.push_back({&p, "pre_tokenizer"});
  }
  bool byte_level = false;
  for (auto const& [x, field] : list) {
    std::string const t = type_of(*x, where, field);
    hf_detail::PreStep st;
    if (t == "ByteLevel") {
      if (byte_level) bad(where, field, "is a second ByteLevel; the bytes would be mapped twice");
      byte_level = true;
      st.byte_level = true;
      st.add_prefix_space = flag(*x, "add_prefix_space", true, where, field);
      if (flag(*x, "use_regex", true, where, field)) {
        st.regex = hf_detail::Regex(hf_detail::gpt2_pattern, where + ": " + field);
        st.regex_set = true;
      }
    } else if (t == "Split") {
      if (byte_level) bad(where, field, "is a Split after ByteLevel; rlflow splits the text before its bytes are mapped (put ByteLevel last)");
      if (!x->contains("pattern") || !(*x)["pattern"].is_object()) bad(where, field + ".pattern", "is missing or not an object");
      auto const& pat = (*x)["pattern"];
      if (pat.contains("Regex") && pat["Regex"].is_string()) {
        st.regex = hf_detail::Regex(pat["Regex"].get<std::string>(), where + ": " + field + ".pattern.Regex");
        st.regex_set = true;
      } else if (pat.contains("String") && pat["String"].is_string()) {
        st.use_literal = true;
        st.literal = pat["String"].get<std::string>();
        if (st.literal.empty()) bad(where, field + ".pattern.String", "is empty");
      } else {
        bad(where, field + ".pattern", msg("is ", rlflow::detail::json_preview(pat), "; expected {\"Regex\": string} or {\"String\": string}"));
      }
      std::string const b = x->contains("behavior") && (*x)["behavior"].is_string() ? (*x)["behavior"].get<std::string>() : "";
      if (b == "Removed") st.behavior = Behavior::removed;
      else if (b == "Isolated") st.behavior = Behavior::isolated;
      else if (b == "MergedWithPrevious") st.behavior = Behavior::merged_with_previous;
      else if (b == "MergedWithNext") st.behavior = Behavior::merged_with_next;
      else if (b == "Contiguous") st.behavior = Behavior::contiguous;
      else
        bad(where, field + ".behavior", msg("is ", x->contains("behavior") ? rlflow::detail::json_preview((*x)["behavior"]) : "missing",
                                             "; expected one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous"));
      st.invert = flag(*x, "invert", false, where, field);
    } else {
      bad(where, field + ".type", msg("is '", t, "'; rlflow's pre-tokenizers are Split and ByteLevel (in a Sequence)"));
    }
    steps_.push_back(std::move(st));
  }
  if (!byte_level) bad(where, "pre_tokenizer", "has no ByteLevel step; rlflow reads byte-level BPE only");
}

RLFLOW_DECL void HFTokenizer::load_post_processor(nlohmann::json const& j, std::string const& where) {
  if (!j.contains("post_processor") || j["post_processor"].is_null()) return;
  auto one = [&](nlohmann::json const& x, std::string const& field) {
    std::string const t = type_of(x, where, field);
    if (t == "ByteLevel") return;  // offsets only
    if (t != "TemplateProcessing")
      bad(where, field + ".type", msg("is '", t, "'; rlflow applies the post-processors ByteLevel and TemplateProcessing"));
    if (!prefix_.empty() || !suffix_.empty()) bad(where, field, "is a second TemplateProcessing");
    if (!x.contains("single") || !x["single"].is_array()) bad(where, field + ".single", "is missing or not a list");
    auto const& specials = x.contains("special_tokens") ? x["special_tokens"] : nlohmann::json::object();
    bool seen_a = false;
    for (std::size_t k = 0; k < x["single"].size(); ++k) {
      auto const& piece = x["single"][k];
      std::string const f = msg(field, ".single[", k, "]");
      if (piece.is_object() && piece.contains("Sequence")) {
        auto const& s = piece["Sequence"];
        if (!s.is_object() || s.value("id", nlohmann::json()) != "A" || seen_a) bad(where, f, "is not the one {\"Sequence\": {\"id\": \"A\"}}");
        seen_a = true;
      } else if (piece.is_object() && piece.contains("SpecialToken") && piece["SpecialToken"].is_object() &&
                 piece["SpecialToken"].contains("id") && piece["SpecialToken"]["id"].is_string()) {
        std::string const name = piece["SpecialToken"]["id"].get<std::string>();
        if (!specials.is_object() || !specials.contains(name) || !specials[name].is_object() || !specials[name].contains("ids") ||
            !specials[name]["ids"].is_array())
          bad(where, field + ".special_tokens", msg("lacks an entry with 'ids' for '", name, "', which ", f, " uses"));
        for (auto const& idv : specials[name]["ids"]) {
          bool const ok = idv.is_number_integer() && idv.get<std::int64_t>() >= 0 && idv.get<std::int64_t>() < vocab_size();
          if (!ok) bad(where, msg(field, ".special_tokens['", name, "'].ids"), msg("holds ", rlflow::detail::json_preview(idv), ", not an id in [0, ", vocab_size(), ")"));
          (seen_a ? suffix_ : prefix_).push_back(std::int32_t(idv.get<std::int64_t>()));
        }
      } else {
        bad(where, f, msg("is ", rlflow::detail::json_preview(piece), "; expected {\"SpecialToken\": {\"id\": name}} or {\"Sequence\": {\"id\": \"A\"}}"));
      }
    }
    if (!seen_a) bad(where, field + ".single", "has no {\"Sequence\": {\"id\": \"A\"}}");
  };
  auto const& pp = j["post_processor"];
  if (type_of(pp, where, "post_processor") == "Sequence") {
    if (!pp.contains("processors") || !pp["processors"].is_array()) bad(where, "post_processor.processors", "is missing or not a list");
    for (std::size_t k = 0; k < pp["processors"].size(); ++k) one(pp["processors"][k], msg("post_processor.processors[", k, "]"));
  } else {
    one(pp, "post_processor");
  }
}

RLFLOW_DECL void HFTokenizer::bpe_uncached(std::string_view piece, std::vector<std::int32_t>& out) const {
  if (piece.size() == 1) {
    out.push_back(byte_id_[static_cast<unsigned char>(piece[0])]);
    return;
  }
  if (ignore_merges_) {
    thread_local std::string mapped;
    mapped.clear();
    for (char c : piece) mapped += byte_str_[static_cast<unsigned char>(c)];
    auto it = ids_.find(mapped);
    if (it != ids_.end() && in_model_[std::size_t(it->second)]) {
      out.push_back(it->second);
      return;
    }
  }
  struct Sym {
    std::int32_t id;
    std::int32_t prev, next;  // -1: none
    bool alive;
  };
  struct Cand {
    std::int32_t rank, pos, id;
    bool operator>(Cand const& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  thread_local std::vector<Sym> sym;
  thread_local std::vector<Cand> heap;
  sym.clear();
  heap.clear();
  std::int32_t const n = std::int32_t(piece.size());
  for (std::int32_t i = 0; i < n; ++i) sym.push_back({byte_id_[static_cast<unsigned char>(piece[std::size_t(i)])], i - 1, i + 1 < n ? i + 1 : -1, true});
  auto push = [&](std::int32_t pos) {
    std::int32_t const nx = sym[std::size_t(pos)].next;
    if (nx < 0) return;
    auto it = merges_.find(key(sym[std::size_t(pos)].id, sym[std::size_t(nx)].id));
    if (it == merges_.end()) return;
    heap.push_back({it->second.rank, pos, it->second.id});
    std::push_heap(heap.begin(), heap.end(), std::greater<>());
  };
  for (std::int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    Cand const c = heap.back();
    heap.pop_back();
    Sym& s = sym[std::size_t(c.pos)];
    if (!s.alive || s.next < 0) continue;
    Sym& r = sym[std::size_t(s.next)];
    auto it = merges_.find(key(s.id, r.id));
    if (it == merges_.end() || it->second.id != c.id || it->second.rank != c.rank) continue;  // stale
    s.id = c.id;
    r.alive = false;
    s.next = r.next;
    if (r.next >= 0) sym[std::size_t(r.next)].prev = c.pos;
    if (s.prev >= 0) push(s.prev);
    push(c.pos);
  }
  for (std::int32_t i = 0; i >= 0; i = sym[std::size_t(i)].next) out.push_back(sym[std::size_t(i)].id);
}

RLFLOW_DECL std::shared_ptr<Tokenizer const> load_tokenizer(std::filesystem::path const& dir) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(dir / "tokenizer.json", ec)) return std::make_shared<HFTokenizer const>(HFTokenizer::from_folder(dir));
  if (std::filesystem::is_regular_file(dir / "vocab.json", ec) && std::filesystem::is_regular_file(dir / "merges.txt", ec))
    return std::make_shared<BPETokenizer const>(BPETokenizer::from_folder(dir));
  throw io_error(msg("rlflow::model::load_tokenizer: ", dir.string(), " holds neither tokenizer.json nor vocab.json + merges.txt; set ",
                     "actor_rollout_ref.model.tokenizer_path to the folder of the model's tokenizer files"));
}

}  // namespace rlflow::model
