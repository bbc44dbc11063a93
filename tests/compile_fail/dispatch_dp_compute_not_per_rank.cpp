// build error: every argument must be split per rank already
#include <rlflow/dispatch/worker_group.hpp>
struct R {
  using role_tag = rlflow::worker_tag;
  int fn(int x) { return x; }
  using methods = rlflow::methods<rlflow::method<&R::fn, rlflow::dispatch::DPCompute>>;
};
int main() {
  rlflow::ResourcePool pool("p", {2}, 1);
  rlflow::WorkerGroup<R> g(pool);
  (void)g.call<&R::fn>(1);
}
