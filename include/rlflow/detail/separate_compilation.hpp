#pragma once
// moved to <rlflow/trainer/separate_compilation.hpp>; this forwarding header goes in the next release
#include <rlflow/trainer/separate_compilation.hpp>
