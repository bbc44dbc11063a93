// A downstream program: includes the umbrella header and uses a Tensor and a DataProto.
#include <rlflow/rlflow.hpp>
#include <cstdio>

int main() {
  auto t = rlflow::Tensor::from(std::vector<float>{1, 2, 3, 4}, rlflow::Shape{2, 2});
  auto v = t.slice_rows(1, 2);
  if (v.span<float>()[0] != 3.0f) return 1;
  std::printf("consumer ok: rlflow %d.%d.%d\n", rlflow::version_major, rlflow::version_minor, rlflow::version_patch);
  return 0;
}
