// rlflow/impl/src.hpp: the compiled part of rlflow (optional). Include it in exactly one .cpp of
// a program whose other translation units are compiled with RLFLOW_SEPARATE_COMPILATION: it
// holds the explicit instantiation definitions that those translation units declare extern
// (rlflow/trainer/separate_compilation.hpp). The CMake target rlflow::rlflow_compiled is this
// file compiled once (src/rlflow_compiled.cpp). Asio's separate-compilation pattern.
#pragma once
#define RLFLOW_COMPILED_PART 1
#include <rlflow/rlflow.hpp>
#include <rlflow/engine/peft.hpp>     // not in the umbrella header: its bodies are compiled here too
#include <rlflow/trainer/report.hpp>
#include <rlflow/trainer/separate_compilation.hpp>
