#pragma once
// moved to <rlflow/core/backend.hpp>; this forwarding header goes in the next release
#include <rlflow/core/backend.hpp>
