// tests/advantage_step/test_advantage_step.cpp <-> include/rlflow/algorithm/advantage_step.hpp: the public
// advantage step on a DataProto equals the kernels it dispatches to (which test_kernels checks
// against plain double references), reads verl's config keys, and raises for missing inputs.
#include <catch2/catch.hpp>

#include <rlflow/algorithm/advantage_step.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace test_advantage_step {

using namespace rlflow;
namespace k = rlflow::kernels;
using fvec = std::vector<float>;

namespace {

struct fixture {
  std::int64_t B = 12, T = 7;
  fvec scores, mask, values, old, ref, sp, rollout;
  std::vector<std::int32_t> imask;
  std::vector<std::string> uid;
  DataProto batch;
  explicit fixture(unsigned seed = 1) {
    std::mt19937 g(seed);
    std::uniform_real_distribution<float> u(-1, 1);
    scores.assign(B * T, 0.0f);
    imask.assign(B * T, 0);
    for (std::int64_t i = 0; i < B; ++i) {
      std::int64_t const len = 1 + static_cast<std::int64_t>(g() % T);
      for (std::int64_t t = 0; t < len; ++t) imask[i * T + t] = 1;
      scores[i * T + len - 1] = static_cast<float>(g() % 3) * 0.5f;  // outcome reward at the last token
      uid.push_back("p" + std::to_string(i % 4));                       // groups of 3, interleaved
    }
    mask.assign(imask.begin(), imask.end());
    auto fill = [&](fvec& v, float lo, float hi) {
      std::uniform_real_distribution<float> d(lo, hi);
      v.resize(B * T);
      for (auto& x : v) x = d(g);
    };
    fill(values, -1, 1);
    fill(old, -4, -0.05f);
    fill(ref, -4, -0.05f);
    fill(sp, 0.1f, 0.9f);
    rollout = old;
    for (auto& x : rollout) x += 0.1f * u(g);
    NonTensorColumn uc, f1, f2;
    for (std::int64_t i = 0; i < B; ++i) {
      uc.emplace_back(uid[i]);
      f1.emplace_back(static_cast<double>(i % 2));
      f2.emplace_back(static_cast<double>((i * 7) % 5) * 0.25);
    }
    batch = DataProto::from_dict({{"token_level_scores", Tensor::from(scores, Shape{B, T})},
                                  {"token_level_rewards", Tensor::from(scores, Shape{B, T})},
                                  {"response_mask", Tensor::from(imask, Shape{B, T})},
                                  {"values", Tensor::from(values, Shape{B, T})},
                                  {"old_log_probs", Tensor::from(old, Shape{B, T})},
                                  {"ref_log_prob", Tensor::from(ref, Shape{B, T})},
                                  {"sum_pi_squared", Tensor::from(sp, Shape{B, T})},
                                  {"rollout_log_probs", Tensor::from(rollout, Shape{B, T})}},
                                 {{"uid", uc}, {"format_reward", f1}, {"accuracy_reward", f2}});
  }
  std::vector<std::int64_t> ids() const { return k::group_index(uid); }
  fvec seq() const {
    fvec s(B, 0.0f);
    for (std::int64_t i = 0; i < B; ++i)
      for (std::int64_t t = 0; t < T; ++t) s[i] += scores[i * T + t];
    return s;
  }
};

template <class T>
std::span<T const> cs(std::vector<T> const& v) { return {v.data(), v.size()}; }

void same(Tensor const& t, fvec const& want) {
  auto s = t.span<float>();
  REQUIRE(s.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) REQUIRE(s[i] == want[i]);
}

AlgorithmConfig algo(std::string const& est) {
  TrainerConfig c;
  c.apply_overrides({"algorithm.adv_estimator=" + est});
  return c.algorithm;
}

}  // namespace

TEST_CASE("compute_advantage dispatches by algorithm.adv_estimator to the kernels with verl's arguments", "[advantage_step]") {
  fixture f;
  k::Dims const d{f.B, f.T};
  auto const ids = f.ids();
  auto const s = f.seq();
  fvec a(f.B * f.T), r(f.B * f.T);
  using I = std::span<std::int64_t const>;
  for (std::string est : {"grpo", "grpo_vectorized", "rloo", "rloo_vectorized", "opo", "gpg", "grpo_passk",
                          "reinforce_plus_plus_baseline"}) {
    DYNAMIC_SECTION(est) {
      auto al = algo(est);
      DataProto b = f.batch;
      compute_advantage(b, al);
      std::fill(a.begin(), a.end(), 0.0f);
      std::fill(r.begin(), r.end(), 0.0f);
      k::GRPOOptions o;
      if (est == "grpo" || est == "grpo_vectorized") k::grpo_outcome_advantage(rlflow::cpu::par, d, cs(s), cs(f.mask), I(ids), std::span<float>(a), std::span<float>(r), o);
      if (est == "rloo") k::rloo_outcome_advantage(rlflow::cpu::par, d, cs(s), cs(f.mask), I(ids), std::span<float>(a), std::span<float>(r));
      if (est == "rloo_vectorized") k::rloo_vectorized_outcome_advantage(rlflow::cpu::par, d, cs(s), cs(f.mask), I(ids), std::span<float>(a), std::span<float>(r));
      if (est == "opo") k::opo_outcome_advantage(rlflow::cpu::par, d, cs(s), cs(f.mask), I(ids), std::span<float>(a), std::span<float>(r));
      if (est == "gpg") k::gpg_outcome_advantage(rlflow::cpu::par, d, cs(s), cs(f.mask), I(ids), std::span<float>(a), std::span<float>(r));
      if (est == "grpo_passk") k::grpo_passk_outcome_advantage(rlflow::cpu::par, d, cs(s), cs(f.mask), I(ids), std::span<float>(a), std::span<float>(r), o);
      if (est == "reinforce_plus_plus_baseline")
        k::reinforce_plus_plus_baseline_outcome_advantage(rlflow::cpu::par, d, cs(s), cs(f.mask), I(ids), std::span<float>(a), std::span<float>(r));
      same(b.tensor("advantages"), a);
      same(b.tensor("returns"), r);
    }
  }
  SECTION("gae uses gamma and lam; reinforce++ uses gamma; Dr.GRPO follows norm_adv_by_std_in_grpo") {
    TrainerConfig c;
    c.apply_overrides({"algorithm.adv_estimator=gae", "algorithm.gamma=0.9", "algorithm.lam=0.8"});
    DataProto b = f.batch;
    compute_advantage(b, c.algorithm);
    k::gae_advantage_return(rlflow::cpu::par, d, cs(f.scores), cs(f.values), cs(f.mask), 0.9, 0.8, std::span<float>(a), std::span<float>(r));
    same(b.tensor("advantages"), a);
    same(b.tensor("returns"), r);
    c.apply_overrides({"algorithm.adv_estimator=reinforce_plus_plus"});
    b = f.batch;
    compute_advantage(b, c.algorithm);
    k::reinforce_plus_plus_outcome_advantage(rlflow::cpu::par, d, cs(f.scores), cs(f.mask), 0.9, std::span<float>(a), std::span<float>(r));
    same(b.tensor("advantages"), a);
    c.apply_overrides({"algorithm.adv_estimator=grpo", "algorithm.norm_adv_by_std_in_grpo=false"});
    b = f.batch;
    compute_advantage(b, c.algorithm);
    k::GRPOOptions o;
    o.norm_adv_by_std_in_grpo = false;
    k::grpo_outcome_advantage(rlflow::cpu::par, d, cs(s), cs(f.mask), I(ids), std::span<float>(a), std::span<float>(r), o);
    same(b.tensor("advantages"), a);
  }
  SECTION("remax reads reward_baselines; the OTB pair reads old_log_probs, sum_pi_squared and rollout_is_weights") {
    DataProto b = f.batch;
    fvec base(f.B, 0.25f);
    b.set_tensor("reward_baselines", Tensor::from(base));
    compute_advantage(b, algo("remax"));
    k::remax_outcome_advantage(rlflow::cpu::par, d, cs(f.scores), cs(base), cs(f.mask), std::span<float>(a), std::span<float>(r));
    same(b.tensor("advantages"), a);
    for (std::string est : {"optimal_token_baseline", "tir_optimal_token_baseline"}) {
      b = f.batch;
      fvec w(f.B * f.T, 1.5f);
      b.set_tensor("rollout_is_weights", Tensor::from(w, Shape{f.B, f.T}));
      compute_advantage(b, algo(est));
      if (est == "optimal_token_baseline")
        k::optimal_token_baseline_advantage(rlflow::cpu::par, d, cs(f.scores), cs(f.mask), I(ids), cs(f.old), cs(f.sp), cs(w), std::span<float>(a),
                                            std::span<float>(r));
      else
        k::tir_optimal_token_baseline_advantage(rlflow::cpu::par, d, cs(f.scores), cs(f.mask), I(ids), cs(f.old), cs(f.sp), cs(w),
                                                std::span<float>(a), std::span<float>(r));
      same(b.tensor("advantages"), a);
      same(b.tensor("returns"), r);
    }
  }
  SECTION("gdpo reads the reward components named by gdpo_reward_keys, weighted by gdpo_reward_weights") {
    TrainerConfig c;
    c.apply_overrides({"algorithm.adv_estimator=gdpo", "algorithm.gdpo_reward_keys=[format_reward,accuracy_reward]",
                       "algorithm.gdpo_reward_weights=[1.0,0.5]"});
    DataProto b = f.batch;
    compute_advantage(b, c.algorithm);
    fvec dims;
    for (auto key : {"format_reward", "accuracy_reward"})
      for (auto const& v : f.batch.non_tensor(key)) dims.push_back(static_cast<float>(v.as_number()));
    std::vector<double> w{1.0, 0.5};
    k::gdpo_outcome_advantage(rlflow::cpu::par, d, 2, cs(dims), std::span<double const>(w), cs(f.mask), I(ids), std::span<float>(a),
                              std::span<float>(r));
    same(b.tensor("advantages"), a);
    same(b.tensor("returns"), a);
  }
}

TEST_CASE("compute_advantage raises for unknown estimators and missing inputs", "[advantage_step]") {
  fixture f;
  DataProto b = f.batch;
  CHECK_THROWS_AS(compute_advantage(b, [] {
                    AlgorithmConfig a;
                    a.adv_estimator = "ppo";
                    return a;
                  }()),
                  config_error);
  CHECK_THROWS_WITH(compute_advantage(b, algo("gdpo")), Catch::Contains("gdpo_reward_keys"));
  b.pop({"sum_pi_squared"});
  CHECK_THROWS_WITH(compute_advantage(b, algo("optimal_token_baseline")), Catch::Contains("calculate_sum_pi_squared"));
  CHECK_THROWS_WITH(compute_advantage(b, algo("remax")), Catch::Contains("reward_baselines"));
  DataProto nouid = f.batch.select({"token_level_rewards", "response_mask"}, std::vector<std::string>{});
  CHECK_THROWS_WITH(compute_advantage(nouid, algo("grpo")), Catch::Contains("'uid'"));
  TrainerConfig c;
  c.apply_overrides({"algorithm.adv_estimator=gdpo", "algorithm.gdpo_reward_keys=[missing]"});
  b = f.batch;
  CHECK_THROWS_WITH(compute_advantage(b, c.algorithm), Catch::Contains("'missing'"));
}

TEST_CASE("compute_advantage_step: KL in the reward, decoupled rollout correction, metrics", "[advantage_step]") {
  fixture f;
  k::Dims const d{f.B, f.T};
  TrainerConfig c;
  c.apply_overrides({"algorithm.adv_estimator=grpo"});
  KLInRewardController kl(c.algorithm);
  DataProto b = f.batch;
  b.pop({"token_level_rewards"});
  auto m = compute_advantage_step(b, c, kl);
  CHECK(m.empty());
  same(b.tensor("token_level_rewards"), f.scores);

  c.apply_overrides({"algorithm.use_kl_in_reward=true", "algorithm.kl_penalty=low_var_kl", "algorithm.kl_ctrl.type=adaptive",
                     "algorithm.kl_ctrl.kl_coef=0.05"});
  KLInRewardController akl(c.algorithm);
  b = f.batch;
  m = compute_advantage_step(b, c, akl);
  k::AdaptiveKLController ctrl(0.05, c.algorithm.kl_ctrl.target_kl, static_cast<double>(c.algorithm.kl_ctrl.horizon));
  fvec want(f.B * f.T);
  auto r = k::apply_kl_penalty(rlflow::cpu::par, d, cs(f.scores), cs(f.old), cs(f.ref), cs(f.mask), k::parse_kl_penalty("low_var_kl"), ctrl,
                               std::span<float>(want));
  same(b.tensor("token_level_rewards"), want);
  CHECK(m.at("actor/reward_kl_penalty") == r.current_kl);
  CHECK(m.at("actor/reward_kl_penalty_coeff") == 0.05);
  CHECK(akl.value() == ctrl.value);  // the controller was updated with n_steps = B
  CHECK(akl.value() != 0.05);

  c.apply_overrides({"algorithm.use_kl_in_reward=false", "algorithm.rollout_correction.rollout_is=token",
                     "algorithm.rollout_correction.rollout_rs=token_k1", "algorithm.rollout_correction.rollout_rs_threshold=1.05"});
  b = f.batch;
  m = compute_advantage_step(b, c, kl);
  k::RolloutCorrectionOptions o;
  o.rollout_is = "token";
  o.rollout_is_threshold = "2.0";
  o.rollout_rs = "token_k1";
  o.rollout_rs_threshold = "1.05";
  auto corr = k::compute_rollout_correction_and_rejection_mask(rlflow::cpu::par, d, cs(f.old), cs(f.rollout), cs(f.mask), o);
  auto nm = b.tensor("response_mask").span<std::int32_t>();
  double dropped = 0;
  for (std::size_t q = 0; q < nm.size(); ++q) {
    REQUIRE(nm[q] == static_cast<std::int32_t>(corr.response_mask[q]));
    dropped += nm[q] != f.imask[q];
  }
  CHECK(dropped > 0);
  same(b.tensor("rollout_is_weights"), corr.rollout_is_weights);
  CHECK(m.count("rollout_corr/rollout_is_mean") == 1);
  CHECK(m.count("rollout_corr/kl") == 1);
  CHECK(m.at("rollout_corr/rollout_rs_token_k1_masked_fraction") > 0);
  // bypass mode: the correction belongs to the actor's loss, not to the driver
  c.apply_overrides({"algorithm.rollout_correction.bypass_mode=true"});
  b = f.batch;
  m = compute_advantage_step(b, c, kl);
  CHECK(m.count("rollout_corr/kl") == 0);
  CHECK_FALSE(b.has_tensor("rollout_is_weights"));
}

TEST_CASE("compute_pf_ppo_reweight_data resamples rows with verl's weights", "[advantage_step]") {
  fixture f;
  // scores s_i: the row sums of token_level_scores
  auto s = f.seq();
  float const mx = *std::max_element(s.begin(), s.end()), mn = *std::min_element(s.begin(), s.end());
  auto row_of = [&](DataProto const& d) {
    std::vector<std::int64_t> rows;
    for (auto const& v : d.non_tensor("uid")) rows.push_back(std::stoll(v.as_string().substr(1)));
    return rows;
  };
  // max_min: only rows scoring the batch max or min are drawn (others weigh 1e-8)
  for (std::uint64_t seed = 0; seed < 5; ++seed) {
    auto r = compute_pf_ppo_reweight_data(f.batch, "max_min", 2.0, seed);
    REQUIRE(r.size() == f.B);
    auto sc = r.tensor("token_level_scores").span<float>();
    for (std::int64_t i = 0; i < f.B; ++i) {
      float si = 0;
      for (std::int64_t t = 0; t < f.T; ++t) si += sc[i * f.T + t];
      REQUIRE((si == mx || si == mn));
    }
  }
  // pow: draw frequencies follow |s|^p / sum (many draws, generous bound)
  std::vector<double> w(f.B), cnt(f.B, 0.0);
  double tot = 0;
  for (std::int64_t i = 0; i < f.B; ++i) tot += w[i] = std::pow(std::fabs(s[i]), 2.0) + 1e-8;
  DataProto tagged = f.batch;
  NonTensorColumn row;
  for (std::int64_t i = 0; i < f.B; ++i) row.emplace_back("r" + std::to_string(i));
  tagged.set_non_tensor("uid", row);
  int const reps = 400;
  for (int rep = 0; rep < reps; ++rep)
    for (auto i : row_of(compute_pf_ppo_reweight_data(tagged, "pow", 2.0, 1000 + rep))) cnt[i] += 1;
  for (std::int64_t i = 0; i < f.B; ++i) CHECK(cnt[i] / (reps * f.B) == Approx(w[i] / tot).margin(0.02));
  // same seed, same draw; rows keep their tensors and non-tensors together
  auto a = compute_pf_ppo_reweight_data(tagged, "pow", 2.0, 7), b2 = compute_pf_ppo_reweight_data(tagged, "pow", 2.0, 7);
  CHECK(row_of(a) == row_of(b2));
  CHECK_THROWS_AS(compute_pf_ppo_reweight_data(tagged, "softmax"), config_error);
  // through compute_advantage: gae + use_pf_ppo resamples after the advantages are computed
  TrainerConfig c;
  c.apply_overrides({"algorithm.adv_estimator=gae", "algorithm.use_pf_ppo=true", "algorithm.pf_ppo.reweight_method=max_random"});
  DataProto g = tagged;
  compute_advantage(g, c.algorithm, 3);
  DataProto plain = tagged;
  c.apply_overrides({"algorithm.use_pf_ppo=false"});
  compute_advantage(plain, c.algorithm);
  auto rows = row_of(g);
  for (std::int64_t i = 0; i < f.B; ++i)
    for (std::int64_t t = 0; t < f.T; ++t)
      REQUIRE(g.tensor("advantages").span<float>()[i * f.T + t] == plain.tensor("advantages").span<float>()[rows[i] * f.T + t]);
}

TEST_CASE("compute_advantage_for_multi_trajectories: GRPO over each session's last output", "[advantage_step]") {
  fixture f;
  // two outputs per session: rows 2j (index 0) and 2j+1 (index 1) form session j of prompt q<j % 2>
  std::vector<std::string> keys;
  NonTensorColumn uid2;
  for (std::int64_t i = 0; i < f.B; ++i) {
    std::string const u = "q" + std::to_string((i / 2) % 2);
    uid2.emplace_back(u);
    keys.push_back(u + "_" + std::to_string(i / 2) + "_" + std::to_string(i % 2));
  }
  DataProto m = f.batch;
  m.set_non_tensor("uid", uid2);
  std::vector<std::int64_t> last;
  for (std::int64_t i = 1; i < f.B; i += 2) last.push_back(i);
  DataProto sub = m.index(last);
  compute_advantage(sub, algo("grpo"));
  DataProto gae = m;
  compute_advantage_for_multi_trajectories(m, keys, algo("grpo"));
  auto sa = sub.tensor("advantages").span<float>();
  auto ma = m.tensor("advantages").span<float>();
  for (std::int64_t i = 0; i < f.B; ++i) {
    float const want = sa[static_cast<std::size_t>((i / 2) * f.T)];  // first token is always valid here
    for (std::int64_t t = 0; t < f.T; ++t) REQUIRE(ma[i * f.T + t] == (f.imask[i * f.T + t] ? want : 0.0f));
  }
  same(m.tensor("returns"), std::vector<float>(ma.begin(), ma.end()));
  // other estimators: compute_advantage unchanged
  DataProto plain = gae;
  compute_advantage_for_multi_trajectories(gae, keys, algo("gae"));
  compute_advantage(plain, algo("gae"));
  same(gae.tensor("advantages"), std::vector<float>(plain.tensor("advantages").span<float>().begin(),
                                                    plain.tensor("advantages").span<float>().end()));
  keys[3] = "nokey";
  DataProto bad = f.batch;
  CHECK_THROWS_AS(compute_advantage_for_multi_trajectories(bad, keys, algo("grpo")), value_error);
}

TEST_CASE("a response_mask of another dtype is converted once at the boundary: every output equals the int32 mask's bit for bit",
          "[advantage_step][mask]") {
  // Inside rlflow the mask is verl's int32 column, read in place; a custom driver's batch may carry
  // int64, uint8, bool or float32 (nonzero = valid, whatever the value).
  auto with_mask = [](DataProto b, DType dt, std::vector<std::int32_t> const& im) {
    Shape const shape = b.tensor("response_mask").shape();
    Tensor m = Tensor::empty(dt, shape);
    for (std::size_t q = 0; q < im.size(); ++q) {
      switch (dt) {
        case DType::int64: m.span<std::int64_t>()[q] = im[q] ? 3 : 0; break;
        case DType::uint8: m.span<std::uint8_t>()[q] = im[q] ? 9 : 0; break;
        case DType::bool_: m.span<bool>()[q] = im[q] != 0; break;
        case DType::float32: m.span<float>()[q] = im[q] ? 0.25f : 0.0f; break;
        default: FAIL("unexpected dtype");
      }
    }
    b.set_tensor("response_mask", m);
    return b;
  };
  for (unsigned seed = 1; seed <= 4; ++seed) {
    fixture f(seed);
    for (std::string est : {"gae", "grpo", "gdpo", "grpo_passk", "rloo", "rloo_vectorized", "opo", "gpg", "reinforce_plus_plus",
                            "reinforce_plus_plus_baseline", "optimal_token_baseline", "tir_optimal_token_baseline"}) {
      TrainerConfig c;
      c.apply_overrides({"algorithm.adv_estimator=" + est, "algorithm.use_kl_in_reward=true", "algorithm.kl_penalty=low_var_kl",
                         "algorithm.rollout_correction.rollout_is=token", "algorithm.rollout_correction.rollout_rs=token_k1",
                         "algorithm.rollout_correction.rollout_rs_threshold=1.05", "algorithm.gdpo_reward_keys=[format_reward,accuracy_reward]"});
      KLInRewardController kl0(c.algorithm);
      DataProto want = f.batch;
      Metrics const mw = compute_advantage_step(want, c, kl0);
      for (DType dt : {DType::int64, DType::uint8, DType::bool_, DType::float32}) {
        INFO("seed " << seed << ", " << est << ", mask dtype " << dtype_name(dt));
        KLInRewardController kl(c.algorithm);
        DataProto got = with_mask(f.batch, dt, f.imask);
        Metrics const mg = compute_advantage_step(got, c, kl);
        CHECK(mg == mw);
        for (std::string key : {"token_level_rewards", "advantages", "returns", "rollout_is_weights"}) {
          INFO(key);
          REQUIRE(got.has_tensor(key));
          auto a = got.tensor(key).span<float>();
          auto w = want.tensor(key).span<float>();
          REQUIRE(a.size() == w.size());
          CHECK(std::equal(a.begin(), a.end(), w.begin()));
        }
        // the rejection mask the rollout correction writes back is int32 again
        REQUIRE(got.tensor("response_mask").dtype() == DType::int32);
        auto gm = got.tensor("response_mask").span<std::int32_t>();
        auto wm = want.tensor("response_mask").span<std::int32_t>();
        CHECK(std::equal(gm.begin(), gm.end(), wm.begin(), wm.end()));
      }
    }
  }
  fixture f;
  DataProto b = f.batch;
  b.set_tensor("response_mask", Tensor::zeros(DType::bfloat16, Shape{f.B, f.T}));
  CHECK_THROWS_WITH(compute_advantage(b, algo("grpo")), Catch::Contains("response_mask has dtype bfloat16") && Catch::Contains("int32"));
}

}  // namespace test_advantage_step
