// rlflow/trainer/report.hpp: the run report ('rlflow_report', 'make report RUN=runs/<name>'). Reads the
// metrics.jsonl of one or more runs (MetricsLogger's format: one {"step": N, "<metric>": value}
// object per line, null for non-finite values) and writes one self-contained HTML page: SVG line
// plots of score / reward, KL, entropy, response length, clip fractions, losses, grad norm and
// throughput against steps with the runs overlaid, the per-stage timing breakdown stacked, a
// smoothing control (TensorBoard's debiased EMA), and each run's config as a table. Nothing is
// loaded from the network; the page's small script is inline. Does not run anything.
#pragma once
#include <algorithm>   // std::sort, std::max
#include <cmath>       // std::isfinite, std::pow, std::floor, std::log10
#include <cstdint>
#include <cstdio>      // std::snprintf
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <ostream>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>  // metrics lines, configs, the page's data block

#include <rlflow/core/config.hpp>  // RLFLOW_DECL, RLFLOW_DEFINE_BODIES
#include <rlflow/detail/json_text.hpp>  // check_json_depth
#include <rlflow/core/error.hpp>  // io_error, format_error, config_error, msg

namespace rlflow::report {

inline constexpr double nan = std::numeric_limits<double>::quiet_NaN();

//! One run: its steps and every metric as a series aligned with them (NaN where a line lacks
//! the metric or holds null), plus its config flattened to dotted keys when one was found.
struct Run {
  std::string name;
  std::filesystem::path metrics_file;
  std::vector<double> steps;
  std::map<std::string, std::vector<double>> series;
  std::map<std::string, std::string> config;  //!< "data.train_batch_size" -> "1024" (JSON text of the value)
  std::string config_source;                  //!< the file the config came from, or empty
  std::size_t skipped_lines = 0;              //!< a torn last line (killed run) is skipped and counted
};

namespace detail {
RLFLOW_DECL void flatten(nlohmann::json const& j, std::string const& prefix, std::map<std::string, std::string>& out);

RLFLOW_DECL nlohmann::json read_json_file(std::filesystem::path const& p);

//! The run's config: <dir>/config.json (written by the Trainer), else the newest
//! <dir>/global_step_N/trainer_state.json's "config".
RLFLOW_DECL void load_config(Run& run, std::filesystem::path const& dir);
}  // namespace detail

//! Loads one run. 'spec' is "[name=]path" where path is a run folder holding metrics.jsonl (a
//! trainer.default_local_dir) or a .jsonl file; the name defaults to the folder's name. Lines are
//! ordered by step (a repeated step keeps its last line). Throws io_error for a missing file and
//! format_error naming the file and line for a line that is not a JSON object with a "step"
//! (a torn last line, as a killed run leaves, is skipped and counted in skipped_lines).
RLFLOW_DECL Run load_run(std::string const& spec);

//! TensorBoard's smoothing: a debiased exponential moving average with weight w in [0, 1);
//! non-finite values stay NaN and do not enter the average. w = 0 returns the values.
RLFLOW_DECL std::vector<double> smooth(std::vector<double> const& v, double w);

//! An axis over [lo, hi] widened to round numbers, with ticks at steps of 1, 2 or 5 × 10^k.
struct Axis {
  double lo = 0, hi = 1;
  std::vector<double> ticks;
};
RLFLOW_DECL Axis nice_axis(double lo, double hi, int target_ticks = 5);

//! One plot of the report: the metrics drawn in it (each run overlaid), or a stacked breakdown.
struct Panel {
  std::string id;
  std::string title;
  std::vector<std::string> keys;
  bool stacked = false;    //!< draw the keys stacked (one plot per run): the timing breakdown
  std::string total_key;   //!< stacked: a line for the total (timing_s/step)
};

//! The report's plots. Metrics a run lacks are left out; a plot whose metrics no run has is not drawn.
RLFLOW_DECL std::vector<Panel> default_panels();

//! The stages of timing_s/* in the order a step runs them (others follow, by name).
RLFLOW_DECL std::vector<std::string> timing_keys(std::vector<Run> const& runs);

struct Options {
  std::string title = "rlflow run report";
  double smoothing = 0.6;  //!< initial smoothing weight (the page's slider changes it)
};

namespace detail {
RLFLOW_DECL std::string esc(std::string_view s);
RLFLOW_DECL std::string num(double v, int prec = 2);
RLFLOW_DECL std::string tick_label(double v);
inline constexpr char const* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"};
inline constexpr char const* dashes[] = {"", "6 3", "2 3", "8 3 2 3"};
inline constexpr char const* fills[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
                                        "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac", "#86bcb6"};

//! The plot box: SVG size and margins; x = steps, y = values.
struct Frame {
  double w = 460, h = 240, ml = 58, mr = 12, mt = 10, mb = 32;
  Axis x, y;
  double px(double v) const { return ml + (v - x.lo) / (x.hi - x.lo) * (w - ml - mr); }
  double py(double v) const { return h - mb - (v - y.lo) / (y.hi - y.lo) * (h - mt - mb); }
};

//! "M x y L x y ..." through the finite points; a NaN starts a new segment.
RLFLOW_DECL std::string path_d(Frame const& f, std::vector<double> const& xs, std::vector<double> const& ys, std::size_t* points);

RLFLOW_DECL std::string frame_svg_open(Frame const& f, std::string const& attrs);

RLFLOW_DECL std::pair<double, double> step_range(std::vector<Run> const& runs);

//! One line panel: every (run, key) with data, raw (faint) and smoothed.
RLFLOW_DECL std::string line_panel(Panel const& p, std::vector<Run> const& runs, double w);

//! The timing breakdown of one run: the stages stacked as areas, the step total as a line.
RLFLOW_DECL std::string stacked_panel(Panel const& p, std::vector<std::string> const& stages, Run const& r, std::size_t ri,
                                      std::vector<Run> const& runs);

RLFLOW_DECL double mean_last(std::vector<double> const& v, std::size_t count);

inline constexpr char const* style = R"css(
body{margin:0;font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d2430;background:#f7f8fa}
header{padding:14px 20px 10px;background:#fff;border-bottom:1px solid #d5dae3}
h1{margin:0 0 6px;font-size:20px}h2{font-size:16px;margin:18px 20px 8px}h3{font-size:13px;margin:0 0 4px}
.controls{display:flex;gap:18px;align-items:center;flex-wrap:wrap}
.runs .run{display:inline-flex;align-items:center;gap:5px;margin-right:14px}
.runs .swatch,.keys .swatch{display:inline-block;width:14px;height:10px;border-radius:2px}
.keys .swatch.total{background:#111;height:2px}
.grid-panels{display:grid;grid-template-columns:repeat(auto-fill,minmax(470px,1fr));gap:12px;padding:0 20px}
.panel{background:#fff;border:1px solid #d5dae3;border-radius:6px;padding:8px}
.plot .grid{stroke:#e6e9ef;stroke-width:1}.plot .frame{fill:none;stroke:#b9c0cc}
.plot .tick,.plot .axis-label{font-size:10.5px;fill:#5b6575}
.plot path.raw{fill:none;stroke-width:1;opacity:.25}.plot path.smoothed{fill:none;stroke-width:2}
.plot path.area{stroke:none;opacity:.9}.plot path.total{fill:none;stroke:#111;stroke-width:1.5}
.keys{font-size:11.5px;color:#444}.keys .key{margin-right:12px;white-space:nowrap}
table{border-collapse:collapse;background:#fff;font-size:12.5px;margin:0 20px}
td,th{border:1px solid #d5dae3;padding:3px 8px;text-align:left;vertical-align:top}th{background:#eef1f6}
td.num{text-align:right;font-family:ui-monospace,monospace}tr.differs td{background:#fff6e0}
code{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:12px}
.note{color:#5b6575;margin:4px 20px}footer{padding:14px 20px;color:#5b6575;font-size:12px}
)css";

// The page's only script: re-smooths the plotted lines when the slider moves (the same EMA as
// rlflow::report::smooth, from the data block), and filters the config table.
inline constexpr char const* script = R"js(
(function(){'use strict';
const data=JSON.parse(document.getElementById('report-data').textContent);
function smooth(v,w){const out=new Array(v.length).fill(null);let last=0,n=0;
 for(let i=0;i<v.length;++i){const x=v[i];if(x===null||!isFinite(x))continue;last=last*w+(1-w)*x;++n;
  const d=1-Math.pow(w,n);out[i]=d>0?last/d:x;}return out;}
function pathD(svg,xs,ys){const a=svg.dataset,x0=+a.x0,x1=+a.x1,y0=+a.y0,y1=+a.y1,ml=+a.ml,mr=+a.mr,mt=+a.mt,mb=+a.mb;
 const W=+svg.getAttribute('width'),H=+svg.getAttribute('height');let d='',pen=false;
 for(let i=0;i<xs.length;++i){const y=ys[i];if(y===null||!isFinite(y)){pen=false;continue;}
  const px=ml+(xs[i]-x0)/(x1-x0)*(W-ml-mr),py=H-mb-(y-y0)/(y1-y0)*(H-mt-mb);
  d+=(pen?' L':(d?' M':'M'))+px.toFixed(2)+' '+py.toFixed(2);pen=true;}return d;}
function resmooth(w){for(const p of document.querySelectorAll('path.smoothed')){const svg=p.ownerSVGElement;
  const run=data.runs[+p.dataset.run];p.setAttribute('d',pathD(svg,run.steps,smooth(run.series[p.dataset.key],w)));}}
const s=document.getElementById('smoothing'),out=document.getElementById('smoothing-value');
s.addEventListener('input',()=>{const w=+s.value;out.textContent=w.toFixed(2);resmooth(w);});
const raw=document.getElementById('show-raw');
raw.addEventListener('change',()=>{for(const p of document.querySelectorAll('path.raw'))p.style.display=raw.checked?'':'none';});
const diff=document.getElementById('config-diff-only');
if(diff)diff.addEventListener('change',()=>{for(const r of document.querySelectorAll('#config tr.same'))r.style.display=diff.checked?'none':'';});
window.rlflowReport={smooth,resmooth,data};document.body.dataset.ready='true';
})();
)js";
}  // namespace detail

//! The whole report as one HTML document (no external resources).
RLFLOW_DECL std::string render_html(std::vector<Run> const& runs, Options const& opt = {});

//! 'rlflow_report [-o FILE] [--title TEXT] [--smoothing W] RUN...': RUN is a run folder
//! (trainer.default_local_dir, holding metrics.jsonl) or a .jsonl file, optionally 'name=path'.
//! Writes FILE (default: <the one run's folder>/report.html, or report.html for several runs)
//! and prints its path; returns 0, or 2 with the error on 'err'.
RLFLOW_DECL int report_main(int argc, char const* const* argv, std::ostream& out, std::ostream& err);

}  // namespace rlflow::report

#if RLFLOW_DEFINE_BODIES
#include <rlflow/trainer/impl/report.ipp>
#endif
