#pragma once
// moved to <rlflow/trainer/checkpoint.hpp>; this forwarding header goes in the next release
#include <rlflow/trainer/checkpoint.hpp>
