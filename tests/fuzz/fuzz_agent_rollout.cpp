// Fuzz target: a row's extra_info as agent rollouts read it (roles::generate_with_agent): JSON
// text whose 'messages' replace the prompt, 'agent_name' picks the loop and 'tools_kwargs' reach
// the tools. The input is the extra_info text; one row runs with a scripted generator (a
// calculator call, then an answer) over a printable character tokenizer.
// Silent accept: an accepted batch whose response_mask is 1 outside the attention mask, whose
// rollout log-probs are not 0 at mask 0, or whose prompt is not left-padded.
#include "fuzz/fuzz_driver.hpp"

#include <map>

#include <rlflow/roles/agent_rollout.hpp>

namespace fuzz_agent_rollout {

using namespace rlflow;

namespace {
std::string printable() {
  std::string a = "\n";
  for (char c = 32; c < 127; ++c) a.push_back(c);
  return a;
}
struct Scripted {
  model::CharTokenizer const* tok;
  std::map<std::string, int> turn;
  agent::GenerateOutput generate(std::string const& id, std::vector<std::int32_t> const&, engine::SamplingParams const& sp) {
    int const k = turn[id]++;
    agent::GenerateOutput g;
    g.token_ids = tok->encode(k == 0 ? R"(<tool_call>{"name": "calculator", "arguments": {"expression": "6*7"}}</tool_call>)" : "42");
    g.token_ids.push_back(tok->eos_id());
    if (int(g.token_ids.size()) > sp.max_new_tokens) g.token_ids.resize(std::size_t(std::max(sp.max_new_tokens, 0)));
    g.logprobs.assign(g.token_ids.size(), -0.5f);
    return g;
  }
};
}  // namespace

std::vector<std::string> fuzz_seeds() {
  return {"",
          "{}",
          R"({"messages": [{"role": "user", "content": "6*7?"}]})",
          R"({"agent_name": "single_turn_agent", "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]})",
          R"({"agent_name": "tool_agent", "tools_kwargs": {"calculator": {"create_kwargs": {}}}})",
          R"({"messages": [], "agent_name": 3})"};
}

fuzz::outcome fuzz_one(std::string_view in) {
  static model::CharTokenizer const tok(printable());
  static agent::ToolSet const tools = [] {
    agent::ToolSet t;
    t.add(agent::calculator_tool());
    return t;
  }();
  static roles::AgentRolloutSetup const setup;
  std::int64_t const P = 48, R = 160;
  TrainerConfig cfg;
  cfg.data.max_prompt_length = P;
  cfg.data.max_response_length = R;
  cfg.actor_rollout_ref.rollout.multi_turn.enable = true;
  cfg.actor_rollout_ref.rollout.agent.default_agent_loop = "tool_agent";
  cfg.actor_rollout_ref.rollout.multi_turn.max_assistant_turns = 4;
  NonTensorColumn raw, extra;
  raw.emplace_back(std::string("what is 6*7?"));
  extra.emplace_back(std::string(in));
  DataProto const prompts = DataProto::from_dict({{"input_ids", Tensor::full(Shape{1, P}, tok.pad_id())},
                                                  {"attention_mask", Tensor::zeros(DType::int32, Shape{1, P})},
                                                  {"rollout_seed", Tensor::from(std::vector<std::int64_t>{7})}},
                                                 {{"raw_prompt", raw}, {"extra_info", extra}});
  Scripted gen{&tok, {}};
  engine::SamplingParams sp;
  sp.eos_id = tok.eos_id();
  DataProto const out = roles::generate_with_agent(agent::generator_ref(gen), tok, cfg, prompts, sp, setup, tools);
  bool silent = false;
  Tensor const& am = out.tensor("attention_mask");
  Tensor const& m = out.tensor("response_mask");
  Tensor const& lp = out.tensor("rollout_log_probs");
  for (std::int64_t t = 0; t < R; ++t) {
    silent |= m.at<std::int32_t>(0, t) > am.at<std::int32_t>(0, P + t);
    silent |= !m.at<std::int32_t>(0, t) && lp.at<float>(0, t) != 0.0f;
  }
  for (std::int64_t t = 1; t < P; ++t) silent |= am.at<std::int32_t>(0, t - 1) > am.at<std::int32_t>(0, t);
  return silent ? fuzz::outcome::silent_accept : fuzz::outcome::accepted;
}

}  // namespace fuzz_agent_rollout
RLFLOW_FUZZ_TARGET(agent_rollout)
