// Tests for TP<N> in the Trainer: the headline type compiles as written; TP<2> / TP<4> training
// equals TP<1> (final weights within 1e-4 relative, every non-timing metric within the same
// tolerance); after every step each rollout rank's shard equals its slice of the actor's weights
// bit for bit (the slice cut here by tensor name, independently of ShardLayout); replicas and
// errors before work agree with the planner.
#include <catch2/catch.hpp>

#include <rlflow/planner.hpp>
#include <rlflow/trainer.hpp>

#include <cmath>
#include <filesystem>
#include <unistd.h>

#include "trainer/trainer_fixtures.hpp"

using namespace rlflow;
namespace fs = std::filesystem;

namespace {
using rlflow::testing::quiet;

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

tasks::StringTask const task{};

model::GPTConfig policy_of(TrainerConfig const& c) {
  model::GPTConfig m;
  m.vocab_size = model::CharTokenizer(task.charset()).vocab_size();
  m.max_seq_len = static_cast<int>(c.data.max_prompt_length + c.data.max_response_length);
  m.n_layer = static_cast<int>(c.actor_rollout_ref.model.n_layer);
  m.n_head = static_cast<int>(c.actor_rollout_ref.model.n_head);
  m.n_embd = static_cast<int>(c.actor_rollout_ref.model.n_embd);
  return m;
}

//! TP rank r of N's expected weights: in ParamLayout order, the sharded tensors (attention
//! c_attn weight / bias, attention c_proj weight, MLP c_fc weight / bias, MLP c_proj weight, all
//! stored with the split axis first) cut to rows [r D / N, (r + 1) D / N) of their D rows, every
//! other tensor whole.
std::vector<float> expected_shard(model::GPTConfig const& cfg, std::vector<float> const& full, int r, int N) {
  std::vector<float> out;
  model::ParamLayout const lay(cfg);
  REQUIRE(full.size() == lay.size());
  for (auto const& t : lay.tensors()) {
    bool const sharded = t.name.ends_with("attn.c_attn.weight") || t.name.ends_with("attn.c_attn.bias") ||
                         t.name.ends_with("attn.c_proj.weight") || t.name.ends_with("mlp.c_fc.weight") ||
                         t.name.ends_with("mlp.c_fc.bias") || t.name.ends_with("mlp.c_proj.weight");
    std::size_t b = 0, e = t.numel;
    if (sharded) {
      std::size_t const rows = std::size_t(t.shape[0]), row = t.numel / rows;
      b = rows * std::size_t(r) / std::size_t(N) * row;
      e = rows * std::size_t(r + 1) / std::size_t(N) * row;
    }
    out.insert(out.end(), full.begin() + std::ptrdiff_t(t.offset + b), full.begin() + std::ptrdiff_t(t.offset + e));
  }
  return out;
}

//! Every rollout rank's weights equal its slice of the actor's weights, bit for bit.
template <class T>
void require_synced(T& t, int N) {
  auto const actor = t.actor_weights();
  auto const per_rank = t.actor_rollout_wg().template call<&T::actor_role::rollout_weights>();
  model::GPTConfig const cfg = policy_of(t.config());
  REQUIRE(per_rank.size() == std::size_t(t.config().world_size()));
  for (std::size_t rank = 0; rank < per_rank.size(); ++rank) {
    INFO("rank " << rank);
    REQUIRE(per_rank[rank] == expected_shard(cfg, actor, int(rank) % N, N));
  }
}

bool close(double a, double b, double rel) { return std::abs(a - b) <= rel * std::max(1.0, std::abs(b)); }

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
  REQUIRE(wa.size() == wb.size());
  double num = 0, den = 0;
  for (std::size_t i = 0; i < wa.size(); ++i) {
    num += (double(wa[i]) - wb[i]) * (double(wa[i]) - wb[i]);
    den += double(wa[i]) * wa[i];
  }
  INFO("relative L2 difference of the final weights: " << std::sqrt(num / den));
  REQUIRE(std::sqrt(num / den) <= 1e-4);
  for (std::size_t i = 0; i < wa.size(); ++i) REQUIRE(close(wb[i], wa[i], 1e-4));
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
  SECTION("training TP (actor_rollout_ref.actor.megatron.tensor_model_parallel_size) is not run by the Trainer yet") {
    auto c = tp_config("train_tp", 2);
    c.actor_rollout_ref.actor.megatron.tensor_model_parallel_size = 2;  // valid: divides 2 devices and 4 heads
    for (auto const& m : validate(c)) REQUIRE_THAT(m, !Catch::Contains("tensor_model_parallel_size"));
    REQUIRE_THROWS_WITH((Trainer<GRPO, TP<2>>(c, data, task.charset(), quiet())),
                        Catch::Contains("tensor_model_parallel_size=2 is not honoured") && Catch::Contains("set it to 1"));
    c.actor_rollout_ref.actor.megatron.tensor_model_parallel_size = 3;  // invalid: the check names the numbers
    REQUIRE_THROWS_WITH((Trainer<GRPO, TP<2>>(c, data, task.charset(), quiet())),
                        Catch::Contains("tensor_model_parallel_size=3") && Catch::Contains("n_head=4"));
  }
}
