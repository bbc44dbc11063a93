// rlflow/data/chat_template.hpp: Hugging Face chat templates. A small interpreter of the Jinja
// subset that `chat_template`s in tokenizer_config.json use, rendering byte for byte as Jinja2
// does in the environment transformers builds (ImmutableSandboxedEnvironment with
// trim_blocks=True, lstrip_blocks=True, loop controls, `tojson` as json.dumps with
// ensure_ascii=False, `raise_exception` and `strftime_now` globals).
// Hugging Face: PreTrainedTokenizerBase.apply_chat_template (transformers/utils/chat_template_utils.py).
//
//   jinja::Template t(source);                        // parse once; errors name the line
//   std::string s = t.render(jinja::Value::object({{"messages", ...}}));
//   HfChatTemplate c(config["chat_template"]);        // HF's keyword set
//   std::string p = c.render(messages, tools, true, {{"enable_thinking", false}}, bos, eos);
//   HfChatTemplate::named("chatml");                  // folders without a template
//
// What the engine supports is listed in docs/data.md. An unsupported tag or bad syntax is a
// format_error naming the construct and the template line when the template is parsed; an
// unsupported filter, test or method is a value_error naming the line when it runs.
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>
#include <rlflow/core/config.hpp>
#include <rlflow/core/error.hpp>

namespace rlflow::jinja {

//! Bounds on one render: a hostile template cannot loop, recurse or grow without end.
struct Limits {
  std::size_t max_output_bytes = std::size_t{64} << 20;  //!< rendered text and any one string value
  std::uint64_t max_steps = 20'000'000;                   //!< expressions + loop iterations + 64-byte units of built text
  int max_depth = 100;                                    //!< nesting of blocks and expressions (parse) and macro calls (render)
  std::int64_t max_range = 1'000'000;                     //!< elements of one range() or list
};

struct Node;
struct Macro;
class Value;
using List = std::vector<Value>;
//! Deepest nesting of lists and dicts in a value (destruction, printing and comparison recurse
//! once per level); deeper data is a value_error.
inline constexpr int max_value_depth = 256;
struct ListBox {
  List items;
  int depth = 1;
};
//! A dict keeps insertion order (Python's dict); keys are strings.
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  int depth = 1;  //!< set when the dict becomes a Value
  Value const* find(std::string_view k) const;
  void set(std::string const& k, Value v);
};

//! A Jinja value: undefined, none, bool, int, float, string, list, dict, namespace, macro or a
//! built-in function. Lists and dicts are immutable once built (shared); a namespace is mutable.
class Value {
 public:
  struct Undefined { std::string name; };
  struct None {};
  struct Namespace { std::shared_ptr<Dict> attrs; };
  struct Builtin { std::string name; };
  //! Strings are shared: copying a value never copies its text.
  using Str = std::shared_ptr<std::string const>;
  using Data = std::variant<Undefined, None, bool, std::int64_t, double, Str, std::shared_ptr<ListBox const>,
                            std::shared_ptr<Dict const>, Namespace, std::shared_ptr<Macro const>, Builtin>;
  Data v;

  Value() : v(Undefined{}) {}
  Value(Data d) : v(std::move(d)) {}
  Value(std::nullptr_t) : v(None{}) {}
  Value(bool b) : v(b) {}
  Value(int i) : v(std::int64_t{i}) {}
  Value(std::int64_t i) : v(i) {}
  Value(double d) : v(d) {}
  Value(std::string s) : v(std::make_shared<std::string const>(std::move(s))) {}
  Value(char const* s) : v(std::make_shared<std::string const>(s)) {}
  Value(List l) {
    int const d = nested_depth(l.begin(), l.end(), [](Value const& x) -> Value const& { return x; });
    v = std::make_shared<ListBox const>(ListBox{std::move(l), d});
  }
  Value(Dict dict) {
    dict.depth = nested_depth(dict.items.begin(), dict.items.end(), [](auto const& kv) -> Value const& { return kv.second; });
    v = std::make_shared<Dict const>(std::move(dict));
  }
  //! Nesting of lists and dicts (0 for other values).
  int depth() const {
    if (auto const* l = std::get_if<std::shared_ptr<ListBox const>>(&v)) return (*l)->depth;
    if (auto const* d = std::get_if<std::shared_ptr<Dict const>>(&v)) return (*d)->depth;
    return 0;
  }

  static Value undefined(std::string name) { return Value(Data(Undefined{std::move(name)})); }
  //! A dict from (key, value) pairs in order.
  static Value object(std::vector<std::pair<std::string, Value>> kv) { return Value(Dict{std::move(kv)}); }

  //! From JSON (nlohmann::json or nlohmann::ordered_json; object keys keep the container's order).
  template <class Json>
  static Value from_json(Json const& j) {
    switch (j.type()) {
      case Json::value_t::null: return Value(nullptr);
      case Json::value_t::boolean: return Value(j.template get<bool>());
      case Json::value_t::number_integer: return Value(j.template get<std::int64_t>());
      case Json::value_t::number_unsigned: {
        auto const u = j.template get<std::uint64_t>();
        if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
          throw value_error(msg("rlflow::jinja::Value: the JSON integer ", u, " does not fit a signed 64-bit integer; pass it as a string"));
        return Value(static_cast<std::int64_t>(u));
      }
      case Json::value_t::number_float: return Value(j.template get<double>());
      case Json::value_t::string: return Value(j.template get<std::string>());
      case Json::value_t::array: {
        List l;
        l.reserve(j.size());
        for (auto const& e : j) l.push_back(from_json(e));
        return Value(std::move(l));
      }
      case Json::value_t::object: {
        Dict d;
        d.items.reserve(j.size());
        for (auto it = j.begin(); it != j.end(); ++it) d.items.emplace_back(it.key(), from_json(it.value()));
        return Value(std::move(d));
      }
      default: throw value_error("rlflow::jinja::Value: binary JSON values have no Jinja counterpart; pass them as strings");
    }
  }

  bool is_undefined() const { return std::holds_alternative<Undefined>(v); }
  bool is_none() const { return std::holds_alternative<None>(v); }
  bool is_bool() const { return std::holds_alternative<bool>(v); }
  bool is_int() const { return std::holds_alternative<std::int64_t>(v); }
  bool is_float() const { return std::holds_alternative<double>(v); }
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return std::holds_alternative<Str>(v); }
  bool is_list() const { return std::holds_alternative<std::shared_ptr<ListBox const>>(v); }
  bool is_dict() const { return std::holds_alternative<std::shared_ptr<Dict const>>(v); }
  bool is_namespace() const { return std::holds_alternative<Namespace>(v); }
  bool is_callable() const {
    return std::holds_alternative<std::shared_ptr<Macro const>>(v) || std::holds_alternative<Builtin>(v);
  }
  std::string const& str() const { return *std::get<Str>(v); }
  List const& list() const { return std::get<std::shared_ptr<ListBox const>>(v)->items; }
  Dict const& dict() const { return *std::get<std::shared_ptr<Dict const>>(v); }
  //! Python's name of the type (for errors).
  char const* type_name() const {
    static constexpr char const* names[] = {"undefined", "NoneType", "bool", "int", "float", "str", "list", "dict", "Namespace", "macro", "builtin_function"};
    return names[v.index()];
  }

 private:
  template <class It, class Get>
  static int nested_depth(It first, It last, Get get) {
    int d = 0;
    for (; first != last; ++first) {
      Value const& x = get(*first);
      if (std::holds_alternative<Namespace>(x.v))
        throw value_error("rlflow::jinja: a namespace() cannot be put in a list, dict or namespace; keep it in its own variable");
      d = std::max(d, x.depth());
    }
    if (d + 1 > max_value_depth)
      throw value_error(msg("rlflow::jinja: lists and dicts nest deeper than ", max_value_depth, " levels; flatten the data"));
    return d + 1;
  }
};

inline Value const* Dict::find(std::string_view k) const {
  for (auto const& [key, val] : items)
    if (key == k) return &val;
  return nullptr;
}
inline void Dict::set(std::string const& k, Value v) {
  for (auto& [key, val] : items)
    if (key == k) {
      val = std::move(v);
      return;
    }
  items.emplace_back(k, std::move(v));
}

// ---------------------------------------------------------------------------------------------
// Syntax tree.

struct Expr {
  enum class Kind { literal, name, list, tuple, dict, attr, index, slice, call, filter, test, neg, pos, not_, and_, or_, binary, compare, cond };
  Kind kind;
  int line = 0;
  std::string name;                           // name, attribute, filter/test/operator name
  Value lit;                                  // literal
  std::vector<std::unique_ptr<Expr>> kids;    // operands; call/filter/test: target then arguments
  std::vector<std::string> keywords;          // per argument (kids[1..]): "" or the keyword
  std::vector<std::string> ops;               // compare: operators between kids
  bool negated = false;                       // test: 'is not'
  int height = 1;                             // levels of the tree below and including this node
};
using ExprP = std::unique_ptr<Expr>;

struct Node {
  enum class Kind { text, output, for_, if_, set, set_block, macro, break_, continue_, block };
  Kind kind;
  int line = 0;
  std::string text;                            // text; set_block/macro: the name
  std::vector<std::string> targets;            // for/set: names; set "ns.attr": {ns, attr} with attr_set
  bool attr_set = false;
  ExprP expr;                                  // output, set value, for iterable
  ExprP filter;                                // for ... if filter
  std::vector<std::pair<ExprP, std::vector<std::unique_ptr<Node>>>> branches;  // if/elif
  std::vector<std::unique_ptr<Node>> body, else_body;
  std::vector<std::string> params;             // macro
  std::vector<ExprP> defaults;                 // macro: default per param (null: none)
};
using NodeP = std::unique_ptr<Node>;
using Body = std::vector<NodeP>;

struct Macro {
  Node const* node;
};


//! A parsed Jinja template. Parsing happens once (syntax errors and unsupported constructs are
//! format_errors naming the line); render() may be called many times, also concurrently.
class Template {
 public:
  explicit Template(std::string_view source, Limits limits = {});

  //! Renders with the given top-level variables (a dict). Runtime errors (undefined attribute
  //! read or called, raise_exception, limits) are value_errors naming the line.
  std::string render(Value const& vars) const;

  Limits const& limits() const { return limits_; }

 private:
  Limits limits_;
  Body body_;
};

}  // namespace rlflow::jinja

namespace rlflow {

//! A Hugging Face chat template: renders a message list as transformers'
//! tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=...,
//! tokenize=False, **kwargs) does, with bos_token / eos_token set from the tokenizer.
class HfChatTemplate {
 public:
  explicit HfChatTemplate(std::string_view source, jinja::Limits limits = {}) : t_(source, limits) {}

  //! Built-in templates for model folders without a chat_template:
  //!   "chatml": <|im_start|>role\ncontent<|im_end|>\n per message (Qwen's format);
  //!   "llama3": <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>, bos first;
  //!   "plain":  rlflow's plain-text rendering (rlflow::ChatTemplate's defaults): "User: ...\n",
  //!             "Assistant: ...\n", a system message followed by a blank line, then "Assistant:"
  //!             when add_generation_prompt.
  static HfChatTemplate named(std::string_view name) { return HfChatTemplate(named_source(name)); }

  //! The Jinja source of a built-in template (see named()).
  static std::string named_source(std::string_view name) {
    if (name == "chatml")
      return "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
             "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
    if (name == "llama3")
      return "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + "
             "message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
             "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";
    if (name == "plain")
      return "{% for message in messages %}"
             "{% if message['role'] == 'system' %}{{ message['content'] + '\n\n' }}"
             "{% elif message['role'] == 'user' %}{{ 'User: ' + message['content'] + '\n' }}"
             "{% elif message['role'] == 'assistant' %}{{ 'Assistant: ' + message['content'] + '\n' }}"
             "{% else %}{{ raise_exception(\"the plain chat template knows the roles system, user and assistant, not '\" ~ message['role'] ~ \"'\") }}"
             "{% endif %}{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}";
    throw config_error(msg("rlflow::HfChatTemplate::named: no built-in chat template '", name,
                           "'; use chatml, llama3 or plain, or pass the tokenizer_config.json chat_template"));
  }

  //! messages: a JSON list of {"role", "content", ...}; tools: a JSON list or null (None);
  //! extra: a JSON object of further keywords (e.g. {"enable_thinking": false}), which override
  //! the others as in transformers. Accepts nlohmann::json or nlohmann::ordered_json.
  template <class Json>
  std::string render(Json const& messages, Json const& tools, bool add_generation_prompt, Json const& extra,
                     std::string const& bos_token, std::string const& eos_token) const {
    if (!messages.is_array())
      throw value_error(msg("rlflow::HfChatTemplate::render: messages must be a JSON list of {\"role\", \"content\"} objects, got ",
                            messages.type_name()));
    if (!tools.is_null() && !tools.is_array())
      throw value_error(msg("rlflow::HfChatTemplate::render: tools must be a JSON list of tool schemas or null, got ", tools.type_name()));
    if (!extra.is_null() && !extra.is_object())
      throw value_error(msg("rlflow::HfChatTemplate::render: extra keywords must be a JSON object or null, got ", extra.type_name()));
    jinja::Dict vars;
    vars.set("messages", jinja::Value::from_json(messages));
    vars.set("tools", jinja::Value::from_json(tools));
    vars.set("documents", jinja::Value(nullptr));
    vars.set("add_generation_prompt", jinja::Value(add_generation_prompt));
    vars.set("bos_token", jinja::Value(bos_token));
    vars.set("eos_token", jinja::Value(eos_token));
    if (extra.is_object())
      for (auto it = extra.begin(); it != extra.end(); ++it) vars.set(it.key(), jinja::Value::from_json(it.value()));
    return t_.render(jinja::Value(std::move(vars)));
  }

  jinja::Template const& jinja_template() const { return t_; }

 private:
  jinja::Template t_;
};

}  // namespace rlflow

#if RLFLOW_DEFINE_BODIES
#include <rlflow/data/impl/chat_template.ipp>
#endif
