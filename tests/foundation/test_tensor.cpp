// Tests for rlflow/core/tensor.hpp and rlflow/core/memory.hpp: shapes, dtypes, views, copies, errors.
#include <catch2/catch.hpp>
#include <rlflow/core/tensor.hpp>

#include <cmath>
#include <limits>
#include <random>

namespace test_tensor {

using namespace rlflow;

TEST_CASE("Tensor: empty/zeros/from/full have the right dtype, shape and bytes", "[foundation][tensor]") {
  auto t = Tensor::zeros(DType::int64, Shape{3, 4});
  REQUIRE(t.dtype() == DType::int64);
  REQUIRE(t.shape() == Shape{3, 4});
  REQUIRE(t.numel() == 12);
  REQUIRE(t.nbytes() == 96);
  REQUIRE(t.row_bytes() == 32);
  for (auto v : t.span<std::int64_t>()) REQUIRE(v == 0);
  auto f = Tensor::full(Shape{2, 2}, 1.5f);
  for (auto v : f.span<float>()) REQUIRE(v == 1.5f);
  REQUIRE_THROWS_AS(Tensor::from(std::vector<float>{1, 2, 3}, Shape{2, 2}), shape_error);
  REQUIRE(Shape{2, 3}.str() == "(2, 3)");
  REQUIRE(Shape{5}.str() == "(5,)");
  REQUIRE_THROWS_AS(Shape({1, -2}), shape_error);
}

TEST_CASE("Tensor: wrong dtype access names both dtypes", "[foundation][tensor]") {
  auto t = Tensor::zeros(DType::float32, Shape{2});
  try {
    (void)t.span<std::int32_t>();
    FAIL("no throw");
  } catch (dtype_error const& e) {
    std::string m = e.what();
    REQUIRE(m.find("int32") != std::string::npos);
    REQUIRE(m.find("float32") != std::string::npos);
  }
  REQUIRE_THROWS_AS(t.at<float>(5), shape_error);
  REQUIRE_THROWS_AS(t.dim(3), shape_error);
  Tensor undefined;
  REQUIRE_THROWS_AS(undefined.span<float>(), dtype_error);
}

TEST_CASE("Tensor: row slices are views sharing storage, clone is deep", "[foundation][tensor]") {
  std::mt19937 rng(1);
  for (int trial = 0; trial < 20; ++trial) {
    std::int64_t rows = 1 + rng() % 17, cols = 1 + rng() % 9;
    std::vector<std::int32_t> v(static_cast<std::size_t>(rows * cols));
    for (auto& x : v) x = static_cast<std::int32_t>(rng());
    auto t = Tensor::from(v, Shape{rows, cols});
    std::int64_t b = rng() % rows, e = b + rng() % (rows - b + 1);
    auto s = t.slice_rows(b, e);
    REQUIRE(s.shares_storage_with(t));
    REQUIRE(s.rows() == e - b);
    for (std::int64_t r = 0; r < e - b; ++r)
      for (std::int64_t c = 0; c < cols; ++c) REQUIRE(s.at<std::int32_t>(r, c) == v[static_cast<std::size_t>((b + r) * cols + c)]);
    if (e > b) {
      s.at<std::int32_t>(0, 0) = 42;  // writes through the view
      REQUIRE(t.at<std::int32_t>(b, 0) == 42);
      auto c = t.clone();
      REQUIRE(!c.shares_storage_with(t));
      REQUIRE(bit_equal(c, t));
      c.at<std::int32_t>(b, 0) = 43;
      REQUIRE(t.at<std::int32_t>(b, 0) == 42);
    }
  }
  auto t = Tensor::zeros(DType::float32, Shape{4, 2});
  REQUIRE_THROWS_AS(t.slice_rows(3, 5), shape_error);
  REQUIRE_THROWS_AS(t.slice_rows(-1, 2), shape_error);
  REQUIRE(t.row(2).shape() == Shape{2});
  REQUIRE_THROWS_AS(t.reshape(Shape{3, 3}), shape_error);
  REQUIRE(t.reshape(Shape{8}).shares_storage_with(t));
}

TEST_CASE("Tensor: index_rows and concat_rows agree with plain loops", "[foundation][tensor]") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    std::int64_t rows = 1 + rng() % 12, cols = 1 + rng() % 5;
    std::vector<float> v(static_cast<std::size_t>(rows * cols));
    for (auto& x : v) x = std::uniform_real_distribution<float>(-1, 1)(rng);
    auto t = Tensor::from(v, Shape{rows, cols});
    std::vector<std::int64_t> idx(rng() % 20);
    for (auto& i : idx) i = static_cast<std::int64_t>(rng() % rows);
    auto g = t.index_rows(idx);
    REQUIRE(g.rows() == static_cast<std::int64_t>(idx.size()));
    for (std::size_t i = 0; i < idx.size(); ++i)
      for (std::int64_t c = 0; c < cols; ++c) REQUIRE(g.at<float>(static_cast<std::int64_t>(i), c) == t.at<float>(idx[i], c));
    // concat of a random partition is the identity
    std::vector<Tensor> parts;
    std::int64_t at = 0;
    while (at < rows) {
      std::int64_t n = 1 + rng() % (rows - at);
      parts.push_back(t.slice_rows(at, at + n));
      at += n;
    }
    REQUIRE(bit_equal(Tensor::concat_rows(parts), t));
  }
  std::vector<std::int64_t> bad{0, 7};
  REQUIRE_THROWS_AS(Tensor::zeros(DType::uint8, Shape{3}).index_rows(bad), shape_error);
  std::vector<Tensor> mixed{Tensor::zeros(DType::float32, Shape{2, 2}), Tensor::zeros(DType::int32, Shape{2, 2})};
  REQUIRE_THROWS_AS(Tensor::concat_rows(mixed), dtype_error);
  std::vector<Tensor> shapes{Tensor::zeros(DType::float32, Shape{2, 2}), Tensor::zeros(DType::float32, Shape{2, 3})};
  REQUIRE_THROWS_AS(Tensor::concat_rows(shapes), shape_error);
}

TEST_CASE("bfloat16/float16 round-trip representable values and round to nearest", "[foundation][tensor]") {
  std::mt19937 rng(3);
  for (int i = 0; i < 2000; ++i) {
    std::uint16_t b = static_cast<std::uint16_t>(rng());
    bfloat16 x;
    x.bits = b;
    float f = static_cast<float>(x);
    if (!std::isnan(f)) REQUIRE(bfloat16(f).bits == b);
    float16 h;
    h.bits = b;
    float g = static_cast<float>(h);
    if (!std::isnan(g)) REQUIRE(float16(g).bits == b);
  }
  REQUIRE(static_cast<float>(float16(1.0f)) == 1.0f);
  REQUIRE(static_cast<float>(float16(65504.0f)) == 65504.0f);
  REQUIRE(std::isinf(static_cast<float>(float16(1e6f))));
  REQUIRE(std::isnan(static_cast<float>(bfloat16(std::numeric_limits<float>::quiet_NaN()))));
  REQUIRE(static_cast<float>(bfloat16(1.00390625f)) == 1.0f);  // tie rounds to even
}

TEST_CASE("caching_host_resource reuses freed blocks of the same size class", "[foundation][memory]") {
  caching_host_resource r;
  {
    auto a = Tensor::empty(DType::float32, Shape{1000}, &r);
    (void)a;
  }
  auto before = r.stats();
  auto b = Tensor::empty(DType::float32, Shape{900}, &r);  // same 4 KiB class
  auto after = r.stats();
  REQUIRE(after.allocations == before.allocations + 1);
#if !defined(__SANITIZE_ADDRESS__)
  REQUIRE(after.cache_hits == before.cache_hits + 1);
#endif
  REQUIRE(caching_host_resource::size_class(1) == 256);
  REQUIRE(caching_host_resource::size_class(3000) == 4096);
  REQUIRE(caching_host_resource::size_class((1u << 20) + 1) == (2u << 20));
  REQUIRE(reinterpret_cast<std::uintptr_t>(b.raw_data()) % host_alignment == 0);
}

}  // namespace test_tensor
