#pragma once
// moved to <rlflow/dispatch/fused.hpp>; this forwarding header goes in the next release
#include <rlflow/dispatch/fused.hpp>
