#pragma once
// moved to <rlflow/core/device_memory.hpp>; this forwarding header goes in the next release
#include <rlflow/core/device_memory.hpp>
