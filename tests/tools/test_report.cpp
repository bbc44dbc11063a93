// Tests of rlflow/trainer/report.hpp: loading metrics.jsonl (order, gaps, nulls, torn last line, errors),
// the smoothing against TensorBoard's closed form, axis ticks, and the rendered SVG: each path's
// vertices map back to the data through the plot's axes, over random runs; the config table; no
// external resources; escaping.
#include <catch2/catch.hpp>

#include <unistd.h>  // getpid: one temporary folder per test process

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include <rlflow/trainer/report.hpp>

namespace test_report {

namespace fs = std::filesystem;
using rlflow::report::Run;

namespace {
struct TempDir {
  fs::path path;
  explicit TempDir(std::string const& name) : path(fs::temp_directory_path() / ("rlflow_test_report_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};
void write(fs::path const& p, std::string const& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}
// TensorBoard's smoothing as a closed form: sum_j w^(k-j) (1-w) x_j / (1 - w^k) over the k finite values so far
std::vector<double> smooth_reference(std::vector<double> const& v, double w) {
  std::vector<double> out(v.size(), std::nan(""));
  std::vector<double> seen;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!std::isfinite(v[i])) continue;
    seen.push_back(v[i]);
    double num = 0;
    auto const k = seen.size();
    for (std::size_t j = 0; j < k; ++j) num += std::pow(w, static_cast<double>(k - 1 - j)) * (1 - w) * seen[j];
    out[i] = w == 0 ? v[i] : num / (1 - std::pow(w, static_cast<double>(k)));
  }
  return out;
}
}  // namespace

TEST_CASE("report: load_run orders by step, keeps nulls and gaps as NaN", "[tools][report]") {
  TempDir d("load");
  write(d.path / "run" / "metrics.jsonl",
        "{\"step\":2,\"a\":2.5,\"b\":null}\n"
        "{\"step\":1,\"a\":1.0,\"b\":3}\n"
        "\n"
        "{\"step\":3,\"b\":4,\"note\":\"text is ignored\"}\n"
        "{\"step\":2,\"a\":2.0,\"b\":null}\n"  // a repeated step keeps its last line
        "{\"step\":4,\"a\":4");                // torn last line
  auto const r = rlflow::report::load_run((d.path / "run").string());
  CHECK(r.name == "run");
  CHECK(r.steps == std::vector<double>{1, 2, 3});
  REQUIRE(r.series.count("a"));
  CHECK(r.series.at("a")[0] == 1.0);
  CHECK(r.series.at("a")[1] == 2.0);
  CHECK(std::isnan(r.series.at("a")[2]));
  CHECK(std::isnan(r.series.at("b")[1]));
  CHECK(r.series.at("b")[2] == 4.0);
  CHECK(r.series.count("note") == 0);
  CHECK(r.skipped_lines == 1);
  CHECK(r.config.empty());

  auto const named = rlflow::report::load_run("mine=" + (d.path / "run" / "metrics.jsonl").string());
  CHECK(named.name == "mine");
  CHECK(named.steps.size() == 3);
}

TEST_CASE("report: load_run errors name the file, the line and the fix", "[tools][report]") {
  TempDir d("errors");
  CHECK_THROWS_WITH(rlflow::report::load_run((d.path / "nothing").string()), Catch::Contains("does not exist"));
  fs::create_directories(d.path / "empty_run");
  CHECK_THROWS_WITH(rlflow::report::load_run((d.path / "empty_run").string()), Catch::Contains("no metrics.jsonl in"));
  write(d.path / "bad" / "metrics.jsonl", "{\"step\":1,\"a\":1}\nnot json\n{\"step\":3,\"a\":1}\n");
  CHECK_THROWS_AS(rlflow::report::load_run((d.path / "bad").string()), rlflow::format_error);
  CHECK_THROWS_WITH(rlflow::report::load_run((d.path / "bad").string()), Catch::Contains("metrics.jsonl:2:"));
  write(d.path / "nostep" / "metrics.jsonl", "{\"a\":1}\n{\"step\":2}\n");
  CHECK_THROWS_WITH(rlflow::report::load_run((d.path / "nostep").string()), Catch::Contains(":1: not a metrics line"));
}

TEST_CASE("report: the config comes from config.json or the newest checkpoint", "[tools][report]") {
  TempDir d("config");
  write(d.path / "a" / "metrics.jsonl", "{\"step\":1,\"x\":1}\n");
  write(d.path / "a" / "config.json", R"({"data": {"train_batch_size": 32}, "trainer": {"v1": {"trainer_mode": "sync"}}, "seed": 1})");
  write(d.path / "b" / "metrics.jsonl", "{\"step\":1,\"x\":2}\n");
  write(d.path / "b" / "global_step_5" / "trainer_state.json", R"({"config": {"seed": 5}})");
  write(d.path / "b" / "global_step_10" / "trainer_state.json", R"({"config": {"seed": 10, "data": {"train_batch_size": 32}}})");
  auto const a = rlflow::report::load_run((d.path / "a").string());
  auto const b = rlflow::report::load_run((d.path / "b").string());
  CHECK(a.config.at("data.train_batch_size") == "32");
  CHECK(a.config.at("trainer.v1.trainer_mode") == "sync");
  CHECK(b.config.at("seed") == "10");
  CHECK(b.config_source.find("global_step_10") != std::string::npos);
  auto const html = rlflow::report::render_html({a, b});
  CHECK(std::regex_search(html, std::regex(R"(<tr class="differs" data-key="seed"><td><code>seed</code></td><td>1</td><td>10</td></tr>)")));
  CHECK(std::regex_search(html, std::regex(R"(<tr class="same" data-key="data.train_batch_size" style="display:none">)")));
  CHECK(std::regex_search(html, std::regex(R"(<tr class="differs" data-key="trainer.v1.trainer_mode">.*<td>sync</td><td></td></tr>)")));
  // a damaged, deeply nested config.json is a format_error naming it (flatten() recursed per level: a stack overflow)
  write(d.path / "deep" / "metrics.jsonl", "{\"step\":1,\"x\":1}\n");
  write(d.path / "deep" / "config.json", "{\"a\": " + std::string(300000, '[') + std::string(300000, ']') + "}");
  CHECK_THROWS_AS(rlflow::report::load_run((d.path / "deep").string()), rlflow::format_error);
  CHECK_THROWS_WITH(rlflow::report::load_run((d.path / "deep").string()), Catch::Contains("config.json' nests JSON 300001 levels"));
}

TEST_CASE("report: smoothing equals TensorBoard's closed form", "[tools][report]") {
  std::mt19937 rng(5);
  std::normal_distribution<double> g(0, 3);
  for (double w : {0.0, 0.3, 0.6, 0.9, 0.99}) {
    std::vector<double> v(57);
    for (auto& x : v) x = rng() % 7 == 0 ? std::nan("") : g(rng);
    auto const got = rlflow::report::smooth(v, w), want = smooth_reference(v, w);
    for (std::size_t i = 0; i < v.size(); ++i) {
      INFO("w=" << w << " i=" << i);
      CHECK(std::isnan(got[i]) == std::isnan(want[i]));
      if (!std::isnan(want[i])) CHECK(got[i] == Approx(want[i]).epsilon(1e-12).margin(1e-12));
      if (w == 0 && std::isfinite(v[i])) CHECK(got[i] == v[i]);
    }
  }
}

TEST_CASE("report: axes cover the data with 1-2-5 ticks", "[tools][report]") {
  std::mt19937 rng(9);
  std::uniform_real_distribution<double> u(-1e4, 1e4);
  for (int i = 0; i < 200; ++i) {
    double lo = u(rng), hi = lo + std::abs(u(rng)) * std::pow(10.0, static_cast<double>(rng() % 5) - 4);
    auto const a = rlflow::report::nice_axis(lo, hi, 5);
    INFO(lo << " .. " << hi);
    CHECK(a.lo <= lo);
    CHECK(a.hi >= hi);
    REQUIRE(a.ticks.size() >= 2);
    CHECK(a.ticks.size() <= 12);
    double const step = a.ticks[1] - a.ticks[0];
    double const m = step / std::pow(10.0, std::floor(std::log10(step)));
    CHECK((std::abs(m - 1) < 1e-6 || std::abs(m - 2) < 1e-6 || std::abs(m - 5) < 1e-6 || std::abs(m - 10) < 1e-6));
    CHECK(a.ticks.front() == Approx(a.lo).margin(step * 1e-6));
    CHECK(a.ticks.back() == Approx(a.hi).margin(step * 1e-6));
  }
  auto const flat = rlflow::report::nice_axis(3, 3);
  CHECK(flat.lo < 3);
  CHECK(flat.hi > 3);
}

TEST_CASE("report: every plotted vertex maps back to its data point", "[tools][report]") {
  std::mt19937 rng(23);
  std::uniform_real_distribution<double> u(-2, 5);
  std::vector<Run> runs(2);
  for (std::size_t r = 0; r < runs.size(); ++r) {
    runs[r].name = "run" + std::to_string(r);
    int const n = 30 + static_cast<int>(r) * 11;
    for (int s = 1; s <= n; ++s) {
      runs[r].steps.push_back(s);
      runs[r].series["critic/score/mean"].push_back(rng() % 9 == 0 ? std::nan("") : u(rng));
      runs[r].series["actor/entropy"].push_back(u(rng) + 10);
      runs[r].series["timing_s/gen"].push_back(std::abs(u(rng)));
      runs[r].series["timing_s/update_actor"].push_back(std::abs(u(rng)));
    }
  }
  auto const html = rlflow::report::render_html(runs, {"t", 0.6});
  CHECK(html.find("http") == std::string::npos);  // nothing external, not even a namespace
  // each raw path: parse its svg's axes and map every vertex back to (step, value)
  std::regex const svg_re(R"re(<svg class="plot"[^>]*data-panel="([a-z_]+)"[^>]*data-x0="([^"]+)" data-x1="([^"]+)" data-y0="([^"]+)" data-y1="([^"]+)"[^>]*>)re");
  std::regex const path_re(R"re(<path class="raw" data-run="(\d+)" data-key="([^"]+)" data-points="(\d+)"[^>]* d="([^"]*)")re");
  int checked_paths = 0;
  for (std::sregex_iterator it(html.begin(), html.end(), svg_re), end; it != end; ++it) {
    auto const m = *it;
    if (m[1] == "timing") continue;
    double const x0 = std::stod(m[2]), x1 = std::stod(m[3]), y0 = std::stod(m[4]), y1 = std::stod(m[5]);
    rlflow::report::detail::Frame f;
    auto const body_end = html.find("</svg>", static_cast<std::size_t>(m.position(0)));
    std::string const body = html.substr(static_cast<std::size_t>(m.position(0)), body_end - static_cast<std::size_t>(m.position(0)));
    for (std::sregex_iterator p(body.begin(), body.end(), path_re); p != end; ++p) {
      auto const& run = runs[std::stoul((*p)[1])];
      auto const& vals = run.series.at((*p)[2]);
      std::vector<double> xs, ys;
      std::string const d = (*p)[4];
      std::regex const num_re(R"([-0-9.]+)");
      std::vector<double> nums;
      for (std::sregex_iterator q(d.begin(), d.end(), num_re); q != end; ++q) nums.push_back(std::stod((*q)[0]));
      std::vector<double> want_x, want_y;
      for (std::size_t i = 0; i < vals.size(); ++i)
        if (std::isfinite(vals[i])) want_x.push_back(run.steps[i]), want_y.push_back(vals[i]);
      REQUIRE(nums.size() == 2 * want_x.size());
      CHECK(std::stoul((*p)[3]) == want_x.size());
      double const px_per = (f.w - f.ml - f.mr) / (x1 - x0), py_per = (f.h - f.mt - f.mb) / (y1 - y0);
      for (std::size_t i = 0; i < want_x.size(); ++i) {
        double const step = x0 + (nums[2 * i] - f.ml) / px_per;
        double const value = y0 + (f.h - f.mb - nums[2 * i + 1]) / py_per;
        CHECK(step == Approx(want_x[i]).margin(0.006 / px_per));
        CHECK(value == Approx(want_y[i]).margin(0.006 / py_per));
      }
      // a NaN breaks the line: as many 'M' as runs of finite values
      std::size_t segments = 0;
      for (std::size_t i = 0; i < vals.size(); ++i)
        if (std::isfinite(vals[i]) && (i == 0 || !std::isfinite(vals[i - 1]))) ++segments;
      CHECK(static_cast<std::size_t>(std::count(d.begin(), d.end(), 'M')) == segments);
      ++checked_paths;
    }
  }
  CHECK(checked_paths == 4);  // score and entropy, two runs each
  // the timing stack: one per run, two stages each, drawn bottom-up
  CHECK(std::regex_search(html, std::regex(R"(<svg class="plot"[^>]*data-panel="timing" data-run="1")")));
  std::regex const gen_area(R"(class="area" data-key="timing_s/gen")");
  CHECK(std::distance(std::sregex_iterator(html.begin(), html.end(), gen_area), std::sregex_iterator()) == 2);
  CHECK(html.find("data-panel=\"kl\"") == std::string::npos);  // no KL data, no KL plot
}

TEST_CASE("report: names and values are escaped, bad options are errors", "[tools][report]") {
  Run r;
  r.name = "<script>alert(1)</script>";
  r.steps = {1, 2};
  r.series["critic/score/mean"] = {0.1, 0.2};
  r.config["data.train_files"] = "a&b<c>";
  auto const html = rlflow::report::render_html({r});
  CHECK(html.find("<script>alert") == std::string::npos);
  CHECK(html.find("&lt;script&gt;alert(1)&lt;/script&gt;") != std::string::npos);
  CHECK(html.find("a&amp;b&lt;c&gt;") != std::string::npos);
  CHECK(html.find("\"\\u003cscript>alert(1)\\u003c/script>\"") != std::string::npos);  // the data block cannot close its script
  CHECK_THROWS_AS(rlflow::report::render_html({}), rlflow::config_error);
  CHECK_THROWS_WITH(rlflow::report::render_html({r}, {"t", 1.0}), Catch::Contains("outside [0, 1)"));

  std::ostringstream out, err;
  char const* argv[] = {"rlflow_report", "--smoothing", "x", "somewhere"};
  CHECK(rlflow::report::report_main(4, argv, out, err) == 2);
  CHECK(err.str().find("--smoothing 'x' is not a number") != std::string::npos);
  char const* argv2[] = {"rlflow_report"};
  CHECK(rlflow::report::report_main(1, argv2, out, err) == 2);
}

TEST_CASE("report: report_main writes the file beside a single run", "[tools][report]") {
  TempDir d("main");
  write(d.path / "r" / "metrics.jsonl", "{\"step\":1,\"critic/score/mean\":0.5}\n{\"step\":2,\"critic/score/mean\":0.7}\n");
  auto const dir = (d.path / "r").string();
  char const* argv[] = {"rlflow_report", dir.c_str()};
  std::ostringstream out, err;
  REQUIRE(rlflow::report::report_main(2, argv, out, err) == 0);
  CHECK(fs::exists(d.path / "r" / "report.html"));
  CHECK(out.str().find("(1 run, 2 steps)") != std::string::npos);
}

}  // namespace test_report
