// benchmarks/agent/bench_agent.cpp: agent rollouts with a tool that sleeps (agent/concurrent.hpp):
// B conversations through tool_agent on a random two-layer GPT whose tokenizer has whole tool
// calls as single tokens (tests/agent/call_tokenizer.hpp: the model calls the tool often), the
// tool sleeping S ms per call.
//   BM_AgentRollout/mode:0: one conversation at a time (RolloutEngineGenerator on the paged engine,
//     each turn a generate on an idle engine; a call's sleep stalls everything).
//   BM_AgentRollout/mode:1: the same, the engine batch invariant (the cost of invariance alone).
//   BM_AgentRollout/mode:2: every conversation in flight (run_conversations; tools on a pool of
//     agent.num_workers = 8 threads, the engine batch invariant): ready turns batch together and
//     a conversation in a tool never stalls the others.
// Counters: tokens/s (model-sampled tokens), tokens, tool_calls, turns.
// Scale: RLFLOW_BENCH_AGENT="B,R,S" (conversations, response budget, tool sleep in ms; default 32,64,2).
// Run: OPENBLAS_NUM_THREADS=1 ./build/benchmarks/agent/bench_agent
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <rlflow/agent/concurrent.hpp>
#include <rlflow/agent/rollout_adapter.hpp>
#include <rlflow/engine/paged_engine.hpp>

#include "agent/call_tokenizer.hpp"

namespace {
namespace agent = rlflow::agent;
namespace engine = rlflow::engine;
using agent::json;

struct Workload {
  int B = 32, R = 64, S = 2;
};
Workload workload() {
  Workload w;
  if (char const* e = std::getenv("RLFLOW_BENCH_AGENT")) {
    if (std::sscanf(e, "%d,%d,%d", &w.B, &w.R, &w.S) != 3 || w.B < 1 || w.R < 1 || w.S < 0) {
      std::fprintf(stderr, "RLFLOW_BENCH_AGENT='%s': expected B,R,S (conversations, response budget, tool sleep ms; e.g. 32,64,2)\n", e);
      std::exit(2);
    }
  }
  return w;
}

void BM_AgentRollout(benchmark::State& state) {
  int const mode = int(state.range(0));
  Workload const w = workload();
  auto const tok = agent_test::CallTokenizer::sleepy();
  rlflow::HfChatTemplate const tmpl(agent_test::frame_template);
  agent::ToolSet tools;
  agent::Tool t;
  t.schema.name = "sleepy";
  t.fn = [ms = w.S](json const& args, json const&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    agent::ToolResult r;
    r.text = std::to_string(13 * args.value("x", 0));
    return r;
  };
  tools.add(t);
  rlflow::model::GPTConfig mc{.vocab_size = tok.vocab_size(), .max_seq_len = w.R + 16, .n_layer = 2, .n_head = 4, .n_embd = 64};
  mc.validate();
  engine::PagedEngineConfig pc;
  pc.batch_invariant = mode >= 1;
  engine::PagedEngine eng(mc, pc);
  auto const loops = agent::AgentLoopRegistry::builtin();
  agent::AgentContext ctx;
  ctx.chat.chat_template = &tmpl;
  ctx.chat.tokenizer = &tok;
  ctx.tools = &tools;
  ctx.config.response_length = w.R;
  ctx.config.multi_turn.max_parallel_calls = 2;
  ctx.config.multi_turn.tokenization_sanity_check_mode = "disable";
  std::vector<agent::AgentRow> rows(static_cast<std::size_t>(w.B));
  for (int i = 0; i < w.B; ++i) {
    rows[std::size_t(i)].messages = json::array({json{{"role", "user"}, {"content", std::to_string(100 + 7 * i)}}});
    rows[std::size_t(i)].request_id = "bench-" + std::to_string(i);
  }
  engine::SamplingParams const sp{.temperature = 1.0f, .eos_id = tok.eos_id()};
  agent::ToolPool pool(8);
  double tokens = 0, calls = 0, turns = 0;
  for (auto _ : state) {
    std::vector<agent::AgentLoopOutput> out;
    if (mode <= 1) {
      agent::RolloutEngineGenerator<engine::PagedEngine> gen(eng, 1);
      agent::AgentContext c = ctx;
      c.generate = agent::generator_ref(gen);
      for (auto const& r : rows) out.push_back(loops.run_row(c, r, sp, "tool_agent"));
    } else {
      agent::AgentContext c = ctx;
      c.tool_pool = &pool;
      out = agent::run_conversations(eng, loops, c, rows, sp, "tool_agent", 1);
    }
    for (auto const& o : out) {
      for (auto m : o.response_mask) tokens += m;
      calls += o.metrics.count("agent/tool_calls") ? o.metrics.at("agent/tool_calls") : 0.0;
      turns += o.num_turns;
    }
  }
  double const it = double(state.iterations());
  state.counters["tokens/s"] = benchmark::Counter(tokens, benchmark::Counter::kIsRate);
  state.counters["tokens"] = tokens / it;
  state.counters["tool_calls"] = calls / it;
  state.counters["turns"] = turns / it;
}
BENCHMARK(BM_AgentRollout)->ArgName("mode")->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
