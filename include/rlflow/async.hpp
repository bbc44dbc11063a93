#pragma once
// moved to <rlflow/dispatch/async.hpp>; this forwarding header goes in the next release
#include <rlflow/dispatch/async.hpp>
