#pragma once
// moved to <rlflow/comm/nccl_communicator.hpp>; this forwarding header goes in the next release
#include <rlflow/comm/nccl_communicator.hpp>
