// DataProto serialization (A-19, A-20 adapted): bit-exact round trips for every dtype and value
// kind, files, the empty batch (P-37), CRC-32C check values, and randomized corruption: every
// prefix, flipped bytes, and garbage behind a valid checksum must give format_error, never a
// crash or an out-of-bounds read (the ASan build checks the latter).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <unistd.h>  // getpid

#include "data_proto/dp_test_util.hpp"

namespace test_data_proto_serialize {

using namespace rlflow;

namespace {
std::vector<std::byte> bytes_of(std::string_view s) {
  std::vector<std::byte> b(s.size());
  std::memcpy(b.data(), s.data(), s.size());
  return b;
}
void fix_crc(std::vector<std::byte>& b) {
  std::uint32_t const crc = detail::crc32c(b.data(), b.size() - 4);
  std::memcpy(b.data() + b.size() - 4, &crc, 4);
}
//! deserialize must either throw format_error or (only when the bytes still parse) return a
//! DataProto that re-serializes to exactly these bytes.
void expect_format_error_or_exact(std::vector<std::byte> const& b) {
  try {
    auto d = DataProto::deserialize(b);
    CHECK(d.serialize() == b);
  } catch (format_error const&) {
    SUCCEED();
  }
}
}  // namespace

TEST_CASE("CRC-32C check values, hardware and software paths agree", "[data_proto][serialize]") {
  auto b = bytes_of("123456789");
  CHECK(detail::crc32c(b.data(), b.size()) == 0xE3069283u);
  CHECK(detail::crc32c(b.data(), 0) == 0u);
  std::vector<unsigned char> zeros(32, 0);
  CHECK(detail::crc32c(zeros.data(), zeros.size()) == 0x8A9136AAu);  // RFC 3720 B.4
  std::mt19937_64 rng(7);
  std::vector<unsigned char> data(4099);
  for (auto& c : data) c = static_cast<unsigned char>(rng());
  for (std::size_t n : {0u, 1u, 7u, 8u, 9u, 63u, 4099u}) {
    std::uint32_t const sw = ~detail::crc32c_update_sw(~0u, data.data(), n);
    std::uint32_t const hw = ~detail::crc32c_update_hw(~0u, data.data(), n);
    CHECK(sw == hw);
    // plain bitwise reference
    std::uint32_t c = ~0u;
    for (std::size_t i = 0; i < n; ++i) {
      c ^= data[i];
      for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    }
    CHECK(~c == sw);
  }
}

TEST_CASE("A-20 every dtype and value kind round-trips bit-exactly", "[data_proto][serialize]") {
  std::mt19937_64 rng(11);
  TensorColumns ts;
  for (int dt = 0; dt < dtype_count; ++dt)
    ts.emplace_back(std::string("t_") + dtype_name(static_cast<DType>(dt)), dp_test::random_tensor(rng, 5, static_cast<DType>(dt)));
  // special float bit patterns: NaN payloads, -0, inf, denormals
  std::vector<float> special{std::bit_cast<float>(0x7fc00001u), -0.f, INFINITY, -INFINITY, std::bit_cast<float>(1u)};
  ts.emplace_back("special", Tensor::from(special, Shape{5}));
  NonTensorColumn kinds{Value(), true, std::int64_t{INT64_MIN}, std::bit_cast<double>(0x7ff8dead0000beefull),
                        std::string("a\0b", 3)};
  Dict meta{{"none", Value()}, {"b", false}, {"i", -1}, {"f", -0.0}, {"s", ""}, {"l", Value::List{Value::List{}, Dict{}}},
            {"d", Dict{{"x", Value::List{1, "two", 3.0}}}}};
  auto d = DataProto::from_dict(std::move(ts), {{"kinds", kinds}}, meta);
  auto bytes = d.serialize();
  CHECK(bytes.size() == d.serialized_size());
  auto back = DataProto::deserialize(bytes);
  CHECK(back == d);
  CHECK(back.tensor_keys() == d.tensor_keys());  // order preserved
  CHECK(back.meta_info().keys() == d.meta_info().keys());
  CHECK(std::bit_cast<std::uint64_t>(back.non_tensor("kinds")[3].as_double()) == 0x7ff8dead0000beefull);
  CHECK(std::bit_cast<std::uint32_t>(back.tensor("special").span<float>()[0]) == 0x7fc00001u);
  CHECK(back.non_tensor("kinds")[4].as_string().size() == 3);
  CHECK(back.serialize() == bytes);  // deterministic
  // a reused buffer gives the same bytes
  std::vector<std::byte> reuse(3);
  d.serialize_into(reuse);
  CHECK(reuse == bytes);
}

TEST_CASE("A-19 empty batch, batch-less and empty DataProtos round-trip", "[data_proto][serialize]") {
  auto e = DataProto::with_batch_size(10, Meta{{"k", 1}});
  auto b = DataProto::deserialize(e.serialize());
  CHECK(b.has_batch());
  CHECK(b.size() == 10);
  CHECK(b.tensor_keys().empty());
  CHECK(b == e);
  CHECK(DataProto::deserialize(DataProto().serialize()) == DataProto());
  auto nb = DataProto::from_dict({}, {{"l", NonTensorColumn{"x", "y"}}});
  CHECK(DataProto::deserialize(nb.serialize()) == nb);
  auto zero_rows = DataProto::from_dict({{"x", Tensor::zeros(DType::int64, Shape{0, 4})}}, {{"l", NonTensorColumn{}}});
  CHECK(DataProto::deserialize(zero_rows.serialize()) == zero_rows);
  // views (non-zero storage offset) serialize their own rows only
  auto big = DataProto::from_dict({{"x", Tensor::from(std::vector<std::int32_t>{1, 2, 3, 4, 5, 6}, Shape{3, 2})}});
  auto v = big.slice(1, 3);
  CHECK(DataProto::deserialize(v.serialize()) == v);
}

TEST_CASE("law: deserialize(serialize(d)) == d over random DataProtos", "[data_proto][serialize][law]") {
  std::mt19937_64 rng(2024);
  for (int trial = 0; trial < 200; ++trial) {
    auto d = dp_test::random_dp(rng, {.batch = trial % 3 != 0});
    auto bytes = d.serialize();
    REQUIRE(bytes.size() == d.serialized_size());
    auto back = DataProto::deserialize(bytes);
    REQUIRE(back == d);
    REQUIRE(back.serialize() == bytes);
  }
}

TEST_CASE("A-19 save and load files", "[data_proto][serialize]") {
  std::mt19937_64 rng(5);
  auto dir = std::filesystem::temp_directory_path() / ("rlflow_dp_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto path = dir / "batch.rldp";
  auto d = dp_test::random_dp(rng, {.batch = true, .rows = 17});
  d.save(path);
  CHECK_FALSE(std::filesystem::exists(dir / "batch.rldp.tmp"));
  CHECK(DataProto::load(path) == d);
  // overwrite
  auto d2 = dp_test::random_dp(rng, {.batch = false, .rows = 3});
  d2.save(path);
  CHECK(DataProto::load(path) == d2);
  // truncated file names the path
  auto size = std::filesystem::file_size(path);
  std::filesystem::resize_file(path, size - 1);
  CHECK_THROWS_WITH(DataProto::load(path), Catch::Contains("batch.rldp") && Catch::Contains("truncated"));
  CHECK_THROWS_AS(DataProto::load(dir / "missing.rldp"), io_error);
  CHECK_THROWS_AS(d.save(dir / "no_such_dir" / "x.rldp"), io_error);
  std::filesystem::remove_all(dir);
}

TEST_CASE("header errors name the problem", "[data_proto][serialize]") {
  auto d = DataProto::from_dict({{"x", Tensor::from(std::vector<float>{1, 2})}});
  auto b = d.serialize();
  CHECK_THROWS_WITH(DataProto::deserialize(std::span<std::byte const>(b.data(), 10)), Catch::Contains("truncated"));
  auto bad_magic = b;
  bad_magic[0] = std::byte{'X'};
  CHECK_THROWS_WITH(DataProto::deserialize(bad_magic), Catch::Contains("magic"));
  auto bad_version = b;
  bad_version[8] = std::byte{2};
  CHECK_THROWS_WITH(DataProto::deserialize(bad_version), Catch::Contains("format version 2 is not supported"));
  auto flipped = b;
  flipped[30] ^= std::byte{1};
  CHECK_THROWS_WITH(DataProto::deserialize(flipped), Catch::Contains("checksum mismatch"));
  auto longer = b;
  longer.push_back(std::byte{0});
  CHECK_THROWS_WITH(DataProto::deserialize(longer), Catch::Contains("trailing"));
  CHECK_THROWS_AS(DataProto::deserialize({}), format_error);
}

TEST_CASE("every prefix and every single-byte flip is rejected", "[data_proto][serialize][corruption]") {
  std::mt19937_64 rng(99);
  for (int trial = 0; trial < 12; ++trial) {
    auto d = dp_test::random_dp(rng, {.batch = trial % 2 == 0, .rows = 3});
    auto const b = d.serialize();
    for (std::size_t n = 0; n < b.size(); ++n)
      REQUIRE_THROWS_AS(DataProto::deserialize(std::span<std::byte const>(b.data(), n)), format_error);
    for (std::size_t i = 0; i < b.size(); ++i) {
      auto c = b;
      c[i] ^= std::byte{static_cast<unsigned char>(1u << (rng() % 8))};
      REQUIRE_THROWS_AS(DataProto::deserialize(c), format_error);  // CRC-32C catches every 1-bit error
    }
  }
}

TEST_CASE("garbage behind a valid checksum: the parser itself is defensive", "[data_proto][serialize][corruption]") {
  // Corrupt the body, then recompute the CRC so the parser sees the damage. Each outcome must be
  // format_error or a DataProto that re-serializes to the same bytes; ASan/UBSan watch for reads.
  std::mt19937_64 rng(1234);
  int rejected = 0, total = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    auto d = dp_test::random_dp(rng, {.batch = trial % 3 != 0, .rows = static_cast<std::int64_t>(rng() % 6)});
    auto b = d.serialize();
    int const mode = trial % 4;
    if (mode == 0) {  // random byte flips in the body
      for (int f = 0, nf = 1 + static_cast<int>(rng() % 4); f < nf; ++f)
        b[24 + rng() % (b.size() - 28)] ^= std::byte{static_cast<unsigned char>(1 + rng() % 255)};
    } else if (mode == 1) {  // huge lengths / counts written over an 8-byte window
      std::size_t const at = 24 + rng() % (b.size() - 28);
      for (std::size_t k = at; k < std::min(at + 8, b.size() - 4); ++k) b[k] = std::byte{0xff};
    } else if (mode == 2) {  // truncate the body, keep the header honest
      std::size_t const cut = 1 + rng() % (b.size() - 28);
      b.erase(b.end() - 4 - static_cast<std::ptrdiff_t>(cut), b.end() - 4);
      std::uint64_t const body = b.size() - 28;
      std::memcpy(b.data() + 16, &body, 8);
    } else {  // shuffle a random range of the body
      std::size_t const lo = 24 + rng() % (b.size() - 28);
      std::size_t const hi = lo + rng() % (b.size() - 4 - lo + 1);
      std::shuffle(b.begin() + static_cast<std::ptrdiff_t>(lo), b.begin() + static_cast<std::ptrdiff_t>(hi), rng);
    }
    fix_crc(b);
    ++total;
    try {
      auto r = DataProto::deserialize(b);
      CHECK(r.serialize() == b);
    } catch (format_error const&) {
      ++rejected;
    }
  }
  CHECK(rejected > total / 2);  // most damage must be detected by the structure checks alone
  // targeted: bool tensor byte 2, unknown dtype tag, unknown value tag, bad bool value
  auto bt = DataProto::from_dict({{"b", Tensor::from(std::vector<std::uint8_t>{1}, Shape{1})}});
  auto bb = bt.serialize();
  // layout: header 24 | has_batch 1 | bs 8 | nt 4 | keylen 4 | 'b' | dtype 1 | rank 1 | dim 8 | data
  std::size_t const dtype_at = 24 + 1 + 8 + 4 + 4 + 1;
  auto c = bb;
  c[dtype_at] = std::byte{static_cast<unsigned char>(DType::bool_)};
  c[dtype_at + 1 + 1 + 8] = std::byte{2};
  fix_crc(c);
  CHECK_THROWS_WITH(DataProto::deserialize(c), Catch::Contains("bool tensor 'b' holds byte 2"));
  // zero-element shapes with huge dims, and products that overflow int64
  auto zt = DataProto::from_dict({{"z", Tensor::zeros(DType::float32, Shape{1, 0, 3})}}).serialize();
  std::size_t const dims_at = 24 + 1 + 8 + 4 + 4 + 1 + 1 + 1;  // first dim of 'z'
  c = zt;
  std::int64_t const huge = std::int64_t{1} << 62;
  std::memcpy(c.data() + dims_at + 16, &huge, 8);  // (1, 0, 2^62): zero elements, beyond max_elements
  fix_crc(c);
  CHECK_THROWS_WITH(DataProto::deserialize(c), Catch::Contains("max_elements"));
  std::int64_t const four = 4, big = std::int64_t{1} << 40;
  std::memcpy(c.data() + dims_at + 8, &four, 8);  // (1, 4, 2^40): fits int64 but needs 2^44 bytes
  std::memcpy(c.data() + dims_at + 16, &big, 8);
  fix_crc(c);
  CHECK_THROWS_WITH(DataProto::deserialize(c), Catch::Contains("bytes left"));
  std::memcpy(c.data() + dims_at + 16, &huge, 8);
  std::memcpy(c.data() + dims_at + 8, &huge, 8);  // (1, 2^62, 2^62): the product overflows int64
  fix_crc(c);
  CHECK_THROWS_WITH(DataProto::deserialize(c), Catch::Contains("overflows int64"));
  std::int64_t const zero = 0;
  std::memcpy(c.data() + dims_at + 16, &zero, 8);  // (1, 2^62, 0): zero elements, beyond max_elements
  fix_crc(c);
  CHECK_THROWS_WITH(DataProto::deserialize(c), Catch::Contains("max_elements"));
  c = bb;
  c[dtype_at] = std::byte{7};
  fix_crc(c);
  CHECK_THROWS_WITH(DataProto::deserialize(c), Catch::Contains("unknown dtype tag 7"));
  auto vb = DataProto::from_dict({}, {{"v", NonTensorColumn{true}}}).serialize();
  // header 24 | hb 1 | bs 8 | nt 4 | nn 4 | keylen 4 | 'v' | rows 8 | tag | bool
  std::size_t const tag_at = 24 + 1 + 8 + 4 + 4 + 4 + 1 + 8;
  c = vb;
  c[tag_at + 1] = std::byte{5};
  fix_crc(c);
  CHECK_THROWS_WITH(DataProto::deserialize(c), Catch::Contains("bool value byte 5"));
  c = vb;
  c[tag_at] = std::byte{9};
  fix_crc(c);
  CHECK_THROWS_WITH(DataProto::deserialize(c), Catch::Contains("unknown value kind tag 9"));
  // deeply nested lists beyond the limit are rejected on both sides
  Value deep;
  for (int i = 0; i < DataProto::max_value_depth + 2; ++i) deep = Value(Value::List{deep});
  auto dd = DataProto::from_dict({}, {{"deep", NonTensorColumn{deep}}});
  CHECK_THROWS_AS(dd.serialize(), value_error);
}

TEST_CASE("nesting exactly at the depth limit round-trips", "[data_proto][serialize]") {
  for (Value leaf : {Value(), Value(Value::List{}), Value(Dict{}), Value(Dict{{"x", 1}})}) {
    // leaf at depth max_value_depth (top-level value is depth 0), in a column and in meta
    Value v = leaf;
    for (int i = 0; i < DataProto::max_value_depth; ++i) v = (i % 2) ? Value(Value::List{v}) : Value(Dict{{"k", v}});
    bool const too_deep = leaf.is_dict() && !leaf.as_dict().empty();  // its child sits one level below
    auto d = DataProto::from_dict({}, {{"c", NonTensorColumn{v}}}, Meta{{"m", v}});
    if (too_deep) {
      CHECK_THROWS_AS(d.serialize(), value_error);
    } else {
      CHECK(DataProto::deserialize(d.serialize()) == d);
    }
  }
}

TEST_CASE("expect_format_error_or_exact helper sanity", "[data_proto][serialize]") {
  auto b = DataProto::from_dict({{"x", Tensor::from(std::vector<float>{1})}}).serialize();
  expect_format_error_or_exact(b);
  b.pop_back();
  expect_format_error_or_exact(b);
}

}  // namespace test_data_proto_serialize
