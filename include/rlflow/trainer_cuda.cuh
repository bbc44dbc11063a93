#pragma once
// moved to <rlflow/trainer/trainer_cuda.cuh>; this forwarding header goes in the next release
#include <rlflow/trainer/trainer_cuda.cuh>
