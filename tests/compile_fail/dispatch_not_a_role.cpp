// build error: R is not a role
#include <rlflow/dispatch/worker_group.hpp>
struct R {
  int fn(int x) { return x; }
};
int main() {
  rlflow::ResourcePool pool("p", {1}, 1);
  rlflow::WorkerGroup<R> g(pool);
}
