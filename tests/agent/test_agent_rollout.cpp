// Agent rollouts in the actor role (rlflow/roles/agent_rollout.hpp): on random scripted
// conversations with calculator calls, the batch's responses, response_mask (1 on the sampled
// tokens only), attention_mask (every real token), rollout_log_probs (0 at mask 0), num_turns and
// tool counts equal a reference assembled from the script and int64 arithmetic. The actor update
// ignores mask-0 tokens: perturbing old / reference log-probs and advantages there leaves the
// updated weights bit-identical, while one mask-1 token's change moves them; tool tokens stay in
// the context (changing one changes later log-probs). generate_sequences with multi_turn.enable
// on the tiny random model keeps the mask law.
#include <catch2/catch.hpp>

#include <rlflow/roles/actor_rollout_ref.hpp>

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace test_agent_rollout {

using namespace rlflow;
using agent::json;

namespace {

std::string printable() {
  std::string a = "\n";
  for (char c = 32; c < 127; ++c) a.push_back(c);
  return a;
}

//! One scripted turn: the text the model "samples" and the tool answer expected after it ("" none).
struct Turn {
  std::string text;
  std::string answer;
};

//! Replays each conversation's turns (keyed by request id) with random log-probs.
struct ScriptedGenerator {
  explicit ScriptedGenerator(model::CharTokenizer const* t) : tok(t) {}
  model::CharTokenizer const* tok;
  std::map<std::string, std::vector<Turn>> scripts;
  std::map<std::string, int> next;
  std::map<std::string, std::vector<std::vector<float>>> logprobs;  // per conversation, per turn
  std::mt19937_64 rng{7};

  agent::GenerateOutput generate(std::string const& id, std::vector<std::int32_t> const&, engine::SamplingParams const& sp) {
    auto const& turns = scripts.at(id);
    int& k = next[id];
    REQUIRE(k < int(turns.size()));
    agent::GenerateOutput g;
    g.token_ids = tok->encode(turns[std::size_t(k)].text);
    g.token_ids.push_back(tok->eos_id());
    if (int(g.token_ids.size()) > sp.max_new_tokens) g.token_ids.resize(std::size_t(sp.max_new_tokens));
    std::uniform_real_distribution<float> u(-5.0f, -0.01f);
    for (std::size_t i = 0; i < g.token_ids.size(); ++i) g.logprobs.push_back(u(rng));
    logprobs[id].push_back(g.logprobs);
    ++k;
    return g;
  }
};

// tool messages framed as "\n=<answer>\n"; user and assistant contents verbatim
constexpr char const* kTemplate =
    "{% for m in messages %}{% if m['role'] == 'tool' %}{{ '\\n=' + m['content'] + '\\n' }}{% else %}{{ m['content'] }}{% endif %}"
    "{% endfor %}";

TrainerConfig agent_config(std::int64_t rows, std::int64_t P, std::int64_t R) {
  TrainerConfig c;
  c.data.max_prompt_length = P;
  c.data.max_response_length = R;
  c.data.train_batch_size = rows;
  c.actor_rollout_ref.rollout.n = 1;
  c.actor_rollout_ref.rollout.multi_turn.enable = true;
  c.actor_rollout_ref.rollout.agent.default_agent_loop = "tool_agent";
  c.actor_rollout_ref.rollout.multi_turn.max_assistant_turns = 8;
  c.actor_rollout_ref.rollout.multi_turn.tokenization_sanity_check_mode = "disable";
  c.actor_rollout_ref.rollout.free_cache_engine = false;
  c.actor_rollout_ref.actor.ppo_mini_batch_size = rows;
  c.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = rows;
  c.actor_rollout_ref.actor.ppo_epochs = 1;
  c.actor_rollout_ref.actor.shuffle = false;
  c.actor_rollout_ref.actor.entropy_coeff = 0.01;
  c.actor_rollout_ref.actor.use_kl_loss = true;
  c.actor_rollout_ref.actor.kl_loss_coef = 0.1;
  c.actor_rollout_ref.actor.optim.lr = 1e-2;
  c.actor_rollout_ref.actor.grad_clip = 1e6;
  return c;
}

DataProto prompt_batch(std::vector<std::string> const& prompts, std::vector<std::int64_t> const& seeds, std::int64_t P,
                       model::Tokenizer const& tok) {
  std::int64_t const b = std::int64_t(prompts.size());
  Tensor ids = Tensor::full(Shape{b, P}, tok.pad_id());
  Tensor am = Tensor::zeros(DType::int32, Shape{b, P});
  NonTensorColumn raw, extra, rm;
  for (std::int64_t i = 0; i < b; ++i) {
    auto const t = tok.encode(prompts[std::size_t(i)]);
    if (std::int64_t(t.size()) <= P)
      for (std::size_t k = 0; k < t.size(); ++k) {
        ids.at<std::int32_t>(i, P - std::int64_t(t.size()) + std::int64_t(k)) = t[k];
        am.at<std::int32_t>(i, P - std::int64_t(t.size()) + std::int64_t(k)) = 1;
      }
    raw.emplace_back(prompts[std::size_t(i)]);
    extra.emplace_back(std::string());
    rm.emplace_back(Dict{{"ground_truth", std::string("0")}});
  }
  return DataProto::from_dict({{"input_ids", ids}, {"attention_mask", am}, {"rollout_seed", Tensor::from(seeds)}},
                              {{"raw_prompt", raw}, {"extra_info", extra}, {"reward_model", rm}});
}

}  // namespace

TEST_CASE("agent rollout batch: masks, log-probs, turns and tool counts on random conversations", "[agent][rollout]") {
  model::CharTokenizer const tok(printable());
  std::int64_t const P = 24, R = 400, b = 6;  // R holds three calls and the answer
  TrainerConfig cfg = agent_config(b, P, R);
  std::mt19937_64 rng(2024);
  for (int round = 0; round < 4; ++round) {
    ScriptedGenerator gen(&tok);
    std::vector<std::string> prompts;
    std::vector<std::int64_t> seeds;
    std::vector<std::vector<Turn>> scripts;
    for (std::int64_t i = 0; i < b; ++i) {
      std::int64_t const seed = std::int64_t(rng() >> 2);
      std::uniform_int_distribution<int> n_calls(0, 3), num(0, 999), len(0, 6), ch('a', 'z');
      std::vector<Turn> turns;
      int const k = n_calls(rng);
      for (int c = 0; c < k; ++c) {
        std::int64_t const x = num(rng), y = num(rng), z = num(rng);
        std::string const expr = std::to_string(x) + "*" + std::to_string(y) + "-" + std::to_string(z);
        turns.push_back({"<tool_call>{\"name\": \"calculator\", \"arguments\": {\"expression\": \"" + expr + "\"}}</tool_call>",
                         std::to_string(x * y - z)});
      }
      std::string last;
      for (int j = len(rng); j > 0; --j) last.push_back(char(ch(rng)));
      turns.push_back({"answer " + last, ""});
      std::string const prompt = "q" + std::to_string(i) + ": " + std::to_string(num(rng)) + "?";
      gen.scripts["agent-" + std::to_string(seed)] = turns;
      prompts.push_back(prompt);
      seeds.push_back(seed);
      scripts.push_back(turns);
    }
    roles::AgentRolloutSetup setup;
    setup.chat_template = std::make_shared<HfChatTemplate const>(kTemplate);
    agent::ToolSet tools;
    tools.add(agent::calculator_tool());
    DataProto const in = prompt_batch(prompts, seeds, P, tok);
    engine::SamplingParams sp;
    sp.eos_id = tok.eos_id();
    REQUIRE(roles::detail::uses_agent_loop(cfg, in));
    DataProto const out = roles::generate_with_agent(agent::generator_ref(gen), tok, cfg, in, sp, setup, tools);

    REQUIRE(out.tensor("responses").dim(1) == R);
    REQUIRE(out.tensor("input_ids").dim(1) == P + R);
    for (std::int64_t i = 0; i < b; ++i) {
      auto const u = std::size_t(i);
      std::string const id = "agent-" + std::to_string(seeds[u]);
      // the reference: each turn's sampled ids (mask 1) then the tool frame (mask 0)
      std::vector<std::int32_t> ids, mask;
      std::vector<float> lps;
      REQUIRE(gen.logprobs[id].size() == scripts[u].size());  // every scripted turn ran
      for (std::size_t t = 0; t < scripts[u].size(); ++t) {
        auto s = tok.encode(scripts[u][t].text);
        s.push_back(tok.eos_id());
        ids.insert(ids.end(), s.begin(), s.end());
        mask.insert(mask.end(), s.size(), 1);
        lps.insert(lps.end(), gen.logprobs[id][t].begin(), gen.logprobs[id][t].end());
        if (!scripts[u][t].answer.empty()) {
          auto const a = tok.encode("\n=" + scripts[u][t].answer + "\n");
          ids.insert(ids.end(), a.begin(), a.end());
          mask.insert(mask.end(), a.size(), 0);
          lps.insert(lps.end(), a.size(), 0.0f);
        }
      }
      REQUIRE(ids.size() <= std::size_t(R));
      int const calls = int(scripts[u].size()) - 1;
      INFO("row " << i << " calls " << calls);
      for (std::int64_t t = 0; t < R; ++t) {
        bool const in_resp = t < std::int64_t(ids.size());
        auto const tt = std::size_t(t);
        CHECK(out.tensor("responses").at<std::int32_t>(i, t) == (in_resp ? ids[tt] : tok.pad_id()));
        CHECK(out.tensor("response_mask").at<std::int32_t>(i, t) == (in_resp ? mask[tt] : 0));
        CHECK(out.tensor("attention_mask").at<std::int32_t>(i, P + t) == (in_resp ? 1 : 0));
        CHECK(out.tensor("input_ids").at<std::int32_t>(i, P + t) == (in_resp ? ids[tt] : tok.pad_id()));
        CHECK(out.tensor("rollout_log_probs").at<float>(i, t) == (in_resp ? lps[tt] : 0.0f));
      }
      auto const p = tok.encode(prompts[u]);
      for (std::int64_t t = 0; t < P; ++t) {
        std::int64_t const k = t - (P - std::int64_t(p.size()));
        CHECK(out.tensor("prompts").at<std::int32_t>(i, t) == (k >= 0 ? p[std::size_t(k)] : tok.pad_id()));
        CHECK(out.tensor("attention_mask").at<std::int32_t>(i, t) == (k >= 0 ? 1 : 0));
      }
      CHECK(out.tensor("num_turns").at<std::int32_t>(i) == 2 * calls + 2);
      CHECK(out.tensor("agent_tool_calls").at<float>(i) == float(calls));
      CHECK(out.tensor("agent_tool_errors").at<float>(i) == 0.0f);
    }
  }
}

TEST_CASE("agent rollout: bad configuration and prompts are named", "[agent][rollout]") {
  model::CharTokenizer const tok(printable());
  TrainerConfig cfg = agent_config(1, 4, 32);
  ScriptedGenerator gen(&tok);
  gen.scripts["agent-5"] = {{"x", ""}};
  roles::AgentRolloutSetup setup;
  agent::ToolSet tools;
  engine::SamplingParams sp;
  sp.eos_id = tok.eos_id();
  DataProto const in = prompt_batch({"ab"}, {5}, 4, tok);
  SECTION("a prompt longer than data.max_prompt_length") {
    DataProto const wide = prompt_batch({"abcdefg"}, {5}, 4, tok);  // the ids are left out, the text is 7 tokens
    CHECK_THROWS_WITH(roles::generate_with_agent(agent::generator_ref(gen), tok, cfg, wide, sp, setup, tools),
                      Catch::Contains("7 tokens") && Catch::Contains("data.max_prompt_length = 4"));
  }
  SECTION("an unknown default loop") {
    cfg.actor_rollout_ref.rollout.agent.default_agent_loop = "nope";
    CHECK_THROWS_WITH(roles::generate_with_agent(agent::generator_ref(gen), tok, cfg, in, sp, setup, tools),
                      Catch::Contains("'nope'") && Catch::Contains("tool_agent"));
  }
  SECTION("turn limits below 1 fail validation with the key named") {
    cfg.actor_rollout_ref.rollout.multi_turn.max_user_turns = 0;
    auto const v = rlflow::validate(cfg);
    bool named = false;
    for (auto const& s : v) named = named || s.find("max_user_turns=0") != std::string::npos;
    CHECK(named);
  }
}

TEST_CASE("agent rollout: the actor update ignores mask-0 tokens, which stay in context", "[agent][rollout]") {
  model::CharTokenizer const tok(printable());
  std::int64_t const P = 16, R = 96, b = 4;
  TrainerConfig cfg = agent_config(b, P, R);
  ScriptedGenerator gen(&tok);
  std::vector<std::string> prompts;
  std::vector<std::int64_t> seeds;
  for (std::int64_t i = 0; i < b; ++i) {
    std::string const id = "agent-" + std::to_string(100 + i);
    gen.scripts[id] = {{"<tool_call>{\"name\": \"calculator\", \"arguments\": {\"expression\": \"" + std::to_string(17 + i) +
                            "*29\"}}</tool_call>",
                        ""},
                       {"it is " + std::to_string((17 + i) * 29), ""}};
    prompts.push_back("q" + std::to_string(i) + "?");
    seeds.push_back(100 + i);
  }
  roles::AgentRolloutSetup setup;
  setup.chat_template = std::make_shared<HfChatTemplate const>(kTemplate);
  agent::ToolSet tools;
  tools.add(agent::calculator_tool());
  engine::SamplingParams sp;
  sp.eos_id = tok.eos_id();
  DataProto batch = roles::generate_with_agent(agent::generator_ref(gen), tok, cfg, prompt_batch(prompts, seeds, P, tok), sp, setup,
                                               tools);
  Tensor const mask = batch.tensor("response_mask");  // a handle: set_tensor below may move the columns
  std::int64_t masked = 0;
  for (auto v : batch.tensor("attention_mask").span<std::int32_t>()) masked += v;
  for (auto v : mask.span<std::int32_t>()) masked -= v;
  REQUIRE(masked > b * 4);  // tool answers and prompts present

  roles::RoleSetup rs;
  rs.cfg = cfg;
  rs.alphabet = printable();
  rs.policy_model.vocab_size = tok.vocab_size();
  rs.policy_model.max_seq_len = int(P + R);
  rs.policy_model.n_layer = 1;
  rs.policy_model.n_head = 2;
  rs.policy_model.n_embd = 16;
  rs.policy_model.seed = 3;
  rs.threads_per_worker = 1;
  WorkerContext ctx;

  std::mt19937_64 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto with = [&](DataProto d, char const* key, Tensor t) {
    d.set_tensor(key, std::move(t));
    return d;
  };
  // old log-probs, reference log-probs, advantages: random at every position
  auto random_t = [&](float shift) {
    Tensor t = Tensor::empty(DType::float32, Shape{b, R});
    for (auto& x : t.span<float>()) x = shift + 0.3f * nd(rng);
    return t;
  };
  {
    roles::ActorRolloutRef role0(ctx, rs, 1);
    DataProto lp = role0.compute_log_prob(batch);
    Tensor old = lp.tensor("old_log_probs");
    for (auto& x : old.span<float>()) x += 0.05f * nd(rng);  // off-policy, so the clip and ratio terms work
    batch.set_tensor("old_log_probs", old);
  }
  batch.set_tensor("ref_log_prob", random_t(-3.0f));
  batch.set_tensor("advantages", random_t(0.0f));

  auto update = [&](DataProto const& d) {
    roles::ActorRolloutRef role(ctx, rs, 1);
    role.update_actor(d);
    return role.actor_weights();
  };
  std::vector<float> const base = update(batch);

  // every mask-0 position: new old / ref log-probs, advantages and rollout log-probs
  auto perturb_where = [&](DataProto d, bool on_mask) {
    for (char const* key : {"old_log_probs", "ref_log_prob", "advantages", "rollout_log_probs"}) {
      Tensor t = d.tensor(key).clone();
      auto s = t.span<float>();
      auto m = mask.span<std::int32_t>();
      for (std::size_t k = 0; k < s.size(); ++k)
        if ((m[k] != 0) == on_mask) s[k] += 2.0f + nd(rng);
      d = with(std::move(d), key, std::move(t));
    }
    return d;
  };
  std::vector<float> const off_mask = update(perturb_where(batch, false));
  REQUIRE(off_mask.size() == base.size());
  CHECK(off_mask == base);

  // control: one mask-1 token's advantage moves the update
  DataProto one = batch;
  {
    Tensor a = batch.tensor("advantages").clone();
    auto m = mask.span<std::int32_t>();
    std::size_t k = 0;
    while (m[k] == 0) ++k;
    a.span<float>()[k] += 3.0f;
    one = with(std::move(one), "advantages", std::move(a));
  }
  CHECK(update(one) != base);

  // tool tokens are attended: changing one changes the log-probs of the model's later tokens
  {
    roles::ActorRolloutRef role(ctx, rs, 1);
    Tensor const lp0 = role.compute_log_prob(batch).tensor("old_log_probs");
    Tensor ids = batch.tensor("input_ids").clone();
    Tensor resp = batch.tensor("responses").clone();
    auto m = mask.span<std::int32_t>();
    std::int64_t t0 = 0;
    while (m[std::size_t(t0)] != 0) ++t0;  // row 0's first tool token
    std::int32_t const other = resp.at<std::int32_t>(0, t0) == tok.encode("7")[0] ? tok.encode("8")[0] : tok.encode("7")[0];
    resp.at<std::int32_t>(0, t0) = other;
    ids.at<std::int32_t>(0, P + t0) = other;
    DataProto changed = with(with(batch, "input_ids", ids), "responses", resp);
    Tensor const lp1 = role.compute_log_prob(changed).tensor("old_log_probs");
    bool later_moved = false;
    for (std::int64_t t = t0 + 1; t < R; ++t)
      if (m[std::size_t(t)] && lp0.at<float>(0, t) != lp1.at<float>(0, t)) later_moved = true;
    CHECK(later_moved);
    for (std::int64_t t = 0; t < t0; ++t) CHECK(lp0.at<float>(0, t) == lp1.at<float>(0, t));  // causal: earlier ones not
  }
}

TEST_CASE("agent rollout: generate_sequences with multi_turn.enable on the tiny model keeps the mask law", "[agent][rollout]") {
  model::CharTokenizer const tok(printable());
  std::int64_t const P = 12, R = 40, b = 3;
  TrainerConfig cfg = agent_config(b, P, R);
  roles::RoleSetup rs;
  rs.cfg = cfg;
  rs.alphabet = printable();
  rs.policy_model.vocab_size = tok.vocab_size();
  rs.policy_model.max_seq_len = int(P + R);
  rs.policy_model.n_layer = 1;
  rs.policy_model.n_head = 2;
  rs.policy_model.n_embd = 16;
  rs.threads_per_worker = 1;
  WorkerContext ctx;
  roles::ActorRolloutRef role(ctx, rs, 1);
  DataProto const in = prompt_batch({"a", "bb", "ccc"}, {1, 2, 3}, P, tok);
  DataProto const out = role.generate_sequences(in);
  DataProto const again = role.generate_sequences(in);
  auto const r0 = out.tensor("responses").span<std::int32_t>(), r1 = again.tensor("responses").span<std::int32_t>();
  CHECK(std::vector<std::int32_t>(r0.begin(), r0.end()) == std::vector<std::int32_t>(r1.begin(), r1.end()));  // seeded per row
  for (std::int64_t i = 0; i < b; ++i) {
    CHECK(out.tensor("num_turns").at<std::int32_t>(i) >= 2);
    bool ended = false;
    for (std::int64_t t = 0; t < R; ++t) {
      int const m = out.tensor("response_mask").at<std::int32_t>(i, t), a = out.tensor("attention_mask").at<std::int32_t>(i, P + t);
      CHECK(m <= a);  // trained tokens are in context
      if (!m) CHECK(out.tensor("rollout_log_probs").at<float>(i, t) == 0.0f);
      if (!a) ended = true;
      else CHECK(!ended);  // no hole in the response
    }
  }
}

}  // namespace test_agent_rollout
