// rlflow/core/impl/metrics.ipp: the bodies of rlflow/core/metrics.hpp's non-template functions (config.hpp, RLFLOW_DECL).
#pragma once

namespace rlflow {

RLFLOW_DECL Metrics reduce_metrics(std::map<std::string, std::vector<double>> const& lists) {
  Metrics out;
  for (auto const& [k, v] : lists) {
    if (v.empty()) continue;
    double s = 0;
    for (double x : v) s += x;
    out[k] = s / static_cast<double>(v.size());
  }
  return out;
}

RLFLOW_DECL MetricsLogger::MetricsLogger(std::filesystem::path jsonl, std::int64_t total_steps, bool console, bool append,
              ConsoleOptions co)
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

RLFLOW_DECL void MetricsLogger::log(std::int64_t step, Metrics const& m) {
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

RLFLOW_DECL std::string MetricsLogger::progress_line(std::int64_t step, Metrics const& m) const {
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

RLFLOW_DECL std::string MetricsLogger::timing_text(std::int64_t step, double elapsed) const {
  std::int64_t const done = first_step_ >= 0 ? step - first_step_ + 1 : 1;
  double const eta = done > 0 ? elapsed / static_cast<double>(done) * static_cast<double>(total_steps_ - step) : 0.0;
  return "elapsed " + duration_text(elapsed) + " | eta " + duration_text(eta > 0 ? eta : 0.0);
}

RLFLOW_DECL std::string MetricsLogger::progress_bar(std::int64_t step, Metrics const& m, double elapsed) const {
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

RLFLOW_DECL std::string MetricsLogger::duration_text(double seconds) {
  char buf[32];
  if (!(seconds < 1e9)) return "?";
  if (seconds < 60) std::snprintf(buf, sizeof buf, "%.1fs", seconds);
  else if (seconds < 3600) std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(seconds / 60), static_cast<int>(seconds) % 60);
  else std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(seconds / 3600), static_cast<int>(seconds / 60) % 60);
  return buf;
}

}  // namespace rlflow
