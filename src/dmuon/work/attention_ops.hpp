#pragma once
// The attention core softmax(Q·Kᵀ/√d)·V of `batch` sequences of `seq` tokens with `heads` query
// heads over `kv_heads` key/value heads (GQA; MLA after its assembly is heads = kv_heads with
// qk_dim = nope + rope, v_dim = v_head), counting the s·s scores S = batch·heads·s²·c,
// c = 1/2 causal (FlashAttention's and Megatron's convention), 1 bidirectional.
//
// Fused (FlashAttention-2 style, what a GPU runs):
//   forward   2·S·(qk + v) FLOPs; reads Q, K, V; writes O and the fp32 log-sum-exp
//   backward  4·S·(qk + v) FLOPs (2× forward; the kernel's recompute of Q·Kᵀ is its own
//             business: the cost model prices it, op_time.hpp); 3 kernels: rowsum(dO∘O), the
//             main pass (dK, dV per query head under GQA, dQ accumulated in fp32), dQ's
//             conversion; plus, under GQA, the reduction of dK, dV over each group
// Unfused (what the host runs: batched BLAS and a softmax kernel, s×s scores materialized):
//   forward   QKᵀ, softmax, PV;  backward  dP = dO·Vᵀ, dV = Pᵀ·dO, softmax's backward,
//             dQ = dS·K, dK = dSᵀ·Q — the same matmul FLOPs as the fused ops.
// Formulas: docs/STEP-WORK.md §3.

#include "dmuon/work/op.hpp"
#include "dmuon/work/run_shape.hpp"

namespace dmuon::work {

/// The fused attention forward and backward; when kv_heads < heads, K and V are first expanded
/// to every query head (forward) and dK, dV summed back (backward), each an op of its own.
OpPair fused_attention_ops(const AttentionShape& a, double e);

/// The same core under context parallelism (a.context_parallel C > 1: RunShape::cp, torch's
/// ring attention with the "allgather" rotation and the causal load balance): forward, the
/// all-gather of the K, V chunks (cp_collective, behind the first sub-call), C sub-calls of
/// 1/C of the scores each and their fp32 merge; backward, K, V gathered again, C backward
/// sub-calls with fp32 accumulators and C ring permutes of the fp32 dK, dV (all but the last
/// behind the next sub-call). GQA's expand and reduce as in fused_attention_ops (the chunks
/// travel expanded: torchtitan repeats K, V before SDPA). `span`: the consecutive ranks a CP
/// group spans (C; C·T under TP, its ranks T apart), whose NVLink domains its calls cross.
OpPair ring_attention_ops(const AttentionShape& a, double e, Fusion fusion, int span);

/// The unfused decomposition of one phase (forward or backward) of the same attention core (the
/// GQA expand and reduce stay the ops fused_attention_ops lists beside it); the
/// GEMMs keep their full s×s shapes (a causal mask does not shrink a BLAS call) while their
/// FLOPs count the causal half, as the fused op's do.
std::vector<Op> unfused_attention_ops(const AttentionShape& a, double e, Phase phase);

}  // namespace dmuon::work
