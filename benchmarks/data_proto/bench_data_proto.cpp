// DataProto throughput: chunk (zero-copy views), concat, serialize / deserialize, and a plain
// memcpy of the same number of bytes in the same run as the yardstick. Every buffer is touched
// before timing (first-touch page faults are ~60x slower than warm copies on these machines).
// Batch: 512 rows x 4096 tokens, four 4-byte columns (32 MiB) + a prompt-string column + metrics.
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include <rlflow/core/data_proto.hpp>

namespace {
using namespace rlflow;

constexpr std::int64_t rows = 512, seq = 4096;

DataProto const& batch() {
  static DataProto const d = [] {
    TensorColumns ts;
    for (const char* k : {"input_ids", "attention_mask", "old_log_probs", "advantages"}) {
      bool const is_float = k[0] == 'o' || (k[0] == 'a' && k[1] == 'd');
      Tensor t = Tensor::empty(is_float ? DType::float32 : DType::int32, Shape{rows, seq});
      auto* p = static_cast<std::uint32_t*>(t.raw_data());
      for (std::int64_t i = 0; i < rows * seq; ++i) p[i] = static_cast<std::uint32_t>(i * 2654435761u);
      ts.emplace_back(k, t);
    }
    NonTensorColumn prompts;
    for (std::int64_t i = 0; i < rows; ++i) prompts.emplace_back("prompt number " + std::to_string(i) + " with some text");
    return DataProto::from_dict(std::move(ts), {{"raw_prompt", std::move(prompts)}},
                                Meta{{"metrics", Dict{{"loss", 0.5}}}, {"temperature", 1.0}});
  }();
  return d;
}

std::int64_t tensor_bytes(DataProto const& d) {
  std::int64_t n = 0;
  for (auto const& [k, t] : d.tensors()) n += static_cast<std::int64_t>(t.nbytes());
  return n;
}

void BM_Chunk(benchmark::State& state) {
  auto const& d = batch();
  for (auto _ : state) {
    auto parts = d.chunk(state.range(0));
    benchmark::DoNotOptimize(parts.data());
  }
  state.SetBytesProcessed(state.iterations() * tensor_bytes(d));  // nominal: views copy no tensor bytes
}
BENCHMARK(BM_Chunk)->Arg(8)->Unit(benchmark::kMicrosecond);

void BM_Concat(benchmark::State& state) {
  auto const parts = batch().chunk(state.range(0));
  { auto warm = DataProto::concat(parts); }  // the caching resource now holds warm blocks
  for (auto _ : state) {
    auto d = DataProto::concat(parts);
    benchmark::DoNotOptimize(d.tensors().data());
  }
  state.SetBytesProcessed(state.iterations() * tensor_bytes(batch()));
}
BENCHMARK(BM_Concat)->Arg(8)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Serialize(benchmark::State& state) {
  auto const& d = batch();
  std::vector<std::byte> buf;
  d.serialize_into(buf);  // sizes and touches the buffer
  for (auto _ : state) {
    d.serialize_into(buf);
    benchmark::DoNotOptimize(buf.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(buf.size()));
  state.counters["crc32c_hw"] = detail::crc32c_hw_available() ? 1 : 0;
}
BENCHMARK(BM_Serialize)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Deserialize(benchmark::State& state) {
  auto const bytes = batch().serialize();
  { auto warm = DataProto::deserialize(bytes); }
  for (auto _ : state) {
    auto d = DataProto::deserialize(bytes);
    benchmark::DoNotOptimize(d.tensors().data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(bytes.size()));
}
BENCHMARK(BM_Deserialize)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Memcpy(benchmark::State& state) {
  std::size_t const n = batch().serialized_size();
  std::vector<std::byte> src(n, std::byte{1}), dst(n, std::byte{2});  // both touched
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), n);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(n));
}
BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
