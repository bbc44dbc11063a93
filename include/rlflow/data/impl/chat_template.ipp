// rlflow/data/impl/chat_template.ipp: the Jinja interpreter behind rlflow/data/chat_template.hpp: Python's
// str()/repr()/json.dumps of values, the lexer, the parser and the renderer (included by that header when
// RLFLOW_DEFINE_BODIES; see rlflow/core/config.hpp).
#pragma once
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <functional>
#include <optional>
#include <unordered_map>

namespace rlflow::jinja {

// ---------------------------------------------------------------------------------------------
// Text helpers: Python's str()/repr()/json.dumps of values, UTF-8 code points.

namespace detail {

//! Python's repr of a float ('r' format: shortest round-trip digits; exponent form when the
//! decimal exponent is below -4 or at least 16).
inline std::string py_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto const r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string s(buf, r.ptr);
  bool const neg = s[0] == '-';
  if (neg) s.erase(0, 1);
  auto const e = s.find('e');
  int const exp = std::stoi(s.substr(e + 1));
  std::string digits;
  for (char c : s.substr(0, e))
    if (c != '.') digits += c;
  std::string out = neg ? "-" : "";
  if (exp < -4 || exp >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    return out + eb;
  }
  if (exp < 0) return out + "0." + std::string(static_cast<std::size_t>(-exp - 1), '0') + digits;
  auto const point = static_cast<std::size_t>(exp) + 1;
  if (digits.size() <= point) return out + digits + std::string(point - digits.size(), '0') + ".0";
  return out + digits.substr(0, point) + "." + digits.substr(point);
}

//! Byte offsets of the code points of UTF-8 text (plus the end); invalid bytes count as one each.
inline std::vector<std::size_t> code_points(std::string_view s) {
  std::vector<std::size_t> at;
  at.reserve(s.size() + 1);
  for (std::size_t i = 0; i < s.size();) {
    at.push_back(i);
    auto const c = static_cast<unsigned char>(s[i]);
    std::size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (i + n > s.size()) n = 1;
    for (std::size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) n = 1;
    i += n;
  }
  at.push_back(s.size());
  return at;
}
inline bool ascii_only(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}
inline std::int64_t str_len(std::string_view s) {
  return ascii_only(s) ? static_cast<std::int64_t>(s.size()) : static_cast<std::int64_t>(code_points(s).size() - 1);
}

//! A JSON string as Python's json.dumps writes it; ensure_ascii: non-ASCII as \uXXXX escapes
//! (surrogate pairs above U+FFFF).
inline void json_string(std::string& out, std::string_view s, bool ensure_ascii = false) {
  out += '"';
  for (std::size_t i = 0; i < s.size(); ++i) {
    char const c = s[i];
    auto const b0 = static_cast<unsigned char>(c);
    if (ensure_ascii && b0 >= 0x80) {
      std::size_t const n = (b0 >> 5) == 6 ? 2 : (b0 >> 4) == 14 ? 3 : (b0 >> 3) == 30 ? 4 : 1;
      std::uint32_t cp = n == 2 ? (b0 & 0x1Fu) : n == 3 ? (b0 & 0x0Fu) : (b0 & 0x07u);
      bool ok = n > 1 && i + n <= s.size();
      for (std::size_t j = 1; ok && j < n; ++j) {
        auto const cj = static_cast<unsigned char>(s[i + j]);
        ok = (cj & 0xC0) == 0x80;
        cp = (cp << 6) | (cj & 0x3Fu);
      }
      if (!ok) cp = 0xFFFD;
      else i += n - 1;
      char b[16];
      if (cp >= 0x10000) std::snprintf(b, sizeof b, "\\u%04x\\u%04x", 0xD800 + ((cp - 0x10000) >> 10), 0xDC00 + ((cp - 0x10000) & 0x3FF));
      else std::snprintf(b, sizeof b, "\\u%04x", cp);
      out += b;
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", static_cast<unsigned>(c));
          out += b;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

//! Whether Python's repr escapes the code point (str.isprintable() is false): the common
//! non-printable ones above ASCII (C1 controls, Unicode spaces and format characters).
inline bool py_unprintable(std::uint32_t cp) {
  return (cp >= 0x80 && cp <= 0xA0) || cp == 0xAD || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200F) ||
         (cp >= 0x2028 && cp <= 0x202F) || (cp >= 0x205F && cp <= 0x2064) || cp == 0x3000 || cp == 0xFEFF;
}

inline void py_repr_string(std::string& out, std::string_view s) {
  char const q = (s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos) ? '"' : '\'';
  out += q;
  for (std::size_t i = 0; i < s.size(); ++i) {
    char const c = s[i];
    auto const u = static_cast<unsigned char>(c);
    if (u >= 0xC2 && u <= 0xEF) {  // a 2- or 3-byte code point: escaped when not printable
      std::size_t const n = u >= 0xE0 ? 3 : 2;
      if (i + n <= s.size()) {
        std::uint32_t cp = n == 2 ? (u & 0x1Fu) : (u & 0x0Fu);
        bool ok = true;
        for (std::size_t j = 1; j < n; ++j) {
          auto const cj = static_cast<unsigned char>(s[i + j]);
          ok = ok && (cj & 0xC0) == 0x80;
          cp = (cp << 6) | (cj & 0x3Fu);
        }
        if (ok && py_unprintable(cp)) {
          char b[12];
          if (cp <= 0xFF) std::snprintf(b, sizeof b, "\\x%02x", static_cast<unsigned>(cp));
          else std::snprintf(b, sizeof b, "\\u%04x", static_cast<unsigned>(cp));
          out += b;
          i += n - 1;
          continue;
        }
      }
    }
    if (c == q || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (u < 0x20 || u == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", u);
      out += b;
    } else out += c;
  }
  out += q;
}

inline bool py_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f'); }

//! Byte length of the whitespace code point (Python's str.isspace(), Unicode) that starts at
//! s[i]; 0 when there is none.
inline std::size_t space_at(std::string_view s, std::size_t i) {
  if (i >= s.size()) return 0;
  auto b = [&](std::size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
  if (py_space(s[i])) return 1;
  if (b(0) == 0xC2 && (b(1) == 0x85 || b(1) == 0xA0)) return 2;                       // U+0085, U+00A0
  if (b(0) == 0xE1 && b(1) == 0x9A && b(2) == 0x80) return 3;                          // U+1680
  if (b(0) == 0xE2 && b(1) == 0x80 && (b(2) <= 0x8A || b(2) == 0xA8 || b(2) == 0xA9 || b(2) == 0xAF) && b(2) >= 0x80)
    return 3;                                                                          // U+2000-200A, 2028, 2029, 202F
  if (b(0) == 0xE2 && b(1) == 0x81 && b(2) == 0x9F) return 3;                          // U+205F
  if (b(0) == 0xE3 && b(1) == 0x80 && b(2) == 0x80) return 3;                          // U+3000
  return 0;
}
//! Byte length of the whitespace code point that ends at s[end - 1]; 0 when there is none.
inline std::size_t space_before(std::string_view s, std::size_t end) {
  for (std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{3}})
    if (end >= n && space_at(s, end - n) == n) return n;
  return 0;
}
inline std::size_t lstrip_len(std::string_view s) {
  std::size_t k = 0;
  for (std::size_t n; (n = space_at(s, k)) != 0;) k += n;
  return k;
}
inline std::size_t rstrip_end(std::string_view s) {
  std::size_t e = s.size();
  for (std::size_t n; (n = space_before(s, e)) != 0;) e -= n;
  return e;
}

}  // namespace detail

//! Python's str() of a value (what {{ x }} prints); undefined prints nothing.
inline void append_str(std::string& out, Value const& x, bool repr = false);
inline std::string to_str(Value const& x) {
  std::string s;
  append_str(s, x);
  return s;
}
inline void append_str(std::string& out, Value const& x, bool repr) {
  std::visit(
      [&](auto const& a) {
        using T = std::decay_t<decltype(a)>;
        if constexpr (std::is_same_v<T, Value::Undefined>) {
          if (repr) out += "Undefined";
        } else if constexpr (std::is_same_v<T, Value::None>) out += "None";
        else if constexpr (std::is_same_v<T, bool>) out += a ? "True" : "False";
        else if constexpr (std::is_same_v<T, std::int64_t>) out += std::to_string(a);
        else if constexpr (std::is_same_v<T, double>) out += detail::py_float(a);
        else if constexpr (std::is_same_v<T, Value::Str>) {
          if (repr) detail::py_repr_string(out, *a);
          else out += *a;
        } else if constexpr (std::is_same_v<T, std::shared_ptr<ListBox const>>) {
          out += '[';
          for (std::size_t i = 0; i < a->items.size(); ++i) {
            if (i) out += ", ";
            append_str(out, a->items[i], true);
          }
          out += ']';
        } else if constexpr (std::is_same_v<T, std::shared_ptr<Dict const>>) {
          out += '{';
          for (std::size_t i = 0; i < a->items.size(); ++i) {
            if (i) out += ", ";
            detail::py_repr_string(out, a->items[i].first);
            out += ": ";
            append_str(out, a->items[i].second, true);
          }
          out += '}';
        } else if constexpr (std::is_same_v<T, Value::Namespace>) out += "<Namespace>";
        else if constexpr (std::is_same_v<T, Value::Builtin>) out += "<built-in function " + a.name + ">";
        else out += "<Macro>";
      },
      x.v);
}

//! How json.dumps writes: Python's defaults are ", " and ": " without indent, "," and ": "
//! with it; indent < 0 means none.
struct JsonStyle {
  bool ensure_ascii = false;
  int indent = -1;
  std::string item_sep = ", ", key_sep = ": ";
  bool sort_keys = false;
};

//! json.dumps(x, ensure_ascii=..., indent=..., separators=..., sort_keys=...).
inline void append_json(std::string& out, Value const& x, JsonStyle const& st, int level = 0, std::string const& where = "") {
  auto newline = [&](int lvl) {
    out += '\n';
    out.append(static_cast<std::size_t>(st.indent * lvl), ' ');
  };
  auto str = [&](std::string const& s) { detail::json_string(out, s, st.ensure_ascii); };
  if (x.is_none()) out += "null";
  else if (x.is_bool()) out += std::get<bool>(x.v) ? "true" : "false";
  else if (x.is_int()) out += std::to_string(std::get<std::int64_t>(x.v));
  else if (x.is_float()) {
    double const d = std::get<double>(x.v);
    out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : detail::py_float(d);
  } else if (x.is_string()) str(x.str());
  else if (x.is_list() || x.is_dict()) {
    bool const is_list = x.is_list();
    std::size_t const n = is_list ? x.list().size() : x.dict().items.size();
    out += is_list ? '[' : '{';
    if (n == 0) {
      out += is_list ? ']' : '}';
      return;
    }
    std::vector<std::size_t> order(n);
    for (std::size_t i = 0; i < n; ++i) order[i] = i;
    if (!is_list && st.sort_keys)
      std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return x.dict().items[a].first < x.dict().items[b].first; });
    for (std::size_t i = 0; i < n; ++i) {
      if (i) out += st.item_sep;
      if (st.indent >= 0) newline(level + 1);
      if (is_list) append_json(out, x.list()[i], st, level + 1, where);
      else {
        auto const& kv = x.dict().items[order[i]];
        str(kv.first);
        out += st.key_sep;
        append_json(out, kv.second, st, level + 1, where);
      }
    }
    if (st.indent >= 0) newline(level);
    out += is_list ? ']' : '}';
  } else {
    throw value_error(msg("rlflow::jinja: ", where, "tojson: a value of type '", x.type_name(),
                          "' is not JSON serializable; pass strings, numbers, booleans, none, lists or dicts"));
  }
}

// ---------------------------------------------------------------------------------------------
// Lexer: template text with trim_blocks / lstrip_blocks / '-' '+' whitespace control, and the
// expression tokens inside {{ }} and {% %}.
namespace detail {

struct Token {
  enum class Kind { text, var_begin, var_end, block_begin, block_end, name, string, integer, floating, op, eof };
  Kind kind;
  std::string s;
  int line;
  std::int64_t i = 0;
  double d = 0;
};

inline std::string where_line(int line) { return msg("chat template line ", line, ": "); }
[[noreturn]] inline void syntax(int line, std::string const& what) {
  throw format_error(msg("rlflow::jinja: ", where_line(line), what));
}

//! Jinja2 reads the source as source.splitlines() joined by '\n': every line break becomes '\n'
//! and one trailing line break is dropped (keep_trailing_newline=False).
inline std::string normalize_newlines(std::string_view src) {
  std::string s;
  s.reserve(src.size());
  for (std::size_t i = 0; i < src.size(); ++i) {
    auto const c = static_cast<unsigned char>(src[i]);
    if (c == '\r') {
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
      s += '\n';
    } else if (c == '\v' || c == '\f' || c == 0x1c || c == 0x1d || c == 0x1e) s += '\n';
    else if (c == 0xC2 && i + 1 < src.size() && static_cast<unsigned char>(src[i + 1]) == 0x85) {
      s += '\n';
      ++i;
    } else if (c == 0xE2 && i + 2 < src.size() && static_cast<unsigned char>(src[i + 1]) == 0x80 &&
               (static_cast<unsigned char>(src[i + 2]) == 0xA8 || static_cast<unsigned char>(src[i + 2]) == 0xA9)) {
      s += '\n';
      i += 2;
    } else s += src[i];
  }
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

inline void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) out += static_cast<char>(cp);
  else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

inline std::vector<Token> lex(std::string const& src) {
  std::vector<Token> toks;
  std::size_t pos = 0;
  std::size_t const n = src.size();
  int line = 1;
  bool strip_next = false;  // the previous tag ended with '-'
  auto count_lines = [&](std::size_t a, std::size_t b) {
    for (std::size_t k = a; k < b; ++k) line += src[k] == '\n';
  };
  while (pos <= n) {
    std::size_t p = pos;
    for (;;) {
      p = src.find('{', p);
      if (p == std::string::npos || p + 1 >= n) {
        p = std::string::npos;
        break;
      }
      char const c = src[p + 1];
      if (c == '{' || c == '%' || c == '#') break;
      ++p;
    }
    std::size_t const text_end = p == std::string::npos ? n : p;
    std::string text = src.substr(pos, text_end - pos);
    int const text_line = line;
    count_lines(pos, text_end);
    if (strip_next) {
      text.erase(0, lstrip_len(text));
      strip_next = false;
    }
    if (p == std::string::npos) {
      if (!text.empty()) toks.push_back({Token::Kind::text, std::move(text), text_line});
      break;
    }
    char const kind = src[p + 1];
    char const mod = p + 2 < n ? src[p + 2] : '\0';
    if (mod == '-') {
      text.erase(rstrip_end(text));
    } else if (mod != '+' && kind != '{') {
      // lstrip_blocks: spaces and tabs from the start of the line to a block or comment tag.
      auto const nl = text.rfind('\n');
      std::size_t const ls = nl == std::string::npos ? 0 : nl + 1;
      bool const line_start = nl != std::string::npos || pos == 0 || src[pos - 1] == '\n';
      if (line_start && text.find_first_not_of(" \t", ls) == std::string::npos) text.erase(ls);
    }
    if (!text.empty()) toks.push_back({Token::Kind::text, std::move(text), text_line});
    std::size_t q = p + 2 + ((mod == '-' || mod == '+') ? 1 : 0);
    int const tag_line = line;
    if (kind == '#') {
      auto const e = src.find("#}", q);
      if (e == std::string::npos) syntax(tag_line, "the comment '{#' is not closed; end it with '#}'");
      bool const dash = e > q && src[e - 1] == '-';
      bool const plus = e > q && src[e - 1] == '+';
      count_lines(p, e + 2);
      pos = e + 2;
      if (dash) strip_next = true;
      else if (!plus && pos < n && src[pos] == '\n') {
        ++pos;
        ++line;
      }
      continue;
    }
    bool const is_var = kind == '{';
    toks.push_back({is_var ? Token::Kind::var_begin : Token::Kind::block_begin, "", tag_line});
    int depth = 0;
    for (;;) {
      for (std::size_t w; (w = space_at(src, q)) != 0; q += w) line += src[q] == '\n';
      if (q >= n)
        syntax(tag_line, is_var ? "the expression '{{' is not closed; end it with '}}'" : "the tag '{%' is not closed; end it with '%}'");
      char const c = src[q];
      // the end of the tag (outside brackets)
      if (depth == 0) {
        std::string_view const rest(src.data() + q, n - q);
        std::string_view const end = is_var ? "}}" : "%}";
        std::size_t skip = 0;
        bool dash = false, plus = false;
        if (rest.substr(0, 2) == end) skip = 2;
        else if (rest.size() >= 3 && rest[0] == '-' && rest.substr(1, 2) == end) skip = 3, dash = true;
        else if (!is_var && rest.size() >= 3 && rest[0] == '+' && rest.substr(1, 2) == end) skip = 3, plus = true;
        if (skip) {
          toks.push_back({is_var ? Token::Kind::var_end : Token::Kind::block_end, "", line});
          pos = q + skip;
          if (dash) strip_next = true;
          else if (!is_var && !plus && pos < n && src[pos] == '\n') {  // trim_blocks
            ++pos;
            ++line;
          }
          break;
        }
      }
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        std::size_t e = q;
        while (e < n && (std::isalnum(static_cast<unsigned char>(src[e])) || src[e] == '_')) ++e;
        toks.push_back({Token::Kind::name, src.substr(q, e - q), line});
        q = e;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        std::size_t e = q;
        std::string digits;
        auto run = [&] {
          while (e < n && (std::isdigit(static_cast<unsigned char>(src[e])) || (src[e] == '_' && e + 1 < n && std::isdigit(static_cast<unsigned char>(src[e + 1]))))) {
            if (src[e] != '_') digits += src[e];
            ++e;
          }
        };
        run();
        bool is_float = false;
        if (e + 1 < n && src[e] == '.' && std::isdigit(static_cast<unsigned char>(src[e + 1]))) {
          is_float = true;
          digits += src[e++];
          run();
        }
        if (e < n && (src[e] == 'e' || src[e] == 'E')) {
          std::size_t f = e + 1;
          if (f < n && (src[f] == '+' || src[f] == '-')) ++f;
          if (f < n && std::isdigit(static_cast<unsigned char>(src[f]))) {
            is_float = true;
            digits += 'e';
            digits.append(src, e + 1, f - e - 1);
            e = f;
            run();
          }
        }
        Token t{is_float ? Token::Kind::floating : Token::Kind::integer, digits, line};
        if (is_float) t.d = std::strtod(digits.c_str(), nullptr);
        else {
          auto const r = std::from_chars(digits.data(), digits.data() + digits.size(), t.i);
          if (r.ec != std::errc()) syntax(line, msg("the integer ", digits, " does not fit 64 bits"));
        }
        toks.push_back(std::move(t));
        q = e;
      } else if (c == '\'' || c == '"') {
        std::string s;
        std::size_t e = q + 1;
        int const sl = line;
        for (;;) {
          if (e >= n) syntax(sl, "a string literal is not closed; end it with its quote");
          char const d = src[e];
          if (d == c) break;
          if (d == '\n') ++line;
          if (d == '\\' && e + 1 < n) {
            char const x = src[e + 1];
            e += 2;
            switch (x) {
              case 'n': s += '\n'; break;
              case 't': s += '\t'; break;
              case 'r': s += '\r'; break;
              case '\\': s += '\\'; break;
              case '\'': s += '\''; break;
              case '"': s += '"'; break;
              case 'a': s += '\a'; break;
              case 'b': s += '\b'; break;
              case 'f': s += '\f'; break;
              case 'v': s += '\v'; break;
              case '0': s += '\0'; break;
              case '\n': ++line; break;
              case 'x': case 'u': case 'U': {
                std::size_t const len = x == 'x' ? 2 : x == 'u' ? 4 : 8;
                std::uint32_t cp = 0;
                if (e + len > n) syntax(sl, msg("the escape '\\", x, "' needs ", len, " hex digits"));
                for (std::size_t k = 0; k < len; ++k) {
                  char const h = src[e + k];
                  if (!std::isxdigit(static_cast<unsigned char>(h))) syntax(sl, msg("the escape '\\", x, "' needs ", len, " hex digits"));
                  cp = cp * 16 + static_cast<std::uint32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
                }
                if (cp > 0x10FFFF) syntax(sl, "a '\\U' escape is beyond U+10FFFF");
                e += len;
                append_utf8(s, cp);
                break;
              }
              default: s += '\\'; s += x;
            }
            continue;
          }
          s += d;
          ++e;
        }
        toks.push_back({Token::Kind::string, std::move(s), sl});
        q = e + 1;
      } else {
        static constexpr std::string_view two[] = {"//", "**", "==", "!=", "<=", ">="};
        std::string op;
        for (auto t : two)
          if (src.compare(q, 2, t) == 0) op = t;
        if (op.empty()) {
          if (std::string_view("+-*/%~<>=.,:|()[]{}").find(c) == std::string_view::npos)
            syntax(line, msg("unexpected character '", c, "' in ", is_var ? "an expression" : "a tag"));
          op = std::string(1, c);
        }
        if (op == "(" || op == "[" || op == "{") ++depth;
        if (op == ")" || op == "]" || op == "}") {
          if (depth == 0) syntax(line, msg("unexpected '", op, "'"));
          --depth;
        }
        toks.push_back({Token::Kind::op, op, line});
        q += op.size();
      }
    }
  }
  toks.push_back({Token::Kind::eof, "", line});
  return toks;
}

// ---------------------------------------------------------------------------------------------
// Parser.

class Parser {
 public:
  Parser(std::vector<Token> t, Limits const& lim) : t_(std::move(t)), lim_(lim) {}

  Body parse_template() {
    Body b;
    std::string end;
    parse_body(b, {}, end);
    return b;
  }

 private:
  std::vector<Token> t_;
  std::size_t i_ = 0;
  Limits const& lim_;
  int depth_ = 0;

  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& q, int line) : p(q) {
      if (++p.depth_ > p.lim_.max_depth)
        syntax(line, msg("nesting deeper than ", p.lim_.max_depth, " levels (Limits::max_depth)"));
    }
    ~DepthGuard() { --p.depth_; }
  };

  Token const& peek(std::size_t k = 0) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  Token const& next() { return t_[std::min(i_++, t_.size() - 1)]; }
  bool is_op(char const* s, std::size_t k = 0) const { return peek(k).kind == Token::Kind::op && peek(k).s == s; }
  bool is_name(char const* s, std::size_t k = 0) const { return peek(k).kind == Token::Kind::name && peek(k).s == s; }
  bool skip_op(char const* s) {
    if (!is_op(s)) return false;
    ++i_;
    return true;
  }
  bool skip_name(char const* s) {
    if (!is_name(s)) return false;
    ++i_;
    return true;
  }
  static std::string describe(Token const& t) {
    switch (t.kind) {
      case Token::Kind::var_end: return "'}}'";
      case Token::Kind::block_end: return "'%}'";
      case Token::Kind::eof: return "the end of the template";
      case Token::Kind::string: return "a string";
      case Token::Kind::text: return "text";
      default: return "'" + t.s + "'";
    }
  }
  void expect_op(char const* s) {
    if (!skip_op(s)) syntax(peek().line, msg("expected '", s, "', found ", describe(peek())));
  }
  std::string expect_name(char const* what) {
    if (peek().kind != Token::Kind::name) syntax(peek().line, msg("expected ", what, ", found ", describe(peek())));
    return next().s;
  }
  void expect_block_end(char const* tag) {
    if (peek().kind != Token::Kind::block_end)
      syntax(peek().line, msg("expected '%}' to end the '", tag, "' tag, found ", describe(peek())));
    ++i_;
  }

  static bool is_end_tag(std::string const& n, std::vector<std::string> const& ends) {
    return std::find(ends.begin(), ends.end(), n) != ends.end();
  }

  //! Parses nodes until one of 'ends' (a tag name) is met at this level; 'end' receives it.
  void parse_body(Body& out, std::vector<std::string> const& ends, std::string& end) {
    for (;;) {
      Token const& t = peek();
      if (t.kind == Token::Kind::eof) {
        if (!ends.empty()) syntax(t.line, msg("the template ended before '{% ", ends.back(), " %}'; close the open block"));
        return;
      }
      if (t.kind == Token::Kind::text) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::text;
        n->line = t.line;
        n->text = t.s;
        out.push_back(std::move(n));
        ++i_;
      } else if (t.kind == Token::Kind::var_begin) {
        ++i_;
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::output;
        n->line = t.line;
        n->expr = parse_tuple_or_expr();
        if (peek().kind != Token::Kind::var_end) syntax(peek().line, msg("expected '}}', found ", describe(peek())));
        ++i_;
        out.push_back(std::move(n));
      } else if (t.kind == Token::Kind::block_begin) {
        ++i_;
        Token const& nt = peek();
        if (nt.kind != Token::Kind::name) syntax(nt.line, msg("expected a tag name after '{%', found ", describe(nt)));
        if (is_end_tag(nt.s, ends)) {
          end = nt.s;
          ++i_;
          return;
        }
        out.push_back(parse_statement());
      } else {
        syntax(t.line, msg("unexpected ", describe(t)));
      }
    }
  }

  NodeP parse_statement() {
    Token const& t = next();
    DepthGuard g(*this, t.line);
    auto n = std::make_unique<Node>();
    n->line = t.line;
    std::string const& tag = t.s;
    if (tag == "for") {
      n->kind = Node::Kind::for_;
      do n->targets.push_back(expect_name("a loop variable name"));
      while (skip_op(","));
      if (!skip_name("in")) syntax(peek().line, msg("expected 'in' in the 'for' tag, found ", describe(peek())));
      n->expr = parse_tuple_or_expr(/*no_cond=*/true);
      if (skip_name("if")) n->filter = parse_expr();
      if (is_name("recursive")) syntax(peek().line, "recursive loops are not supported by rlflow's Jinja engine");
      expect_block_end("for");
      std::string end;
      parse_body(n->body, {"else", "endfor"}, end);
      if (end == "else") {
        expect_block_end("else");
        parse_body(n->else_body, {"endfor"}, end);
      }
      expect_block_end("endfor");
    } else if (tag == "if") {
      n->kind = Node::Kind::if_;
      std::string end = "if";
      for (;;) {
        auto cond = parse_tuple_or_expr();
        expect_block_end(end.c_str());
        Body b;
        parse_body(b, {"elif", "else", "endif"}, end);
        n->branches.emplace_back(std::move(cond), std::move(b));
        if (end != "elif") break;
      }
      if (end == "else") {
        expect_block_end("else");
        parse_body(n->else_body, {"endif"}, end);
      }
      expect_block_end("endif");
    } else if (tag == "set") {
      n->kind = Node::Kind::set;
      n->targets.push_back(expect_name("a variable name"));
      if (skip_op(".")) {
        n->attr_set = true;
        n->targets.push_back(expect_name("an attribute name"));
      } else {
        while (skip_op(",")) n->targets.push_back(expect_name("a variable name"));
      }
      if (skip_op("=")) {
        n->expr = parse_tuple_or_expr();
        expect_block_end("set");
      } else {
        if (n->attr_set || n->targets.size() != 1) syntax(t.line, "a block '{% set %}' assigns one plain name");
        if (is_op("|")) syntax(peek().line, "filters on a block '{% set %}' are not supported by rlflow's Jinja engine");
        expect_block_end("set");
        n->kind = Node::Kind::set_block;
        std::string end;
        parse_body(n->body, {"endset"}, end);
        expect_block_end("endset");
      }
    } else if (tag == "macro") {
      n->kind = Node::Kind::macro;
      n->text = expect_name("a macro name");
      expect_op("(");
      while (!is_op(")")) {
        n->params.push_back(expect_name("a parameter name"));
        n->defaults.push_back(skip_op("=") ? parse_expr() : nullptr);
        if (!skip_op(",")) break;
      }
      expect_op(")");
      expect_block_end("macro");
      std::string end;
      parse_body(n->body, {"endmacro"}, end);
      if (peek().kind == Token::Kind::name && peek().s == n->text) ++i_;
      expect_block_end("endmacro");
    } else if (tag == "break" || tag == "continue") {
      n->kind = tag == "break" ? Node::Kind::break_ : Node::Kind::continue_;
      expect_block_end(tag.c_str());
    } else if (tag == "generation") {  // transformers' AssistantTracker: renders its body
      n->kind = Node::Kind::block;
      expect_block_end("generation");
      std::string end;
      parse_body(n->body, {"endgeneration"}, end);
      expect_block_end("endgeneration");
    } else {
      static constexpr std::string_view known_unsupported[] = {"include", "import", "from", "extends", "block", "call",
                                                               "filter", "raw", "with", "autoescape", "do", "trans"};
      bool const known = std::find(std::begin(known_unsupported), std::end(known_unsupported), tag) != std::end(known_unsupported);
      syntax(t.line, msg("the tag '{% ", tag, " %}' ", known ? "is not supported by rlflow's Jinja engine" : "is unknown",
                         " (supported: for, if/elif/else, set, macro, break, continue, generation)"));
    }
    return n;
  }

  //! Records a finished node's height (1 + its tallest operand): left-nested chains such as
  //! a|f|f|f or 1+1+1 grow the tree without recursing in the parser, and rendering and freeing
  //! the tree recurse once per level.
  ExprP fin(ExprP e) {
    int h = 0;
    for (auto const& k : e->kids)
      if (k) h = std::max(h, k->height);
    e->height = h + 1;
    if (e->height > 4 * lim_.max_depth)
      syntax(e->line, msg("an expression nests deeper than ", 4 * lim_.max_depth, " levels (4 x Limits::max_depth); split it with {% set %}"));
    return e;
  }
  ExprP make(Expr::Kind k, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line;
    return e;
  }

  //! An expression, or a bare tuple 'a, b' (for loops' iterables and set values).
  ExprP parse_tuple_or_expr(bool no_cond = false) {
    int const line = peek().line;
    ExprP first = no_cond ? parse_or() : parse_expr();
    if (!is_op(",")) return first;
    auto t = make(Expr::Kind::tuple, line);
    t->kids.push_back(std::move(first));
    while (skip_op(",")) {
      if (peek().kind == Token::Kind::block_end || peek().kind == Token::Kind::var_end) break;
      t->kids.push_back(no_cond ? parse_or() : parse_expr());
    }
    return fin(std::move(t));
  }

  ExprP parse_expr() {
    DepthGuard g(*this, peek().line);
    ExprP a = parse_or();
    while (is_name("if")) {
      int const line = next().line;
      auto c = make(Expr::Kind::cond, line);
      ExprP cond = parse_or();
      ExprP other = skip_name("else") ? parse_expr() : nullptr;
      c->kids.push_back(std::move(a));
      c->kids.push_back(std::move(cond));
      c->kids.push_back(std::move(other));
      a = fin(std::move(c));
    }
    return a;
  }
  ExprP parse_or() {
    ExprP a = parse_and();
    while (is_name("or")) {
      auto e = make(Expr::Kind::or_, next().line);
      e->kids.push_back(std::move(a));
      e->kids.push_back(parse_and());
      a = fin(std::move(e));
    }
    return a;
  }
  ExprP parse_and() {
    ExprP a = parse_not();
    while (is_name("and")) {
      auto e = make(Expr::Kind::and_, next().line);
      e->kids.push_back(std::move(a));
      e->kids.push_back(parse_not());
      a = fin(std::move(e));
    }
    return a;
  }
  ExprP parse_not() {
    if (is_name("not")) {
      DepthGuard g(*this, peek().line);
      auto e = make(Expr::Kind::not_, next().line);
      e->kids.push_back(parse_not());
      return fin(std::move(e));
    }
    return parse_compare();
  }
  ExprP parse_compare() {
    int const line = peek().line;
    ExprP a = parse_math1();
    ExprP cmp;
    for (;;) {
      std::string op;
      if (peek().kind == Token::Kind::op && (peek().s == "==" || peek().s == "!=" || peek().s == "<" || peek().s == ">" ||
                                             peek().s == "<=" || peek().s == ">="))
        op = next().s;
      else if (is_name("in")) {
        ++i_;
        op = "in";
      } else if (is_name("not") && is_name("in", 1)) {
        i_ += 2;
        op = "not in";
      } else break;
      if (!cmp) {
        cmp = make(Expr::Kind::compare, line);
        cmp->kids.push_back(std::move(a));
      }
      cmp->ops.push_back(op);
      cmp->kids.push_back(parse_math1());
    }
    return cmp ? fin(std::move(cmp)) : std::move(a);
  }
  ExprP binary(std::string op, ExprP a, ExprP b, int line) {
    auto e = make(Expr::Kind::binary, line);
    e->name = std::move(op);
    e->kids.push_back(std::move(a));
    e->kids.push_back(std::move(b));
    return fin(std::move(e));
  }
  ExprP parse_math1() {
    ExprP a = parse_concat();
    while (is_op("+") || is_op("-")) {
      auto const& t = next();
      a = binary(t.s, std::move(a), parse_concat(), t.line);
    }
    return a;
  }
  ExprP parse_concat() {
    ExprP a = parse_math2();
    while (is_op("~")) {
      auto const& t = next();
      a = binary("~", std::move(a), parse_math2(), t.line);
    }
    return a;
  }
  ExprP parse_math2() {
    ExprP a = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      auto const& t = next();
      a = binary(t.s, std::move(a), parse_pow(), t.line);
    }
    return a;
  }
  ExprP parse_pow() {
    ExprP a = parse_unary(true);
    while (is_op("**")) {
      auto const& t = next();
      a = binary("**", std::move(a), parse_unary(true), t.line);
    }
    return a;
  }
  ExprP parse_unary(bool with_filter) {
    DepthGuard g(*this, peek().line);
    ExprP a;
    if (is_op("-") || is_op("+")) {
      auto const& t = next();
      a = make(t.s == "-" ? Expr::Kind::neg : Expr::Kind::pos, t.line);
      a->kids.push_back(parse_unary(false));
      a = fin(std::move(a));
    } else {
      a = parse_primary();
    }
    a = parse_postfix(std::move(a));
    if (with_filter) a = parse_filters(std::move(a));
    return a;
  }
  ExprP parse_primary() {
    Token const& t = peek();
    switch (t.kind) {
      case Token::Kind::name: {
        ++i_;
        auto lit = [&](Value v) {
          auto e = make(Expr::Kind::literal, t.line);
          e->lit = std::move(v);
          return e;
        };
        if (t.s == "true" || t.s == "True") return lit(true);
        if (t.s == "false" || t.s == "False") return lit(false);
        if (t.s == "none" || t.s == "None") return lit(nullptr);
        auto e = make(Expr::Kind::name, t.line);
        e->name = t.s;
        return e;
      }
      case Token::Kind::string: {
        std::string s;
        int const line = t.line;
        while (peek().kind == Token::Kind::string) s += next().s;  // adjacent literals concatenate
        auto e = make(Expr::Kind::literal, line);
        e->lit = Value(std::move(s));
        return e;
      }
      case Token::Kind::integer: {
        ++i_;
        auto e = make(Expr::Kind::literal, t.line);
        e->lit = Value(t.i);
        return e;
      }
      case Token::Kind::floating: {
        ++i_;
        auto e = make(Expr::Kind::literal, t.line);
        e->lit = Value(t.d);
        return e;
      }
      case Token::Kind::op:
        if (t.s == "(") {
          ++i_;
          if (skip_op(")")) return make(Expr::Kind::tuple, t.line);
          ExprP first = parse_expr();
          if (skip_op(")")) return first;
          auto tup = make(Expr::Kind::tuple, t.line);
          tup->kids.push_back(std::move(first));
          while (skip_op(",")) {
            if (is_op(")")) break;
            tup->kids.push_back(parse_expr());
          }
          expect_op(")");
          return fin(std::move(tup));
        }
        if (t.s == "[") {
          ++i_;
          auto l = make(Expr::Kind::list, t.line);
          while (!is_op("]")) {
            l->kids.push_back(parse_expr());
            if (!skip_op(",")) break;
          }
          expect_op("]");
          return fin(std::move(l));
        }
        if (t.s == "{") {
          ++i_;
          auto d = make(Expr::Kind::dict, t.line);
          while (!is_op("}")) {
            d->kids.push_back(parse_expr());
            expect_op(":");
            d->kids.push_back(parse_expr());
            if (!skip_op(",")) break;
          }
          expect_op("}");
          return fin(std::move(d));
        }
        [[fallthrough]];
      default: syntax(t.line, msg("expected a value, found ", describe(t)));
    }
  }
  void parse_args(Expr& call) {
    expect_op("(");
    while (!is_op(")")) {
      if (is_op("*") || is_op("**")) syntax(peek().line, "'*args' / '**kwargs' in calls are not supported by rlflow's Jinja engine");
      if (peek().kind == Token::Kind::name && is_op("=", 1)) {
        call.keywords.push_back(next().s);
        ++i_;
      } else {
        if (!call.keywords.empty() && !call.keywords.back().empty())
          syntax(peek().line, "a positional argument follows a keyword argument");
        call.keywords.emplace_back();
      }
      call.kids.push_back(parse_expr());
      if (!skip_op(",")) break;
    }
    expect_op(")");
  }
  ExprP parse_postfix(ExprP a) {
    for (;;) {
      if (is_op(".")) {
        int const line = next().line;
        if (peek().kind == Token::Kind::integer) {
          auto e = make(Expr::Kind::index, line);
          auto k = make(Expr::Kind::literal, line);
          k->lit = Value(next().i);
          e->kids.push_back(std::move(a));
          e->kids.push_back(std::move(k));
          a = fin(std::move(e));
          continue;
        }
        auto e = make(Expr::Kind::attr, line);
        e->name = expect_name("an attribute name after '.'");
        e->kids.push_back(std::move(a));
        a = fin(std::move(e));
      } else if (is_op("[")) {
        int const line = next().line;
        ExprP parts[3];
        bool slice = false;
        for (int k = 0; k < 3; ++k) {
          if (!is_op(":") && !is_op("]")) parts[k] = parse_expr();
          if (k < 2 && skip_op(":")) slice = true;
          else break;
        }
        expect_op("]");
        auto e = make(slice ? Expr::Kind::slice : Expr::Kind::index, line);
        e->kids.push_back(std::move(a));
        if (slice)
          for (auto& p : parts) e->kids.push_back(std::move(p));
        else {
          if (!parts[0]) syntax(line, "an empty subscript '[]'");
          e->kids.push_back(std::move(parts[0]));
        }
        a = fin(std::move(e));
      } else if (is_op("(")) {
        auto e = make(Expr::Kind::call, peek().line);
        e->kids.push_back(std::move(a));
        e->keywords.emplace_back();
        parse_args(*e);
        a = fin(std::move(e));
      } else {
        return a;
      }
    }
  }
  ExprP parse_filters(ExprP a) {
    for (;;) {
      if (is_op("|")) {
        int const line = next().line;
        auto e = make(Expr::Kind::filter, line);
        e->name = expect_name("a filter name after '|'");
        e->kids.push_back(std::move(a));
        e->keywords.emplace_back();
        if (is_op("(")) parse_args(*e);
        a = fin(std::move(e));
      } else if (is_name("is")) {
        int const line = next().line;
        auto e = make(Expr::Kind::test, line);
        e->negated = skip_name("not");
        e->name = expect_name("a test name after 'is'");
        e->kids.push_back(std::move(a));
        e->keywords.emplace_back();
        if (is_op("(")) parse_args(*e);
        else if ((peek().kind == Token::Kind::name && !is_name("else") && !is_name("or") && !is_name("and")) ||  // as Jinja2
                 peek().kind == Token::Kind::string || peek().kind == Token::Kind::integer ||
                 peek().kind == Token::Kind::floating || is_op("[") || is_op("{")) {
          e->keywords.emplace_back();
          e->kids.push_back(parse_postfix(parse_primary()));
        }
        a = fin(std::move(e));
      } else if (is_op("(")) {
        auto e = make(Expr::Kind::call, peek().line);
        e->kids.push_back(std::move(a));
        e->keywords.emplace_back();
        parse_args(*e);
        a = fin(std::move(e));
      } else {
        return a;
      }
    }
  }
};

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Renderer.

namespace detail {

struct Frame {
  std::vector<std::pair<std::string, Value>> vars;
  Value const* find(std::string_view k) const {
    for (auto it = vars.rbegin(); it != vars.rend(); ++it)
      if (it->first == k) return &it->second;
    return nullptr;
  }
  void set(std::string const& k, Value v) {
    for (auto& [key, val] : vars)
      if (key == k) {
        val = std::move(v);
        return;
      }
    vars.emplace_back(k, std::move(v));
  }
};

enum class Flow { normal, break_, continue_ };

class Renderer {
 public:
  Renderer(Limits const& lim, std::string& out) : lim_(lim), out_(out) {}

  std::vector<Frame> frames;

  Flow exec(Body const& body) {
    for (auto const& n : body) {
      Flow const f = exec(*n);
      if (f != Flow::normal) return f;
    }
    return Flow::normal;
  }

 private:
  Limits const& lim_;
  std::string& out_;
  mutable std::uint64_t steps_ = 0;
  int call_depth_ = 0;

  [[noreturn]] void fail(int line, std::string const& what) const {
    throw value_error(msg("rlflow::jinja: ", where_line(line), what));
  }
  void step(int line) {
    if (++steps_ > lim_.max_steps)
      fail(line, msg("the render took more than ", lim_.max_steps, " steps (Limits::max_steps); the template loops too long"));
  }
  void emit(std::string_view s, int line) {
    if (out_.size() + s.size() > lim_.max_output_bytes)
      fail(line, msg("the output would exceed ", lim_.max_output_bytes, " bytes (Limits::max_output_bytes)"));
    out_ += s;
  }
  //! A new string of n bytes: bounded by max_output_bytes, and charged to the step budget (one
  //! step per 64 bytes), so the text a render builds in all is bounded too.
  void check_size(std::size_t n, int line, bool charge = true) const {
    if (n > lim_.max_output_bytes) fail(line, msg("a string of ", n, " bytes exceeds Limits::max_output_bytes (", lim_.max_output_bytes, ")"));
    if (charge) steps_ += n / 64;
    if (steps_ > lim_.max_steps)
      fail(line, msg("the render took more than ", lim_.max_steps, " steps (Limits::max_steps, one per expression, loop iteration or 64 bytes of built text)"));
  }

  Value lookup(std::string const& name) const {
    for (auto it = frames.rbegin(); it != frames.rend(); ++it)
      if (auto const* v = it->find(name)) return *v;
    static constexpr std::string_view builtins[] = {"range", "namespace", "raise_exception", "dict", "strftime_now"};
    if (std::find(std::begin(builtins), std::end(builtins), name) != std::end(builtins)) return Value(Value::Data(Value::Builtin{name}));
    return Value::undefined(name);
  }

  Flow exec(Node const& n) {
    step(n.line);
    switch (n.kind) {
      case Node::Kind::text: emit(n.text, n.line); return Flow::normal;
      case Node::Kind::output: {
        Value const v = eval(*n.expr);
        if (v.is_string()) emit(v.str(), n.line);
        else {
          std::string s;
          append_str(s, v);
          emit(s, n.line);
        }
        return Flow::normal;
      }
      case Node::Kind::if_:
        for (auto const& [cond, body] : n.branches)
          if (truthy(eval(*cond))) return exec(body);
        return exec(n.else_body);
      case Node::Kind::for_: return exec_for(n);
      case Node::Kind::set: {
        Value v = eval(*n.expr);
        if (n.attr_set) {
          Value const ns = lookup(n.targets[0]);
          if (!ns.is_namespace())
            fail(n.line, msg("'{% set ", n.targets[0], ".", n.targets[1], " %}' needs '", n.targets[0],
                             "' to be a namespace(), but it is ", ns.is_undefined() ? "undefined" : ns.type_name()));
          if (v.is_namespace()) fail(n.line, "a namespace() cannot be stored in a namespace; keep it in its own variable");
          std::get<Value::Namespace>(ns.v).attrs->set(n.targets[1], std::move(v));
        } else if (n.targets.size() == 1) {
          frames.back().set(n.targets[0], std::move(v));
        } else {
          unpack(n.targets, v, n.line);
        }
        return Flow::normal;
      }
      case Node::Kind::set_block: {
        std::string text;
        std::swap(text, out_);  // the body renders into an empty buffer
        try {
          exec(n.body);
        } catch (...) {
          std::swap(text, out_);
          throw;
        }
        std::swap(text, out_);  // 'text' now holds what the body wrote
        frames.back().set(n.targets[0], Value(std::move(text)));
        return Flow::normal;
      }
      case Node::Kind::macro: {
        auto m = std::make_shared<Macro const>(Macro{&n});
        frames.back().set(n.text, Value(Value::Data(std::shared_ptr<Macro const>(std::move(m)))));
        return Flow::normal;
      }
      case Node::Kind::break_: return Flow::break_;
      case Node::Kind::continue_: return Flow::continue_;
      case Node::Kind::block: return exec(n.body);
    }
    return Flow::normal;
  }

  void unpack(std::vector<std::string> const& names, Value const& v, int line) {
    std::vector<Value> items = iterate(v, line);
    if (items.size() != names.size())
      fail(line, msg("cannot unpack ", items.size(), " values into ", names.size(), " names"));
    for (std::size_t k = 0; k < names.size(); ++k) frames.back().set(names[k], items[k]);
  }

  //! The elements of an iterable (Python's iter()): a list's items, a dict's keys, a string's
  //! characters; undefined is empty.
  std::vector<Value> iterate(Value const& v, int line) const {
    std::vector<Value> r;
    if (v.is_list()) return v.list();
    if (v.is_dict()) {
      for (auto const& kv : v.dict().items) r.emplace_back(kv.first);
      return r;
    }
    if (v.is_string()) {
      auto const at = code_points(v.str());
      for (std::size_t k = 0; k + 1 < at.size(); ++k) r.emplace_back(v.str().substr(at[k], at[k + 1] - at[k]));
      return r;
    }
    if (v.is_undefined()) return r;
    fail(line, msg("'", v.type_name(), "' object is not iterable"));
  }

  Flow exec_for(Node const& n) {
    Value const seq = eval(*n.expr);
    std::vector<Value> items = iterate(seq, n.line);
    if (n.filter) {
      std::vector<Value> kept;
      for (auto& it : items) {
        frames.emplace_back();
        bind(n, it);
        bool const keep = truthy(eval(*n.filter));
        frames.pop_back();
        if (keep) kept.push_back(std::move(it));
      }
      items = std::move(kept);
    }
    if (items.empty()) return exec(n.else_body);
    auto const len = static_cast<std::int64_t>(items.size());
    for (std::int64_t k = 0; k < len; ++k) {
      step(n.line);
      frames.emplace_back();
      Dict loop;
      loop.items = {{"index", Value(k + 1)},
                    {"index0", Value(k)},
                    {"revindex", Value(len - k)},
                    {"revindex0", Value(len - k - 1)},
                    {"first", Value(k == 0)},
                    {"last", Value(k == len - 1)},
                    {"length", Value(len)},
                    {"depth", Value(1)},
                    {"depth0", Value(0)},
                    {"previtem", k > 0 ? items[static_cast<std::size_t>(k - 1)] : Value::undefined("loop.previtem")},
                    {"nextitem", k + 1 < len ? items[static_cast<std::size_t>(k + 1)] : Value::undefined("loop.nextitem")}};
      frames.back().set("loop", Value(std::move(loop)));
      bind(n, items[static_cast<std::size_t>(k)]);
      Flow f;
      try {
        f = exec(n.body);
      } catch (...) {
        frames.pop_back();
        throw;
      }
      frames.pop_back();
      if (f == Flow::break_) break;
    }
    return Flow::normal;
  }
  void bind(Node const& n, Value const& item) {
    if (n.targets.size() == 1) frames.back().set(n.targets[0], item);
    else unpack(n.targets, item, n.line);
  }

 public:
  static bool truthy(Value const& v) {
    return std::visit(
        [](auto const& a) -> bool {
          using T = std::decay_t<decltype(a)>;
          if constexpr (std::is_same_v<T, Value::Undefined> || std::is_same_v<T, Value::None>) return false;
          else if constexpr (std::is_same_v<T, bool>) return a;
          else if constexpr (std::is_same_v<T, std::int64_t> || std::is_same_v<T, double>) return a != 0;
          else if constexpr (std::is_same_v<T, Value::Str>) return !a->empty();
          else if constexpr (std::is_same_v<T, std::shared_ptr<ListBox const>>) return !a->items.empty();
          else if constexpr (std::is_same_v<T, std::shared_ptr<Dict const>>) return !a->items.empty();
          else return true;
        },
        v.v);
  }

 private:
  static double num(Value const& v) {
    if (v.is_int()) return static_cast<double>(std::get<std::int64_t>(v.v));
    if (v.is_bool()) return std::get<bool>(v.v) ? 1 : 0;
    return std::get<double>(v.v);
  }
  static bool intlike(Value const& v) { return v.is_int() || v.is_bool(); }
  static std::int64_t as_int(Value const& v) { return v.is_bool() ? std::get<bool>(v.v) : std::get<std::int64_t>(v.v); }

  static bool equal(Value const& a, Value const& b) {
    if (a.is_number() && b.is_number()) {
      if (intlike(a) && intlike(b)) return as_int(a) == as_int(b);
      return num(a) == num(b);
    }
    if (a.v.index() != b.v.index()) return false;
    if (a.is_undefined() || a.is_none()) return true;
    if (a.is_string()) return a.str() == b.str();
    if (a.is_list()) {
      auto const &x = a.list(), &y = b.list();
      if (x.size() != y.size()) return false;
      for (std::size_t k = 0; k < x.size(); ++k)
        if (!equal(x[k], y[k])) return false;
      return true;
    }
    if (a.is_dict()) {
      auto const &x = a.dict().items, &y = b.dict().items;
      if (x.size() != y.size()) return false;
      for (auto const& [k, v] : x) {
        auto const* w = b.dict().find(k);
        if (!w || !equal(v, *w)) return false;
      }
      return true;
    }
    if (a.is_namespace()) return std::get<Value::Namespace>(a.v).attrs == std::get<Value::Namespace>(b.v).attrs;
    if (std::holds_alternative<Value::Builtin>(a.v)) return std::get<Value::Builtin>(a.v).name == std::get<Value::Builtin>(b.v).name;
    return std::get<std::shared_ptr<Macro const>>(a.v) == std::get<std::shared_ptr<Macro const>>(b.v);
  }
  //! a < b (Python ordering of numbers, strings and lists).
  bool less(Value const& a, Value const& b, int line) const {
    if (a.is_number() && b.is_number()) {
      if (intlike(a) && intlike(b)) return as_int(a) < as_int(b);
      return num(a) < num(b);
    }
    if (a.is_string() && b.is_string()) return a.str() < b.str();
    if (a.is_list() && b.is_list()) {
      auto const &x = a.list(), &y = b.list();
      for (std::size_t k = 0; k < std::min(x.size(), y.size()); ++k)
        if (!equal(x[k], y[k])) return less(x[k], y[k], line);
      return x.size() < y.size();
    }
    undefined_check(a, line);
    undefined_check(b, line);
    fail(line, msg("'<' is not supported between '", a.type_name(), "' and '", b.type_name(), "'"));
  }
  void undefined_check(Value const& v, int line) const {
    if (v.is_undefined()) fail(line, undefined_msg(v));
  }
  static std::string undefined_msg(Value const& v) {
    auto const& nm = std::get<Value::Undefined>(v.v).name;
    return nm.empty() ? std::string("a value is undefined") : "'" + nm + "' is undefined";
  }
  bool contains(Value const& hay, Value const& needle, int line) const {
    if (hay.is_string()) {
      if (!needle.is_string()) fail(line, msg("'in <string>' needs a string on the left, not '", needle.type_name(), "'"));
      return hay.str().find(needle.str()) != std::string::npos;
    }
    if (hay.is_list()) {
      for (auto const& e : hay.list())
        if (equal(e, needle)) return true;
      return false;
    }
    if (hay.is_dict()) return needle.is_string() && hay.dict().find(needle.str()) != nullptr;
    if (hay.is_undefined()) return false;
    fail(line, msg("argument of type '", hay.type_name(), "' is not iterable ('in')"));
  }

  static std::int64_t checked(bool overflow, std::int64_t r, int line, Renderer const& self) {
    if (overflow) self.fail(line, "integer overflow (rlflow's Jinja integers are 64-bit)");
    return r;
  }

  Value arith(std::string const& op, Value const& a, Value const& b, int line) const {
    if (op == "~") {
      std::string s = to_str(a);
      append_str(s, b);
      check_size(s.size(), line);
      return Value(std::move(s));
    }
    if (op == "%" && a.is_string() && a.str().find('%') == std::string::npos && (b.is_list() || b.is_dict() || b.is_undefined()))
      return a;  // Python: a format without conversions and a mapping-like argument
    if (op == "%" && a.is_string())
      fail(line, a.str().find('%') == std::string::npos ? std::string("not all arguments converted during string formatting")
                                                         : std::string("'%' string formatting is not supported by rlflow's Jinja engine; use '~' or format the parts"));
    undefined_check(a, line);
    undefined_check(b, line);
    if (op == "+") {
      if (a.is_string() && b.is_string()) {
        check_size(a.str().size() + b.str().size(), line);
        return Value(a.str() + b.str());
      }
      if (a.is_list() && b.is_list()) {
        if (a.list().size() + b.list().size() > static_cast<std::size_t>(lim_.max_range))
          fail(line, msg("a list of more than ", lim_.max_range, " elements (Limits::max_range)"));
        List l = a.list();
        l.insert(l.end(), b.list().begin(), b.list().end());
        return Value(std::move(l));
      }
    }
    if (op == "*" && ((a.is_string() && intlike(b)) || (intlike(a) && b.is_string()))) {
      std::string const& s = a.is_string() ? a.str() : b.str();
      std::int64_t const k = std::max<std::int64_t>(0, as_int(a.is_string() ? b : a));
      if (k > 0 && s.size() > lim_.max_output_bytes / static_cast<std::size_t>(k)) check_size(lim_.max_output_bytes + 1, line);
      check_size(s.size() * static_cast<std::size_t>(k), line);
      std::string r;
      for (std::int64_t j = 0; j < k; ++j) r += s;
      return Value(std::move(r));
    }
    if (op == "*" && ((a.is_list() && intlike(b)) || (intlike(a) && b.is_list()))) {
      List const& l = a.is_list() ? a.list() : b.list();
      std::int64_t const k = std::max<std::int64_t>(0, as_int(a.is_list() ? b : a));
      if (k > 0 && l.size() > static_cast<std::size_t>(lim_.max_range) / static_cast<std::size_t>(k))
        fail(line, msg("a repeated list of more than ", lim_.max_range, " elements (Limits::max_range)"));
      List r;
      for (std::int64_t j = 0; j < k; ++j) r.insert(r.end(), l.begin(), l.end());
      return Value(std::move(r));
    }
    if (!a.is_number() || !b.is_number())
      fail(line, msg("unsupported operand types for ", op, ": '", a.type_name(), "' and '", b.type_name(), "'"));
    if (intlike(a) && intlike(b) && op != "/") {
      std::int64_t const x = as_int(a), y = as_int(b);
      std::int64_t r = 0;
      if (op == "+") {
        bool const o = __builtin_add_overflow(x, y, &r);
        return Value(checked(o, r, line, *this));
      }
      if (op == "-") {
        bool const o = __builtin_sub_overflow(x, y, &r);
        return Value(checked(o, r, line, *this));
      }
      if (op == "*") {
        bool const o = __builtin_mul_overflow(x, y, &r);
        return Value(checked(o, r, line, *this));
      }
      if (op == "//" || op == "%") {
        if (y == 0) fail(line, "integer division or modulo by zero");
        if (x == std::numeric_limits<std::int64_t>::min() && y == -1) fail(line, "integer overflow (rlflow's Jinja integers are 64-bit)");
        std::int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          --q;
          m += y;
        }
        return Value(op == "//" ? q : m);
      }
      if (op == "**") {
        if (y < 0) return Value(std::pow(static_cast<double>(x), static_cast<double>(y)));
        std::int64_t acc = 1;
        for (std::int64_t e = 0; e < y; ++e) {
          if (__builtin_mul_overflow(acc, x, &acc)) fail(line, "integer overflow (rlflow's Jinja integers are 64-bit)");
          if (acc == 0 || acc == 1) break;
        }
        return Value(acc);
      }
    }
    double const x = num(a), y = num(b);
    if (op == "+") return Value(x + y);
    if (op == "-") return Value(x - y);
    if (op == "*") return Value(x * y);
    if (op == "/") {
      if (y == 0) fail(line, "division by zero");
      return Value(x / y);
    }
    if (op == "//" || op == "%") {
      if (y == 0) fail(line, "float division or modulo by zero");
      // CPython's float_divmod
      double m = std::fmod(x, y);
      double div = (x - m) / y;
      if (m != 0) {
        if ((y < 0) != (m < 0)) {
          m += y;
          div -= 1;
        }
      } else {
        m = std::copysign(0.0, y);
      }
      double fl;
      if (div != 0) {
        fl = std::floor(div);
        if (div - fl > 0.5) fl += 1;
      } else {
        fl = std::copysign(0.0, x / y);
      }
      return Value(op == "//" ? fl : m);
    }
    if (op == "**") return Value(std::pow(x, y));
    fail(line, msg("unknown operator '", op, "'"));
  }

  Value getattr(Value const& obj, std::string const& name, int line) const {
    if (obj.is_dict()) {
      if (auto const* v = obj.dict().find(name)) return *v;
      return Value::undefined(name);
    }
    if (obj.is_namespace()) {
      if (auto const* v = std::get<Value::Namespace>(obj.v).attrs->find(name)) return *v;
      return Value::undefined(name);
    }
    if (obj.is_undefined()) fail(line, msg(undefined_msg(obj), " (reading its attribute '", name, "')"));
    return Value::undefined(name);
  }

  static std::int64_t py_index(std::int64_t i, std::int64_t n) { return i < 0 ? i + n : i; }

  Value getitem(Value const& obj, Value const& key, int line) const {
    if (obj.is_undefined()) fail(line, msg(undefined_msg(obj), " (reading an item)"));
    if (obj.is_dict() || obj.is_namespace()) {
      if (!key.is_string()) return Value::undefined("");
      return getattr(obj, key.str(), line);
    }
    if ((obj.is_list() || obj.is_string()) && intlike(key)) {
      if (obj.is_list()) {
        auto const n = static_cast<std::int64_t>(obj.list().size());
        auto const i = py_index(as_int(key), n);
        if (i < 0 || i >= n) return Value::undefined("");
        return obj.list()[static_cast<std::size_t>(i)];
      }
      auto const at = code_points(obj.str());
      auto const n = static_cast<std::int64_t>(at.size() - 1);
      auto const i = py_index(as_int(key), n);
      if (i < 0 || i >= n) return Value::undefined("");
      return Value(obj.str().substr(at[static_cast<std::size_t>(i)], at[static_cast<std::size_t>(i) + 1] - at[static_cast<std::size_t>(i)]));
    }
    if (key.is_string()) return getattr(obj, key.str(), line);
    return Value::undefined("");
  }

  Value slice(Value const& obj, Value const& a, Value const& b, Value const& c, int line) const {
    undefined_check(obj, line);
    // Jinja2 slices with Python's own subscript: bounds are integers or none, the object a list or string
    auto bound = [&](Value const& v, char const* what) -> std::optional<std::int64_t> {
      if (v.is_none()) return std::nullopt;
      if (!intlike(v)) fail(line, msg("slice ", what, " must be an integer or none, not '", v.type_name(), "'"));
      return as_int(v);
    };
    auto const start = bound(a, "start"), stop = bound(b, "stop"), stp = bound(c, "step");
    std::int64_t const st = stp.value_or(1);
    if (st == 0) fail(line, "slice step cannot be zero");
    std::vector<std::size_t> at;
    std::int64_t n;
    if (obj.is_list()) n = static_cast<std::int64_t>(obj.list().size());
    else if (obj.is_string()) {
      at = code_points(obj.str());
      n = static_cast<std::int64_t>(at.size() - 1);
    } else fail(line, msg("'", obj.type_name(), "' object cannot be sliced"));
    auto adjust = [&](std::optional<std::int64_t> v, std::int64_t dflt) {
      if (!v) return dflt;
      std::int64_t x = *v;
      if (x < 0) {
        x += n;
        if (x < 0) x = st < 0 ? -1 : 0;
      } else if (x >= n) x = st < 0 ? n - 1 : n;
      return x;
    };
    std::int64_t const lo = adjust(start, st < 0 ? n - 1 : 0), hi = adjust(stop, st < 0 ? -1 : n);
    std::vector<std::int64_t> idx;
    for (std::int64_t k = lo; st > 0 ? k < hi : k > hi; k += st) idx.push_back(k);
    if (obj.is_list()) {
      List l;
      l.reserve(idx.size());
      for (auto k : idx) l.push_back(obj.list()[static_cast<std::size_t>(k)]);
      return Value(std::move(l));
    }
    std::string s;
    for (auto k : idx) s.append(obj.str(), at[static_cast<std::size_t>(k)], at[static_cast<std::size_t>(k) + 1] - at[static_cast<std::size_t>(k)]);
    return Value(std::move(s));
  }

  struct Args {
    std::vector<Value> pos;
    std::vector<std::pair<std::string, Value>> kw;
    Value const* get(std::size_t i, char const* name) const {
      for (auto const& [k, v] : kw)
        if (k == name) return &v;
      return i < pos.size() ? &pos[i] : nullptr;
    }
  };
  Args eval_args(Expr const& e, std::size_t from) {
    Args a;
    for (std::size_t k = from; k < e.kids.size(); ++k) {
      if (e.keywords[k].empty()) a.pos.push_back(eval(*e.kids[k]));
      else a.kw.emplace_back(e.keywords[k], eval(*e.kids[k]));
    }
    return a;
  }
  void arity(Args const& a, std::size_t most, std::string const& what, int line) const {
    if (a.pos.size() + a.kw.size() > most) fail(line, msg(what, " takes at most ", most, " argument", most == 1 ? "" : "s", ", got ", a.pos.size() + a.kw.size()));
  }
  std::string str_arg(Value const* v, std::string const& what, int line) const {
    if (!v || !v->is_string()) fail(line, msg(what, " needs a string argument, got ", v ? v->type_name() : "none"));
    return v->str();
  }

  // Python string helpers (whitespace: ASCII).
  //! Python's strip: code points in 'chars', or Unicode whitespace when chars is null.
  static std::string strip(std::string const& s, Value const* chars, bool left, bool right) {
    std::vector<std::string> set;
    bool const custom = chars && chars->is_string();
    if (custom) {
      auto const at = code_points(chars->str());
      for (std::size_t k = 0; k + 1 < at.size(); ++k) set.push_back(chars->str().substr(at[k], at[k + 1] - at[k]));
    }
    auto len_at = [&](std::size_t i) -> std::size_t {
      if (!custom) return space_at(s, i);
      for (auto const& c : set)
        if (s.compare(i, c.size(), c) == 0) return c.size();
      return 0;
    };
    auto len_before = [&](std::size_t e) -> std::size_t {
      if (!custom) return space_before(s, e);
      for (auto const& c : set)
        if (c.size() <= e && s.compare(e - c.size(), c.size(), c) == 0) return c.size();
      return 0;
    };
    std::size_t a = 0, b = s.size();
    if (left)
      for (std::size_t n; a < b && (n = len_at(a)) != 0;) a += n;
    if (right)
      for (std::size_t n; b > a && (n = len_before(b)) != 0 && b - n >= a;) b -= n;
    return s.substr(a, b - a);
  }
  List split(std::string const& s, Value const* sep, std::int64_t maxsplit, int line) const {
    List out;
    if (!sep || sep->is_none()) {
      std::size_t k = 0;
      while (k < s.size()) {
        k += lstrip_len(std::string_view(s).substr(k));
        if (k >= s.size()) break;
        if (maxsplit >= 0 && static_cast<std::int64_t>(out.size()) == maxsplit) {
          out.emplace_back(s.substr(k));  // the rest, trailing whitespace kept (Python)
          break;
        }
        std::size_t e = k;
        while (e < s.size() && space_at(s, e) == 0) ++e;
        out.emplace_back(s.substr(k, e - k));
        k = e;
      }
      return out;
    }
    if (!sep->is_string()) fail(line, msg("split: the separator must be a string, not '", sep->type_name(), "'"));
    std::string const& d = sep->str();
    if (d.empty()) fail(line, "split: empty separator");
    std::size_t k = 0;
    for (;;) {
      auto const p = (maxsplit >= 0 && static_cast<std::int64_t>(out.size()) >= maxsplit) ? std::string::npos : s.find(d, k);
      if (p == std::string::npos) {
        out.emplace_back(s.substr(k));
        return out;
      }
      out.emplace_back(s.substr(k, p - k));
      k = p + d.size();
    }
  }
  std::string replace(std::string const& s, std::string const& a, std::string const& b, std::int64_t count, int line) const {
    std::string r;
    std::size_t k = 0;
    std::int64_t done = 0;
    if (a.empty()) {  // Python inserts b between characters
      auto const at = code_points(s);
      for (std::size_t j = 0; j + 1 < at.size(); ++j) {
        if (count < 0 || done < count) {
          r += b;
          ++done;
        }
        r.append(s, at[j], at[j + 1] - at[j]);
        check_size(r.size(), line, false);
      }
      if (count < 0 || done < count) r += b;
      check_size(r.size(), line);
      return r;
    }
    for (;;) {
      auto const p = (count >= 0 && done >= count) ? std::string::npos : s.find(a, k);
      if (p == std::string::npos) break;
      r.append(s, k, p - k);
      r += b;
      check_size(r.size(), line, false);
      k = p + a.size();
      ++done;
    }
    r.append(s, k);
    check_size(r.size(), line);
    return r;
  }
  static std::string case_map(std::string s, int mode) {  // 0 lower, 1 upper, 2 capitalize, 3 title
    bool word_start = true;
    for (std::size_t k = 0; k < s.size(); ++k) {
      auto& c = s[k];
      bool const alpha = std::isalpha(static_cast<unsigned char>(c));
      if (mode == 0) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      else if (mode == 1) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      else if (mode == 2) c = static_cast<char>(k == 0 ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
      else c = static_cast<char>(word_start ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
      word_start = !alpha;
    }
    return s;
  }
  //! Python's float(str) for plain decimal text (surrounding whitespace, sign, digits with '_',
  //! point, exponent, inf/nan); nullopt when it does not parse.
  static std::optional<double> parse_float(std::string const& text) {
    std::string s = strip(text, nullptr, true, true);
    std::string clean;
    for (std::size_t k = 0; k < s.size(); ++k) {
      if (s[k] == '_' && k > 0 && k + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[k - 1])) &&
          std::isdigit(static_cast<unsigned char>(s[k + 1])))
        continue;
      clean += s[k];
    }
    if (clean.empty() || clean.find_first_of("xXpP") != std::string::npos) return std::nullopt;
    char* end = nullptr;
    double const d = std::strtod(clean.c_str(), &end);
    if (end != clean.c_str() + clean.size()) return std::nullopt;
    return d;
  }
  std::int64_t int_arg(Value const* v, std::int64_t dflt, std::string const& what, int line) const {
    if (!v || v->is_none()) return dflt;
    if (!intlike(*v)) fail(line, msg(what, " needs an integer, got '", v->type_name(), "'"));
    return as_int(*v);
  }

  Value method(Value const& obj, std::string const& name, Args const& a, int line) {
    std::string const what = msg("'", obj.type_name(), ".", name, "()'");
    if (obj.is_string()) {
      std::string const& s = obj.str();
      if (name == "startswith" || name == "endswith") {
        arity(a, 1, what, line);
        Value const* p = a.get(0, "prefix");
        auto test = [&](std::string const& x) {
          return name == "startswith" ? s.compare(0, x.size(), x) == 0 && s.size() >= x.size()
                                      : s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
        };
        if (p && p->is_list()) {
          for (auto const& x : p->list())
            if (test(str_arg(&x, what, line))) return Value(true);
          return Value(false);
        }
        return Value(test(str_arg(p, what, line)));
      }
      if (name == "strip" || name == "lstrip" || name == "rstrip") {
        arity(a, 1, what, line);
        Value const* c = a.get(0, "chars");
        if (c && !c->is_none() && !c->is_string()) fail(line, msg(what, " needs a string or none"));
        return Value(strip(s, c && c->is_string() ? c : nullptr, name != "rstrip", name != "lstrip"));
      }
      if (name == "split") {
        arity(a, 2, what, line);
        return Value(split(s, a.get(0, "sep"), int_arg(a.get(1, "maxsplit"), -1, what, line), line));
      }
      if (name == "replace") {
        arity(a, 3, what, line);
        return Value(replace(s, str_arg(a.get(0, "old"), what, line), str_arg(a.get(1, "new"), what, line),
                             int_arg(a.get(2, "count"), -1, what, line), line));
      }
      if (name == "upper" || name == "lower" || name == "capitalize" || name == "title") {
        arity(a, 0, what, line);
        return Value(case_map(s, name == "lower" ? 0 : name == "upper" ? 1 : name == "capitalize" ? 2 : 3));
      }
      if (name == "find") {
        arity(a, 1, what, line);
        auto const p = s.find(str_arg(a.get(0, "sub"), what, line));
        if (p == std::string::npos) return Value(std::int64_t{-1});
        return Value(str_len(std::string_view(s).substr(0, p)));
      }
      if (name == "count") {
        arity(a, 1, what, line);
        std::string const x = str_arg(a.get(0, "sub"), what, line);
        if (x.empty()) return Value(str_len(s) + 1);
        std::int64_t c = 0;
        for (std::size_t p = s.find(x); p != std::string::npos; p = s.find(x, p + x.size())) ++c;
        return Value(c);
      }
      if (name == "join") {
        arity(a, 1, what, line);
        Value const* l = a.get(0, "iterable");
        if (!l) fail(line, msg(what, " needs a list"));
        std::string r;
        bool first = true;
        for (auto const& e : iterate(*l, line)) {
          if (!e.is_string()) fail(line, msg(what, ": expected str items, found '", e.type_name(), "'"));
          if (!first) r += s;
          r += e.str();
          first = false;
          check_size(r.size(), line, false);
        }
        check_size(r.size(), line);
        return Value(std::move(r));
      }
      if (name == "isdigit" || name == "isspace" || name == "isalpha" || name == "isalnum") {
        arity(a, 0, what, line);
        if (s.empty()) return Value(false);
        if (name == "isspace") return Value(lstrip_len(s) == s.size());
        auto pred = [&](char c) {
          auto const u = static_cast<unsigned char>(c);
          return name == "isdigit" ? std::isdigit(u) != 0 : name == "isalpha" ? std::isalpha(u) != 0 : std::isalnum(u) != 0;
        };
        return Value(std::all_of(s.begin(), s.end(), pred));
      }
    } else if (obj.is_dict()) {
      auto const& d = obj.dict();
      if (name == "get") {
        arity(a, 2, what, line);
        Value const* k = a.get(0, "key");
        if (!k) fail(line, msg(what, " needs a key"));
        if (k->is_string())
          if (auto const* v = d.find(k->str())) return *v;
        Value const* dflt = a.get(1, "default");
        return dflt ? *dflt : Value(nullptr);
      }
      if (name == "items" || name == "keys" || name == "values") {
        arity(a, 0, what, line);
        List l;
        for (auto const& [k, v] : d.items) {
          if (name == "items") l.emplace_back(List{Value(k), v});
          else if (name == "keys") l.emplace_back(k);
          else l.push_back(v);
        }
        return Value(std::move(l));
      }
      if (name == "cycle" && d.find("index0") && d.find("revindex0")) {  // loop.cycle(a, b, ...)
        if (a.pos.empty() || !a.kw.empty()) fail(line, "loop.cycle() takes one or more positional arguments");
        auto const k = std::get<std::int64_t>(d.find("index0")->v);
        return a.pos[static_cast<std::size_t>(k) % a.pos.size()];
      }
      if (auto const* v = d.find(name))
        if (v->is_callable()) return call_value(*v, a, line, name);
    } else if (obj.is_list()) {
      if (name == "count" || name == "index") {
        arity(a, 1, what, line);
        Value const* x = a.get(0, "value");
        if (!x) fail(line, msg(what, " needs a value"));
        auto const& l = obj.list();
        std::int64_t c = 0;
        for (std::size_t k = 0; k < l.size(); ++k)
          if (equal(l[k], *x)) {
            if (name == "index") return Value(static_cast<std::int64_t>(k));
            ++c;
          }
        if (name == "index") fail(line, msg(what, ": the value is not in the list"));
        return Value(c);
      }
    } else if (obj.is_namespace()) {
      if (auto const* v = std::get<Value::Namespace>(obj.v).attrs->find(name))
        if (v->is_callable()) return call_value(*v, a, line, name);
    } else if (obj.is_undefined()) {
      fail(line, msg(undefined_msg(obj), " (calling its method '", name, "')"));
    }
    fail(line, msg(what, " is not supported by rlflow's Jinja engine (no such method, or not one chat templates use)"));
  }

  Value call_value(Value const& f, Args const& a, int line, std::string const& name) {
    if (auto const* b = std::get_if<Value::Builtin>(&f.v)) return builtin(b->name, a, line);
    if (auto const* m = std::get_if<std::shared_ptr<Macro const>>(&f.v)) return call_macro(**m, a, line);
    if (f.is_undefined()) fail(line, msg(undefined_msg(f), " (called as a function)"));
    fail(line, msg("'", name, "' is a '", f.type_name(), "', which is not callable"));
  }

  Value call_macro(Macro const& m, Args const& a, int line) {
    Node const& n = *m.node;
    if (a.pos.size() > n.params.size())
      fail(line, msg("macro '", n.text, "' takes ", n.params.size(), " arguments, got ", a.pos.size()));
    if (++call_depth_ > lim_.max_depth) {
      --call_depth_;
      fail(line, msg("macro calls nest deeper than ", lim_.max_depth, " (Limits::max_depth)"));
    }
    struct Restore {
      Renderer& r;
      std::vector<Frame> saved;
      ~Restore() {
        r.frames = std::move(saved);
        --r.call_depth_;
      }
    } restore{*this, frames};
    Frame f;
    for (auto const& [k, v] : a.kw)
      if (std::find(n.params.begin(), n.params.end(), k) == n.params.end())
        fail(line, msg("macro '", n.text, "' has no parameter '", k, "'"));
    // the macro sees the template's top-level names and its own parameters
    std::vector<Frame> scope{frames.front()};
    frames = std::move(scope);
    for (std::size_t k = 0; k < n.params.size(); ++k) {
      Value const* v = k < a.pos.size() ? &a.pos[k] : nullptr;
      for (auto const& [kk, vv] : a.kw)
        if (kk == n.params[k]) v = &vv;
      f.set(n.params[k], v ? *v : n.defaults[k] ? eval(*n.defaults[k]) : Value::undefined(n.params[k]));
    }
    frames.push_back(std::move(f));
    std::string saved;
    std::swap(saved, out_);
    try {
      exec(n.body);
    } catch (...) {
      std::swap(saved, out_);
      throw;
    }
    std::swap(saved, out_);
    return Value(std::move(saved));
  }

  Value builtin(std::string const& name, Args const& a, int line) {
    if (name == "raise_exception") {
      Value const* m = a.get(0, "message");
      throw value_error(msg("rlflow::jinja: ", where_line(line), "the template raised an exception: ", m ? to_str(*m) : std::string()));
    }
    if (name == "range") {
      if (!a.kw.empty() || a.pos.empty() || a.pos.size() > 3) fail(line, "range() takes 1 to 3 positional integer arguments");
      for (auto const& v : a.pos)
        if (!intlike(v)) fail(line, msg("range() needs integers, got '", v.type_name(), "'"));
      std::int64_t lo = 0, hi, st = 1;
      if (a.pos.size() == 1) hi = as_int(a.pos[0]);
      else {
        lo = as_int(a.pos[0]);
        hi = as_int(a.pos[1]);
        if (a.pos.size() == 3) st = as_int(a.pos[2]);
      }
      if (st == 0) fail(line, "range() step must not be zero");
      long double const cnt = st > 0 ? std::ceil((static_cast<long double>(hi) - lo) / st) : std::ceil((static_cast<long double>(lo) - hi) / -static_cast<long double>(st));
      if (cnt > static_cast<long double>(lim_.max_range))
        fail(line, msg("range() of ", static_cast<double>(cnt), " elements exceeds Limits::max_range (", lim_.max_range, ")"));
      List l;
      for (std::int64_t k = lo; st > 0 ? k < hi : k > hi; k += st) l.emplace_back(k);
      return Value(std::move(l));
    }
    if (name == "namespace" || name == "dict") {
      auto d = std::make_shared<Dict>();
      if (!a.pos.empty()) {
        if (a.pos.size() > 1 || !a.pos[0].is_dict()) fail(line, msg(name, "() takes keyword arguments or one dict"));
        *d = a.pos[0].dict();
      }
      for (auto const& [k, v] : a.kw) {
        if (v.is_namespace()) fail(line, msg(name, "(): a namespace() cannot be stored in a ", name, "; keep it in its own variable"));
        d->set(k, v);
      }
      if (name == "dict") return Value(Dict(*d));
      return Value(Value::Data(Value::Namespace{std::move(d)}));
    }
    if (name == "strftime_now") {
      Value const* f = a.get(0, "format");
      std::string const fmt = str_arg(f, "strftime_now()", line);
      std::time_t const now = std::time(nullptr);
      std::tm tm{};
      localtime_r(&now, &tm);
      char buf[256];
      std::size_t const k = std::strftime(buf, sizeof buf, fmt.c_str(), &tm);
      return Value(std::string(buf, k));
    }
    fail(line, msg("unknown function '", name, "'"));
  }

  Value filter(Expr const& e) {
    Value const x = eval(*e.kids[0]);
    Args const a = eval_args(e, 1);
    std::string const& f = e.name;
    int const line = e.line;
    std::string const what = "the filter '" + f + "'";
    if (f == "tojson") {  // transformers' tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
      arity(a, 4, what, line);
      JsonStyle st;
      if (Value const* ea = a.get(0, "ensure_ascii")) st.ensure_ascii = truthy(*ea);
      if (Value const* ind = a.get(1, "indent"); ind && !ind->is_none()) {
        if (!intlike(*ind) || as_int(*ind) > 64) fail(line, "tojson: indent must be an integer up to 64 or none");
        st.indent = static_cast<int>(std::max<std::int64_t>(0, as_int(*ind)));
      }
      st.item_sep = st.indent >= 0 ? "," : ", ";
      if (Value const* sep = a.get(2, "separators"); sep && !sep->is_none()) {
        if (!sep->is_list() || sep->list().size() != 2 || !sep->list()[0].is_string() || !sep->list()[1].is_string())
          fail(line, "tojson: separators must be a pair of strings");
        st.item_sep = sep->list()[0].str();
        st.key_sep = sep->list()[1].str();
      }
      if (Value const* sk = a.get(3, "sort_keys")) st.sort_keys = truthy(*sk);
      std::string s;
      append_json(s, x, st, 0, where_line(line));
      check_size(s.size(), line);
      return Value(std::move(s));
    }
    if (f == "trim") {
      arity(a, 1, what, line);
      Value const* c = a.get(0, "chars");
      return Value(strip(to_str(x), c && c->is_string() ? c : nullptr, true, true));
    }
    if (f == "length" || f == "count") {
      if (x.is_string()) return Value(str_len(x.str()));
      if (x.is_list()) return Value(static_cast<std::int64_t>(x.list().size()));
      if (x.is_dict()) return Value(static_cast<std::int64_t>(x.dict().items.size()));
      if (x.is_undefined()) return Value(std::int64_t{0});
      fail(line, msg("object of type '", x.type_name(), "' has no length"));
    }
    if (f == "string") return Value(to_str(x));
    if (f == "lower" || f == "upper" || f == "capitalize")
      return Value(case_map(to_str(x), f == "lower" ? 0 : f == "upper" ? 1 : 2));
    if (f == "title") {  // Jinja2's title: words start after whitespace, '-', '(', '{', '[' or '<'
      std::string r = to_str(x);
      bool start = true;
      for (auto& c : r) {
        bool const sep = py_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
        c = static_cast<char>(start ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
        start = sep;
      }
      return Value(std::move(r));
    }
    if (f == "default" || f == "d") {
      arity(a, 2, what, line);
      Value const* dv = a.get(0, "default_value");
      Value const* b = a.get(1, "boolean");
      bool const use = x.is_undefined() || (b && truthy(*b) && !truthy(x));
      return use ? (dv ? *dv : Value(std::string())) : x;
    }
    if (f == "join") {
      arity(a, 2, what, line);
      Value const* sep = a.get(0, "d");
      Value const* attr = a.get(1, "attribute");
      std::string const d = sep ? to_str(*sep) : std::string();
      std::string r;
      bool first = true;
      for (auto const& el : iterate(x, line)) {
        if (!first) r += d;
        append_str(r, attr ? getitem(el, *attr, line) : el);
        first = false;
        check_size(r.size(), line, false);
      }
      check_size(r.size(), line);
      return Value(std::move(r));
    }
    if (f == "first" || f == "last") {
      auto const items = iterate(x, line);
      if (items.empty()) return Value::undefined("");
      return f == "first" ? items.front() : items.back();
    }
    if (f == "items") {
      if (x.is_undefined()) return Value(List{});
      if (!x.is_dict()) fail(line, msg("the filter 'items' needs a dict, got '", x.type_name(), "'"));
      List l;
      for (auto const& [k, v] : x.dict().items) l.emplace_back(List{Value(k), v});
      return Value(std::move(l));
    }
    if (f == "list") return Value(iterate(x, line));
    if (f == "reverse") {
      if (x.is_string()) {
        auto const at = code_points(x.str());
        std::string r;
        for (std::size_t k = at.size() - 1; k > 0; --k) r.append(x.str(), at[k - 1], at[k] - at[k - 1]);
        return Value(std::move(r));
      }
      auto items = iterate(x, line);
      std::reverse(items.begin(), items.end());
      return Value(std::move(items));
    }
    if (f == "replace") {
      arity(a, 3, what, line);
      Value const *o = a.get(0, "old"), *nw = a.get(1, "new");
      if (!o || !nw) fail(line, "the filter 'replace' needs old and new");
      return Value(replace(to_str(x), to_str(*o), to_str(*nw), int_arg(a.get(2, "count"), -1, what, line), line));
    }
    if ((f == "int" || f == "float" || f == "abs") && x.is_undefined()) fail(line, msg(undefined_msg(x), " (the filter '", f, "')"));
    if (f == "int") {
      if (intlike(x)) return Value(as_int(x));
      if (x.is_float()) {
        double const d = std::get<double>(x.v);
        if (!(std::fabs(d) < 9.2e18)) fail(line, "int: the float does not fit 64 bits");
        return Value(static_cast<std::int64_t>(d));
      }
      if (x.is_string()) {
        std::string const s = strip(x.str(), nullptr, true, true);
        std::int64_t r = 0;
        std::string_view const digits = !s.empty() && s[0] == '+' ? std::string_view(s).substr(1) : std::string_view(s);
        auto const res = std::from_chars(digits.data(), digits.data() + digits.size(), r);
        if (!digits.empty() && (digits[0] != '-' || digits.size() == s.size()) && res.ec == std::errc() && res.ptr == digits.data() + digits.size())
          return Value(r);
        if (auto const d = parse_float(x.str()); d && std::fabs(*d) < 9.2e18) return Value(static_cast<std::int64_t>(*d));
      }
      Value const* dflt = a.get(0, "default");
      return dflt ? *dflt : Value(std::int64_t{0});
    }
    if (f == "float") {
      if (x.is_number()) return Value(num(x));
      if (x.is_string())
        if (auto const d = parse_float(x.str())) return Value(*d);
      Value const* dflt = a.get(0, "default");
      return dflt ? *dflt : Value(0.0);
    }
    if (f == "abs") {
      if (intlike(x)) return Value(checked(as_int(x) == std::numeric_limits<std::int64_t>::min(), std::llabs(as_int(x)), line, *this));
      if (x.is_number()) return Value(std::fabs(num(x)));
      fail(line, msg("abs: bad operand type '", x.type_name(), "'"));
    }
    if (f == "safe") return x;
    if (f == "map" || f == "selectattr" || f == "rejectattr" || f == "select" || f == "reject") {
      List out;
      if (!truthy(x)) return Value(std::move(out));  // Jinja2 iterates only a true value
      bool const by_attr = f == "selectattr" || f == "rejectattr";
      if (f == "map") {
        Value const* attr = nullptr;
        for (auto const& [k, v] : a.kw)
          if (k == "attribute") attr = &v;
        if (!attr && !a.pos.empty()) {
          if (!a.pos[0].is_string()) fail(line, "map: the filter name must be a string");
          for (auto const& el : iterate(x, line)) out.push_back(apply_simple_filter(a.pos[0].str(), el, line));
          return Value(std::move(out));
        }
        if (!attr) fail(line, "map needs attribute='name' or a filter name");
        Value const* dflt = nullptr;
        for (auto const& [k, v] : a.kw)
          if (k == "default") dflt = &v;
        for (auto const& el : iterate(x, line)) {
          Value v = getitem(el, *attr, line);
          out.push_back(v.is_undefined() && dflt ? *dflt : v);
        }
        return Value(std::move(out));
      }
      std::size_t const t0 = by_attr ? 1 : 0;
      if (by_attr && (a.pos.empty() || !a.pos[0].is_string())) fail(line, msg(f, " needs an attribute name"));
      std::string const test_name = a.pos.size() > t0 ? str_arg(&a.pos[t0], what, line) : std::string();
      std::vector<Value> const targs(a.pos.begin() + static_cast<std::ptrdiff_t>(std::min(a.pos.size(), t0 + 1)), a.pos.end());
      bool const want = f == "selectattr" || f == "select";
      for (auto const& el : iterate(x, line)) {
        Value const v = by_attr ? getitem(el, a.pos[0], line) : el;
        bool const ok = test_name.empty() ? truthy(v) : run_test(test_name, v, targs, line);
        if (ok == want) out.push_back(el);
      }
      return Value(std::move(out));
    }
    fail(line, msg("the filter '", f, "' is not supported by rlflow's Jinja engine"));
  }
  Value apply_simple_filter(std::string const& f, Value const& x, int line) {
    if (f == "string") return Value(to_str(x));
    if (f == "lower" || f == "upper") return Value(case_map(to_str(x), f == "lower" ? 0 : 1));
    if (f == "trim") return Value(strip(to_str(x), nullptr, true, true));
    if (f == "tojson") {
      std::string s;
      append_json(s, x, JsonStyle{}, 0, where_line(line));
      return Value(std::move(s));
    }
    fail(line, msg("map: the filter '", f, "' is not supported here"));
  }

  bool run_test(std::string const& t, Value const& x, std::vector<Value> const& args, int line) {
    auto arg = [&]() -> Value const& {
      if (args.empty()) fail(line, msg("the test '", t, "' needs an argument"));
      return args[0];
    };
    if (t == "defined") return !x.is_undefined();
    if (t == "undefined") return x.is_undefined();
    if (t == "none") return x.is_none();
    if (t == "string") return x.is_string();
    if (t == "number") return x.is_number();
    if (t == "integer") return x.is_int();
    if (t == "float") return x.is_float();
    if (t == "boolean") return x.is_bool();
    if (t == "true") return x.is_bool() && std::get<bool>(x.v);
    if (t == "false") return x.is_bool() && !std::get<bool>(x.v);
    if (t == "mapping") return x.is_dict();
    if (t == "iterable") return x.is_string() || x.is_list() || x.is_dict() || x.is_undefined();
    if (t == "sequence") return x.is_string() || x.is_list() || x.is_dict() || x.is_undefined();
    if (t == "callable") return x.is_callable();
    if (t == "lower" || t == "upper") {  // str(value).islower() / isupper()
      std::string const s = to_str(x);
      bool cased = false;
      for (char c : s) {
        if (std::isupper(static_cast<unsigned char>(c))) {
          if (t == "lower") return false;
          cased = true;
        }
        if (std::islower(static_cast<unsigned char>(c))) {
          if (t == "upper") return false;
          cased = true;
        }
      }
      return cased;
    }
    if (t == "even" || t == "odd") return equal(arith("%", x, Value(std::int64_t{2}), line), Value(std::int64_t{t == "odd" ? 1 : 0}));
    if (t == "divisibleby") return equal(arith("%", x, arg(), line), Value(std::int64_t{0}));
    if (t == "eq" || t == "equalto" || t == "==") return equal(x, arg());
    if (t == "ne" || t == "!=") return !equal(x, arg());
    if (t == "lt" || t == "lessthan" || t == "<") return less(x, arg(), line);
    if (t == "gt" || t == "greaterthan" || t == ">") return less(arg(), x, line);
    if (t == "le" || t == "<=") return !less(arg(), x, line);
    if (t == "ge" || t == ">=") return !less(x, arg(), line);
    if (t == "in") return contains(arg(), x, line);
    if (t == "sameas") {
      Value const& y = arg();
      if ((x.is_none() && y.is_none()) || (x.is_bool() && y.is_bool())) return equal(x, y);
      if (x.is_undefined() || y.is_undefined()) return false;
      return false;
    }
    fail(line, msg("the test '", t, "' is not supported by rlflow's Jinja engine"));
  }

 public:
  Value eval(Expr const& e) {
    step(e.line);
    switch (e.kind) {
      case Expr::Kind::literal: return e.lit;
      case Expr::Kind::name: return lookup(e.name);
      case Expr::Kind::list:
      case Expr::Kind::tuple: {
        List l;
        l.reserve(e.kids.size());
        for (auto const& k : e.kids) l.push_back(eval(*k));
        return Value(std::move(l));
      }
      case Expr::Kind::dict: {
        Dict d;
        for (std::size_t k = 0; k + 1 < e.kids.size(); k += 2) {
          Value const key = eval(*e.kids[k]);
          if (!key.is_string()) fail(e.line, msg("dict keys must be strings in rlflow's Jinja engine, got '", key.type_name(), "'"));
          d.set(key.str(), eval(*e.kids[k + 1]));
        }
        return Value(std::move(d));
      }
      case Expr::Kind::attr: return getattr(eval(*e.kids[0]), e.name, e.line);
      case Expr::Kind::index: {
        Value const obj = eval(*e.kids[0]);
        return getitem(obj, eval(*e.kids[1]), e.line);
      }
      case Expr::Kind::slice: {
        Value const obj = eval(*e.kids[0]);
        Value parts[3] = {Value(nullptr), Value(nullptr), Value(nullptr)};
        for (int k = 0; k < 3; ++k)
          if (e.kids[static_cast<std::size_t>(k) + 1]) parts[k] = eval(*e.kids[static_cast<std::size_t>(k) + 1]);
        return slice(obj, parts[0], parts[1], parts[2], e.line);
      }
      case Expr::Kind::call: {
        Expr const& callee = *e.kids[0];
        if (callee.kind == Expr::Kind::attr) {
          Value const obj = eval(*callee.kids[0]);
          Args const a = eval_args(e, 1);
          return method(obj, callee.name, a, e.line);
        }
        Value const f = eval(callee);
        Args const a = eval_args(e, 1);
        return call_value(f, a, e.line, callee.kind == Expr::Kind::name ? callee.name : std::string("expression"));
      }
      case Expr::Kind::filter: return filter(e);
      case Expr::Kind::test: {
        Value const x = eval(*e.kids[0]);
        Args const a = eval_args(e, 1);
        if (!a.kw.empty()) fail(e.line, "tests take positional arguments only");
        bool const r = run_test(e.name, x, a.pos, e.line);
        return Value(r != e.negated);
      }
      case Expr::Kind::neg:
      case Expr::Kind::pos: {
        Value const x = eval(*e.kids[0]);
        undefined_check(x, e.line);
        if (!x.is_number()) fail(e.line, msg("bad operand type for unary ", e.kind == Expr::Kind::neg ? "-" : "+", ": '", x.type_name(), "'"));
        if (e.kind == Expr::Kind::pos) return x.is_bool() ? Value(as_int(x)) : x;
        if (intlike(x)) {
          std::int64_t r = 0;
          bool const o = __builtin_sub_overflow(std::int64_t{0}, as_int(x), &r);
          return Value(checked(o, r, e.line, *this));
        }
        return Value(-num(x));
      }
      case Expr::Kind::not_: return Value(!truthy(eval(*e.kids[0])));
      case Expr::Kind::and_: {
        Value a = eval(*e.kids[0]);
        return truthy(a) ? eval(*e.kids[1]) : a;
      }
      case Expr::Kind::or_: {
        Value a = eval(*e.kids[0]);
        return truthy(a) ? a : eval(*e.kids[1]);
      }
      case Expr::Kind::binary: {
        Value const a = eval(*e.kids[0]);
        Value const b = eval(*e.kids[1]);
        return arith(e.name, a, b, e.line);
      }
      case Expr::Kind::compare: {
        Value left = eval(*e.kids[0]);
        for (std::size_t k = 0; k < e.ops.size(); ++k) {
          Value right = eval(*e.kids[k + 1]);
          std::string const& op = e.ops[k];
          bool r;
          if (op == "==") r = equal(left, right);
          else if (op == "!=") r = !equal(left, right);
          else if (op == "<") r = less(left, right, e.line);
          else if (op == ">") r = less(right, left, e.line);
          else if (op == "<=") r = !less(right, left, e.line);
          else if (op == ">=") r = !less(left, right, e.line);
          else if (op == "in") r = contains(right, left, e.line);
          else r = !contains(right, left, e.line);
          if (!r) return Value(false);
          left = std::move(right);
        }
        return Value(true);
      }
      case Expr::Kind::cond: {
        if (truthy(eval(*e.kids[1]))) return eval(*e.kids[0]);
        return e.kids[2] ? eval(*e.kids[2]) : Value::undefined("");
      }
    }
    return Value();
  }
};

}  // namespace detail

RLFLOW_DECL Template::Template(std::string_view source, Limits limits) : limits_(limits) {
  detail::Parser p(detail::lex(detail::normalize_newlines(source)), limits_);
  body_ = p.parse_template();
}

RLFLOW_DECL std::string Template::render(Value const& vars) const {
  std::string out;
  detail::Renderer r(limits_, out);
  r.frames.emplace_back();
  if (vars.is_dict())
    for (auto const& [k, v] : vars.dict().items) r.frames.back().set(k, v);
  else if (!vars.is_undefined())
    throw value_error(msg("rlflow::jinja::Template::render: the variables must be a dict, got '", vars.type_name(), "'"));
  r.exec(body_);
  return out;
}

}  // namespace rlflow::jinja
