#include "dmuon/plan/sharded_adamw_volume.hpp"

#include <fmt/format.h>

#include "dmuon/base/checked_int.hpp"

namespace dmuon::plan {

ShardedAdamwVolume predict_sharded_adamw_volume(const model::ModuleTree& tree, const Plan& plan,
                                                Reshard reshard, int wire_bytes, int accum) {
  const std::int64_t G = plan.partition.options.shard, R = plan.partition.options.replicate;
  const auto world = static_cast<std::size_t>(G * R);
  ShardedAdamwVolume v;
  for (KindVolume* k : {&v.all_gather, &v.reduce_scatter, &v.all_reduce}) {
    k->calls_per_rank.assign(world, 0);
    k->bytes_per_rank.assign(world, 0);
  }
  const std::int64_t gathers = (reshard == Reshard::z3 ? 2 : 1) * static_cast<std::int64_t>(accum);
  std::int64_t ag = 0, rs = 0, ar = 0;  // bytes per rank
  for (int pid : tree.parameter_order()) {
    if (plan.route.at(static_cast<std::size_t>(pid)) != ParamRoute::sharded_adamw) continue;
    const auto& p = tree.parameter(pid);
    const auto overflow = [&] {
      return fmt::format("predicted sharded_adamw volume overflows 64 bits at parameter '{}'",
                         p.name);
    };
    const std::int64_t n = p.numel();
    const std::int64_t c = n / G + (n % G != 0 ? 1 : 0);
    // Its route's dtype, else the run's --comm-dtype, else its own dtype.
    const int route_bytes = plan.wire_bytes(pid, wire_bytes);
    const std::int64_t e = route_bytes > 0 ? route_bytes : model::dtype_size(p.dtype);
    const std::int64_t one = checked_mul(e, checked_mul(G - 1, c, overflow), overflow);
    ++v.params;
    v.elements = checked_add(v.elements, n, overflow);
    ag = checked_add(ag, checked_mul(gathers, one, overflow), overflow);
    rs = checked_add(rs, one, overflow);
    if (R > 1)
      ar = checked_add(ar, checked_mul(e, checked_mul(c, R - 1, overflow) / R, overflow), overflow);
  }
  v.sites = static_cast<std::int64_t>(plan.sharded_hooks.sites.size());
  for (std::size_t r = 0; r < world; ++r) {
    v.all_gather.calls_per_rank[r] = gathers * v.params;
    v.all_gather.bytes_per_rank[r] = ag;
    v.reduce_scatter.calls_per_rank[r] = v.params;
    v.reduce_scatter.bytes_per_rank[r] = rs;
    v.all_reduce.calls_per_rank[r] = R > 1 ? v.params : 0;
    v.all_reduce.bytes_per_rank[r] = ar;
  }
  return v;
}

nlohmann::json sharded_adamw_volume_to_json(const ShardedAdamwVolume& v) {
  const auto kind = [](const KindVolume& k) {
    return nlohmann::json{{"calls_per_rank", k.max_calls()}, {"bytes_per_rank", k.max_bytes()}};
  };
  return {{"params", v.params},
          {"sites", v.sites},
          {"elements", v.elements},
          {"all_gather", kind(v.all_gather)},
          {"reduce_scatter", kind(v.reduce_scatter)},
          {"replicate_all_reduce", kind(v.all_reduce)}};
}

}  // namespace dmuon::plan
