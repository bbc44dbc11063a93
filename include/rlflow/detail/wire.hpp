#pragma once
// moved to <rlflow/mpi/wire.hpp>; this forwarding header goes in the next release
#include <rlflow/mpi/wire.hpp>
