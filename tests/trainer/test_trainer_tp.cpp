// Tests for TP<N> in the Trainer: the headline type compiles as written; TP<2> / TP<4> training
// equals TP<1> (final weights within 1e-4 relative, every non-timing metric within the same
// tolerance); after every step each rollout rank's shard equals its slice of the actor's weights
// bit for bit (the slice cut here by tensor name, independently of ShardLayout); replicas and
// errors before work agree with the planner.
#include <catch2/catch.hpp>

#include <rlflow/config/planner.hpp>
#include <rlflow/trainer/trainer.hpp>

#include <chrono>
#include <cmath>
#include <csignal>
#include <random>
#include <filesystem>
#include <thread>
#include <sys/wait.h>
#include <unistd.h>

#include "fixtures.hpp"
#include "trainer/trainer_fixtures.hpp"

namespace test_trainer_tp {

using namespace rlflow;
namespace fs = std::filesystem;

namespace {
using rlflow::testing::quiet;
using rlflow::testing::close;
using rlflow::testing::rel_l2;

TrainerConfig tp_config(char const* name, int workers) {
  TrainerConfig c = examples::reverse_base_config();
  c.data.train_batch_size = 8;
  c.actor_rollout_ref.actor.ppo_mini_batch_size = 4;
  c.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 4;  // divides the per-rank mini-batch on 2 and 4 workers
  c.actor_rollout_ref.actor.optim.lr = 3e-3;
  c.actor_rollout_ref.rollout.n = 4;
  c.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 16;
  c.actor_rollout_ref.model.n_embd = 32;
  c.actor_rollout_ref.model.n_head = 4;
  c.trainer.n_gpus_per_node = workers;
  c.trainer.total_training_steps = 20;
  auto dir = fs::temp_directory_path() / (std::string("rlflow_tp_") + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  c.trainer.default_local_dir = dir.string().c_str();
  return c;
}

using rlflow::testing::task;

model::GPTConfig policy_of(TrainerConfig const& c) {
  return fixtures::policy_gpt(c, model::CharTokenizer(task.charset()).vocab_size());
}

//! TP rank r of N's expected weights: in ParamLayout order, the sharded tensors (attention
//! c_attn weight / bias, attention c_proj weight, MLP c_fc weight / bias, MLP c_proj weight, all
//! stored with the split axis first) cut to rows [r D / N, (r + 1) D / N) of their D rows, every
//! other tensor whole; 'split_wte' (the vocabulary-parallel head): wte too, followed by zero rows
//! up to ceil(V / N) rows.
std::vector<float> expected_shard(model::GPTConfig const& cfg, std::vector<float> const& full, int r, int N, bool split_wte) {
  std::vector<float> out;
  model::ParamLayout const lay(cfg);
  REQUIRE(full.size() == lay.size());
  for (auto const& t : lay.tensors()) {
    bool const sharded = t.name.ends_with("attn.c_attn.weight") || t.name.ends_with("attn.c_attn.bias") ||
                         t.name.ends_with("attn.c_proj.weight") || t.name.ends_with("mlp.c_fc.weight") ||
                         t.name.ends_with("mlp.c_fc.bias") || t.name.ends_with("mlp.c_proj.weight") ||
                         (split_wte && t.name == "wte");
    std::size_t b = 0, e = t.numel;
    if (sharded) {
      std::size_t const rows = std::size_t(t.shape[0]), row = t.numel / rows;
      b = rows * std::size_t(r) / std::size_t(N) * row;
      e = rows * std::size_t(r + 1) / std::size_t(N) * row;
    }
    out.insert(out.end(), full.begin() + std::ptrdiff_t(t.offset + b), full.begin() + std::ptrdiff_t(t.offset + e));
    if (split_wte && t.name == "wte") {
      std::size_t const rows = std::size_t(t.shape[0]), row = t.numel / rows, widest = (rows + std::size_t(N) - 1) / std::size_t(N);
      out.insert(out.end(), widest * row - (e - b), 0.0f);
    }
  }
  return out;
}

//! Every rollout rank's weights equal its slice of the actor's weights, bit for bit ('split_wte':
//! the rollout's head is vocabulary-parallel, so it holds its wte rows only).
template <class T>
void require_synced(T& t, int N, bool split_wte = false) {
  auto const actor = t.actor_weights();
  auto const per_rank = t.actor_rollout_wg().template call<&T::actor_role::rollout_weights>();
  model::GPTConfig cfg = policy_of(t.config());
  cfg.vocab_size = t.tokenizer().vocab_size();  // a test may pass a wider alphabet than the task's
  REQUIRE(per_rank.size() == std::size_t(t.config().world_size()));
  for (std::size_t rank = 0; rank < per_rank.size(); ++rank) {
    INFO("rank " << rank);
    REQUIRE(per_rank[rank] == expected_shard(cfg, actor, int(rank) % N, N, split_wte));
  }
}


//! steps of TP<N> against TP<1> on 'workers' workers: metrics every step, shards every step, weights at the end.
template <int N>
void compare_with_tp1(int workers, int steps) {
  using T1 = Trainer<Colocate<3>, GRPO, TP<1>>;
  using TN = Trainer<Colocate<3>, GRPO, TP<N>>;
  auto c1 = tp_config("one", workers), cn = tp_config("many", workers);
  c1.trainer.total_training_steps = cn.trainer.total_training_steps = steps;
  auto data = task.make_dataset(256, 9);
  T1 a(c1, data, task.charset(), quiet());
  TN b(cn, data, task.charset(), quiet());
  REQUIRE(b.rollout_replicas() == workers / N);
  REQUIRE(plan(b.config()).rollout_replicas == b.rollout_replicas());
  require_synced(b, N);  // the initial sync (constructor)
  for (int s = 0; s < steps; ++s) {
    Metrics const ma = a.step(), mb = b.step();
    for (auto const& [k, v] : ma) {
      if (k.rfind("timing_s/", 0) == 0 || k.rfind("perf/", 0) == 0) continue;
      INFO("step " << s + 1 << " metric " << k << ": " << mb.at(k) << " vs " << v);
      REQUIRE(mb.count(k) == 1);
      if (std::isnan(v)) REQUIRE(std::isnan(mb.at(k)));
      else REQUIRE(close(mb.at(k), v, 1e-4));
    }
    REQUIRE(mb.count("timing_s/update_weights") == 1);
    require_synced(b, N);
  }
  auto const wa = a.actor_weights(), wb = b.actor_weights();
  rlflow::testing::require_weights_close(wa, wb, c1.actor_rollout_ref.actor.optim.lr, steps);
}
}  // namespace

TEST_CASE("the headline type Trainer<Colocate<3>, GRPO, TP<2>> compiles as written", "[trainer][tp]") {
  using T = rlflow::Trainer<rlflow::Colocate<3>, rlflow::GRPO, rlflow::TP<2>>;
  STATIC_REQUIRE(T::parallel::size == 2);
  STATIC_REQUIRE(T::actor_role::rollout_tp == 2);
  STATIC_REQUIRE(std::is_same_v<T::reward_role, roles::DefaultReward>);
  REQUIRE(describe<T>() == "Trainer<GRPO, Colocate<3>, TP<2>> backend=cpu roles=actor_rollout_ref,reward");
}

TEST_CASE("TP<2> trains as TP<1> for 20 steps, and the replica's shards follow the actor", "[trainer][tp]") {
  compare_with_tp1<2>(2, 20);
}

TEST_CASE("TP<2> with two replicas and TP<4> with one equal TP<1> on 4 workers", "[trainer][tp]") {
  compare_with_tp1<2>(4, 4);
  compare_with_tp1<4>(4, 4);
}

TEST_CASE("TP<N> the devices or the heads cannot take is an error before work", "[trainer][tp]") {
  auto data = task.make_dataset(64, 1);
  SECTION("TP does not divide the workers") {
    auto c = tp_config("bad_ws", 2);
    c.trainer.n_gpus_per_node = 6;
    REQUIRE_THROWS_WITH((Trainer<GRPO, TP<4>>(c, data, task.charset(), quiet())),
                        Catch::Contains("6 workers") && Catch::Contains("replicas of 4") && Catch::Contains("multiple of 4"));
  }
  SECTION("more TP ranks than heads") {
    auto c = tp_config("bad_heads", 4);
    c.actor_rollout_ref.model.n_head = 2;
    REQUIRE_THROWS_WITH((Trainer<GRPO, TP<4>>(c, data, task.charset(), quiet())),
                        Catch::Contains("more ranks than") && Catch::Contains("n_head = 2"));
  }
  SECTION("more TP ranks than devices") {
    auto c = tp_config("bad_dev", 2);
    REQUIRE_THROWS_WITH((Trainer<GRPO, TP<4>>(c, data, task.charset(), quiet())),
                        Catch::Contains("2 workers") && Catch::Contains("replicas of 4"));
  }
  SECTION("training TP that does not divide the heads or the workers names the numbers") {
    auto c = tp_config("train_tp", 2);
    c.actor_rollout_ref.actor.megatron.tensor_model_parallel_size = 3;
    REQUIRE_THROWS_WITH((Trainer<GRPO, TP<2>>(c, data, task.charset(), quiet())),
                        Catch::Contains("tensor_model_parallel_size=3") && Catch::Contains("n_head=4"));
    c.actor_rollout_ref.actor.megatron.tensor_model_parallel_size = 4;  // divides 4 heads, not 2 devices
    REQUIRE_THROWS_WITH((Trainer<GRPO, TP<2>>(c, data, task.charset(), quiet())),
                        Catch::Contains("tensor_model_parallel_size=4") && Catch::Contains("= 2 devices"));
  }
}

namespace {
//! A random batch of 'rows' responses for compute_log_prob: prompt P, response R, some left padding.
DataProto random_scoring_batch(int rows, int P, int R, int vocab, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  Tensor ids = Tensor::empty(DType::int32, Shape{rows, P + R}), am = Tensor::empty(DType::int32, Shape{rows, P + R});
  Tensor resp = Tensor::empty(DType::int32, Shape{rows, R});
  for (int i = 0; i < rows; ++i) {
    int const pad = int(rng() % std::uint64_t(P - 1));
    for (int t = 0; t < P + R; ++t) {
      ids.at<std::int32_t>(i, t) = t < pad ? 0 : std::int32_t(rng() % std::uint64_t(vocab));
      am.at<std::int32_t>(i, t) = t < pad ? 0 : 1;
    }
    for (int t = 0; t < R; ++t) resp.at<std::int32_t>(i, t) = ids.at<std::int32_t>(i, P + t);
  }
  return DataProto::from_dict({{"input_ids", ids}, {"attention_mask", am}, {"responses", resp}});
}


//! 'steps' steps of Trainer<GRPO, TP<RolloutN>> with training TP = 'train_tp' on dp * train_tp
//! workers against Trainer<GRPO, TP<RolloutA>> with training TP = 1 on dp workers (the same DP
//! size, so the same mini-batches; seed 'seed'): every non-timing metric within 1e-4 relative at
//! every step; the gathered actor weights equal on every rank (bit for bit) and within 1e-4 of
//! TP = 1's; the rollout shards equal the actor's slices bit for bit after every sync;
//! compute_log_prob / compute_ref_log_prob of a random batch within 1e-5 before training (the same
//! weights) and within 1e-4 after (the actor's weights then differ by rounding).
//! 'charset': the tokenizer's alphabet (the task's by default; a wider one widens the vocabulary).
//! 'lm_head': actor_rollout_ref.model.lm_head of the TP run; every rank's engines must use the
//! head it names (auto: vocabulary-parallel from 256 tokens), the rollout's only when RolloutN > 1.
template <int RolloutA, int RolloutN>
void compare_training_tp(int dp, int train_tp, int steps, std::int64_t seed, std::string const& charset = task.charset(),
                         char const* lm_head = "auto") {
  using TA = Trainer<Colocate<3>, GRPO, TP<RolloutA>>;
  using T = Trainer<Colocate<3>, GRPO, TP<RolloutN>>;
  int const workers = dp * train_tp;
  auto c1 = tp_config("ttp_one", dp), cn = tp_config("ttp_many", workers);
  c1.trainer.total_training_steps = cn.trainer.total_training_steps = steps;
  c1.seed = cn.seed = seed;
  cn.actor_rollout_ref.actor.megatron.tensor_model_parallel_size = train_tp;
  cn.actor_rollout_ref.model.lm_head = lm_head;
  auto data = task.make_dataset(256, std::uint64_t(seed));
  TA a(c1, data, charset, quiet());
  T b(cn, data, charset, quiet());
  REQUIRE(b.actor_rollout_wg().world_size() == workers);
  for (int t : b.actor_rollout_wg().template call<&T::actor_role::training_tp>()) REQUIRE(t == train_tp);
  for (int t : a.actor_rollout_wg().template call<&TA::actor_role::training_tp>()) REQUIRE(t == 1);
  std::string const h = lm_head;
  std::int64_t const vp = h == "vocab_parallel" || (h == "auto" && b.tokenizer().vocab_size() >= model::training_vocab_parallel_min_vocab) ? 1 : 0;
  std::vector<std::int64_t> const want{vp, vp, RolloutN > 1 ? vp : 0};  // actor, reference, rollout
  for (auto const& heads : b.actor_rollout_wg().template call<&T::actor_role::lm_heads>()) REQUIRE(heads == want);
  bool const split_wte = RolloutN > 1 && vp == 1;
  require_synced(b, RolloutN, split_wte);  // the constructor's sync
  // compute_log_prob (log-probs, entropies) and compute_ref_log_prob of a random batch
  int const R = int(cn.data.max_response_length), P = int(cn.data.max_prompt_length);
  DataProto const batch = random_scoring_batch(2 * workers, P, R, b.tokenizer().vocab_size(), std::uint64_t(seed) + 7);
  auto check_log_probs = [&](double tol) {
    DataProto const la = a.actor_rollout_wg().template call<&TA::actor_role::compute_log_prob>(batch);
    DataProto const lb = b.actor_rollout_wg().template call<&T::actor_role::compute_log_prob>(batch);
    DataProto const ra = a.actor_rollout_wg().template call<&TA::actor_role::compute_ref_log_prob>(batch);
    DataProto const rb = b.actor_rollout_wg().template call<&T::actor_role::compute_ref_log_prob>(batch);
    for (auto const* key : {"old_log_probs", "entropys"}) {
      auto const x = la.tensor(key).template span<float>(), y = lb.tensor(key).template span<float>();
      REQUIRE(x.size() == y.size());
      for (std::size_t i = 0; i < x.size(); ++i) {
        INFO(key << "[" << i << "]: " << y[i] << " vs " << x[i] << ", tolerance " << tol);
        REQUIRE(close(y[i], x[i], tol));
      }
    }
    auto const x = ra.tensor("ref_log_prob").template span<float>(), y = rb.tensor("ref_log_prob").template span<float>();
    REQUIRE(x.size() == y.size());
    for (std::size_t i = 0; i < x.size(); ++i) REQUIRE(close(y[i], x[i], 1e-5));  // the reference never trains
  };
  check_log_probs(1e-5);  // the same initial weights: the sharded forward against the unsharded one
  for (int s = 0; s < steps; ++s) {
    Metrics const ma = a.step(), mb = b.step();
    for (auto const& [k, v] : ma) {
      if (k.rfind("timing_s/", 0) == 0 || k.rfind("perf/", 0) == 0) continue;
      INFO("step " << s + 1 << " metric " << k << ": " << mb.at(k) << " vs " << v);
      REQUIRE(mb.count(k) == 1);
      if (std::isnan(v)) REQUIRE(std::isnan(mb.at(k)));
      else REQUIRE(close(mb.at(k), v, 1e-4));
    }
    require_synced(b, RolloutN, split_wte);
  }
  // every rank of every TP group gathers the same full weights (replicated tensors kept identical)
  auto const per_rank = b.actor_rollout_wg().template call<&T::actor_role::gather_actor_weights>();
  auto const wa = a.actor_weights(), wb = b.actor_weights();
  rlflow::testing::require_tp_weights_match(per_rank, wa, wb, c1.actor_rollout_ref.actor.optim.lr, steps);
  check_log_probs(1e-4);  // after training: the weights differ by rounding (within 1e-4 above)
}
}  // namespace

TEST_CASE("training TP = 2 trains as TP = 1 (rollout TP<1>: the shards are gathered for the sync)", "[trainer][tp][train_tp]") {
  std::int64_t const seed = GENERATE(take(2, random(1, 1000000)));
  INFO("seed " << seed);
  compare_training_tp<1, 1>(1, 2, 5, seed);
}

TEST_CASE("training TP equal to the rollout's hands each shard over directly, other TPs gather", "[trainer][tp][train_tp]") {
  std::int64_t const seed = GENERATE(take(1, random(1, 1000000)));
  INFO("seed " << seed);
  SECTION("training TP 2 x DP 2, rollout TP<2>: load_shard into the shared replicas") { compare_training_tp<2, 2>(2, 2, 4, seed); }
  SECTION("training TP 4 x DP 1, rollout TP<2>") { compare_training_tp<1, 2>(1, 4, 3, seed); }
  SECTION("training TP 2 x DP 2, rollout TP<4>") { compare_training_tp<1, 4>(2, 2, 3, seed); }
}

TEST_CASE("training TP = 2 with a 256-token vocabulary: the vocabulary-parallel LM heads (training and rollout TP<2>) train as TP = 1",
          "[trainer][tp][train_tp][vocab_parallel]") {
  std::int64_t const seed = GENERATE(take(1, random(1, 1000000)));
  INFO("seed " << seed);
  // the task's alphabet plus bytes it never uses, up to 253 characters (+ pad, bos, eos = 256)
  std::string wide = task.charset();
  for (int c = 1; c < 256 && wide.size() < 253; ++c)
    if (wide.find(char(c)) == std::string::npos) wide.push_back(char(c));
  int const V = model::CharTokenizer(wide).vocab_size();
  REQUIRE(V == 256);
  // both defaults switch to the vocabulary-parallel head at this size (model::GPT, RolloutEngine)
  REQUIRE(V >= model::training_vocab_parallel_min_vocab);
  REQUIRE(V >= engine::vocab_parallel_min_vocab);
  compare_training_tp<1, 2>(1, 2, 4, seed, wide);
}

TEST_CASE("actor_rollout_ref.model.lm_head picks the LM head under TP, and both heads train as TP = 1",
          "[trainer][tp][train_tp][vocab_parallel]") {
  std::int64_t const seed = GENERATE(take(1, random(1, 1000000)));
  INFO("seed " << seed);
  SECTION("vocab_parallel on the task's small vocabulary (auto: replicated), training TP 2 and rollout TP<2>") {
    REQUIRE(model::CharTokenizer(task.charset()).vocab_size() < engine::vocab_parallel_min_vocab);
    compare_training_tp<1, 2>(1, 2, 4, seed, task.charset(), "vocab_parallel");
  }
  SECTION("replicated on 256 tokens (auto: vocabulary-parallel)") {
    std::string wide = task.charset();
    for (int c = 1; c < 256 && wide.size() < 253; ++c)
      if (wide.find(char(c)) == std::string::npos) wide.push_back(char(c));
    compare_training_tp<1, 2>(1, 2, 3, seed, wide, "replicated");
  }
}

TEST_CASE("actor_rollout_ref.model.lm_head: a bad value, too few vocabulary rows, or no TP", "[trainer][tp][vocab_parallel]") {
  auto c = tp_config("lm_head_errors", 1);
  REQUIRE_THROWS_WITH(c.apply_overrides({"actor_rollout_ref.model.lm_head=vocab"}),
                      Catch::Contains("actor_rollout_ref.model.lm_head") && Catch::Contains("vocab_parallel") &&
                          Catch::Contains("replicated"));
  // training TP 8 over a 4-token vocabulary (one character + pad, bos, eos): an error before work
  auto e = tp_config("lm_head_rows", 8);
  e.actor_rollout_ref.model.n_head = 8;
  e.actor_rollout_ref.actor.megatron.tensor_model_parallel_size = 8;
  e.actor_rollout_ref.model.lm_head = "vocab_parallel";
  auto data = task.make_dataset(64, 1);
  REQUIRE_THROWS_WITH((Trainer<Colocate<3>, GRPO, TP<1>>(e, data, "a", quiet())),
                      Catch::Contains("actor_rollout_ref.model.lm_head=vocab_parallel") && Catch::Contains("4 vocabulary rows") &&
                          Catch::Contains("8 ranks") && Catch::Contains("lm_head=replicated"));
  // without tensor parallelism the key changes nothing: a warning, and the run trains
  auto w = tp_config("lm_head_warn", 1);
  w.actor_rollout_ref.model.lm_head = "replicated";
  w.trainer.total_training_steps = 1;
  Trainer<Colocate<3>, GRPO, TP<1>> t(w, task.make_dataset(64, 2), task.charset(), quiet());
  bool warned = false;
  for (auto const& m : t.startup_warnings()) warned = warned || m.find("actor_rollout_ref.model.lm_head=replicated has no effect") != std::string::npos;
  REQUIRE(warned);
  t.step();
}

// The async modes under training TP: tests/trainer/test_trainer_tp_async.cpp (test_trainer_async).

// ---- checkpoints under training TP ----------------------------------------------------------
// The file is the full model's (engine::save_checkpoint_gathered), so it is the same at every TP.

namespace {
using TTP = Trainer<Colocate<3>, GRPO, TP<1>>;

//! Every tensor (name, dtype, shape, bytes) and the metadata of two safetensors files are equal.
void require_same_file(fs::path const& a, fs::path const& b) {
  auto const fa = engine::safetensors::File::load(a), fb = engine::safetensors::File::load(b);
  REQUIRE(fa.names() == fb.names());
  REQUIRE(fa.metadata() == fb.metadata());
  for (auto const& n : fa.names()) {
    INFO("tensor " << n);
    auto const x = fa.bytes(n), y = fb.bytes(n);
    REQUIRE(fa.info(n).shape == fb.info(n).shape);
    REQUIRE(std::equal(x.begin(), x.end(), y.begin(), y.end()));
  }
}

//! A config of training TP 'train_tp' on train_tp workers (DP 1: every TP here has the same
//! mini-batches), checkpoints in 'dir'.
TrainerConfig ckpt_config(fs::path const& dir, int train_tp, std::int64_t seed) {
  auto c = tp_config("ckpt", train_tp);
  c.actor_rollout_ref.actor.megatron.tensor_model_parallel_size = train_tp;
  c.seed = seed;
  c.trainer.default_local_dir = dir.string().c_str();
  return c;
}

//! Non-timing metrics of 'got' within 'rel' of 'want' (0: equal bit for bit), the same keys.
void require_metrics(Metrics const& got, Metrics const& want, double rel) {
  std::size_t n = 0;
  for (auto const& [k, v] : want) {
    if (k.rfind("timing_s/", 0) == 0 || k.rfind("perf/", 0) == 0) continue;
    ++n;
    INFO("metric " << k << ": " << (got.count(k) ? got.at(k) : std::nan("")) << " vs " << v);
    REQUIRE(got.count(k) == 1);
    if (std::isnan(v)) REQUIRE(std::isnan(got.at(k)));
    else if (rel == 0) REQUIRE(got.at(k) == v);
    else REQUIRE(close(got.at(k), v, rel));
  }
  REQUIRE(n > 5);
}
}  // namespace

TEST_CASE("training TP = 2: a run killed with -9 resumes exactly as the uninterrupted run", "[trainer][tp][train_tp][checkpoint]") {
  std::int64_t const seed = GENERATE(take(1, random(1, 1000000)));
  INFO("seed " << seed);
  auto const killed_dir = fs::temp_directory_path() / ("rlflow_ttp_killed_" + std::to_string(::getpid()));
  fs::remove_all(killed_dir);
  auto cfg = ckpt_config(killed_dir, 2, seed);
  cfg.trainer.save_freq = 2;
  cfg.trainer.resume_mode = config_string("auto");
  cfg.trainer.total_training_steps = 100000;  // killed first
  auto data = task.make_dataset(256, std::uint64_t(seed));
  pid_t const pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    try {
      TTP t(cfg, data, task.charset(), quiet());
      t.fit();
    } catch (...) {
    }
    ::_exit(0);
  }
  // kill at a random moment after the first checkpoint (maybe while the next one is written)
  bool saved = false;
  for (int i = 0; i < 30000 && !saved; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    saved = latest_checkpoint_step(killed_dir).has_value();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(seed % 40));
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(saved);
  REQUIRE(WIFSIGNALED(status));
  std::int64_t const S = *latest_checkpoint_step(killed_dir);
  REQUIRE(S % 2 == 0);

  cfg.trainer.total_training_steps = S + 2;
  TTP resumed(cfg, data, task.charset(), quiet());
  REQUIRE(resumed.global_step() == S);
  std::vector<Metrics> after;
  for (int i = 0; i < 2; ++i) after.push_back(resumed.step());

  auto scfg = ckpt_config(killed_dir / "straight", 2, seed);
  scfg.trainer.total_training_steps = S + 2;
  TTP straight(scfg, data, task.charset(), quiet());
  std::vector<Metrics> ref;
  for (std::int64_t i = 0; i < S + 2; ++i) ref.push_back(straight.step());
  for (std::size_t i = 0; i < 2; ++i) {
    INFO("step " << S + 1 + std::int64_t(i));
    require_metrics(after[i], ref[std::size_t(S) + i], 0);
  }
  auto const per_rank = resumed.actor_rollout_wg().call<&TTP::actor_role::gather_actor_weights>();
  auto const want = straight.actor_rollout_wg().call<&TTP::actor_role::gather_actor_weights>();
  REQUIRE(per_rank.size() == 2);
  for (auto const& w : per_rank) REQUIRE(w == want[0]);
  require_synced(resumed, 1);
  fs::remove_all(killed_dir);
}

TEST_CASE("a checkpoint written at one training TP loads at another: same file back, same training", "[trainer][tp][train_tp][checkpoint]") {
  std::int64_t const seed = GENERATE(take(1, random(1, 1000000)));
  INFO("seed " << seed);
  auto const root = fs::temp_directory_path() / ("rlflow_ttp_cross_" + std::to_string(::getpid()));
  fs::remove_all(root);
  auto data = task.make_dataset(256, std::uint64_t(seed));
  std::int64_t const S = 3, more = 2;
  // the writers: training TP 2 and TP 1, each S steps then a checkpoint; TP 2 goes on S + more steps
  auto w2 = ckpt_config(root / "w2", 2, seed);
  w2.trainer.save_freq = S;
  w2.trainer.total_training_steps = S + more;
  TTP writer2(w2, data, task.charset(), quiet());
  std::vector<Metrics> ref;
  for (std::int64_t i = 0; i < S + more; ++i) ref.push_back(writer2.step());
  auto w1 = ckpt_config(root / "w1", 1, seed);
  w1.trainer.save_freq = S;
  w1.trainer.total_training_steps = S;
  TTP(w1, data, task.charset(), quiet()).fit();
  for (auto const& [from, to] : {std::pair{2, 1}, std::pair{2, 4}, std::pair{1, 2}}) {
    INFO("written at training TP " << from << ", loaded at " << to);
    fs::path const ckpt = root / (from == 2 ? "w2" : "w1") / ("global_step_" + std::to_string(S));
    auto c = ckpt_config(root / ("r" + std::to_string(from) + std::to_string(to)), to, seed);
    c.trainer.resume_mode = config_string("resume_path");
    c.trainer.resume_from_path = config_string(ckpt.string());
    c.trainer.total_training_steps = S + more;
    TTP t(c, data, task.charset(), quiet());
    REQUIRE(t.global_step() == S);
    // round trip: loaded at this TP and saved again, the actor's file is the same byte for byte
    fs::path const again = t.save_checkpoint();
    require_same_file(again / "actor.safetensors", ckpt / "actor.safetensors");
    // the rollout holds the loaded weights, and every rank gathers the same full model
    require_synced(t, 1);
    auto const per_rank = t.actor_rollout_wg().call<&TTP::actor_role::gather_actor_weights>();
    for (auto const& w : per_rank) REQUIRE(w == per_rank[0]);
    REQUIRE(per_rank[0] == engine::load_weights(ckpt / "actor.safetensors", policy_of(c)));
    if (from == 2) {  // training goes on as the writer's run (same DP size: rounding only)
      for (std::int64_t i = 0; i < more; ++i) {
        INFO("step " << S + 1 + i);
        require_metrics(t.step(), ref[std::size_t(S + i)], 1e-4);
      }
      rlflow::testing::require_weights_close(writer2.actor_weights(), t.actor_weights(), c.actor_rollout_ref.actor.optim.lr, int(S + more));
    }
  }
  fs::remove_all(root);
}

TEST_CASE("training TP: a corrupt checkpoint is an error naming the file, before anything loads", "[trainer][tp][train_tp][checkpoint]") {
  auto const dir = fs::temp_directory_path() / ("rlflow_ttp_corrupt_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  auto data = task.make_dataset(64, 1);
  auto c = ckpt_config(dir, 2, 1);
  c.trainer.save_freq = 1;
  c.trainer.total_training_steps = 1;
  TTP(c, data, task.charset(), quiet()).fit();
  REQUIRE(latest_checkpoint_step(dir) == 1);
  auto const f = dir / "global_step_1" / "actor.safetensors";
  auto bytes = rlflow::detail::read_all(f);
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x55);
  rlflow::detail::write_all(f, bytes.data(), bytes.size());
  c.trainer.resume_mode = config_string("auto");
  REQUIRE_THROWS_WITH((TTP(c, data, task.charset(), quiet())), Catch::Contains("actor.safetensors"));
  fs::remove_all(dir);
}

// ---- a critic under training TP ------------------------------------------------------------

namespace {
using PPOTP = Trainer<Colocate<3>, PPO, roles::ValueCritic>;

TrainerConfig ppo_config(fs::path const& dir, int train_tp, std::int64_t seed) {
  auto c = ckpt_config(dir, train_tp, seed);
  c.algorithm.adv_estimator = config_string("gae");
  c.critic.ppo_micro_batch_size_per_gpu = 4;
  c.critic.optim.lr = 1e-3;
  return c;
}
}  // namespace

TEST_CASE("PPO with a critic: training TP = 2 trains actor and critic as TP = 1", "[trainer][tp][train_tp][critic]") {
  std::int64_t const seed = GENERATE(take(2, random(1, 1000000)));
  INFO("seed " << seed);
  auto const root = fs::temp_directory_path() / ("rlflow_ttp_ppo_" + std::to_string(::getpid()));
  fs::remove_all(root);
  int const steps = 4;
  auto c1 = ppo_config(root / "one", 1, seed), c2 = ppo_config(root / "two", 2, seed);
  c1.trainer.total_training_steps = c2.trainer.total_training_steps = steps;
  auto data = task.make_dataset(256, std::uint64_t(seed));
  PPOTP a(c1, data, task.charset(), quiet());
  PPOTP b(c2, data, task.charset(), quiet());
  // the critic's values of a random batch on the same initial weights: the sharded forward
  int const R = int(c2.data.max_response_length), P = int(c2.data.max_prompt_length);
  DataProto const batch = random_scoring_batch(4, P, R, policy_of(c2).vocab_size, std::uint64_t(seed) + 3);
  auto check_values = [&](double tol) {
    DataProto const va = a.critic_wg().call<&roles::ValueCritic::compute_values>(batch);
    DataProto const vb = b.critic_wg().call<&roles::ValueCritic::compute_values>(batch);
    auto const x = va.tensor("values").span<float>(), y = vb.tensor("values").span<float>();
    REQUIRE(x.size() == y.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      INFO("values[" << i << "]: " << y[i] << " vs " << x[i]);
      REQUIRE(close(y[i], x[i], tol));
    }
  };
  check_values(1e-5);
  REQUIRE(b.critic_weights() == a.critic_weights());  // the same seeded initialisation, gathered
  for (int s = 0; s < steps; ++s) {
    Metrics const ma = a.step(), mb = b.step();
    INFO("step " << s + 1);
    REQUIRE(ma.count("critic/vf_loss") == 1);
    require_metrics(mb, ma, 1e-4);
  }
  auto const per_rank = b.critic_wg().call<&roles::ValueCritic::gather_critic_weights>();
  for (auto const& w : per_rank) REQUIRE(w == per_rank[0]);  // replicated tensors kept identical
  rlflow::testing::require_weights_close(a.actor_weights(), b.actor_weights(), c1.actor_rollout_ref.actor.optim.lr, steps);
  rlflow::testing::require_weights_close(a.critic_weights(), b.critic_weights(), c1.critic.optim.lr, steps);
  check_values(1e-4);
  fs::remove_all(root);
}

TEST_CASE("PPO under training TP = 2 resumes exactly, critic included", "[trainer][tp][train_tp][critic][checkpoint]") {
  auto const root = fs::temp_directory_path() / ("rlflow_ttp_ppo_resume_" + std::to_string(::getpid()));
  fs::remove_all(root);
  auto data = task.make_dataset(256, 5);
  auto c = ppo_config(root / "resumed", 2, 5);
  c.trainer.save_freq = 2;
  c.trainer.total_training_steps = 2;
  PPOTP(c, data, task.charset(), quiet()).fit();
  REQUIRE(latest_checkpoint_step(root / "resumed") == 2);
  c.trainer.resume_mode = config_string("auto");
  c.trainer.total_training_steps = 4;
  PPOTP resumed(c, data, task.charset(), quiet());
  REQUIRE(resumed.global_step() == 2);
  auto sc = ppo_config(root / "straight", 2, 5);
  sc.trainer.total_training_steps = 4;
  PPOTP straight(sc, data, task.charset(), quiet());
  straight.step();
  straight.step();
  for (int i = 0; i < 2; ++i) require_metrics(resumed.step(), straight.step(), 0);
  REQUIRE(resumed.actor_weights() == straight.actor_weights());
  REQUIRE(resumed.critic_weights() == straight.critic_weights());
  // the critic's file holds the full model: it loads into an unsharded critic engine
  model::GPTConfig critic_cfg = policy_of(c);
  critic_cfg.value_head = true;
  engine::TrainingEngine plain(critic_cfg);
  engine::load_checkpoint(root / "resumed" / "global_step_2" / "critic.safetensors", plain);
  REQUIRE(plain.step() > 0);
  fs::remove_all(root);
}

}  // namespace test_trainer_tp
