#pragma once
// moved to <rlflow/mpi/mpi_communicator.hpp>; this forwarding header goes in the next release
#include <rlflow/mpi/mpi_communicator.hpp>
