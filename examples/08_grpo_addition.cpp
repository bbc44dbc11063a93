// examples/08_grpo_addition.cpp: GRPO on 2-digit addition ("12+34=" -> "46", per-digit reward:
// tasks::AdditionTask, data source "addition", scored by the default reward role). A harder
// task than the demo's reversal; docs/trainer.md ("The addition task") says what it takes to
// learn it and what limits it. Takes key=value overrides, --config FILE and --help; the task's
// own knobs are environment variables: RLFLOW_ADD_DIGITS (default 2), RLFLOW_ADD_PAD=1
// (zero-padded, fixed-length answers "046").
#include <rlflow/rlflow.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

using Trainer = rlflow::Trainer<rlflow::GRPO, rlflow::Colocate<3>>;  // reward: roles::DefaultReward

int main(int argc, char** argv) {
  return rlflow::run_main([&] {
    rlflow::tasks::AdditionTask task;
    if (char const* d = std::getenv("RLFLOW_ADD_DIGITS")) task.digits = std::atoi(d);
    if (char const* p = std::getenv("RLFLOW_ADD_PAD")) task.pad_answer = std::string(p) == "1";
    // BOS + "99+99=" ; up to 3 answer digits + EOS
    rlflow::TrainerConfig defaults = rlflow::presets::grpo_tiny_cpu(task.max_prompt_length() + 1, task.max_answer_length() + 1);
    defaults.trainer.default_local_dir = "runs/grpo_addition";
    defaults.trainer.log_freq = 25;
    rlflow::TrainerConfig cfg = rlflow::TrainerConfig::from_args(argc, argv, defaults);
    Trainer trainer(cfg, task.make_dataset(8192, static_cast<std::uint64_t>(cfg.seed)), task.charset());
    rlflow::Metrics last = trainer.fit();
    std::printf("done: %lld steps, final critic/score/mean %.3f, response_length/clip_ratio %.3f\n",
                static_cast<long long>(trainer.global_step()), last["critic/score/mean"],
                last["response_length/clip_ratio"]);
  });
}
