// examples/08_grpo_addition.cpp: 2-digit addition ("12+34=" -> "46"; tasks::AdditionTask, data
// source "addition"), a harder task than the demo's reversal. Two set-ups, chosen with
// RLFLOW_ADD_MODE:
//   grpo  (default) GRPO with the per-digit score on the last token (roles::DefaultReward)
//   token           REINFORCE++ with algorithm.gamma=0 and examples::DigitTokenReward: each
//                   answer digit (and the EOS after it) credited on its own token
// docs/trainer.md ("The addition task") gives the runs and what limits each. Takes key=value
// overrides, --config FILE and --help; RLFLOW_ADD_DIGITS (default 2) and RLFLOW_ADD_FIXED=1
// (zero-padded operands and answers, "05+27=" -> "032") set the task.
#include <rlflow/rlflow.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/addition_task.hpp"  // DigitTokenReward

namespace {
template <class TrainerType>
void train(int argc, char** argv, rlflow::tasks::AdditionTask const& task, rlflow::TrainerConfig defaults) {
  rlflow::TrainerConfig cfg = rlflow::TrainerConfig::from_args(argc, argv, defaults);
  std::printf("%s\n", rlflow::describe<TrainerType>().c_str());
  TrainerType trainer(cfg, task.make_dataset(8192, static_cast<std::uint64_t>(cfg.seed)), task.charset());
  rlflow::Metrics last = trainer.fit();
  std::printf("done: %lld steps, final critic/score/mean %.3f, response_length/clip_ratio %.3f\n",
              static_cast<long long>(trainer.global_step()), last["critic/score/mean"], last["response_length/clip_ratio"]);
}
}  // namespace

int main(int argc, char** argv) {
  return rlflow::run_main([&] {
    rlflow::tasks::AdditionTask task;
    if (char const* d = std::getenv("RLFLOW_ADD_DIGITS")) task.digits = std::atoi(d);
    if (char const* p = std::getenv("RLFLOW_ADD_FIXED")) task.fixed_width = std::string(p) == "1";
    std::string const mode = std::getenv("RLFLOW_ADD_MODE") ? std::getenv("RLFLOW_ADD_MODE") : "grpo";
    // BOS + "99+99=" ; up to 3 answer digits + EOS
    rlflow::TrainerConfig defaults =
        rlflow::presets::grpo_tiny_cpu(task.max_prompt_length() + 1, task.max_answer_length() + 1);
    defaults.trainer.default_local_dir = "runs/addition";
    defaults.trainer.log_freq = 25;
    if (mode == "token") {
      defaults.algorithm.gamma = 0.0;  // each token's return is its own reward
      train<rlflow::Trainer<rlflow::ReinforcePlusPlus, rlflow::Colocate<3>, rlflow::examples::DigitTokenReward>>(
          argc, argv, task, defaults);
    } else if (mode == "grpo") {
      train<rlflow::Trainer<rlflow::GRPO, rlflow::Colocate<3>>>(argc, argv, task, defaults);
    } else {
      throw rlflow::config_error("08_grpo_addition: RLFLOW_ADD_MODE=" + mode + " is not known; use grpo or token");
    }
  });
}
