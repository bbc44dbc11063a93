#pragma once
// moved to <rlflow/core/value.hpp>; this forwarding header goes in the next release
#include <rlflow/core/value.hpp>
