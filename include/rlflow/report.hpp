#pragma once
// moved to <rlflow/trainer/report.hpp>; this forwarding header goes in the next release
#include <rlflow/trainer/report.hpp>
