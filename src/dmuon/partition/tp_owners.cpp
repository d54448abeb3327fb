#include "dmuon/partition/tp_owners.hpp"

#include <fmt/format.h>

#include <tuple>

#include "dmuon/base/error.hpp"

namespace dmuon::partition {

int tp_rotation_offset(const Partition& part, int slot, int tp) {
  const auto& s = part.slots.at(static_cast<std::size_t>(slot));
  const int R = part.options.replicate;
  if (R > 1) return (s.shard * R + s.replicate) % tp;
  return s.rank % tp;  // 1-D: the DP owner's rank (= its shard index)
}

TpPlan assign_tp_owners(const model::ModuleTree& tree, const Partition& part,
                        const std::vector<int>& shard_dim, int tp) {
  TpPlan t;
  t.tp = tp;
  t.shard_dim = shard_dim;
  const auto n = tree.num_parameters();
  t.local_numel.assign(n, 0);
  t.tp_owner.assign(n, -1);
  for (std::size_t pid = 0; pid < n; ++pid) {
    const auto numel = tree.parameter(static_cast<int>(pid)).numel();
    t.local_numel[pid] = shard_dim[pid] >= 0 ? numel / tp : numel;
    if (shard_dim[pid] >= 0) t.sharded.push_back(static_cast<int>(pid));
  }
  const auto S = part.slots.size();
  t.cost_loads.assign(S * static_cast<std::size_t>(tp), 0);
  t.numel_loads.assign(S * static_cast<std::size_t>(tp), 0);
  for (int pid : parameter_visit_order(part)) {
    if (shard_dim.at(static_cast<std::size_t>(pid)) < 0) continue;
    const int slot = part.owner_slot.at(static_cast<std::size_t>(pid));
    if (slot < 0)
      throw InputError(fmt::format("TP-sharded parameter '{}' is not dedicated (no DP owner)",
                                   tree.parameter(pid).name));
    const int offset = tp_rotation_offset(part, slot, tp);
    const std::size_t base = static_cast<std::size_t>(slot) * static_cast<std::size_t>(tp);
    int best = 0;
    for (int r = 1; r < tp; ++r) {
      const auto key = [&](int x) {
        return std::make_tuple(t.cost_loads[base + x], t.numel_loads[base + x],
                               ((x - offset) % tp + tp) % tp);
      };
      if (key(r) < key(best)) best = r;
    }
    // Loads are sums over a subset of the partition's checked totals: they cannot overflow.
    t.cost_loads[base + best] += part.param_cost.at(static_cast<std::size_t>(pid));
    t.numel_loads[base + best] += tree.parameter(pid).numel();
    t.tp_owner[static_cast<std::size_t>(pid)] = best;
    t.visit_order.push_back(pid);
  }
  return t;
}

}  // namespace dmuon::partition
