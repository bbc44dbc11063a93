// examples/11_sft_then_grpo.cpp: SFT, then GRPO from the SFT checkpoint, on a task whose reward
// needs a format the random model never writes: reverse a short string and put the answer in
// brackets ("abc=" -> "(cba)"); an answer without the brackets scores 0, one with them gets the
// demo's partial credit for its inside. GRPO from the random model sees almost only zero rewards
// (every sample of a group alike: no advantage), so it has nothing to learn from; a short SFT on
// demonstrations teaches the format, and GRPO then learns the content.
//
// Prints SFT's training and validation loss, then GRPO's score (critic/score/mean) every
// trainer.log_freq steps. Arguments: sft.<key>=value (rlflow::SftConfig's keys, verl's
// sft_trainer keys), other key=value words for the GRPO trainer (TrainerConfig), and
//   --compare            also run GRPO alone (the same steps from the random model) and print both
//   --check              exit 1 unless SFT's validation loss fell to --max-sft-val-loss (default 0.6),
//                        GRPO's final score is at least --min-score (default 0.8) and above its
//                        first logged score by --min-rise (default 0.3) and, with --compare, above
//                        GRPO alone's by --min-gain (default 0.4)
// Run: make demo DEMO=11_sft_then_grpo (or build/examples/11_sft_then_grpo --compare).
#include <rlflow/rlflow.hpp>
#include <rlflow/trainer/sft.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/reverse_task.hpp"

namespace {
using namespace rlflow;

//! The bracketed reversal's reward: 0 without "(...)" around the whole answer, else the partial
//! credit of the inside (tasks::StringTask::score).
struct BracketScore {
  static double score(std::string_view response, std::string_view truth) {
    if (response.size() < 2 || response.front() != '(' || response.back() != ')') return 0.0;
    return tasks::StringTask::score(response.substr(1, response.size() - 2), truth);
  }
};
using GrpoTrainer = Trainer<GRPO, Colocate<3>, roles::RuleReward<BracketScore>>;

struct Args {
  std::vector<std::string> sft, grpo;
  bool compare = false, check = false;
  double max_sft_val_loss = 0.6, min_score = 0.8, min_gain = 0.4, min_rise = 0.3;
};

double number(std::string_view flag, char const* v) {
  char* end = nullptr;
  double const x = std::strtod(v, &end);
  if (*v == 0 || *end != 0) throw config_error(msg("11_sft_then_grpo: ", flag, " ", v, " is not a number; e.g. ", flag, " 0.5"));
  return x;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string_view const w(argv[i]);
    auto value = [&]() -> char const* {
      if (i + 1 >= argc) throw config_error(msg("11_sft_then_grpo: ", w, " needs a value"));
      return argv[++i];
    };
    if (w == "--compare") a.compare = true;
    else if (w == "--check") a.check = true;
    else if (w == "--max-sft-val-loss") a.max_sft_val_loss = number(w, value());
    else if (w == "--min-score") a.min_score = number(w, value());
    else if (w == "--min-gain") a.min_gain = number(w, value());
    else if (w == "--min-rise") a.min_rise = number(w, value());
    else if (w.starts_with("sft.")) a.sft.emplace_back(w.substr(4));
    else a.grpo.emplace_back(w);
  }
  return a;
}

std::vector<char const*> argv_of(std::vector<std::string> const& words) {
  std::vector<char const*> v{"11_sft_then_grpo"};
  for (auto const& w : words) v.push_back(w.c_str());
  return v;
}

//! GRPO for total_training_steps; prints the score every log_freq steps; returns the mean score
//! of the first and of the last log_freq steps.
std::pair<double, double> run_grpo(TrainerConfig cfg, PromptDataset const& data, std::string const& charset, std::string const& init,
                char const* label) {
  TrainerOptions o;
  o.console = false;
  o.init_weights = init;
  GrpoTrainer t(cfg, data, charset, o);
  std::int64_t const every = std::max<std::int64_t>(1, cfg.trainer.log_freq);
  double window = 0, first = -1, last = 0;
  std::int64_t n = 0;
  while (t.global_step() < t.total_steps()) {
    Metrics m = t.step();
    window += m["critic/score/mean"];
    if (++n == every || t.global_step() == t.total_steps()) {
      last = window / double(n);
      if (first < 0) first = last;
      std::printf("%s step %3lld: score %.3f\n", label, static_cast<long long>(t.global_step()), last);
      std::fflush(stdout);
      window = 0;
      n = 0;
    }
  }
  return {first, last};
}
}  // namespace

int main(int argc, char** argv) {
  return run_main([&]() -> int {
    Args const a = parse(argc, argv);
    // GRPO: the demo's settings; the answer is 2-3 letters in brackets, then EOS
    TrainerConfig gd = examples::grpo_reverse_config();
    gd.data.max_response_length = 6;
    gd.trainer.total_training_steps = 100;
    gd.trainer.log_freq = 10;
    gd.trainer.experiment_name = "sft_then_grpo";
    gd.trainer.default_local_dir = "runs/sft_then_grpo/grpo";
    auto const gv = argv_of(a.grpo);
    TrainerConfig const gcfg = TrainerConfig::from_args(int(gv.size()), gv.data(), GrpoTrainer::program_defaults(gd));
    // SFT: demonstrations of the same task, a short run
    SftConfig sd;
    sd.data.train_batch_size = 32;
    sd.data.micro_batch_size_per_gpu = 32;
    sd.data.max_length = gcfg.data.max_prompt_length + gcfg.data.max_response_length;
    sd.optim.lr = 2e-3;
    sd.optim.weight_decay = 0.0;
    sd.trainer.total_training_steps = 60;
    sd.trainer.test_freq = 10;
    sd.trainer.default_local_dir = "runs/sft_then_grpo/sft";
    sd.trainer.experiment_name = "sft_then_grpo_sft";
    sd.trainer.console = false;
    sd.seed = gcfg.seed;
    auto const sv = argv_of(a.sft);
    SftConfig const scfg = SftConfig::from_args(int(sv.size()), sv.data(), sd);

    tasks::StringTask task;  // reverse over "abcd", 2-3 letters
    std::string const charset = task.charset() + "()";
    auto const tok = std::make_shared<model::CharTokenizer const>(charset);
    auto rows = [&](std::int64_t count, std::uint64_t seed) {
      std::vector<SftExample> out;
      auto const d = task.make_dataset(count, seed, false);
      for (std::int64_t i = 0; i < d.size(); ++i)
        out.push_back(sft_single_turn(d[i].prompt, "(" + d[i].ground_truth + ")", SftFormat::raw(), *tok));
      return out;
    };
    // the GRPO trainer's model (Trainer(cfg, dataset, alphabet) builds the same)
    model::GPTConfig g;
    g.vocab_size = tok->vocab_size();
    g.max_seq_len = int(gcfg.data.max_prompt_length + gcfg.data.max_response_length);
    g.n_layer = int(gcfg.actor_rollout_ref.model.n_layer);
    g.n_head = int(gcfg.actor_rollout_ref.model.n_head);
    g.n_embd = int(gcfg.actor_rollout_ref.model.n_embd);
    g.seed = std::uint64_t(gcfg.seed);
    model::Arch arch{};
    model::arch_from_name(gcfg.actor_rollout_ref.model.arch.view(), arch);
    g = model::builtin_model(g, arch);

    SftTrainer sft(scfg, g, tok, rows(1024, std::uint64_t(gcfg.seed) + 100), rows(128, std::uint64_t(gcfg.seed) + 200));
    double const val0 = sft.validation_loss();
    std::printf("sft step   0: val/loss %.3f\n", val0);
    double val = val0;
    while (sft.global_step() < sft.total_steps()) {
      Metrics m = sft.step();
      bool const last = sft.global_step() == sft.total_steps();
      if (last || sft.global_step() % std::max<std::int64_t>(1, scfg.trainer.test_freq) == 0) {
        val = sft.validation_loss();
        std::printf("sft step %3lld: train/loss %.3f val/loss %.3f\n", static_cast<long long>(sft.global_step()), m["train/loss"], val);
        std::fflush(stdout);
      }
    }
    auto const ckpt = sft.save_checkpoint();
    std::printf("sft checkpoint: %s\n", ckpt.string().c_str());

    auto const data = task.make_dataset(4096, std::uint64_t(gcfg.seed));
    auto const [start, after_sft] = run_grpo(gcfg, data, charset, ckpt.string(), "grpo from sft");
    double alone = -1;
    if (a.compare) {
      TrainerConfig c = gcfg;
      c.trainer.default_local_dir = std::string(gcfg.trainer.default_local_dir.view()) + "_alone";
      alone = run_grpo(c, data, charset, "", "grpo alone   ").second;
    }
    std::printf("done: sft val/loss %.3f -> %.3f; grpo score from sft %.3f", val0, val, after_sft);
    if (a.compare) std::printf(", grpo alone %.3f", alone);
    std::printf("\n");
    if (a.check) {
      bool ok = true;
      if (!(val <= a.max_sft_val_loss)) {
        std::fprintf(stderr, "check failed: SFT's validation loss %.3f is above %.3f\n", val, a.max_sft_val_loss);
        ok = false;
      }
      if (!(after_sft >= a.min_score)) {
        std::fprintf(stderr, "check failed: GRPO from SFT ends at score %.3f, below %.3f\n", after_sft, a.min_score);
        ok = false;
      }
      if (!(after_sft >= start + a.min_rise)) {
        std::fprintf(stderr, "check failed: GRPO from SFT rose from %.3f to %.3f, less than %.3f\n", start, after_sft, a.min_rise);
        ok = false;
      }
      if (a.compare && !(after_sft >= alone + a.min_gain)) {
        std::fprintf(stderr, "check failed: GRPO from SFT (%.3f) is not %.3f above GRPO alone (%.3f)\n", after_sft, a.min_gain, alone);
        ok = false;
      }
      return ok ? 0 : 1;
    }
    return 0;
  });
}
