// rlflow/metrics.hpp: per-step metrics with verl's names: Metrics (name -> value), reduction of
// per-worker lists to means (verl reduce_metrics), a JSON-lines writer and a one-line console
// progress display. Does not compute metrics; the trainer does.
#pragma once
#include <algorithm>  // std::clamp
#include <chrono>     // elapsed time, ETA
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <unistd.h>  // isatty: the progress bar only on a terminal

#include <nlohmann/json.hpp>  // one JSON object per line

#include <rlflow/error.hpp>  // io_error, config_error

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

//! How the console shows progress. rlflow: trainer.log_freq; the bar is rlflow's own.
struct ConsoleOptions {
  std::int64_t log_freq = 1;  //!< a progress line every this many steps (the first and the last always)
  int progress_bar = -1;      //!< one self-rewriting line on stderr: -1 when stderr is a terminal, 0 never, 1 always
};

//! Writes each step as one JSON object per line ({"step": N, "<metric>": value, ...}; non-finite
//! values become null) and prints a progress line with the key metrics, the elapsed time and an
//! ETA every ConsoleOptions::log_freq steps. verl: Tracking with the 'console' and 'file' loggers.
class MetricsLogger {
 public:
  using clock = std::chrono::steady_clock;

  MetricsLogger() = default;
  //! 'jsonl' may be empty (no file). 'append' keeps an existing file (used when resuming).
  MetricsLogger(std::filesystem::path jsonl, std::int64_t total_steps, bool console = true, bool append = false,
                ConsoleOptions co = {})
      : path_(std::move(jsonl)), total_steps_(total_steps), console_(console), co_(co), start_(clock::now()) {
    if (co_.log_freq < 1)
      throw config_error(msg("rlflow::MetricsLogger: trainer.log_freq=", co_.log_freq, " must be at least 1; set e.g. 10"));
    bar_ = console_ && (co_.progress_bar == 1 || (co_.progress_bar < 0 && ::isatty(2) == 1));
    if (!path_.empty()) {
      if (path_.has_parent_path()) std::filesystem::create_directories(path_.parent_path());
      file_.open(path_, append ? std::ios::app : std::ios::trunc);
      if (!file_) throw io_error(msg("rlflow::MetricsLogger: cannot open metrics file '", path_.string(), "' for writing"));
    }
  }

  //! Whether step 'step' gets a console line (then the trainer may print samples under it).
  bool prints(std::int64_t step) const {
    return console_ && (step % co_.log_freq == 0 || step == total_steps_ || step == first_step_);
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
    if (!console_) return;
    if (first_step_ < 0) first_step_ = step;
    double const elapsed = std::chrono::duration<double>(clock::now() - start_).count();
    if (prints(step)) {
      if (bar_) std::fputs("\r\033[K", stderr);  // the line replaces the bar, which is redrawn below
      std::fputs((progress_line(step, m) + " | " + timing_text(step, elapsed) + "\n").c_str(), stdout);
      std::fflush(stdout);
    }
    if (bar_) {
      std::fputs(("\r\033[K" + progress_bar(step, m, elapsed)).c_str(), stderr);
      if (step == total_steps_) std::fputs("\n", stderr);
      std::fflush(stderr);
    }
  }

  //! "step  12/200 | score 0.45 | pg_loss -0.012 | ... | s/step 0.21"
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

  //! "elapsed 12.3s | eta 40.1s": wall time since this logger started and the remaining steps at
  //! the mean pace of the steps it has seen (a resumed run counts from its first step).
  std::string timing_text(std::int64_t step, double elapsed) const {
    std::int64_t const done = first_step_ >= 0 ? step - first_step_ + 1 : 1;
    double const eta = done > 0 ? elapsed / static_cast<double>(done) * static_cast<double>(total_steps_ - step) : 0.0;
    return "elapsed " + duration_text(elapsed) + " | eta " + duration_text(eta > 0 ? eta : 0.0);
  }

  //! "[#########...........]  42/200  21% | score 0.45 | elapsed 10s | eta 38s"
  std::string progress_bar(std::int64_t step, Metrics const& m, double elapsed) const {
    constexpr int width = 24;
    double const frac = total_steps_ > 0 ? static_cast<double>(step) / static_cast<double>(total_steps_) : 1.0;
    int const filled = std::clamp(static_cast<int>(frac * width + 0.5), 0, width);
    std::string bar;
    bar.reserve(128);
    bar += '[';
    bar.append(static_cast<std::size_t>(filled), '#');
    bar.append(static_cast<std::size_t>(width - filled), '.');
    bar += "] ";
    char buf[96];
    std::snprintf(buf, sizeof buf, "%lld/%lld %3d%%", static_cast<long long>(step), static_cast<long long>(total_steps_),
                  static_cast<int>(frac * 100.0 + 0.5));
    bar += buf;
    if (auto it = m.find("critic/score/mean"); it != m.end()) {
      std::snprintf(buf, sizeof buf, " | score %.4g", it->second);
      bar += buf;
    }
    return bar + " | " + timing_text(step, elapsed);
  }

  //! "8.31s", "2m05s", "1h02m"
  static std::string duration_text(double seconds) {
    char buf[32];
    if (!(seconds < 1e9)) return "?";
    if (seconds < 60) std::snprintf(buf, sizeof buf, "%.1fs", seconds);
    else if (seconds < 3600) std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(seconds / 60), static_cast<int>(seconds) % 60);
    else std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(seconds / 3600), static_cast<int>(seconds / 60) % 60);
    return buf;
  }

 private:
  std::filesystem::path path_;
  std::ofstream file_;
  std::int64_t total_steps_ = 0;
  bool console_ = true;
  ConsoleOptions co_{};
  bool bar_ = false;
  std::int64_t first_step_ = -1;
  clock::time_point start_{};
};

}  // namespace rlflow
