#pragma once
// Turns the rows of an invocation into results-file records (rank 0): the plan parts from
// results::make_plan_record / make_rejected_record, then what the engine measured: per-rank
// collective calls and bytes (measured and formula), per step/rank/phase timings, memory and
// the summary attributes (results/README.md).

#include <string>
#include <vector>

#include "bench/bench_options.hpp"
#include "bench/bench_run.hpp"
#include "dmuon/model/topology.hpp"
#include "dmuon/results/run_record.hpp"

namespace dmuon::apps::bench {

/// The plan options beyond boundary and owners that change owners or loads, as one string for
/// the results file's run key ("pack=<5000000 max_owners_per_group=0 column_balance=on").
std::string plan_options_text(const PlanOptions& p);

/// The effective configuration of one row as a config file dmuon_bench accepts (YAML).
std::string config_text(const BenchOptions& o, const BenchRun& run);

/// One record per row, in row order. `plans` are indexed by BenchRun::plan_index.
std::vector<results::RunRecord> make_records(const model::Topology& topo,
                                             const std::vector<plan::Plan>& plans,
                                             const BenchOptions& o,
                                             const std::vector<BenchRun>& runs);

}  // namespace dmuon::apps::bench
