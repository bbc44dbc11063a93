// examples/00_grpo_reverse.cpp: the demo. GRPO from a random tiny GPT on an embedded verifiable
// task: reverse a short string ("abc=" -> "cba"), with partial credit per correct character.
// Prompts are generated in-process; the reward is rule-based. Takes verl-style key=value
// overrides, --config FILE and --help. Run: make demo (or build/examples/00_grpo_reverse).
#include <cstdio>
#include <exception>

#include <rlflow/rlflow.hpp>

namespace {
//! The rule-based reward (partial credit in [0, 1]).
struct ReverseScore {
  static double score(std::string_view response, std::string_view truth) {
    return rlflow::tasks::StringTask::score(response, truth);
  }
};

using Trainer = rlflow::Trainer<rlflow::GRPO, rlflow::Colocate<3>, rlflow::roles::RuleReward<ReverseScore>>;

//! The demo's defaults: small enough to learn in a few minutes on 2 CPU cores.
rlflow::TrainerConfig demo_defaults() {
  rlflow::TrainerConfig c;
  c.data.train_batch_size = 32;
  c.data.max_prompt_length = 5;    // BOS + up to 3 letters + '='
  c.data.max_response_length = 4;  // up to 3 letters + EOS
  auto& a = c.actor_rollout_ref.actor;
  a.ppo_mini_batch_size = 32;
  a.ppo_micro_batch_size_per_gpu = 128;
  a.ppo_epochs = 1;
  a.optim.lr = 3e-3;
  a.optim.weight_decay = 0.0;
  a.entropy_coeff = 0.0;
  auto& r = c.actor_rollout_ref.rollout;
  r.n = 8;
  r.temperature = 1.0;
  r.log_prob_micro_batch_size_per_gpu = 128;
  c.actor_rollout_ref.model.n_layer = 2;
  c.actor_rollout_ref.model.n_head = 4;
  c.actor_rollout_ref.model.n_embd = 64;
  c.trainer.nnodes = 1;
  c.trainer.n_gpus_per_node = 2;  // two DP workers (threads) on the CPU
  c.trainer.total_training_steps = 200;
  c.trainer.save_freq = -1;
  c.trainer.project_name = "rlflow";
  c.trainer.experiment_name = "grpo_reverse";
  c.trainer.default_local_dir = "runs/grpo_reverse";
  c.trainer.resume_mode = "disable";
  c.seed = 1;
  return c;
}
}  // namespace

int main(int argc, char** argv) {
  try {
    auto cl = rlflow::parse_command_line(argc, argv);
    if (cl.help) {
      std::printf("00_grpo_reverse: GRPO on string reversal with a tiny GPT (rlflow demo)\n\n"
                  "usage: 00_grpo_reverse [--config FILE] [key=value ...]\n\n%s",
                  rlflow::config_help().c_str());
      return 0;
    }
    rlflow::TrainerConfig cfg = demo_defaults();
    for (auto const& f : cl.config_files) cfg.apply_file(f);
    cfg.apply_overrides(cl.overrides);

    rlflow::tasks::StringTask task;  // reverse, alphabet "abcd", lengths 2-3
    auto dataset = task.make_dataset(/*count=*/4096, /*seed=*/static_cast<std::uint64_t>(cfg.seed));
    std::printf("%s\n", rlflow::describe<Trainer>().c_str());
    Trainer trainer(cfg, dataset, task.charset());
    auto last = trainer.fit();
    std::printf("done: %lld steps, final critic/score/mean %.3f, metrics in %s/metrics.jsonl\n",
                static_cast<long long>(trainer.global_step()), last["critic/score/mean"],
                std::string(trainer.config().trainer.default_local_dir.view()).c_str());
    return 0;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
