#pragma once
// The rows of one invocation for one world size: a dmuon row per (boundary of the sweep,
// owner strategy), then one row per baseline method, with the plans they run. Shared by
// dmuon_bench (which measures them) and dmuon_project (which replays them on a machine model),
// so both tools run exactly the same rows.
//
// A strict boundary that plans leniently was rejected for coverage: a "rejected" row (once per
// boundary), not an input error; anything else (a bad spec, a bad rule) is an InputError.

#include <string>
#include <vector>

#include "bench/bench_run.hpp"
#include "bench/sweep.hpp"
#include "dmuon/model/topology.hpp"
#include "dmuon/plan/plan.hpp"
#include "options/run_options.hpp"

namespace dmuon::apps::bench {

/// The boundary sweep of an invocation: the --boundary items, or the topology's default sweep
/// (`config_dir`/sweeps/<topology>.yaml, else the built-in one). `source` says where it came
/// from.
std::vector<BoundaryChoice> invocation_sweep(const RunOptions& o, const model::Topology& topo,
                                             const std::string& config_dir,
                                             const std::string& config_path, std::string* source);

struct RunList {
  std::vector<plan::Plan> plans;
  std::vector<BenchRun> runs;
};

/// --baseline-units' default: one FSDP unit per repeated block plus the root.
inline constexpr const char* kRepeatedBlocks = "repeated-blocks";

/// The baselines' plan for `world` ranks: their FSDP units by --baseline-units
/// (boundary/repeated_blocks.hpp by default, else that boundary spec, strict), never the swept
/// boundary, so every sweep order gives the same baseline. `units` says what the units are.
/// InputError naming --baseline-units when its spec does not plan.
plan::Plan baseline_plan(const RunOptions& o, const model::Topology& topo, int world,
                         std::string* units);

/// The rows for `world` ranks, the methods of `o`, in the order dmuon_bench prints them.
RunList make_run_list(const RunOptions& o, const model::Topology& topo,
                      const std::vector<BoundaryChoice>& sweep, int world);

}  // namespace dmuon::apps::bench
