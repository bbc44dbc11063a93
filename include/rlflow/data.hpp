#pragma once
// moved to <rlflow/data/data.hpp>; this forwarding header goes in the next release
#include <rlflow/data/data.hpp>
