// rlflow/engine/vocab_parallel_sampling.hpp: sampling and log-probs when the LM head is split by
// vocabulary rows over a TP group (model::LMHead::vocab_parallel). Defines VocabParallelDraw and
// VocabParallelSampler, shared by RolloutEngine and PagedEngine: each rank holds the logits of
// its ids [v0, v1) only, and a few collectives batched over the rows give every rank the same
// token and log-prob that sample_token and layers::logprob_forward_row give on the full row.
// Megatron-LM / vLLM counterpart: VocabParallelEmbedding's logits with the sampler's gather
// (vllm/model_executor/layers/logits_processor.py), here without gathering full rows.
#pragma once
#include <algorithm>  // std::max, std::min, std::partial_sort, std::sort
#include <cmath>      // std::exp, std::log, INFINITY
#include <cstdint>
#include <span>
#include <vector>

#include <rlflow/comm/communicator.hpp>  // comm::Communicator (allgather, allreduce_sum)
#include <rlflow/engine/sampling.hpp>    // SamplingParams, detail::draw_candidates, detail::sampling_uniform

namespace rlflow::engine::detail {

//! One token to draw from a rank's logit slice: 'row' (v1 - v0 floats), the filters of 'sp'
//! (temperature, top_k, top_p), min-p (PagedEngine's RequestParams::min_p; 0: off) and the draw's
//! (seed, counter). sample() writes tok and logprob (under softmax(logits / T), T = 1 when greedy).
//! Every rank of the group passes the same draws in the same order (its own slices).
struct VocabParallelDraw {
  float const* row = nullptr;
  SamplingParams const* sp = nullptr;
  float min_p = 0.0f;
  std::uint64_t seed = 0, counter = 0;
  std::int32_t tok = 0;
  float logprob = 0.0f;
};

//! Sets a rank's logits of ids >= limit to -inf (n rows of its slice [v0, v1)): they get no
//! probability in the sampling and the log-probs (SamplingParams::vocab_limit).
inline void mask_vocab_beyond(float* rows, int n, int v0, int v1, int limit) {
  int const Vl = v1 - v0;
  for (int i = 0; i < n; ++i)
    for (int v = std::max(limit - v0, 0); v < Vl; ++v) rows[std::size_t(i) * Vl + v] = -INFINITY;
}

//! The vocabulary-parallel draw with its reused scratch. Collectives (batched over the draws):
//!  1. all-gather of each rank's (max logit, its first id): the global max and the greedy token;
//!  2. all-reduce of each rank's partial sums exp(z - m) (and z exp(z - m)) in its own slot, so
//!     every rank sees every rank's partial: the log-sum-exp, and the inverse-CDF search over
//!     ranks in vocabulary order;
//!  3. unfiltered draws: all-reduce of (token, its logit) from the rank whose range holds the
//!     draw; top-k / top-p draws: all-gather of each rank's k best (logit, id), then every rank
//!     draws from the merged candidates exactly as sample_token does (top-p without top-k: every
//!     logit of the slice). Step 3's collectives run only when some draw needs them; the draws'
//!     filters are the same on every rank, so the ranks make the same calls.
class VocabParallelSampler {
 public:
  //! Draws every entry of 'draws' from the slices [v0, v1) of a vocabulary of V ids held by rank
  //! 'me' of the N ranks of 'comm' (rank r holds [V r / N, V (r + 1) / N)).
  void sample(comm::Communicator& comm, int me, int N, int v0, int v1, int V, std::span<VocabParallelDraw> draws) {
    int const n = int(draws.size()), Vl = v1 - v0;
    std::size_t const un = std::size_t(n), uN = std::size_t(N);
    auto greedy = [&](int i) { return draws[std::size_t(i)].sp->temperature == 0.0f; };
    auto inv_t_lp = [&](int i) { return greedy(i) ? 1.0f : 1.0f / draws[std::size_t(i)].sp->temperature; };  // the log-prob temperature
    auto inv_t = [&](int i) { return greedy(i) ? 1.0 : 1.0 / double(draws[std::size_t(i)].sp->temperature); };  // sample_token's
    auto top_k_on = [&](int i) { int const k = draws[std::size_t(i)].sp->top_k; return k > 0 && k < V; };
    auto filtered = [&](int i) { return !greedy(i) && (top_k_on(i) || draws[std::size_t(i)].sp->top_p < 1.0f); };
    // 1. local (max, first argmax) -> global
    f_.assign(2 * un, 0.0f);
    for (int i = 0; i < n; ++i) {
      float const* row = draws[std::size_t(i)].row;
      int best = 0;
      for (int v = 1; v < Vl; ++v)
        if (row[v] > row[best]) best = v;
      f_[2 * i] = row[best];
      f_[2 * i + 1] = float(v0 + best);  // exact: ids < 2^24
    }
    g_.resize(2 * un * uN);
    comm.allgather(std::span<float const>(f_), std::span<float>(g_));
    max_.resize(un);
    arg_.resize(un);
    for (int i = 0; i < n; ++i) {
      float bv = g_[2 * std::size_t(i)];
      std::int32_t bi = std::int32_t(g_[2 * std::size_t(i) + 1]);
      for (int r = 1; r < N; ++r) {  // ranks hold ascending ids: strict > keeps the first maximal id
        float const v = g_[(std::size_t(r) * un + std::size_t(i)) * 2];
        if (v > bv) {
          bv = v;
          bi = std::int32_t(g_[(std::size_t(r) * un + std::size_t(i)) * 2 + 1]);
        }
      }
      max_[std::size_t(i)] = bv;
      arg_[std::size_t(i)] = bi;
    }
    // min-p's cut (PagedEngine's draw): logits below max + T log(min_p) get no sampling mass
    cut_.assign(un, -INFINITY);
    for (int i = 0; i < n; ++i) {
      auto const& d = draws[std::size_t(i)];
      if (d.min_p > 0.0f && !greedy(i)) cut_[std::size_t(i)] = double(max_[std::size_t(i)]) + double(d.sp->temperature) * std::log(double(d.min_p));
    }
    auto kept = [&](int i, float z) { return !(double(z) < cut_[std::size_t(i)]); };
    // 2. partial sums in this rank's slot: {sample weights, log-prob weights, log-prob z-weights}
    d_.assign(un * uN * 3, 0.0);
    for (int i = 0; i < n; ++i) {
      float const* row = draws[std::size_t(i)].row;
      double const it = inv_t(i), itl = inv_t_lp(i);
      double const ms = double(max_[std::size_t(i)]) * it, ml = double(max_[std::size_t(i)]) * itl;
      double ss = 0, sl = 0, sz = 0;
      for (int v = 0; v < Vl; ++v) {
        if (kept(i, row[v])) ss += std::exp(double(row[v]) * it - ms);
        double const z = double(row[v]) * itl, e = std::exp(z - ml);
        sl += e;
        sz += e * z;
      }
      double* slot = d_.data() + (std::size_t(i) * uN + std::size_t(me)) * 3;
      slot[0] = ss;
      slot[1] = sl;
      slot[2] = sz;
    }
    comm.allreduce_sum(std::span<double>(d_));
    // 3. the token and its logit: greedy at once, unfiltered from the owning rank, filtered from
    // the merged candidates
    tok_.assign(2 * un, 0.0);
    bool any_plain = false, any_filtered = false;
    for (int i = 0; i < n; ++i) {
      if (greedy(i)) {
        tok_[2 * std::size_t(i)] = arg_[std::size_t(i)];
        tok_[2 * std::size_t(i) + 1] = max_[std::size_t(i)];
      }
      any_plain = any_plain || (!greedy(i) && !filtered(i));
      any_filtered = any_filtered || filtered(i);
    }
    if (any_plain) {
      own_.assign(2 * un, 0.0);  // {token, logit} from the owning rank, 0 elsewhere
      for (int i = 0; i < n; ++i)
        if (!greedy(i) && !filtered(i)) draw_plain(i, me, N, v0, Vl, draws);
      comm.allreduce_sum(std::span<double>(own_));
      for (int i = 0; i < n; ++i)
        if (!greedy(i) && !filtered(i)) {
          tok_[2 * std::size_t(i)] = own_[2 * std::size_t(i)];
          tok_[2 * std::size_t(i) + 1] = own_[2 * std::size_t(i) + 1];
        }
    }
    if (any_filtered) draw_filtered(comm, N, v0, Vl, V, draws);
    // log-prob of the token: z_tok - (m + log sum exp(z - m)), as layers::logprob_forward_row
    for (int i = 0; i < n; ++i) {
      double const* parts = d_.data() + std::size_t(i) * uN * 3;
      double sl = 0;
      for (int r = 0; r < N; ++r) sl += parts[std::size_t(r) * 3 + 1];
      double const lse = double(max_[std::size_t(i)]) * inv_t_lp(i) + std::log(sl);
      float const logit = float(tok_[2 * std::size_t(i) + 1]);
      draws[std::size_t(i)].tok = std::int32_t(tok_[2 * std::size_t(i)]);
      draws[std::size_t(i)].logprob = float(double(logit) * inv_t_lp(i) - lse);
    }
  }

 private:
  // an unfiltered draw by inverse CDF over the ranks in vocabulary order; the owner of the draw
  // writes {token, logit} into own_
  void draw_plain(int i, int me, int N, int v0, int Vl, std::span<VocabParallelDraw const> draws) {
    auto const& d = draws[std::size_t(i)];
    std::size_t const uN = std::size_t(N);
    double const* parts = d_.data() + std::size_t(i) * uN * 3;
    double total = 0;
    for (int r = 0; r < N; ++r) total += parts[std::size_t(r) * 3];
    double const u = sampling_uniform(d.seed, d.counter);
    double const target = u * total;
    int owner = -1;
    double start = 0;
    for (int r = 0; r < N; ++r) {
      if (target < start + parts[std::size_t(r) * 3]) {
        owner = r;
        break;
      }
      start += parts[std::size_t(r) * 3];
    }
    bool const past_end = owner < 0;  // rounding left target == total: the last rank with mass,
    if (past_end)                      // its last nonzero token (as sample_token does)
      for (int r = N - 1; r >= 0 && owner < 0; --r)
        if (parts[std::size_t(r) * 3] > 0) owner = r;
    if (owner != me) return;
    double const inv_t = 1.0 / double(d.sp->temperature);
    double const ms = double(max_[std::size_t(i)]) * inv_t;
    double cum = start;
    int pick = -1, last_nz = 0;
    for (int v = 0; v < Vl; ++v) {
      double const w = double(d.row[v]) < cut_[std::size_t(i)] ? 0.0 : std::exp(double(d.row[v]) * inv_t - ms);
      if (w > 0) last_nz = v;
      cum += w;
      if (!past_end && target < cum) {
        pick = v;
        break;
      }
    }
    if (pick < 0) pick = last_nz;
    own_[2 * std::size_t(i)] = v0 + pick;
    own_[2 * std::size_t(i) + 1] = d.row[pick];
  }

  // the top-k / top-p draws: each rank's k best (logit desc, id asc), or all of its logits (top-p
  // only), gathered in one all-gather; every rank then draws alike from the merged candidates
  void draw_filtered(comm::Communicator& comm, int N, int v0, int Vl, int V, std::span<VocabParallelDraw> draws) {
    int const n = int(draws.size()), Vmax = (V + N - 1) / N;  // the widest rank's slice
    std::size_t const uN = std::size_t(N);
    auto is_filtered = [&](VocabParallelDraw const& d) {
      return d.sp->temperature != 0.0f && ((d.sp->top_k > 0 && d.sp->top_k < V) || d.sp->top_p < 1.0f);
    };
    // the candidates' offsets: row i sends K_i pairs (0 when it is not filtered)
    kk_.assign(std::size_t(n), 0);
    off_.assign(std::size_t(n) + 1, 0);
    for (int i = 0; i < n; ++i) {
      auto const& d = draws[std::size_t(i)];
      if (is_filtered(d)) kk_[std::size_t(i)] = (d.sp->top_k > 0 && d.sp->top_k < V) ? std::min(d.sp->top_k, Vmax) : Vmax;
      off_[std::size_t(i) + 1] = off_[std::size_t(i)] + std::size_t(kk_[std::size_t(i)]);
    }
    std::size_t const per_rank = off_[std::size_t(n)] * 2;
    f_.assign(per_rank, 0.0f);
    idx_.resize(std::size_t(std::max(Vl, 1)));
    for (int i = 0; i < n; ++i) {
      int const K = kk_[std::size_t(i)];
      if (K == 0) continue;
      float const* row = draws[std::size_t(i)].row;
      double const cut = cut_[std::size_t(i)];
      auto z = [&](std::int32_t v) { return double(row[v]) < cut ? -INFINITY : row[v]; };  // min-p's cut
      for (int v = 0; v < Vl; ++v) idx_[std::size_t(v)] = v;
      auto by_logit = [&](std::int32_t a, std::int32_t b) { return z(a) > z(b) || (z(a) == z(b) && a < b); };
      int const k = std::min(K, Vl);
      std::partial_sort(idx_.begin(), idx_.begin() + k, idx_.begin() + Vl, by_logit);
      for (int c = 0; c < K; ++c) {
        float* o = f_.data() + (off_[std::size_t(i)] + std::size_t(c)) * 2;
        o[0] = c < k ? z(idx_[std::size_t(c)]) : -INFINITY;
        o[1] = c < k ? float(v0 + idx_[std::size_t(c)]) : -1.0f;
      }
    }
    g_.resize(per_rank * uN);
    comm.allgather(std::span<float const>(f_), std::span<float>(g_));
    for (int i = 0; i < n; ++i) {
      int const K = kk_[std::size_t(i)];
      if (K == 0) continue;
      auto& d = draws[std::size_t(i)];
      cand_logit_.resize(uN * std::size_t(K));
      cand_id_.resize(uN * std::size_t(K));
      cand_w_.resize(uN * std::size_t(K));
      int nc = 0;
      for (int r = 0; r < N; ++r)
        for (int c = 0; c < K; ++c) {
          float const* o = g_.data() + std::size_t(r) * per_rank + (off_[std::size_t(i)] + std::size_t(c)) * 2;
          if (o[1] < 0) continue;  // padding
          cand_logit_[std::size_t(nc)] = o[0];
          cand_id_[std::size_t(nc)] = std::int32_t(o[1]);
          ++nc;
        }
      // order the merged candidates as sample_token does: (logit desc, id asc); keep the top 'kept'
      ord_.resize(std::size_t(nc));
      for (int c = 0; c < nc; ++c) ord_[std::size_t(c)] = c;
      std::sort(ord_.begin(), ord_.end(), [&](int a, int b) {
        float const la = cand_logit_[std::size_t(a)], lb = cand_logit_[std::size_t(b)];
        return la > lb || (la == lb && cand_id_[std::size_t(a)] < cand_id_[std::size_t(b)]);
      });
      int const kept = (d.sp->top_k > 0 && d.sp->top_k < V) ? d.sp->top_k : V;
      int const nk = std::min(kept, nc);
      double const inv_t = 1.0 / double(d.sp->temperature);
      double const ms = double(max_[std::size_t(i)]) * inv_t;
      ids_.resize(std::size_t(nk));
      for (int c = 0; c < nk; ++c) {
        ids_[std::size_t(c)] = cand_id_[std::size_t(ord_[std::size_t(c)])];
        cand_w_[std::size_t(c)] = std::exp(double(cand_logit_[std::size_t(ord_[std::size_t(c)])]) * inv_t - ms);
      }
      double const u = sampling_uniform(d.seed, d.counter);
      std::int32_t const tok = draw_candidates(ids_.data(), cand_w_.data(), nk, d.sp->top_p, u);
      // the token's logit (a token below min-p's cut has weight 0 and is never drawn, so its
      // candidate logit is the raw one)
      float logit = 0;
      for (int c = 0; c < nk; ++c)
        if (ids_[std::size_t(c)] == tok) logit = cand_logit_[std::size_t(ord_[std::size_t(c)])];
      tok_[2 * std::size_t(i)] = tok;
      tok_[2 * std::size_t(i) + 1] = logit;
    }
  }

  std::vector<float> f_, g_, max_, cand_logit_;
  std::vector<double> d_, tok_, own_, cand_w_, cut_;
  std::vector<std::int32_t> arg_, ids_, cand_id_, idx_;
  std::vector<int> ord_, kk_;
  std::vector<std::size_t> off_;
};

}  // namespace rlflow::engine::detail
