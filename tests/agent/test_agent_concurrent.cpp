// Conversations in flight at once (rlflow/agent/concurrent.hpp): on a tiny random model whose
// tokenizer has whole tool calls as single tokens (so the model calls tools often), random
// batches through tool_agent with a tool that sleeps random short times give, row for row, the
// same prompt ids, response ids, masks, log-probs (bit for bit), turns and metrics as the rows run
// one at a time with RolloutEngineGenerator, whatever the tool pool's size and the engine's
// max_num_seqs, block size, chunking, prefix caching and pool budget (preemption). The tool calls
// running at once never exceed the pool; a conversation blocked in a tool does not stop the
// others; generate_with_agent on the paged engine equals the one-at-a-time batch.
#include <catch2/catch.hpp>

#include <rlflow/agent/concurrent.hpp>
#include <rlflow/roles/agent_rollout.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "agent/call_tokenizer.hpp"

namespace test_agent_concurrent {

using namespace rlflow;
using agent::json;

namespace {

model::GPTConfig tiny_model(int vocab, int max_seq_len) {
  model::GPTConfig c{.vocab_size = vocab, .max_seq_len = max_seq_len, .n_layer = 1, .n_head = 2, .n_embd = 16};
  c.seed = 5;
  c.validate();
  return c;
}

//! Tool calls running now and the most at once.
struct Concurrency {
  std::atomic<int> now{0}, peak{0}, calls{0};
};

//! 'sleepy': sleeps 0..max_ms milliseconds (from its own RNG, so timing varies run to run) and
//! answers 13 * x; x = 3 is answered as an error.
agent::Tool sleepy_tool(std::shared_ptr<Concurrency> seen, int max_ms) {
  agent::Tool t;
  t.schema.name = "sleepy";
  t.schema.description = "sleeps, then answers 13 x";
  t.fn = [seen, max_ms](json const& args, json const&) {
    int const n = ++seen->now;
    int p = seen->peak.load();
    while (n > p && !seen->peak.compare_exchange_weak(p, n)) {
    }
    ++seen->calls;
    thread_local std::mt19937 rng(std::random_device{}());
    std::this_thread::sleep_for(std::chrono::microseconds(std::uniform_int_distribution<int>(0, max_ms * 1000)(rng)));
    --seen->now;
    int const x = args.value("x", 0);
    agent::ToolResult r;
    r.text = std::to_string(13 * x);
    r.error = x == 3;  // counted in agent/tool_errors
    r.metrics["slept"] = 1;
    return r;
  };
  return t;
}

void same_output(agent::AgentLoopOutput const& a, agent::AgentLoopOutput const& b) {
  CHECK(a.prompt_ids == b.prompt_ids);
  CHECK(a.response_ids == b.response_ids);
  CHECK(a.response_mask == b.response_mask);
  REQUIRE(a.response_logprobs.size() == b.response_logprobs.size());
  for (std::size_t k = 0; k < a.response_logprobs.size(); ++k) CHECK(a.response_logprobs[k] == b.response_logprobs[k]);
  CHECK(a.num_turns == b.num_turns);
  CHECK(a.metrics == b.metrics);
  CHECK(a.stop_reason == b.stop_reason);
  CHECK(a.messages == b.messages);
}

//! A start line for n threads: arrive_and_wait() returns once all n have arrived (or after 10 s,
//! so a conversation that fails before its first turn cannot hang the others).
struct StartTogether {
  explicit StartTogether(int n) : left(n) {}
  void arrive() {
    std::lock_guard<std::mutex> lk(m);
    if (--left <= 0) cv.notify_all();
  }
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lk(m);
    if (--left <= 0) cv.notify_all();
    cv.wait_for(lk, std::chrono::seconds(10), [&] { return left <= 0; });
  }
  std::mutex m;
  std::condition_variable cv;
  int left;
};

}  // namespace

TEST_CASE("conversations in flight equal one at a time, whatever the pool and the engine's limits", "[agent][concurrent]") {
  auto const tok = agent_test::CallTokenizer::sleepy();
  HfChatTemplate const tmpl(agent_test::frame_template);
  auto const seen = std::make_shared<Concurrency>();
  agent::ToolSet tools;
  tools.add(sleepy_tool(seen, 3));
  int const max_len = 96;
  model::GPTConfig const mc = tiny_model(tok.vocab_size(), max_len);
  engine::PagedEngine ref_engine(mc, engine::PagedEngineConfig{.batch_invariant = true});
  std::size_t const block_bytes = ref_engine.metrics().block_bytes;
  auto const loops = agent::AgentLoopRegistry::builtin();
  std::mt19937_64 rng(31);
  int total_calls = 0, multi_turn_rows = 0;
  std::uint64_t preempted = 0, cache_hits = 0;
  for (int round = 0; round < 48; ++round) {  // 16 tight pools
    std::uniform_int_distribution<int> rows_d(1, 9), len_d(1, 6), ch_d(0, 9), resp_d(8, 48), pool_d(1, 4), calls_d(1, 3);
    int const b = round % 3 == 1 ? 8 : rows_d(rng);
    agent::AgentContext ctx;
    ctx.chat.chat_template = &tmpl;
    ctx.chat.tokenizer = &tok;
    ctx.tools = &tools;
    ctx.config.response_length = resp_d(rng);
    ctx.config.multi_turn.max_parallel_calls = calls_d(rng);
    ctx.config.multi_turn.tokenization_sanity_check_mode = "disable";
    engine::SamplingParams sp{.temperature = round % 4 == 3 ? 0.7f : 1.0f, .eos_id = tok.eos_id()};
    std::vector<agent::AgentRow> rows(static_cast<std::size_t>(b));
    for (int i = 0; i < b; ++i) {
      std::string q;
      for (int k = len_d(rng); k > 0; --k) q += char('0' + ch_d(rng));
      if (i > 0 && rng() % 4 == 0) q = rows[0].messages[0]["content"].get<std::string>();  // a shared prefix
      rows[std::size_t(i)].messages = json::array({json{{"role", "user"}, {"content", q}}});
      rows[std::size_t(i)].request_id = "r" + std::to_string(round) + "-" + std::to_string(rng() % 100000) + "-" + std::to_string(i);
      rows[std::size_t(i)].agent_name = i % 5 == 4 ? "single_turn_agent" : "tool_agent";
    }
    // one at a time on the reference engine
    std::vector<agent::AgentLoopOutput> seq;
    {
      agent::RolloutEngineGenerator<engine::PagedEngine> gen(ref_engine, 99);
      agent::AgentContext c = ctx;
      c.generate = agent::generator_ref(gen);
      for (auto const& r : rows) seq.push_back(loops.run_row(c, r, sp));
    }
    // all at once: a random engine configuration and pool size
    engine::PagedEngineConfig pc;
    pc.block_size = std::vector<int>{2, 4, 16}[rng() % 3];
    pc.max_num_seqs = std::vector<int>{1, 2, 3, 64}[rng() % 4];
    pc.enable_chunked_prefill = rng() % 2;
    pc.max_num_batched_tokens = pc.enable_chunked_prefill ? std::vector<int>{4, 16, 8192}[rng() % 3] : 8192;
    pc.enable_prefix_caching = rng() % 2;
    if (round % 3 == 1) {  // a tight pool: one full-length sequence's blocks (preemption)
      pc.max_num_seqs = 64;
      int const per_seq = (max_len + pc.block_size - 1) / pc.block_size;
      pc.kv_cache_bytes = std::size_t(per_seq) * (block_bytes / 16) * std::size_t(pc.block_size);
    }
    int const pool_size = pool_d(rng);
    INFO("round " << round << " rows " << b << " R " << ctx.config.response_length << " block " << pc.block_size << " max_num_seqs "
                  << pc.max_num_seqs << " chunk " << pc.max_num_batched_tokens << " prefix " << pc.enable_prefix_caching << " kv "
                  << pc.kv_cache_bytes << " pool " << pool_size);
    engine::PagedEngine eng(mc, pc);
    agent::ToolPool pool(pool_size);
    ctx.tool_pool = &pool;
    // in the tight pools each conversation's first turn waits for every other one's, so their
    // sequences overlap in the engine (and outgrow the pool) whatever order the threads run in
    agent::AgentLoopRegistry together = loops;
    StartTogether start(b);
    if (round % 3 == 1)
      for (std::string name : {"single_turn_agent", "tool_agent"})
        together.add(name, agent::AgentLoopRegistry::Fn([&loops, &start, name](agent::AgentContext const& c, agent::AgentRow const& r,
                                                                                engine::SamplingParams const& s) {
                       agent::AgentContext mine = c;
                       bool first = true;
                       mine.generate = [&start, &first, inner = c.generate](std::string const& id, std::vector<std::int32_t> const& p,
                                                                            engine::SamplingParams const& q) {
                         if (std::exchange(first, false)) start.arrive_and_wait();
                         return inner(id, p, q);
                       };
                       struct Leave {  // a conversation that never generates does not hold the others
                         StartTogether& st;
                         bool const& first;
                         ~Leave() {
                           if (first) st.arrive();
                         }
                       } leave{start, first};
                       return loops.run(name, mine, r, s);
                     }));
    std::vector<agent::AgentLoopOutput> const con = agent::run_conversations(eng, together, ctx, rows, sp, "tool_agent", 99);
    REQUIRE(con.size() == seq.size());
    for (std::size_t i = 0; i < con.size(); ++i) {
      INFO("row " << i);
      same_output(con[i], seq[i]);
      total_calls += int(con[i].metrics.count("agent/tool_calls") ? con[i].metrics.at("agent/tool_calls") : 0);
      multi_turn_rows += con[i].num_turns > 2;
    }
    CHECK(pool.peak_busy() <= pool_size);
    CHECK(!eng.has_unfinished());
    preempted += eng.metrics().preemptions;
    cache_hits += eng.metrics().prefix_cache_hits;
    CHECK(!eng.engine_config().batch_invariant);  // switched back
  }
  CHECK(seen->peak.load() <= 4);  // the largest pool
  CHECK(total_calls > 20);        // the comparison covered tool turns
  CHECK(multi_turn_rows > 5);
  CHECK(preempted > 0);   // the tight pools preempted
  CHECK(cache_hits > 0);  // later turns found earlier turns' blocks
}

TEST_CASE("a conversation waiting in a tool does not stop the others", "[agent][concurrent]") {
  auto const tok = agent_test::CallTokenizer::sleepy();
  HfChatTemplate const tmpl(agent_test::frame_template);
  model::GPTConfig const mc = tiny_model(tok.vocab_size(), 64);
  engine::PagedEngine eng(mc);
  // tokens sampled for the other conversations, seen from the engine's logits observer
  std::mutex m;
  std::condition_variable cv;
  int others = 0;
  eng.set_logits_observer([&](std::string_view id, int, int, std::span<float const>) {
    if (id != "waiter") {
      std::lock_guard<std::mutex> lk(m);
      ++others;
      cv.notify_all();
    }
  });
  // the waiter's loop: a tool job on the pool that returns once the others have sampled 40 tokens
  // (or after 20 s, which fails the check), then one turn
  bool released = false;
  agent::AgentLoopRegistry loops = agent::AgentLoopRegistry::builtin();
  loops.add("waiter", agent::AgentLoopRegistry::Fn([&](agent::AgentContext const& c, agent::AgentRow const& r,
                                                       engine::SamplingParams const& sp) {
              REQUIRE(c.tool_pool);
              std::vector<std::function<void()>> job{[&] {
                std::unique_lock<std::mutex> lk(m);
                released = cv.wait_for(lk, std::chrono::seconds(20), [&] { return others >= 40; });
              }};
              c.tool_pool->run_all(job);
              return agent::SingleTurnAgentLoop{}.run(c, r, sp);
            }));
  agent::AgentContext ctx;
  ctx.chat.chat_template = &tmpl;
  ctx.chat.tokenizer = &tok;
  ctx.config.response_length = 20;
  agent::ToolPool pool(1);
  ctx.tool_pool = &pool;
  std::vector<agent::AgentRow> rows(4);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    rows[i].messages = json::array({json{{"role", "user"}, {"content", std::to_string(i) + "1"}}});
    rows[i].request_id = i == 0 ? "waiter" : "other-" + std::to_string(i);
    rows[i].agent_name = i == 0 ? "waiter" : "single_turn_agent";
  }
  // the others stop at EOS: eos_id -1 makes them run the whole budget, 3 x 20 = 60 tokens
  engine::SamplingParams const sp{.eos_id = -1};
  auto const out = agent::run_conversations(eng, loops, ctx, rows, sp);
  CHECK(released);
  REQUIRE(out.size() == 4);
  for (auto const& o : out) CHECK(o.response_ids.size() == 20);
}

TEST_CASE("run_conversations: bad rows and a failing row are named, and every conversation ends", "[agent][concurrent]") {
  auto const tok = agent_test::CallTokenizer::sleepy();
  HfChatTemplate const tmpl(agent_test::frame_template);
  model::GPTConfig const mc = tiny_model(tok.vocab_size(), 64);
  engine::PagedEngine eng(mc);
  auto const loops = agent::AgentLoopRegistry::builtin();
  agent::AgentContext ctx;
  ctx.chat.chat_template = &tmpl;
  ctx.chat.tokenizer = &tok;
  ctx.config.response_length = 8;
  engine::SamplingParams const sp{.eos_id = tok.eos_id()};
  std::vector<agent::AgentRow> rows(3);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    rows[i].messages = json::array({json{{"role", "user"}, {"content", "12"}}});
    rows[i].request_id = "x" + std::to_string(i);
  }
  SECTION("two rows with one request id") {
    rows[2].request_id = "x0";
    CHECK_THROWS_WITH(agent::run_conversations(eng, loops, ctx, rows, sp),
                      Catch::Contains("rows 0 and 2") && Catch::Contains("'x0'"));
  }
  SECTION("a row naming no registered loop fails, the others still end") {
    rows[1].agent_name = "nope";
    CHECK_THROWS_WITH(agent::run_conversations(eng, loops, ctx, rows, sp), Catch::Contains("'nope'"));
    CHECK(!eng.has_unfinished());
  }
  SECTION("a prompt that fills the model's positions generates nothing, as one at a time") {
    rows[0].messages[0]["content"] = std::string(70, '1');
    auto const out = agent::run_conversations(eng, loops, ctx, rows, sp);  // no room: an empty generation, as one at a time
    CHECK(out[0].response_ids.empty());
    CHECK(out[0].stop_reason == "no_tool_call");
    CHECK(!out[1].response_ids.empty());
  }
  SECTION("a ToolPool of no threads") { CHECK_THROWS_WITH(agent::ToolPool(0), Catch::Contains("agent.num_workers")); }
}

TEST_CASE("generate_with_agent on the paged engine equals the batch run one row at a time", "[agent][concurrent][rollout]") {
  auto const tok = agent_test::CallTokenizer::sleepy();
  auto const seen = std::make_shared<Concurrency>();
  agent::ToolSet tools;
  tools.add(sleepy_tool(seen, 2));
  roles::AgentRolloutSetup setup;
  setup.chat_template = std::make_shared<HfChatTemplate const>(agent_test::frame_template);
  std::int64_t const P = 8, R = 40, b = 7;
  TrainerConfig cfg;
  cfg.data.max_prompt_length = P;
  cfg.data.max_response_length = R;
  cfg.actor_rollout_ref.rollout.multi_turn.enable = true;
  cfg.actor_rollout_ref.rollout.agent.default_agent_loop = "tool_agent";
  cfg.actor_rollout_ref.rollout.multi_turn.max_parallel_calls = 2;
  cfg.actor_rollout_ref.rollout.multi_turn.tokenization_sanity_check_mode = "disable";
  model::GPTConfig const mc = tiny_model(tok.vocab_size(), int(P + R));
  std::mt19937_64 rng(5);
  Tensor ids = Tensor::full(Shape{b, P}, tok.pad_id());
  Tensor am = Tensor::zeros(DType::int32, Shape{b, P});
  std::vector<std::int64_t> seeds;
  NonTensorColumn raw, extra;
  for (std::int64_t i = 0; i < b; ++i) {
    std::string const q = std::to_string(rng() % 1000);
    auto const t = tok.encode(q);
    for (std::size_t k = 0; k < t.size(); ++k) {
      ids.at<std::int32_t>(i, P - std::int64_t(t.size()) + std::int64_t(k)) = t[k];
      am.at<std::int32_t>(i, P - std::int64_t(t.size()) + std::int64_t(k)) = 1;
    }
    seeds.push_back(std::int64_t(rng() >> 3));
    raw.emplace_back(q);
    extra.emplace_back(std::string());
  }
  DataProto const in = DataProto::from_dict({{"input_ids", ids}, {"attention_mask", am}, {"rollout_seed", Tensor::from(seeds)}},
                                            {{"raw_prompt", raw}, {"extra_info", extra}});
  engine::SamplingParams sp;
  sp.eos_id = tok.eos_id();
  engine::PagedEngine one(mc, engine::PagedEngineConfig{.batch_invariant = true}), all(mc);
  agent::RolloutEngineGenerator<engine::PagedEngine> gen(one);
  DataProto const a = roles::generate_with_agent(agent::generator_ref(gen), tok, cfg, in, sp, setup, tools);
  agent::ToolPool pool(3);
  DataProto const c = roles::generate_with_agent(all, tok, cfg, in, sp, setup, tools, &pool);
  for (char const* key : {"prompts", "responses", "input_ids", "attention_mask", "response_mask", "num_turns"}) {
    INFO(key);
    auto const x = a.tensor(key).span<std::int32_t>(), y = c.tensor(key).span<std::int32_t>();
    CHECK(std::vector<std::int32_t>(x.begin(), x.end()) == std::vector<std::int32_t>(y.begin(), y.end()));
  }
  for (char const* key : {"rollout_log_probs", "agent_tool_calls", "agent_tool_errors"}) {
    INFO(key);
    auto const x = a.tensor(key).span<float>(), y = c.tensor(key).span<float>();
    CHECK(std::vector<float>(x.begin(), x.end()) == std::vector<float>(y.begin(), y.end()));
  }
  float calls = 0;
  for (float v : c.tensor("agent_tool_calls").span<float>()) calls += v;
  CHECK(calls > 0);
}

}  // namespace test_agent_concurrent
