#pragma once
// moved to <rlflow/core/metrics.hpp>; this forwarding header goes in the next release
#include <rlflow/core/metrics.hpp>
