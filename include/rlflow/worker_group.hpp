#pragma once
// moved to <rlflow/dispatch/worker_group.hpp>; this forwarding header goes in the next release
#include <rlflow/dispatch/worker_group.hpp>
