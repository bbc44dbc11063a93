// A downstream trainer program built with RLFLOW_SEPARATE_COMPILATION (consumer_sc/): the
// quickstart's trainer for a few steps. run_consumer.cmake checks that this translation unit
// calls rlflow's non-template functions instead of compiling them (nm: undefined here, defined in
// compiled_part.cpp's object), and that the program links and trains.
#include <rlflow/rlflow.hpp>

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

struct ExactScore {
  static double score(std::string_view response, std::string_view ground_truth) {
    return response == ground_truth ? 1.0 : 0.0;
  }
};

int main(int argc, char** argv) {
  return rlflow::run_main([&] {
    rlflow::TrainerConfig cfg = rlflow::presets::grpo_tiny_cpu(5, 4);
    cfg.apply_text("trainer:\n  total_training_steps: 3\n", "yaml", "consumer_sc.yaml");  // a YAML override
    cfg.trainer.default_local_dir = argc > 1 ? argv[1] : "consumer_sc_run";
    cfg.trainer.save_freq = 3;
    std::vector<rlflow::PromptItem> items;
    for (char x : std::string("abcd"))  // every word of 2 or 3 letters over "abcd", reversed
      for (char y : std::string("abcd")) {
        items.push_back({std::string{x, y, '='}, std::string{y, x}});
        for (char z : std::string("abcd")) items.push_back({std::string{x, y, z, '='}, std::string{z, y, x}});
      }
    rlflow::Trainer<rlflow::GRPO, rlflow::Colocate<3>, rlflow::roles::RuleReward<ExactScore>> trainer(
        cfg, rlflow::PromptDataset(items), "abcd=");
    rlflow::Metrics last = trainer.fit();
    if (!(last["critic/score/mean"] >= 0.0)) throw rlflow::error("no score after 3 steps");
    std::printf("consumer ok: %d steps, rlflow %d.%d.%d\n", static_cast<int>(last["training/global_step"]),
                rlflow::version_major, rlflow::version_minor, rlflow::version_patch);
  });
}
