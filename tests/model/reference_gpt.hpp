// tests/model/reference_gpt.hpp: an independent plain-loop GPT-2 forward in any scalar type
// (double for the references), reading the same flat layout as rlflow::model::GPT. No BLAS, no
// OpenMP, no shared code with include/rlflow/model/layers.hpp: the spec the engines are tested against.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include <rlflow/model/gpt.hpp>  // GPTConfig, ParamLayout

namespace test {

template <class S>
struct RefOut {
  std::vector<S> logits;  // (B, T, V)
  std::vector<S> values;  // (B, T) when the model has a value head
};

//! Full forward of (B, T) ids with a mask; positions = max(cumsum(mask) - 1, 0).
template <class S>
RefOut<S> ref_forward(rlflow::model::GPTConfig const& cfg, std::vector<S> const& P, std::vector<std::int32_t> const& ids,
                      std::vector<std::int32_t> const& mask, int B, int T) {
  rlflow::model::ParamLayout const lay(cfg);
  int const C = cfg.n_embd, V = cfg.vocab_size, NH = cfg.n_head, hs = C / NH;
  RefOut<S> out;
  out.logits.assign(std::size_t(B) * T * V, S(0));
  if (cfg.value_head) out.values.assign(std::size_t(B) * T, S(0));
  auto ln = [&](std::vector<S> const& x, std::size_t w, std::size_t b) {
    std::vector<S> y(std::size_t(T) * C);
    for (int t = 0; t < T; ++t) {
      S m = 0, v = 0;
      for (int c = 0; c < C; ++c) m += x[std::size_t(t) * C + c];
      m /= C;
      for (int c = 0; c < C; ++c) v += (x[std::size_t(t) * C + c] - m) * (x[std::size_t(t) * C + c] - m);
      v /= C;
      S const r = S(1) / std::sqrt(v + S(1e-5));
      for (int c = 0; c < C; ++c) y[std::size_t(t) * C + c] = (x[std::size_t(t) * C + c] - m) * r * P[w + c] + P[b + c];
    }
    return y;
  };
  for (int b = 0; b < B; ++b) {
    std::vector<int> pos(static_cast<std::size_t>(T)), valid(static_cast<std::size_t>(T));
    int cum = 0;
    for (int t = 0; t < T; ++t) {
      valid[std::size_t(t)] = mask[std::size_t(b) * T + t] != 0;
      cum += valid[std::size_t(t)];
      pos[std::size_t(t)] = cum > 0 ? cum - 1 : 0;
    }
    std::vector<S> x(std::size_t(T) * C);
    for (int t = 0; t < T; ++t)
      for (int c = 0; c < C; ++c)
        x[std::size_t(t) * C + c] = P[lay.wte + std::size_t(ids[std::size_t(b) * T + t]) * C + c] +
                                    P[lay.wpe + std::size_t(pos[std::size_t(t)]) * C + c];
    for (auto const& W : lay.layers) {
      auto h = ln(x, W.ln1_w, W.ln1_b);
      // q, k, v per head: row (h * 3 + part) * hs + d of c_attn
      auto qkv = [&](int t, int head, int part, int d) {
        std::size_t const row = std::size_t((head * 3 + part) * hs + d);
        S s = P[W.qkv_b + row];
        for (int c = 0; c < C; ++c) s += h[std::size_t(t) * C + c] * P[W.qkv_w + row * C + c];
        return s;
      };
      std::vector<S> q(std::size_t(T) * C), k(std::size_t(T) * C), v(std::size_t(T) * C), y(std::size_t(T) * C, S(0));
      for (int t = 0; t < T; ++t)
        for (int hd = 0; hd < NH; ++hd)
          for (int d = 0; d < hs; ++d) {
            q[std::size_t(t) * C + hd * hs + d] = qkv(t, hd, 0, d);
            k[std::size_t(t) * C + hd * hs + d] = qkv(t, hd, 1, d);
            v[std::size_t(t) * C + hd * hs + d] = qkv(t, hd, 2, d);
          }
      for (int t = 0; t < T; ++t)
        for (int hd = 0; hd < NH; ++hd) {
          std::vector<S> sc(std::size_t(t) + 1);
          S mx = -INFINITY;
          bool any = false;
          for (int j = 0; j <= t; ++j) {
            if (!valid[std::size_t(j)]) continue;
            S s = 0;
            for (int d = 0; d < hs; ++d) s += q[std::size_t(t) * C + hd * hs + d] * k[std::size_t(j) * C + hd * hs + d];
            sc[std::size_t(j)] = s / std::sqrt(S(hs));
            mx = std::max(mx, sc[std::size_t(j)]);
            any = true;
          }
          if (!any) continue;
          S sum = 0;
          for (int j = 0; j <= t; ++j)
            if (valid[std::size_t(j)]) sum += std::exp(sc[std::size_t(j)] - mx);
          for (int j = 0; j <= t; ++j) {
            if (!valid[std::size_t(j)]) continue;
            S const p = std::exp(sc[std::size_t(j)] - mx) / sum;
            for (int d = 0; d < hs; ++d) y[std::size_t(t) * C + hd * hs + d] += p * v[std::size_t(j) * C + hd * hs + d];
          }
        }
      for (int t = 0; t < T; ++t)
        for (int o = 0; o < C; ++o) {
          S s = P[W.proj_b + o];
          for (int i = 0; i < C; ++i) s += y[std::size_t(t) * C + i] * P[W.proj_w + std::size_t(i) * C + o];
          x[std::size_t(t) * C + o] += s;
        }
      auto h2 = ln(x, W.ln2_w, W.ln2_b);
      for (int t = 0; t < T; ++t) {
        std::vector<S> g(std::size_t(4) * C);
        for (int o = 0; o < 4 * C; ++o) {
          S s = P[W.fc_b + o];
          for (int i = 0; i < C; ++i) s += h2[std::size_t(t) * C + i] * P[W.fc_w + std::size_t(o) * C + i];
          g[std::size_t(o)] = S(0.5) * s * (S(1) + std::tanh(std::sqrt(S(2) / S(M_PI)) * (s + S(0.044715) * s * s * s)));
        }
        for (int o = 0; o < C; ++o) {
          S s = P[W.fcproj_b + o];
          for (int i = 0; i < 4 * C; ++i) s += g[std::size_t(i)] * P[W.fcproj_w + std::size_t(i) * C + o];
          x[std::size_t(t) * C + o] += s;
        }
      }
    }
    auto f = ln(x, lay.lnf_w, lay.lnf_b);
    for (int t = 0; t < T; ++t) {
      for (int vv = 0; vv < V; ++vv) {
        S s = 0;
        for (int c = 0; c < C; ++c) s += f[std::size_t(t) * C + c] * P[lay.wte + std::size_t(vv) * C + c];
        out.logits[(std::size_t(b) * T + t) * V + vv] = s;
      }
      if (cfg.value_head) {
        S s = P[lay.value_b];
        for (int c = 0; c < C; ++c) s += f[std::size_t(t) * C + c] * P[lay.value_w + c];
        out.values[std::size_t(b) * T + t] = s;
      }
    }
  }
  return out;
}

//! log softmax(logits / temp)[target] and the entropy, in S.
template <class S>
void ref_logprob(S const* logits, int V, int target, S temp, S& logp, S& ent) {
  S m = -INFINITY;
  for (int v = 0; v < V; ++v) m = std::max(m, logits[v] / temp);
  S s = 0;
  for (int v = 0; v < V; ++v) s += std::exp(logits[v] / temp - m);
  S const lse = m + std::log(s);
  logp = logits[target] / temp - lse;
  ent = 0;
  for (int v = 0; v < V; ++v) {
    S const lp = logits[v] / temp - lse;
    ent -= std::exp(lp) * lp;
  }
}

}  // namespace test
