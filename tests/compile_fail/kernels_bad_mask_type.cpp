// build error: the mask element type must be float, bool or std::uint8_t
#include <rlflow/kernels/masked.hpp>
int main() {
  float x[2] = {1, 2};
  double m[2] = {1, 1};
  return static_cast<int>(rlflow::kernels::masked_mean(rlflow::cpu::par, rlflow::kernels::Dims{1, 2},
                                                       std::span<float const>(x, 2), std::span<double const>(m, 2)));
}
