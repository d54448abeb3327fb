#pragma once
// Machine-readable form of a plan's tensor parallelism (dmuon_inspect --json keys "tp",
// "tp_owners", "tp_loads" and each comm mode's "tp" object).

#include <nlohmann/json.hpp>

#include "dmuon/model/module_tree.hpp"
#include "dmuon/plan/plan.hpp"
#include "dmuon/plan/tp_volume.hpp"

namespace dmuon::plan {

/// One object per TP-sharded parameter, model order: name, shape (logical), local_shape,
/// parallel ("column" | "row"), shard_dim, dp_owner (DP rank), tp_owner (TP rank), rank (world
/// rank dp_owner * T + tp_owner, which runs Newton-Schulz), cost, visit (position in the
/// pass). Empty when T = 1.
nlohmann::json tp_owners_to_json(const model::ModuleTree& tree, const Plan& plan);

/// Per DP owner slot: {slot, dp_rank, cost_loads[T], numel_loads[T]}.
nlohmann::json tp_loads_to_json(const Plan& plan);

/// tp, world, per world rank: gather / scatter calls and volume, gather_received,
/// scatter_sent, total bytes (DP + TP) and their maximum.
nlohmann::json tp_volume_to_json(const TpCommVolume& v);

}  // namespace dmuon::plan
