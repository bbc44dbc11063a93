#pragma once
// moved to <rlflow/comm/communicator.hpp>; this forwarding header goes in the next release
#include <rlflow/comm/communicator.hpp>
