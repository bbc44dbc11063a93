#pragma once
// moved to <rlflow/model/hf_folder.hpp>; this forwarding header goes in the next release
#include <rlflow/model/hf_folder.hpp>
