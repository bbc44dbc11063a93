// tests/device/test_trainer_cuda.cu: Trainer<..., Backend<cuda::tag>> compiled with nvcc (GRPO
// and PPO). '[reject]' runs on every machine: without a GPU the trainer must refuse before any
// work; with one, too many workers and a model whose estimate exceeds the device are refused
// before any allocation. The other cases need a GPU (label cuda; they skip without one): one
// CUDA step against the CPU step on the same seeds and weights (GPT-2 and the built-in Llama,
// Qwen2 and Qwen3 shapes; padded and packed rows; same tokens, so the same scores
// and lengths; losses and grad norms within 1e-4 relative), the memory metrics against the
// estimate, sleep / wake returning the KV cache to the driver (cudaMemGetInfo), and a device
// allocation failure surfacing as an error that names the size and what to lower.
#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <rlflow/trainer/trainer_cuda.cuh>

#include <cmath>
#include <limits>
#include <filesystem>
#include <unistd.h>

#include "common/reverse_task.hpp"
#include "trainer_cuda_reference.hpp"  // the CPU steps, compiled by the host compiler

// Everything in a named namespace (not 'using namespace rlflow' at global scope: nvcc's generated
// stub code names ::cuda::std unqualified, which rlflow::cuda would make ambiguous).
namespace rlflow::test_cuda_trainer {
namespace fs = std::filesystem;

namespace {

using Score = examples::ReverseScore;
using CudaGRPO = Trainer<GRPO, Colocate<3>, roles::RuleReward<Score>, Backend<rlflow::cuda::tag>>;
using CudaPPO = Trainer<PPO, Colocate<3>, roles::ValueCritic, roles::RuleReward<Score>, Backend<rlflow::cuda::tag>>;
static_assert(CudaGRPO::on_cuda);
static_assert(std::is_same_v<CudaGRPO::actor_role, roles::CudaActorRolloutRef>);
// the hybrid role packs (use_remove_padding) with any engine that has set_remove_padding
static_assert(requires(engine::cuda::TrainingEngine& e) { e.set_remove_padding(true); });

int gpu_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

TrainerOptions quiet() {
  TrainerOptions o;
  o.console = false;
  return o;
}

fs::path fresh_dir(std::string const& name) {
  auto p = fs::temp_directory_path() / ("rlflow_cuda_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p;
}

//! 8 prompts x 4 samples, one worker (one device), one actor update per step.
TrainerConfig small(fs::path const& dir) {
  TrainerConfig c = examples::reverse_base_config();
  c.data.train_batch_size = 8;
  c.actor_rollout_ref.actor.ppo_mini_batch_size = 8;
  c.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 16;
  c.actor_rollout_ref.actor.optim.lr = 3e-3;
  c.actor_rollout_ref.rollout.n = 4;
  c.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 32;
  c.critic.ppo_micro_batch_size_per_gpu = 16;
  c.critic.optim.lr = 1e-3;
  c.trainer.n_gpus_per_node = 1;
  c.trainer.total_training_steps = 2;
  c.trainer.default_local_dir = dir.string().c_str();
  return c;
}

tasks::StringTask const task{};

void rel_close(Metrics& a, Metrics& b, std::string const& key, double rel) {
  INFO(key << ": cpu " << a[key] << " cuda " << b[key]);
  REQUIRE(a.count(key) == 1);
  REQUIRE(b.count(key) == 1);
  REQUIRE(b[key] == Approx(a[key]).epsilon(rel).margin(1e-6));
}

//! Adam's first steps move each weight by about lr * sign(g), so a weight whose gradient is ~0 may
//! move differently on the two paths: every weight within 2 lr, almost all within 1e-5.
void weights_close(std::vector<float> const& a, std::vector<float> const& b, double lr) {
  REQUIRE(a.size() == b.size());
  std::size_t near = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    double const d = std::fabs(double(a[i]) - double(b[i]));
    REQUIRE(d <= 2.0 * lr * 1.01);
    near += d <= 1e-5 + 1e-4 * std::fabs(double(a[i]));
  }
  REQUIRE(double(near) >= 0.99 * double(a.size()));
}

//! The CUDA Trainer's step against cpu_step's (the CPU Trainer of the same roles) on the same config.
template <class CudaT>
void step_matches(std::string const& name, CpuStep (*cpu_step)(TrainerConfig const&), bool ppo,
                  void (*tweak)(TrainerConfig&) = nullptr) {
  auto const dcpu = fresh_dir(name + "_cpu"), dgpu = fresh_dir(name + "_gpu");
  TrainerConfig c = small(dcpu), g = small(dgpu);
  if (tweak) tweak(c), tweak(g);
  CpuStep a = cpu_step(c);
  CudaT b(g, task.make_dataset(256, 3), task.charset(), quiet());
  REQUIRE(a.initial_weights == b.actor_weights());  // both initialise on the host from the seed
  Metrics& ma = a.metrics;
  Metrics mb = b.step();
  // same tokens: scores, rewards, advantages and lengths are equal
  for (char const* k : {"critic/score/mean", "critic/score/max", "response_length/mean", "response_length/clip_ratio"}) {
    INFO(k);
    REQUIRE(mb[k] == ma[k]);
  }
  rel_close(ma, mb, "critic/advantages/mean", 1e-5);
  rel_close(ma, mb, "actor/pg_loss", 1e-4);
  rel_close(ma, mb, "actor/grad_norm", 1e-4);
  for (auto const& [key, value] : ma)  // bypass mode: the rollout correction's metrics (rollout_corr/*)
    if (key.rfind("rollout_corr/", 0) == 0) rel_close(ma, mb, key, 1e-4);
  if (ppo) {
    rel_close(ma, mb, "critic/values/mean", 1e-6);  // the critic runs on the CPU engine on both paths
    rel_close(ma, mb, "critic/vf_loss", 1e-4);
  }
  weights_close(a.final_weights, b.actor_weights(), 3e-3);
  // memory metrics: present, ordered, and the estimate bounds the measured peak
  REQUIRE(mb.count("perf/max_memory_allocated_gb") == 1);
  REQUIRE(ma.count("perf/max_memory_allocated_gb") == 0);
  double const alloc = mb["perf/max_memory_allocated_gb"], reserved = mb["perf/max_memory_reserved_gb"];
  REQUIRE(alloc > 0.0);
  REQUIRE(reserved >= alloc);
  model::GPTConfig m;
  m.vocab_size = model::CharTokenizer(task.charset()).vocab_size();
  m.max_seq_len = static_cast<int>(g.data.max_prompt_length + g.data.max_response_length);
  m.n_layer = static_cast<int>(g.actor_rollout_ref.model.n_layer);
  m.n_head = static_cast<int>(g.actor_rollout_ref.model.n_head);
  m.n_embd = static_cast<int>(g.actor_rollout_ref.model.n_embd);
  model::Arch arch{};
  REQUIRE(model::arch_from_name(g.actor_rollout_ref.model.arch.view(), arch));
  m = model::builtin_model(m, arch);  // the Trainer's own mapping of actor_rollout_ref.model.arch
  // the rollout commits its whole default pool on the first step: at most max_num_seqs sequences
  // of the planned length (no device here is small enough for gpu_memory_utilization to cut it)
  double const est =
      static_cast<double>(estimate_device_memory(b.config(), m, std::numeric_limits<std::int64_t>::max()).total()) / gib;
  INFO("measured peak " << alloc << " GiB, estimate " << est << " GiB");
  REQUIRE(alloc <= est);
  // the rollout slept after generating (rollout.free_cache_engine): it holds no cache now
  for (auto bytes : b.actor_rollout_wg().template call<&CudaT::actor_role::rollout_memory_bytes>()) REQUIRE(bytes == 0);
  // a second step runs (the rollout wakes and re-acquires its cache)
  Metrics mb2 = b.step();
  REQUIRE(std::isfinite(mb2["actor/pg_loss"]));
  fs::remove_all(dcpu);
  fs::remove_all(dgpu);
}

}  // namespace

TEST_CASE("cuda trainer: configurations are rejected before any work", "[reject]") {
  auto const dir = fresh_dir("reject");
  int const n = gpu_count();
  TrainerConfig c = small(dir);
  {  // the static engine is the CPU trainer's reference only
    TrainerOptions o = quiet();
    o.static_rollout = true;
    REQUIRE_THROWS_WITH(CudaGRPO(c, task.make_dataset(64, 3), task.charset(), o),
                        Catch::Contains("static_rollout") && Catch::Contains("paged engine only"));
    REQUIRE_FALSE(fs::exists(dir));
  }
  if (n == 0) {
    REQUIRE_THROWS_AS(CudaGRPO(c, task.make_dataset(64, 3), task.charset(), quiet()), config_error);
    REQUIRE_THROWS_WITH(CudaGRPO(c, task.make_dataset(64, 3), task.charset(), quiet()),
                        Catch::Contains("no CUDA device is visible") && Catch::Contains("cpu::tag"));
    REQUIRE_FALSE(fs::exists(dir));
    return;
  }
  auto const before = device_memory_counter(0).stats().reserved;
  c.trainer.n_gpus_per_node = n + 1;
  c.data.train_batch_size = 8 * (n + 1);
  c.actor_rollout_ref.actor.ppo_mini_batch_size = 8 * (n + 1);
  REQUIRE_THROWS_WITH(CudaGRPO(c, task.make_dataset(512, 3), task.charset(), quiet()),
                      Catch::Contains("CUDA device") && Catch::Contains("set trainer.n_gpus_per_node=" + std::to_string(n)));
  // a 13B-parameter model: weights, AdamW and the reference alone exceed any current device
  c = small(dir);
  c.actor_rollout_ref.model.n_layer = 64;
  c.actor_rollout_ref.model.n_head = 32;
  c.actor_rollout_ref.model.n_embd = 4096;
  REQUIRE_THROWS_WITH(CudaGRPO(c, task.make_dataset(64, 3), task.charset(), quiet()),
                      Catch::Contains("GiB of device memory") && Catch::Contains("GiB free of") &&
                          Catch::Contains("ppo_micro_batch_size_per_gpu"));
  REQUIRE(device_memory_counter(0).stats().reserved == before);  // nothing was allocated
  REQUIRE_FALSE(fs::exists(dir));
}

TEST_CASE("cuda trainer: one GRPO step equals the CPU step", "[cuda][trainer]") {
  if (gpu_count() == 0) {
    WARN("no CUDA device: skipping");
    return;
  }
  step_matches<CudaGRPO>("grpo", cpu_grpo_step, false);
}

TEST_CASE("cuda trainer: one GRPO step of the built-in Llama, Qwen2 and Qwen3 models equals the CPU step", "[cuda][trainer][llama]") {
  if (gpu_count() == 0) {
    WARN("no CUDA device: skipping");
    return;
  }
  step_matches<CudaGRPO>("grpo_llama", cpu_grpo_step, false, [](TrainerConfig& c) { c.actor_rollout_ref.model.arch = "llama"; });
  step_matches<CudaGRPO>("grpo_qwen2", cpu_grpo_step, false, [](TrainerConfig& c) { c.actor_rollout_ref.model.arch = "qwen2"; });
  step_matches<CudaGRPO>("grpo_qwen3", cpu_grpo_step, false, [](TrainerConfig& c) { c.actor_rollout_ref.model.arch = "qwen3"; });
}

TEST_CASE("cuda trainer: one GRPO step with packed sequences (use_remove_padding) equals the CPU step", "[cuda][trainer][packing]") {
  if (gpu_count() == 0) {
    WARN("no CUDA device: skipping");
    return;
  }
  step_matches<CudaGRPO>("grpo_packed", cpu_grpo_step, false, [](TrainerConfig& c) { c.actor_rollout_ref.model.use_remove_padding = true; });
  step_matches<CudaGRPO>("grpo_packed_qwen2", cpu_grpo_step, false, [](TrainerConfig& c) {
    c.actor_rollout_ref.model.use_remove_padding = true;
    c.actor_rollout_ref.model.arch = "qwen2";
  });
}

TEST_CASE("cuda trainer: one PPO step equals the CPU step (critic on the CPU engine)", "[cuda][trainer]") {
  if (gpu_count() == 0) {
    WARN("no CUDA device: skipping");
    return;
  }
  step_matches<CudaPPO>("ppo", cpu_ppo_step, true);
}

TEST_CASE("cuda trainer: one GRPO step in rollout-correction bypass mode equals the CPU step", "[cuda][trainer]") {
  if (gpu_count() == 0) {
    WARN("no CUDA device: skipping");
    return;
  }
  // old_log_probs := rollout_log_probs; the actor's loss (bypass_mode, token IS + token_k1
  // rejection, ppo_clip) runs its rollout correction on cuda::par on the device path
  step_matches<CudaGRPO>("grpo_bypass", cpu_grpo_step, false, [](TrainerConfig& c) {
    c.algorithm.rollout_correction.bypass_mode = true;
    c.algorithm.rollout_correction.rollout_is = "token";
    c.algorithm.rollout_correction.rollout_rs = "token_k1";
    c.algorithm.rollout_correction.rollout_rs_threshold = "1.001";
  });
}

TEST_CASE("cuda rollout: sleep returns the block pool to the driver and the next generation re-acquires it", "[cuda][memory]") {
  if (gpu_count() == 0) {
    WARN("no CUDA device: skipping");
    return;
  }
  RLFLOW_CUDA_CHECK(cudaSetDevice(0));
  model::GPTConfig m;
  m.vocab_size = 32;
  m.max_seq_len = 512;
  m.n_layer = 2;
  m.n_head = 4;
  m.n_embd = 64;
  engine::PagedEngineConfig pc;
  pc.kv_cache_bytes = std::size_t(128) << 20;  // the pool: 128 MiB
  engine::cuda::PagedEngine r(m, pc);
  auto const params = [] {
    engine::RequestParams p;
    p.n = 4;
    p.max_tokens = 8;
    return std::vector<engine::RequestParams>{p};
  }();
  std::vector<std::vector<std::int32_t>> const prompts{{3, 4, 5, 6, 7, 8, 9, 10}};
  auto& counter = device_memory_counter(0);
  r.generate(prompts, params);
  std::size_t const held = r.memory_bytes(), kv = r.pool().bytes();
  REQUIRE(kv >= (std::size_t(127) << 20));
  REQUIRE(held >= kv);
  std::size_t free0 = 0, free1 = 0, free2 = 0, total = 0;
  RLFLOW_CUDA_CHECK(cudaMemGetInfo(&free0, &total));
  auto const alloc0 = counter.stats().allocated;
  r.sleep();
  RLFLOW_CUDA_CHECK(cudaMemGetInfo(&free1, &total));
  REQUIRE(r.memory_bytes() == 0);
  REQUIRE(alloc0 - counter.stats().allocated == std::int64_t(held));
  INFO("free before sleep " << free0 << ", after " << free1 << ", held " << held);
  REQUIRE(free1 >= free0 + kv - (std::size_t(4) << 20));  // allow the driver's 2 MiB granularity
  r.wake();
  r.generate(prompts, params);
  RLFLOW_CUDA_CHECK(cudaMemGetInfo(&free2, &total));
  REQUIRE(r.memory_bytes() == held);
  REQUIRE(free2 + kv <= free1 + (std::size_t(4) << 20));
}

TEST_CASE("cuda: a device allocation failure names the size and what to lower", "[cuda][memory]") {
  if (gpu_count() == 0) {
    WARN("no CUDA device: skipping");
    return;
  }
  RLFLOW_CUDA_CHECK(cudaSetDevice(0));
  {
    kernels::cuda::model::layers::device_buffer b;
    REQUIRE_THROWS_WITH(b.ensure<float>(std::size_t(1) << 48),
                        Catch::Contains("allocating a device buffer of 1125899906842624 bytes") &&
                            Catch::Contains("GiB free of") && Catch::Contains("ppo_micro_batch_size_per_gpu"));
    REQUIRE(b.bytes() == 0);
    REQUIRE(b.ensure<float>(1024) != nullptr);  // the failure is not sticky
  }
  // through an engine: a forward whose kept attention probabilities alone need ~550 GB
  model::GPTConfig m;
  m.vocab_size = 16;
  m.max_seq_len = 1024;
  m.n_layer = 4;
  m.n_head = 8;
  m.n_embd = 64;
  engine::cuda::TrainingEngine t(m);
  int const B = 4096, T = 1024;
  Tensor ids = Tensor::full(Shape{B, T}, std::int32_t(1));
  Tensor am = Tensor::full(Shape{B, T}, std::int32_t(1));
  REQUIRE_THROWS_WITH(t.compute_log_prob(ids, am, 8), Catch::Contains("allocating a device buffer of") &&
                                                          Catch::Contains("log_prob_micro_batch_size_per_gpu"));
  Tensor small_ids = Tensor::full(Shape{2, 16}, std::int32_t(1));
  Tensor small_am = Tensor::full(Shape{2, 16}, std::int32_t(1));
  auto r = t.compute_log_prob(small_ids, small_am, 4);  // the engine still works
  for (float x : r.log_probs.span<float>()) REQUIRE(std::isfinite(x));
}

}  // namespace rlflow::test_cuda_trainer
