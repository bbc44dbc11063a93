// build error: an argument or the result of fn cannot cross processes
// A method taking a type rlflow::wire has no codec for, called through the MPI backend.
#include <rlflow/mpi/mpi.hpp>
struct Opaque {
  int x = 0;
};
struct R {
  using role_tag = rlflow::worker_tag;
  int f(Opaque o) { return o.x; }
  using methods = rlflow::methods<rlflow::method<&R::f, rlflow::dispatch::OneToAll>>;
};
int main() {
  rlflow::ResourcePool pool("p", {1}, 1);
  rlflow::WorkerGroup<R, rlflow::dispatch::Mpi> g(pool);
  g.call<&R::f>(Opaque{});
}
