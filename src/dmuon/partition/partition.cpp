#include "dmuon/partition/partition.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <tuple>
#include <unordered_map>

#include "dmuon/base/checked_int.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/partition/lpt.hpp"

namespace dmuon::partition {

std::string packing_text(const PartitionOptions& o) {
  return o.pack ? fmt::format("on (< {})", o.pack_threshold) : "off";
}

const char* strategy_name(Strategy s) {
  switch (s) {
    case Strategy::lpt: return "lpt";
    case Strategy::round_robin: return "round_robin";
    case Strategy::rank0: return "rank0";
    case Strategy::lpt_refine: return "lpt_refine";
  }
  return "?";
}

Strategy parse_strategy(std::string_view s) {
  if (s == "lpt") return Strategy::lpt;
  if (s == "round_robin" || s == "round-robin") return Strategy::round_robin;
  if (s == "rank0") return Strategy::rank0;
  if (s == "lpt_refine" || s == "lpt-refine") return Strategy::lpt_refine;
  throw InputError(
      fmt::format("unknown owner strategy '{}' (valid: lpt, round_robin, rank0, lpt_refine)", s));
}

const char* group_key_name(GroupKey k) {
  return k == GroupKey::site ? "site" : "layer";
}

GroupKey parse_group_key(std::string_view s) {
  if (s == "layer") return GroupKey::layer;
  if (s == "site") return GroupKey::site;
  throw InputError(fmt::format("unknown group key '{}' (valid: layer, site)", s));
}

void compute_metrics(Partition& p) {
  const std::size_t S = p.slots.size();
  p.numel_loads.assign(S, 0);
  p.cost_loads.assign(S, 0);
  p.total_cost = 0;
  p.largest_unit_cost = 0;
  p.packed_units = 0;
  p.key_collisions = 0;
  std::unordered_map<std::string, std::vector<char>> key_seen;
  for (std::size_t u = 0; u < p.units.size(); ++u) {
    const auto& unit = p.units[u];
    const auto s = static_cast<std::size_t>(p.unit_slot[u]);
    p.numel_loads[s] += unit.numel;
    p.cost_loads[s] += unit.cost;
    p.total_cost += unit.cost;
    p.largest_unit_cost = std::max(p.largest_unit_cost, unit.cost);
    if (unit.packed()) ++p.packed_units;
    auto& seen = key_seen[unit.key ? "k" + *unit.key : std::string("n")];
    if (seen.empty()) seen.assign(S, 0);
    if (seen[s]) ++p.key_collisions;
    seen[s] = 1;
  }
  p.makespan = S ? *std::max_element(p.cost_loads.begin(), p.cost_loads.end()) : 0;
  p.lower_bound = std::max(static_cast<double>(p.largest_unit_cost),
                           S ? static_cast<double>(p.total_cost) / static_cast<double>(S) : 0.0);
  p.ratio = p.lower_bound > 0 ? static_cast<double>(p.makespan) / p.lower_bound : 1.0;
  p.tight_lower_bound = p.lower_bound;
  if (p.units.size() > S && S > 0) {
    std::vector<std::int64_t> costs;
    costs.reserve(p.units.size());
    for (const auto& u : p.units) costs.push_back(u.cost);
    std::nth_element(costs.begin(), costs.begin() + static_cast<long>(S), costs.end(),
                     std::greater<>());
    const std::int64_t c_s = costs[S];  // (S+1)-th largest
    const std::int64_t c_s1 =
        *std::min_element(costs.begin(), costs.begin() + static_cast<long>(S));
    p.tight_lower_bound = std::max(p.tight_lower_bound, static_cast<double>(c_s + c_s1));
  }
  p.tight_ratio =
      p.tight_lower_bound > 0 ? static_cast<double>(p.makespan) / p.tight_lower_bound : 1.0;
  auto imbalance = [](std::int64_t mx, std::int64_t mn) {
    return mx > 0 ? static_cast<double>(mx - mn) / static_cast<double>(mx) : 0.0;
  };
  p.empty_slots = 0;
  std::int64_t mx = 0, mn_all = S ? p.numel_loads[0] : 0, mn_nonempty = -1;
  for (auto l : p.numel_loads) {
    mx = std::max(mx, l);
    mn_all = std::min(mn_all, l);
    if (l == 0) {
      ++p.empty_slots;
    } else if (mn_nonempty < 0 || l < mn_nonempty) {
      mn_nonempty = l;
    }
  }
  p.imbalance_all = imbalance(mx, mn_all);
  p.imbalance_nonempty = mn_nonempty < 0 ? 0.0 : imbalance(mx, mn_nonempty);
}

std::vector<int> parameter_visit_order(const Partition& p) {
  std::vector<int> out;
  for (int u : p.visit_order)
    for (int pid : p.units[static_cast<std::size_t>(u)].members) out.push_back(pid);
  return out;
}

namespace {

// Round robin over the slots in model order; a key at its owner limit cycles over its own
// slots in slot order (the reference's sorted(used_slots)) with the same counter.
void assign_round_robin(Partition& p) {
  const int S = static_cast<int>(p.slots.size());
  const int k = p.options.max_owners_per_group;
  std::unordered_map<std::string, std::vector<int>> used;  // key -> slots, ascending
  p.unit_slot.resize(p.units.size());
  for (std::size_t u = 0; u < p.units.size(); ++u) {
    auto& key_slots = used[p.units[u].key ? "k" + *p.units[u].key : std::string("n")];
    const auto counter = static_cast<std::int64_t>(u);
    int slot = static_cast<int>(counter % S);
    if (k > 0 && static_cast<int>(key_slots.size()) >= k)
      slot = key_slots[static_cast<std::size_t>(counter % static_cast<std::int64_t>(k))];
    const auto at = std::lower_bound(key_slots.begin(), key_slots.end(), slot);
    if (at == key_slots.end() || *at != slot) key_slots.insert(at, slot);
    p.unit_slot[u] = slot;
  }
}

}  // namespace

namespace {

void validate(const PartitionOptions& options) {
  if (options.shard < 1 || options.shard > kMaxSlots)
    throw InputError(
        fmt::format("shard-group size {} is invalid (valid: 1..{})", options.shard, kMaxSlots));
  if (options.replicate < 1 || options.replicate > kMaxSlots)
    throw InputError(
        fmt::format("replicate size {} is invalid (valid: 1..{})", options.replicate, kMaxSlots));
  if (static_cast<std::int64_t>(options.shard) * options.replicate > kMaxSlots)
    throw InputError(fmt::format("{} x {} owner slots is too many (valid: at most {})",
                                 options.replicate, options.shard, kMaxSlots));
  // 2^50 elements (4 PiB in fp32) is beyond any model: a larger threshold is a typo or an
  // overflowed number, never a choice.
  if (options.pack_threshold < 0 || options.pack_threshold > (std::int64_t{1} << 50))
    throw InputError(fmt::format("pack threshold {} is invalid (valid: 0 to 2^50 elements)",
                                 options.pack_threshold));
  if (options.max_owners_per_group < 0 || options.max_owners_per_group > kMaxSlots)
    throw InputError(fmt::format("max owners per group {} is invalid (0 = unlimited, or 1 to {})",
                                 options.max_owners_per_group, kMaxSlots));
}

// Every load is a sum over a subset of the units: bounding the totals bounds them all.
void check_totals(const model::ModuleTree& tree, const Partition& p) {
  std::int64_t cost = 0, numel = 0;
  for (const auto& unit : p.units) {
    const auto overflow = [&] {
      return fmt::format(
          "the dedicated parameters' total {} cost or size overflows 64 bits at parameter '{}'",
          cost_model_name(p.options.cost_model), tree.parameter(unit.members.front()).name);
    };
    cost = checked_add(cost, unit.cost, overflow);
    numel = checked_add(numel, unit.numel, overflow);
  }
}

// LPT as the reference; lpt_refine: two deterministic starts, each refined by local search.
void assign_lpt_strategy(const model::ModuleTree& tree, Partition& p) {
  std::vector<std::string> names(p.units.size());
  for (std::size_t u = 0; u < p.units.size(); ++u) {
    std::string& n = names[u];
    for (std::size_t i = 0; i < p.units[u].members.size(); ++i) {
      if (i) n += ',';
      n += tree.parameter(p.units[u].members[i]).name;
    }
  }
  detail::assign_lpt(p, names, /*prefer_spread=*/true);
  if (p.options.strategy != Strategy::lpt_refine) return;
  detail::refine_local_search(p);
  compute_metrics(p);
  Partition alt = p;
  detail::assign_lpt(alt, names, /*prefer_spread=*/false);
  detail::refine_local_search(alt);
  compute_metrics(alt);
  // Same-layer spreading is kept as a constraint: the plain-LPT start only wins when it is
  // strictly shorter without adding same-key collisions.
  if (alt.makespan < p.makespan && alt.key_collisions <= p.key_collisions)
    p.unit_slot = alt.unit_slot;
}

}  // namespace

Partition partition_ownership(const model::ModuleTree& tree, const std::vector<int>& dedicated,
                              const PartitionOptions& options) {
  validate(options);
  Partition p;
  p.options = options;
  for (int s = 0; s < options.shard; ++s)
    for (int r = 0; r < options.replicate; ++r) p.slots.push_back({s, r, r * options.shard + s});
  p.units = build_units(tree, dedicated, options);
  // The site keys (one string per parameter) served the units only: not kept in the result,
  // which the plan copies around.
  std::vector<std::string>().swap(p.options.site_keys);
  check_totals(tree, p);
  switch (options.strategy) {
    case Strategy::lpt:
    case Strategy::lpt_refine: assign_lpt_strategy(tree, p); break;
    case Strategy::round_robin: assign_round_robin(p); break;
    case Strategy::rank0: p.unit_slot.assign(p.units.size(), 0); break;
  }
  if (p.visit_order.empty()) {  // round_robin, rank0: model order
    p.visit_order.resize(p.units.size());
    std::iota(p.visit_order.begin(), p.visit_order.end(), 0);
  }
  p.owner_slot.assign(tree.num_parameters(), -1);
  p.param_cost.assign(tree.num_parameters(), 0);
  for (std::size_t u = 0; u < p.units.size(); ++u)
    for (int pid : p.units[u].members) {
      p.owner_slot[pid] = p.unit_slot[u];
      const auto& prm = tree.parameter(pid);
      p.param_cost[pid] = parameter_cost(options.cost_model, prm.name, prm.shape);
    }
  compute_metrics(p);
  return p;
}

}  // namespace dmuon::partition
