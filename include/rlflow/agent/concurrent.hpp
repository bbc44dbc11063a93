// rlflow/agent/concurrent.hpp: many conversations in flight on one paged engine. Every row's agent
// loop runs on its own thread; each turn it generates is a request to the engine (the
// conversation's sticky request id), and the calling thread steps the engine continuously over
// whatever turns are ready, so a conversation waiting for a tool never holds back the others.
// Tools run on the context's bounded ToolPool. A conversation's tokens depend only on its seed
// (conversation_seed), its request id and each token's index in the conversation, never on what
// runs beside it (the engine runs batch invariant): the outputs equal running the rows one at a
// time with RolloutEngineGenerator on a batch-invariant engine.
// verl: AgentLoopWorker (asyncio tasks per row) over AsyncLLMServerManager and vLLM's AsyncLLM.
#pragma once
#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <future>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <rlflow/agent/agent_loop.hpp>
#include <rlflow/agent/rollout_adapter.hpp>  // conversation_seed
#include <rlflow/core/error.hpp>
#include <rlflow/engine/paged_engine.hpp>

namespace rlflow::agent {

//! A thread-safe token generator over one PagedEngine: generate() (any thread) queues the turn as
//! a request and waits for its tokens; drive() (one thread) adds the queued turns to the engine
//! and steps it until every conversation has ended. Sampling as RolloutEngineGenerator: seed
//! conversation_seed(seed, request_id), the first token's counter the conversation's tokens so
//! far, at most the room max_seq_len leaves.
class ConcurrentGenerator {
 public:
  //! 'engine' (idle) must outlive the generator; 'conversations' is how many end_conversation()
  //! calls drive() waits for.
  ConcurrentGenerator(engine::PagedEngine& engine, int conversations, std::uint64_t seed = 0)
      : e_(engine), seed_(seed), active_(conversations) {}

  GenerateOutput generate(std::string const& request_id, std::vector<std::int32_t> const& prompt, engine::SamplingParams const& sp) {
    if (prompt.empty())
      throw value_error(msg("rlflow::agent::ConcurrentGenerator: request '", request_id, "' has an empty prompt; render the chat first"));
    int const room = e_.config().max_seq_len - int(prompt.size());
    if (room <= 0 || sp.max_new_tokens < 1) return {};
    engine::SamplingParams s = sp;
    s.max_new_tokens = std::min(sp.max_new_tokens, room);
    s.validate(e_.config().vocab_size);
    std::uint64_t const seed = conversation_seed(seed_, request_id);
    Turn t;
    t.prompt = prompt;
    t.params = engine::RequestParams::from_static(s, std::span<std::uint64_t const>(&seed, 1));
    std::future<GenerateOutput> done = t.done.get_future();
    {
      std::lock_guard<std::mutex> lk(m_);
      std::uint64_t& produced = produced_[request_id];
      t.params.first_token = produced;
      t.id = request_id;
      inbox_.push_back(std::move(t));
    }
    cv_.notify_all();
    GenerateOutput out = done.get();
    std::lock_guard<std::mutex> lk(m_);
    produced_[request_id] += out.token_ids.size();
    return out;
  }

  //! A conversation has ended (its thread calls this last, whether it returned or threw).
  void end_conversation() {
    {
      std::lock_guard<std::mutex> lk(m_);
      --active_;
    }
    cv_.notify_all();
  }

  //! Steps the engine until every conversation has ended. A request the engine refuses fails its
  //! own conversation; a failing step (the engine aborts what was in flight) fails the turns in
  //! flight; neither stops the others.
  void drive() {
    std::unordered_map<std::string, std::promise<GenerateOutput>> pending;
    while (true) {
      std::deque<Turn> in;
      {
        std::unique_lock<std::mutex> lk(m_);
        cv_.wait(lk, [&] { return !inbox_.empty() || active_ == 0 || e_.has_unfinished(); });
        if (inbox_.empty() && active_ == 0 && !e_.has_unfinished()) return;
        in.swap(inbox_);
      }
      for (Turn& t : in) {
        try {
          if (pending.count(t.id))
            throw value_error(msg("rlflow::agent::ConcurrentGenerator: two turns of request '", t.id,
                                  "' are in flight at once; give each conversation its own request id"));
          e_.add_request(t.id, std::move(t.prompt), std::move(t.params));
          pending.emplace(t.id, std::move(t.done));
        } catch (...) {
          t.done.set_exception(std::current_exception());
        }
      }
      if (!e_.has_unfinished()) continue;
      std::vector<engine::RequestOutput> outs;
      try {
        outs = e_.step();
      } catch (...) {
        for (auto& [id, p] : pending) p.set_exception(std::current_exception());
        pending.clear();
        continue;
      }
      for (auto& o : outs) {
        auto it = pending.find(o.request_id);
        if (it == pending.end()) continue;
        GenerateOutput g;
        g.token_ids = std::move(o.samples[0].tokens);
        g.logprobs = std::move(o.samples[0].logprobs);
        it->second.set_value(std::move(g));
        pending.erase(it);
      }
    }
  }

 private:
  struct Turn {
    std::string id;
    std::vector<std::int32_t> prompt;
    engine::RequestParams params;
    std::promise<GenerateOutput> done;
  };
  engine::PagedEngine& e_;
  std::uint64_t seed_;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<Turn> inbox_;
  std::unordered_map<std::string, std::uint64_t> produced_;
  int active_;
};

//! Runs every row's agent loop (its agent_name, else 'default_agent_loop') at once on 'engine'
//! (idle, switched to batch_invariant while it runs), stepping it on the calling thread; ctx.generate is replaced by the engine's, ctx's
//! other fields (the chat format, tools, configuration, tool_pool) are shared. Returns the outputs
//! in row order; when rows fail, every conversation still ends and the first failing row's
//! exception (in row order) is rethrown. The rows' request ids must differ (empty: "agent-<row>").
//! verl: AgentLoopWorker.generate_sequences (asyncio.gather over the rows).
inline std::vector<AgentLoopOutput> run_conversations(engine::PagedEngine& engine, AgentLoopRegistry const& loops, AgentContext ctx,
                                                      std::span<AgentRow const> rows, engine::SamplingParams const& sp,
                                                      std::string_view default_agent_loop = "single_turn_agent", std::uint64_t seed = 0) {
  if (engine.has_unfinished())
    throw value_error(msg("rlflow::agent::run_conversations: the engine has ", engine.num_unfinished(),
                          " requests in flight; run conversations on an idle engine"));
  std::vector<AgentRow> rs(rows.begin(), rows.end());
  {
    std::unordered_map<std::string, std::size_t> seen;
    for (std::size_t i = 0; i < rs.size(); ++i) {
      if (rs[i].request_id.empty()) rs[i].request_id = "agent-" + std::to_string(i);
      auto const [it, fresh] = seen.emplace(rs[i].request_id, i);
      if (!fresh)
        throw value_error(msg("rlflow::agent::run_conversations: rows ", it->second, " and ", i, " share the request id '",
                              rs[i].request_id, "'; give each conversation its own id (the trainer uses the row's rollout_seed)"));
    }
  }
  // batches follow the tools' timing: each row's numbers must not depend on its batch
  struct Invariant {
    engine::PagedEngine& e;
    bool const was = e.engine_config().batch_invariant;
    ~Invariant() { e.set_batch_invariant(was); }
  } invariant{engine};
  engine.set_batch_invariant(true);
  ConcurrentGenerator gen(engine, int(rs.size()), seed);
  ctx.generate = generator_ref(gen);
  std::vector<AgentLoopOutput> out(rs.size());
  std::vector<std::exception_ptr> err(rs.size());
  std::string const def(default_agent_loop);
  std::vector<std::thread> th;
  th.reserve(rs.size());
  try {
    for (std::size_t i = 0; i < rs.size(); ++i)
      th.emplace_back([&, i] {
        try {
          out[i] = loops.run_row(ctx, rs[i], sp, def);
        } catch (...) {
          err[i] = std::current_exception();
        }
        gen.end_conversation();
      });
  } catch (...) {  // no thread for the rest: the started conversations still end before this throws
    for (std::size_t i = th.size(); i < rs.size(); ++i) gen.end_conversation();
    gen.drive();
    for (auto& t : th) t.join();
    throw;
  }
  gen.drive();
  for (auto& t : th) t.join();
  for (auto const& e : err)
    if (e) std::rethrow_exception(e);
  return out;
}

}  // namespace rlflow::agent
