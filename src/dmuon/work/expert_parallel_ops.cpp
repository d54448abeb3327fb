#include "dmuon/work/expert_parallel_ops.hpp"

#include "dmuon/work/memory_ops.hpp"

namespace dmuon::work {
namespace {

// An all-to-all of `rows` rows of `row_bytes` each, sent as elements of `e` bytes (1/ep of
// the rows to each rank); per-op SAC caches its whole output.
Op rows_exchange(const char* name, int ep, double rows, double row_bytes, double e) {
  GroupCall call{comm::CollectiveKind::all_to_all, rows * row_bytes / e / ep, e, ep};
  Op op = ep_collective_op(name, call);
  op.cached_bytes = rows * row_bytes;
  return op;
}

// Rows of `width` elements of `e` bytes.
Op rows_all_to_all(const char* name, int ep, double rows, double width, double e) {
  return rows_exchange(name, ep, rows, width * e, e);
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

OpPair deepep_dispatch_ops(int ep, double tokens, double destinations, double top_k, double width,
                           double e, double experts) {
  const double T = tokens, Rd = tokens * destinations, R = tokens * top_k;
  const double row = width * e, routing = top_k * (kIndexBytes + kF32Bytes);
  OpPair p;
  // get_dispatch_layout: the top-k indices in, the token-in-rank flags and counts out.
  p.forward.push_back(
      memory_op("deepep_layout", R * kIndexBytes, T * ep + experts * kIndexBytes, 0, 1));
  Op counts = ep_collective_op("ep_token_counts",
                               {comm::CollectiveKind::all_to_all, experts / ep, kIndexBytes, ep});
  counts.cached_bytes = experts * kIndexBytes;
  p.forward.push_back(counts);
  p.forward.push_back(rows_exchange("ep_dispatch", ep, Rd, row + routing, e));
  p.forward.push_back(memory_op("ep_permute", Rd * row + R * kIndexBytes, R * row, 0, 2));
  p.forward.back().saved_bytes = R * kIndexBytes;
  p.backward.push_back(
      backward_op(memory_op("ep_permute.bwd", R * row + R * kIndexBytes, Rd * row, R * width, 2)));
  p.backward.push_back(
      backward_op(rows_exchange("ep_dispatch.bwd", ep, Rd, row + top_k * kF32Bytes, e)));
  return p;
}

OpPair deepep_combine_ops(int ep, double tokens, double destinations, double top_k, double width,
                          double e) {
  const double Rd = tokens * destinations, R = tokens * top_k, row = width * e;
  OpPair p;
  p.forward.push_back(memory_op("ep_unpermute", R * row + R * kIndexBytes, Rd * row, R * width, 1));
  p.forward.push_back(rows_exchange("ep_combine", ep, Rd, row, e));
  p.backward.push_back(backward_op(rows_exchange("ep_combine.bwd", ep, Rd, row, e)));
  p.backward.push_back(
      backward_op(memory_op("ep_unpermute.bwd", Rd * row + R * kIndexBytes, R * row, 0, 1)));
  return p;
}

}  // namespace dmuon::work
