// examples/07_custom_reward_role.cpp: the program of docs/roles.md, "A reward role of your own",
// as printed there (the test 'examples.custom_reward_role_matches_docs' keeps the two equal).
// Run: build/examples/07_custom_reward_role [key=value ...] (--help lists every key).
#include <rlflow/rlflow.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

std::atomic<long> g_rows_scored{0};  // how many rows the reward role saw (all workers)

//! A hand-written reward role: what rlflow::roles::RuleReward<Score> does, spelled out.
class ReverseReward {
 public:
  using role_tag = rlflow::reward_tag;  // the Trainer's reward slot
  static constexpr std::string_view role_name = "reward";

  // One object per worker, built on the worker's thread from the run's RoleSetup.
  // (The WorkerContext, optional, gives the worker's rank and the group's size.)
  ReverseReward(rlflow::WorkerContext const& /*ctx*/, rlflow::roles::RoleSetup setup)
      : tok_(rlflow::roles::role_tokenizer(setup)) {}

  // Called on every generated batch; under DPComputeProto each worker gets its chunk of rows.
  rlflow::DataProto compute_rm_score(rlflow::DataProto const& data) {
    rlflow::Tensor const& responses = data.tensor("responses");    // (b, R) int32 token ids
    rlflow::Tensor const& mask = data.tensor("response_mask");     // (b, R) int32, 1 = generated
    auto const& reward_model = data.non_tensor("reward_model");    // per row {"ground_truth": ...}
    auto const& data_source = data.non_tensor("data_source");      // per row, e.g. "reverse"
    std::int64_t const b = responses.dim(0), R = responses.dim(1);
    rlflow::Tensor scores = rlflow::Tensor::zeros(rlflow::DType::float32, rlflow::Shape{b, R});
    for (std::int64_t i = 0; i < b; ++i) {
      std::vector<std::int32_t> ids;  // the response up to (not including) EOS
      std::int64_t last = -1;         // the last valid response token
      for (std::int64_t t = 0; t < R; ++t) {
        if (!mask.at<std::int32_t>(i, t)) continue;
        last = t;
        if (responses.at<std::int32_t>(i, t) != tok_->eos_id()) ids.push_back(responses.at<std::int32_t>(i, t));
      }
      std::string const response = tok_->decode(ids);
      std::string const truth = reward_model[static_cast<std::size_t>(i)].as_dict().get("ground_truth").as_string();
      double score = response == truth ? 1.0 : 0.0;
      if (data_source[static_cast<std::size_t>(i)].as_string() == "reverse" && score == 0.0) {  // partial credit:
        std::size_t hits = 0;  // letters in the right place over the longer of the two
        for (std::size_t k = 0; k < std::min(response.size(), truth.size()); ++k) hits += response[k] == truth[k];
        score = static_cast<double>(hits) / static_cast<double>(std::max(response.size(), truth.size()));
      }
      if (last >= 0) scores.at<float>(i, last) = static_cast<float>(score);  // the score sits on the last token
    }
    g_rows_scored += b;
    return rlflow::DataProto::from_dict({{"token_level_scores", scores}});
  }

  // The methods the Trainer may call, each with its dispatch mode (verl: @register).
  using methods =
      rlflow::methods<rlflow::method<&ReverseReward::compute_rm_score, rlflow::dispatch::DPComputeProto>>;

 private:
  std::shared_ptr<rlflow::model::Tokenizer const> tok_;
};
static_assert(rlflow::roles::reward_role<ReverseReward>);  // the contract of docs/roles.md

using Trainer = rlflow::Trainer<rlflow::GRPO, rlflow::Colocate<3>, ReverseReward>;

int main(int argc, char** argv) {
  return rlflow::run_main([&] {
    rlflow::TrainerConfig defaults = Trainer::program_defaults(rlflow::presets::grpo_tiny_cpu(5, 4));
    defaults.trainer.default_local_dir = "runs/custom_reward_role";
    rlflow::TrainerConfig cfg = rlflow::TrainerConfig::from_args(argc, argv, defaults);
    rlflow::tasks::StringTask task;  // reverse 2 or 3 letters over "abcd"
    Trainer trainer(cfg, task.make_dataset(512, /*seed=*/1), task.charset());
    rlflow::Metrics last = trainer.fit();
    std::printf("rows scored %ld, final critic/score/mean %.3f\n", g_rows_scored.load(), last["critic/score/mean"]);
  });
}
