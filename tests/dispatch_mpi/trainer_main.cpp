// tests/dispatch_mpi/trainer_main.cpp: the demo trainer (examples/00_grpo_reverse's type and
// configuration, a few steps) with its weights written to a file. run_trainer.cmake runs it
// without mpirun (in process: 2 worker threads) and with mpirun -np 3 (driver + 2 worker
// processes) and compares the files byte for byte. Usage: test_mpi_trainer OUT_FILE [key=value ...]
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <rlflow/rlflow.hpp>

#include "../../examples/common/reverse_task.hpp"

using Trainer = rlflow::Trainer<rlflow::GRPO, rlflow::Colocate<3>, rlflow::roles::RuleReward<rlflow::examples::ReverseScore>>;

int main(int argc, char** argv) {
  try {
    if (argc < 2) throw std::runtime_error("usage: test_mpi_trainer OUT_FILE [key=value ...]");
    rlflow::TrainerConfig cfg = rlflow::examples::grpo_reverse_config();
    cfg.trainer.total_training_steps = 4;
    cfg.trainer.save_freq = -1;
    cfg.trainer.resume_mode = "disable";
    std::vector<std::string> over(argv + 2, argv + argc);
    cfg.apply_overrides(over);
    rlflow::tasks::StringTask task;
    auto dataset = task.make_dataset(4096, static_cast<std::uint64_t>(cfg.seed));
    rlflow::TrainerOptions opts;
    opts.console = false;
    opts.metrics_file = std::string(argv[1]) + ".metrics.jsonl";
    Trainer t(cfg, dataset, task.charset(), opts);
    if (!t.is_driver()) return 0;
    std::vector<float> const before = t.actor_weights();
    t.fit();
    auto const world = static_cast<std::size_t>(cfg.world_size());
    auto const tp = cfg.actor_rollout_ref.actor.megatron.tensor_model_parallel_size;
    std::vector<float> out;
    if (tp == 1) {
      // every DP rank holds the same weights (the gradient all-reduce keeps the replicas equal)
      auto all = t.workers().execute_all<&rlflow::roles::ActorRolloutRef::actor_weights>();
      for (std::size_t r = 1; r < all.size(); ++r)
        if (all[r] != all[0]) throw std::runtime_error("the actor weights of rank " + std::to_string(r) + " differ from rank 0's");
      if (all.size() != world) throw std::runtime_error("expected " + std::to_string(world) + " DP ranks, got " + std::to_string(all.size()));
      out = std::move(all[0]);
    } else {
      // training TP: every rank holds a shard; the gather (over the MPI sub-communicators of the
      // TP groups when under mpiexec) gives the full weights
      out = t.actor_weights();
      if (static_cast<std::size_t>(t.workers().world_size()) != world)
        throw std::runtime_error("expected " + std::to_string(world) + " ranks, got " + std::to_string(t.workers().world_size()));
    }
    if (out == before) throw std::runtime_error("the weights did not change: nothing was trained");
    std::ofstream f(argv[1], std::ios::binary);
    f.write(reinterpret_cast<char const*>(out.data()), static_cast<std::streamsize>(out.size() * sizeof(float)));
    std::printf("wrote %zu weights (%s, training TP %lld)\n", out.size(), t.workers().in_process() ? "in process" : "MPI",
                static_cast<long long>(tp));
    return f ? 0 : 1;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
