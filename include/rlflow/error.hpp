#pragma once
// moved to <rlflow/core/error.hpp>; this forwarding header goes in the next release
#include <rlflow/core/error.hpp>
