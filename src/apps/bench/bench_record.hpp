#pragma once
// Turns the rows of an invocation into results-file records (rank 0): the plan parts from
// results::make_plan_record / make_rejected_record, then what the engine measured: per-rank
// collective calls and bytes (measured and formula), per step/rank/phase timings, memory and
// the summary attributes (results/README.md).

#include <string>
#include <vector>

#include "bench/bench_run.hpp"
#include "dmuon/model/topology.hpp"
#include "dmuon/results/run_record.hpp"
#include "options/option.hpp"
#include "options/run_options.hpp"

namespace dmuon::apps::bench {

/// The options of one row of the invocation: its boundary, method and owner strategy alone,
/// and (`world` > 0) its world size.
RunOptions row_options(const RunOptions& o, const BenchRun& run, int world = 0);

/// One record per row, in row order. `plans` are indexed by BenchRun::plan_index. `tool` is the
/// tool that made the rows: each record's config is one that tool's --config runs again.
std::vector<results::RunRecord> make_records(const model::Topology& topo,
                                             const std::vector<plan::Plan>& plans,
                                             const RunOptions& o, const std::vector<BenchRun>& runs,
                                             options::Tool tool = options::kBench);

}  // namespace dmuon::apps::bench
