#pragma once
// moved to <rlflow/mpi/mpi.hpp>; this forwarding header goes in the next release
#include <rlflow/mpi/mpi.hpp>
