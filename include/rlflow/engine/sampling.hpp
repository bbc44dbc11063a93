// rlflow/engine/sampling.hpp: next-token sampling for the rollout engine. Defines SamplingParams
// and sample_token: greedy (temperature 0), temperature, top-k and top-p (nucleus) sampling whose
// randomness is philox(seed, counter), so a sequence's tokens depend only on its own seed and step,
// never on the batch it sits in; min_p_filter, vLLM's min-p cut before it. Does not compute
// log-probs (layers::logprob_forward_row does).
// verl: the rollout's SamplingParams (vLLM's temperature / top_k / top_p / max_tokens).
#pragma once
#include <algorithm>  // std::sort, std::partial_sort
#include <cmath>      // std::exp, std::isfinite
#include <cstdint>

#include <rlflow/core/error.hpp>         // config_error
#include <rlflow/model/random.hpp>  // philox4x32, uniform01

namespace rlflow::engine {

//! How the rollout samples. top_k = 0 and top_p = 1 disable those filters; temperature = 0 is greedy.
struct SamplingParams {
  float temperature = 1.0f;
  int top_k = 0;               //!< keep the k most likely tokens (0: all)
  float top_p = 1.0f;          //!< keep the smallest most-likely set with probability >= top_p
  int max_new_tokens = 16;     //!< R, the response width
  std::int32_t eos_id = -1;    //!< stop a sequence after this token (-1: never)
  std::int32_t pad_id = 0;     //!< fills a response after its EOS
  //! Sample (and score) only ids [0, vocab_limit): the tokenizer's vocabulary when the model's
  //! embedding has padding rows beyond it (Qwen: 151,936 rows for 151,665 tokens), which no
  //! tokenizer can decode. 0: the whole vocabulary. The CPU rollout engine applies it.
  int vocab_limit = 0;

  void validate(int vocab_size) const {
    auto bad = [](char const* what, double v, char const* fix) {
      throw config_error(msg("rlflow::engine::SamplingParams: ", what, " = ", v, " is invalid; ", fix));
    };
    if (!(temperature >= 0.0f) || !std::isfinite(temperature)) bad("temperature", temperature, "use a finite temperature >= 0 (0 = greedy)");
    if (top_k < 0) bad("top_k", top_k, "use top_k >= 0 (0 = no top-k filter)");
    if (!(top_p > 0.0f && top_p <= 1.0f)) bad("top_p", top_p, "use 0 < top_p <= 1 (1 = no nucleus filter)");
    if (max_new_tokens < 1) bad("max_new_tokens", max_new_tokens, "generate at least one token");
    if (eos_id < -1 || eos_id >= vocab_size) bad("eos_id", eos_id, "use a token id of the vocabulary or -1");
    if (pad_id < 0 || pad_id >= vocab_size) bad("pad_id", pad_id, "use a token id of the vocabulary");
    if (vocab_limit < 0 || vocab_limit > vocab_size) bad("vocab_limit", vocab_limit, "use 0 (all) or at most the model's vocabulary size");
    if (vocab_limit > 0 && eos_id >= vocab_limit) bad("eos_id", eos_id, "use an EOS below vocab_limit (the tokenizer's vocabulary)");
  }
};

namespace detail {
//! The tail of sample_token: w[0..kept) are the candidates' weights exp(z - max z) in their draw
//! order (idx: their token ids); with top_p < 1 keeps the smallest prefix whose mass reaches
//! top_p of the total, then draws by inverse CDF with the uniform u. Shared by the replicated
//! and the vocabulary-parallel LM head (rollout_engine.hpp), so both draw alike.
inline std::int32_t draw_candidates(std::int32_t const* idx, double const* w, int kept, float top_p, double u) {
  if (top_p < 1.0f) {  // smallest prefix whose mass reaches top_p of the (top-k) distribution
    double total = 0.0;
    for (int i = 0; i < kept; ++i) total += w[i];
    double const need = double(top_p) * total;
    double cum = 0.0;
    int i = 0;
    while (i < kept) {
      cum += w[i++];
      if (cum >= need) break;
    }
    kept = i;
  }
  double total = 0.0;
  for (int i = 0; i < kept; ++i) total += w[i];
  double const target = u * total;
  double cum = 0.0;
  for (int i = 0; i < kept; ++i) {
    cum += w[i];
    if (target < cum) return idx[i];
  }
  for (int i = kept - 1; i >= 0; --i)  // rounding left target == total: take the last nonzero one
    if (w[i] > 0.0) return idx[i];
  return idx[0];
}
//! The uniform draw of (seed, counter).
inline double sampling_uniform(std::uint64_t seed, std::uint64_t counter) {
  return model::uniform01(model::philox4x32(seed, counter, 0x73616d70u /* "samp" */));
}
}  // namespace detail

//! Samples one token from logits (V). idx (V ints) and w (V doubles) are scratch. The uniform
//! draw is uniform01(philox4x32(seed, counter)); the rollout passes the step index as counter.
//! Candidates are ordered by (logit descending, id ascending) when a filter is on, by id otherwise.
inline std::int32_t sample_token(float const* logits, int V, SamplingParams const& sp, std::uint64_t seed,
                                 std::uint64_t counter, std::int32_t* idx, double* w) {
  if (sp.temperature == 0.0f) {  // greedy: the first maximal logit
    int best = 0;
    for (int v = 1; v < V; ++v)
      if (logits[v] > logits[best]) best = v;
    return best;
  }
  double const inv_t = 1.0 / double(sp.temperature);
  double m = -INFINITY;
  for (int v = 0; v < V; ++v) m = std::max(m, double(logits[v]) * inv_t);
  double const u = detail::sampling_uniform(seed, counter);
  bool const filtered = (sp.top_k > 0 && sp.top_k < V) || sp.top_p < 1.0f;
  int kept = V;
  for (int v = 0; v < V; ++v) idx[v] = v;
  if (filtered) {
    auto by_logit = [logits](std::int32_t a, std::int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
    if (sp.top_k > 0 && sp.top_k < V) {
      kept = sp.top_k;
      std::partial_sort(idx, idx + kept, idx + V, by_logit);
    } else {
      std::sort(idx, idx + V, by_logit);
    }
  }
  for (int i = 0; i < kept; ++i) w[i] = std::exp(double(logits[idx[i]]) * inv_t - m);
  return detail::draw_candidates(idx, w, kept, filtered ? sp.top_p : 1.0f, u);
}

//! vLLM's min-p filter: copies logits (V) to 'out' with every id whose logit is below
//! max + temperature * log(min_p) (probability under softmax(logits / temperature) below min_p
//! times the most likely id's) set to -inf, and returns out; sample_token then draws from it.
//! Needs temperature > 0 and 0 < min_p <= 1. The CUDA sampler applies the same cut.
inline float const* min_p_filter(float const* logits, int V, float temperature, float min_p, float* out) {
  float m = -INFINITY;
  for (int v = 0; v < V; ++v) m = std::max(m, logits[v]);
  double const cut = double(m) + double(temperature) * std::log(double(min_p));
  for (int v = 0; v < V; ++v) out[v] = double(logits[v]) < cut ? -INFINITY : logits[v];
  return out;
}

}  // namespace rlflow::engine
