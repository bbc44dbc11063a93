#pragma once
// moved to <rlflow/dispatch/role.hpp>; this forwarding header goes in the next release
#include <rlflow/dispatch/role.hpp>
