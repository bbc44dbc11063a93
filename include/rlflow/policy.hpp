#pragma once
// moved to <rlflow/config/policy.hpp>; this forwarding header goes in the next release
#include <rlflow/config/policy.hpp>
