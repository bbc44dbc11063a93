// tests/dispatch_mpi/async_main.cpp: the separate_async demo trainer (a standalone rollout pool,
// staleness bound K = 0, a few steps) with its actor weights written to a file. run_async.cmake
// runs it in process and under mpiexec -np 5 (driver, 2 trainer processes, 2 rollout processes:
// the rollout pool in processes of its own, the weights synced over MPI by MpiCheckpointEngine)
// and compares the files byte for byte. Usage: test_mpi_async OUT_FILE [key=value ...] (training
// TP, for one, is a key: actor_rollout_ref.actor.megatron.tensor_model_parallel_size; rollout TP
// is RLFLOW_TEST_ROLLOUT_TP in the environment).
//
// With RLFLOW_TEST_DRIVER_THROW_AT=S (run_fault.cmake, bound K = 1) the driver's after_advantage
// hook throws at step S once the producer has started the batch of step S + 1, whose generation
// takes 2 s on the rollout ranks (in_generate): the trainer is destroyed with a rollout call in
// flight, which must finish and the job end with the driver's error, not a liveness timeout.
#include <chrono>
#include <cstdlib>
#include <memory>
#include <thread>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <rlflow/rlflow.hpp>

#include "../../examples/common/reverse_task.hpp"

//! RolloutTP: the rollout pool as replicas of RolloutTP tensor-parallel ranks, whose TP group under
//! mpiexec is an MPI sub-communicator of the pool's processes.
template <int RolloutTP>
int run(int argc, char** argv) {
  using Trainer = rlflow::Trainer<rlflow::GRPO, rlflow::SeparateAsync, rlflow::TP<RolloutTP>,
                                  rlflow::roles::RuleReward<rlflow::examples::ReverseScore>>;
  try {
    if (argc < 2) throw std::runtime_error("usage: test_mpi_async OUT_FILE [key=value ...]");
    rlflow::TrainerConfig cfg = rlflow::examples::grpo_separate_async_config();
    cfg.trainer.total_training_steps = 3;
    cfg.trainer.save_freq = -1;
    cfg.trainer.resume_mode = "disable";
    cfg.trainer.v1.separate_async.num_warmup_batches = 0;  // K = 0: deterministic, equal to in process
    cfg.actor_rollout_ref.rollout.n_gpus_per_node = 2;
    std::vector<std::string> over(argv + 2, argv + argc);
    cfg.apply_overrides(over);
    rlflow::tasks::StringTask task;
    auto dataset = task.make_dataset(4096, static_cast<std::uint64_t>(cfg.seed));
    rlflow::TrainerOptions opts;
    opts.console = false;
    opts.metrics_file = std::string(argv[1]) + ".metrics.jsonl";
    std::int64_t const throw_at = std::getenv("RLFLOW_TEST_DRIVER_THROW_AT") ? std::atoll(std::getenv("RLFLOW_TEST_DRIVER_THROW_AT")) : 0;
    Trainer* holder = nullptr;
    if (throw_at > 0) {
      cfg.trainer.v1.separate_async.num_warmup_batches = 1;  // K = 1: the next batch is generated during the step
      auto hooks = std::make_shared<rlflow::AsyncHooks>();
      hooks->in_generate = [throw_at](std::int64_t step, int) {
        if (step == throw_at + 1) std::this_thread::sleep_for(std::chrono::seconds(2));
      };
      opts.async_hooks = hooks;
      opts.after_advantage = [throw_at, &holder](std::int64_t step, rlflow::DataProto const&) {
        if (step != throw_at) return;
        while (holder->async_rollout()->started_through() < throw_at + 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the rollout call is in flight
        throw std::runtime_error("injected driver failure at step " + std::to_string(step));
      };
    }
    Trainer t(cfg, dataset, task.charset(), opts);
    holder = &t;
    if (!t.is_driver()) return 0;
    std::vector<float> const before = t.actor_weights();
    t.fit();
    auto& rollout = t.async_rollout()->workers();
    std::vector<float> const after = t.actor_weights();
    if (after == before) throw std::runtime_error("the weights did not change: nothing was trained");
    // the rollout ranks hold the trainer's last published weights (synced through the engine)
    std::string where = "in process";
    if (!rollout.in_process()) {
      int const first = rollout.execute_func_rank_zero([] { return rlflow::mpi::Runtime::get().rank(); });
      int const trainer_ranks = t.workers().world_size();
      if (first != 1 + trainer_ranks)
        throw std::runtime_error("the rollout pool's rank 0 runs on world rank " + std::to_string(first) + ", expected " +
                                 std::to_string(1 + trainer_ranks));
      where = "MPI, rollout pool on world ranks " + std::to_string(first) + "..";
    }
    std::printf("checkpoint engine: %s; training TP %lld, rollout TP %d in %lld replica(s)\n",
                std::string(t.async_rollout()->checkpoint_engine_name()).c_str(),
                static_cast<long long>(t.config().actor_rollout_ref.actor.megatron.tensor_model_parallel_size), RolloutTP,
                static_cast<long long>(t.rollout_replicas()));
    std::ofstream f(argv[1], std::ios::binary);
    f.write(reinterpret_cast<char const*>(after.data()), static_cast<std::streamsize>(after.size() * sizeof(float)));
    std::printf("wrote %zu weights (%s)\n", after.size(), where.c_str());
    return f ? 0 : 1;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

//! RLFLOW_TEST_ROLLOUT_TP=2 in the environment: rollout TP 2 (default 1).
int main(int argc, char** argv) {
  std::string const tp = std::getenv("RLFLOW_TEST_ROLLOUT_TP") ? std::getenv("RLFLOW_TEST_ROLLOUT_TP") : "1";
  if (tp == "1") return run<1>(argc, argv);
  if (tp == "2") return run<2>(argc, argv);
  std::fprintf(stderr, "error: RLFLOW_TEST_ROLLOUT_TP=%s: this test runs rollout TP 1 or 2\n", tp.c_str());
  return 2;
}
