#pragma once
// moved to <rlflow/config/run_main.hpp>; this forwarding header goes in the next release
#include <rlflow/config/run_main.hpp>
