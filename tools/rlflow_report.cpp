// rlflow_report: one self-contained HTML report of one or more runs (make report RUN=runs/<name>).
//   rlflow_report [-o FILE.html] [--title TEXT] [--smoothing W] RUN [RUN...]
// RUN is a run folder holding metrics.jsonl (trainer.default_local_dir) or a .jsonl file
// (name=RUN names it). SVG plots against steps with the runs overlaid, the stacked timing
// breakdown, a smoothing slider and each run's config; no network resources.
#include <iostream>

#include <rlflow/trainer/report.hpp>  // report_main

int main(int argc, char** argv) { return rlflow::report::report_main(argc, argv, std::cout, std::cerr); }
