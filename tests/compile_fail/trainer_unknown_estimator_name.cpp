// build error: no advantage estimator has this name
// error count: 1
// A misspelt name in rlflow::Estimator<"..."> is caught against the estimator table.
#include <rlflow/algorithm/algorithm.hpp>
using T = rlflow::Estimator<"grpoo">;
static_assert(sizeof(T) > 0);
int main() {}
