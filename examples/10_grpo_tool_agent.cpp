// examples/10_grpo_tool_agent.cpp: a task where the tool pays. Prompts are 2-digit products
// ("37*58=" -> "2146"), which the tiny character-level GPT does not learn to compute in the run's
// budget. With actor_rollout_ref.rollout.multi_turn.enable=true (the default here) each row runs
// the task's agent loop, CalcAgentLoop: a response that starts with '?' calls the calculator
// (agent::calculator_tool) on the prompt's expression, whose answer joins the response with
// response_mask 0 (in context, never trained on); the model then writes on, ideally just EOS.
// The same model and steps with multi_turn.enable=false sample one plain answer. The reward
// (ToolTaskReward) reads every response token in context, as verl's reward manager does:
// 1 for the exact product, else half the share of digits in place.
// Usage: 10_grpo_tool_agent [key=value ...]; docs/agent_loop.md ("A task where the tool pays")
// gives both curves and their commands. RLFLOW_TOOL_MIN_SCORE=<s>: exit with an error when the
// final critic/score/mean is below s (the CTest examples.tool_agent_learns).
#include <rlflow/rlflow.hpp>
#include <rlflow/agent/agent_loop.hpp>
#include <rlflow/roles/agent_rollout.hpp>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {
namespace agent = rlflow::agent;

//! The task's agent loop: a one-character call syntax a character-level model can reach.
//! Turn 1 samples one token; '?' calls the calculator on the prompt's expression (the prompt
//! without its '='), its answer is appended with mask 0, and the model writes the rest of the
//! budget (turn 2). Any other first token: the model writes on in the same turn.
//! verl: a ToolAgentLoop with a task-specific tool parser.
struct CalcAgentLoop {
  agent::AgentLoopOutput run(agent::AgentContext const& ctx, agent::AgentRow const& row, rlflow::engine::SamplingParams const& sp0) const {
    agent::AgentLoopOutput out;
    std::string const prompt = row.messages.at(0).at("content").get<std::string>();
    out.prompt_ids = ctx.chat.encode(ctx.chat.render(row.messages, nullptr, true));
    std::vector<std::int32_t> ids = out.prompt_ids;
    std::size_t const R = static_cast<std::size_t>(ctx.config.response_length);
    auto generate = [&](std::size_t most) {  // appends up to 'most' sampled tokens with mask 1
      rlflow::engine::SamplingParams sp = sp0;
      sp.max_new_tokens = static_cast<int>(most);
      agent::GenerateOutput g = ctx.generate(row.request_id, ids, sp);
      if (g.token_ids.size() > most) g.token_ids.resize(most);
      g.logprobs.resize(g.token_ids.size(), 0.0f);
      ids.insert(ids.end(), g.token_ids.begin(), g.token_ids.end());
      out.response_ids.insert(out.response_ids.end(), g.token_ids.begin(), g.token_ids.end());
      out.response_mask.insert(out.response_mask.end(), g.token_ids.size(), 1);
      out.response_logprobs.insert(out.response_logprobs.end(), g.logprobs.begin(), g.logprobs.end());
      return g.token_ids;
    };
    int assistant = 1, user = 0;
    out.metrics["agent/tool_calls"] = 0;
    out.metrics["agent/tool_errors"] = 0;
    auto const first = generate(1);
    bool const ended = first.empty() || first[0] == sp0.eos_id;
    if (!ended && ctx.chat.decode(first) == "?" && ctx.tools && ctx.tools->find("calculator")) {
      agent::ToolCall call;
      call.name = "calculator";
      call.arguments = {{"expression", prompt.substr(0, prompt.find('='))}};
      agent::ToolResult r;  // on the rollout worker's tool threads (agent.num_workers) when it has them
      std::vector<std::function<void()>> job{[&] { r = ctx.tools->call(call, nullptr); }};
      if (ctx.tool_pool) ctx.tool_pool->run_all(job);
      else job[0]();
      out.metrics["agent/tool_calls"] += 1;
      out.metrics["agent/tool_errors"] += r.error;
      std::vector<std::int32_t> const add = ctx.chat.encode(r.error ? std::string() : r.text);
      if (out.response_ids.size() + add.size() < R) {
        ids.insert(ids.end(), add.begin(), add.end());
        out.response_ids.insert(out.response_ids.end(), add.begin(), add.end());
        out.response_mask.insert(out.response_mask.end(), add.size(), 0);
        out.response_logprobs.insert(out.response_logprobs.end(), add.size(), 0.0f);
        ++user;
        ++assistant;
      }
    }
    if (!ended && out.response_ids.size() < R) generate(R - out.response_ids.size());
    out.num_turns = assistant + user + 1;
    out.stop_reason = user ? "no_tool_call" : "response_length";
    return out;
  }
};

//! Scores every response token in context (the model's and the calculator's), EOS and the call
//! character left out: 1 for the exact product, else half the share of digits in place.
class ToolTaskReward {
 public:
  using role_tag = rlflow::reward_tag;
  static constexpr std::string_view role_name = "reward";
  ToolTaskReward(rlflow::WorkerContext const&, rlflow::roles::RoleSetup setup) : tok_(rlflow::roles::role_tokenizer(setup)) {}

  rlflow::DataProto compute_rm_score(rlflow::DataProto const& data) {
    rlflow::Tensor const& resp = data.tensor("responses");
    rlflow::Tensor const& am = data.tensor("attention_mask");
    rlflow::Tensor const& mask = data.tensor("response_mask");
    auto const& rm = data.non_tensor("reward_model");
    std::int64_t const b = resp.dim(0), R = resp.dim(1), P = am.dim(1) - R;
    rlflow::Tensor scores = rlflow::Tensor::zeros(rlflow::DType::float32, rlflow::Shape{b, R});
    for (std::int64_t i = 0; i < b; ++i) {
      std::vector<std::int32_t> ids;
      std::int64_t last = -1;  // the last trained token carries the score
      for (std::int64_t t = 0; t < R; ++t) {
        if (!am.at<std::int32_t>(i, P + t)) continue;
        if (mask.at<std::int32_t>(i, t)) last = t;
        if (resp.at<std::int32_t>(i, t) != tok_->eos_id()) ids.push_back(resp.at<std::int32_t>(i, t));
      }
      std::string text = tok_->decode(ids);
      if (!text.empty() && text[0] == '?') text.erase(0, 1);
      std::string const truth = rm[static_cast<std::size_t>(i)].as_dict().get("ground_truth").as_string();
      double score = text == truth ? 1.0 : 0.0;
      if (score == 0.0) {
        std::size_t hits = 0;
        for (std::size_t k = 0; k < std::min(text.size(), truth.size()); ++k) hits += text[k] == truth[k];
        score = 0.5 * static_cast<double>(hits) / static_cast<double>(std::max(text.size(), truth.size()));
      }
      if (last >= 0) scores.at<float>(i, last) = static_cast<float>(score);
    }
    return rlflow::DataProto::from_dict({{"token_level_scores", scores}});
  }
  using methods = rlflow::methods<rlflow::method<&ToolTaskReward::compute_rm_score, rlflow::dispatch::DPComputeProto>>;

 private:
  std::shared_ptr<rlflow::model::Tokenizer const> tok_;
};

//! n prompts "a*b=" with a, b in [10, 99] and their products.
rlflow::PromptDataset products(int n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> d(10, 99);
  std::vector<rlflow::PromptItem> items;
  for (int i = 0; i < n; ++i) {
    int const a = d(rng), b = d(rng);
    items.push_back({std::to_string(a) + "*" + std::to_string(b) + "=", std::to_string(a * b), "products"});
  }
  return rlflow::PromptDataset(std::move(items), true, seed);
}
}  // namespace

using Trainer = rlflow::Trainer<rlflow::GRPO, rlflow::Colocate<3>, ToolTaskReward>;

int main(int argc, char** argv) {
  return rlflow::run_main([&] {
    // BOS + "99*99=" ; '?', up to 4 answer digits, EOS, and room to spare
    rlflow::TrainerConfig defaults = rlflow::presets::grpo_tiny_cpu(7, 8);
    defaults.trainer.default_local_dir = "runs/tool_agent";
    defaults.trainer.total_training_steps = 60;
    defaults.trainer.log_freq = 10;
    defaults.actor_rollout_ref.rollout.multi_turn.enable = true;
    defaults.actor_rollout_ref.rollout.agent.default_agent_loop = "calculator_agent";
    rlflow::TrainerConfig cfg = rlflow::TrainerConfig::from_args(argc, argv, Trainer::program_defaults(defaults));

    auto& setup = rlflow::roles::agent_rollout_setup();  // before the Trainer starts its workers
    setup.loops.add<CalcAgentLoop>("calculator_agent");
    auto tools = std::make_shared<agent::ToolSet>();
    tools->add(agent::calculator_tool());
    setup.tools = tools;

    Trainer trainer(cfg, products(4096, 1), "0123456789*=?");
    rlflow::Metrics last = trainer.fit();
    double const score = last["critic/score/mean"];
    std::printf("done: %lld steps, tool %s, final critic/score/mean %.3f, num_turns/mean %.2f\n",
                static_cast<long long>(trainer.global_step()), cfg.actor_rollout_ref.rollout.multi_turn.enable ? "on" : "off",
                score, last.count("num_turns/mean") ? last["num_turns/mean"] : 2.0);
    if (char const* m = std::getenv("RLFLOW_TOOL_MIN_SCORE"); m && score < std::atof(m))
      throw rlflow::error(rlflow::msg("10_grpo_tool_agent: the final score ", score, " is below RLFLOW_TOOL_MIN_SCORE=", m));
  });
}
