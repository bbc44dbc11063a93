// examples/05_grpo_from_files.cpp: GRPO from files, verl's way: the policy from
// actor_rollout_ref.model.path (a Hugging Face GPT-2 folder: config.json, model.safetensors,
// vocab.json, merges.txt), prompts from data.train_files / data.val_files (JSON lines in verl's
// schema), the GSM8K rule reward (verl's default for data_source openai/gsm8k), validation every
// trainer.test_freq steps, checkpoints every trainer.save_freq steps (resumed automatically).
//   05_grpo_from_files [--write-demo DIR] [--config FILE] [key=value ...]
// --write-demo DIR first writes a small GPT-2-shaped folder (seeded random weights, a BPE
// vocabulary trained on the problems) and GSM8K-style train / val files under DIR and points the
// keys at them (no real weights can be downloaded on this machine). See docs/quickstart.md.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <rlflow/rewards/gsm8k.hpp>
#include <rlflow/rlflow.hpp>

#include "common/files_demo.hpp"

using Trainer = rlflow::Trainer<rlflow::GRPO, rlflow::Colocate<3>, rlflow::roles::RuleReward<rlflow::rewards::GSM8KScore>>;

//! Defaults sized for the demo files on 2 CPU cores; every key can be overridden.
rlflow::TrainerConfig files_demo_config() {
  rlflow::TrainerConfig c = Trainer::program_defaults();  // the values the Trainer type fixes (TP, estimator, device)
  c.data.max_prompt_length = 96;
  c.data.max_response_length = 32;
  c.data.train_batch_size = 8;
  c.data.filter_overlong_prompts = true;
  c.actor_rollout_ref.actor.ppo_mini_batch_size = 8;
  c.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 16;
  c.actor_rollout_ref.actor.ppo_epochs = 1;
  c.actor_rollout_ref.actor.optim.lr = 1e-3;
  c.actor_rollout_ref.actor.optim.weight_decay = 0.0;
  c.actor_rollout_ref.rollout.n = 4;
  c.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 16;
  c.actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu = 16;
  c.trainer.nnodes = 1;
  c.trainer.n_gpus_per_node = 2;
  c.trainer.total_training_steps = 10;
  c.trainer.test_freq = 5;
  c.trainer.save_freq = 5;
  c.trainer.log_val_generations = 2;
  c.trainer.project_name = "rlflow";
  c.trainer.experiment_name = "grpo_from_files";
  c.trainer.default_local_dir = "runs/grpo_from_files";
  c.seed = 1;
  return c;
}

int main(int argc, char** argv) {
  try {
    std::vector<char const*> args{argv[0]};
    std::string demo_dir;
    for (int i = 1; i < argc; ++i) {
      if (std::string(argv[i]) == "--write-demo" && i + 1 < argc) demo_dir = argv[++i];
      else args.push_back(argv[i]);
    }
    auto cl = rlflow::parse_command_line(static_cast<int>(args.size()), args.data());
    if (cl.help) {
      std::printf("05_grpo_from_files: GRPO from a Hugging Face GPT-2 folder and verl-schema JSON-lines files\n\n"
                  "usage: %s [--write-demo DIR] [--config FILE] [key=value ...]\n\n%s",
                  argv[0], rlflow::config_help(files_demo_config()).c_str());
      return 0;
    }
    rlflow::TrainerConfig cfg = files_demo_config();
    if (!demo_dir.empty()) {
      auto f = rlflow::examples::write_demo_files(demo_dir);
      cfg.actor_rollout_ref.model.path = f.model_dir.string();
      cfg.data.train_files = f.train_file.string();
      cfg.data.val_files = f.val_file.string();
      std::printf("wrote %s (model), %s and %s\n", f.model_dir.c_str(), f.train_file.c_str(), f.val_file.c_str());
    }
    for (auto const& f : cl.config_files) cfg.apply_file(f);
    cfg.apply_overrides(cl.overrides);
    std::printf("%s\n", rlflow::describe<Trainer>().c_str());
    Trainer trainer(cfg);
    rlflow::Metrics last = trainer.fit();
    std::printf("done: %lld steps, final critic/score/mean %.3f", static_cast<long long>(trainer.global_step()),
                last["critic/score/mean"]);
    for (auto const& [k, v] : last)
      if (k.starts_with("val-core/")) std::printf(", %s %.3f", k.c_str(), v);
    std::printf("; metrics in %s/metrics.jsonl\n", std::string(trainer.config().trainer.default_local_dir.view()).c_str());
    return 0;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
