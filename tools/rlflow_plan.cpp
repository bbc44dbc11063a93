// rlflow_plan: prints the resource plan of a configuration (make plan ARGS="key=value ...").
//   rlflow_plan [--config FILE.{yaml,json}] [key=value ...] [--json] [--help]
// The table (or, with --json, one JSON object) lists samples per step, actor updates per step,
// rollout replicas, devices, weight syncs and their scope, device share per worker, micro-batches
// and gradient-accumulation steps per worker, and every violated start-up constraint.
#include <iostream>

#include <rlflow/config/planner.hpp>  // plan_main

int main(int argc, char** argv) { return rlflow::plan_main(argc, argv, std::cout, std::cerr); }
