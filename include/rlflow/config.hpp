#pragma once
// moved to <rlflow/core/config.hpp>; this forwarding header goes in the next release
#include <rlflow/core/config.hpp>
