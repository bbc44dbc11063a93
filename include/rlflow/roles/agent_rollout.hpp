// rlflow/roles/agent_rollout.hpp: generate_sequences through the agent loop (multi-turn rollouts
// with tools). Each row runs its agent loop (the row's agent_name, else
// actor_rollout_ref.rollout.agent.default_agent_loop) with a token-in / token-out Generator; the
// batch gets verl's keys: responses (model and tool tokens), response_mask (1 on model tokens
// only, so the actor's loss, entropy and KL and the advantages skip tool tokens),
// attention_mask (1 on every real token: tool tokens stay in context), rollout_log_probs (0 at
// mask 0) and num_turns; per-row tool counts for the trainer's metrics.
// verl: AgentLoopManager.generate_sequences and AgentLoopWorker._postprocess
// (verl/experimental/agent_loop/agent_loop.py).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <rlflow/agent/agent_loop.hpp>
#include <rlflow/agent/concurrent.hpp>  // run_conversations
#include <rlflow/agent/tool_config.hpp>
#include <rlflow/config/trainer_config.hpp>
#include <rlflow/core/data_proto.hpp>
#include <rlflow/data/chat_template.hpp>
#include <rlflow/detail/json_text.hpp>  // check_json_depth
#include <rlflow/engine/sampling.hpp>
#include <rlflow/model/tokenizer.hpp>

namespace rlflow::roles {

//! What agent rollouts run with besides the configuration: the loops by name, the tools and the
//! chat format that renders tool messages. Set it before the Trainer starts
//! (agent_rollout_setup()); the workers only read it.
struct AgentRolloutSetup {
  agent::AgentLoopRegistry loops = agent::AgentLoopRegistry::builtin();
  //! null: the tools of actor_rollout_ref.rollout.multi_turn.tool_config_path (empty path: none).
  std::shared_ptr<agent::ToolSet const> tools;
  //! Renders the row's messages and the tool messages after them; null: passthrough_template().
  std::shared_ptr<HfChatTemplate const> chat_template;
  std::string bos_token;                         //!< the template's bos_token
  std::string eos_token;                         //!< the template's eos_token; empty: the tokenizer's EOS text
  agent::json template_kwargs = agent::json::object();
};

//! The setup the built-in actor role's agent rollouts use (one per process).
inline AgentRolloutSetup& agent_rollout_setup() {
  static AgentRolloutSetup s;
  return s;
}

//! The default chat format of agent rollouts: every message's content verbatim, one after the
//! other (the prompt's text is already the dataset's rendered prompt). A task sets its own
//! template to frame tool answers.
inline std::shared_ptr<HfChatTemplate const> passthrough_template() {
  static auto const t = std::make_shared<HfChatTemplate const>("{% for m in messages %}{{ m['content'] }}{% endfor %}");
  return t;
}

//! The loop settings of the configuration: response_length = data.max_response_length and the
//! multi_turn keys (null turn limits: 0, no limit).
inline agent::AgentLoopConfig agent_loop_config(TrainerConfig const& cfg) {
  auto const& m = cfg.actor_rollout_ref.rollout.multi_turn;
  agent::AgentLoopConfig c;
  c.response_length = static_cast<int>(cfg.data.max_response_length);
  c.multi_turn.max_assistant_turns = static_cast<int>(m.max_assistant_turns.value_or(0));
  c.multi_turn.max_user_turns = static_cast<int>(m.max_user_turns.value_or(0));
  c.multi_turn.max_parallel_calls = static_cast<int>(m.max_parallel_calls);
  c.multi_turn.max_tool_response_length = static_cast<int>(m.max_tool_response_length);
  c.multi_turn.tool_response_truncate_side = std::string(m.tool_response_truncate_side.view());
  c.multi_turn.format = std::string(m.format.view());
  c.multi_turn.tokenization_sanity_check_mode = std::string(m.tokenization_sanity_check_mode.view());
  return c;
}

//! The tools agent rollouts answer with: setup.tools, else the file at multi_turn.tool_config_path
//! (read once per call; empty path: no tools).
inline std::shared_ptr<agent::ToolSet const> agent_tools(TrainerConfig const& cfg, AgentRolloutSetup const& setup) {
  if (setup.tools) return setup.tools;
  std::string const path(cfg.actor_rollout_ref.rollout.multi_turn.tool_config_path.view());
  if (path.empty()) return std::make_shared<agent::ToolSet const>();
  return std::make_shared<agent::ToolSet const>(agent::load_tool_config(path));
}

namespace detail {
//! The row's agent_name: the non-tensor column 'agent_name', else extra_info.agent_name; "" when none.
inline std::string row_agent_name(DataProto const& prompts, std::size_t i, agent::json const& extra) {
  if (prompts.has_non_tensor("agent_name")) {
    Value const& v = prompts.non_tensor("agent_name")[i];
    if (v.is_string()) return v.as_string();
  }
  if (extra.is_object() && extra.contains("agent_name") && extra["agent_name"].is_string())
    return extra["agent_name"].get<std::string>();
  return {};
}

//! Whether generate_sequences goes through the agent loop: multi_turn.enable, or the batch has an
//! agent_name column (every chunk of a batch has it, so chunks agree; rows without a name run
//! agent.default_agent_loop).
inline bool uses_agent_loop(TrainerConfig const& cfg, DataProto const& prompts) {
  return cfg.actor_rollout_ref.rollout.multi_turn.enable || prompts.has_non_tensor("agent_name");
}

//! The rows' conversations run, in row order: one at a time or all at once.
using AgentRunner = std::function<std::vector<agent::AgentLoopOutput>(agent::AgentContext const&, std::vector<agent::AgentRow> const&,
                                                                      engine::SamplingParams const&, std::string_view default_loop)>;

//! generate_with_agent's body with the conversations run by 'run'.
inline DataProto agent_batch(AgentRunner const& run, model::Tokenizer const& tok, TrainerConfig const& cfg, DataProto const& prompts,
                             engine::SamplingParams const& sp, AgentRolloutSetup const& setup, agent::ToolSet const& tools,
                             agent::ToolPool* pool) {
  Tensor const& ids_in = prompts.tensor("input_ids");
  std::int64_t const b = ids_in.dim(0), P = ids_in.dim(1), R = cfg.data.max_response_length;
  if (!prompts.has_non_tensor("raw_prompt"))
    throw key_error("rlflow::roles::generate_with_agent: the prompts have no 'raw_prompt' column (the prompt's text); "
                    "agent rollouts render each row's messages themselves: add raw_prompt (or extra_info.messages)");
  auto const seeds = prompts.tensor("rollout_seed").span<std::int64_t>();
  std::string const default_loop(cfg.actor_rollout_ref.rollout.agent.default_agent_loop.view());

  agent::AgentContext ctx;
  ctx.chat.chat_template = setup.chat_template ? setup.chat_template.get() : passthrough_template().get();
  ctx.chat.tokenizer = &tok;
  ctx.chat.bos_token = setup.bos_token;
  if (!setup.eos_token.empty()) ctx.chat.eos_token = setup.eos_token;
  else if (tok.eos_id() >= 0) ctx.chat.eos_token = tok.decode(std::vector<std::int32_t>{tok.eos_id()}, false);
  ctx.chat.template_kwargs = setup.template_kwargs;
  ctx.tools = &tools;
  ctx.config = agent_loop_config(cfg);
  ctx.tool_pool = pool;

  std::vector<agent::AgentRow> rows(static_cast<std::size_t>(b));
  for (std::int64_t i = 0; i < b; ++i) {
    auto const u = static_cast<std::size_t>(i);
    agent::AgentRow& row = rows[u];
    if (prompts.has_non_tensor("extra_info")) {
      Value const& e = prompts.non_tensor("extra_info")[u];
      if (e.is_string() && !e.as_string().empty()) {
        rlflow::detail::check_json_depth(e.as_string(), 64, "rlflow::roles::generate_with_agent", msg("row ", i, "'s extra_info"));
        row.extra_info = agent::json::parse(e.as_string(), nullptr, false);
        if (row.extra_info.is_discarded())
          throw format_error(msg("rlflow::roles::generate_with_agent: row ", i, "'s extra_info is not JSON: '", e.as_string(),
                                 "'; write a JSON object (or nothing)"));
      }
    }
    if (row.extra_info.is_object() && row.extra_info.contains("messages")) row.messages = row.extra_info["messages"];
    else row.messages = agent::json::array({agent::json{{"role", "user"}, {"content", prompts.non_tensor("raw_prompt")[u].as_string()}}});
    row.agent_name = detail::row_agent_name(prompts, u, row.extra_info);
    row.request_id = msg("agent-", seeds[u]);
  }
  std::vector<agent::AgentLoopOutput> const outs = run(ctx, rows, sp, default_loop);

  std::int32_t const pad = tok.pad_id();
  Tensor prompt_ids = Tensor::full(Shape{b, P}, pad);
  Tensor prompt_am = Tensor::zeros(DType::int32, Shape{b, P});
  Tensor responses = Tensor::full(Shape{b, R}, pad);
  Tensor rmask = Tensor::zeros(DType::int32, Shape{b, R});
  Tensor ramask = Tensor::zeros(DType::int32, Shape{b, R});
  Tensor rlp = Tensor::zeros(DType::float32, Shape{b, R});
  std::vector<std::int32_t> turns(static_cast<std::size_t>(b));
  std::vector<float> calls(static_cast<std::size_t>(b)), errors(static_cast<std::size_t>(b));
  for (std::int64_t i = 0; i < b; ++i) {
    auto const u = static_cast<std::size_t>(i);
    agent::AgentLoopOutput const& out = outs[u];
    std::int64_t const np = static_cast<std::int64_t>(out.prompt_ids.size());
    if (np > P)
      throw shape_error(msg("rlflow::roles::generate_with_agent: row ", i, "'s agent prompt has ", np,
                            " tokens, more than data.max_prompt_length = ", P, "; raise data.max_prompt_length or shorten the prompt"));
    if (static_cast<std::int64_t>(out.response_ids.size()) > R || out.response_mask.size() != out.response_ids.size() ||
        out.response_logprobs.size() != out.response_ids.size())
      throw shape_error(msg("rlflow::roles::generate_with_agent: the agent loop of row ", i, " returned ", out.response_ids.size(),
                            " response ids, ", out.response_mask.size(), " mask entries and ", out.response_logprobs.size(),
                            " log-probs for data.max_response_length = ", R, "; a loop returns one of each per id, at most ", R));
    for (std::int64_t t = 0; t < np; ++t) {
      prompt_ids.at<std::int32_t>(i, P - np + t) = out.prompt_ids[static_cast<std::size_t>(t)];
      prompt_am.at<std::int32_t>(i, P - np + t) = 1;
    }
    for (std::size_t t = 0; t < out.response_ids.size(); ++t) {
      auto const tt = static_cast<std::int64_t>(t);
      responses.at<std::int32_t>(i, tt) = out.response_ids[t];
      ramask.at<std::int32_t>(i, tt) = 1;
      rmask.at<std::int32_t>(i, tt) = out.response_mask[t] != 0;
      rlp.at<float>(i, tt) = out.response_mask[t] != 0 ? out.response_logprobs[t] : 0.0f;
    }
    turns[u] = out.num_turns;
    auto count = [&](char const* k) {
      auto const it = out.metrics.find(k);
      return it == out.metrics.end() ? 0.0f : static_cast<float>(it->second);
    };
    calls[u] = count("agent/tool_calls");
    errors[u] = count("agent/tool_errors");
  }
  // input_ids / attention_mask: [prompt | response], attention on every real token
  std::int64_t const W = P + R;
  Tensor full_ids = Tensor::empty(DType::int32, Shape{b, W});
  Tensor full_am = Tensor::empty(DType::int32, Shape{b, W});
  for (std::int64_t i = 0; i < b; ++i)
    for (std::int64_t t = 0; t < W; ++t) {
      bool const pr = t < P;
      full_ids.at<std::int32_t>(i, t) = pr ? prompt_ids.at<std::int32_t>(i, t) : responses.at<std::int32_t>(i, t - P);
      full_am.at<std::int32_t>(i, t) = pr ? prompt_am.at<std::int32_t>(i, t) : ramask.at<std::int32_t>(i, t - P);
    }
  return DataProto::from_dict({{"prompts", prompt_ids},
                               {"responses", responses},
                               {"input_ids", full_ids},
                               {"attention_mask", full_am},
                               {"response_mask", rmask},
                               {"rollout_log_probs", rlp},
                               {"rollout_seed", prompts.tensor("rollout_seed")},
                               {"num_turns", Tensor::from(turns)},
                               {"agent_tool_calls", Tensor::from(calls)},
                               {"agent_tool_errors", Tensor::from(errors)}},
                              prompts.non_tensors());
}

}  // namespace detail

//! generate_sequences through the agent loop, one row at a time with 'generate'. In: input_ids,
//! attention_mask (b, P), rollout_seed (b), non-tensors raw_prompt (the prompt's text) and
//! extra_info (JSON text; its 'messages' list, when present, replaces the raw_prompt user message;
//! its tools_kwargs reach the tools), optionally agent_name. Each row's request id is
//! "agent-<rollout_seed>", so a generator that seeds by it replays the row.
//! Out: as BasicActorRolloutRef::generate_sequences (prompts (b, P) are the loop's prompt ids,
//! left-padded; responses, response_mask, rollout_log_probs (b, R); input_ids and attention_mask
//! (b, P + R)) plus num_turns (b) int32 and agent_tool_calls, agent_tool_errors (b) float32.
//! sp: the sampling parameters (rollout_sampling); the loop sets max_new_tokens per turn.
inline DataProto generate_with_agent(agent::Generator const& generate, model::Tokenizer const& tok, TrainerConfig const& cfg,
                                     DataProto const& prompts, engine::SamplingParams const& sp,
                                     AgentRolloutSetup const& setup, agent::ToolSet const& tools) {
  detail::AgentRunner const one_at_a_time = [&](agent::AgentContext const& c, std::vector<agent::AgentRow> const& rows,
                                                engine::SamplingParams const& s, std::string_view def) {
    agent::AgentContext ctx = c;
    ctx.generate = generate;
    std::vector<agent::AgentLoopOutput> out;
    out.reserve(rows.size());
    for (auto const& row : rows) out.push_back(setup.loops.run_row(ctx, row, s, def));
    return out;
  };
  return detail::agent_batch(one_at_a_time, tok, cfg, prompts, sp, setup, tools, nullptr);
}

//! generate_with_agent with every row's conversation in flight at once on 'engine' (idle): each
//! ready turn is a request (the row's sticky id "agent-<rollout_seed>"), the engine steps
//! continuously, tools run on 'pool' (actor_rollout_ref.rollout.agent.num_workers threads; null:
//! a turn's calls on their own threads). The same output, bit for bit, as generate_with_agent with
//! agent::RolloutEngineGenerator over an engine with the same weights.
//! verl: AgentLoopWorker.generate_sequences.
inline DataProto generate_with_agent(engine::PagedEngine& engine, model::Tokenizer const& tok, TrainerConfig const& cfg,
                                     DataProto const& prompts, engine::SamplingParams const& sp, AgentRolloutSetup const& setup,
                                     agent::ToolSet const& tools, agent::ToolPool* pool) {
  detail::AgentRunner const all_at_once = [&](agent::AgentContext const& c, std::vector<agent::AgentRow> const& rows,
                                              engine::SamplingParams const& s, std::string_view def) {
    return agent::run_conversations(engine, setup.loops, c, rows, s, def);
  };
  return detail::agent_batch(all_at_once, tok, cfg, prompts, sp, setup, tools, pool);
}

}  // namespace rlflow::roles
