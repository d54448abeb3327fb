#pragma once
// dmuon_project --pp P (docs/PROJECTION.md "Pipeline parallelism"): the model cut into P
// stages (model/pipeline_stage.hpp), each projected as its own world of world/P ranks running
// the step's --accum micro-batches back to back, with the activations its schedule keeps in
// flight; the step composed from the stages' compute and steps (project/pipeline_schedule.hpp).
// Prints a table (or --json) per row: the composed step, MFU, tokens/s, the peak stage's
// memory, the bubble, and each stage's figures.

#include <string>

#include "options/run_options.hpp"

namespace dmuon::apps::project {

/// Projects and prints the pipeline rows of `o` (o.workload.pp > 1); the exit code.
int run_pipeline_projection(RunOptions& o, const std::string& config_path);

}  // namespace dmuon::apps::project
