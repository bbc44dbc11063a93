// rlflow/core/metrics.hpp: per-step metrics with verl's names: Metrics (name -> value), reduction of
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

#include <rlflow/core/config.hpp>  // RLFLOW_DECL
#include <rlflow/core/error.hpp>  // io_error, config_error

namespace rlflow {

//! One step's metrics, ordered by name. verl: the 'metrics' dict passed to Tracking.log.
using Metrics = std::map<std::string, double>;

//! Mean of each list. verl: verl.utils.metric.reduce_metrics.
RLFLOW_DECL Metrics reduce_metrics(std::map<std::string, std::vector<double>> const& lists);

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
                ConsoleOptions co = {});

  //! Whether step 'step' gets a console line (then the trainer may print samples under it).
  bool prints(std::int64_t step) const {
    return console_ && (step % co_.log_freq == 0 || step == total_steps_ || step == first_step_);
  }

  void log(std::int64_t step, Metrics const& m);

  //! "step  12/200 | score 0.45 | pg_loss -0.012 | ... | s/step 0.21"
  std::string progress_line(std::int64_t step, Metrics const& m) const;

  //! "elapsed 12.3s | eta 40.1s": wall time since this logger started and the remaining steps at
  //! the mean pace of the steps it has seen (a resumed run counts from its first step).
  std::string timing_text(std::int64_t step, double elapsed) const;

  //! "[#########...........]  42/200  21% | score 0.45 | elapsed 10s | eta 38s"
  std::string progress_bar(std::int64_t step, Metrics const& m, double elapsed) const;

  //! "8.31s", "2m05s", "1h02m"
  static std::string duration_text(double seconds);

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

#if RLFLOW_DEFINE_BODIES
#include <rlflow/core/impl/metrics.ipp>
#endif
