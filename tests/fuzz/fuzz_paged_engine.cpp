// Fuzz target: the paged rollout engine's request API (engine/paged_engine.hpp) driven by a script
// of operations read from the input: byte 0 sets the engine (block size, pool blocks, token budget,
// max_num_seqs, chunked prefill, prefix caching), then each operation adds a request (prompt ids,
// n, max_tokens, temperature, top-k, min-p, stop ids, any of them possibly invalid), runs a step,
// aborts a request or runs to completion. A refused request is a clean error inside the script.
// Silent accept: a block held or counted wrongly (more blocks used than the pool has, blocks held
// by an idle engine or after abort_all, a step over max_num_batched_tokens), or an output that
// breaks its request (not n samples, more than max_tokens tokens, an id outside the vocabulary, a
// stop reason without its stop token, a log-prob above 0 or not finite).
#include "fuzz/fuzz_driver.hpp"

#include <cmath>
#include <map>

#include <rlflow/engine/paged_engine.hpp>

namespace fuzz_paged_engine {

using namespace rlflow;

namespace {
struct Reader {
  std::string_view in;
  std::size_t at = 0;
  bool done() const { return at >= in.size(); }
  int byte() { return at < in.size() ? static_cast<unsigned char>(in[at++]) : 0; }
};

model::GPTConfig tiny() {
  model::GPTConfig c;
  c.arch = model::Arch::qwen3;
  c.vocab_size = 19;
  c.max_seq_len = 48;
  c.n_layer = 1;
  c.n_head = 2;
  c.n_kv_head = 1;
  c.n_embd = 8;
  c.head_size = 4;
  c.intermediate_size = 12;
  c.qk_norm = true;
  c.validate();
  return c;
}
}  // namespace

std::vector<std::string> fuzz_seeds() {
  // byte 0: the engine; then operations: 0 add (len, ids + 1..., n, max_tokens, temperature, top_k,
  // min_p, stop + 1, id choice), 1 step, 2 abort (id), 3 run to completion
  auto add = [](std::string& s, std::vector<int> const& ids, int n, int max_tokens, int temp, int top_k, int min_p, int stop) {
    s += char(0);
    s += char(ids.size());
    for (int t : ids) s += char(t + 1);
    for (int b : {n, max_tokens, temp, top_k, min_p, stop + 1, 1}) s += char(b);
  };
  std::vector<std::string> seeds;
  for (int e : {142, 126, 87, 236}) {  // block sizes 4, 4, 8, 1 (a 25-position pool); chunked prefill and prefix caching on and off
    std::string s(1, char(e));
    add(s, {3, 4, 5, 6, 7, 8, 9}, 3, 9, 2, 0, 0, 2);
    add(s, {3, 4, 5, 6, 7, 8, 9, 10, 11}, 2, 12, 0, 0, 0, -1);
    s += char(1);
    add(s, {12, 13, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}, 1, 20, 1, 3, 1, 5);
    s += "\x01\x01";
    s += char(2);
    s += char(1);
    add(s, {3, 4, 5, 6, 7, 8, 9}, 2, 6, 2, 0, 2, -1);
    s += char(3);
    seeds.push_back(s);
  }
  return seeds;
}

fuzz::outcome fuzz_one(std::string_view in) {
  Reader r{in};
  model::GPTConfig const cfg = tiny();
  int const e = r.byte();
  engine::PagedEngineConfig pc;
  pc.block_size = 1 << (e % 4);  // 1, 2, 4, 8
  int const blocks = 1 + (e / 4) % 8 * 8;
  pc.kv_cache_bytes = std::size_t(blocks) * engine::BlockPool::Shape{cfg.n_layer, cfg.kv_heads(), cfg.head_dim(), pc.block_size}.bytes_per_block();
  pc.max_num_batched_tokens = 1 + (e * 7) % 64;
  pc.max_num_seqs = 1 + (e / 32) % 8;
  pc.enable_chunked_prefill = (e & 0x10) == 0;
  pc.enable_prefix_caching = (e & 0x20) == 0;
  engine::PagedEngine pe(cfg, pc);
  std::map<std::string, engine::RequestParams> live;
  int const V = cfg.vocab_size;
  int next_id = 0;
  bool bad = false;
  auto check_out = [&](engine::RequestOutput const& o) {
    auto it = live.find(o.request_id);
    if (it == live.end()) return void(bad = true);
    engine::RequestParams const& p = it->second;
    if (int(o.samples.size()) != p.n) bad = true;
    for (auto const& s : o.samples) {
      if (int(s.tokens.size()) > p.max_tokens || s.tokens.size() != s.logprobs.size()) bad = true;
      if (!o.aborted && s.tokens.empty()) bad = true;
      for (auto t : s.tokens) bad |= t < 0 || t >= V;
      for (float lp : s.logprobs) bad |= !(lp <= 1e-6f) || !std::isfinite(lp);
      if (s.finish == engine::FinishReason::stop &&
          (s.tokens.empty() || std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), s.tokens.back()) == p.stop_token_ids.end()))
        bad = true;
      if (!o.aborted && s.finish == engine::FinishReason::length && int(s.tokens.size()) != p.max_tokens) bad = true;
    }
    live.erase(it);
  };
  auto invariants = [&] {
    auto const m = pe.metrics();
    if (pe.pool().num_used() > pe.pool().num_blocks()) bad = true;
    if (!pe.has_unfinished() && pe.pool().num_used() != 0) bad = true;
    if (m.max_step_tokens > std::uint64_t(pc.max_num_batched_tokens)) bad = true;
    if (std::size_t(m.running + m.waiting) > 0 && !pe.has_unfinished()) bad = true;
  };
  int ops = 0;
  while (!r.done() && ++ops < 64 && !bad) {
    int const op = r.byte() % 4;
    if (op == 0) {
      int const len = r.byte() % 40;
      std::vector<std::int32_t> ids;
      for (int t = 0; t < len; ++t) ids.push_back(r.byte() % (V + 2) - 1);  // -1 and V are outside
      engine::RequestParams p;
      p.n = r.byte() % 5;
      p.max_tokens = r.byte() % 30;
      int const tb = r.byte();
      p.temperature = tb % 5 == 4 ? -1.0f : float(tb % 5) * 0.5f;
      p.top_k = r.byte() % 6;
      p.min_p = float(r.byte() % 6) * 0.25f;  // up to 1.25 (invalid)
      int const stop = r.byte() % (V + 2) - 1;
      if (stop >= 0) p.stop_token_ids = {stop};
      p.seed = std::uint64_t(ops);
      std::string const id = (r.byte() % 8 == 0 && next_id > 0) ? std::to_string(next_id - 1) : std::to_string(next_id++);
      try {
        pe.add_request(id, ids, p);
        live[id] = p;
      } catch (error const&) {
        // refused before anything is queued: the request table is unchanged
      }
    } else if (op == 1) {
      try {
        for (auto const& o : pe.step()) check_out(o);
      } catch (error const&) {  // a step never fails on valid requests
        bad = true;
      }
    } else if (op == 2) {
      std::string const id = std::to_string(r.byte() % (next_id + 1));
      if (auto o = pe.abort(id)) check_out(*o);
      else if (live.count(id)) bad = true;
    } else {
      try {
        for (int s = 0; s < 4096 && pe.has_unfinished(); ++s)
          for (auto const& o : pe.step()) check_out(o);
      } catch (error const&) {
        bad = true;
      }
      if (pe.has_unfinished() || !live.empty()) bad = true;
    }
    invariants();
  }
  if (pe.num_unfinished() != live.size()) bad = true;
  pe.abort_all();
  if (pe.pool().num_used() != 0) bad = true;
  return bad ? fuzz::outcome::silent_accept : fuzz::outcome::accepted;
}

}  // namespace fuzz_paged_engine
RLFLOW_FUZZ_TARGET(paged_engine)
