#include "dmuon/plan/plan.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>
#include <utility>

#include "dmuon/base/abbreviate.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/boundary/tp_shard.hpp"
#include "dmuon/comm/hash.hpp"
#include "dmuon/model/expert_local_tree.hpp"
#include "dmuon/plan/comm_volume.hpp"
#include "dmuon/plan/sharded_sites.hpp"

namespace dmuon::plan {

namespace {

// The owner-based parameters: the dedication rule's, or with --route those on an owner-based
// route (muon or adamw).
// --ep: a rank's own experts are neither (Plan::expert).
std::vector<int> dedicated_params(const model::ModuleTree& tree, const Plan& p,
                                  const std::vector<RouteRule>& route_rules) {
  const PlanConfig& config = p.config;
  if (route_rules.empty()) {
    auto dedicated = boundary::select_dedicated(tree, p.rule, config.allow_empty_dedication);
    dedicated.erase(std::remove_if(dedicated.begin(), dedicated.end(),
                                   [&](int pid) { return p.is_expert(pid); }),
                    dedicated.end());
    if (dedicated.empty() && !config.allow_empty_dedication)
      throw InputError(fmt::format(
          "--ep {}: every parameter the dedication rule '{}' matches is a routed expert's, "
          "which each EP rank updates itself: no parameter is left for DMuon's owners",
          config.ep, abbreviate_value(p.rule.spec())));
    return dedicated;
  }
  std::vector<int> dedicated;
  for (int pid : tree.parameter_order())
    if (owner_based(p.route[static_cast<std::size_t>(pid)]) && !p.is_expert(pid))
      dedicated.push_back(pid);
  if (dedicated.empty() && !config.allow_empty_dedication)
    throw InputError(fmt::format(
        "dedication rule '{}' and --route '{}' leave none of the model's {} parameters on an "
        "owner-based route (muon or adamw)",
        abbreviate_value(p.rule.spec()), abbreviate_value(routes_text(config.routes)),
        tree.parameter_order().size()));
  return dedicated;
}

std::string tp_shard_rule(const PlanConfig& config) {
  return config.tp_shard_rule.empty() ? boundary::kDefaultTpShardRule : config.tp_shard_rule;
}

// Per parameter, its TP shard dimension (-1: not TP-sharded). The rules are parsed only with
// TP (the default ones use a regex, which a build without RE2 refuses).
std::vector<int> tp_shard_dims(const model::ModuleTree& tree, const std::vector<int>& dedicated,
                               const PlanConfig& config) {
  if (config.tp == 1) return std::vector<int>(tree.num_parameters(), -1);
  return boundary::select_tp_sharded(
      tree, dedicated, boundary::DedicationRule::parse(tp_shard_rule(config)),
      boundary::DedicationRule::parse(config.tp_row_rule.empty() ? boundary::kDefaultTpRowRule
                                                                 : config.tp_row_rule),
      config.tp);
}

// The DP owners, then the TP owners (tp_owners.hpp). TP-sharded parameters are never packed.
// --group-key site: the units are bucketed by the sites, resolved before.
// The DP partition of `dedicated` under `partition_options` (site keys from p.hooks).
partition::Partition dp_partition(const model::ModuleTree& tree, const std::vector<int>& dedicated,
                                  const Plan& p, const std::vector<int>& shard_dim,
                                  partition::PartitionOptions partition_options) {
  if (partition_options.group_key == partition::GroupKey::site) {
    partition_options.site_keys.assign(tree.num_parameters(), std::string());
    for (int pid : dedicated)
      partition_options.site_keys[static_cast<std::size_t>(pid)] =
          p.hooks
              .sites[static_cast<std::size_t>(p.hooks.site_of_param[static_cast<std::size_t>(pid)])]
              .path;
  }
  for (std::size_t pid = 0; pid < shard_dim.size(); ++pid)
    if (shard_dim[pid] >= 0) partition_options.never_pack.push_back(static_cast<int>(pid));
  return partition::partition_ownership(tree, dedicated, partition_options);
}

void assign_owners(const model::ModuleTree& tree, const std::vector<int>& dedicated, Plan& p) {
  const std::vector<int> shard_dim = tp_shard_dims(tree, dedicated, p.config);
  p.partition = dp_partition(tree, dedicated, p, shard_dim, p.config.partition);
  p.tp = partition::assign_tp_owners(tree, p.partition, shard_dim, p.config.tp);
}

// The hook sites of the owner-based parameters, and of the sharded_adamw ones. A strict failure
// names the first uncovered parameter in the partition's visiting order; with --group-key site
// the sites come first (their keys bucket the units), and it is model order.
void resolve_sites(const model::ModuleTree& tree, const std::vector<int>& dedicated, Plan& p) {
  boundary::HookPlanOptions hook_options;
  hook_options.reshard_after_forward = p.config.reshard == Reshard::z3;
  hook_options.visit_order = p.config.partition.group_key == partition::GroupKey::site
                                 ? dedicated
                                 : partition::parameter_visit_order(p.partition);
  try {
    p.hooks = boundary::resolve_hook_plan(tree, dedicated, p.policy, hook_options);
  } catch (const InputError& e) {
    // A strict failure is most often a typo in a type name: say so on the same line.
    std::string msg = e.what();
    for (const auto& unknown : boundary::unknown_boundary_types(tree, p.policy))
      msg += "; " + unknown.second;
    throw InputError(msg);
  }
  std::vector<int> sharded_adamw;
  for (int pid : tree.parameter_order())
    if (p.route[static_cast<std::size_t>(pid)] == ParamRoute::sharded_adamw && !p.is_expert(pid))
      sharded_adamw.push_back(pid);
  if (!sharded_adamw.empty())
    p.sharded_hooks = resolve_sharded_sites(tree, sharded_adamw, p.config.boundary,
                                            hook_options.reshard_after_forward);
}

// Every unit is in the "none" bucket and some unit is packed: layer keys left nothing to
// bucket by.
bool keyless_packing(const partition::Partition& part) {
  if (part.options.group_key != partition::GroupKey::layer || part.packed_units == 0) return false;
  return std::all_of(part.units.begin(), part.units.end(),
                     [](const partition::Unit& u) { return !u.key; });
}

// The remedies the idle-ranks finding can name, each tried on this plan (same sites, same
// ranks): "--group-key site" (units bucketed by hook site, which follows --boundary), "--no-pack"
// (one unit per matrix) and both. Under --group-key layer the owners do not depend on the
// boundary, so a finer boundary alone changes nothing and is not tried.
std::vector<std::pair<std::string, partition::Partition>> idle_remedies(
    const model::ModuleTree& tree, const std::vector<int>& dedicated, const Plan& p) {
  const auto& base = p.config.partition;
  std::vector<std::pair<std::string, partition::PartitionOptions>> tries;
  auto site = base, no_pack = base;
  site.group_key = partition::GroupKey::site;
  no_pack.pack = false;
  const bool can_site = base.group_key == partition::GroupKey::layer;
  const bool can_unpack = p.partition.packed_units > 0;
  if (can_site) tries.emplace_back("--group-key site", site);
  if (can_unpack) tries.emplace_back("--no-pack", no_pack);
  if (can_site && can_unpack) {
    site.pack = false;
    tries.emplace_back("--group-key site --no-pack", site);
  }
  const std::vector<int> shard_dim = tp_shard_dims(tree, dedicated, p.config);
  std::vector<std::pair<std::string, partition::Partition>> out;
  for (auto& [flag, options] : tries)
    out.emplace_back(flag, dp_partition(tree, dedicated, p, shard_dim, options));
  return out;
}

// "--no-pack: 68 units, 0 idle, makespan 1.2e+05": what one remedy gives.
std::string partition_figures(const partition::Partition& part) {
  return fmt::format("{} units, {} idle, makespan {:.4g}", part.units.size(), part.empty_slots,
                     static_cast<double>(part.makespan));
}

// What the idle ranks cost and what changes it, checked: every remedy tried and its figures,
// those that help named; when none does, why (fewer matrices than ranks) and what to change.
std::string idle_ranks_message(const model::ModuleTree& tree, const std::vector<int>& dedicated,
                               const Plan& p) {
  const auto& part = p.partition;
  std::string msg = fmt::format(
      "{} of {} ranks own no matrix (the partition has {} units for {} slots): their "
      "Newton-Schulz capacity idles, although the ratio reads {:.4f} (now {})",
      part.empty_slots, part.slots.size(), part.units.size(), part.slots.size(), part.ratio,
      partition_figures(part));
  std::vector<std::string> helps, tried;
  for (const auto& [flag, q] : idle_remedies(tree, dedicated, p)) {
    const bool better = q.empty_slots < part.empty_slots || q.makespan < part.makespan;
    tried.push_back(
        fmt::format("{}: {}{}", flag, partition_figures(q), better ? "" : " (no help)"));
    if (better) helps.push_back(flag);
  }
  if (!tried.empty()) msg += fmt::format("; tried {}", fmt::join(tried, "; "));
  // Fewer matrices than ranks: some ranks idle under any partition.
  const std::size_t matrices = dedicated.size(), slots = part.slots.size();
  const std::string floor =
      matrices < slots
          ? fmt::format(
                "{} dedicated matrices for {} ranks leave {} idle under any partition: "
                "use fewer ranks, or dedicate more parameters (--dedicate)",
                matrices, slots, slots - matrices)
          : std::string();
  if (!helps.empty()) {
    msg += fmt::format("; use {}", fmt::join(helps, " or "));
    if (keyless_packing(part))
      msg +=
          " (no parameter name carries a layers.N / blocks.N key, so every small matrix "
          "packs into one unit)";
    return floor.empty() ? msg : msg + "; " + floor;
  }
  if (!floor.empty()) return msg + "; no partition helps: " + floor;
  return msg + "; no remedy of the partition helps: fewer ranks would use them";
}

// The plan's own findings, after the boundary's: idle ranks and an unsharded --tp.
void add_plan_findings(const model::ModuleTree& tree, const std::vector<int>& dedicated, Plan& p) {
  // A partition that leaves ranks without any matrix idles their Newton-Schulz capacity; its
  // ratio can still read 1.0000 (the busiest rank sits at the lower bound), so say it.
  if (p.partition.empty_slots > 0) {
    boundary::Finding f;
    f.kind = boundary::FindingKind::idle_ranks;
    f.severity = boundary::Severity::warning;
    f.message = idle_ranks_message(tree, dedicated, p);
    p.report.findings.push_back(std::move(f));
  }
  if (p.config.tp > 1 && p.tp.sharded.empty()) {
    boundary::Finding f;
    f.kind = boundary::FindingKind::tp_unsharded;
    f.severity = boundary::Severity::warning;
    f.message = fmt::format(
        "--tp {} but no dedicated parameter matches the TP rule '{}': every TP rank holds full "
        "copies and the TP gather/scatter moves nothing (see --tp-shard)",
        p.config.tp, tp_shard_rule(p.config));
    p.report.findings.push_back(std::move(f));
  }
}

// --ep: the routed experts' parameters of an EP rank's tree (per parameter id; empty
// without EP). The tree must be one (model::expert_local_tree with E = config.ep).
std::vector<char> expert_params(const model::ModuleTree& tree, const PlanConfig& config) {
  if (config.ep == 1) return {};
  const auto containers = model::expert_containers(tree);
  if (config.ep < 1 || containers.empty() ||
      std::any_of(containers.begin(), containers.end(),
                  [&](int c) { return tree.module(c).ep_size != config.ep; }))
    throw InputError(fmt::format(
        "--ep {}: the plan is made from an EP rank's model (model::expert_local_tree)", config.ep));
  const auto& part = config.partition;
  if (part.shard % config.ep != 0 || part.replicate != 1 || config.tp != 1)
    throw InputError(fmt::format(
        "--ep {} on R {} x G {} x T {} ranks is not modelled (valid: a divisor of the shard "
        "group size G = {}, without --replicate or --tp)",
        config.ep, part.replicate, part.shard, config.tp, part.shard));
  std::vector<char> expert(tree.num_parameters(), 0);
  for (int pid : tree.parameter_order())
    expert[static_cast<std::size_t>(pid)] = model::expert_slot(tree, pid).container >= 0;
  return expert;
}

// --ep E < G: the owners of the experts' owner-based parameters among the G/E ranks of an
// expert group, by the run's partition options (strategy, cost model, packing; units keyed by
// layer: the experts have no hook sites).
partition::Partition expert_partition(const model::ModuleTree& tree, const Plan& p) {
  if (p.expert_replicas() == 1) return {};
  std::vector<int> owned;
  for (int pid : tree.parameter_order())
    if (p.is_expert(pid) && owner_based(p.route[static_cast<std::size_t>(pid)]))
      owned.push_back(pid);
  if (owned.empty()) return {};
  partition::PartitionOptions options = p.config.partition;
  options.shard = p.expert_replicas();
  options.replicate = 1;
  options.never_pack.clear();
  options.group_key = partition::GroupKey::layer;
  options.site_keys.clear();
  return partition::partition_ownership(tree, owned, options);
}

}  // namespace

Plan make_plan(const model::ModuleTree& tree, const PlanConfig& config) {
  Plan p{config,
         boundary::DedicationRule::parse(config.dedicate_rule),
         boundary::BoundaryPolicy::parse(config.boundary, config.strict),
         {},
         {},
         {},
         {},
         {},
         {},
         {},
         {},
         {}};
  std::vector<RouteRule> route_rules;
  for (const auto& spec : config.routes) route_rules.push_back(parse_route_rule(spec));
  p.route = resolve_routes(tree, p.rule, route_rules);
  p.route_wire_bytes = resolve_route_wire_bytes(tree, route_rules);
  p.expert = expert_params(tree, config);
  const std::vector<int> dedicated = dedicated_params(tree, p, route_rules);
  // With the reference's layer keys, ownership does not depend on the sites; it comes first
  // because its visiting order decides which uncovered parameter a strict failure names.
  if (config.partition.group_key == partition::GroupKey::site) {
    resolve_sites(tree, dedicated, p);
    assign_owners(tree, dedicated, p);
  } else {
    assign_owners(tree, dedicated, p);
    resolve_sites(tree, dedicated, p);
  }
  p.expert_partition = expert_partition(tree, p);
  p.report = boundary::analyse_degradations(tree, p.hooks, p.policy);
  add_plan_findings(tree, dedicated, p);
  return p;
}

std::vector<int> site_owner_ranks(const boundary::Site& site, const partition::Partition& part) {
  std::vector<int> owners;
  owners.reserve(site.params.size());
  for (int pid : site.params) owners.push_back(part.owner_rank(pid));
  std::sort(owners.begin(), owners.end());
  owners.erase(std::unique(owners.begin(), owners.end()), owners.end());
  return owners;
}

std::int64_t site_packed_buffers(const boundary::Site& site, const Plan& plan) {
  std::set<std::pair<int, int>> buffers;
  for (int pid : site.params)
    buffers.insert(
        {plan.partition.owner_rank(pid),
         packed_type_key(&plan.route_wire_bytes, pid, /*wire_bytes=*/0, /*reduce_bytes=*/0)});
  return static_cast<std::int64_t>(buffers.size());
}

int Plan::narrowest_route_wire_bytes() const {
  int narrowest = 0;
  for (int b : route_wire_bytes)
    if (b > 0 && (narrowest == 0 || b < narrowest)) narrowest = b;
  return narrowest;
}

bool Plan::has_route_dtypes() const {
  return narrowest_route_wire_bytes() > 0;
}

std::uint64_t plan_hash(const model::ModuleTree& tree, const Plan& plan) {
  std::uint64_t h = comm::kFnv1aOffset;
  for (const auto& s : plan.hooks.sites) {
    h = comm::fnv1a_64(s.path, h);
    h = comm::fnv1a_64_u64(0x5e17e5u, h);  // separator: "a" + "b.c" differs from "a.b" + "c"
    for (int pid : s.params) {
      h = comm::fnv1a_64(tree.parameter(pid).name, h);
      h = comm::fnv1a_64_u64(static_cast<std::uint64_t>(plan.partition.owner_rank(pid)), h);
      h = comm::fnv1a_64_u64(plan.muon(pid) ? 1u : 2u, h);  // route muon or adamw
      if (plan.tp.tp > 1)
        h = comm::fnv1a_64_u64(
            static_cast<std::uint64_t>(plan.tp.tp_owner[static_cast<std::size_t>(pid)] + 1), h);
    }
  }
  // --route dtypes (absent without one: earlier hashes are unchanged).
  for (int pid : tree.parameter_order()) {
    const int b = plan.wire_bytes(pid, 0);
    if (b > 0)
      h = comm::fnv1a_64_u64(static_cast<std::uint64_t>(pid) << 8 | static_cast<unsigned>(b), h);
  }
  // --ep (absent without it: earlier hashes are unchanged).
  if (plan.config.ep > 1)
    h = comm::fnv1a_64_u64(0xe9000000u + static_cast<unsigned>(plan.config.ep), h);
  for (int pid : tree.parameter_order())  // E < G: the experts' owners in their groups
    if (plan.expert_owner(pid) >= 0)
      h = comm::fnv1a_64_u64(
          static_cast<std::uint64_t>(pid) << 20 | static_cast<unsigned>(plan.expert_owner(pid)), h);
  // sharded_adamw sites (absent without that route: earlier hashes are unchanged).
  for (const auto& s : plan.sharded_hooks.sites) {
    h = comm::fnv1a_64_u64(0x5a4d3du, h);
    h = comm::fnv1a_64(s.path, h);
    for (int pid : s.params) h = comm::fnv1a_64(tree.parameter(pid).name, h);
  }
  return h;
}

}  // namespace dmuon::plan
