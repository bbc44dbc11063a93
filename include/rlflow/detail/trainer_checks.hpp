#pragma once
// moved to <rlflow/trainer/checks.hpp>; this forwarding header goes in the next release
#include <rlflow/trainer/checks.hpp>
