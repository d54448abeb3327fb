#pragma once
// Output of engine runs: the nccl-tests-style human table and the JSON object (rank 0 prints
// them; no script should parse the table). Units: MB = 1e6 bytes, times in ms; every number is
// the median over measured steps of the max over ranks (run_result.hpp).

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dmuon/engine/run_result.hpp"
#include "dmuon/model/topology.hpp"
#include "dmuon/plan/plan.hpp"

namespace dmuon::engine {

/// '#' metadata, one row per run, the plan's degradation warnings, and the verdict footer.
std::string format_table(const model::Topology& topo, const plan::Plan& plan,
                         const EngineOptions& o, const std::vector<RunResult>& runs);

/// {"topology", ..., "runs": [{method, world_size, replicate, hook_sites, hook_calls_per_step,
///  collectives{kind: {calls_per_step, bytes_per_rank_per_step, formula_bytes_per_rank_per_step}},
///  audit_ok, phases_ms{}, step_ms, check{passed, max_rel_error}}], "passed"}.
nlohmann::json to_json(const model::Topology& topo, const plan::Plan& plan, const EngineOptions& o,
                       const std::vector<RunResult>& runs);

/// True when every run's audit and (if run) check passed.
bool all_passed(const std::vector<RunResult>& runs);

}  // namespace dmuon::engine
