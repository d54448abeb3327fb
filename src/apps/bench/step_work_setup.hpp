#pragma once
// The step's activation work at the run's shape (--seq-len, --micro-batch, --ac, --fusion),
// attached to the engine options, and the header lines that state it. Shared by dmuon_bench
// and dmuon_project (docs/STEP-WORK.md).

#include <optional>
#include <string>

#include "dmuon/model/topology.hpp"
#include "dmuon/work/step_work.hpp"
#include "options/run_options.hpp"

namespace dmuon::apps::bench {

/// The step's work for `topology` in the compute type `dtype`: sets o.engine.step.activation
/// and returns the work (nullopt without --seq-len). A topology without a geometry gets its
/// parameters' work only (the work's note). Under `tp` (the projection's --tp T) the work is
/// one TP rank's and `topology` must be that rank's (plan/tp_local_tree.hpp). `rank_tree`
/// (--ep: an EP rank's, model/expert_local_tree.hpp): the tree the run lays out, in whose ids
/// the attached work is given (engine::in_tree_of; the work itself is `topology`'s, the whole
/// model's).
std::optional<work::StepWork> attach_step_work(RunOptions& o, const model::Topology& topology,
                                               kernels::Dtype dtype,
                                               const work::TensorParallel& tp = {},
                                               const model::ModuleTree* rank_tree = nullptr);

/// "# step work: ..." (the run shape and the work's totals per rank and micro-batch) and one
/// "# note: ..." line per thing the work model leaves out; for the tools' headers.
std::string step_work_lines(const RunOptions& o, const work::StepWork& w);

}  // namespace dmuon::apps::bench
