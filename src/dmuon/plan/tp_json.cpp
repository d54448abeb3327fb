#include "dmuon/plan/tp_json.hpp"

#include "dmuon/boundary/tp_shard.hpp"

namespace dmuon::plan {

using nlohmann::json;

json tp_owners_to_json(const model::ModuleTree& tree, const Plan& plan) {
  const auto& t = plan.tp;
  std::vector<int> visit_pos(tree.num_parameters(), -1);
  for (std::size_t i = 0; i < t.visit_order.size(); ++i)
    visit_pos[static_cast<std::size_t>(t.visit_order[i])] = static_cast<int>(i);
  json out = json::array();
  for (int pid : t.sharded) {
    const auto& p = tree.parameter(pid);
    const auto u = static_cast<std::size_t>(pid);
    out.push_back({{"name", p.name},
                   {"shape", p.shape},
                   {"local_shape", boundary::tp_local_shape(p.shape, t.shard_dim[u], t.tp)},
                   {"parallel", t.shard_dim[u] == 1 ? "row" : "column"},
                   {"shard_dim", t.shard_dim[u]},
                   {"dp_owner", plan.partition.owner_rank(pid)},
                   {"tp_owner", t.tp_owner[u]},
                   {"rank", t.owner_world_rank(plan.partition, pid)},
                   {"cost", plan.partition.param_cost[u]},
                   {"visit", visit_pos[u]}});
  }
  return out;
}

json tp_loads_to_json(const Plan& plan) {
  const auto& t = plan.tp;
  const auto& part = plan.partition;
  json out = json::array();
  for (std::size_t s = 0; s < part.slots.size(); ++s) {
    const auto b = t.cost_loads.begin() + static_cast<std::ptrdiff_t>(s * t.tp);
    const auto n = t.numel_loads.begin() + static_cast<std::ptrdiff_t>(s * t.tp);
    out.push_back({{"slot", s},
                   {"dp_rank", part.slots[s].rank},
                   {"cost_loads", std::vector<std::int64_t>(b, b + t.tp)},
                   {"numel_loads", std::vector<std::int64_t>(n, n + t.tp)}});
  }
  return out;
}

json tp_volume_to_json(const TpCommVolume& v) {
  std::vector<std::int64_t> total;
  for (int w = 0; w < v.world; ++w) total.push_back(v.total_bytes(w));
  return {{"tp", v.tp},
          {"world", v.world},
          {"gather",
           {{"calls_per_rank", v.gather.calls_per_rank},
            {"bytes_per_rank", v.gather.bytes_per_rank},
            {"received_per_rank", v.gather_received}}},
          {"scatter",
           {{"calls_per_rank", v.scatter.calls_per_rank},
            {"bytes_per_rank", v.scatter.bytes_per_rank},
            {"sent_per_rank", v.scatter_sent}}},
          {"total_bytes_per_rank", total},
          {"max_bytes_per_rank", v.max_bytes_per_rank()}};
}

}  // namespace dmuon::plan
