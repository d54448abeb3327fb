#pragma once
// The ops expert parallelism adds to an MoE layer (RunShape::ep, docs/STEP-WORK.md "Expert
// parallelism"), as torchtitan's ExpertParallel runs them around its grouped experts: the
// dispatch before them (the per-expert token counts and the routed token copies, each an
// all-to-all over the EP group, then the permute of the received rows into the local experts'
// order) and the combine after them (the inverse permute, then the all-to-all back). Balanced
// routing: every rank sends and receives the same rows, 1/E of them to each EP rank.

#include "dmuon/work/op.hpp"

namespace dmuon::work {

/// Dispatch of `routed_rows` token copies (tokens × top-k) of `width` elements of `e` bytes
/// over an EP group of `ep` ranks holding `experts` experts in all; its backward sends the
/// rows' gradients back. Under per-op SAC the all-to-alls' outputs are cached (Op::
/// cached_bytes), as torchtitan's save list keeps all_to_all_single.
OpPair ep_dispatch_ops(int ep, double routed_rows, double width, double e, double experts);

/// Combine: the experts' output rows back to their tokens' ranks (before moe_combine weighs
/// and sums them); its backward sends the rows' gradients to the experts' ranks.
OpPair ep_combine_ops(int ep, double routed_rows, double width, double e);

}  // namespace dmuon::work
