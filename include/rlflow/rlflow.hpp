// rlflow/rlflow.hpp: the umbrella header; includes every public header (never detail/ or
// experimental/). Include narrower headers to keep compile times down.
#pragma once
#include <rlflow/config.hpp>
#include <rlflow/error.hpp>
#include <rlflow/backend.hpp>
#include <rlflow/memory.hpp>
#include <rlflow/tensor.hpp>
