// Fuzz target: a command line (arguments separated by NUL bytes) through parse_command_line,
// then validate. Config files named by --config are read if they exist (the fuzzer rarely names
// one). Silent accept: an accepted config whose JSON dump, loaded back, differs.
#include "fuzz/fuzz_driver.hpp"

#include <rlflow/config/trainer_config.hpp>

namespace fuzz_command_line {

using namespace rlflow;

std::vector<std::string> fuzz_seeds() {
  using namespace std::string_literals;
  return {"data.train_batch_size=8\0actor_rollout_ref.rollout.n=4\0--json"s,
          "--help"s,
          "+trainer.logger=[console,jsonl]\0++seed=3\0trainer.total_training_steps=null"s,
          "actor_rollout_ref.actor.optim.betas=[0.9,0.95]\0algorithm.kl_ctrl.kl_coef=1e-3\0data.truncation=left"s,
          "--config=/nonexistent.yaml"s,
          "-c\0/nonexistent.json\0trainer.default_local_dir=runs/${trainer.project_name}"s,
          // verl's keys outside the table: no effect, alias, rejected at and off verl's default, the logger list
          "trainer.logger=['console','tensorboard','wandb']\0actor_rollout_ref.rollout.name=vllm\0reward_model.enable=False"s,
          "actor_rollout_ref.actor.optim.warmup_style=cosine\0actor_rollout_ref.model.lora_rank=0\0data.tokenizer=x"s,
          "actor_rollout_ref.actor.fsdp_config.param_ofload=true\0trainer.val_only=true\0trainer.rollout_data_dir=d"s};
}

fuzz::outcome fuzz_one(std::string_view in) {
  std::vector<std::string> args{"prog"};
  while (true) {
    auto const at = in.find('\0');
    args.emplace_back(in.substr(0, at));
    if (at == std::string_view::npos) break;
    in.remove_prefix(at + 1);
  }
  std::vector<char const*> argv;
  for (auto const& a : args) argv.push_back(a.c_str());
  auto const cl = parse_command_line(static_cast<int>(argv.size()), argv.data());
  (void)validate(cl.config);
  (void)interpolate(cl.config, cl.config.trainer.default_local_dir.view());
  TrainerConfig back;
  back.apply_json(cl.config.to_json(), "<round trip>");
  return back.to_json() == cl.config.to_json() ? fuzz::outcome::accepted : fuzz::outcome::silent_accept;
}

}  // namespace fuzz_command_line
RLFLOW_FUZZ_TARGET(command_line)
