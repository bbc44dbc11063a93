// rlflow/agent/tools.hpp: tools an agent loop calls. A tool is an OpenAI function schema (name,
// description, JSON-schema parameters) and a C++ callable (arguments, per-row tools_kwargs) ->
// ToolResult {text, optional reward, metrics}. ToolSet holds a run's tools by name and answers
// every call with text: a malformed call, an unknown name, missing required arguments or a tool
// that throws become an error text for the model (ToolResult::error), never an exception.
// Built in: an exact integer calculator and a subprocess tool (time, memory and network limits).
// verl: verl/tools/base_tool.py (BaseTool), verl/tools/schemas.py (OpenAIFunctionToolSchema,
// ToolResponse), verl/experimental/agent_loop/tool_agent_loop.py (_call_tool).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <rlflow/agent/tool_parser.hpp>
#include <rlflow/core/config.hpp>  // RLFLOW_DECL, RLFLOW_DEFINE_BODIES
#include <rlflow/core/error.hpp>

namespace rlflow::agent {

//! A function tool's schema as the chat template's 'tools' list holds it (OpenAI's
//! {"type": "function", "function": {name, description, parameters}}).
//! verl: OpenAIFunctionToolSchema.
struct ToolSchema {
  std::string name;
  std::string description;
  json parameters = json{{"type", "object"}, {"properties", json::object()}};

  json openai() const;
  //! From {"type": "function", "function": {...}}; 'where' names the value in errors.
  static ToolSchema from_openai(json const& j, std::string const& where);
};

//! What a tool answers. verl: ToolResponse plus execute()'s reward and metrics.
struct ToolResult {
  std::string text;                       //!< the tool message's content
  std::optional<double> reward;           //!< a per-call reward, when the tool scores the call
  std::map<std::string, double> metrics;  //!< summed over calls as tool/<name>/<key>
  bool error = false;                     //!< the call failed (counted in agent/tool_errors)
  bool timed_out = false;                 //!< a time limit ended it (counted in agent/tool_timeouts)
};

//! The callable: (arguments object, this row's tools_kwargs for the tool or null) -> result.
//! May throw; ToolSet turns any exception into an error text. Called concurrently.
using ToolFn = std::function<ToolResult(json const& arguments, json const& tools_kwargs)>;

struct Tool {
  ToolSchema schema;
  ToolFn fn;
};

//! The tools of a run, by name.
class ToolSet {
 public:
  void add(Tool t);
  Tool const* find(std::string_view name) const {
    for (auto const& t : tools_)
      if (t.schema.name == name) return &t;
    return nullptr;
  }
  bool empty() const { return tools_.empty(); }
  std::size_t size() const { return tools_.size(); }
  std::vector<Tool> const& tools() const { return tools_; }
  //! The chat template's 'tools' value: a list of OpenAI schemas, or null when there are none.
  json schemas() const;
  std::string names() const;

  //! Answers one parsed call. 'row_tools_kwargs' is the row's extra_info.tools_kwargs (a map by
  //! tool name, or null); the tool gets its own entry. Never throws.
  ToolResult call(ToolCall const& c, json const& row_tools_kwargs) const;

 private:
  std::vector<Tool> tools_;
};

// ---- the exact calculator ------------------------------------------------------------------


//! The longest expression the calculator reads (its result has at most about as many digits).
inline constexpr std::size_t calculator_max_chars = 10000;

//! Evaluates an integer expression exactly (+ - *, unary signs, parentheses, integers of any
//! size). Throws value_error naming the position of anything else.
RLFLOW_DECL std::string calculate(std::string_view expression);

//! The calculator's default schema: one string parameter 'expression'.
RLFLOW_DECL ToolSchema calculator_schema(std::string name = "calculator");

//! An exact calculator tool: arguments {"expression": "..."} -> the value's digits; anything but
//! integers, + - * and parentheses is an error text.
RLFLOW_DECL Tool calculator_tool(ToolSchema schema = calculator_schema());

// ---- the subprocess tool --------------------------------------------------------------------

//! How a subprocess runs.
struct SubprocessLimits {
  double timeout_s = 10.0;             //!< wall time; the process group is killed (SIGKILL) past it
  std::int64_t memory_mb = 1024;       //!< address space (RLIMIT_AS); 0: no limit
  bool network = false;                //!< false: a fresh network namespace (no interfaces but loopback, down)
  std::size_t max_output_bytes = 65536;  //!< stdout and stderr kept; the rest is read and dropped
};

struct SubprocessResult {
  std::string output;           //!< stdout and stderr, interleaved as written
  int exit_status = -1;         //!< the exit code when it exited
  int term_signal = 0;          //!< the signal that ended it, when one did
  bool timed_out = false;
  bool truncated = false;       //!< output went past max_output_bytes
  std::string start_error;      //!< it never ran: why (no program, no network namespace, ...)
  double seconds = 0.0;
};


//! Runs argv[0] (searched on PATH) with 'input' on its stdin, under 'lim'. Its own process group,
//! killed whole on timeout; RLIMIT_AS and RLIMIT_CPU set; no core files; with network = false it
//! starts in a new network namespace (unshare(CLONE_NEWNET), or with a new user namespace where
//! the process lacks CAP_SYS_ADMIN) and refuses to run where neither is allowed. Never throws
//! for the program's behaviour; throws config_error for an empty argv.
RLFLOW_DECL SubprocessResult run_subprocess(std::vector<std::string> const& argv, std::string_view input, SubprocessLimits const& lim);

//! The subprocess tool's settings (the 'config' map of its tool configuration entry).
struct SubprocessToolConfig {
  std::vector<std::string> command;          //!< argv; the program reads the code on stdin
  std::string stdin_argument = "code";       //!< the call's argument fed to stdin
  SubprocessLimits limits;
};

//! The subprocess tool's default schema: one string parameter 'code'.
RLFLOW_DECL ToolSchema subprocess_schema(std::string name = "run_code", std::string parameter = "code");

//! A tool that runs cfg.command with the argument cfg.stdin_argument on stdin under cfg.limits and
//! answers its output (with "[exit status N]" when not 0). Past the time limit, killed: an error
//! text, timed_out set. metrics: seconds.
RLFLOW_DECL Tool subprocess_tool(ToolSchema schema, SubprocessToolConfig cfg);

// ---- tool classes by name (the tool configuration file's class_name) --------------------------

//! Makes a tool from its configuration entry: (schema from tool_schema, the 'config' map, where).
using ToolFactory = std::function<Tool(ToolSchema schema, json const& config, std::string const& where)>;

//! Tool classes by name, for the tool configuration file. verl: class_name, a Python path.
class ToolRegistry {
 public:
  void add(std::string class_name, ToolFactory f);
  bool contains(std::string_view class_name) const { return find(class_name) != nullptr; }
  std::string names() const {
    std::string s;
    for (auto const& [n, f] : classes_) s += (s.empty() ? "" : ", ") + n;
    return s;
  }
  Tool make(std::string const& class_name, ToolSchema schema, json const& config, std::string const& where) const;

  //! "calculator" (calculator_tool; config ignored) and "subprocess" (subprocess_tool; config:
  //! command [list, required], stdin_argument, timeout_s, memory_mb, network, max_output_bytes).
  static ToolRegistry builtin();

  //! Reads the subprocess tool's config map ('where' names it in errors).
  static SubprocessToolConfig subprocess_config(json const& c, std::string const& where);

 private:
  ToolFactory const* find(std::string_view n) const {
    for (auto const& [name, f] : classes_)
      if (name == n) return &f;
    return nullptr;
  }
  std::vector<std::pair<std::string, ToolFactory>> classes_;
};

}  // namespace rlflow::agent

#if RLFLOW_DEFINE_BODIES
#include <rlflow/agent/impl/tools.ipp>
#endif
