// examples/09_grpo_gsm8k.cpp: verl's GSM8K quickstart in rlflow: GRPO on GSM8K rows in verl's
// schema with a Hugging Face model folder (Qwen2 / Qwen2.5 / Qwen3 / Llama-3 / GPT-2) as
// actor_rollout_ref.model.path, its tokenizer.json and Jinja chat template rendering the prompts,
// rewards by data_source (openai/gsm8k), validation metrics named as verl names them.
//   09_grpo_gsm8k [--write-demo DIR --tokenizer TOKDIR [--demo-shape NAME]] [--config FILE] [key=value ...]
// examples/09_grpo_gsm8k.yaml holds the quickstart's keys. --write-demo DIR writes a stand-in
// (no real weights can be downloaded here): a tiny random Qwen2 folder with the tokenizer files of
// TOKDIR (e.g. Qwen3's, whose vocabulary and template family Qwen2.5 shares) and GSM8K-format rows
// converted to verl's schema as rlflow_prepare_gsm8k does; the keys then point at them.
// --demo-shape NAME gives the stand-in a published model's full shape (random weights), e.g.
// qwen2.5-0.5b (model/published_models.hpp), to time and size a step at real size.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <rlflow/data/gsm8k.hpp>
#include <rlflow/model/published_models.hpp>
#include <rlflow/rewards/gsm8k.hpp>
#include <rlflow/rlflow.hpp>

#include "common/files_demo.hpp"

using Trainer = rlflow::Trainer<rlflow::GRPO, rlflow::Colocate<3>, rlflow::roles::RuleReward<rlflow::rewards::GSM8KScore>>;

namespace {
namespace fs = std::filesystem;

//! GSM8K-format rows ({question, answer ending "#### n"}) of seeded word problems, converted.
void write_rows(fs::path const& path, std::int64_t count, std::uint64_t seed, std::string const& split) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) throw rlflow::io_error(rlflow::msg("09_grpo_gsm8k: cannot write ", path.string()));
  auto const problems = rlflow::examples::make_word_problems(count, seed);
  for (std::size_t i = 0; i < problems.size(); ++i) {
    nlohmann::json const row = {{"question", problems[i].question},
                                {"answer", "The answer is " + std::to_string(problems[i].answer) + ".\n#### " +
                                               std::to_string(problems[i].answer)}};
    out << rlflow::data::gsm8k_rl_row(row, split, std::int64_t(i)).dump() << "\n";
  }
}

//! The stand-in: DIR/model (a tiny random Qwen2 with Qwen's 151,936-row embedding, or the published
//! model 'shape' with random weights) and DIR/data/{train,test}.jsonl.
void write_demo(fs::path const& dir, fs::path const& tokenizer, std::string const& shape, rlflow::TrainerConfig& cfg) {
  fs::create_directories(dir / "model");
  fs::create_directories(dir / "data");
  for (char const* f : {"tokenizer.json", "tokenizer_config.json"}) {
    if (!fs::exists(tokenizer / f))
      throw rlflow::io_error(rlflow::msg("09_grpo_gsm8k: --tokenizer ", tokenizer.string(), " has no ", f,
                                         "; give a folder with a Hugging Face tokenizer.json and tokenizer_config.json"));
    fs::copy_file(tokenizer / f, dir / "model" / f, fs::copy_options::overwrite_existing);
  }
  rlflow::model::GPTConfig c;
  c.arch = rlflow::model::Arch::qwen2;
  c.vocab_size = 151936;
  c.max_seq_len = 1024;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_kv_head = 2;
  c.n_embd = 64;
  c.intermediate_size = 192;
  c.qkv_bias = true;
  if (!shape.empty()) c = rlflow::model::published_model(shape).config;
  c.seed = 1;
  std::vector<float> w(rlflow::model::param_count(c));
  rlflow::model::init_params(c, w);
  rlflow::model::hf::export_model(dir / "model", c, w, rlflow::DType::bfloat16, 151643, 151645);
  write_rows(dir / "data" / "train.jsonl", 64, 1, "train");
  write_rows(dir / "data" / "test.jsonl", 4, 1001, "test");
  cfg.actor_rollout_ref.model.path = (dir / "model").string();
  cfg.data.train_files = (dir / "data" / "train.jsonl").string();
  cfg.data.val_files = (dir / "data" / "test.jsonl").string();
  std::printf("wrote %s (a random %s with the tokenizer of %s) and %s/data/{train,test}.jsonl\n",
              (dir / "model").c_str(), shape.empty() ? "tiny Qwen2" : shape.c_str(), tokenizer.c_str(), dir.c_str());
}
}  // namespace

int main(int argc, char** argv) {
  try {
    std::vector<char const*> args{argv[0]};
    std::string demo_dir, tokenizer, shape;
    for (int i = 1; i < argc; ++i) {
      std::string const a = argv[i];
      if (a == "--write-demo" && i + 1 < argc) demo_dir = argv[++i];
      else if (a == "--tokenizer" && i + 1 < argc) tokenizer = argv[++i];
      else if (a == "--demo-shape" && i + 1 < argc) shape = argv[++i];
      else args.push_back(argv[i]);
    }
    auto cl = rlflow::parse_command_line(static_cast<int>(args.size()), args.data());
    if (cl.help) {
      std::printf("09_grpo_gsm8k: verl's GSM8K quickstart (GRPO) with a Hugging Face model folder\n\n"
                  "usage: %s [--write-demo DIR --tokenizer TOKDIR [--demo-shape NAME]] [--config FILE] [key=value ...]\n\n%s",
                  argv[0], rlflow::config_help(Trainer::program_defaults()).c_str());
      return 0;
    }
    if (!demo_dir.empty() && tokenizer.empty())
      throw rlflow::config_error("09_grpo_gsm8k: --write-demo needs --tokenizer TOKDIR (a folder with tokenizer.json and "
                                 "tokenizer_config.json; make demo DEMO=09_grpo_gsm8k fetches Qwen3's)");
    rlflow::TrainerConfig cfg = Trainer::program_defaults();  // the values the Trainer type fixes
    cfg.trainer.project_name = "rlflow";
    cfg.trainer.experiment_name = "grpo_gsm8k";
    cfg.trainer.default_local_dir = "runs/grpo_gsm8k";
    for (auto const& f : cl.config_files) cfg.apply_file(f);
    if (!demo_dir.empty()) {
      write_demo(demo_dir, tokenizer, shape, cfg);
      cfg.trainer.total_epochs = 1;  // the stand-in: 64 rows, 8 steps, validated after the last
      cfg.trainer.test_freq = 4;
      cfg.trainer.save_freq = -1;
      cfg.actor_rollout_ref.actor.optim.lr = 1e-3;
    }
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
