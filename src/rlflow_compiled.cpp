// The compiled part of rlflow (target rlflow::rlflow_compiled): the common instantiations that
// programs built with RLFLOW_SEPARATE_COMPILATION declare extern (docs/development.md).
#include "compiled_part.hpp"
