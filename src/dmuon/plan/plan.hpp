#pragma once
// A complete DMuon plan for one model and rank layout: dedicated parameters, hook sites,
// owners, degradation findings. Computed identically on every rank (no communication), so
// its hash can be compared across ranks before the first collective.

#include <cstdint>
#include <string>
#include <vector>

#include "dmuon/base/rank_grid.hpp"
#include "dmuon/boundary/boundary_policy.hpp"
#include "dmuon/boundary/dedication.hpp"
#include "dmuon/boundary/degradation.hpp"
#include "dmuon/boundary/hook_plan.hpp"
#include "dmuon/model/module_tree.hpp"
#include "dmuon/partition/partition.hpp"
#include "dmuon/partition/tp_owners.hpp"
#include "dmuon/plan/param_route.hpp"
#include "dmuon/plan/reshard.hpp"

namespace dmuon::plan {

struct PlanConfig {
  std::string dedicate_rule;  ///< SPEC §4 rule (see dedication.hpp)
  bool allow_empty_dedication = false;
  std::string boundary = "default";  ///< see boundary_policy.hpp
  bool strict = true;
  /// The reshard mode the plan is run with: a tied parameter's hook site depends on it (SPEC
  /// §3 rule 1 applies in Z3 only), so an engine running Z2 needs a plan made for Z2.
  Reshard reshard = Reshard::z3;
  partition::PartitionOptions partition;
  /// --route RULE=ROUTE items, in order (param_route.hpp); empty: the dedication rule alone.
  std::vector<std::string> routes;
  /// Tensor parallelism (tp_shard.hpp, tp_owners.hpp): T and the rules picking the TP-sharded
  /// parameters and their row-parallel subset; T = 1 is no TP. The world is R x G x T.
  int tp = 1;
  std::string tp_shard_rule;  ///< "" = boundary::kDefaultTpShardRule
  std::string tp_row_rule;    ///< "" = boundary::kDefaultTpRowRule
  /// Expert parallelism (model/expert_local_tree.hpp): E, a divisor of the shard group size
  /// G; the plan is then made from an EP rank's tree (every expert container's ep_size E).
  /// E = G: each rank of a row holds its own experts whole, outside the partition and the hook
  /// sites. E < G: the G/E ranks holding the same experts (base/rank_grid.hpp, the expert
  /// group) share them as the row shares the dense parameters: owners among them
  /// (Plan::expert_partition), or FSDP shards over them.
  int ep = 1;
};

struct Plan {
  PlanConfig config;
  boundary::DedicationRule rule;
  boundary::BoundaryPolicy policy;
  boundary::HookPlan hooks;
  partition::Partition partition;
  boundary::DegradationReport report;
  /// Per parameter id: its route. The owner-based ones (muon, adamw) are the "dedicated"
  /// parameters of the partition and the hook plan.
  std::vector<ParamRoute> route;
  /// Dedicated (owner-based) and updated with Muon, not AdamW: route muon.
  bool muon(int pid) const { return route.at(static_cast<std::size_t>(pid)) == ParamRoute::muon; }
  /// Per parameter id: its --route dtype as wire bytes per element (2 bf16, 4 fp32), 0 where
  /// it travels in the run's --comm-dtype. Non-zero only on fsdp and sharded_adamw routes.
  std::vector<int> route_wire_bytes;
  /// Bytes per element parameter `pid` travels in: its route's dtype, else `run_wire_bytes`
  /// (the run's --comm-dtype; 0 in the formulas: the parameter's own dtype).
  int wire_bytes(int pid, int run_wire_bytes) const {
    const int b = route_wire_bytes.empty() ? 0 : route_wire_bytes.at(static_cast<std::size_t>(pid));
    return b > 0 ? b : run_wire_bytes;
  }
  /// Some parameter has a --route dtype.
  bool has_route_dtypes() const;
  /// The fewest bytes per element a --route dtype gives a parameter (2: some travel in bf16),
  /// 0 when none has one.
  int narrowest_route_wire_bytes() const;
  partition::TpPlan tp;  ///< TP-sharded parameters and their TP owners (tp = 1: none)
  /// Per parameter id, --ep > 1: a routed expert's, held whole by this rank (never owner-based,
  /// sharded or at a hook site; Muon where its route is muon, else AdamW). Empty without EP.
  std::vector<char> expert;
  bool is_expert(int pid) const {
    return !expert.empty() && expert.at(static_cast<std::size_t>(pid)) != 0;
  }
  /// --ep E < G: the routed experts' parameters on an owner-based route (muon, adamw)
  /// partitioned over the G/E slots of an expert group (slot = member index in it), with the
  /// run's partition options; empty otherwise.
  partition::Partition expert_partition;
  /// The G/E ranks sharing each expert (1: E = G, or no EP).
  int expert_replicas() const { return config.ep > 1 ? config.partition.shard / config.ep : 1; }
  /// The slot in its expert group that owns expert parameter `pid` (E < G, owner-based
  /// route), else -1.
  int expert_owner(int pid) const {
    const auto& slots = expert_partition.owner_slot;
    const int s = slots.empty() ? -1 : slots.at(static_cast<std::size_t>(pid));
    return s < 0 ? -1 : expert_partition.slots.at(static_cast<std::size_t>(s)).rank;
  }
  /// --route sharded_adamw: the sites of those parameters (sharded_sites.hpp: the boundary
  /// rule's, the root for a parameter no boundary module holds); empty without any. Not hook
  /// sites of DMuon: the engine all-gathers each site's parameters where it runs.
  boundary::HookPlan sharded_hooks;
  /// The world the plan is laid out for: R rows × G columns × T (base/rank_grid.hpp).
  RankGrid grid() const {
    return RankGrid{partition.options.replicate, partition.options.shard, tp.tp, config.ep};
  }
};

/// Builds the plan; throws InputError for bad rules/policies and strict boundary failures.
/// Owners are assigned first and hook sites resolved for config.reshard; a strict failure
/// names the first uncovered parameter in the partition's visiting order, as the reference.
Plan make_plan(const model::ModuleTree& tree, const PlanConfig& config);

/// Distinct owner ranks of a site's parameters, ascending: one packed broadcast per owner.
std::vector<int> site_owner_ranks(const boundary::Site& site, const partition::Partition& part);

/// Packed buffers (broadcasts per forward) of a site: one per owner, and one more per owner
/// for each --route dtype among its parameters there (plan::packed_type_key, no run wire).
std::int64_t site_packed_buffers(const boundary::Site& site, const Plan& plan);

/// 64-bit FNV-1a hash over the sites (paths, parameter names) and owners: equal on all ranks
/// exactly when they computed the same plan.
std::uint64_t plan_hash(const model::ModuleTree& tree, const Plan& plan);

}  // namespace dmuon::plan
