#pragma once
// moved to <rlflow/algorithm/algorithm.hpp>; this forwarding header goes in the next release
#include <rlflow/algorithm/algorithm.hpp>
