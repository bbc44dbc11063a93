#pragma once
// moved to <rlflow/data/data_files.hpp>; this forwarding header goes in the next release
#include <rlflow/data/data_files.hpp>
