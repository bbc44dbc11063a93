// tests/device/test_kernels_cuda_all.cu: the RL kernels on rlflow::cuda::par against cpu::par
// (which tests/kernels/test_kernels.cpp checks against double-precision references) on random
// inputs, for what tests/kernels/test_kernels_cuda.cu does not cover: the other outcome
// estimators (pass@k, vectorized RLOO, REINFORCE++(-baseline), OPO, GPG, ReMax), sequence scores,
// every KL estimator with its gradient, kl_loss and agg_loss / agg_loss_weights in every
// aggregation mode, apply_kl_penalty with both controllers, and the masked moments. Label cuda;
// every case skips with a warning without a GPU.
#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <rlflow/kernels/kernels.hpp>

#include <cmath>
#include <random>
#include <vector>

namespace k = rlflow::kernels;
using rlflow::cpu::par;

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
    REQUIRE(cudaMalloc(&p, std::max<std::size_t>(n, 1) * sizeof(T)) == cudaSuccess);
    if (n) REQUIRE(cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  dev(dev const&) = delete;
  ~dev() { cudaFree(p); }
  std::vector<T> host() const {
    std::vector<T> h(n);
    if (n) REQUIRE(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
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

void close(std::vector<float> const& gpu, std::vector<float> const& cpu, double tol) {
  REQUIRE(gpu.size() == cpu.size());
  for (std::size_t i = 0; i < gpu.size(); ++i) {
    INFO("index " << i);
    REQUIRE(gpu[i] == Approx(cpu[i]).epsilon(tol).margin(tol));
  }
}

//! Ragged masks (row i keeps 1 + (i * 5) % T leading tokens), a fully masked row, and group ids
//! with non-contiguous groups of 4, one group of 1.
struct Batch {
  std::int64_t B, T;
  std::vector<float> mask, scores, tok, tok2, tok3;
  std::vector<std::int64_t> ids;
  Batch(std::mt19937& g, std::int64_t B_, std::int64_t T_) : B(B_), T(T_) {
    mask.assign(std::size_t(B * T), 0.0f);
    for (std::int64_t i = 0; i < B; ++i)
      for (std::int64_t t = 0; t < T; ++t) mask[std::size_t(i * T + t)] = t < 1 + (i * 5) % T ? 1.0f : 0.0f;
    for (std::int64_t t = 0; t < T; ++t) mask[std::size_t(3 * T + t)] = 0.0f;  // row 3 fully masked
    scores = uniform(g, std::size_t(B), -1, 1);
    for (std::int64_t i = 0; i < B; i += 7) scores[std::size_t(i)] = 0.0f;  // zeros matter for GPG
    ids.resize(std::size_t(B));
    std::int64_t const groups = (B - 1) / 4;
    for (std::int64_t i = 0; i + 1 < B; ++i) ids[std::size_t(i)] = (i * 13) % groups;
    ids[std::size_t(B - 1)] = groups;  // a group of one
    tok = uniform(g, std::size_t(B * T), -1, 1);
    tok2 = uniform(g, std::size_t(B * T), -4, -0.05f);
    tok3 = tok2;
    for (auto& x : tok3) x += std::normal_distribution<float>(0, 0.3f)(g);
  }
  k::Dims d() const { return {B, T}; }
};

#define SKIP_WITHOUT_GPU()          \
  if (!have_gpu()) {                \
    WARN("no CUDA device: skipping"); \
    return;                         \
  }

}  // namespace

TEST_CASE("cuda: every outcome estimator and sequence_scores equal the cpu path", "[kernels][cuda]") {
  SKIP_WITHOUT_GPU();
  std::mt19937 g(17);
  Batch b(g, 1001, 23);
  auto const d = b.d();
  std::span<float const> hm(b.mask), hs(b.scores), hr(b.tok);
  std::span<std::int64_t const> hi(b.ids);
  dev<float> dm(b.mask), ds(b.scores), dr(b.tok);
  dev<std::int64_t> di(b.ids);
  std::vector<float> ha(b.mask.size()), hret(b.mask.size());
  dev<float> da(ha), dret(hret);
  auto both = [&](char const* name, double tol, auto&& cpu, auto&& gpu) {
    INFO(name);
    std::fill(ha.begin(), ha.end(), 0.0f);
    std::fill(hret.begin(), hret.end(), 0.0f);
    cpu();
    gpu();
    close(da.host(), ha, tol);
    close(dret.host(), hret, tol);
  };
  // pass@k and OPO reject groups of one: the last row joins the first row's group for them
  std::vector<std::int64_t> ids2 = b.ids;
  ids2.back() = ids2.front();
  dev<std::int64_t> di2(ids2);
  {
    INFO("grpo_passk");
    std::vector<float> pa(ha.size()), pr(ha.size());
    k::grpo_passk_outcome_advantage(par, d, hs, hm, std::span<std::int64_t const>(ids2), std::span<float>(pa), std::span<float>(pr));
    k::grpo_passk_outcome_advantage(rlflow::cuda::par, d, ds.c(), dm.c(), di2.c(), da.m(), dret.m());
    close(da.host(), pa, 1e-5);
    close(dret.host(), pr, 1e-5);
  }
  both("rloo_vectorized", 1e-5,
       [&] { k::rloo_vectorized_outcome_advantage(par, d, hs, hm, hi, std::span<float>(ha), std::span<float>(hret)); },
       [&] { k::rloo_vectorized_outcome_advantage(rlflow::cuda::par, d, ds.c(), dm.c(), di.c(), da.m(), dret.m()); });
  both("reinforce_plus_plus_baseline", 1e-4,
       [&] { k::reinforce_plus_plus_baseline_outcome_advantage(par, d, hs, hm, hi, std::span<float>(ha), std::span<float>(hret)); },
       [&] { k::reinforce_plus_plus_baseline_outcome_advantage(rlflow::cuda::par, d, ds.c(), dm.c(), di.c(), da.m(), dret.m()); });
  both("opo", 1e-5, [&] { k::opo_outcome_advantage(par, d, hs, hm, std::span<std::int64_t const>(ids2), std::span<float>(ha), std::span<float>(hret)); },
       [&] { k::opo_outcome_advantage(rlflow::cuda::par, d, ds.c(), dm.c(), di2.c(), da.m(), dret.m()); });
  both("gpg", 1e-5, [&] { k::gpg_outcome_advantage(par, d, hs, hm, hi, std::span<float>(ha), std::span<float>(hret), 0.5); },
       [&] { k::gpg_outcome_advantage(rlflow::cuda::par, d, ds.c(), dm.c(), di.c(), da.m(), dret.m(), 0.5); });
  both("reinforce_plus_plus", 1e-4,
       [&] { k::reinforce_plus_plus_outcome_advantage(par, d, hr, hm, 0.97, std::span<float>(ha), std::span<float>(hret)); },
       [&] { k::reinforce_plus_plus_outcome_advantage(rlflow::cuda::par, d, dr.c(), dm.c(), 0.97, da.m(), dret.m()); });
  both("remax", 1e-5, [&] { k::remax_outcome_advantage(par, d, hr, hs, hm, std::span<float>(ha), std::span<float>(hret)); },
       [&] { k::remax_outcome_advantage(rlflow::cuda::par, d, dr.c(), ds.c(), dm.c(), da.m(), dret.m()); });
  std::vector<float> hseq(std::size_t(b.B));
  dev<float> dseq(hseq);
  k::sequence_scores(par, d, hr, std::span<float>(hseq));
  k::sequence_scores(rlflow::cuda::par, d, dr.c(), dseq.m());
  close(dseq.host(), hseq, 1e-5);
}

TEST_CASE("cuda: kl estimators, kl_loss, agg_loss and agg_loss_weights in every mode equal the cpu path",
          "[kernels][cuda]") {
  SKIP_WITHOUT_GPU();
  std::mt19937 g(23);
  Batch b(g, 96, 77);
  auto const d = b.d();
  std::span<float const> hm(b.mask), hx(b.tok3), href(b.tok2), hl(b.tok);
  dev<float> dm(b.mask), dx(b.tok3), dref(b.tok2), dl(b.tok);
  std::size_t const N = b.mask.size();
  for (char const* name : {"k1", "abs", "k2", "k3", "k1+", "abs+", "k3+"}) {
    INFO("kl_penalty " << name);
    auto const kind = k::parse_kl_penalty(name);
    std::vector<float> ho(N), hg(N);
    dev<float> dout(ho), dgr(hg);
    k::kl_penalty(par, kind, hx, href, std::span<float>(ho), std::span<float>(hg));
    k::kl_penalty(rlflow::cuda::par, kind, dx.c(), dref.c(), dout.m(), dgr.m());
    close(dout.host(), ho, 1e-6);
    close(dgr.host(), hg, 1e-6);
  }
  k::AggInfo info;
  info.dp_size = 2;
  info.batch_num_tokens = 3000.0;
  info.global_batch_size = 256.0;
  for (int mode = 0; mode < 5; ++mode) {
    auto const agg = static_cast<k::AggMode>(mode);
    INFO("mode " << k::agg_mode_name(agg));
    for (bool with_info : {false, true}) {
      k::AggInfo const in = with_info ? info : k::AggInfo{};
      double const lc = k::agg_loss(par, d, hl, hm, agg, in);
      double const lg = k::agg_loss(rlflow::cuda::par, d, dl.c(), dm.c(), agg, in);
      REQUIRE(lg == Approx(lc).epsilon(1e-9).margin(1e-12));
      std::vector<float> hw(N);
      dev<float> dw(hw);
      k::agg_loss_weights(par, d, hm, agg, in, std::span<float>(hw));
      k::agg_loss_weights(rlflow::cuda::par, d, dm.c(), agg, in, dw.m());
      close(dw.host(), hw, 1e-6);
      for (char const* name : {"k1", "k3", "k3+"}) {
        INFO("kl_loss " << name);
        auto const kind = k::parse_kl_penalty(name);
        std::vector<float> hg(N, 0.25f);  // accumulate onto an existing gradient
        dev<float> dg(hg);
        double const kc = k::kl_loss(par, d, kind, hx, href, hm, agg, in, k::Grad{std::span<float>(hg), 0.1, true});
        double const kg = k::kl_loss(rlflow::cuda::par, d, kind, dx.c(), dref.c(), dm.c(), agg, in, k::Grad{dg.m(), 0.1, true});
        REQUIRE(kg == Approx(kc).epsilon(1e-9).margin(1e-12));
        close(dg.host(), hg, 1e-6);
      }
    }
  }
}

TEST_CASE("cuda: apply_kl_penalty (fixed and adaptive) and the masked moments equal the cpu path", "[kernels][cuda]") {
  SKIP_WITHOUT_GPU();
  std::mt19937 g(29);
  Batch b(g, 200, 41);
  auto const d = b.d();
  std::span<float const> hm(b.mask), hx(b.tok3), href(b.tok2), hs(b.tok);
  dev<float> dm(b.mask), dx(b.tok3), dref(b.tok2), ds(b.tok);
  std::size_t const N = b.mask.size();
  for (char const* name : {"k1", "abs", "k2", "k3"}) {
    INFO("kl " << name);
    auto const kind = k::parse_kl_penalty(name);
    std::vector<float> hr(N);
    dev<float> dr(hr);
    k::FixedKLController fc, fg;
    fc.value = fg.value = 0.05;
    auto rc = k::apply_kl_penalty(par, d, hs, hx, href, hm, kind, fc, std::span<float>(hr));
    auto rg = k::apply_kl_penalty(rlflow::cuda::par, d, ds.c(), dx.c(), dref.c(), dm.c(), kind, fg, dr.m());
    REQUIRE(rg.current_kl == Approx(rc.current_kl).epsilon(1e-9).margin(1e-12));
    REQUIRE(rg.beta == rc.beta);
    close(dr.host(), hr, 1e-6);
    k::AdaptiveKLController ac(0.02, 0.1, 500), ag(0.02, 0.1, 500);
    rc = k::apply_kl_penalty(par, d, hs, hx, href, hm, kind, ac, std::span<float>(hr));
    rg = k::apply_kl_penalty(rlflow::cuda::par, d, ds.c(), dx.c(), dref.c(), dm.c(), kind, ag, dr.m());
    REQUIRE(ag.value == Approx(ac.value).epsilon(1e-12));
    close(dr.host(), hr, 1e-6);
  }
  REQUIRE(k::masked_sum(rlflow::cuda::par, d, ds.c(), dm.c()) == Approx(k::masked_sum(par, d, hs, hm)).epsilon(1e-9));
  REQUIRE(k::masked_mean(rlflow::cuda::par, d, ds.c(), dm.c()) == Approx(k::masked_mean(par, d, hs, hm)).epsilon(1e-9));
  REQUIRE(k::masked_var(rlflow::cuda::par, d, ds.c(), dm.c()) == Approx(k::masked_var(par, d, hs, hm)).epsilon(1e-9));
  std::vector<float> hw(N);
  dev<float> dw(hw);
  auto mc = k::masked_whiten(par, d, hs, hm, std::span<float>(hw));
  auto mg = k::masked_whiten(rlflow::cuda::par, d, ds.c(), dm.c(), dw.m());
  REQUIRE(mg.mean == Approx(mc.mean).epsilon(1e-9));
  REQUIRE(mg.var == Approx(mc.var).epsilon(1e-9));
  close(dw.host(), hw, 1e-5);
}
