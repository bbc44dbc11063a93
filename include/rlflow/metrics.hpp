// rlflow/metrics.hpp: per-step metrics with verl's names: Metrics (name -> value), reduction of
// per-worker lists to means (verl reduce_metrics), a JSON-lines writer and a one-line console
// progress display. Does not compute metrics; the trainer does.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>  // one JSON object per line

#include <rlflow/error.hpp>  // io_error

namespace rlflow {

//! One step's metrics, ordered by name. verl: the 'metrics' dict passed to Tracking.log.
using Metrics = std::map<std::string, double>;

//! Mean of each list. verl: verl.utils.metric.reduce_metrics.
inline Metrics reduce_metrics(std::map<std::string, std::vector<double>> const& lists) {
  Metrics out;
  for (auto const& [k, v] : lists) {
    if (v.empty()) continue;
    double s = 0;
    for (double x : v) s += x;
    out[k] = s / static_cast<double>(v.size());
  }
  return out;
}

//! Writes each step as one JSON object per line ({"step": N, "<metric>": value, ...}; non-finite
//! values become null) and prints a progress line with the key metrics. verl: Tracking with the
//! 'console' and 'file' loggers.
class MetricsLogger {
 public:
  MetricsLogger() = default;
  //! 'jsonl' may be empty (no file). 'append' keeps an existing file (used when resuming).
  MetricsLogger(std::filesystem::path jsonl, std::int64_t total_steps, bool console = true, bool append = false)
      : path_(std::move(jsonl)), total_steps_(total_steps), console_(console) {
    if (!path_.empty()) {
      if (path_.has_parent_path()) std::filesystem::create_directories(path_.parent_path());
      file_.open(path_, append ? std::ios::app : std::ios::trunc);
      if (!file_) throw io_error(msg("rlflow::MetricsLogger: cannot open metrics file '", path_.string(), "' for writing"));
    }
  }

  void log(std::int64_t step, Metrics const& m) {
    if (file_.is_open()) {
      nlohmann::ordered_json j;
      j["step"] = step;
      for (auto const& [k, v] : m) {
        if (std::isfinite(v)) j[k] = v;
        else j[k] = nullptr;
      }
      file_ << j.dump() << '\n';
      file_.flush();
      if (!file_) throw io_error(msg("rlflow::MetricsLogger: writing '", path_.string(), "' failed"));
    }
    if (console_) std::fputs((progress_line(step, m) + "\n").c_str(), stdout), std::fflush(stdout);
  }

  //! "step  12/200 | score 0.45 | pg_loss -0.012 | ... | 0.21 s/step"
  std::string progress_line(std::int64_t step, Metrics const& m) const {
    static constexpr std::pair<const char*, const char*> keys[] = {
        {"critic/score/mean", "score"},   {"actor/pg_loss", "pg_loss"},       {"actor/entropy", "entropy"},
        {"actor/ppo_kl", "ppo_kl"},       {"critic/vf_loss", "vf_loss"},     {"actor/grad_norm", "grad_norm"},
        {"response_length/mean", "resp_len"}, {"timing_s/step", "s/step"}};
    char buf[64];
    std::string line;
    std::snprintf(buf, sizeof buf, "step %4lld/%lld", static_cast<long long>(step), static_cast<long long>(total_steps_));
    line += buf;
    for (auto const& [k, label] : keys) {
      auto it = m.find(k);
      if (it == m.end()) continue;
      std::snprintf(buf, sizeof buf, " | %s %.4g", label, it->second);
      line += buf;
    }
    return line;
  }

 private:
  std::filesystem::path path_;
  std::ofstream file_;
  std::int64_t total_steps_ = 0;
  bool console_ = true;
};

}  // namespace rlflow
