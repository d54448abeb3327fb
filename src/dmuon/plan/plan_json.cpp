#include "dmuon/plan/plan_json.hpp"

namespace dmuon::plan {

using nlohmann::json;

namespace {

json sites_json(const model::ModuleTree& tree, const Plan& plan) {
  json sites = json::array();
  for (const auto& s : plan.hooks.sites) {
    json params = json::array();
    for (int pid : s.params) params.push_back(tree.parameter(pid).name);
    sites.push_back({{"path", s.path},
                     {"type", s.type},
                     {"params", params},
                     {"numel", s.numel},
                     {"bytes", s.bytes},
                     {"owners", site_owner_ranks(s, plan.partition)},
                     {"reason", boundary::site_reason_name(plan.hooks.reason[s.params.front()])}});
  }
  return sites;
}

// The owner-based (dedicated) parameters.
json params_json(const model::ModuleTree& tree, const Plan& plan) {
  const auto& part = plan.partition;
  json params = json::array();
  for (int pid : plan.hooks.dedicated) {
    const auto& p = tree.parameter(pid);
    params.push_back({{"name", p.name},
                      {"shape", p.shape},
                      {"dtype", model::dtype_name(p.dtype)},
                      {"owner", part.owner_rank(pid)},
                      {"site", plan.hooks.sites[plan.hooks.site_of_param[pid]].path},
                      {"cost", part.param_cost[pid]},
                      {"route", route_name(plan.route.at(static_cast<std::size_t>(pid)))}});
  }
  return params;
}

// --route: every parameter's route (the owner-based ones are also in `params`).
json routes_json(const model::ModuleTree& tree, const Plan& plan) {
  json routes = json::object();
  for (int pid : tree.parameter_order())
    routes[tree.parameter(pid).name] = route_name(plan.route.at(static_cast<std::size_t>(pid)));
  return routes;
}

json partition_json(const partition::Partition& part) {
  json slots = json::array();
  for (const auto& s : part.slots)
    slots.push_back({{"shard", s.shard}, {"replicate", s.replicate}, {"rank", s.rank}});
  return {{"strategy", partition::strategy_name(part.options.strategy)},
          {"cost_model", partition::cost_model_name(part.options.cost_model)},
          {"shard", part.options.shard},
          {"replicate", part.options.replicate},
          {"slots", slots},
          {"units", part.units.size()},
          {"packed_units", part.packed_units},
          {"numel_loads", part.numel_loads},
          {"cost_loads", part.cost_loads},
          {"total_cost", part.total_cost},
          {"largest_unit_cost", part.largest_unit_cost},
          {"makespan", part.makespan},
          {"lower_bound", part.lower_bound},
          {"ratio", part.ratio},
          {"tight_lower_bound", part.tight_lower_bound},
          {"tight_ratio", part.tight_ratio},
          {"imbalance_all", part.imbalance_all},
          {"imbalance_nonempty", part.imbalance_nonempty},
          {"empty_slots", part.empty_slots},
          {"idle_slots", part.empty_slots},
          {"key_collisions", part.key_collisions}};
}

json finding_json(const boundary::Finding& f) {
  return {{"kind", boundary::finding_kind_name(f.kind)},
          {"severity", f.severity == boundary::Severity::warning ? "warning" : "note"},
          {"site", f.site},
          {"paths", f.paths},
          {"message", f.message}};
}

}  // namespace

json plan_to_json(const model::ModuleTree& tree, const Plan& plan) {
  json findings = json::array(), warnings = json::array();
  for (const auto& f : plan.report.findings) {
    findings.push_back(finding_json(f));
    if (f.severity == boundary::Severity::warning) warnings.push_back(f.message);
  }
  return {{"dedicate", plan.rule.spec()},
          {"boundary", plan.policy.spec()},
          {"strict", plan.policy.strict()},
          {"reshard", reshard_name(plan.config.reshard)},
          {"hook_sites", plan.hooks.sites.size()},
          {"sites", sites_json(tree, plan)},
          {"dedicated_params", plan.hooks.dedicated.size()},
          {"route_rules", plan.config.routes},
          {"routes", routes_json(tree, plan)},
          {"params", params_json(tree, plan)},
          {"partition", partition_json(plan.partition)},
          {"findings", findings},
          {"warnings", warnings},
          {"suggested_boundary", plan.report.suggested_boundary},
          {"suggested_sites", plan.report.suggested_sites}};
}

json volume_to_json(const CommVolume& v) {
  auto kind = [](const KindVolume& k) {
    return json{{"calls_per_rank", k.calls_per_rank},
                {"bytes_per_rank", k.bytes_per_rank},
                {"max_calls", k.max_calls()},
                {"max_bytes", k.max_bytes()}};
  };
  json out = {{"reshard", reshard_name(v.reshard)},
              {"hooks_fired_per_step", v.hooks_fired},
              {"hooks_communicating_per_step", v.hooks_communicating},
              {"dedicated_bytes", v.dedicated_bytes},
              {"owned_bytes", v.owned_bytes},
              {"max_bytes_per_rank", v.max_bytes_per_rank()},
              {"broadcast", kind(v.broadcast)},
              {"reduce", kind(v.reduce)}};
  if (!v.reduce_stage2.calls_per_rank.empty() && v.reduce_stage2.max_calls() > 0) {
    out["replicate_reduce"] = kind(v.reduce_stage2);
    out["replicate_broadcast"] = kind(v.replicate_broadcast);
  }
  return out;
}

}  // namespace dmuon::plan
