#pragma once
// Output of engine runs: the JSON object of a run (rank 0 prints it; dmuon_bench's table is in
// src/apps/bench/bench_output). Units: bytes, times in ms; every number is the median over
// measured steps of the max over ranks (run_result.hpp).

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dmuon/engine/step/run_result.hpp"
#include "dmuon/model/topology.hpp"
#include "dmuon/plan/plan.hpp"

namespace dmuon::engine {

/// {"topology", ..., "runs": [{method, world_size, replicate, hook_sites, hook_calls_per_step,
///  collectives{channel: {calls_per_step, bytes_per_rank_per_step,
///  formula_bytes_per_rank_per_step}} (replicate_* channels only with HSDP),
///  audit_ok, phases_ms{}, step_ms, check{passed, max_rel_error}}], "passed"}.
nlohmann::json to_json(const model::Topology& topo, const plan::Plan& plan, const EngineOptions& o,
                       const std::vector<RunResult>& runs);

/// Calls per step of weight collectives (broadcast, all_gather) and of gradient collectives
/// (reduce, reduce_scatter, all_reduce), summed over both groups.
std::int64_t weight_calls_per_step(const RunResult& r);
std::int64_t reduce_calls_per_step(const RunResult& r);

/// True when every run's audit and (if run) check passed.
bool all_passed(const std::vector<RunResult>& runs);

}  // namespace dmuon::engine
