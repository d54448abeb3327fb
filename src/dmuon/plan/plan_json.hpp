#pragma once
// Machine-readable form of a plan (dmuon_inspect --json, results files).

#include <nlohmann/json.hpp>

#include "dmuon/model/module_tree.hpp"
#include "dmuon/plan/comm_volume.hpp"
#include "dmuon/plan/plan.hpp"

namespace dmuon::plan {

/// dedicate, boundary, strict, reshard (the mode the sites were resolved for), hook_sites,
/// sites, dedicated_params, params, partition, findings, warnings, suggested_boundary (see
/// README "dmuon_inspect --json").
nlohmann::json plan_to_json(const model::ModuleTree& tree, const Plan& plan);

/// Per-step predicted collectives for one reshard mode: hooks that fire and hooks that
/// communicate, calls and bytes per rank by kind.
nlohmann::json volume_to_json(const CommVolume& v);

}  // namespace dmuon::plan
