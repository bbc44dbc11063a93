// rlflow/agent/agent_loop.hpp: multi-turn rollouts. An agent loop takes one row (its chat messages
// and per-row tool arguments), drives a token-in / token-out generator turn by turn and returns
// AgentLoopOutput: prompt_ids, response_ids (model tokens and tool / user tokens),
// response_mask (1 exactly on model-sampled tokens), response_logprobs (0 where the mask is 0),
// num_turns, per-turn rewards and metrics. Built in: single_turn_agent and tool_agent; a user's
// loop is a type satisfying rlflow::agent::agent_loop, registered by name in AgentLoopRegistry.
// Token handling is verl's continuous-token method: the model's tokens are appended verbatim
// (never decoded and re-encoded), and new tool / user messages are tokenized as the chat
// template's text after the conversation so far, so prompt_ids + response_ids equal the template
// applied to the final messages (with the template's newline after the end-of-turn token).
// verl: verl/experimental/agent_loop/agent_loop.py (AgentLoopBase, AgentLoopOutput),
// single_turn_agent_loop.py, tool_agent_loop.py (ToolAgentLoop).
#pragma once
#include <algorithm>
#include <atomic>
#include <concepts>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <rlflow/agent/tool_parser.hpp>
#include <rlflow/agent/tool_pool.hpp>
#include <rlflow/agent/tools.hpp>
#include <rlflow/core/error.hpp>
#include <rlflow/data/chat_template.hpp>
#include <rlflow/engine/sampling.hpp>
#include <rlflow/model/tokenizer.hpp>

namespace rlflow::agent {

// ---- the generator: token ids in, token ids out ------------------------------------------------

//! One generation: the sampled ids (ending with the EOS id when the model stopped) and their
//! log-probs (empty: zeros).
struct GenerateOutput {
  std::vector<std::int32_t> token_ids;
  std::vector<float> logprobs;
};

//! What an agent loop generates with: generate(request_id, prompt_token_ids, sampling) ->
//! GenerateOutput, at most sampling.max_new_tokens ids. request_id is the same for every turn of
//! one conversation (a paged engine keeps its prefix cache by it).
//! verl: AsyncLLMServerManager.generate(request_id, prompt_ids, sampling_params).
template <class G>
concept token_generator = requires(G& g, std::string const& id, std::vector<std::int32_t> const& prompt, engine::SamplingParams const& sp) {
  { g.generate(id, prompt, sp) } -> std::convertible_to<GenerateOutput>;
};

//! A type-erased generator.
using Generator = std::function<GenerateOutput(std::string const&, std::vector<std::int32_t> const&, engine::SamplingParams const&)>;

//! A Generator that calls g (which must outlive it).
template <class G>
Generator generator_ref(G& g) {
  static_assert(token_generator<G>,
                "rlflow::agent::generator_ref: the type needs generate(std::string const& request_id, std::vector<std::int32_t> const& "
                "prompt_ids, engine::SamplingParams const&) returning rlflow::agent::GenerateOutput");
  if constexpr (token_generator<G>)
    return [&g](std::string const& id, std::vector<std::int32_t> const& p, engine::SamplingParams const& sp) -> GenerateOutput {
      return g.generate(id, p, sp);
    };
  else
    return {};
}

// ---- configuration ----------------------------------------------------------------------------

//! actor_rollout_ref.rollout.multi_turn.* (verl's names and defaults; 0 turns: no limit).
struct MultiTurnConfig {
  int max_assistant_turns = 0;
  int max_user_turns = 0;
  int max_parallel_calls = 1;
  int max_tool_response_length = 256;              //!< characters (code points); 0: no limit
  std::string tool_response_truncate_side = "middle";  //!< left (keep the start), right (keep the end), middle
  std::string format = "hermes";
  std::string tokenization_sanity_check_mode = "strict";  //!< strict, ignore_strippable, disable
};

//! What a loop needs besides its row: the response budget over all turns and the multi-turn keys.
struct AgentLoopConfig {
  int response_length = 512;  //!< actor_rollout_ref.rollout.response_length
  MultiTurnConfig multi_turn;

  void validate() const {
    auto const& m = multi_turn;
    auto bad = [](char const* key, auto const& v, char const* fix) {
      throw config_error(msg("actor_rollout_ref.rollout.", key, " = ", v, " is invalid; ", fix));
    };
    if (response_length < 1) bad("response_length", response_length, "give the responses at least one token");
    if (m.max_assistant_turns < 0) bad("multi_turn.max_assistant_turns", m.max_assistant_turns, "use 0 (no limit) or a positive count");
    if (m.max_user_turns < 0) bad("multi_turn.max_user_turns", m.max_user_turns, "use 0 (no limit) or a positive count");
    if (m.max_parallel_calls < 1) bad("multi_turn.max_parallel_calls", m.max_parallel_calls, "run at least one call per turn");
    if (m.max_tool_response_length < 0)
      bad("multi_turn.max_tool_response_length", m.max_tool_response_length, "use 0 (no limit) or a positive length");
    if (m.tool_response_truncate_side != "left" && m.tool_response_truncate_side != "right" && m.tool_response_truncate_side != "middle")
      bad("multi_turn.tool_response_truncate_side", "'" + m.tool_response_truncate_side + "'", "use left, right or middle");
    if (m.format != "hermes") bad("multi_turn.format", "'" + m.format + "'", "use hermes (<tool_call>{...}</tool_call>)");
    if (m.tokenization_sanity_check_mode != "strict" && m.tokenization_sanity_check_mode != "ignore_strippable" &&
        m.tokenization_sanity_check_mode != "disable")
      bad("multi_turn.tokenization_sanity_check_mode", "'" + m.tokenization_sanity_check_mode + "'",
          "use strict, ignore_strippable or disable");
  }
};

// ---- the chat format --------------------------------------------------------------------------

//! The chat template and tokenizer a loop renders and tokenizes with (both must outlive it).
struct ChatFormat {
  HfChatTemplate const* chat_template = nullptr;
  model::Tokenizer const* tokenizer = nullptr;
  std::string bos_token, eos_token;      //!< the template's bos_token / eos_token
  json template_kwargs = json::object();  //!< further template keywords (e.g. enable_thinking)

  void check() const {
    if (!chat_template || !tokenizer)
      throw config_error("rlflow::agent::ChatFormat: set chat_template and tokenizer (an HfChatTemplate and the model's tokenizer)");
  }
  std::string render(json const& messages, json const& tools, bool add_generation_prompt) const {
    return chat_template->render(messages, tools, add_generation_prompt, template_kwargs, bos_token, eos_token);
  }
  std::vector<std::int32_t> encode(std::string_view text) const { return tokenizer->encode(text); }
  std::string decode(std::span<std::int32_t const> ids) const { return tokenizer->decode(ids, false); }
};

//! Everything a loop runs with besides its row.
struct AgentContext {
  Generator generate;
  ChatFormat chat;
  ToolSet const* tools = nullptr;  //!< null or empty: no tools (the template gets tools = None)
  AgentLoopConfig config;
  //! Runs the tool calls when set (shared by the conversations in flight); null: a turn's calls
  //! run on their own threads.
  ToolPool* tool_pool = nullptr;
};

//! One dataset row. verl: the row's raw_prompt, extra_info.tools_kwargs, agent_name.
struct AgentRow {
  std::string request_id;          //!< sticky over the conversation's turns; empty: one is made
  json messages = json::array();   //!< [{"role": ..., "content": ...}, ...]
  json tools_kwargs = nullptr;     //!< {tool name: its per-row arguments}; null: extra_info.tools_kwargs
  json extra_info = json::object();
  std::string agent_name;          //!< the loop for this row (the dataset's agent_name column); empty: the default
};

//! verl: AgentLoopOutput.
struct AgentLoopOutput {
  std::vector<std::int32_t> prompt_ids;
  std::vector<std::int32_t> response_ids;    //!< model tokens and tool / user tokens, at most response_length
  std::vector<std::int32_t> response_mask;   //!< 1 exactly on model-sampled tokens
  std::vector<float> response_logprobs;      //!< the sampler's log-probs; 0 where the mask is 0
  int num_turns = 0;                         //!< user + assistant turns, the prompt counted as one
  std::vector<double> turn_rewards;          //!< per assistant turn: the rewards of the tools it called
  std::vector<double> tool_rewards;          //!< per tool call that returned a reward
  std::map<std::string, double> metrics;     //!< agent/... counts and tool/<name>/<key> sums
  json messages = json::array();             //!< the final conversation
  json extra_info = json::object();
  std::string stop_reason;  //!< no_tool_call, response_length, max_assistant_turns, max_user_turns, empty_generation
};

//! What a user's loop provides: run(context, row, sampling) -> AgentLoopOutput, default
//! constructible (one instance per conversation). verl: AgentLoopBase.run(sampling_params, **kwargs).
template <class L>
concept agent_loop = std::default_initializable<L> &&
                     requires(L& l, AgentContext const& ctx, AgentRow const& row, engine::SamplingParams const& sp) {
                       { l.run(ctx, row, sp) } -> std::same_as<AgentLoopOutput>;
                     };

// ---- helpers ----------------------------------------------------------------------------------

//! A tool's text cut to max_len characters (code points) as verl cuts it: left keeps the start
//! and appends "...(truncated)", right keeps the end after "(truncated)...", middle keeps
//! max_len / 2 at each end around "...(truncated)...". max_len 0: unchanged.
inline std::string truncate_tool_response(std::string const& text, int max_len, std::string_view side) {
  if (max_len <= 0) return text;
  std::vector<std::size_t> at;  // byte offset of each code point
  for (std::size_t i = 0; i < text.size(); ++i)
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) at.push_back(i);
  std::size_t const n = at.size(), m = std::size_t(max_len);
  if (n <= m) return text;
  auto head = [&](std::size_t k) { return text.substr(0, k < n ? at[k] : text.size()); };
  auto tail = [&](std::size_t k) { return k == 0 ? std::string() : text.substr(at[n - k]); };
  if (side == "left") return head(m) + "...(truncated)";
  if (side == "right") return "(truncated)..." + tail(m);
  return head(m / 2) + "...(truncated)..." + tail(m / 2);
}

namespace loop_detail {
inline std::string make_request_id() {
  static std::atomic<std::uint64_t> n{0};
  return "agent-" + std::to_string(n.fetch_add(1, std::memory_order_relaxed));
}
inline void check_row(AgentRow const& row) {
  if (!row.messages.is_array() || row.messages.empty())
    throw value_error(msg("rlflow::agent: the row's messages must be a non-empty JSON list of {\"role\", \"content\"}, got ",
                          row.messages.is_array() ? std::string("an empty list") : std::string(row.messages.type_name())));
  for (std::size_t i = 0; i < row.messages.size(); ++i) {
    auto const& m = row.messages[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      throw value_error(msg("rlflow::agent: message ", i, " of the row has no \"role\" string; write {\"role\": \"user\", \"content\": ...}"));
  }
  if (!row.tools_kwargs.is_null() && !row.tools_kwargs.is_object())
    throw value_error(msg("rlflow::agent: the row's tools_kwargs must be a map {tool name: arguments}, got a ", row.tools_kwargs.type_name()));
}
//! The generator's output, checked and cut to 'budget' ids.
inline GenerateOutput checked(GenerateOutput g, std::size_t budget, int vocab) {
  if (!g.logprobs.empty() && g.logprobs.size() != g.token_ids.size())
    throw value_error(msg("rlflow::agent: the generator returned ", g.token_ids.size(), " token ids and ", g.logprobs.size(),
                          " log-probs; return one log-prob per id (or none)"));
  g.logprobs.resize(g.token_ids.size(), 0.0f);
  for (std::size_t i = 0; i < g.token_ids.size(); ++i)
    if (g.token_ids[i] < 0 || g.token_ids[i] >= vocab)
      throw value_error(msg("rlflow::agent: the generator returned token id ", g.token_ids[i], " at position ", i,
                            ", outside the tokenizer's vocabulary [0, ", vocab, ")"));
  if (g.token_ids.size() > budget) {
    g.token_ids.resize(budget);
    g.logprobs.resize(budget);
  }
  return g;
}
inline std::string strip_space(std::string_view s) {
  std::string out;
  for (char c : s)
    if (c != ' ' && c != '\n' && c != '\t' && c != '\r') out.push_back(c);
  return out;
}
}  // namespace loop_detail

// ---- the built-in loops -----------------------------------------------------------------------

//! One generation from the templated prompt (today's single-turn rollout).
//! verl: SingleTurnAgentLoop.
struct SingleTurnAgentLoop {
  AgentLoopOutput run(AgentContext const& ctx, AgentRow const& row, engine::SamplingParams const& sp0) const {
    ctx.config.validate();
    ctx.chat.check();
    loop_detail::check_row(row);
    if (!ctx.generate) throw config_error("rlflow::agent::SingleTurnAgentLoop: the context has no generator; set AgentContext::generate");
    AgentLoopOutput out;
    json const tools = ctx.tools ? ctx.tools->schemas() : json(nullptr);
    out.prompt_ids = ctx.chat.encode(ctx.chat.render(row.messages, tools, true));
    engine::SamplingParams sp = sp0;
    sp.max_new_tokens = ctx.config.response_length;
    std::string const id = row.request_id.empty() ? loop_detail::make_request_id() : row.request_id;
    auto g = loop_detail::checked(ctx.generate(id, out.prompt_ids, sp), std::size_t(ctx.config.response_length),
                                  ctx.chat.tokenizer->vocab_size());
    out.response_ids = g.token_ids;
    out.response_mask.assign(g.token_ids.size(), 1);
    out.response_logprobs = g.logprobs;
    out.num_turns = 2;
    out.turn_rewards.assign(1, 0.0);
    out.messages = row.messages;
    std::span<std::int32_t const> content(g.token_ids);
    if (!content.empty() && sp.eos_id >= 0 && content.back() == sp.eos_id) content = content.first(content.size() - 1);
    out.messages.push_back(json{{"role", "assistant"}, {"content", ctx.chat.decode(content)}});
    out.stop_reason = g.token_ids.size() >= std::size_t(ctx.config.response_length) ? "response_length" : "no_tool_call";
    out.metrics["agent/num_turns"] = out.num_turns;
    return out;
  }
};

//! verl's ToolAgentLoop: generate -> parse tool calls (Hermes) -> run them (at most
//! max_parallel_calls, concurrently; on AgentContext::tool_pool when set) -> append the tool
//! messages -> generate ..., ending on a turn without a call, at max_assistant_turns / max_user_turns, or when the responses reach
//! response_length over all turns (a tool answer that would reach it is not appended).
//! Each turn may generate up to the budget left. Malformed calls and unknown tools are answered
//! with an error text and counted (agent/tool_errors).
struct ToolAgentLoop {
  AgentLoopOutput run(AgentContext const& ctx, AgentRow const& row, engine::SamplingParams const& sp0) const {
    auto const& cfg = ctx.config;
    auto const& mt = cfg.multi_turn;
    cfg.validate();
    ctx.chat.check();
    loop_detail::check_row(row);
    if (!ctx.generate) throw config_error("rlflow::agent::ToolAgentLoop: the context has no generator; set AgentContext::generate");
    std::size_t const R = std::size_t(cfg.response_length);
    int const vocab = ctx.chat.tokenizer->vocab_size();
    std::string const id = row.request_id.empty() ? loop_detail::make_request_id() : row.request_id;
    json const tools = ctx.tools ? ctx.tools->schemas() : json(nullptr);
    static ToolSet const no_tools;
    ToolSet const& toolset = ctx.tools ? *ctx.tools : no_tools;
    json const& tools_kwargs = row.tools_kwargs.is_null() && row.extra_info.is_object() && row.extra_info.contains("tools_kwargs")
                                   ? row.extra_info["tools_kwargs"]
                                   : row.tools_kwargs;

    AgentLoopOutput out;
    json messages = row.messages;
    std::string stream = ctx.chat.render(messages, tools, true);  // the text the ids so far stand for
    out.prompt_ids = ctx.chat.encode(stream);
    std::vector<std::int32_t> ids = out.prompt_ids;  // prompt and response so far
    auto& m = out.metrics;
    for (char const* k : {"agent/tool_calls", "agent/tool_errors", "agent/tool_timeouts", "agent/malformed_calls",
                          "agent/dropped_calls", "agent/tokenization_mismatch", "agent/template_mismatch"})
      m[k] = 0;
    int assistant_turns = 0, user_turns = 0;
    HermesToolParser const parser;
    while (true) {
      engine::SamplingParams sp = sp0;
      std::size_t const left = R - out.response_ids.size();
      sp.max_new_tokens = int(left);
      GenerateOutput g = loop_detail::checked(ctx.generate(id, ids, sp), left, vocab);
      if (g.token_ids.empty()) {
        out.stop_reason = "empty_generation";
        break;
      }
      ids.insert(ids.end(), g.token_ids.begin(), g.token_ids.end());
      out.response_ids.insert(out.response_ids.end(), g.token_ids.begin(), g.token_ids.end());
      out.response_mask.insert(out.response_mask.end(), g.token_ids.size(), 1);
      out.response_logprobs.insert(out.response_logprobs.end(), g.logprobs.begin(), g.logprobs.end());
      ++assistant_turns;
      out.turn_rewards.push_back(0.0);
      std::span<std::int32_t const> content_ids(g.token_ids);
      if (sp.eos_id >= 0 && content_ids.back() == sp.eos_id) content_ids = content_ids.first(content_ids.size() - 1);
      std::string const content = ctx.chat.decode(content_ids);
      std::string const generated = ctx.chat.decode(g.token_ids);
      messages.push_back(json{{"role", "assistant"}, {"content", content}});
      stream += generated;
      if (out.response_ids.size() >= R) {
        out.stop_reason = "response_length";
        break;
      }
      if (mt.max_assistant_turns > 0 && assistant_turns >= mt.max_assistant_turns) {
        out.stop_reason = "max_assistant_turns";
        break;
      }
      if (mt.max_user_turns > 0 && user_turns >= mt.max_user_turns) {
        out.stop_reason = "max_user_turns";
        break;
      }
      ParsedTurn parsed = parser.parse(content);
      if (parsed.calls.empty()) {
        out.stop_reason = "no_tool_call";
        break;
      }
      std::size_t const n = std::min(parsed.calls.size(), std::size_t(mt.max_parallel_calls));
      m["agent/dropped_calls"] += double(parsed.calls.size() - n);
      std::vector<ToolResult> results(n);
      auto call = [&](std::size_t i) {
        try {
          results[i] = toolset.call(parsed.calls[i], tools_kwargs);
        } catch (std::exception const& e) {  // ToolSet::call catches the tool's own; this is allocation and such
          results[i].text = std::string("Error: ") + e.what();
          results[i].error = true;
        }
      };
      if (ctx.tool_pool) {
        std::vector<std::function<void()>> jobs;
        for (std::size_t i = 0; i < n; ++i) jobs.emplace_back([&call, i] { call(i); });
        ctx.tool_pool->run_all(jobs);
      } else if (n == 1) call(0);
      else {
        std::vector<std::thread> th;
        th.reserve(n);
        for (std::size_t i = 0; i < n; ++i) th.emplace_back(call, i);
        for (auto& t : th) t.join();
      }
      json next = messages;
      for (std::size_t i = 0; i < n; ++i) {
        auto const& r = results[i];
        auto const& c = parsed.calls[i];
        m["agent/tool_calls"] += 1;
        m["agent/tool_errors"] += r.error;
        m["agent/tool_timeouts"] += r.timed_out;
        m["agent/malformed_calls"] += c.malformed();
        if (!c.malformed())
          for (auto const& [k, v] : r.metrics) m["tool/" + c.name + "/" + k] += v;
        if (r.reward) {
          out.tool_rewards.push_back(*r.reward);
          out.turn_rewards.back() += *r.reward;
        }
        next.push_back(json{{"role", "tool"}, {"content", truncate_tool_response(r.text, mt.max_tool_response_length,
                                                                                  mt.tool_response_truncate_side)}});
      }
      // the new messages' tokens: the template's text after what the ids already stand for
      std::string const after = ctx.chat.render(next, tools, true);
      std::string delta;
      if (after.size() >= stream.size() && after.compare(0, stream.size(), stream) == 0) {
        delta = after.substr(stream.size());
      } else {  // the template re-renders earlier turns (or the model's text is not its own rendering)
        m["agent/template_mismatch"] += 1;
        delta = new_messages_text(ctx, messages, next, tools, content, generated);
      }
      std::vector<std::int32_t> const add = ctx.chat.encode(delta);
      if (out.response_ids.size() + add.size() >= R) {
        out.stop_reason = "response_length";
        break;
      }
      ids.insert(ids.end(), add.begin(), add.end());
      out.response_ids.insert(out.response_ids.end(), add.begin(), add.end());
      out.response_mask.insert(out.response_mask.end(), add.size(), 0);
      out.response_logprobs.insert(out.response_logprobs.end(), add.size(), 0.0f);
      messages = std::move(next);
      stream += delta;
      ++user_turns;
      sanity_check(ctx, ids, stream, after, out);
    }
    out.num_turns = assistant_turns + user_turns + 1;
    m["agent/num_turns"] = out.num_turns;
    m["agent/assistant_turns"] = assistant_turns;
    m["agent/user_turns"] = user_turns;
    out.messages = std::move(messages);
    return out;
  }

 private:
  //! The text of the messages after 'messages' in 'next' when the template does not render the
  //! conversation as a prefix of its continuation: what the template writes after the last
  //! assistant content (its end-of-turn, when the model did not sample it, and what follows it,
  //! e.g. Qwen's newline) and the new messages rendered alone with the generation prompt (verl's
  //! way). A template that cannot render them alone: the text after the longest common prefix.
  static std::string new_messages_text(AgentContext const& ctx, json const& messages, json const& next, json const& tools,
                                       std::string const& content, std::string const& generated) {
    std::string const before = ctx.chat.render(messages, tools, false);
    std::string tail;
    if (std::size_t const at = before.rfind(content); at != std::string::npos) tail = before.substr(at + content.size());
    std::string const eos_text = generated.size() >= content.size() ? generated.substr(content.size()) : std::string();
    if (!eos_text.empty() && tail.compare(0, eos_text.size(), eos_text) == 0) tail.erase(0, eos_text.size());
    json const added(next.begin() + std::ptrdiff_t(messages.size()), next.end());
    try {
      return tail + ctx.chat.render(added, nullptr, true);
    } catch (rlflow::error const&) {
      std::string const after = ctx.chat.render(next, tools, true);
      std::size_t k = 0;
      while (k < before.size() && k < after.size() && before[k] == after[k]) ++k;
      return after.substr(k);
    }
  }

  //! multi_turn.tokenization_sanity_check_mode: the ids so far against the tokenizer's ids of the
  //! template applied to the messages so far. strict: the ids must be equal; ignore_strippable: the
  //! texts may differ in whitespace; disable: no check. A mismatch is counted
  //! (agent/tokenization_mismatch) and described in extra_info, as verl logs it.
  static void sanity_check(AgentContext const& ctx, std::vector<std::int32_t> const& ids, std::string const& stream,
                           std::string const& rendered, AgentLoopOutput& out) {
    auto const& mode = ctx.config.multi_turn.tokenization_sanity_check_mode;
    if (mode == "disable") return;
    std::vector<std::int32_t> const expect = ctx.chat.encode(rendered);
    if (expect == ids) return;
    if (mode == "ignore_strippable" && loop_detail::strip_space(stream) == loop_detail::strip_space(rendered)) return;
    std::size_t k = 0;
    while (k < ids.size() && k < expect.size() && ids[k] == expect[k]) ++k;
    out.metrics["agent/tokenization_mismatch"] += 1;
    if (!out.extra_info.contains("tokenization_mismatch"))
      out.extra_info["tokenization_mismatch"] =
          msg("the conversation's ids (", ids.size(), ") differ from the template's tokenized (", expect.size(), ") from position ", k);
  }
};

// ---- loops by name -----------------------------------------------------------------------------

//! Agent loops by name: the dataset's agent_name column picks one per row,
//! actor_rollout_ref.rollout.agent.default_agent_loop otherwise. verl: register / _agent_loop_registry.
class AgentLoopRegistry {
 public:
  using Fn = std::function<AgentLoopOutput(AgentContext const&, AgentRow const&, engine::SamplingParams const&)>;

  //! Registers loop type L (a fresh L runs each conversation).
  template <class L>
  void add(std::string name) {
    static_assert(agent_loop<L>,
                  "rlflow::agent::AgentLoopRegistry::add: the loop type needs a default constructor and "
                  "'AgentLoopOutput run(AgentContext const&, AgentRow const&, engine::SamplingParams const&)'");
    if constexpr (agent_loop<L>)  // one message for a type that is not a loop
      add(std::move(name), Fn([](AgentContext const& c, AgentRow const& r, engine::SamplingParams const& sp) {
            L loop;
            return loop.run(c, r, sp);
          }));
  }
  void add(std::string name, Fn fn) {
    if (name.empty() || !fn) throw config_error("rlflow::agent::AgentLoopRegistry::add: give a name and a loop");
    for (auto& [n, f] : loops_)
      if (n == name) {
        f = std::move(fn);
        return;
      }
    loops_.emplace_back(std::move(name), std::move(fn));
  }
  bool contains(std::string_view name) const { return find(name) != nullptr; }
  std::string names() const {
    std::string s;
    for (auto const& [n, f] : loops_) s += (s.empty() ? "" : ", ") + n;
    return s;
  }
  //! Runs the loop 'name' on one row.
  AgentLoopOutput run(std::string_view name, AgentContext const& ctx, AgentRow const& row, engine::SamplingParams const& sp) const {
    Fn const* f = find(name);
    if (!f)
      throw config_error(msg("rlflow::agent: no agent loop named '", name, "' (the row's agent_name or ",
                             "actor_rollout_ref.rollout.agent.default_agent_loop); registered: ", names()));
    return (*f)(ctx, row, sp);
  }
  //! Runs the row's own loop (AgentRow::agent_name) or, when it names none, 'default_agent_loop'
  //! (actor_rollout_ref.rollout.agent.default_agent_loop).
  AgentLoopOutput run_row(AgentContext const& ctx, AgentRow const& row, engine::SamplingParams const& sp,
                          std::string_view default_agent_loop = "single_turn_agent") const {
    return run(row.agent_name.empty() ? default_agent_loop : std::string_view(row.agent_name), ctx, row, sp);
  }
  //! single_turn_agent and tool_agent.
  static AgentLoopRegistry builtin() {
    AgentLoopRegistry r;
    r.add<SingleTurnAgentLoop>("single_turn_agent");
    r.add<ToolAgentLoop>("tool_agent");
    return r;
  }

 private:
  Fn const* find(std::string_view n) const {
    for (auto const& [name, f] : loops_)
      if (name == n) return &f;
    return nullptr;
  }
  std::vector<std::pair<std::string, Fn>> loops_;
};

}  // namespace rlflow::agent
