#pragma once
// moved to <rlflow/trainer/trainer_async.hpp>; this forwarding header goes in the next release
#include <rlflow/trainer/trainer_async.hpp>
