#pragma once
// moved to <rlflow/model/cuda/sampling.cuh>; this forwarding header goes in the next release
#include <rlflow/model/cuda/sampling.cuh>
