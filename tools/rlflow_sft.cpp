// rlflow_sft: supervised fine-tuning from the command line, verl's
// `python -m verl.trainer.fsdp_sft_trainer key=value ...`: a Hugging Face folder
// (model.partial_pretrain) and JSON-lines rows (data.train_files, data.val_files), with verl's
// sft_trainer keys (docs/sft.md). Writes checkpoints and metrics.jsonl to
// trainer.default_local_dir; --export DIR also writes the last checkpoint as a Hugging Face
// folder (a model.path for GRPO).
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include <rlflow/config/run_main.hpp>  // run_main
#include <rlflow/trainer/sft.hpp>      // SftConfig, SftTrainer

namespace {
void usage() {
  std::printf("usage: rlflow_sft key=value ... [--export DIR]\n"
              "  SFT of a Hugging Face folder on JSON-lines rows (docs/sft.md). Keys (verl's sft_trainer names):\n");
  for (auto const& k : rlflow::SftConfig::keys()) std::printf("    %s\n", k.c_str());
  std::printf("  e.g. rlflow_sft model.partial_pretrain=models/qwen data.train_files=train.jsonl data.multiturn.enable=true\n");
}
}  // namespace

int main(int argc, char** argv) {
  return rlflow::run_main([&]() -> int {
    std::vector<char const*> words{argv[0]};
    std::string export_dir;
    for (int i = 1; i < argc; ++i) {
      std::string_view const a(argv[i]);
      if (a == "--help" || a == "-h") return usage(), 0;
      if (a == "--export") {
        if (i + 1 >= argc) throw rlflow::config_error("rlflow_sft: --export needs a folder; e.g. --export runs/sft_hf");
        export_dir = argv[++i];
        continue;
      }
      words.push_back(argv[i]);
    }
    rlflow::SftTrainer t(rlflow::SftConfig::from_args(int(words.size()), words.data(), rlflow::SftConfig{}));
    rlflow::Metrics m = t.fit();
    std::printf("done: %lld steps, train/loss %.4f", static_cast<long long>(t.global_step()), m["train/loss"]);
    if (m.count("val/loss")) std::printf(", val/loss %.4f", m["val/loss"]);
    std::printf("; checkpoint %s\n", t.last_checkpoint().string().c_str());
    if (!export_dir.empty()) {
      t.export_hf(export_dir);
      std::printf("exported %s\n", export_dir.c_str());
    }
    return 0;
  });
}
