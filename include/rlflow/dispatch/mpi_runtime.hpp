#pragma once
// moved to <rlflow/mpi/mpi_runtime.hpp>; this forwarding header goes in the next release
#include <rlflow/mpi/mpi_runtime.hpp>
