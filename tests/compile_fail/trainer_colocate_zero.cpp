// build error: must be at least 1
#include <rlflow/config/policy.hpp>
static_assert(rlflow::Colocate<0>::max_colocate_count == 0);
int main() {}
