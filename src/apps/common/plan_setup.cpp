#include "common/plan_setup.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dmuon/base/error.hpp"
#include "dmuon/boundary/tp_shard.hpp"
#include "dmuon/model/expert_local_tree.hpp"
#include "dmuon/model/topology_file.hpp"
#include "dmuon/partition/partition.hpp"

namespace dmuon::apps {

std::string list_topologies_text() {
  std::string out;
  for (const auto& t : model::builtin_topologies()) {
    out += fmt::format("{:<11} {}\n", t.name, t.description);
    out += fmt::format("{:<11}   presets: {} (default {})\n", "", fmt::join(t.presets, ", "),
                       t.default_preset);
    out += fmt::format("{:<11}   --set keys: {}{}\n", "", fmt::join(t.keys, ", "),
                       t.layers_alias.empty() ? "" : fmt::format(" (layers = {})", t.layers_alias));
    // The boundaries `--boundary recommended` / `incomplete` stand for (and the dedication
    // rule), as the default preset defines them.
    const auto topo = model::build_topology(t.name, t.default_preset);
    out += fmt::format("{:<11}   dedicate: {}\n", "", topo.dedicate_rule);
    out += fmt::format("{:<11}   recommended boundary: {}\n", "",
                       topo.recommended_boundary.empty() ? "none" : topo.recommended_boundary);
    out += fmt::format("{:<11}   incomplete boundary: {}\n", "",
                       topo.incomplete_boundary.empty()
                           ? "none"
                           : topo.incomplete_boundary +
                                 " (misses some dedicated parameters: strict rejects it, "
                                 "--lenient falls back)");
  }
  return out;
}

model::Topology load_topology(const ModelChoice& o) {
  if (!o.topology_file.empty()) {
    if (!o.sets.empty() || !o.preset.empty())
      throw InputError("--set and --preset apply to built-in topologies, not to --topology-file");
    return model::read_topology_file(o.topology_file);
  }
  std::vector<std::pair<std::string, std::string>> overrides;
  for (const auto& s : o.sets) overrides.push_back(model::parse_override(s));
  const auto& info = model::topology_info(o.topology);
  return model::build_topology(o.topology, o.preset.empty() ? info.default_preset : o.preset,
                               overrides);
}

std::string resolve_boundary_alias(const std::string& boundary, const model::Topology& t) {
  if (boundary == "recommended") {
    if (t.recommended_boundary.empty())
      throw InputError(fmt::format("topology '{}' has no recommended boundary", t.name));
    return t.recommended_boundary;
  }
  if (boundary == "incomplete") {
    if (t.incomplete_boundary.empty())
      throw InputError(fmt::format("topology '{}' has no incomplete boundary", t.name));
    return t.incomplete_boundary;
  }
  return boundary;
}

model::Topology rank_topology(model::Topology whole, int ep) {
  if (ep > 1) whole.tree = model::expert_local_tree(whole.tree, ep);
  return whole;
}

model::Topology load_rank_topology(const RunOptions& o) {
  return rank_topology(load_topology(o.model), o.plan.ep);
}

plan::PlanConfig make_plan_config(const RunOptions& o, const model::Topology& t, int world_size,
                                  const std::string& boundary, bool strict,
                                  partition::Strategy strategy) {
  const int replicate = o.plan.partition.replicate, tp = o.plan.tp;
  if (world_size < 1 || world_size > partition::kMaxSlots)
    throw InputError(
        fmt::format("world size {} is invalid (valid: 1..{})", world_size, partition::kMaxSlots));
  if (world_size % replicate != 0)
    throw InputError(
        fmt::format("replicate size {} does not divide world size {} (valid: a divisor "
                    "of the world size)",
                    replicate, world_size));
  if ((world_size / replicate) % tp != 0)
    throw InputError(fmt::format(
        "--tp {} x --replicate {} does not divide world size {} (valid: R x T dividing the "
        "world size; world = R x G x T)",
        tp, replicate, world_size));
  plan::PlanConfig c = o.plan;
  if (c.dedicate_rule.empty()) c.dedicate_rule = t.dedicate_rule;
  if (c.dedicate_rule.empty())
    throw InputError(
        fmt::format("topology '{}' names no dedication rule: pass --dedicate", t.name));
  c.boundary = resolve_boundary_alias(boundary, t);
  c.strict = strict;
  c.reshard = o.engine.step.reshard;
  c.partition.strategy = strategy;
  c.partition.shard = world_size / replicate / tp;
  return c;
}

}  // namespace dmuon::apps
