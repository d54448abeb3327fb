#pragma once
// From the options to a model and its plans: the topology the options name (built-in or a
// file), the boundary aliases a topology defines, and the plan configuration of one row at
// one world size. Shared by every tool that plans.

#include <string>

#include "dmuon/model/topology.hpp"
#include "dmuon/partition/partition.hpp"
#include "dmuon/plan/plan.hpp"
#include "options/run_options.hpp"

namespace dmuon::apps {

/// Text for --list: every built-in topology with presets and --set keys.
std::string list_topologies_text();

/// Builds the topology `m` names (built-in or file). Throws InputError on bad input.
model::Topology load_topology(const ModelChoice& m);

/// `whole` as one rank holds it at --ep `ep`: with E > 1 its tree an EP rank's
/// (model/expert_local_tree.hpp: 1/E of every layer's routed experts), else `whole` itself.
/// Throws InputError when the model cannot be split so.
model::Topology rank_topology(model::Topology whole, int ep);

/// The model as one rank holds it: rank_topology(load_topology(o.model), o.plan.ep). The
/// engine, the plans and the inspection of an EP run are made from it. Throws InputError on bad
/// input.
model::Topology load_rank_topology(const RunOptions& o);

/// Resolves "recommended"/"incomplete" to the topology's boundary strings.
std::string resolve_boundary_alias(const std::string& boundary, const model::Topology& t);

/// The plan configuration of one row: the options' plan settings with boundary `boundary`
/// (an alias is resolved), `strict`, owner strategy `strategy`, the topology's dedication rule
/// unless the options give one, and the slots of a world of `world_size` ranks
/// (G = world / (R x T)). InputError when R x T does not divide the world, or the world is
/// outside 1..partition::kMaxSlots (checked before anything is sized by it).
plan::PlanConfig make_plan_config(const RunOptions& o, const model::Topology& t, int world_size,
                                  const std::string& boundary, bool strict,
                                  partition::Strategy strategy);

}  // namespace dmuon::apps
