#pragma once
// moved to <rlflow/config/device_memory_estimate.hpp>; this forwarding header goes in the next release
#include <rlflow/config/device_memory_estimate.hpp>
