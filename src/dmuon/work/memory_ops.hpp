#pragma once
// The memory-bound ops of a step (norms, activations, RoPE, residual adds, the embedding
// lookup, the cross-entropy, MoE routing, dispatch and combine, gradient accumulation), each
// as an OpPair: forward and backward ops with exact bytes, vector FLOPs and kernel launches.
// `e` is the bytes of the compute dtype, fp32 = 4, indices int64 = 8. Rows R, width W,
// N = R·W. Every formula is in docs/STEP-WORK.md §3; the fused and eager variants are
// `Fusion` (run_shape.hpp). All ops have phase forward / backward set; module left -1.

#include <cstdint>

#include "dmuon/model/geometry.hpp"
#include "dmuon/work/op.hpp"
#include "dmuon/work/run_shape.hpp"

namespace dmuon::work {

/// RMSNorm or LayerNorm over R rows of width W (with a weight; LayerNorm also a bias).
OpPair norm_ops(model::NormKind kind, double rows, double width, double e, Fusion fusion);

/// SwiGLU (silu(a)·b of two R×W inputs) or GELU (of one R×W input).
OpPair activation_ops(model::Activation act, double rows, double width, double e, Fusion fusion);

/// Rotary embedding of q and k (`rotated` = their rotated elements), with cos/sin tables of
/// `table` fp32 values.
OpPair rope_ops(double rotated, double table, double e, Fusion fusion);

/// A residual add of two R×W tensors; its backward is the gradient accumulation where the
/// residual stream branches.
OpPair residual_ops(double rows, double width, double e);

/// Gradient accumulation of `consumers` - 1 adds where one R×W tensor feeds `consumers` ops
/// (e.g. q, k and v projections of one normed input): backward only.
OpPair fanout_ops(int consumers, double rows, double width, double e);

/// Embedding lookup of R token ids into a V×W table, and its dense backward.
OpPair embedding_ops(double rows, double width, double vocab, double e);

/// The lookup of R token ids into this rank's `local_vocab` rows of a vocabulary-parallel
/// table (torch's RowwiseParallel on an Embedding, torchtitan's TP plan): every id masked to
/// the shard, all R rows looked up, the rows of ids outside it zeroed (forward and, on the
/// gradient, backward). The partial rows' TP collectives are the caller's.
OpPair vocab_parallel_embedding_ops(double rows, double width, double local_vocab, double e);

/// Cross-entropy of R rows of V logits (the logits come from the head's linear).
OpPair cross_entropy_ops(double rows, double vocab, double e, Fusion fusion);

/// MoE router after its gating GEMM: scores (softmax or sigmoid over E, fp32) and top-k.
OpPair router_ops(model::RouterScoring scoring, double rows, double experts, double top_k,
                  double e);

/// Token dispatch to the experts (permute R·k rows of width W) and the weighted combine.
OpPair dispatch_ops(double rows, double top_k, double width, double e);
OpPair combine_ops(double rows, double top_k, double width, double e);

/// MLA's q and k assembly: q = [q_nope, q_pe], k = [k_nope, k_pe broadcast to the heads].
OpPair mla_assemble_ops(double rows, double heads, double nope, double rope, double e);

}  // namespace dmuon::work
