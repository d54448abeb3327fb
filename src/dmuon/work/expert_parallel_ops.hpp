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

/// DeepEP's dispatch (EpDispatcher::deepep, ep_routing.hpp) of `tokens` tokens that visit
/// `destinations` EP ranks each on average, `top_k` experts each: the layout kernel (which
/// ranks each token goes to), the per-expert counts, one row per (token, rank) with its top-k
/// indices (int64) and fp32 weights, then the permute that copies every received token to
/// each of its experts here (tokens × top_k rows in all, balanced routing). Backward: the
/// permute's sum back to one row per received token, then DeepEP's combine of those rows (with
/// the weights' gradients) to their tokens' ranks.
OpPair deepep_dispatch_ops(int ep, double tokens, double destinations, double top_k, double width,
                           double e, double experts);

/// DeepEP's combine: the unpermute's sum of each received token's expert outputs (weighted
/// already: the experts' activation applies the routing weights, as AutoModel's
/// WeightedSwiGLU), then one row per (token, rank) back, summed on arrival inside the kernel
/// (so no moe_combine follows). Backward: the rows' gradients dispatched again (the cached
/// layout, no indices), then the permute's copy to each expert.
OpPair deepep_combine_ops(int ep, double tokens, double destinations, double top_k, double width,
                          double e);

}  // namespace dmuon::work
