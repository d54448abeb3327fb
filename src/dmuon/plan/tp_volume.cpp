#include "dmuon/plan/tp_volume.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "dmuon/base/checked_int.hpp"

namespace dmuon::plan {

std::int64_t TpCommVolume::total_bytes(int world_rank) const {
  const auto w = static_cast<std::size_t>(world_rank);
  const auto overflow = [&] {
    return fmt::format("predicted volume of rank {} per step overflows 64 bits", world_rank);
  };
  return checked_add(
      checked_add(dp.total_bytes(world_rank / tp), gather.bytes_per_rank.at(w), overflow),
      scatter.bytes_per_rank.at(w), overflow);
}

std::int64_t TpCommVolume::max_bytes_per_rank() const {
  std::int64_t m = 0;
  for (int w = 0; w < world; ++w) m = std::max(m, total_bytes(w));
  return m;
}

TpCommVolume predict_tp_volume(const model::ModuleTree& tree, const Plan& plan, Reshard reshard,
                               GradReduce grad_reduce, int wire_bytes) {
  const auto& part = plan.partition;
  const auto& tpp = plan.tp;
  TpCommVolume v;
  v.tp = tpp.tp;
  v.dp = predict_dmuon_volume(tree, plan.hooks, part, reshard, grad_reduce, wire_bytes,
                              &tpp.local_numel);
  v.world = v.dp.world * v.tp;
  const auto W = static_cast<std::size_t>(v.world);
  for (KindVolume* k : {&v.gather, &v.scatter}) {
    k->calls_per_rank.assign(W, 0);
    k->bytes_per_rank.assign(W, 0);
  }
  v.gather_received.assign(W, 0);
  v.scatter_sent.assign(W, 0);
  const int T = v.tp;
  for (int pid : tpp.sharded) {
    const auto& prm = tree.parameter(pid);
    const auto overflow = [&] {
      return fmt::format("predicted TP volume overflows 64 bits at parameter '{}'", prm.name);
    };
    const std::int64_t local = tpp.local_numel[static_cast<std::size_t>(pid)];
    const std::int64_t grad_chunk =
        checked_mul(wire_bytes > 0 ? wire_bytes : model::dtype_size(prm.dtype), local, overflow);
    const std::int64_t update_chunk = checked_mul(4, local, overflow);
    const int d = part.owner_rank(pid);
    const int o = tpp.tp_owner[static_cast<std::size_t>(pid)];
    for (int t = 0; t < T; ++t) {
      const auto w = static_cast<std::size_t>(d * T + t);
      ++v.gather.calls_per_rank[w];
      ++v.scatter.calls_per_rank[w];
      if (t == o) {
        v.gather_received[w] =
            checked_add(v.gather_received[w], checked_mul(T - 1, grad_chunk, overflow), overflow);
        v.scatter_sent[w] =
            checked_add(v.scatter_sent[w], checked_mul(T - 1, update_chunk, overflow), overflow);
      } else {
        v.gather.bytes_per_rank[w] = checked_add(v.gather.bytes_per_rank[w], grad_chunk, overflow);
        v.scatter.bytes_per_rank[w] =
            checked_add(v.scatter.bytes_per_rank[w], update_chunk, overflow);
      }
    }
  }
  for (int w = 0; w < v.world; ++w) (void)v.total_bytes(w);  // throws on overflow
  return v;
}

std::string tp_volume_mismatch(const TpCommVolume& v, int rank, const comm::KindCounters& gather,
                               const comm::KindCounters& scatter) {
  const auto w = static_cast<std::size_t>(rank);
  const auto u = [](std::int64_t x) { return static_cast<std::uint64_t>(x); };
  const auto mismatch = [](const char* what, std::uint64_t measured, std::uint64_t formula) {
    return fmt::format("{}: measured {}, formula {}", what, measured, formula);
  };
  if (gather.calls != u(v.gather.calls_per_rank.at(w)))
    return mismatch("tp_gather calls", gather.calls, u(v.gather.calls_per_rank[w]));
  if (gather.bytes_sent != u(v.gather.bytes_per_rank.at(w)))
    return mismatch("tp_gather bytes sent", gather.bytes_sent, u(v.gather.bytes_per_rank[w]));
  if (gather.bytes_received != u(v.gather_received.at(w)))
    return mismatch("tp_gather bytes received", gather.bytes_received, u(v.gather_received[w]));
  if (scatter.calls != u(v.scatter.calls_per_rank.at(w)))
    return mismatch("tp_scatter calls", scatter.calls, u(v.scatter.calls_per_rank[w]));
  if (scatter.bytes_received != u(v.scatter.bytes_per_rank.at(w)))
    return mismatch("tp_scatter bytes received", scatter.bytes_received,
                    u(v.scatter.bytes_per_rank[w]));
  if (scatter.bytes_sent != u(v.scatter_sent.at(w)))
    return mismatch("tp_scatter bytes sent", scatter.bytes_sent, u(v.scatter_sent[w]));
  return std::string();
}

}  // namespace dmuon::plan
