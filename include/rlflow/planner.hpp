#pragma once
// moved to <rlflow/config/planner.hpp>; this forwarding header goes in the next release
#include <rlflow/config/planner.hpp>
