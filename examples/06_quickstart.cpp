// examples/06_quickstart.cpp: the program of docs/quickstart.md, "The trainer in your own
// program", as printed there (the test 'examples.quickstart_matches_docs' keeps the two equal).
// Run: build/examples/06_quickstart [key=value ...] (--help lists every key).
#include <rlflow/rlflow.hpp>

#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

struct MyScore {  // the rule-based reward: any type with this static function
  static double score(std::string_view response, std::string_view ground_truth) {
    std::size_t const n = std::max(response.size(), ground_truth.size()), m = std::min(response.size(), ground_truth.size());
    std::size_t hits = 0;  // partial credit: characters in the right place
    for (std::size_t i = 0; i < m; ++i) hits += response[i] == ground_truth[i];
    return n == 0 ? 1.0 : static_cast<double>(hits) / static_cast<double>(n);
  }
};

using Trainer = rlflow::Trainer<rlflow::GRPO,                         // algorithm
                                rlflow::Colocate<3>,                  // placement: 3 roles per device
                                rlflow::roles::RuleReward<MyScore>>;  // the reward role

int main(int argc, char** argv) {
  return rlflow::run_main([&] {  // prints errors and --help instead of 'terminate called ...'
    // verl's defaults describe 8 GPUs and a pretrained model: start from the preset for a tiny GPT
    // on the CPU (prompts up to 5 tokens: BOS, 3 letters, '='; responses up to 3 letters + EOS)
    rlflow::TrainerConfig defaults = Trainer::program_defaults(rlflow::presets::grpo_tiny_cpu(5, 4));
    defaults.trainer.default_local_dir = "runs/quickstart";  // metrics.jsonl and checkpoints
    rlflow::TrainerConfig cfg = rlflow::TrainerConfig::from_args(argc, argv, defaults);
    std::vector<rlflow::PromptItem> items;  // every word of 2 or 3 letters over "abcd", reversed
    for (std::string w : {"a", "b", "c", "d"})
      for (char x : std::string("abcd")) {
        items.push_back({w + x + "=", std::string{x} + w});
        for (char y : std::string("abcd")) items.push_back({w + x + y + "=", std::string{y, x} + w});
      }
    rlflow::PromptDataset data(items);  // or a braced list: rlflow::PromptDataset data({{"abc=", "cba"}, {"ab=", "ba"}});
    Trainer trainer(cfg, data, /*alphabet=*/"abcd=");
    rlflow::Metrics last = trainer.fit();
    std::printf("final critic/score/mean %.3f\n", last["critic/score/mean"]);
  });
}
