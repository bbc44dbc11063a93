// build error: f must be stateless .a lambda without captures. to run in another process
// execute_func_rank_zero with a capturing lambda on the MPI backend.
#include <rlflow/mpi/mpi.hpp>
struct R {
  using role_tag = rlflow::worker_tag;
  int f() { return 1; }
  using methods = rlflow::methods<rlflow::method<&R::f, rlflow::dispatch::OneToAll>>;
};
int main() {
  rlflow::ResourcePool pool("p", {1}, 1);
  rlflow::WorkerGroup<R, rlflow::dispatch::Mpi> g(pool);
  int k = 3;
  return g.execute_func_rank_zero([k](int a) { return a * k; }, 2);
}
