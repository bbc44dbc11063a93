// Placeholder demo until the trainer lands: builds a Tensor and prints it.
#include <rlflow/rlflow.hpp>
#include <cstdio>
int main() {
  auto t = rlflow::Tensor::from(std::vector<float>{1, 2, 3, 4, 5, 6}, rlflow::Shape{2, 3});
  std::printf("%s\n", t.describe().c_str());
}
