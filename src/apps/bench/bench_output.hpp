#pragma once
// What rank 0 prints: the nccl-tests-style table (one row per BenchRun, then the degradation
// warnings grouped per boundary row, then the verdict footer) or one JSON object with a `runs`
// array. No script should parse the table; use --json or the results file.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/bench_options.hpp"
#include "bench/bench_run.hpp"
#include "dmuon/model/topology.hpp"

namespace dmuon::apps::bench {

std::string format_table(const model::Topology& topo, const std::vector<plan::Plan>& plans,
                         const BenchOptions& o, int world, const std::vector<BenchRun>& runs,
                         const std::string& sweep_source);

nlohmann::json to_json(const model::Topology& topo, const std::vector<plan::Plan>& plans,
                       const BenchOptions& o, int world, const std::vector<BenchRun>& runs);

/// Failed audits plus failed checks over the measured rows (rejected rows are not failures).
int failures(const std::vector<BenchRun>& runs);

}  // namespace dmuon::apps::bench
