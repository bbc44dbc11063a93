#pragma once
// moved to <rlflow/dispatch/method.hpp>; this forwarding header goes in the next release
#include <rlflow/dispatch/method.hpp>
