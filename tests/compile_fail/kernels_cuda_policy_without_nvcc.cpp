// build error: this translation unit was not compiled by nvcc; build it as a .cu file or pass rlflow::cpu::par
#include <rlflow/kernels/masked.hpp>
int main() {
  float x[2] = {1, 2}, m[2] = {1, 1};
  return static_cast<int>(rlflow::kernels::masked_sum(rlflow::cuda::par, rlflow::kernels::Dims{1, 2},
                                                      std::span<float const>(x, 2), std::span<float const>(m, 2)));
}
