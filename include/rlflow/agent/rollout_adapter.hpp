// rlflow/agent/rollout_adapter.hpp: a rollout engine with RolloutEngine's batch generate (the
// static KV-cache engine, the paged engine, the roles' CPU rollout) as an agent loop's
// token-in / token-out generator, one row per call. Calls are serialised (the engine is not
// reentrant). Each conversation's tokens depend only on (seed, request_id, the token's index in
// the conversation), so a conversation replays identically whatever runs beside it.
// verl: AsyncLLMServerManager.generate over one vLLM / SGLang server.
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <rlflow/agent/agent_loop.hpp>
#include <rlflow/engine/rollout_engine.hpp>

namespace rlflow::agent {

//! The sampling seed of a conversation's tokens: 'seed' mixed with the FNV-1a hash of its request
//! id; its i-th sampled token draws with philox(this, i) however the turns are batched.
inline std::uint64_t conversation_seed(std::uint64_t seed, std::string_view request_id) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : request_id) h = (h ^ c) * 1099511628211ull;
  return seed ^ h;
}

template <class Engine = engine::RolloutEngine>
class RolloutEngineGenerator {
 public:
  //! 'engine' must outlive the generator.
  explicit RolloutEngineGenerator(Engine& engine, std::uint64_t seed = 0) : e_(engine), seed_(seed) {}

  //! Generates at most sp.max_new_tokens ids after 'prompt' (fewer when the model's max_seq_len
  //! leaves less room: none when it leaves none), stopping after sp.eos_id.
  GenerateOutput generate(std::string const& request_id, std::vector<std::int32_t> const& prompt, engine::SamplingParams const& sp) {
    std::lock_guard<std::mutex> lock(m_);
    GenerateOutput out;
    int const room = e_.config().max_seq_len - int(prompt.size());
    if (prompt.empty())
      throw value_error(msg("rlflow::agent::RolloutEngineGenerator: request '", request_id, "' has an empty prompt; render the chat first"));
    if (room <= 0) return out;
    engine::SamplingParams s = sp;
    s.max_new_tokens = std::min(sp.max_new_tokens, room);
    if (s.max_new_tokens < 1) return out;
    auto const P = std::int64_t(prompt.size());
    Tensor const ids = Tensor::from(prompt, Shape{1, P});
    Tensor const mask = Tensor::from(std::vector<std::int32_t>(prompt.size(), 1), Shape{1, P});
    std::uint64_t& produced = produced_[request_id];
    std::uint64_t const seed = conversation_seed(seed_, request_id);
    engine::GenerateControl ctl;
    ctl.first_token = produced;
    engine::RolloutResult const r = e_.generate(ids, mask, s, std::span<std::uint64_t const>(&seed, 1), ctl);
    auto const* t = r.responses.data<std::int32_t>();
    auto const* mk = r.response_mask.data<std::int32_t>();
    auto const* lp = r.log_probs.data<float>();
    for (int j = 0; j < s.max_new_tokens && mk[j]; ++j) {
      out.token_ids.push_back(t[j]);
      out.logprobs.push_back(lp[j]);
    }
    produced += out.token_ids.size();
    return out;
  }

  //! Forgets a finished conversation's token count.
  void release(std::string const& request_id) {
    std::lock_guard<std::mutex> lock(m_);
    produced_.erase(request_id);
  }

 private:
  Engine& e_;
  std::uint64_t seed_;
  std::mutex m_;
  std::unordered_map<std::string, std::uint64_t> produced_;
};

}  // namespace rlflow::agent
