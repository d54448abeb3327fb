#include "dmuon/engine/step/baseline_volume.hpp"

#include "dmuon/plan/ddp_dmuon_volume.hpp"
#include "dmuon/plan/sharded_adamw_volume.hpp"

namespace dmuon::engine {
namespace {

using comm::CollectiveKind;

KindExpectation& at(VolumeExpectation& v, CommGroup g, CollectiveKind k) {
  return v[channel_index(g, k)];
}

void add(KindExpectation& e, std::int64_t calls, std::int64_t bytes) {
  e.calls += calls;
  e.bytes += bytes;
}

void set(KindExpectation& e, const plan::KindVolume& k, int rank) {
  const auto r = static_cast<std::size_t>(rank);
  e.calls = k.calls_per_rank.empty() ? 0 : k.calls_per_rank.at(r);
  e.bytes = k.bytes_per_rank.empty() ? 0 : k.bytes_per_rank.at(r);
}

}  // namespace

VolumeExpectation expected_volume(Method method, plan::Reshard reshard,
                                  const model::ModuleTree& tree, const plan::Plan& plan,
                                  const plan::CommVolume& dmuon, int rank, int shard, int replicate,
                                  int wire_bytes, int accum, bool clip) {
  constexpr auto row = CommGroup::shard, column = CommGroup::replicate;
  VolumeExpectation v{};
  const int gathers = (reshard == plan::Reshard::z3 ? 2 : 1) * accum;
  const int world = shard * replicate;
  const auto& site_of = plan.hooks.site_of_param;
  for (int pid : tree.parameter_order()) {
    const std::int64_t n = tree.parameter(pid).numel();
    const bool dedicated = site_of[static_cast<std::size_t>(pid)] >= 0;
    // dmuon's sharded_adamw parameters: their own formula below.
    if (method == Method::dmuon &&
        plan.route.at(static_cast<std::size_t>(pid)) == plan::ParamRoute::sharded_adamw)
      continue;
    const std::int64_t chunk = shard_chunk(n, shard);
    const std::int64_t e = plan.wire_bytes(pid, wire_bytes);  // --route dtype or the run's
    const std::int64_t chunk_bytes = e * (shard - 1) * chunk;
    const bool sharded = method == Method::fsdp_adamw || method == Method::fsdp_muon ||
                         (method == Method::dmuon && !dedicated);
    if (sharded) {
      add(at(v, row, CollectiveKind::all_gather), gathers, gathers * chunk_bytes);
      add(at(v, row, CollectiveKind::reduce_scatter), 1, chunk_bytes);
      if (method == Method::fsdp_muon && dedicated && plan.muon(pid))  // not --route adamw
        add(at(v, row, CollectiveKind::all_gather), 1, chunk_bytes);
      if (replicate > 1)
        add(at(v, column, CollectiveKind::all_reduce), 1,
            e * (chunk * (replicate - 1) / replicate));
    }
    if (method == Method::ddp_muon || (method == Method::ddp_dmuon && !dedicated))
      add(at(v, row, CollectiveKind::all_reduce), 1, e * (n * (world - 1) / world));
  }
  if (method == Method::dmuon) {
    set(at(v, row, CollectiveKind::broadcast), dmuon.broadcast, rank);
    at(v, row, CollectiveKind::broadcast).calls *= accum;
    at(v, row, CollectiveKind::broadcast).bytes *= accum;
    set(at(v, row, CollectiveKind::reduce), dmuon.reduce, rank);
    set(at(v, column, CollectiveKind::reduce), dmuon.reduce_stage2, rank);
    set(at(v, column, CollectiveKind::broadcast), dmuon.replicate_broadcast, rank);
    const auto sa = plan::predict_sharded_adamw_volume(tree, plan, reshard, wire_bytes, accum);
    const auto r = static_cast<std::size_t>(rank);
    add(at(v, row, CollectiveKind::all_gather), sa.all_gather.calls_per_rank.at(r),
        sa.all_gather.bytes_per_rank.at(r));
    add(at(v, row, CollectiveKind::reduce_scatter), sa.reduce_scatter.calls_per_rank.at(r),
        sa.reduce_scatter.bytes_per_rank.at(r));
    add(at(v, column, CollectiveKind::all_reduce), sa.all_reduce.calls_per_rank.at(r),
        sa.all_reduce.bytes_per_rank.at(r));
  }
  if (method == Method::ddp_dmuon) {
    const auto d = plan::predict_ddp_dmuon_volume(
        tree, plan.hooks, plan.partition, dmuon.grad_reduce, wire_bytes, &plan.route_wire_bytes);
    set(at(v, row, CollectiveKind::broadcast), d.broadcast, rank);
    set(at(v, row, CollectiveKind::reduce), d.reduce, rank);
  }
  if (clip) {
    const auto one = comm::collective_payload(CollectiveKind::all_reduce, world, false, 1, 4);
    add(at(v, CommGroup::world, CollectiveKind::all_reduce), 1,
        static_cast<std::int64_t>(comm::collective_volume(CollectiveKind::all_reduce, one)));
  }
  return v;
}

}  // namespace dmuon::engine
