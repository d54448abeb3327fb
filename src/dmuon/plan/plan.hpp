#pragma once
// A complete DMuon plan for one model and rank layout: dedicated parameters, hook sites,
// owners, degradation findings. Computed identically on every rank (no communication), so
// its hash can be compared across ranks before the first collective.

#include <cstdint>
#include <string>
#include <vector>

#include "dmuon/boundary/boundary_policy.hpp"
#include "dmuon/boundary/dedication.hpp"
#include "dmuon/boundary/degradation.hpp"
#include "dmuon/boundary/hook_plan.hpp"
#include "dmuon/model/module_tree.hpp"
#include "dmuon/partition/partition.hpp"

namespace dmuon::plan {

struct PlanConfig {
  std::string dedicate_rule;  ///< SPEC §4 rule (see dedication.hpp)
  bool allow_empty_dedication = false;
  std::string boundary = "default";  ///< see boundary_policy.hpp
  bool strict = true;
  partition::PartitionOptions partition;
};

struct Plan {
  PlanConfig config;
  boundary::DedicationRule rule;
  boundary::BoundaryPolicy policy;
  boundary::HookPlan hooks;
  partition::Partition partition;
  boundary::DegradationReport report;
};

/// Builds the plan; throws InputError for bad rules/policies and strict boundary failures.
Plan make_plan(const model::ModuleTree& tree, const PlanConfig& config);

/// Distinct owner ranks of a site's parameters, ascending: one packed broadcast per owner.
std::vector<int> site_owner_ranks(const boundary::Site& site, const partition::Partition& part);

/// 64-bit FNV-1a hash over the sites (paths, parameter names) and owners: equal on all ranks
/// exactly when they computed the same plan.
std::uint64_t plan_hash(const model::ModuleTree& tree, const Plan& plan);

}  // namespace dmuon::plan
