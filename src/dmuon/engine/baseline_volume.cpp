#include "dmuon/engine/baseline_volume.hpp"

namespace dmuon::engine {
namespace {

KindExpectation& at(VolumeExpectation& v, comm::CollectiveKind k) {
  return v[static_cast<std::size_t>(k)];
}

}  // namespace

VolumeExpectation expected_volume(Method method, plan::Reshard reshard,
                                  const model::ModuleTree& tree, const plan::Plan& plan,
                                  const plan::CommVolume& dmuon, int rank, int shard) {
  using comm::CollectiveKind;
  VolumeExpectation v{};
  const int gathers = reshard == plan::Reshard::z3 ? 2 : 1;
  const auto& site_of = plan.hooks.site_of_param;
  for (int pid : tree.parameter_order()) {
    const std::int64_t n = tree.parameter(pid).numel();
    const bool dedicated = site_of[static_cast<std::size_t>(pid)] >= 0;
    const std::int64_t chunk_bytes = 4 * (shard - 1) * shard_chunk(n, shard);
    const bool sharded = method == Method::fsdp_adamw || method == Method::fsdp_muon ||
                         (method == Method::dmuon && !dedicated);
    if (sharded) {
      at(v, CollectiveKind::all_gather).calls += gathers;
      at(v, CollectiveKind::all_gather).bytes += gathers * chunk_bytes;
      at(v, CollectiveKind::reduce_scatter).calls += 1;
      at(v, CollectiveKind::reduce_scatter).bytes += chunk_bytes;
      if (method == Method::fsdp_muon && dedicated) {
        at(v, CollectiveKind::all_gather).calls += 1;
        at(v, CollectiveKind::all_gather).bytes += chunk_bytes;
      }
    }
    if (method == Method::ddp_muon) {
      at(v, CollectiveKind::all_reduce).calls += 1;
      at(v, CollectiveKind::all_reduce).bytes += 4 * (n * (shard - 1) / shard);
    }
  }
  if (method == Method::dmuon) {
    const auto r = static_cast<std::size_t>(rank);
    at(v, CollectiveKind::broadcast).calls = dmuon.broadcast.calls_per_rank.at(r);
    at(v, CollectiveKind::broadcast).bytes = dmuon.broadcast.bytes_per_rank.at(r);
    at(v, CollectiveKind::reduce).calls = dmuon.reduce.calls_per_rank.at(r);
    at(v, CollectiveKind::reduce).bytes = dmuon.reduce.bytes_per_rank.at(r);
  }
  return v;
}

}  // namespace dmuon::engine
