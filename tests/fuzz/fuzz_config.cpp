// Fuzz target: config text (the first byte picks JSON or YAML), then the start-up checks a
// Trainer runs on it (validate, check_size_limits). Silent accept: an accepted config whose JSON
// dump, loaded back, gives a different config (a value stored lossily).
#include "fuzz/fuzz_driver.hpp"

#include <rlflow/config/config_limits.hpp>
#include <rlflow/config/trainer_config.hpp>

namespace fuzz_config {

using namespace rlflow;

std::vector<std::string> fuzz_seeds() {
  return {
      "j" + TrainerConfig{}.to_json().dump(),
      "j" + TrainerConfig{}.to_json().dump(2),
      R"(j{"data": {"train_batch_size": 8, "max_prompt_length": 5}, "actor_rollout_ref": {"rollout": {"n": 4},
          "actor": {"optim": {"betas": [0.9, 0.99], "lr": 1e-3}}}, "trainer": {"logger": ["console", "jsonl"],
          "total_training_steps": null}, "seed": 3})",
      "y# a verl-style config\ndata:\n  train_batch_size: 8\n  truncation: left  # comment\nactor_rollout_ref:\n"
      "  actor:\n    ppo_mini_batch_size: 4\n    ppo_micro_batch_size_per_gpu: 8\n    optim:\n      betas: [0.9, 0.999]\n"
      "  rollout:\n    n: 4\n    log_prob_micro_batch_size_per_gpu: 16\ntrainer:\n  logger:\n    - console\n    - jsonl\n"
      "  total_training_steps: ~\n  default_local_dir: 'runs/x'\nseed: 1\n",
      "y---\nalgorithm:\n  adv_estimator: grpo\n  kl_ctrl:\n    type: adaptive\n    kl_coef: 0.001\n...\n",
      // verl's keys outside the table (no effect, alias, rejected) and the logger list
      "yactor_rollout_ref:\n  model:\n    use_remove_padding: true\n  actor:\n    fsdp_config:\n      param_offload: false\n"
      "  rollout:\n    name: vllm\nreward_model:\n  enable: false\ntrainer:\n  logger: [console, tensorboard, wandb]\n"
      "  val_only: false\n  rollout_data_dir: null\n",
  };
}

fuzz::outcome fuzz_one(std::string_view in) {
  if (in.empty()) throw format_error("empty input");
  TrainerConfig c;
  c.apply_text(in.substr(1), in[0] == 'j' ? "json" : "yaml", "<fuzz>");
  (void)validate(c);
  (void)warnings(c);
  check_size_limits(c, 16, 64, c.uses_critic(), std::uint64_t{1} << 34);
  TrainerConfig back;
  back.apply_json(c.to_json(), "<round trip>");
  return back.to_json() == c.to_json() ? fuzz::outcome::accepted : fuzz::outcome::silent_accept;
}

}  // namespace fuzz_config
RLFLOW_FUZZ_TARGET(config)
