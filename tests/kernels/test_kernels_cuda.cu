// tests/kernels/test_kernels_cuda.cu: the RL kernels on rlflow::cuda::par against cpu::par (which
// test_kernels.cpp checks against the double references). Label cuda; skips without a GPU.
#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <rlflow/kernels/kernels.hpp>

#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace k = rlflow::kernels;

namespace {

bool have_gpu() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    cudaGetLastError();
    return false;
  }
  return true;
}

template <class T>
struct dev {
  T* p = nullptr;
  std::size_t n = 0;
  explicit dev(std::vector<T> const& h) : n(h.size()) {
    cudaMalloc(&p, std::max<std::size_t>(n, 1) * sizeof(T));
    if (n) cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice);
  }
  ~dev() { cudaFree(p); }
  std::vector<T> host() const {
    std::vector<T> h(n);
    if (n) cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
  }
  std::span<T const> c() const { return {p, n}; }
  std::span<T> m() { return {p, n}; }
};

std::vector<float> uniform(std::mt19937& g, std::size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(g);
  return v;
}

void close(std::vector<float> const& a, std::vector<float> const& b, double tol) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) REQUIRE(a[i] == Approx(b[i]).epsilon(tol).margin(tol));
}

//! Same names in the same order, values equal up to the summation order of double reductions.
void same_metrics(std::vector<std::pair<std::string, double>> const& got, std::vector<std::pair<std::string, double>> const& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t q = 0; q < got.size(); ++q) {
    INFO(want[q].first);
    REQUIRE(got[q].first == want[q].first);
    REQUIRE(got[q].second == Approx(want[q].second).epsilon(1e-9).margin(1e-12));
  }
}

}  // namespace

TEST_CASE("cuda: advantage estimators equal the cpu path", "[kernels][cuda]") {
  if (!have_gpu()) {
    WARN("no CUDA device: skipping");
    return;
  }
  std::mt19937 g(3);
  int B = 3000, T = 37;
  std::vector<std::int64_t> ids(B);
  for (int i = 0; i < B; ++i) ids[i] = (i * 7) % 500;  // non-contiguous groups of 6
  ids[5] = 2999;                                        // plus a group of one
  auto s = uniform(g, B, -1, 1);
  std::vector<float> m(B * T);
  for (int i = 0; i < B; ++i)
    for (int t = 0; t < T; ++t) m[i * T + t] = t < 1 + (i % T) ? 1.0f : 0.0f;
  std::vector<float> ha(B * T), hr(B * T);
  dev<float> ds(s), dm(m), da(ha), dr(hr);
  dev<std::int64_t> di(ids);
  k::Dims d{B, T};
  k::grpo_outcome_advantage(rlflow::cpu::par, d, std::span<float const>(s), std::span<float const>(m),
                            std::span<std::int64_t const>(ids), std::span<float>(ha), std::span<float>(hr));
  k::grpo_outcome_advantage(rlflow::cuda::par, d, ds.c(), dm.c(), di.c(), da.m(), dr.m());
  close(da.host(), ha, 1e-6);
  close(dr.host(), hr, 1e-6);
  k::rloo_outcome_advantage(rlflow::cpu::par, d, std::span<float const>(s), std::span<float const>(m),
                            std::span<std::int64_t const>(ids), std::span<float>(ha));
  k::rloo_outcome_advantage(rlflow::cuda::par, d, ds.c(), dm.c(), di.c(), da.m());
  close(da.host(), ha, 1e-6);
  auto r = uniform(g, B * T, -1, 1), v = uniform(g, B * T, -1, 1);
  dev<float> drw(r), dv(v);
  k::gae_advantage_return(rlflow::cpu::par, d, std::span<float const>(r), std::span<float const>(v), std::span<float const>(m), 0.99,
                          0.95, std::span<float>(ha), std::span<float>(hr));
  k::gae_advantage_return(rlflow::cuda::par, d, drw.c(), dv.c(), dm.c(), 0.99, 0.95, da.m(), dr.m());
  close(da.host(), ha, 1e-4);
  close(dr.host(), hr, 1e-5);
  s[7] = NAN;
  dev<float> dbad(s);
  CHECK_THROWS_WITH(k::grpo_outcome_advantage(rlflow::cuda::par, d, dbad.c(), dm.c(), di.c(), da.m()), Catch::Contains("row 7"));
}

TEST_CASE("cuda: policy losses, value loss, kl and entropy equal the cpu path", "[kernels][cuda]") {
  if (!have_gpu()) {
    WARN("no CUDA device: skipping");
    return;
  }
  std::mt19937 g(5);
  int B = 64, T = 129;
  auto o = uniform(g, B * T, -5, -0.1f), x = o, a = uniform(g, B * T, -2, 2);
  for (auto& v : x) v += std::normal_distribution<float>(0, 0.3f)(g);
  std::vector<float> m(B * T);
  for (int i = 0; i < B; ++i)
    for (int t = 0; t < T; ++t) m[i * T + t] = t < 1 + (i * 5) % T ? 1.0f : 0.0f;
  dev<float> dx(x), dox(o), da(a), dm(m);
  std::vector<float> hg(B * T), zero(B * T, 0.0f);
  dev<float> dg(zero);
  k::Dims d{B, T};
  for (int mode = 0; mode < 12; ++mode) {  // through bypass_mode (default correction: sequence-level TIS at 2)
    k::PolicyLossConfig cfg;
    cfg.mode = static_cast<k::PolicyLossMode>(mode);
    cfg.clip_cov_ratio = cfg.kl_cov_ratio = 0.01;
    auto hc = k::compute_policy_loss(rlflow::cpu::par, d, cfg, std::span<float const>(o), std::span<float const>(x),
                                     std::span<float const>(a), std::span<float const>(m), k::AggMode::token_mean, {},
                                     k::Grad{std::span<float>(hg)});
    auto gc = k::compute_policy_loss(rlflow::cuda::par, d, cfg, dox.c(), dx.c(), da.c(), dm.c(), k::AggMode::token_mean, {},
                                     k::Grad{dg.m()});
    INFO("mode " << k::policy_loss_mode_name(cfg.mode));
    REQUIRE(gc.loss == Approx(hc.loss).epsilon(1e-9).margin(1e-12));
    REQUIRE(gc.metrics.pg_clipfrac == Approx(hc.metrics.pg_clipfrac).margin(1e-12));
    REQUIRE(gc.metrics.ppo_kl == Approx(hc.metrics.ppo_kl).epsilon(1e-9).margin(1e-12));
    same_metrics(gc.extra_metrics, hc.extra_metrics);
    close(dg.host(), hg, 1e-6);
  }
  auto vr = k::compute_value_loss(rlflow::cuda::par, d, dx.c(), dox.c(), da.c(), dm.c(), 0.5, k::AggMode::seq_mean_token_mean);
  auto vc = k::compute_value_loss(rlflow::cpu::par, d, std::span<float const>(x), std::span<float const>(o),
                                  std::span<float const>(a), std::span<float const>(m), 0.5, k::AggMode::seq_mean_token_mean);
  REQUIRE(vr.vf_loss == Approx(vc.vf_loss).epsilon(1e-9));
  std::vector<float> hk(B * T);
  dev<float> dk(hk);
  k::kl_penalty(rlflow::cpu::par, k::parse_kl_penalty("k3"), std::span<float const>(x), std::span<float const>(o), std::span<float>(hk));
  k::kl_penalty(rlflow::cuda::par, k::parse_kl_penalty("k3"), dx.c(), dox.c(), dk.m());
  close(dk.host(), hk, 1e-6);
  int N = 33, V = 5000;
  auto z = uniform(g, N * V, -6, 6);
  dev<float> dz(z);
  std::vector<float> hh(N);
  dev<float> dh(hh);
  k::entropy_from_logits(rlflow::cpu::par, N, V, std::span<float const>(z), std::span<float>(hh));
  k::entropy_from_logits(rlflow::cuda::par, N, V, dz.c(), dh.m());
  close(dh.host(), hh, 1e-6);
}

TEST_CASE("cuda: gdpo, optimal token baselines, reinforce, masked axes and entropy loss equal the cpu path",
          "[kernels][cuda]") {
  if (!have_gpu()) {
    WARN("no CUDA device: skipping");
    return;
  }
  using rlflow::cpu::par;
  std::mt19937 g(7);
  int B = 400, T = 23, K = 2;
  std::vector<std::int64_t> ids(B);
  for (int i = 0; i < B; ++i) ids[i] = (i * 13) % 100;
  std::vector<float> m(B * T);
  for (int i = 0; i < B; ++i)
    for (int t = 0; t < T; ++t) m[i * T + t] = (t < 1 + (i * 3) % T && (t + i) % 7 != 3) ? 1.0f : 0.0f;
  auto sc = uniform(g, K * B, -1, 1), r = uniform(g, B * T, -1, 1), lp = uniform(g, B * T, -4, -0.01f),
       sp = uniform(g, B * T, 0.1f, 1.0f), x = lp;
  for (auto& v : x) v += std::normal_distribution<float>(0, 0.2f)(g);
  std::vector<float> ha(B * T), hr(B * T);
  dev<float> dsc(sc), dm(m), dr(r), dlp(lp), dsp(sp), dx(x), da(ha), dret(hr);
  dev<std::int64_t> di(ids);
  k::Dims d{B, T};
  std::vector<double> w{1.0, 0.5};
  k::gdpo_outcome_advantage(par, d, K, std::span<float const>(sc), std::span<double const>(w), std::span<float const>(m),
                            std::span<std::int64_t const>(ids), std::span<float>(ha), std::span<float>(hr));
  k::gdpo_outcome_advantage(rlflow::cuda::par, d, K, dsc.c(), std::span<double const>(w), dm.c(), di.c(), da.m(), dret.m());
  close(da.host(), ha, 1e-5);
  for (bool tir : {false, true}) {
    if (tir)
      k::tir_optimal_token_baseline_advantage(par, d, std::span<float const>(r), std::span<float const>(m),
                                              std::span<std::int64_t const>(ids), std::span<float const>(lp),
                                              std::span<float const>(sp), {}, std::span<float>(ha), std::span<float>(hr));
    else
      k::optimal_token_baseline_advantage(par, d, std::span<float const>(r), std::span<float const>(m),
                                          std::span<std::int64_t const>(ids), std::span<float const>(lp),
                                          std::span<float const>(sp), {}, std::span<float>(ha), std::span<float>(hr));
    if (tir)
      k::tir_optimal_token_baseline_advantage(rlflow::cuda::par, d, dr.c(), dm.c(), di.c(), dlp.c(), dsp.c(), {}, da.m(), dret.m());
    else
      k::optimal_token_baseline_advantage(rlflow::cuda::par, d, dr.c(), dm.c(), di.c(), dlp.c(), dsp.c(), {}, da.m(), dret.m());
    close(da.host(), ha, 1e-5);
    close(dret.host(), hr, 1e-5);
  }
  std::vector<float> hg(B * T), zero(B * T, 0.0f);
  dev<float> dg(zero);
  auto hc = k::compute_policy_loss_reinforce(par, d, std::span<float const>(lp), std::span<float const>(x), std::span<float const>(r),
                                             std::span<float const>(m), k::AggMode::seq_mean_token_sum, {},
                                             k::Grad{std::span<float>(hg)});
  auto gc = k::compute_policy_loss_reinforce(rlflow::cuda::par, d, dlp.c(), dx.c(), dr.c(), dm.c(), k::AggMode::seq_mean_token_sum, {},
                                             k::Grad{dg.m()});
  REQUIRE(gc.loss == Approx(hc.loss).epsilon(1e-9));
  REQUIRE(gc.metrics.ppo_kl == Approx(hc.metrics.ppo_kl).epsilon(1e-9));
  close(dg.host(), hg, 1e-6);
  for (int axis : {0, -1}) {
    std::size_t const n = axis == 0 ? T : B;
    std::vector<float> hs(n), hm(n);
    dev<float> ds(hs), dmn(hm);
    k::masked_sum(par, d, std::span<float const>(x), std::span<float const>(m), axis, std::span<float>(hs));
    k::masked_mean(par, d, std::span<float const>(x), std::span<float const>(m), axis, std::span<float>(hm));
    k::masked_sum(rlflow::cuda::par, d, dx.c(), dm.c(), axis, ds.m());
    k::masked_mean(rlflow::cuda::par, d, dx.c(), dm.c(), axis, dmn.m());
    close(ds.host(), hs, 1e-5);
    close(dmn.host(), hm, 1e-6);
  }
  int V = 300;
  k::Dims de{8, 5};
  auto z = uniform(g, 8 * 5 * V, -4, 4);
  std::vector<float> me(40, 1.0f);
  me[3] = 0.0f;
  dev<float> dz(z), dme(me);
  double const he = k::compute_entropy_loss(par, de, V, std::span<float const>(z), std::span<float const>(me));
  double const ge = k::compute_entropy_loss(rlflow::cuda::par, de, V, dz.c(), dme.c());
  REQUIRE(ge == Approx(he).epsilon(1e-6));
}

TEST_CASE("cuda: rollout correction and bypass mode equal the cpu path", "[kernels][cuda][rollout_corr]") {
  if (!have_gpu()) {
    WARN("no CUDA device: skipping");
    return;
  }
  std::mt19937 g(11);
  int B = 300, T = 37;
  auto rp = uniform(g, B * T, -4, -0.01f), lp = rp, a = uniform(g, B * T, -2, 2);
  for (auto& v : lp) v += std::normal_distribution<float>(0, 0.15f)(g);
  std::vector<float> m(B * T);
  std::vector<std::int32_t> mi(B * T);
  for (int i = 0; i < B; ++i)
    for (int t = 0; t < T; ++t) {
      bool const on = i % 17 != 5 && t < 1 + (i * 7) % T && (t + i) % 9 != 4;  // rows 5, 22, ... are empty
      m[i * T + t] = on ? 1.0f : 0.0f;
      mi[i * T + t] = on ? 1 : 0;
    }
  dev<float> dlp(lp), drp(rp), dm(m), da(a);
  dev<std::int32_t> dmi(mi);
  k::Dims d{B, T};
  struct opts {
    const char* is;
    const char* thr;
    bool bn;
    const char* rs;
    const char* rs_thr;
  };
  for (opts const& c : {opts{"token", "2", false, nullptr, nullptr}, opts{"sequence", "0.5_1.5", true, "token_k1", "1.2"},
                        opts{"token", "0.8_1.3", true, "seq_mean_k3,seq_sum_k2", "0.01,0.3"},
                        opts{nullptr, "2", false, "seq_max_k2,seq_sum_k1", "0.05,1.5"},
                        opts{"sequence", "2", false, "token_k3,seq_mean_k1", "0.02"}}) {
    k::RolloutCorrectionOptions o;
    o.rollout_is = c.is ? std::optional<std::string>(c.is) : std::nullopt;
    o.rollout_is_threshold = c.thr;
    o.rollout_is_batch_normalize = c.bn;
    if (c.rs) o.rollout_rs = c.rs, o.rollout_rs_threshold = c.rs_thr;
    INFO("is " << (c.is ? c.is : "-") << " rs " << (c.rs ? c.rs : "-"));
    auto const want = k::compute_rollout_correction_and_rejection_mask(rlflow::cpu::par, d, std::span<float const>(lp),
                                                                       std::span<float const>(rp), std::span<float const>(m), o);
    std::vector<float> zero(B * T, 0.0f);
    dev<float> dw(zero), dmo(zero);
    auto const got = k::compute_rollout_correction_and_rejection_mask(rlflow::cuda::par, d, dlp.c(), drp.c(), dm.c(), o,
                                                                      c.is ? dw.m() : std::span<float>{}, dmo.m());
    same_metrics(got, want.metrics);
    REQUIRE(dmo.host() == want.response_mask);
    if (c.is) close(dw.host(), want.rollout_is_weights, 1e-6);
    // verl's int32 response_mask gives the same
    dev<float> dmo2(zero);
    auto const got2 = k::compute_rollout_correction_and_rejection_mask(rlflow::cuda::par, d, dlp.c(), drp.c(), dmi.c(), o,
                                                                       c.is ? dw.m() : std::span<float>{}, dmo2.m());
    same_metrics(got2, want.metrics);
    REQUIRE(dmo2.host() == want.response_mask);
    // bypass mode: loss, metrics, rollout_corr/* and gradient, for both loss types
    for (const char* lt : {"ppo_clip", "reinforce"}) {
      k::PolicyLossConfig cfg;
      cfg.mode = k::PolicyLossMode::bypass_mode;
      cfg.rollout_correction = o;
      cfg.rollout_correction.loss_type = lt;
      std::vector<float> hg(B * T);
      dev<float> dg(zero);
      auto hc = k::compute_policy_loss(rlflow::cpu::par, d, cfg, std::span<float const>(rp), std::span<float const>(lp),
                                       std::span<float const>(a), std::span<float const>(m), k::AggMode::seq_mean_token_sum, {},
                                       k::Grad{std::span<float>(hg)});
      auto gc = k::compute_policy_loss(rlflow::cuda::par, d, cfg, drp.c(), dlp.c(), da.c(), dm.c(), k::AggMode::seq_mean_token_sum,
                                       {}, k::Grad{dg.m()});
      INFO("loss_type " << lt);
      REQUIRE(gc.loss == Approx(hc.loss).epsilon(1e-9).margin(1e-12));
      REQUIRE(gc.metrics.has_pg_clipfrac == hc.metrics.has_pg_clipfrac);
      REQUIRE(gc.metrics.pg_clipfrac == Approx(hc.metrics.pg_clipfrac).margin(1e-12));
      REQUIRE(gc.metrics.ppo_kl == Approx(hc.metrics.ppo_kl).epsilon(1e-9).margin(1e-12));
      same_metrics(gc.extra_metrics, hc.extra_metrics);
      close(dg.host(), hg, 1e-6);
    }
  }
  // errors before work, as on the host
  k::RolloutCorrectionOptions bad;
  bad.rollout_rs = "token_k4";
  bad.rollout_rs_threshold = "2";
  std::vector<float> zero(B * T, 0.0f);
  dev<float> dw(zero), dmo(zero), dz(zero);
  CHECK_THROWS_AS(k::compute_rollout_correction_and_rejection_mask(rlflow::cuda::par, d, dlp.c(), drp.c(), dm.c(), bad, dw.m(), dmo.m()),
                  rlflow::config_error);
  k::RolloutCorrectionOptions ok;
  CHECK_THROWS_WITH(k::compute_rollout_correction_and_rejection_mask(rlflow::cuda::par, d, dlp.c(), drp.c(), dz.c(), ok, dw.m(), dmo.m()),
                    Catch::Contains("no valid token"));
  CHECK_THROWS_AS(k::compute_rollout_correction_and_rejection_mask(rlflow::cuda::par, d, dlp.c(), drp.c(), dm.c(), ok, std::span<float>{},
                                                                   dmo.m()),
                  rlflow::shape_error);
}
