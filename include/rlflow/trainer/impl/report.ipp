// rlflow/trainer/impl/report.ipp: the bodies of rlflow/trainer/report.hpp's functions (the run report:
// reading runs, panels, SVG and HTML; included by that header when RLFLOW_DEFINE_BODIES; see
// rlflow/core/config.hpp).
#pragma once

namespace rlflow::report {
namespace detail {
RLFLOW_DECL void flatten(nlohmann::json const& j, std::string const& prefix, std::map<std::string, std::string>& out) {
  if (j.is_object()) {
    for (auto const& [k, v] : j.items()) flatten(v, prefix.empty() ? k : prefix + "." + k, out);
  } else {
    out[prefix] = j.is_string() ? j.get<std::string>() : j.dump();
  }
}

RLFLOW_DECL nlohmann::json read_json_file(std::filesystem::path const& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in || std::filesystem::is_directory(p)) throw io_error(msg("rlflow_report: cannot read '", p.string(), "'"));
  std::string const text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  // flatten() and dump() recurse per level: a damaged config.json must not exhaust the stack
  ::rlflow::detail::check_json_depth(text, 32, "rlflow_report", "'" + p.string() + "'");
  try {
    return nlohmann::json::parse(text);
  } catch (nlohmann::json::exception const& e) {
    throw format_error(msg("rlflow_report: '", p.string(), "' is not valid JSON (", e.what(), ")"));
  }
}

RLFLOW_DECL void load_config(Run& run, std::filesystem::path const& dir) {
  namespace fs = std::filesystem;
  nlohmann::json cfg;
  if (fs::exists(dir / "config.json")) {
    cfg = read_json_file(dir / "config.json");
    run.config_source = (dir / "config.json").string();
  } else if (fs::is_directory(dir)) {
    long best = -1;
    fs::path best_path;
    for (auto const& e : fs::directory_iterator(dir)) {
      auto const n = e.path().filename().string();
      if (!e.is_directory() || n.rfind("global_step_", 0) != 0) continue;
      try {
        auto const s = std::stol(n.substr(12));
        if (s > best && fs::exists(e.path() / "trainer_state.json")) best = s, best_path = e.path() / "trainer_state.json";
      } catch (std::exception const&) {
      }
    }
    if (best >= 0) {
      auto const st = read_json_file(best_path);
      if (st.contains("config")) cfg = st["config"], run.config_source = best_path.string();
    }
  }
  if (cfg.is_object()) flatten(cfg, "", run.config);
}

}  // namespace detail
RLFLOW_DECL Run load_run(std::string const& spec) {
  namespace fs = std::filesystem;
  Run run;
  std::string path = spec;
  auto const eq = spec.find('=');
  if (eq != std::string::npos && eq > 0 && !fs::exists(spec)) {
    run.name = spec.substr(0, eq);
    path = spec.substr(eq + 1);
  }
  fs::path p(path);
  fs::path dir;
  if (fs::is_directory(p)) {
    dir = p;
    p = p / "metrics.jsonl";
    if (!fs::exists(p))
      throw io_error(msg("rlflow_report: no metrics.jsonl in '", path, "' (expected '", p.string(),
                         "'); give a run folder (trainer.default_local_dir) or a .jsonl file"));
  } else if (!fs::exists(p)) {
    throw io_error(msg("rlflow_report: '", path, "' does not exist; give a run folder (trainer.default_local_dir) or a .jsonl file"));
  } else {
    dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  }
  if (run.name.empty()) {
    auto const abs = fs::absolute(dir).lexically_normal();
    run.name = abs.has_filename() ? abs.filename().string() : abs.parent_path().filename().string();
    if (run.name.empty() || run.name == ".") run.name = p.stem().string();
  }
  run.metrics_file = p;

  std::ifstream in(p);
  if (!in) throw io_error(msg("rlflow_report: cannot read '", p.string(), "'"));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::map<double, nlohmann::json> by_step;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    auto const& line = lines[i];
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    bool const ok = j.is_object() && j.contains("step") && j["step"].is_number();
    if (!ok) {
      if (i + 1 == lines.size() && !j.is_object()) {  // torn last line of a killed run
        ++run.skipped_lines;
        continue;
      }
      throw format_error(msg("rlflow_report: ", p.string(), ":", i + 1, ": not a metrics line (a JSON object with a numeric \"step\"): '",
                             line.substr(0, 80), line.size() > 80 ? "...'" : "'"));
    }
    double const step = j["step"].get<double>();
    by_step[step] = std::move(j);
  }
  std::set<std::string> keys;
  for (auto const& [s, j] : by_step)
    for (auto const& [k, v] : j.items())
      if (k != "step" && (v.is_number() || v.is_null())) keys.insert(k);
  for (auto const& k : keys) run.series[k].reserve(by_step.size());
  for (auto const& [s, j] : by_step) {
    run.steps.push_back(s);
    for (auto const& k : keys) {
      auto const it = j.find(k);
      run.series[k].push_back(it != j.end() && it->is_number() ? it->get<double>() : nan);
    }
  }
  detail::load_config(run, dir);
  return run;
}

RLFLOW_DECL std::vector<double> smooth(std::vector<double> const& v, double w) {
  std::vector<double> out(v.size(), nan);
  double last = 0.0;
  int n = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!std::isfinite(v[i])) continue;
    last = last * w + (1.0 - w) * v[i];
    ++n;
    double const debias = 1.0 - std::pow(w, n);
    out[i] = debias > 0 ? last / debias : v[i];
  }
  return out;
}

RLFLOW_DECL Axis nice_axis(double lo, double hi, int target_ticks) {
  Axis a;
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
  if (hi < lo) std::swap(lo, hi);
  if (hi == lo) {
    double const pad = lo == 0 ? 1.0 : std::abs(lo) * 0.1;
    lo -= pad, hi += pad;
  }
  double const raw = (hi - lo) / std::max(1, target_ticks);
  double const mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * mag * (1 + 1e-9)) {
      step = m * mag;
      break;
    }
  a.lo = std::floor(lo / step) * step;
  a.hi = std::ceil(hi / step) * step;
  for (double t = a.lo; t <= a.hi + step * 1e-6; t += step) a.ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  return a;
}

RLFLOW_DECL std::vector<Panel> default_panels() {
  return {
      {"score", "score / reward (mean)", {"critic/score/mean", "critic/rewards/mean"}, false, ""},
      {"kl", "KL", {"actor/ppo_kl", "actor/kl_loss", "actor/reward_kl_penalty"}, false, ""},
      {"entropy", "entropy", {"actor/entropy"}, false, ""},
      {"response_length", "response length (tokens)", {"response_length/mean", "response_length/max"}, false, ""},
      {"clipfrac", "clip fractions", {"actor/pg_clipfrac", "actor/pg_clipfrac_lower", "critic/vf_clipfrac", "response_length/clip_ratio"}, false, ""},
      {"loss", "losses", {"actor/pg_loss", "critic/vf_loss"}, false, ""},
      {"grad_norm", "grad norm", {"actor/grad_norm", "critic/grad_norm"}, false, ""},
      {"throughput", "throughput (tokens / s / device)", {"perf/throughput"}, false, ""},
      {"timing", "time per stage (s, stacked)", {}, true, "timing_s/step"},
  };
}

RLFLOW_DECL std::vector<std::string> timing_keys(std::vector<Run> const& runs) {
  static constexpr char const* order[] = {"gen", "gen_max", "reward", "old_log_prob", "ref", "values", "adv",
                                          "update_critic", "update_actor", "update_weights", "save_checkpoint"};
  std::set<std::string> have;
  for (auto const& r : runs)
    for (auto const& [k, v] : r.series)
      if (k.rfind("timing_s/", 0) == 0 && k != "timing_s/step") have.insert(k);
  std::vector<std::string> out;
  for (auto const* o : order)
    if (have.erase(std::string("timing_s/") + o)) out.push_back(std::string("timing_s/") + o);
  out.insert(out.end(), have.begin(), have.end());
  return out;
}

namespace detail {
RLFLOW_DECL std::string esc(std::string_view s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default: o += c;
    }
  }
  return o;
}

RLFLOW_DECL std::string num(double v, int prec) {
  char b[48];
  std::snprintf(b, sizeof b, "%.*f", prec, v);
  return b;
}

RLFLOW_DECL std::string tick_label(double v) {
  char b[48];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

RLFLOW_DECL std::string path_d(Frame const& f, std::vector<double> const& xs, std::vector<double> const& ys, std::size_t* points) {
  std::string d;
  bool pen = false;
  std::size_t n = 0;
  for (std::size_t i = 0; i < xs.size() && i < ys.size(); ++i) {
    if (!std::isfinite(ys[i])) {
      pen = false;
      continue;
    }
    d += (pen ? " L" : (d.empty() ? "M" : " M")) + num(f.px(xs[i])) + " " + num(f.py(ys[i]));
    pen = true;
    ++n;
  }
  if (points) *points = n;
  return d;
}

RLFLOW_DECL std::string frame_svg_open(Frame const& f, std::string const& attrs) {
  std::ostringstream s;
  s << "<svg class=\"plot\" width=\"" << f.w << "\" height=\"" << f.h << "\" viewBox=\"0 0 " << f.w << " " << f.h << "\" "
    << attrs << " data-x0=\"" << f.x.lo << "\" data-x1=\"" << f.x.hi << "\" data-y0=\"" << f.y.lo << "\" data-y1=\""
    << f.y.hi << "\" data-ml=\"" << f.ml << "\" data-mr=\"" << f.mr << "\" data-mt=\"" << f.mt << "\" data-mb=\"" << f.mb
    << "\">";
  for (double t : f.y.ticks) {
    s << "<line class=\"grid\" x1=\"" << f.ml << "\" x2=\"" << f.w - f.mr << "\" y1=\"" << num(f.py(t)) << "\" y2=\""
      << num(f.py(t)) << "\"/>";
    s << "<text class=\"tick\" x=\"" << f.ml - 4 << "\" y=\"" << num(f.py(t) + 3.5) << "\" text-anchor=\"end\">"
      << tick_label(t) << "</text>";
  }
  for (double t : f.x.ticks)
    s << "<text class=\"tick\" x=\"" << num(f.px(t)) << "\" y=\"" << f.h - f.mb + 14 << "\" text-anchor=\"middle\">"
      << tick_label(t) << "</text>";
  s << "<text class=\"axis-label\" x=\"" << (f.ml + f.w - f.mr) / 2 << "\" y=\"" << f.h - 4 << "\" text-anchor=\"middle\">step</text>";
  s << "<rect class=\"frame\" x=\"" << f.ml << "\" y=\"" << f.mt << "\" width=\"" << f.w - f.ml - f.mr << "\" height=\""
    << f.h - f.mt - f.mb << "\"/>";
  return s.str();
}

RLFLOW_DECL std::pair<double, double> step_range(std::vector<Run> const& runs) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (auto const& r : runs)
    if (!r.steps.empty()) lo = std::min(lo, r.steps.front()), hi = std::max(hi, r.steps.back());
  return {lo, hi};
}

RLFLOW_DECL std::string line_panel(Panel const& p, std::vector<Run> const& runs, double w) {
  std::vector<std::string> keys;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (auto const& k : p.keys) {
    bool any = false;
    for (auto const& r : runs) {
      auto it = r.series.find(k);
      if (it == r.series.end()) continue;
      for (double v : it->second)
        if (std::isfinite(v)) any = true, lo = std::min(lo, v), hi = std::max(hi, v);
    }
    if (any) keys.push_back(k);
  }
  if (keys.empty()) return {};
  Frame f;
  auto const [xlo, xhi] = step_range(runs);
  f.x = nice_axis(xlo, xhi, 6);
  f.y = nice_axis(lo, hi, 5);
  std::ostringstream s;
  s << "<div class=\"panel\" data-panel=\"" << esc(p.id) << "\"><h3>" << esc(p.title) << "</h3>";
  s << frame_svg_open(f, "data-panel=\"" + esc(p.id) + "\"");
  for (std::size_t ri = 0; ri < runs.size(); ++ri) {
    auto const& r = runs[ri];
    for (std::size_t ki = 0; ki < keys.size(); ++ki) {
      auto it = r.series.find(keys[ki]);
      if (it == r.series.end()) continue;
      std::size_t n = 0;
      auto const raw = path_d(f, r.steps, it->second, &n);
      if (n == 0) continue;
      auto const color = colors[ri % std::size(colors)];
      auto const dash = dashes[ki % std::size(dashes)];
      std::string const attrs = " data-run=\"" + std::to_string(ri) + "\" data-key=\"" + esc(keys[ki]) +
                                "\" data-points=\"" + std::to_string(n) + "\" stroke=\"" + color + "\"" +
                                (*dash ? std::string(" stroke-dasharray=\"") + dash + "\"" : std::string());
      s << "<path class=\"raw\"" << attrs << " d=\"" << raw << "\"/>";
      s << "<path class=\"smoothed\"" << attrs << " d=\"" << path_d(f, r.steps, smooth(it->second, w), nullptr) << "\"><title>"
        << esc(r.name) << ": " << esc(keys[ki]) << "</title></path>";
    }
  }
  s << "</svg><div class=\"keys\">";
  for (std::size_t ki = 0; ki < keys.size(); ++ki) {
    auto const dash = dashes[ki % std::size(dashes)];
    s << "<span class=\"key\"><svg width=\"26\" height=\"8\"><line x1=\"0\" y1=\"4\" x2=\"26\" y2=\"4\" stroke=\"#333\" stroke-width=\"2\""
      << (*dash ? std::string(" stroke-dasharray=\"") + dash + "\"" : std::string()) << "/></svg> " << esc(keys[ki]) << "</span>";
  }
  s << "</div></div>";
  return s.str();
}

RLFLOW_DECL std::string stacked_panel(Panel const& p, std::vector<std::string> const& stages, Run const& r, std::size_t ri,
                                      std::vector<Run> const& runs) {
  std::vector<std::string> have;
  for (auto const& k : stages)
    if (r.series.count(k)) have.push_back(k);
  if (have.empty()) return {};
  std::size_t const n = r.steps.size();
  std::vector<std::vector<double>> cum(have.size() + 1, std::vector<double>(n, 0.0));
  double hi = 0;
  for (std::size_t k = 0; k < have.size(); ++k) {
    auto const& v = r.series.at(have[k]);
    for (std::size_t i = 0; i < n; ++i) {
      cum[k + 1][i] = cum[k][i] + (std::isfinite(v[i]) ? v[i] : 0.0);
      hi = std::max(hi, cum[k + 1][i]);
    }
  }
  auto const tot = r.series.find(p.total_key);
  if (tot != r.series.end())
    for (double v : tot->second)
      if (std::isfinite(v)) hi = std::max(hi, v);
  Frame f;
  auto const [xlo, xhi] = step_range(runs);
  f.x = nice_axis(xlo, xhi, 6);
  f.y = nice_axis(0, hi, 5);
  std::ostringstream s;
  s << "<div class=\"panel\" data-panel=\"" << esc(p.id) << "\" data-run=\"" << ri << "\"><h3>" << esc(p.title) << ": "
    << esc(r.name) << "</h3>";
  s << frame_svg_open(f, "data-panel=\"" + esc(p.id) + "\" data-run=\"" + std::to_string(ri) + "\"");
  for (std::size_t k = 0; k < have.size(); ++k) {
    std::string d;
    for (std::size_t i = 0; i < n; ++i) d += (i ? " L" : "M") + num(f.px(r.steps[i])) + " " + num(f.py(cum[k + 1][i]));
    for (std::size_t i = n; i-- > 0;) d += " L" + num(f.px(r.steps[i])) + " " + num(f.py(cum[k][i]));
    s << "<path class=\"area\" data-key=\"" << esc(have[k]) << "\" data-points=\"" << n << "\" fill=\""
      << fills[k % std::size(fills)] << "\" d=\"" << d << " Z\"><title>" << esc(have[k]) << "</title></path>";
  }
  if (tot != r.series.end()) {
    std::size_t cnt = 0;
    auto const d = path_d(f, r.steps, tot->second, &cnt);
    s << "<path class=\"total\" data-key=\"" << esc(p.total_key) << "\" data-points=\"" << cnt << "\" d=\"" << d
      << "\"><title>" << esc(p.total_key) << "</title></path>";
  }
  s << "</svg><div class=\"keys\">";
  for (std::size_t k = 0; k < have.size(); ++k)
    s << "<span class=\"key\"><span class=\"swatch\" style=\"background:" << fills[k % std::size(fills)] << "\"></span> "
      << esc(have[k].substr(9)) << "</span>";
  if (tot != r.series.end()) s << "<span class=\"key\"><span class=\"swatch total\"></span> step (total)</span>";
  s << "</div></div>";
  return s.str();
}

RLFLOW_DECL double mean_last(std::vector<double> const& v, std::size_t count) {
  double s = 0;
  std::size_t n = 0;
  for (std::size_t i = v.size(); i-- > 0 && n < count;)
    if (std::isfinite(v[i])) s += v[i], ++n;
  return n ? s / static_cast<double>(n) : nan;
}

}  // namespace detail
RLFLOW_DECL std::string render_html(std::vector<Run> const& runs, Options const& opt) {
  using detail::esc;
  if (runs.empty()) throw config_error("rlflow_report: no runs to report; give at least one run folder or metrics.jsonl");
  if (!(opt.smoothing >= 0.0 && opt.smoothing < 1.0))
    throw config_error(msg("rlflow_report: smoothing=", opt.smoothing, " is outside [0, 1); use e.g. 0.6 (0: none)"));
  std::ostringstream h;
  h << "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" << esc(opt.title) << "</title><style>"
    << detail::style << "</style></head>\n<body>\n<header><h1>" << esc(opt.title) << "</h1><div class=\"controls\"><div class=\"runs\">";
  for (std::size_t i = 0; i < runs.size(); ++i)
    h << "<span class=\"run\" data-run=\"" << i << "\"><span class=\"swatch\" style=\"background:"
      << detail::colors[i % std::size(detail::colors)] << "\"></span>" << esc(runs[i].name) << " <small>("
      << runs[i].steps.size() << " steps)</small></span>";
  h << "</div><label>smoothing <input type=\"range\" id=\"smoothing\" min=\"0\" max=\"0.99\" step=\"0.01\" value=\""
    << detail::num(opt.smoothing) << "\"> <output id=\"smoothing-value\">" << detail::num(opt.smoothing)
    << "</output></label><label><input type=\"checkbox\" id=\"show-raw\" checked> raw values</label></div></header>\n";

  // summary
  h << "<h2>Runs</h2><table id=\"summary\"><tr><th>run</th><th>metrics file</th><th>steps</th><th>last step</th>"
       "<th>score (mean of last 10)</th><th>time of all steps (s)</th><th>throughput (mean of last 10)</th></tr>";
  for (std::size_t i = 0; i < runs.size(); ++i) {
    auto const& r = runs[i];
    auto get = [&](char const* k) { auto it = r.series.find(k); return it == r.series.end() ? std::vector<double>{} : it->second; };
    double total = 0;
    for (double v : get("timing_s/step"))
      if (std::isfinite(v)) total += v;
    auto const score = detail::mean_last(get("critic/score/mean"), 10), thr = detail::mean_last(get("perf/throughput"), 10);
    h << "<tr data-run=\"" << i << "\"><td>" << esc(r.name) << "</td><td><code>" << esc(r.metrics_file.string())
      << "</code></td><td class=\"num\">" << r.steps.size() << "</td><td class=\"num\">"
      << (r.steps.empty() ? std::string("-") : detail::tick_label(r.steps.back())) << "</td><td class=\"num\">"
      << (std::isfinite(score) ? detail::num(score, 4) : "-") << "</td><td class=\"num\">" << detail::num(total, 2)
      << "</td><td class=\"num\">" << (std::isfinite(thr) ? detail::num(thr, 1) : "-") << "</td></tr>";
  }
  h << "</table>";
  for (auto const& r : runs)
    if (r.skipped_lines) h << "<p class=\"note\">" << esc(r.name) << ": skipped a torn last line (a killed run).</p>";

  // plots
  h << "<h2>Metrics against steps</h2><div class=\"grid-panels\" id=\"panels\">";
  auto const stages = timing_keys(runs);
  for (auto const& p : default_panels()) {
    if (!p.stacked) {
      h << detail::line_panel(p, runs, opt.smoothing);
    } else {
      for (std::size_t i = 0; i < runs.size(); ++i) h << detail::stacked_panel(p, stages, runs[i], i, runs);
    }
  }
  h << "</div>";

  // config
  std::set<std::string> keys;
  for (auto const& r : runs)
    for (auto const& [k, v] : r.config) keys.insert(k);
  h << "<h2>Configuration</h2>";
  if (keys.empty()) {
    h << "<p class=\"note\">No config found (config.json or global_step_N/trainer_state.json next to the metrics).</p>";
  } else {
    bool const diff_only = runs.size() > 1;  // comparing runs: start with the keys that differ
    h << "<p class=\"note\"><label><input type=\"checkbox\" id=\"config-diff-only\"" << (diff_only ? " checked" : "")
      << "> only keys that differ between runs</label>";
    for (auto const& r : runs)
      if (!r.config_source.empty()) h << " &middot; " << esc(r.name) << ": <code>" << esc(r.config_source) << "</code>";
    h << "</p><table id=\"config\"><tr><th>key</th>";
    for (auto const& r : runs) h << "<th>" << esc(r.name) << "</th>";
    h << "</tr>";
    for (auto const& k : keys) {
      std::set<std::string> vals;
      std::vector<std::string> row;
      for (auto const& r : runs) {
        auto it = r.config.find(k);
        row.push_back(it == r.config.end() ? std::string() : it->second);
        vals.insert(row.back());
      }
      bool const same = vals.size() == 1;
      h << "<tr class=\"" << (same ? "same" : "differs") << "\" data-key=\"" << esc(k) << "\""
        << (same && diff_only ? " style=\"display:none\"" : "") << "><td><code>" << esc(k) << "</code></td>";
      for (auto const& v : row) h << "<td>" << esc(v) << "</td>";
      h << "</tr>";
    }
    h << "</table>";
  }

  // the data the script re-smooths (only the series that are plotted)
  std::set<std::string> plotted(stages.begin(), stages.end());
  for (auto const& p : default_panels()) plotted.insert(p.keys.begin(), p.keys.end());
  nlohmann::json data;
  data["smoothing"] = opt.smoothing;
  data["runs"] = nlohmann::json::array();
  for (auto const& r : runs) {
    nlohmann::json jr;
    jr["name"] = r.name;
    jr["steps"] = r.steps;
    jr["series"] = nlohmann::json::object();
    for (auto const& [k, v] : r.series) {
      if (!plotted.count(k)) continue;
      auto& arr = jr["series"][k] = nlohmann::json::array();
      for (double x : v) arr.push_back(std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr));
    }
    data["runs"].push_back(std::move(jr));
  }
  auto text = data.dump();
  // '<' only occurs inside JSON strings: \u003c keeps the block from closing or opening a tag
  for (std::size_t pos = 0; (pos = text.find('<', pos)) != std::string::npos;) text.replace(pos, 1, "\\u003c");
  h << "\n<script type=\"application/json\" id=\"report-data\">" << text << "</script>\n<script>" << detail::script
    << "</script>\n<footer>written by rlflow_report &middot; smoothing: TensorBoard's debiased exponential moving average"
       "</footer>\n</body></html>\n";
  return h.str();
}

RLFLOW_DECL int report_main(int argc, char const* const* argv, std::ostream& out, std::ostream& err) {
  try {
    std::vector<std::string> specs;
    std::string output;
    Options opt;
    for (int i = 1; i < argc; ++i) {
      std::string_view const a = argv[i];
      auto need = [&](std::string_view flag) -> std::string {
        if (i + 1 >= argc) throw config_error(msg("rlflow_report: '", flag, "' needs a value"));
        return argv[++i];
      };
      if (a == "-h" || a == "--help") {
        out << "usage: rlflow_report [-o FILE.html] [--title TEXT] [--smoothing W] RUN [RUN...]\n"
               "  RUN: a run folder holding metrics.jsonl (trainer.default_local_dir) or a .jsonl file; name=RUN names it\n"
               "Writes one self-contained HTML report (SVG plots, runs overlaid, smoothing, config table).\n";
        return 0;
      } else if (a == "-o" || a == "--output") {
        output = need(a);
      } else if (a == "--title") {
        opt.title = need(a);
      } else if (a == "--smoothing") {
        auto const v = need(a);
        try {
          std::size_t used = 0;
          opt.smoothing = std::stod(v, &used);
          if (used != v.size()) throw std::invalid_argument(v);
        } catch (std::exception const&) {
          throw config_error(msg("rlflow_report: --smoothing '", v, "' is not a number; use e.g. 0.6"));
        }
      } else if (!a.empty() && a[0] == '-') {
        throw config_error(msg("rlflow_report: unknown option '", a, "'; see --help"));
      } else {
        specs.emplace_back(a);
      }
    }
    if (specs.empty()) throw config_error("rlflow_report: no runs given; usage: rlflow_report [-o FILE.html] RUN [RUN...]");
    std::vector<Run> runs;
    for (auto const& s : specs) runs.push_back(load_run(s));
    if (output.empty())
      output = runs.size() == 1 ? (runs[0].metrics_file.parent_path() / "report.html").string() : std::string("report.html");
    auto const html = render_html(runs, opt);
    std::filesystem::path const op(output);
    if (op.has_parent_path()) std::filesystem::create_directories(op.parent_path());
    std::ofstream f(op, std::ios::trunc);
    f << html;
    f.close();
    if (!f) throw io_error(msg("rlflow_report: cannot write '", output, "'"));
    std::size_t steps = 0;
    for (auto const& r : runs) steps += r.steps.size();
    out << "wrote " << output << " (" << runs.size() << (runs.size() == 1 ? " run, " : " runs, ") << steps << " steps)\n";
    return 0;
  } catch (error const& e) {
    err << e.what() << "\n";
    return 2;
  }
}

}  // namespace rlflow::report
