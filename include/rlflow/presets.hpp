#pragma once
// moved to <rlflow/config/presets.hpp>; this forwarding header goes in the next release
#include <rlflow/config/presets.hpp>
