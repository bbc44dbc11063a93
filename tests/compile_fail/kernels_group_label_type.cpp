// build error: group_index: a label key must be trivially copyable
#include <rlflow/kernels/advantage.hpp>
#include <vector>
int main() {
  std::vector<std::vector<int>> labels{{1}, {2}, {1}};
  return static_cast<int>(rlflow::kernels::group_index(std::span<std::vector<int> const>(labels)).size());
}
