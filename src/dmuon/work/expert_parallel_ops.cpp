#include "dmuon/work/expert_parallel_ops.hpp"

#include "dmuon/work/memory_ops.hpp"

namespace dmuon::work {
namespace {

// An all-to-all of `rows` rows of `width` elements (1/ep of them to each rank); SAC caches its
// whole output.
Op rows_all_to_all(const char* name, int ep, double rows, double width, double e) {
  GroupCall call{comm::CollectiveKind::all_to_all, rows * width / ep, e, ep};
  Op op = ep_collective_op(name, call);
  op.cached_bytes = rows * width * e;
  return op;
}

}  // namespace

OpPair ep_dispatch_ops(int ep, double routed_rows, double width, double e, double experts) {
  const double R = routed_rows, N = R * width;
  OpPair p;
  // The counts: each rank's count for every expert, the EP rank's E/ep of them to each rank.
  Op counts = ep_collective_op("ep_token_counts",
                               {comm::CollectiveKind::all_to_all, experts / ep, kIndexBytes, ep});
  counts.cached_bytes = experts * kIndexBytes;
  p.forward.push_back(counts);
  p.forward.push_back(rows_all_to_all("ep_dispatch", ep, R, width, e));
  // The received rows gathered into the local experts' order by an index (kept for backward).
  p.forward.push_back(memory_op("ep_permute", N * e + R * kIndexBytes, N * e, 0, 2));
  p.forward.back().saved_bytes = R * kIndexBytes;
  p.backward.push_back(
      backward_op(memory_op("ep_permute.bwd", N * e + R * kIndexBytes, N * e, 0, 2)));
  p.backward.push_back(backward_op(rows_all_to_all("ep_dispatch.bwd", ep, R, width, e)));
  return p;
}

OpPair ep_combine_ops(int ep, double routed_rows, double width, double e) {
  const double R = routed_rows, N = R * width;
  OpPair p;
  p.forward.push_back(memory_op("ep_unpermute", N * e + R * kIndexBytes, N * e, 0, 1));
  p.forward.push_back(rows_all_to_all("ep_combine", ep, R, width, e));
  p.backward.push_back(backward_op(rows_all_to_all("ep_combine.bwd", ep, R, width, e)));
  p.backward.push_back(
      backward_op(memory_op("ep_unpermute.bwd", N * e + R * kIndexBytes, N * e, 0, 1)));
  return p;
}

}  // namespace dmuon::work
