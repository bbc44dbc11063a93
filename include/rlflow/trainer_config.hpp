#pragma once
// moved to <rlflow/config/trainer_config.hpp>; this forwarding header goes in the next release
#include <rlflow/config/trainer_config.hpp>
