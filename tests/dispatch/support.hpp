// tests/dispatch/support.hpp: helpers shared by the dispatch tests: random DataProtos with
// tensor and non-tensor columns, a row-id column to check which rows reached which rank, and
// a few small roles.
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <rlflow/core/data_proto.hpp>
#include <rlflow/dispatch/worker_group.hpp>

namespace test_dispatch {

//! n rows: "id" (int64, n) = row index + base, "x" (float32, n x w) random, "label" Values.
inline rlflow::DataProto make_rows(std::int64_t n, std::uint64_t seed, std::int64_t w = 3, std::int64_t base = 0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<std::int64_t> ids(static_cast<std::size_t>(n));
  std::vector<float> x(static_cast<std::size_t>(n * w));
  rlflow::NonTensorColumn labels;
  for (std::int64_t i = 0; i < n; ++i) {
    ids[static_cast<std::size_t>(i)] = base + i;
    labels.emplace_back(std::string("row") + std::to_string(base + i));
  }
  for (auto& v : x) v = u(rng);
  rlflow::Meta meta;
  meta.set("tag", std::string("m"));
  return rlflow::DataProto::from_dict({{"id", rlflow::Tensor::from(ids, rlflow::Shape{n})},
                                       {"x", rlflow::Tensor::from(x, rlflow::Shape{n, w})}},
                                      {{"label", std::move(labels)}}, meta);
}

//! The "id" column as a vector.
inline std::vector<std::int64_t> ids_of(rlflow::DataProto const& d) {
  auto s = d.tensor("id").span<std::int64_t>();
  return {s.begin(), s.end()};
}

}  // namespace test_dispatch
