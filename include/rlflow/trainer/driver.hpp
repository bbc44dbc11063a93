// rlflow/trainer/driver.hpp: the non-template parts of Trainer<Options...>'s driver (the
// prompt batch, rollout seeds, reward-score checks, metric merging and data metrics, printed
// samples, validation metrics, metrics-file trimming, resume checks). Trainer calls these; with
// RLFLOW_SEPARATE_COMPILATION their bodies (impl/trainer_driver.ipp) are compiled once, in the
// compiled part, instead of in every Trainer translation unit.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <rlflow/trainer/checkpoint.hpp>      // write_file_atomic, latest_checkpoint_step, remove_stale_checkpoint_temps
#include <rlflow/core/config.hpp>          // RLFLOW_DECL
#include <rlflow/data/data.hpp>            // PromptItem, PromptDataset
#include <rlflow/detail/json_util.hpp>  // json_preview
#include <rlflow/core/data_proto.hpp>      // DataProto
#include <rlflow/core/metrics.hpp>         // Metrics
#include <rlflow/model/tokenizer.hpp> // model::Tokenizer
#include <rlflow/config/trainer_config.hpp>  // TrainerConfig

namespace rlflow {

//! One validation sample kept for trainer.log_val_generations.
struct ValGeneration {
  std::string data_source, prompt, response, ground_truth;
  double score = 0;
};

namespace detail {

//! A deterministic 64-bit mix (splitmix64) for per-row seeds.
constexpr std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

struct Stat {
  double mean = 0, max = 0, min = 0;
};
RLFLOW_DECL Stat stat_of(std::vector<double> const& v);
RLFLOW_DECL void put_stat(Metrics& m, std::string const& name, std::vector<double> const& v);
//! Values of a (B, R) float tensor at valid tokens.
RLFLOW_DECL std::vector<double> valid_values(Tensor const& x, Tensor const& mask);
//! Per-row sums of a (B, R) float tensor.
RLFLOW_DECL std::vector<double> row_sums(Tensor const& x);

//! input_ids / attention_mask (B, P) int32 left-padded (BOS + prompt), uid, reward_model, data_source.
RLFLOW_DECL DataProto make_prompt_batch(std::vector<PromptItem> const& items, std::int64_t step_no, TrainerConfig const& cfg,
                                        model::Tokenizer const& tok);

//! rollout_seed (rows) int64: a function of (seed, step, row, salt) only, so a sequence's
//! tokens do not depend on the DP layout or on the other rows.
RLFLOW_DECL void add_rollout_seeds(DataProto& d, std::int64_t seed, std::int64_t step_no, std::uint64_t salt);

//! The reward role's result must hold float32 'token_level_scores' of shape (rows, R): a
//! shape_error naming the key and both shapes otherwise, before any later worker runs.
RLFLOW_DECL void check_reward_scores(DataProto const& s, std::int64_t rows, std::int64_t R);

//! The workers' metric lists (roles::MetricLists per rank) reduced to means into m.
RLFLOW_DECL void merge_metric_lists(Metrics& m, std::vector<std::map<std::string, std::vector<double>>> const& per_rank);

//! verl: compute_data_metrics (score, rewards, advantages, returns, values, lengths).
RLFLOW_DECL void data_metrics(DataProto const& batch, Metrics& m, bool has_critic);

//! Prints trainer.log_train_generations rows of this step's batch (Trainer::print_samples).
RLFLOW_DECL void print_samples(DataProto const& batch, std::int64_t log_train_generations, model::Tokenizer const& tok);
RLFLOW_DECL std::string quoted(std::string const& s);

//! Writes every row of this step's batch to '<dir>/<step>.jsonl', one JSON object per line:
//! input (the decoded prompt), output (the decoded response), score (the row's summed
//! token_level_scores), step. verl: RayPPOTrainer._dump_generations (trainer.rollout_data_dir).
RLFLOW_DECL void dump_generations(DataProto const& batch, model::Tokenizer const& tok, std::int64_t step,
                                  std::filesystem::path const& dir);

//! Prompts longer than data.max_prompt_length: an error before any work (truncation=error), or
//! counted (returned) and cut (left / right).
RLFLOW_DECL std::int64_t check_prompts(PromptDataset const& train, model::Tokenizer const& tok, TrainerConfig const& cfg,
                                       bool console);

//! Validation: the seeds of one padded batch (rows from b0 * n on).
RLFLOW_DECL void add_val_seeds(DataProto& gen, std::int64_t seed, std::int64_t global_step, std::int64_t b0, std::int64_t n);

//! Validation: one batch's scores into 'scores' (data_source -> per-prompt score lists) and up
//! to 'max_samples' samples into 'samples'.
RLFLOW_DECL void collect_val_scores(std::vector<PromptItem> const& items, std::int64_t n, DataProto const& out,
                                    DataProto const& sc, std::int64_t max_samples, model::Tokenizer const& tok,
                                    std::map<std::string, std::vector<std::vector<double>>>& scores,
                                    std::vector<ValGeneration>& samples);

//! Validation metrics from the per-prompt score lists (Trainer::validate).
RLFLOW_DECL Metrics val_metrics(std::map<std::string, std::vector<std::vector<double>>> const& scores, std::int64_t n);

//! Prints the kept validation generations on stderr.
RLFLOW_DECL void print_val_generations(std::vector<ValGeneration> const& gens);

//! Rewrites a resumed run's metrics file keeping the lines of steps up to global_step.
RLFLOW_DECL void trim_metrics_file(std::filesystem::path const& path, std::int64_t global_step);

//! Compares the checkpoint's saved config with 'cfg' (Trainer::check_resume_config): a
//! config_error for keys that must match; returns the warning for the other differences
//! (empty when none).
RLFLOW_DECL std::string check_resume_config(nlohmann::json const& saved, std::string const& state_file, TrainerConfig const& cfg);

//! trainer.resume_mode: the checkpoint directory to resume from (none: a fresh run). Removes what
//! killed writers left in the checkpoint root first.
RLFLOW_DECL std::optional<std::filesystem::path> resume_checkpoint_dir(TrainerConfig const& cfg, std::filesystem::path const& root);

}  // namespace detail
}  // namespace rlflow

#if RLFLOW_DEFINE_BODIES
#include <rlflow/trainer/impl/driver.ipp>
#endif
