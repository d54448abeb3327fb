#pragma once
// Flags shared by the apps that build a plan: topology selection, dedication, boundary,
// ownership partition. One definition, so dmuon_inspect and dmuon_bench spell them alike.

#include <CLI/CLI.hpp>
#include <string>
#include <utility>
#include <vector>

#include "dmuon/model/topology.hpp"
#include "dmuon/plan/plan.hpp"

namespace dmuon::apps {

struct PlanOptions {
  std::string topology = "moe";
  std::string preset;  ///< "" = the topology's default preset
  std::vector<std::string> sets;
  std::string topology_file;
  bool list = false;
  std::string dedicate;             ///< "" = the topology's rule
  std::vector<std::string> routes;  ///< --route RULE=ROUTE items (plan/param_route.hpp)
  std::string boundary = "default";
  bool lenient = false;
  std::string owner_strategy = "lpt";
  std::string cost_model = "optimizer";
  bool no_pack = false;
  std::int64_t pack_threshold = 5'000'000;
  int max_owners_per_group = 0;
  std::string group_key = "layer";  ///< partition::GroupKey: layer (the reference's) | site
  bool no_column_balance = false;
  int replicate = 1;
  int tp = 1;            ///< T, tensor-parallel group size (world = R x G x T)
  std::string tp_shard;  ///< "" = boundary::kDefaultTpShardRule
  std::string tp_row;    ///< "" = boundary::kDefaultTpRowRule
  /// Not a flag here: the app sets it (dmuon_bench from its --reshard, dmuon_inspect per
  /// mode) so that make_plan_config resolves hook sites for the mode the engine runs.
  plan::Reshard reshard = plan::Reshard::z3;
};

/// Registers the shared flags on `app`. Every string-valued flag refuses an empty value and a
/// value that looks like a flag (`--dedicate= --json`), exit 2.
void add_plan_options(CLI::App& app, PlanOptions& o);

/// The validator add_plan_options puts on its string flags, for the apps' own flags.
CLI::Validator nonempty_value();

/// Text for --list: every built-in topology with presets and --set keys.
std::string list_topologies_text();

/// Builds the topology the flags name (built-in or file). Throws InputError on bad input.
model::Topology load_topology(const PlanOptions& o);

/// Resolves "recommended"/"incomplete" to the topology's boundary strings.
std::string resolve_boundary_alias(const std::string& boundary, const model::Topology& t);

/// The plan configuration for a world of `world_size` ranks (G = world / (R x T)), for
/// o.reshard. R x T must divide the world size (InputError otherwise).
/// A world size outside 1..partition::kMaxSlots is an InputError (checked before anything is
/// sized by it).
plan::PlanConfig make_plan_config(const PlanOptions& o, const model::Topology& t, int world_size);

}  // namespace dmuon::apps
