// build error: fn takes a non-const reference
#include <rlflow/dispatch/worker_group.hpp>
struct R {
  using role_tag = rlflow::worker_tag;
  void fn(int& x) { ++x; }
  using methods = rlflow::methods<rlflow::method<&R::fn, rlflow::dispatch::OneToAll>>;
};
int main() { return R::methods::size; }
