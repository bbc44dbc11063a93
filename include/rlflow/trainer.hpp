#pragma once
// moved to <rlflow/trainer/trainer.hpp>; this forwarding header goes in the next release
#include <rlflow/trainer/trainer.hpp>
