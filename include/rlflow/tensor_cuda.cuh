#pragma once
// moved to <rlflow/core/tensor_cuda.cuh>; this forwarding header goes in the next release
#include <rlflow/core/tensor_cuda.cuh>
