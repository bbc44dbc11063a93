// build error: 'policy' must be rlflow::cpu::par or rlflow::cuda::par
#include <rlflow/kernels/masked.hpp>
int main() {
  float x[2] = {1, 2}, m[2] = {1, 1};
  return static_cast<int>(rlflow::kernels::masked_sum(42, rlflow::kernels::Dims{1, 2}, std::span<float const>(x, 2),
                                                      std::span<float const>(m, 2)));
}
