#pragma once
// moved to <rlflow/config/config_limits.hpp>; this forwarding header goes in the next release
#include <rlflow/config/config_limits.hpp>
