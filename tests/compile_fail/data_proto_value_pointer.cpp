// A Value built from a non-string pointer is a compile error instead of a silent bool.
// build error: rlflow::Value: cannot hold a pointer
#include <rlflow/core/value.hpp>

int main() {
  int x = 3;
  rlflow::Value v(&x);
  return v.is_bool() ? 0 : 1;
}
