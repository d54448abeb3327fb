#include "dmuon/plan/ddp_dmuon_volume.hpp"

#include <fmt/format.h>

#include <set>

#include "dmuon/base/checked_int.hpp"

namespace dmuon::plan {

CommVolume predict_ddp_dmuon_volume(const model::ModuleTree& tree, const boundary::HookPlan& plan,
                                    const partition::Partition& part, GradReduce grad_reduce,
                                    int wire_bytes, const std::vector<int>* route_wire_bytes) {
  CommVolume v;
  v.world = part.options.shard * part.options.replicate;
  v.grad_reduce = grad_reduce;
  const auto world = static_cast<std::size_t>(v.world);
  for (KindVolume* k : {&v.broadcast, &v.reduce, &v.reduce_stage2, &v.replicate_broadcast}) {
    k->calls_per_rank.assign(world, 0);
    k->bytes_per_rank.assign(world, 0);
  }
  v.owned_bytes.assign(world, 0);
  std::vector<std::int64_t> owned_master(world, 0);
  std::int64_t pairs = 0, params = 0, total_master = 0;
  for (const auto& site : plan.sites) {
    std::set<std::pair<int, int>> owners;  // (owner, type key): packed buffers of the site
    for (int pid : site.params) {
      const auto& prm = tree.parameter(pid);
      const auto overflow = [&] {
        return fmt::format("predicted volume overflows 64 bits at dedicated parameter '{}'",
                           prm.name);
      };
      const std::int64_t bytes = checked_mul(
          dedicated_wire_bytes(route_wire_bytes, pid, wire_bytes, model::dtype_size(prm.dtype)),
          prm.numel(), overflow);
      const std::int64_t master = checked_mul(4, prm.numel(), overflow);
      v.note_param(prm.name, bytes);
      const auto owner = static_cast<std::size_t>(part.owner_rank(pid));
      owners.insert({part.owner_rank(pid), packed_type_key(route_wire_bytes, pid, wire_bytes)});
      ++params;
      v.dedicated_bytes = checked_add(v.dedicated_bytes, bytes, overflow);
      total_master = checked_add(total_master, master, overflow);
      v.owned_bytes[owner] += bytes;  // parts of the checked totals
      owned_master[owner] += master;
    }
    pairs += static_cast<std::int64_t>(owners.size());
  }
  for (std::size_t r = 0; r < world; ++r) {
    v.reduce.calls_per_rank[r] = grad_reduce == GradReduce::packed ? pairs : params;
    v.reduce.bytes_per_rank[r] = v.dedicated_bytes - v.owned_bytes[r];
    v.broadcast.calls_per_rank[r] = pairs;
    v.broadcast.bytes_per_rank[r] = total_master - owned_master[r];
  }
  for (int r = 0; r < v.world; ++r) (void)v.total_bytes(r);  // throws on overflow
  return v;
}

}  // namespace dmuon::plan
