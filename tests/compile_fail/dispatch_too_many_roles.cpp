// build error: more roles than N
#include <rlflow/dispatch/worker_group.hpp>
struct A { using role_tag = rlflow::actor_tag; int f() { return 1; } using methods = rlflow::methods<rlflow::method<&A::f>>; };
struct B { using role_tag = rlflow::critic_tag; int g() { return 1; } using methods = rlflow::methods<rlflow::method<&B::g>>; };
int main() {
  rlflow::ResourcePool pool("p", {1}, 1);
  auto g = rlflow::make_colocated_group<rlflow::Colocate<1>, A, B>(pool);
}
