#pragma once
// moved to <rlflow/dispatch/resource_pool.hpp>; this forwarding header goes in the next release
#include <rlflow/dispatch/resource_pool.hpp>
