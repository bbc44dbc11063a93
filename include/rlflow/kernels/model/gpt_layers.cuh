#pragma once
// moved to <rlflow/model/cuda/gpt_layers.cuh>; this forwarding header goes in the next release
#include <rlflow/model/cuda/gpt_layers.cuh>
