#pragma once
// moved to <rlflow/core/data_proto.hpp>; this forwarding header goes in the next release
#include <rlflow/core/data_proto.hpp>
