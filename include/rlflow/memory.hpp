#pragma once
// moved to <rlflow/core/memory.hpp>; this forwarding header goes in the next release
#include <rlflow/core/memory.hpp>
