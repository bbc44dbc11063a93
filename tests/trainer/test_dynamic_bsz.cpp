// tests/trainer/test_dynamic_bsz.cpp <-> include/rlflow/roles/setup.hpp (micro_batches,
// karmarkar_karp, for_each_mini_batch), roles/actor_rollout_ref.hpp and roles/critic.hpp
// (use_dynamic_bsz, use_remove_padding): the gradient of a mini-batch does not depend on how it is
// cut into micro-batches (one, fixed counts, one row each, token budgets) for every loss_agg_mode,
// padded or packed; packed gradients and log-probs equal the padded ones; token-budget sets cover
// the rows once, respect the budget and balance.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <rlflow/roles/actor_rollout_ref.hpp>
#include <rlflow/roles/critic.hpp>

namespace test_dynamic_bsz {

using namespace rlflow;

namespace {

constexpr int P = 6, R = 10;

//! rows of [left-padded prompt | right-padded response] with heavy-tailed response lengths (most
//! short, a few full), as a generation returns them.
DataProto random_batch(std::mt19937& g, int B, int V) {
  Tensor ids = Tensor::empty(DType::int32, Shape{B, P + R}), am = Tensor::empty(DType::int32, Shape{B, P + R});
  Tensor resp = Tensor::empty(DType::int32, Shape{B, R}), rm = Tensor::empty(DType::int32, Shape{B, R});
  std::uniform_int_distribution<int> tok(0, V - 1), plen(1, P);
  std::exponential_distribution<double> tail(0.5);
  for (int b = 0; b < B; ++b) {
    int const pl = plen(g), rl = std::clamp(1 + int(tail(g)), 1, R);
    for (int t = 0; t < P + R; ++t) {
      bool const real = (t < P && t >= P - pl) || (t >= P && t < P + rl);
      ids.at<std::int32_t>(b, t) = tok(g);
      am.at<std::int32_t>(b, t) = real;
      if (t >= P) resp.at<std::int32_t>(b, t - P) = ids.at<std::int32_t>(b, t), rm.at<std::int32_t>(b, t - P) = real;
    }
  }
  return DataProto::from_dict({{"input_ids", ids}, {"attention_mask", am}, {"responses", resp}, {"response_mask", rm}});
}

TrainerConfig base_config(int rows, std::string_view agg) {
  TrainerConfig c;
  c.data.max_prompt_length = P;
  c.data.max_response_length = R;
  c.data.train_batch_size = rows;
  c.actor_rollout_ref.rollout.n = 1;
  auto& a = c.actor_rollout_ref.actor;
  a.ppo_mini_batch_size = rows;
  a.ppo_epochs = 1;
  a.shuffle = false;
  a.loss_agg_mode = agg;
  a.entropy_coeff = 0.01;
  a.use_kl_loss = true;
  a.kl_loss_coef = 0.1;
  a.grad_clip = 1.0;
  c.critic.ppo_mini_batch_size = rows;
  return c;
}

roles::RoleSetup setup_of(TrainerConfig const& c, model::Arch arch) {
  roles::RoleSetup s;
  s.cfg = c;
  s.alphabet = "abcdefghijklmnopq";
  s.policy_model.vocab_size = 19;
  s.policy_model.max_seq_len = P + R;
  s.policy_model.n_layer = 2;
  s.policy_model.n_head = 4;
  s.policy_model.n_embd = 32;
  s.policy_model.seed = 3;
  s.policy_model.arch = arch;
  if (arch != model::Arch::gpt2) s.policy_model.n_kv_head = 2, s.policy_model.intermediate_size = 48;
  s.policy_model.qkv_bias = arch == model::Arch::qwen2;
  s.critic_model = s.policy_model;
  s.critic_model.value_head = true;
  s.threads_per_worker = 1;
  return s;
}

//! How a mini-batch is cut.
struct Cut {
  char const* name;
  std::int64_t micro;       //!< ppo_micro_batch_size_per_gpu (0: dynamic)
  std::int64_t max_tokens;  //!< ppo_max_token_len_per_gpu when dynamic
};

void apply(TrainerConfig& c, Cut const& cut, bool packed) {
  auto& a = c.actor_rollout_ref.actor;
  a.use_dynamic_bsz = cut.micro == 0;
  c.actor_rollout_ref.rollout.log_prob_use_dynamic_bsz = cut.micro == 0;
  if (cut.micro > 0) a.ppo_micro_batch_size_per_gpu = cut.micro, c.critic.ppo_micro_batch_size_per_gpu = cut.micro;
  a.ppo_max_token_len_per_gpu = cut.max_tokens;
  c.actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu = cut.max_tokens;
  c.actor_rollout_ref.ref.log_prob_max_token_len_per_gpu = cut.max_tokens;
  c.critic.use_dynamic_bsz = cut.micro == 0;
  c.critic.ppo_max_token_len_per_gpu = cut.max_tokens;
  c.actor_rollout_ref.model.use_remove_padding = packed;
  c.critic.model.use_remove_padding = packed;
}

//! max |a - b| <= tol * max(1, max |a|).
void require_close(std::vector<float> const& a, std::vector<float> const& b, double tol, std::string const& what) {
  REQUIRE(a.size() == b.size());
  double scale = 1.0, worst = 0.0;
  for (float x : a) scale = std::max(scale, double(std::fabs(x)));
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(double(a[i]) - double(b[i])));
  INFO(what << ": worst difference " << worst << " (scale " << scale << ")");
  REQUIRE(worst <= tol * scale);
}

std::vector<float> flat(Tensor const& t) { return {t.span<float const>().begin(), t.span<float const>().end()}; }

}  // namespace

TEST_CASE("trainer.dynamic_bsz_partitions: token-budget micro-batches cover every row once within the budget, balanced",
          "[trainer][dynamic_bsz]") {
  std::mt19937 g(GENERATE(1u, 2u, 3u, 4u, 5u));
  for (int trial = 0; trial < 40; ++trial) {
    int const B = std::uniform_int_distribution<int>(1, 24)(g);
    DataProto d = random_batch(g, B, 19);
    std::vector<std::int64_t> const len = roles::detail::row_token_counts(d);
    // the reference count: a direct sum of the mask
    for (int b = 0; b < B; ++b) {
      std::int64_t n = 0;
      for (int t = 0; t < P + R; ++t) n += d.tensor("attention_mask").at<std::int32_t>(b, t);
      REQUIRE(len[std::size_t(b)] == n);
    }
    std::int64_t const longest = *std::max_element(len.begin(), len.end());
    std::int64_t const total = std::accumulate(len.begin(), len.end(), std::int64_t{0});
    std::int64_t const budget = longest + std::uniform_int_distribution<std::int64_t>(0, 3 * (P + R))(g);
    roles::detail::MicroBatching const mb{1, budget, "k", "test"};
    auto const sets = roles::detail::micro_batches("test", d, mb);
    std::vector<int> seen(std::size_t(B), 0);
    std::int64_t mx = 0, mn = total;
    for (auto const& s : sets) {
      REQUIRE_FALSE(s.empty());
      REQUIRE(std::is_sorted(s.begin(), s.end()));
      std::int64_t sum = 0;
      for (auto i : s) ++seen[std::size_t(i)], sum += len[std::size_t(i)];
      REQUIRE(sum <= budget);
      mx = std::max(mx, sum), mn = std::min(mn, sum);
    }
    for (int x : seen) REQUIRE(x == 1);
    auto const k = std::int64_t(sets.size());
    REQUIRE(k >= (total + budget - 1) / budget);  // no fewer sets than the tokens need
    // balanced: the fullest set exceeds the mean by less than one row
    REQUIRE(double(mx) <= double(total) / double(k) + double(longest));
    // Karmarkar-Karp into k sets directly: every index once, spread within the longest row
    auto const kk = roles::detail::karmarkar_karp(len, k);
    std::vector<int> once(std::size_t(B), 0);
    for (auto const& s : kk)
      for (auto i : s) ++once[std::size_t(i)];
    for (int x : once) REQUIRE(x == 1);
  }
}

TEST_CASE("trainer.dynamic_bsz_rejects: a row longer than the token budget names the key and the numbers", "[trainer][dynamic_bsz]") {
  std::mt19937 g(9);
  DataProto d = random_batch(g, 6, 19);
  auto const len = roles::detail::row_token_counts(d);
  auto const at = std::max_element(len.begin(), len.end()) - len.begin();
  roles::detail::MicroBatching const mb{1, len[std::size_t(at)] - 1, "actor_rollout_ref.actor.ppo_max_token_len_per_gpu", "who"};
  REQUIRE_THROWS_AS(roles::detail::micro_batches("who", d, mb), config_error);
  REQUIRE_THROWS_WITH(roles::detail::micro_batches("who", d, mb),
                      Catch::Contains("actor_rollout_ref.actor.ppo_max_token_len_per_gpu=" + std::to_string(len[std::size_t(at)] - 1)) &&
                          Catch::Contains(std::to_string(len[std::size_t(at)]) + " tokens"));
}

TEST_CASE("trainer.dynamic_bsz_actor_grads: the actor's gradient is the same for every cut of the mini-batch, padded or packed",
          "[trainer][dynamic_bsz]") {
  std::string const agg = GENERATE("token-mean", "token-sum", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm");
  model::Arch const arch = GENERATE(model::Arch::gpt2, model::Arch::qwen2);
  INFO("loss_agg_mode " << agg << ", arch " << model::arch_name(arch));
  int const rows = 8;
  std::mt19937 g(17);
  DataProto data = random_batch(g, rows, 19);
  // old and reference log-probs near the current policy's (some ratios clip), advantages random
  WorkerContext ctx;
  {
    TrainerConfig c0 = base_config(rows, agg);
    apply(c0, {"one", rows, 0}, false);
    roles::ActorRolloutRef probe(ctx, setup_of(c0, arch));
    Tensor lp = probe.compute_log_prob(data).tensor("old_log_probs");
    Tensor old = Tensor::empty(DType::float32, Shape{rows, R}), ref = Tensor::empty(DType::float32, Shape{rows, R});
    Tensor adv = Tensor::empty(DType::float32, Shape{rows, R});
    std::normal_distribution<float> n(0.0f, 1.0f);
    for (std::int64_t i = 0; i < std::int64_t(rows) * R; ++i) {
      old.data<float>()[i] = lp.data<float>()[i] + 0.3f * n(g);
      ref.data<float>()[i] = lp.data<float>()[i] + 0.2f * n(g);
      adv.data<float>()[i] = n(g);
    }
    data.set_tensor("old_log_probs", old);
    data.set_tensor("ref_log_prob", ref);
    data.set_tensor("advantages", adv);
  }
  auto const len = roles::detail::row_token_counts(data);
  std::int64_t const longest = *std::max_element(len.begin(), len.end());
  Cut const cuts[] = {{"one micro-batch", rows, 0}, {"2 rows", 2, 0},           {"1 row each", 1, 0},
                      {"tight token budget", 0, longest}, {"token budget 2x", 0, 2 * longest}, {"budget of all", 0, 100000}};
  for (bool const packed : {false, true}) {
    std::vector<float> ref_grads, ref_lp;
    for (Cut const& cut : cuts) {
      INFO("cut " << cut.name << (packed ? ", packed" : ", padded"));
      TrainerConfig c = base_config(rows, agg);
      apply(c, cut, packed);
      roles::ActorRolloutRef role(ctx, setup_of(c, arch));
      std::vector<float> const lp = flat(role.compute_log_prob(data).tensor("old_log_probs"));
      auto const m = role.update_actor(data);
      REQUIRE(m.at("actor/grad_norm").size() == 1);
      std::vector<float> const grads = role.actor_grads();
      if (ref_grads.empty()) {
        ref_grads = grads;
        ref_lp = lp;
        double norm = 0;
        for (float x : grads) norm += double(x) * x;
        REQUIRE(norm > 0);
        continue;
      }
      require_close(ref_lp, lp, 1e-6, "log-probs");
      require_close(ref_grads, grads, 1e-6, "gradients");
    }
    if (!packed) continue;
    // packed against padded, both with one micro-batch: log-probs at the scored tokens and gradients (1e-5)
    TrainerConfig cp = base_config(rows, agg), cq = cp;
    apply(cp, cuts[0], false);
    apply(cq, cuts[0], true);
    roles::ActorRolloutRef padded(ctx, setup_of(cp, arch)), pk(ctx, setup_of(cq, arch));
    std::vector<float> const la = flat(padded.compute_log_prob(data).tensor("old_log_probs"));
    std::vector<float> const lb = flat(pk.compute_log_prob(data).tensor("old_log_probs"));
    auto const rm = data.tensor("response_mask").span<std::int32_t const>();
    for (std::size_t i = 0; i < la.size(); ++i)
      if (rm[i]) REQUIRE(std::fabs(la[i] - lb[i]) <= 1e-5 * std::max(1.0f, std::fabs(la[i])));
    padded.update_actor(data);
    pk.update_actor(data);
    require_close(padded.actor_grads(), pk.actor_grads(), 1e-5, "packed vs padded gradients");
  }
}

TEST_CASE("trainer.dynamic_bsz_critic_grads: the critic's gradient is the same for every cut, padded or packed",
          "[trainer][dynamic_bsz]") {
  std::string const agg = GENERATE("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm");
  int const rows = 8;
  std::mt19937 g(23);
  DataProto data = random_batch(g, rows, 19);
  Tensor values = Tensor::empty(DType::float32, Shape{rows, R}), returns = Tensor::empty(DType::float32, Shape{rows, R});
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (std::int64_t i = 0; i < std::int64_t(rows) * R; ++i) values.data<float>()[i] = 0.3f * n(g), returns.data<float>()[i] = n(g);
  data.set_tensor("values", values);
  data.set_tensor("returns", returns);
  auto const len = roles::detail::row_token_counts(data);
  std::int64_t const longest = *std::max_element(len.begin(), len.end());
  WorkerContext ctx;
  std::vector<float> padded_ref;
  for (bool const packed : {false, true}) {
    std::vector<float> ref_grads;
    for (Cut const& cut : {Cut{"one", rows, 0}, Cut{"1 row each", 1, 0}, Cut{"tight budget", 0, longest}}) {
      INFO("cut " << cut.name << (packed ? ", packed" : ", padded") << ", " << agg);
      TrainerConfig c = base_config(rows, agg);
      c.algorithm.adv_estimator = "gae";
      apply(c, cut, packed);
      roles::ValueCritic critic(ctx, setup_of(c, model::Arch::gpt2));
      critic.update_critic(data);
      std::vector<float> const grads = critic.critic_grads();
      if (ref_grads.empty()) ref_grads = grads;
      else require_close(ref_grads, grads, 1e-6, "critic gradients");
    }
    if (!packed) padded_ref = ref_grads;
    else require_close(padded_ref, ref_grads, 1e-5, "packed vs padded critic gradients");
  }
}

}  // namespace test_dynamic_bsz
