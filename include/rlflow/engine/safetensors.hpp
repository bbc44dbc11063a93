#pragma once
// moved to <rlflow/model/safetensors.hpp>; this forwarding header goes in the next release
#include <rlflow/model/safetensors.hpp>
