// build error: fn is not listed in R::methods
#include <rlflow/dispatch/worker_group.hpp>
struct R {
  using role_tag = rlflow::worker_tag;
  int fn(int x) { return x; }
  int other(int x) { return x; }
  using methods = rlflow::methods<rlflow::method<&R::other, rlflow::dispatch::OneToAll>>;
};
int main() {
  rlflow::ResourcePool pool("p", {1}, 1);
  rlflow::WorkerGroup<R> g(pool);
  (void)g.call<&R::fn>(1);
}
