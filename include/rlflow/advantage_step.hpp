#pragma once
// moved to <rlflow/algorithm/advantage_step.hpp>; this forwarding header goes in the next release
#include <rlflow/algorithm/advantage_step.hpp>
