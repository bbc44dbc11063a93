// build error: D is not a dispatch mode
#include <rlflow/dispatch/worker_group.hpp>
struct NotAMode {};
struct R {
  using role_tag = rlflow::worker_tag;
  int fn(int x) { return x; }
  using methods = rlflow::methods<rlflow::method<&R::fn, NotAMode>>;
};
int main() { return R::methods::size; }
