#pragma once
// Builds the plan-related parts of a RunRecord from the planning library's objects, so the
// benchmark only adds what it measures (timings, measured collective bytes, memory, summary).

#include <string>

#include "dmuon/model/topology.hpp"
#include "dmuon/plan/comm_volume.hpp"
#include "dmuon/plan/plan.hpp"
#include "dmuon/results/run_record.hpp"

namespace dmuon::results {

/// Topology name/preset and the module and parameter tables (no plan: every parameter
/// non-dedicated, owner and site -1). Enough for a run rejected at set-up.
RunRecord make_topology_record(const model::Topology& topo);

/// Everything the plan determines: dedication, sites (with owners), owners and costs per
/// parameter, partition quality, boundary spec/label/strict, degradation findings (one line
/// each, "WARNING [kind] ..." / "note [kind] ..."), the suggested boundary, reshard and world
/// layout, and the collectives with calls per step and *formula* bytes per rank from `volume`
/// (kinds broadcast, reduce; with HSDP also replicate_reduce = stage 2, replicate_broadcast). The
/// measured bytes are set to zero for the engine to fill. Summary: hook_sites, hook_calls_per_step,
/// dedicated_bytes, formula_bytes_per_rank_max.
RunRecord make_plan_record(const model::Topology& topo, const plan::Plan& plan,
                           const plan::CommVolume& volume, const std::string& method);

/// A run whose strict boundary was rejected at set-up: status "rejected", `error`, the
/// configuration's boundary and layout, and no timings.
RunRecord make_rejected_record(const model::Topology& topo, const plan::PlanConfig& config,
                               const std::string& error, const std::string& method,
                               plan::Reshard reshard);

}  // namespace dmuon::results
