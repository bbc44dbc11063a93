// DataProto size bounds: a blob whose CRC is valid but whose shape or batch size is beyond
// DataProto::max_rows / max_elements is a format_error at load time, and every row operation
// checks the row and element counts it forms (overflow-safe) before it allocates, so a huge
// zero-element shape or an empty batch of 2^62 rows ends in an rlflow error, never signed
// overflow in Shape::numel or std::bad_alloc.
#include <catch2/catch.hpp>

#include <cstring>
#include <limits>

#include "data_proto/dp_test_util.hpp"

namespace test_data_proto_bounds {

using namespace rlflow;

namespace {
void fix_crc(std::vector<std::byte>& b) {
  std::uint32_t const crc = detail::crc32c(b.data(), b.size() - 4);
  std::memcpy(b.data() + b.size() - 4, &crc, 4);
}
void put_i64(std::vector<std::byte>& b, std::size_t at, std::int64_t v) { std::memcpy(b.data() + at, &v, 8); }

// layout: header 24 | has_batch 1 | batch size 8 | tensor count 4 | key length 4 | 'z' | dtype 1 | rank 1 | dims
constexpr std::size_t batch_size_at = 24 + 1;
constexpr std::size_t dims_at = 24 + 1 + 8 + 4 + 4 + 1 + 1 + 1;
constexpr std::int64_t huge = (std::int64_t{1} << 62) + 1;  // 4611686018427387905
}  // namespace

TEST_CASE("bounds: the limits are the documented numbers", "[data_proto][bounds]") {
  CHECK(DataProto::max_rows == (std::int64_t{1} << 32));
  CHECK(DataProto::max_elements == (std::int64_t{1} << 48));
}

TEST_CASE("bounds: load rejects a zero-element tensor with a huge dimension", "[data_proto][bounds][load]") {
  auto b = DataProto::from_dict({{"z", Tensor::zeros(DType::float32, Shape{1, 0, 0})}}).serialize();
  put_i64(b, dims_at + 8, huge);  // (1, 2^62 + 1, 0): zero elements, CRC valid
  fix_crc(b);
  CHECK_THROWS_AS(DataProto::deserialize(b), format_error);
  CHECK_THROWS_WITH(DataProto::deserialize(b), Catch::Contains("tensor 'z'") && Catch::Contains("4611686018427387905") &&
                                                   Catch::Contains("max_elements") && Catch::Contains("281474976710656"));
  // the same shape with the huge dimension last, and a dimension just over the limit
  b = DataProto::from_dict({{"z", Tensor::zeros(DType::float32, Shape{1, 0, 0})}}).serialize();
  put_i64(b, dims_at + 16, DataProto::max_elements + 1);
  fix_crc(b);
  CHECK_THROWS_WITH(DataProto::deserialize(b), Catch::Contains("281474976710657"));
  // at the limit it loads
  put_i64(b, dims_at + 16, DataProto::max_elements);
  fix_crc(b);
  CHECK(DataProto::deserialize(b).tensor("z").shape() == Shape{1, 0, DataProto::max_elements});
}

TEST_CASE("bounds: load rejects an empty batch of 2^62 + 1 rows", "[data_proto][bounds][load]") {
  auto b = DataProto::with_batch_size(1).serialize();
  put_i64(b, batch_size_at, huge);
  fix_crc(b);
  CHECK_THROWS_AS(DataProto::deserialize(b), format_error);
  CHECK_THROWS_WITH(DataProto::deserialize(b), Catch::Contains("batch size 4611686018427387905") &&
                                                   Catch::Contains("max_rows") && Catch::Contains("4294967296"));
  put_i64(b, batch_size_at, DataProto::max_rows);
  fix_crc(b);
  CHECK(DataProto::deserialize(b).size() == DataProto::max_rows);
}

TEST_CASE("bounds: row operations on a huge zero-element shape throw shape_error", "[data_proto][bounds][rows]") {
  auto const d = DataProto::from_dict({{"z", Tensor::zeros(DType::float32, Shape{1, huge, 0})}});
  // 4 rows of (2^62 + 1, 0): 4 * (2^62 + 1) overflows int64 in Shape::numel's left-to-right product
  CHECK_THROWS_AS(d.repeat(4), shape_error);
  CHECK_THROWS_WITH(d.repeat(4), Catch::Contains("repeat") && Catch::Contains("'z'") && Catch::Contains("4 rows") &&
                                     Catch::Contains("281474976710656"));
  std::vector<std::int64_t> const four{0, 0, 0, 0};
  CHECK_THROWS_WITH(d.index(four), Catch::Contains("index") && Catch::Contains("4 rows"));
  CHECK_THROWS_WITH(DataProto::concat({d, d, d, d}), Catch::Contains("concat") && Catch::Contains("4 rows"));
  CHECK_THROWS_WITH(d.padded(3, PadPolicy::repeat_last), Catch::Contains("padded") && Catch::Contains("4 rows"));
  CHECK_THROWS_WITH(d.unfold_column_chunks(4), Catch::Contains("unfold_column_chunks") && Catch::Contains("4 rows"));
  // a view forms no new rows: chunk keeps the in-memory shape as it is
  CHECK(d.chunk(1).at(0).tensor("z").shape() == Shape{1, huge, 0});
}

TEST_CASE("bounds: row counts are checked before anything is allocated", "[data_proto][bounds][rows]") {
  std::int64_t const big = std::numeric_limits<std::int64_t>::max();
  CHECK_THROWS_AS(DataProto::with_batch_size(huge), value_error);
  CHECK_THROWS_WITH(DataProto::with_batch_size(huge), Catch::Contains("4611686018427387905") && Catch::Contains("4294967296"));
  auto const e = DataProto::with_batch_size(DataProto::max_rows);  // no tensors: nothing allocated
  CHECK_THROWS_AS(e.repeat(2), shape_error);
  CHECK_THROWS_WITH(e.repeat(2), Catch::Contains("4294967296 rows") && Catch::Contains("2 times"));
  auto const small = DataProto::from_dict({{"x", Tensor::from(std::vector<float>{1, 2}, Shape{2})}});
  CHECK_THROWS_AS(small.repeat(big), shape_error);
  CHECK_THROWS_WITH(small.repeat(big), Catch::Contains("9223372036854775807"));
  CHECK_THROWS_AS(small.padded(big, PadPolicy::cycle_from_first), shape_error);
  CHECK_THROWS_AS(small.chunk(big), value_error);
  CHECK_THROWS_WITH(small.chunk(big), Catch::Contains("9223372036854775807") && Catch::Contains("4294967296"));
  CHECK_THROWS_AS(small.unfold_column_chunks(big), shape_error);
  std::vector<std::int64_t> const counts{big, big};
  CHECK_THROWS_AS(small.sample_level_repeat(counts), shape_error);
  CHECK_THROWS_AS(DataProto::concat({e, e}), shape_error);
  CHECK_THROWS_WITH(DataProto::concat({e, e}), Catch::Contains("8589934592"));
  CHECK_THROWS_AS(small.make_iterator(1, big), value_error);  // 2 * big mini-batches
  CHECK(small.make_iterator(1, big / 2).count() == 2 * (big / 2));
  // within the limits the same operations still give the plain results
  auto const z = DataProto::from_dict({{"z", Tensor::zeros(DType::float32, Shape{2, std::int64_t{1} << 20, 0})}});
  CHECK(z.repeat(3).tensor("z").shape() == Shape{6, std::int64_t{1} << 20, 0});
  CHECK(small.repeat(2, false).tensor("x").span<float>()[3] == 2.0f);
  CHECK(DataProto::concat({z, z}).size() == 4);
}

}  // namespace test_data_proto_bounds
