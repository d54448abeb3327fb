#include "dmuon/results/plan_record.hpp"

#include <fmt/format.h>

#include "dmuon/boundary/degradation.hpp"
#include "dmuon/partition/cost_model.hpp"
#include "dmuon/results/summary_fields.hpp"

namespace dmuon::results {
namespace {

void set_layout(RunRecord& r, const partition::PartitionOptions& o) {
  r.world_size = static_cast<std::int64_t>(o.shard) * o.replicate;
  r.replicate = o.replicate;
  r.partition.strategy = partition::strategy_name(o.strategy);
  r.partition.cost_model = partition::cost_model_name(o.cost_model);
  r.partition.shard = o.shard;
  r.partition.replicate = o.replicate;
}

void add_kind(Collectives& c, const std::string& name, const plan::KindVolume& v) {
  c.kinds.push_back(name);
  for (std::int64_t r = 0; r < c.ranks; ++r) {
    const auto i = static_cast<std::size_t>(r);
    c.calls_per_step.push_back(i < v.calls_per_rank.size() ? v.calls_per_rank[i] : 0);
    c.formula_bytes_per_rank_per_step.push_back(i < v.bytes_per_rank.size() ? v.bytes_per_rank[i]
                                                                            : 0);
    c.bytes_per_rank_per_step.push_back(0);
  }
}

}  // namespace

RunRecord make_topology_record(const model::Topology& topo) {
  RunRecord r;
  r.topology = topo.name;
  r.preset = topo.preset;
  r.dedicate_rule = topo.dedicate_rule;
  const auto& tree = topo.tree;
  for (const auto& m : tree.modules()) {
    r.modules.path.push_back(m.path);
    r.modules.type.push_back(m.type);
    r.modules.parent.push_back(m.parent);
  }
  for (const auto& p : tree.parameters()) {
    r.params.name.push_back(p.name);
    r.params.shape.push_back(p.shape);
    r.params.dtype.push_back(model::dtype_name(p.dtype));
    r.params.dedicated.push_back(0);
    r.params.owner_rank.push_back(-1);
    r.params.site.push_back(-1);
    r.params.cost.push_back(0);
  }
  return r;
}

RunRecord make_plan_record(const model::Topology& topo, const plan::Plan& plan,
                           const plan::CommVolume& volume, const std::string& method) {
  RunRecord r = make_topology_record(topo);
  const auto& tree = topo.tree;
  const auto& hooks = plan.hooks;
  const auto& part = plan.partition;
  r.dedicate_rule = plan.config.dedicate_rule;
  r.method = method;
  r.reshard = plan::reshard_name(volume.reshard);
  r.boundary_spec = plan.policy.spec();
  r.boundary_label = plan.policy.label();
  r.strict = plan.policy.strict();
  r.suggested_boundary = plan.report.suggested_boundary;
  for (const auto& f : plan.report.findings)
    r.boundary_warnings.push_back(
        fmt::format("{} [{}] {}", f.severity == boundary::Severity::warning ? "WARNING" : "note",
                    boundary::finding_kind_name(f.kind), f.message));
  set_layout(r, part.options);

  for (int pid : hooks.dedicated) {
    const auto i = static_cast<std::size_t>(pid);
    r.params.dedicated[i] = 1;
    r.params.owner_rank[i] = part.owner_rank(pid);
    r.params.site[i] = hooks.site_of_param.at(i);
    r.params.cost[i] = part.param_cost.at(i);
  }
  for (const auto& s : hooks.sites) {
    r.sites.path.push_back(s.path);
    r.sites.type.push_back(s.type);
    r.sites.param_count.push_back(static_cast<std::int64_t>(s.params.size()));
    r.sites.numel.push_back(s.numel);
    r.sites.bytes.push_back(s.bytes);
    const auto owners = plan::site_owner_ranks(s, part);
    r.sites.owners.emplace_back(owners.begin(), owners.end());
  }

  auto& q = r.partition;
  for (const auto& slot : part.slots) q.slot_rank.push_back(slot.rank);
  q.numel_loads = part.numel_loads;
  q.cost_loads = part.cost_loads;
  q.num_units = static_cast<std::int64_t>(part.units.size());
  q.packed_units = part.packed_units;
  q.total_cost = part.total_cost;
  q.makespan = part.makespan;
  q.lower_bound = part.lower_bound;
  q.ratio = part.ratio;
  q.imbalance_all = part.imbalance_all;
  q.imbalance_nonempty = part.imbalance_nonempty;
  q.empty_slots = part.empty_slots;
  q.key_collisions = part.key_collisions;

  auto& c = r.collectives;
  c.ranks = volume.world;
  add_kind(c, "broadcast", volume.broadcast);
  add_kind(c, "reduce", volume.reduce);
  if (part.options.replicate > 1) {
    add_kind(c, "replicate_reduce", volume.reduce_stage2);
    add_kind(c, "replicate_broadcast", volume.replicate_broadcast);
  }

  r.summary[summary_key::hook_sites.name] = static_cast<double>(volume.hook_sites);
  r.summary[summary_key::hook_calls_per_step.name] = static_cast<double>(volume.hooks_fired);
  r.summary[summary_key::hooks_communicating_per_step.name] =
      static_cast<double>(volume.hooks_communicating);
  r.summary[summary_key::dedicated_bytes.name] = static_cast<double>(volume.dedicated_bytes);
  r.summary[summary_key::formula_bytes_per_rank_max.name] =
      static_cast<double>(volume.max_bytes_per_rank());
  (void)tree;
  return r;
}

RunRecord make_rejected_record(const model::Topology& topo, const plan::PlanConfig& config,
                               const std::string& error, const std::string& method,
                               plan::Reshard reshard) {
  RunRecord r = make_topology_record(topo);
  r.status = "rejected";
  r.error = error;
  r.dedicate_rule = config.dedicate_rule;
  r.boundary_spec = config.boundary;
  r.boundary_label = fmt::format("{} ({})", config.boundary, config.strict ? "strict" : "lenient");
  r.strict = config.strict;
  r.method = method;
  r.reshard = plan::reshard_name(reshard);
  set_layout(r, config.partition);
  return r;
}

}  // namespace dmuon::results
