#pragma once
// Collective sizes and bandwidths in the nccl-tests sense, so figures read like nccl-tests'
// and like the projection's machine files:
//   message size S = count·e for broadcast, reduce and all_reduce; S = n·count·e (the full
//   buffer) for all_gather, reduce_scatter, gather, scatter and all_to_all, whose `count` is
//   the per-rank (all_to_all: per-peer) chunk as the Communicator takes it;
//   algbw = S / t;  busbw = algbw · factor, factor = 2(n−1)/n for all_reduce, (n−1)/n for
//   all_gather, reduce_scatter, gather, scatter and all_to_all (nccl-tests' gather_perf,
//   scatter_perf, alltoall_perf), 1
//   for broadcast and reduce (the bandwidth a link must carry,
//   comparable across kinds and group sizes).

#include <cstddef>
#include <cstdint>

#include "dmuon/comm/collective_counters.hpp"

namespace dmuon::comm {

/// nccl-tests bus-bandwidth factor of a collective over n ranks (0 for n ≤ 1: nothing moves).
double busbw_factor(CollectiveKind kind, int n);

/// Bytes S of one call of `count` elements of `elem_bytes` over n ranks (see above).
double message_bytes(CollectiveKind kind, std::int64_t count, std::size_t elem_bytes, int n);

}  // namespace dmuon::comm
