#pragma once
// moved to <rlflow/core/tensor.hpp>; this forwarding header goes in the next release
#include <rlflow/core/tensor.hpp>
