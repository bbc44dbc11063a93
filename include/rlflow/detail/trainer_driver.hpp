#pragma once
// moved to <rlflow/trainer/driver.hpp>; this forwarding header goes in the next release
#include <rlflow/trainer/driver.hpp>
