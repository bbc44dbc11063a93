// tests/kernels/reference.hpp: independent plain-loop double-precision references of verl's
// formulas (written from verl's formulas, not from the kernels), used by test_kernels.cpp.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace ref {

using vec = std::vector<double>;

inline double msum(vec const& x, vec const& m) {
  double s = 0;
  for (std::size_t i = 0; i < x.size(); ++i) if (m[i] != 0) s += x[i];
  return s;
}
inline double mcount(vec const& m) { double s = 0; for (double v : m) s += v != 0; return s; }
// verl's masks are integer/bool tensors: mask.sum() + 1e-8 is evaluated in float32, so the 1e-8
// only survives for an empty mask.
inline double fden(double n) { return static_cast<double>(static_cast<float>(n) + 1e-8f); }
inline double mmean(vec const& x, vec const& m) { return msum(x, m) / fden(mcount(m)); }
inline double mvar(vec const& x, vec const& m) {
  double mu = mmean(x, m), n = mcount(m), ss = 0;
  for (std::size_t i = 0; i < x.size(); ++i) if (m[i] != 0) ss += (x[i] - mu) * (x[i] - mu);
  if (n < 2) throw std::runtime_error("masked_var needs >= 2");
  return ss / fden(n) * n / (n - 1);
}
inline vec whiten(vec const& x, vec const& m) {
  double mu = mmean(x, m), v = mvar(x, m);
  vec o(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) o[i] = (x[i] - mu) / std::sqrt(v + 1e-8);
  return o;
}

// Groups as a map id -> rows (order-independent, like verl's dict).
inline std::map<std::int64_t, std::vector<int>> groups(std::vector<std::int64_t> const& g) {
  std::map<std::int64_t, std::vector<int>> r;
  for (int i = 0; i < static_cast<int>(g.size()); ++i) r[g[i]].push_back(i);
  return r;
}
inline double gmean(vec const& s, std::vector<int> const& rows) { double a = 0; for (int i : rows) a += s[i]; return a / rows.size(); }
inline double gstd(vec const& s, std::vector<int> const& rows) {
  double mu = gmean(s, rows), ss = 0;
  for (int i : rows) ss += (s[i] - mu) * (s[i] - mu);
  return std::sqrt(ss / (rows.size() - 1));
}

inline vec broadcast(vec const& a, vec const& m, int T) {
  vec o(m.size());
  for (std::size_t k = 0; k < m.size(); ++k) o[k] = m[k] != 0 ? a[k / T] : 0.0;
  return o;
}

inline vec grpo(vec const& s, std::vector<std::int64_t> const& g, double eps, bool norm) {
  vec a(s.size());
  for (auto& [id, rows] : groups(g)) {
    double mu = rows.size() == 1 ? 0 : gmean(s, rows), sd = rows.size() == 1 ? 1 : gstd(s, rows);
    for (int i : rows) a[i] = norm ? (s[i] - mu) / (sd + eps) : s[i] - mu;
  }
  return a;
}
inline vec rloo(vec const& s, std::vector<std::int64_t> const& g, bool vectorized) {
  vec a(s.size());
  for (auto& [id, rows] : groups(g)) {
    double n = rows.size();
    for (int i : rows) {
      if (n == 1) { a[i] = vectorized ? 0 : s[i]; continue; }
      double others = 0;
      for (int j : rows) if (j != i) others += s[j];
      a[i] = s[i] - others / (n - 1);
    }
  }
  return a;
}
inline vec passk(vec const& s, std::vector<std::int64_t> const& g, double eps, bool norm) {
  vec a(s.size(), 0.0);
  for (auto& [id, rows] : groups(g)) {
    std::vector<double> v;
    for (int i : rows) v.push_back(s[i]);
    std::sort(v.rbegin(), v.rend());
    int imax = rows[0];
    for (int i : rows) if (s[i] > s[imax]) imax = i;
    double adv = v[0] - v[1];
    if (norm) adv /= gstd(s, rows) + eps;
    a[imax] = adv;
  }
  return a;
}
inline vec opo(vec const& s, vec const& len, std::vector<std::int64_t> const& g) {
  vec a(s.size());
  for (auto& [id, rows] : groups(g)) {
    double num = 0, den = 0;
    for (int i : rows) num += len[i] * s[i], den += len[i];
    double b = rows.size() == 1 ? 0 : num / den;
    for (int i : rows) a[i] = s[i] - b;
  }
  return a;
}
inline vec gpg(vec const& s, std::vector<std::int64_t> const& g) {
  double nz = 0;
  for (double v : s) nz += v != 0;
  double alpha = s.size() / std::max(nz, 1.0);
  vec a(s.size());
  for (auto& [id, rows] : groups(g)) {
    double mu = rows.size() == 1 ? 0 : gmean(s, rows);
    for (int i : rows) a[i] = alpha * (s[i] - mu);
  }
  return a;
}

// Loss aggregation: sum_k w_k L_k with verl's weights.
struct agg_info { int dp = 1; double ntok = -1, nseq = -1, norm = -1; };
inline double agg(vec const& L, vec const& m, int B, int T, int mode, agg_info const& gi) {
  // mode: 0 token-mean, 1 token-sum, 2 seq-mean-token-sum, 3 seq-mean-token-mean, 4 seq-mean-token-sum-norm
  double tot = 0, ntok = 0, nseq = 0;
  vec rowsum(B, 0), rowlen(B, 0);
  for (int i = 0; i < B; ++i)
    for (int t = 0; t < T; ++t)
      if (m[i * T + t] != 0) rowsum[i] += L[i * T + t], rowlen[i] += 1, tot += L[i * T + t];
  for (int i = 0; i < B; ++i) ntok += rowlen[i], nseq += rowlen[i] > 0;
  if (gi.ntok >= 0) ntok = gi.ntok;
  if (gi.nseq >= 0) nseq = gi.nseq;
  switch (mode) {
    case 0: return tot / ntok * gi.dp;
    case 1: return tot * gi.dp;
    case 2: case 4: {
      double s = 0;
      for (int i = 0; i < B; ++i) if (rowlen[i] > 0) s += rowsum[i];
      double r = s / nseq * gi.dp;
      if (mode == 4) r /= gi.norm >= 0 ? gi.norm : T;
      return r;
    }
    default: {
      double s = 0;
      for (int i = 0; i < B; ++i) if (rowlen[i] > 0) s += rowsum[i] / fden(rowlen[i]);
      return s / nseq * gi.dp;
    }
  }
}

inline double clampd(double x, double lo, double hi) { return std::min(std::max(x, lo), hi); }

struct pl_cfg { double lo = 0.2, hi = 0.2, c = 3.0, tau_pos = 1.0, tau_neg = 1.05, beta = 1.0; };

// Per-token losses of the token-local modes (0 vanilla, 1 sapo, 2 gpg, 3 cispo(value only), 4 dro).
inline double token_loss(int mode, double x, double o, double A, pl_cfg const& c) {
  double d = clampd(x - o, -20, 20), r = std::exp(d);
  switch (mode) {
    case 0: {
      double l1 = -A * r, l2 = -A * clampd(r, 1 - c.lo, 1 + c.hi), lc = std::max(l1, l2);
      return A < 0 ? std::min(-A * c.c, lc) : lc;
    }
    case 1: {
      double tau = A > 0 ? c.tau_pos : c.tau_neg;
      return -(1 / (1 + std::exp(-tau * (r - 1))) * 4 / tau) * A;
    }
    case 2: return -x * A;
    case 4: return -(x * A - 0.5 * c.beta * (x - o) * (x - o));
  }
  return 0;
}

inline double geo_mean_loss(vec const& x, vec const& o, vec const& A, vec const& m, int B, int T, pl_cfg const& c) {
  double tot = 0;
  for (int i = 0; i < B; ++i) {
    double s = 0, sa = 0, n = 0;
    for (int t = 0; t < T; ++t) {
      int k = i * T + t;
      if (m[k] == 0) continue;
      double d = x[k] - o[k], dc = clampd(d, -c.lo, c.hi), sg = A[k] > 0 ? 1 : (A[k] < 0 ? -1 : 0);
      s += sg * std::min(sg * d, sg * dc);
      sa += A[k];
      n += 1;
    }
    tot += -(sa / fden(n)) * std::exp(s / fden(n));
  }
  return tot / B;
}

inline double kl(int kind, double x, double r) {
  double d = x - r;
  switch (kind) {
    case 0: return d;
    case 1: return std::fabs(d);
    case 2: return 0.5 * d * d;
    default: {
      double k = clampd(r - x, -20, 20);
      return clampd(std::exp(k) - k - 1, -10, 10);
    }
  }
}

inline double entropy(std::vector<double> const& z) {
  double mx = -INFINITY;
  for (double v : z) mx = std::max(mx, v);
  double s = 0;
  for (double v : z) s += std::exp(v - mx);
  double lse = mx + std::log(s), h = lse;
  for (double v : z) if (v != -INFINITY) h -= std::exp(v - lse) * v;
  return h;
}


// Policy-loss surrogate: stop-gradient parts are evaluated at xf (frozen), the rest at x, so that
// d/dx at x == xf is the autograd gradient. mode: PolicyLossMode order (0 vanilla, 1 gspo, 2 sapo,
// 3 gpg, 4 clip_cov, 5 kl_cov, 6 geo_mean, 7 cispo, 8 dro, 9 dppo_tv, 10 dppo_kl; 11 = REINFORCE, whose
// 'o' is the rollout log-prob). Returns the loss; metrics via 'met'.
struct pl_in { vec x, xf, o, A, m, w; int B, T; };
struct pl_full { double lo = 0.2, hi = 0.2, c = 3.0, tau_pos = 1.0, tau_neg = 1.05, beta = 1.0,
                 cc_ratio = 2e-4, cc_lb = 1.0, cc_ub = 5.0, kc_ratio = 2e-4, kc_coef = 0.1; };
struct pl_met { double clip = 0, kl = 0, lower = 0; };

inline std::vector<int> top_cov(vec const& cov, std::vector<char> const& cand, long k) {
  std::vector<int> idx;
  for (int i = 0; i < static_cast<int>(cov.size()); ++i) if (cand[i]) idx.push_back(i);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return cov[a] > cov[b]; });
  if (static_cast<long>(idx.size()) > k) idx.resize(k);
  return idx;
}

inline double policy_loss(int mode, pl_in const& in, pl_full const& c, int agg_mode, agg_info const& gi, pl_met* met) {
  int const B = in.B, T = in.T, n = B * T;
  vec L(n, 0.0), clip(n, 0.0), lower(n, 0.0), klv(n, 0.0);
  auto const& x = in.x; auto const& xf = in.xf; auto const& o = in.o; auto const& A = in.A; auto const& m = in.m;
  if (mode == 6) {
    double loss = geo_mean_loss(x, o, A, m, B, T, pl_cfg{c.lo, c.hi});
    for (int k = 0; k < n; ++k) {
      double d = xf[k] - o[k], dc = clampd(d, -c.lo, c.hi);
      clip[k] = (d != dc) && A[k] > 0; lower[k] = (d != dc) && A[k] < 0; klv[k] = -d;
    }
    if (met) *met = {mmean(clip, m), mmean(klv, m), mmean(lower, m)};
    return loss;
  }
  std::vector<char> sel(n, 0);
  if (mode == 4 || mode == 5) {
    double ma, mx, cnt = mcount(m);
    if (mode == 4) ma = mmean(A, m), mx = mmean(xf, m);
    else ma = cnt ? msum(A, m) / cnt : 0, mx = cnt ? msum(xf, m) / cnt : 0;
    vec cov(n);
    std::vector<char> cand(n, 0);
    for (int k = 0; k < n; ++k) {
      cov[k] = (A[k] - ma) * (xf[k] - mx);
      if (m[k] == 0) continue;
      if (mode == 4) {
        double r = std::exp(xf[k] - o[k]);
        bool clipped = -A[k] * clampd(r, 1 - c.lo, 1 + c.hi) > -A[k] * r;
        cand[k] = !clipped && cov[k] > c.cc_lb && cov[k] < c.cc_ub;
      } else cand[k] = 1;
    }
    long k = mode == 4 ? std::max(long(std::floor(c.cc_ratio * cnt)), 1L) : (cnt > 0 ? std::max(1L, long(std::floor(cnt * c.kc_ratio))) : 0);
    for (int i : top_cov(cov, cand, k)) sel[i] = 1;
  }
  for (int i = 0; i < B; ++i) {
    double lsum = 0, cnt = 0;
    for (int t = 0; t < T; ++t) if (m[i * T + t] != 0) lsum += xf[i * T + t] - o[i * T + t], cnt += 1;
    double lseq = lsum / std::max(cnt, 1.0);
    for (int t = 0; t < T; ++t) {
      int k = i * T + t;
      double a = A[k];
      double d = clampd(x[k] - o[k], -20, 20), r = std::exp(d);
      switch (mode) {
        case 0: {
          double l1 = -a * r, l2 = -a * clampd(r, 1 - c.lo, 1 + c.hi), lc = std::max(l1, l2);
          L[k] = a < 0 ? std::min(-a * c.c, lc) : lc;
          clip[k] = l2 > l1; lower[k] = lc > -a * c.c && a < 0; klv[k] = -d; break;
        }
        case 1: {
          double rr = std::exp(std::min(lseq + x[k] - xf[k], 10.0));
          double l1 = -a * rr, l2 = -a * clampd(rr, 1 - c.lo, 1 + c.hi);
          L[k] = std::max(l1, l2); clip[k] = l2 > l1; klv[k] = -(xf[k] - o[k]); break;
        }
        case 2: {
          double tau = a > 0 ? c.tau_pos : c.tau_neg;
          L[k] = -(1 / (1 + std::exp(-tau * (r - 1))) * 4 / tau) * a; klv[k] = -d; break;
        }
        case 3: L[k] = -x[k] * a; break;
        case 4: {
          double ru = std::exp(x[k] - o[k]);
          L[k] = sel[k] ? 0.0 : std::max(-a * ru, -a * clampd(ru, 1 - c.lo, 1 + c.hi));
          clip[k] = sel[k]; klv[k] = -(x[k] - o[k]); break;
        }
        case 5: {
          double du = x[k] - o[k];
          L[k] = -a * std::exp(du) + (sel[k] ? c.kc_coef * std::fabs(du) : 0.0);
          klv[k] = std::fabs(du); break;
        }
        case 7: {
          double rf = std::exp(clampd(xf[k] - o[k], -20, 20)), rc = clampd(rf, 1 - c.lo, 1 + c.hi);
          L[k] = -rc * a * x[k]; clip[k] = rf != rc; klv[k] = -clampd(xf[k] - o[k], -20, 20); break;
        }
        case 8: L[k] = -(x[k] * a - 0.5 * c.beta * (x[k] - o[k]) * (x[k] - o[k])); klv[k] = -(x[k] - o[k]); break;
        case 9:
        case 10: {  // dppo_tv / dppo_kl: valid mask and truncated ratio from the frozen log-prob
          double df = clampd(xf[k] - o[k], -20, 20), rf = std::exp(df), rt = std::min(rf, c.c);
          double p = std::exp(xf[k]), po = std::exp(o[k]);
          bool valid;
          if (mode == 9) valid = a > 0 ? p - po <= c.hi : p - po >= -c.lo;
          else {
            double bkl = po * (o[k] - xf[k]) + (1 - po) * std::log((1 - po + 1e-8) / (1 - p + 1e-8));
            valid = a > 0 ? (bkl <= c.hi || p <= po) : (bkl <= c.lo || p >= po);
          }
          L[k] = -a * rt * x[k] * (valid ? 1.0 : 0.0);
          clip[k] = !valid; lower[k] = (rf > c.c) && valid; klv[k] = -df; break;
        }
        case 11: L[k] = -a * x[k]; klv[k] = o[k] - xf[k]; break;  // compute_policy_loss_reinforce (o = rollout)
      }
      if (!in.w.empty()) L[k] *= in.w[k];
    }
  }
  if (met) *met = {mmean(clip, m), mmean(klv, m), mmean(lower, m)};
  int am = (mode == 1 || mode == 2) ? 3 : agg_mode;
  return agg(L, m, B, T, am, gi);
}

// Rollout correction (verl rollout_corr_helper.py), a plain re-derivation of the IS weights, the
// rejection mask and a selection of the metrics. lp = training, rp = rollout log-probs.
struct rc_out { vec w, mask; std::map<std::string, double> met; };
inline rc_out rollout_corr(vec const& lp, vec const& rp, vec const& m, int B, int T, int is_level /*0 off,1 token,2 seq*/,
                           double up, double lo /*<0: TIS*/, bool batch_norm, std::vector<std::pair<std::string, double>> const& rs
                           /*option, upper (k1: ratio upper, lower = 1/upper)*/) {
  rc_out o;
  int n = B * T;
  auto lr = [&](int k) { return lp[k] - rp[k]; };
  vec len(B, 0);
  for (int k = 0; k < n; ++k) len[k / T] += m[k] != 0;
  auto rmean = [&](int i, vec const& x) { double s = 0; for (int t = 0; t < T; ++t) if (m[i * T + t] != 0) s += x[i * T + t]; return s / fden(len[i]); };
  if (is_level) {
    o.w.assign(n, 0.0);
    vec raw(n, 0.0);
    for (int i = 0; i < B; ++i) {
      double ls = 0;
      for (int t = 0; t < T; ++t) if (m[i * T + t] != 0) ls += lr(i * T + t);
      for (int t = 0; t < T; ++t) {
        int k = i * T + t;
        if (m[k] == 0) continue;
        raw[k] = std::exp(clampd(is_level == 1 ? lr(k) : ls, -20, 20));
        o.w[k] = lo < 0 ? std::min(raw[k], up) : (raw[k] >= lo && raw[k] <= up ? raw[k] : 0.0);
      }
    }
    o.met["rollout_is_mean"] = mmean(o.w, m);
    vec wc(n), q(n);
    for (int k = 0; k < n; ++k) wc[k] = clampd(o.w[k], 0, up);
    double mc = mmean(wc, m);
    for (int k = 0; k < n; ++k) q[k] = (wc[k] / (mc + 1e-8)) * (wc[k] / (mc + 1e-8));
    o.met["rollout_is_eff_sample_size"] = 1.0 / mmean(q, m);
    double sm = 0;
    for (int i = 0; i < B; ++i) sm += rmean(i, o.w);
    o.met["rollout_is_seq_mean"] = sm / B;
    if (batch_norm) {
      double wm;
      if (is_level == 1) wm = mmean(o.w, m);
      else {
        double a = 0, c = 0;
        for (int i = 0; i < B; ++i) if (len[i] > 0) a += rmean(i, o.w), c += 1;
        wm = a / std::max(c, 1e-8);
      }
      if (wm > 1e-8) for (auto& x : o.w) x /= wm;
    }
  }
  o.mask = m;
  for (auto const& [name, upper] : rs) {
    int kind = name.back() - '0';
    bool tok = name.rfind("token", 0) == 0;
    auto stat = [&](int k) { double l = clampd(lr(k), -20, 20); return kind == 1 ? -l : kind == 2 ? 0.5 * l * l : std::exp(l) - 1 - l; };
    double hi = kind == 1 ? std::log(upper) : upper, low = kind == 1 ? std::log(1.0 / upper) : 0.0;
    for (int i = 0; i < B; ++i) {
      double sv = 0;
      if (!tok) {
        vec st(n, 0.0);
        for (int t = 0; t < T; ++t) st[i * T + t] = m[i * T + t] != 0 ? stat(i * T + t) : 0.0;
        if (name.rfind("seq_sum", 0) == 0) { for (int t = 0; t < T; ++t) sv += st[i * T + t]; }
        else if (name.rfind("seq_mean", 0) == 0) sv = rmean(i, st);
        else { double mx = -INFINITY; for (int t = 0; t < T; ++t) if (m[i * T + t] != 0) mx = std::max(mx, st[i * T + t]); sv = len[i] > 0 ? mx : 0; }
      }
      for (int t = 0; t < T; ++t) {
        int k = i * T + t;
        double v = tok ? stat(k) : sv;
        bool keep = kind == 1 ? (v >= low && v <= hi) : v <= hi;
        if (!keep) o.mask[k] = 0;
      }
    }
  }
  if (!rs.empty()) {
    vec rej(n);
    for (int k = 0; k < n; ++k) rej[k] = (m[k] != 0 && o.mask[k] == 0) ? 1.0 : 0.0;
    o.met["rollout_rs_masked_fraction"] = mmean(rej, m);
  }
  vec d(n), k3(n), r2(n);
  for (int k = 0; k < n; ++k) {
    d[k] = rp[k] - lp[k];
    k3[k] = std::exp(lr(k)) - lr(k) - 1;
    r2[k] = std::exp(2 * clampd(lr(k), -20, 20));
  }
  o.met["kl"] = mmean(d, m);
  o.met["k3_kl"] = mmean(k3, m);
  o.met["chi2_token"] = mmean(r2, m) - 1;
  double ppl = 0, diff = 0, chi = 0;
  for (int i = 0; i < B; ++i) {
    double a = rmean(i, lp), b = rmean(i, rp), ls = 0;
    for (int t = 0; t < T; ++t) if (m[i * T + t] != 0) ls += lr(i * T + t);
    ppl += std::exp(-a), diff += b - a, chi += std::exp(2 * clampd(ls, -20, 20));
  }
  o.met["training_ppl"] = ppl / B;
  o.met["log_ppl_diff"] = diff / B;
  o.met["chi2_seq"] = chi / B - 1;
  return o;
}

// Optimal token baseline (verl compute_optimal_token_baseline_advantage and the multi-turn variant),
// written the way verl does it: explicit compaction for tir, groups as lists of rows.
inline std::pair<vec, vec> otb(vec const& r, vec const& m, std::vector<std::int64_t> const& g, vec const& lp, vec const& sp,
                               vec const& isw, int B, int T, bool tir, bool zero_tail) {
  vec G(B * T), W(B * T), adv(B * T, 0.0);
  std::vector<int> len(B, 0);
  for (int i = 0; i < B; ++i) {
    double run = 0, cw = 0;
    for (int t = T - 1; t >= 0; --t) { run += r[i * T + t] * m[i * T + t]; G[i * T + t] = run; }
    for (int t = 0; t < T; ++t) {
      int k = i * T + t;
      double w = 1 - 2 * std::exp(lp[k]) + sp[k];
      if (!isw.empty()) w *= isw[k] * isw[k];
      cw += w * m[k];
      W[k] = cw;
      len[i] += m[k] != 0;
    }
  }
  // per row: (column, token) pairs
  std::vector<std::vector<std::pair<int, int>>> cols(B);
  for (int i = 0; i < B; ++i) {
    int j = 0;
    for (int t = 0; t < T; ++t)
      if (m[i * T + t] != 0) cols[i].push_back({tir ? j++ : t, t});
  }
  std::map<std::int64_t, std::vector<int>> grp;
  for (int i = 0; i < B; ++i) if (!tir || len[i] > 0) grp[g[i]].push_back(i);
  for (auto& [id, rows] : grp) {
    int N = rows.size();
    std::map<int, double> num, den;
    for (int i : rows) for (auto [c, t] : cols[i]) num[c] += G[i * T + t] * W[i * T + t], den[c] += W[i * T + t];
    std::vector<int> L;
    for (int i : rows) L.push_back(len[i]);
    std::sort(L.begin(), L.end());
    int longest = -1;
    if (N > 1 && L[N - 1] > L[N - 2]) for (int i : rows) if (len[i] == L[N - 1]) longest = i;
    for (int i : rows)
      for (auto [c, t] : cols[i]) {
        double b = N > 1 ? num[c] / (den[c] + 1e-8) : 0.0;
        if (zero_tail && i == longest && c >= L[N - 2]) b = 0;
        adv[i * T + t] = G[i * T + t] - b;
      }
  }
  return {adv, G};
}

}  // namespace ref
