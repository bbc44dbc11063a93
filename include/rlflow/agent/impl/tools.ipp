// rlflow/agent/impl/tools.ipp: the bodies of rlflow/agent/tools.hpp's functions: tool schemas, the
// tool set's call, the exact calculator and the subprocess tool (included by that header when
// RLFLOW_DEFINE_BODIES; see rlflow/core/config.hpp).
#pragma once
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace rlflow::agent {

RLFLOW_DECL json ToolSchema::openai() const {
  json f = json::object();
  f["name"] = name;
  f["description"] = description;
  f["parameters"] = parameters;
  return json{{"type", "function"}, {"function", std::move(f)}};
}

RLFLOW_DECL ToolSchema ToolSchema::from_openai(json const& j, std::string const& where) {
  if (!j.is_object())
    throw config_error(msg(where, ": a tool schema is a map {type: function, function: {name, description, parameters}}, got a ",
                           j.type_name()));
  if (j.contains("type") && !(j["type"].is_string() && j["type"] == "function"))
    throw config_error(msg(where, ".type: only function tools are supported; write 'type: function'"));
  auto const f = j.find("function");
  if (f == j.end() || !f->is_object())
    throw config_error(msg(where, ".function: missing; write function: {name: ..., description: ..., parameters: {...}}"));
  ToolSchema s;
  auto const n = f->find("name");
  if (n == f->end() || !n->is_string() || n->get_ref<std::string const&>().empty())
    throw config_error(msg(where, ".function.name: missing or not a string; name the function the model calls"));
  s.name = n->get<std::string>();
  if (auto const d = f->find("description"); d != f->end()) {
    if (!d->is_string()) throw config_error(msg(where, ".function.description: must be text, got a ", d->type_name()));
    s.description = d->get<std::string>();
  }
  if (auto const p = f->find("parameters"); p != f->end() && !p->is_null()) {
    if (!p->is_object())
      throw config_error(msg(where, ".function.parameters: must be a JSON schema map ({type: object, properties: ...}), got a ",
                             p->type_name()));
    if (auto const r = p->find("required"); r != p->end()) {
      bool ok = r->is_array();
      if (ok)
        for (auto const& x : *r) ok = ok && x.is_string();
      if (!ok) throw config_error(msg(where, ".function.parameters.required: must be a list of parameter names"));
    }
    s.parameters = *p;
  }
  return s;
}

RLFLOW_DECL void ToolSet::add(Tool t) {
  if (t.schema.name.empty()) throw config_error("rlflow::agent::ToolSet::add: the tool has no name; set schema.name");
  if (!t.fn) throw config_error(msg("rlflow::agent::ToolSet::add: tool '", t.schema.name, "' has no callable; set fn"));
  if (find(t.schema.name))
    throw config_error(msg("rlflow::agent::ToolSet::add: two tools are named '", t.schema.name, "'; give each tool its own name"));
  tools_.push_back(std::move(t));
}

RLFLOW_DECL json ToolSet::schemas() const {
  if (tools_.empty()) return nullptr;
  json out = json::array();
  for (auto const& t : tools_) out.push_back(t.schema.openai());
  return out;
}

RLFLOW_DECL std::string ToolSet::names() const {
  std::string s;
  for (auto const& t : tools_) s += (s.empty() ? "" : ", ") + t.schema.name;
  return s.empty() ? std::string("(none)") : s;
}

RLFLOW_DECL ToolResult ToolSet::call(ToolCall const& c, json const& row_tools_kwargs) const {
  auto fail = [](std::string text) {
    ToolResult r;
    r.text = std::move(text);
    r.error = true;
    return r;
  };
  if (c.malformed()) return fail("Error: " + c.error);
  Tool const* t = find(c.name);
  if (!t) return fail("Error: there is no tool named '" + c.name + "'; the tools are: " + names());
  if (auto const r = t->schema.parameters.find("required"); r != t->schema.parameters.end() && r->is_array())
    for (auto const& p : *r)
      if (p.is_string() && !c.arguments.contains(p.get<std::string>()))
        return fail("Error: the call to '" + c.name + "' lacks the required argument '" + p.get<std::string>() + "'");
  json kw = nullptr;
  if (row_tools_kwargs.is_object())
    if (auto const k = row_tools_kwargs.find(c.name); k != row_tools_kwargs.end()) kw = *k;
  try {
    return t->fn(c.arguments, kw);
  } catch (std::exception const& e) {
    return fail("Error when executing tool '" + c.name + "': " + e.what());
  } catch (...) {
    return fail("Error when executing tool '" + c.name + "': an unknown exception");
  }
}

// ---- the exact calculator ------------------------------------------------------------------

namespace calc_detail {

//! A signed integer of any size: base 1e9 limbs, least significant first, no leading zero limbs.
struct BigInt {
  static constexpr std::uint32_t base = 1'000'000'000u;
  bool neg = false;
  std::vector<std::uint32_t> limbs;  // empty: zero

  bool zero() const { return limbs.empty(); }
  void trim() {
    while (!limbs.empty() && limbs.back() == 0) limbs.pop_back();
    if (limbs.empty()) neg = false;
  }
  static BigInt from_digits(std::string_view d) {
    BigInt r;
    for (std::size_t end = d.size(); end > 0;) {
      std::size_t const begin = end >= 9 ? end - 9 : 0;
      std::uint32_t v = 0;
      for (std::size_t i = begin; i < end; ++i) v = v * 10 + std::uint32_t(d[i] - '0');
      r.limbs.push_back(v);
      end = begin;
    }
    r.trim();
    return r;
  }
  static int cmp_abs(BigInt const& a, BigInt const& b) {
    if (a.limbs.size() != b.limbs.size()) return a.limbs.size() < b.limbs.size() ? -1 : 1;
    for (std::size_t i = a.limbs.size(); i-- > 0;)
      if (a.limbs[i] != b.limbs[i]) return a.limbs[i] < b.limbs[i] ? -1 : 1;
    return 0;
  }
  static BigInt add_abs(BigInt const& a, BigInt const& b) {
    BigInt r;
    std::uint64_t carry = 0;
    for (std::size_t i = 0; i < std::max(a.limbs.size(), b.limbs.size()) || carry; ++i) {
      std::uint64_t s = carry + (i < a.limbs.size() ? a.limbs[i] : 0) + (i < b.limbs.size() ? b.limbs[i] : 0);
      r.limbs.push_back(std::uint32_t(s % base));
      carry = s / base;
    }
    r.trim();
    return r;
  }
  static BigInt sub_abs(BigInt const& a, BigInt const& b) {  // |a| >= |b|
    BigInt r;
    std::int64_t borrow = 0;
    for (std::size_t i = 0; i < a.limbs.size(); ++i) {
      std::int64_t s = std::int64_t(a.limbs[i]) - borrow - (i < b.limbs.size() ? std::int64_t(b.limbs[i]) : 0);
      borrow = s < 0;
      if (s < 0) s += base;
      r.limbs.push_back(std::uint32_t(s));
    }
    r.trim();
    return r;
  }
  friend BigInt operator+(BigInt const& a, BigInt const& b) {
    if (a.neg == b.neg) {
      BigInt r = add_abs(a, b);
      r.neg = a.neg && !r.zero();
      return r;
    }
    int const c = cmp_abs(a, b);
    if (c == 0) return BigInt{};
    BigInt r = c > 0 ? sub_abs(a, b) : sub_abs(b, a);
    r.neg = (c > 0 ? a.neg : b.neg) && !r.zero();
    return r;
  }
  BigInt negated() const {
    BigInt r = *this;
    r.neg = !neg && !zero();
    return r;
  }
  friend BigInt operator-(BigInt const& a, BigInt const& b) { return a + b.negated(); }
  friend BigInt operator*(BigInt const& a, BigInt const& b) {
    if (a.zero() || b.zero()) return BigInt{};
    std::vector<std::uint64_t> acc(a.limbs.size() + b.limbs.size() + 1, 0);
    for (std::size_t i = 0; i < a.limbs.size(); ++i) {
      std::uint64_t carry = 0;
      for (std::size_t j = 0; j < b.limbs.size() || carry; ++j) {
        std::uint64_t cur = acc[i + j] + carry + (j < b.limbs.size() ? std::uint64_t(a.limbs[i]) * b.limbs[j] : 0);
        acc[i + j] = cur % base;
        carry = cur / base;
      }
    }
    BigInt r;
    r.limbs.assign(acc.begin(), acc.end());
    r.neg = a.neg != b.neg;
    r.trim();
    return r;
  }
  std::string str() const {
    if (zero()) return "0";
    std::string s = neg ? "-" : "";
    s += std::to_string(limbs.back());
    for (std::size_t i = limbs.size() - 1; i-- > 0;) {
      std::string part = std::to_string(limbs[i]);
      s += std::string(9 - part.size(), '0') + part;
    }
    return s;
  }
};

//! Recursive descent over: expr := term (('+'|'-') term)*; term := unary ('*' unary)*;
//! unary := ('+'|'-') unary | '(' expr ')' | digits. Spaces anywhere between.
struct Parser {
  std::string_view s;
  std::size_t i = 0;
  int depth = 0;
  static constexpr int max_depth = 200;

  [[noreturn]] void fail(std::string const& what) const { throw value_error(what); }
  void skip() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n')) ++i;
  }
  BigInt expr() {
    BigInt v = term();
    for (skip(); i < s.size() && (s[i] == '+' || s[i] == '-'); skip()) {
      char const op = s[i++];
      BigInt const r = term();
      v = op == '+' ? v + r : v - r;
    }
    return v;
  }
  BigInt term() {
    BigInt v = unary();
    for (skip(); i < s.size() && s[i] == '*'; skip()) {
      ++i;
      v = v * unary();
    }
    return v;
  }
  BigInt unary() {
    if (++depth > max_depth) fail("the expression nests deeper than " + std::to_string(max_depth) + " levels");
    skip();
    BigInt v;
    if (i >= s.size()) fail("the expression ends where a number or '(' was expected");
    if (s[i] == '+' || s[i] == '-') {
      char const op = s[i++];
      v = op == '-' ? unary().negated() : unary();
    } else if (s[i] == '(') {
      ++i;
      v = expr();
      skip();
      if (i >= s.size() || s[i] != ')') fail("a '(' at or before position " + std::to_string(i) + " is never closed");
      ++i;
    } else if (s[i] >= '0' && s[i] <= '9') {
      std::size_t const b = i;
      while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
      v = BigInt::from_digits(s.substr(b, i - b));
    } else {
      fail(std::string("unexpected '") + s[i] + "' at position " + std::to_string(i) +
           "; the calculator takes integers, + - * and parentheses");
    }
    --depth;
    return v;
  }
};

}  // namespace calc_detail

RLFLOW_DECL std::string calculate(std::string_view expression) {
  if (expression.size() > calculator_max_chars)
    throw value_error(msg("the expression has ", expression.size(), " characters, more than the limit of ", calculator_max_chars));
  calc_detail::Parser p{expression};
  calc_detail::BigInt const v = p.expr();
  p.skip();
  if (p.i != expression.size())
    p.fail(std::string("unexpected '") + expression[p.i] + "' at position " + std::to_string(p.i) +
           "; the calculator takes integers, + - * and parentheses");
  return v.str();
}

RLFLOW_DECL ToolSchema calculator_schema(std::string name) {
  ToolSchema s;
  s.name = std::move(name);
  s.description = "Exact integer arithmetic: +, -, * and parentheses on integers of any size.";
  s.parameters = json{{"type", "object"},
                      {"properties", json{{"expression", json{{"type", "string"}, {"description", "e.g. (12+3)*-45"}}}}},
                      {"required", json::array({"expression"})}};
  return s;
}

RLFLOW_DECL Tool calculator_tool(ToolSchema schema) {
  return Tool{std::move(schema), [](json const& args, json const&) {
                ToolResult r;
                auto const e = args.find("expression");
                if (e == args.end() || !e->is_string()) {
                  r.error = true;
                  r.text = "Error: pass the expression as a string: {\"expression\": \"12*34\"}";
                  return r;
                }
                try {
                  r.text = calculate(e->get_ref<std::string const&>());
                } catch (value_error const& ex) {
                  r.error = true;
                  r.text = std::string("Error: ") + ex.what();
                }
                return r;
              }};
}

// ---- the subprocess tool --------------------------------------------------------------------

namespace subprocess_detail {
inline std::string resolve(std::string const& prog) {
  if (prog.find('/') != std::string::npos) return prog;
  char const* path = std::getenv("PATH");
  std::string_view p = path ? path : "/usr/local/bin:/usr/bin:/bin";
  while (true) {
    auto const c = p.find(':');
    std::string dir(p.substr(0, c));
    std::string const full = (dir.empty() ? std::string(".") : dir) + "/" + prog;
    if (::access(full.c_str(), X_OK) == 0) return full;
    if (c == std::string_view::npos) return {};
    p.remove_prefix(c + 1);
  }
}
inline void write_all(int fd, char const* s, std::size_t n) {
  while (n > 0) {
    ssize_t const w = ::write(fd, s, n);
    if (w <= 0) return;
    s += w;
    n -= std::size_t(w);
  }
}
}  // namespace subprocess_detail

RLFLOW_DECL SubprocessResult run_subprocess(std::vector<std::string> const& argv, std::string_view input, SubprocessLimits const& lim) {
  using clock = std::chrono::steady_clock;
  SubprocessResult res;
  if (argv.empty() || argv[0].empty()) throw config_error("rlflow::agent::run_subprocess: no program; pass the command as a list");
  std::string const prog = subprocess_detail::resolve(argv[0]);
  if (prog.empty()) {
    res.start_error = "the program '" + argv[0] + "' is not on PATH";
    return res;
  }
  std::vector<char*> cargv;
  for (auto const& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  int in_sv[2], out_p[2], st_p[2];
  // stdin is a socket pair so that writing to a child that stopped reading never raises SIGPIPE
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in_sv) != 0) {
    res.start_error = std::string("socketpair: ") + std::strerror(errno);
    return res;
  }
  if (::pipe2(out_p, O_CLOEXEC) != 0) {
    res.start_error = std::string("pipe: ") + std::strerror(errno);
    ::close(in_sv[0]), ::close(in_sv[1]);
    return res;
  }
  if (::pipe2(st_p, O_CLOEXEC) != 0) {
    res.start_error = std::string("pipe: ") + std::strerror(errno);
    ::close(in_sv[0]), ::close(in_sv[1]), ::close(out_p[0]), ::close(out_p[1]);
    return res;
  }
  rlimit const as{rlim_t(lim.memory_mb) << 20, rlim_t(lim.memory_mb) << 20};
  rlim_t const cpu_s = rlim_t(std::ceil(lim.timeout_s)) + 1;
  rlimit const cpu{cpu_s, cpu_s + 1}, core{0, 0};
  auto const t0 = clock::now();
  pid_t const pid = ::fork();
  if (pid < 0) {
    res.start_error = std::string("fork: ") + std::strerror(errno);
    for (int fd : {in_sv[0], in_sv[1], out_p[0], out_p[1], st_p[0], st_p[1]}) ::close(fd);
    return res;
  }
  if (pid == 0) {  // the child: async-signal-safe calls only
    auto die = [&](char const* what) {
      int const e = errno;
      subprocess_detail::write_all(st_p[1], what, std::strlen(what));
      char const* es = std::strerror(e);  // not async-signal-safe in theory; glibc's is for valid errno
      subprocess_detail::write_all(st_p[1], ": ", 2);
      subprocess_detail::write_all(st_p[1], es, std::strlen(es));
      ::_exit(127);
    };
    ::setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (::dup2(in_sv[1], 0) < 0 || ::dup2(out_p[1], 1) < 0 || ::dup2(out_p[1], 2) < 0) die("dup2");
    if (lim.memory_mb > 0 && ::setrlimit(RLIMIT_AS, &as) != 0) die("setrlimit(RLIMIT_AS)");
    ::setrlimit(RLIMIT_CPU, &cpu);
    ::setrlimit(RLIMIT_CORE, &core);
    if (!lim.network && ::unshare(CLONE_NEWNET) != 0 && ::unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0)
      die("cannot start without network (unshare of the network namespace refused; run as root, allow user namespaces, or set "
          "network: true)");
    ::execv(prog.c_str(), cargv.data());
    die("exec");
  }
  ::setpgid(pid, pid);  // also from the parent, so the group exists before any kill
  ::close(in_sv[1]);
  ::close(out_p[1]);
  ::close(st_p[1]);
  // did it start? the status pipe closes on exec (CLOEXEC) or carries the reason
  {
    char buf[512];
    ssize_t n;
    std::string why;
    while ((n = ::read(st_p[0], buf, sizeof buf)) > 0) why.append(buf, std::size_t(n));
    ::close(st_p[0]);
    if (!why.empty()) {
      res.start_error = why;
      ::close(in_sv[0]);
      ::close(out_p[0]);
      int st = 0;
      ::waitpid(pid, &st, 0);
      return res;
    }
  }
  ::fcntl(in_sv[0], F_SETFL, ::fcntl(in_sv[0], F_GETFL) | O_NONBLOCK);
  ::fcntl(out_p[0], F_SETFL, ::fcntl(out_p[0], F_GETFL) | O_NONBLOCK);
  auto const deadline = t0 + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(lim.timeout_s));
  std::size_t sent = 0;
  int in_fd = in_sv[0];
  if (input.empty()) {
    ::close(in_fd);
    in_fd = -1;
  }
  bool out_open = true;
  auto kill_group = [&] {
    ::kill(-pid, SIGKILL);
    ::kill(pid, SIGKILL);
  };
  while (out_open) {
    auto const now = clock::now();
    if (now >= deadline) {
      res.timed_out = true;
      break;
    }
    int const ms = int(std::min<std::int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1, 100));
    pollfd fds[2] = {{out_p[0], POLLIN, 0}, {in_fd, POLLOUT, 0}};
    int const nf = in_fd >= 0 ? 2 : 1;
    int const pr = ::poll(fds, nf, ms);
    if (pr < 0 && errno != EINTR) break;
    if (pr <= 0) continue;
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      char buf[8192];
      ssize_t const n = ::read(out_p[0], buf, sizeof buf);
      if (n > 0) {
        std::size_t const keep = std::min<std::size_t>(std::size_t(n), lim.max_output_bytes - std::min(lim.max_output_bytes, res.output.size()));
        res.output.append(buf, keep);
        if (keep < std::size_t(n)) res.truncated = true;
      } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        out_open = false;
      }
    }
    if (nf == 2 && (fds[1].revents & (POLLOUT | POLLHUP | POLLERR))) {
      ssize_t const w = ::send(in_fd, input.data() + sent, input.size() - sent, MSG_NOSIGNAL);
      if (w > 0) sent += std::size_t(w);
      if (w < 0 && errno != EAGAIN && errno != EINTR) sent = input.size();  // the child closed its stdin
      if (sent >= input.size()) {
        ::close(in_fd);
        in_fd = -1;
      }
    }
  }
  if (in_fd >= 0) ::close(in_fd);
  ::close(out_p[0]);
  while (true) {  // output closed; the program may still run (it closed stdout), so the deadline holds
    siginfo_t si{};
    int const w = ::waitid(P_PID, id_t(pid), &si, WEXITED | WNOHANG | WNOWAIT);  // not reaped yet: its group id stays its own
    if ((w == 0 && si.si_pid == pid) || (w < 0 && errno != EINTR)) break;
    if (clock::now() >= deadline) {
      res.timed_out = true;
      break;
    }
    ::usleep(2000);
  }
  kill_group();  // on timeout, and whatever it left behind in its group
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(st)) res.exit_status = WEXITSTATUS(st);
  if (WIFSIGNALED(st)) res.term_signal = WTERMSIG(st);
  res.seconds = std::chrono::duration<double>(clock::now() - t0).count();
  return res;
}

RLFLOW_DECL ToolSchema subprocess_schema(std::string name, std::string parameter) {
  ToolSchema s;
  s.name = std::move(name);
  s.description = "Runs a program with the given text on its standard input and returns what it printed.";
  s.parameters = json{{"type", "object"},
                      {"properties", json{{parameter, json{{"type", "string"}, {"description", "the program's input"}}}}},
                      {"required", json::array({parameter})}};
  return s;
}

RLFLOW_DECL Tool subprocess_tool(ToolSchema schema, SubprocessToolConfig cfg) {
  if (cfg.command.empty()) throw config_error(msg("rlflow::agent::subprocess_tool '", schema.name, "': config.command is empty; give the program and its arguments as a list"));
  if (!(cfg.limits.timeout_s > 0) || !(cfg.limits.timeout_s <= 3600))
    throw config_error(msg("rlflow::agent::subprocess_tool '", schema.name, "': config.timeout_s = ", cfg.limits.timeout_s,
                           " is out of range; use 0 < timeout_s <= 3600"));
  if (cfg.limits.memory_mb < 0 || cfg.limits.memory_mb > (std::int64_t{1} << 30))
    throw config_error(msg("rlflow::agent::subprocess_tool '", schema.name, "': config.memory_mb = ", cfg.limits.memory_mb,
                           " is out of range; use 0 (no limit) or a size in MiB"));
  if (cfg.limits.max_output_bytes == 0)
    throw config_error(msg("rlflow::agent::subprocess_tool '", schema.name, "': config.max_output_bytes is 0; keep at least one byte"));
  auto const shared = std::make_shared<SubprocessToolConfig const>(std::move(cfg));
  return Tool{std::move(schema), [shared](json const& args, json const&) {
                auto const& c = *shared;
                ToolResult r;
                auto const a = args.find(c.stdin_argument);
                if (a == args.end() || !a->is_string()) {
                  r.error = true;
                  r.text = "Error: pass the program's input as the string argument '" + c.stdin_argument + "'";
                  return r;
                }
                SubprocessResult const s = run_subprocess(c.command, a->get_ref<std::string const&>(), c.limits);
                r.metrics["seconds"] = s.seconds;
                if (!s.start_error.empty()) {
                  r.error = true;
                  r.text = "Error: the program did not start: " + s.start_error;
                  return r;
                }
                r.text = s.output;
                if (s.truncated) r.text += "\n[output truncated]";
                if (s.timed_out) {
                  r.error = r.timed_out = true;
                  r.text += (r.text.empty() ? "" : "\n") + msg("Error: the program ran past its time limit of ", c.limits.timeout_s,
                                                               " s and was killed");
                } else if (s.term_signal != 0) {
                  r.error = true;
                  r.text += (r.text.empty() ? "" : "\n") + msg("[killed by signal ", s.term_signal, "]");
                } else if (s.exit_status != 0) {
                  r.text += (r.text.empty() ? "" : "\n") + msg("[exit status ", s.exit_status, "]");
                }
                return r;
              }};
}

// ---- tool classes by name ----------------------------------------------------------------------

RLFLOW_DECL void ToolRegistry::add(std::string class_name, ToolFactory f) {
  if (class_name.empty() || !f) throw config_error("rlflow::agent::ToolRegistry::add: give a class name and a factory");
  for (auto& [n, g] : classes_)
    if (n == class_name) {
      g = std::move(f);
      return;
    }
  classes_.emplace_back(std::move(class_name), std::move(f));
}

RLFLOW_DECL Tool ToolRegistry::make(std::string const& class_name, ToolSchema schema, json const& config, std::string const& where) const {
  ToolFactory const* f = find(class_name);
  if (!f)
    throw config_error(msg(where, ".class_name: no tool class '", class_name, "' is registered; registered: ", names(),
                           " (register yours with ToolRegistry::add)"));
  return (*f)(std::move(schema), config, where);
}

RLFLOW_DECL ToolRegistry ToolRegistry::builtin() {
  ToolRegistry r;
  r.add("calculator", [](ToolSchema s, json const&, std::string const&) { return calculator_tool(std::move(s)); });
  r.add("subprocess", [](ToolSchema s, json const& config, std::string const& where) {
    return subprocess_tool(std::move(s), subprocess_config(config, where + ".config"));
  });
  return r;
}

RLFLOW_DECL SubprocessToolConfig ToolRegistry::subprocess_config(json const& c, std::string const& where) {
  if (!c.is_object()) throw config_error(msg(where, ": the subprocess tool needs a config map with 'command: [program, args...]'"));
  SubprocessToolConfig out;
  for (auto it = c.begin(); it != c.end(); ++it) {
    std::string const& k = it.key();
    auto const& v = it.value();
    std::string const at = where + "." + k;
    auto number = [&](double lo, double hi) {
      if (!v.is_number() || v.is_boolean() || !(v.get<double>() >= lo && v.get<double>() <= hi))
        throw config_error(msg(at, ": expected a number in [", lo, ", ", hi, "], got ", show_json(v)));
      return v.get<double>();
    };
    if (k == "command") {
      if (!v.is_array() || v.empty()) throw config_error(msg(at, ": expected a list [program, args...], got ", show_json(v)));
      for (auto const& a : v) {
        if (!a.is_string() && !a.is_number()) throw config_error(msg(at, ": every item is text; got ", show_json(a)));
        out.command.push_back(a.is_string() ? a.get<std::string>() : show_json(a));
      }
      if (out.command[0].empty()) throw config_error(msg(at, "[0]: the program is empty; name it"));
    } else if (k == "stdin_argument") {
      if (!v.is_string() || v.get_ref<std::string const&>().empty()) throw config_error(msg(at, ": expected a parameter name"));
      out.stdin_argument = v.get<std::string>();
    } else if (k == "timeout_s") {
      out.limits.timeout_s = number(1e-3, 3600);
    } else if (k == "memory_mb") {
      out.limits.memory_mb = std::int64_t(number(0, double(std::int64_t{1} << 30)));
    } else if (k == "max_output_bytes") {
      out.limits.max_output_bytes = std::size_t(number(1, double(std::int64_t{1} << 30)));
    } else if (k == "network") {
      if (!v.is_boolean()) throw config_error(msg(at, ": expected true or false, got ", show_json(v)));
      out.limits.network = v.get<bool>();
    } else if (k != "type") {  // verl's 'type: native' is accepted and means nothing here
      throw config_error(msg(at, ": unknown key; the subprocess tool takes command, stdin_argument, timeout_s, memory_mb, network, "
                                 "max_output_bytes"));
    }
  }
  if (out.command.empty()) throw config_error(msg(where, ".command: missing; give the program and its arguments as a list"));
  return out;
}

}  // namespace rlflow::agent
