#pragma once
// One op of a training step's work: its FLOPs (matmul FLOPs, what MFU/HFU count, apart from
// the other arithmetic), the bytes it reads and writes in device memory, its kernel launches,
// and enough shape to cost it (project/op_time.hpp). Formulas per op: docs/STEP-WORK.md.

#include <cstdint>
#include <vector>

#include "dmuon/comm/collective_counters.hpp"

namespace dmuon::work {

/// Bytes of one fp32 element: the side tensors kernels keep in fp32 whatever the compute dtype.
inline constexpr double kF32Bytes = 4;
/// Bytes of one int64 token index or count (routing, dispatch, embedding ids).
inline constexpr double kIndexBytes = 8;

enum class Phase { forward, backward, recompute };
const char* phase_name(Phase p);

enum class OpKind {
  gemm,           ///< a parameter's linear (forward, dgrad, wgrad), batch > 1: grouped experts
  attention,      ///< the fused attention core (FlashAttention-style), forward or backward
  batched_gemm,   ///< QKᵀ / PV products of the unfused attention (attention_ops.hpp)
  memory,         ///< memory-bound: norms, activations, RoPE, residuals, embedding, loss, routing
  tp_collective,  ///< a TP group's activation collective, in the compute stream (RunShape::tp)
  cp_collective,  ///< a CP group's ring-attention exchange (RunShape::cp)
  ep_collective,  ///< an EP group's token dispatch or combine (RunShape::ep)
};

/// Whether ops of this kind are collectives (GroupCall), not device work.
inline bool is_collective(OpKind k) {
  return k == OpKind::tp_collective || k == OpKind::cp_collective || k == OpKind::ep_collective;
}

/// A collective op's call (all_reduce, all_gather, reduce_scatter or all_to_all) in nccl-tests'
/// terms (comm/bus_bandwidth.hpp): `count` elements of `elem_bytes` each, the whole buffer for
/// an all-reduce, each rank's chunk for an all-gather or reduce-scatter, each rank's chunk to
/// every peer for an all-to-all.
struct GroupCall {
  comm::CollectiveKind kind = comm::CollectiveKind::all_reduce;
  double count = 0;
  double elem_bytes = 0;
  int group = 1;  ///< T, C or E ranks (2 for a ring permute: each rank's chunk to its neighbour)
  /// The consecutive ranks whose NVLink domains the call crosses; 0: `group`'s. A CP ring
  /// permute is a 2-rank exchange on every link of the C-rank ring at once: its slowest hop.
  int span = 0;
  /// Attention FLOPs of the same phase the call runs behind on NCCL's stream (issued before a
  /// ring-attention sub-call, waited for after it): the op costs only what the transfer takes
  /// beyond them. 0: waited for at once.
  double behind_attention_flops = 0;
  /// Bytes each rank sends (= receives) on a ring: the message size times the bus factor.
  double bytes_per_rank() const;
};
const char* op_kind_name(OpKind k);

/// `batch` independent GEMMs, each with an m×n output and inner dimension k.
struct GemmShape {
  double m = 0, n = 0, k = 0;
  std::int64_t batch = 1;
};

/// Attention of `batch` sequences of `seq` tokens (queries and keys alike), or under context
/// parallelism (`context_parallel` C > 1, RunShape::cp) one rank's share of it: seq/C queries
/// of each sequence against all its keys, load-balanced so the rank computes 1/C of the scores.
struct AttentionShape {
  std::int64_t batch = 0, seq = 0;
  std::int64_t heads = 0, kv_heads = 0, qk_dim = 0, v_dim = 0;
  bool causal = true;
  std::int64_t context_parallel = 1;
  /// Fraction of the s×s scores computed: 1/2 with a causal mask (the FlashAttention and
  /// Megatron convention), 1 without.
  double score_fraction() const { return causal ? 0.5 : 1.0; }
  /// Scores per head and sequence pair counted, s² · score_fraction, times batch · heads,
  /// over the context-parallel ranks.
  double scores() const;
  /// Query tokens on this rank: batch · seq / C.
  double local_tokens() const;
};

struct Op {
  const char* name = "";  ///< static: "linear", "linear.dgrad", "rms_norm", "attention", ...
  OpKind kind = OpKind::memory;
  Phase phase = Phase::forward;
  double flops = 0;         ///< matmul FLOPs (2 per multiply-add)
  double vector_flops = 0;  ///< other arithmetic, per the op's stated count
  double bytes_read = 0, bytes_written = 0;
  /// Forward ops: bytes of the tensors autograd keeps from this op for backward that no
  /// earlier op of its unit already keeps — the inputs its backward reads, its own outputs
  /// when its backward reads them, its side tensors (rstd, LSE, fp32 copies, indices). Each
  /// tensor is counted once per unit (docs/MEMORY.md "Activations"). 0 for other phases.
  double saved_bytes = 0;
  /// Forward ops: the bytes of the output per-op SAC caches when its policy saves the op (it
  /// keeps the op's result, not its temporaries); < 0: bytes_written. A ring attention's
  /// sub-calls cache their merged result only.
  double cached_bytes = -1;
  int kernels = 1;  ///< launches (an eager decomposition launches several)
  /// The most of its outputs live at once while it runs, where an eager decomposition frees
  /// a kernel's output once the next has read it; 0: all of `bytes_written` (one kernel, or
  /// no better bound stated). Backward ops only (activation_memory.cpp).
  double live_bytes = 0;
  GemmShape gemm;
  AttentionShape attention;
  /// The module the op belongs to: the linear of a GEMM, the experts' container of a grouped
  /// expert GEMM, the norm of a norm, else the block; -1 for none.
  int module = -1;
  /// A GEMM's weight parameter (-1 for grouped expert GEMMs: see `member`).
  int param = -1;
  /// Grouped expert GEMM: the index of the linear inside each expert (pre-order), else -1.
  int member = -1;
  /// A float8 Linear's GEMM (--compute-dtype fp8: work/float8.hpp): fp8 operands, bf16 output.
  bool float8 = false;
  /// A collective op's call (is_collective(kind)).
  GroupCall call;

  double bytes() const { return bytes_read + bytes_written; }
};

/// What one forward step of a model expands to: its forward ops and the ops its backward runs,
/// each list in execution order.
struct OpPair {
  std::vector<Op> forward, backward;
};

/// `op` as a backward op (its phase set to backward).
inline Op backward_op(Op op) {
  op.phase = Phase::backward;
  return op;
}

/// A memory-bound op (kind memory) with these totals.
Op memory_op(const char* name, double bytes_read, double bytes_written, double vector_flops,
             int kernels);

/// A tp_collective op (no FLOPs; its device-memory traffic is the collective's own, not in
/// `bytes`).
Op tp_collective_op(const char* name, comm::CollectiveKind kind, double count, double elem_bytes,
                    int group);

/// A cp_collective op (as tp_collective_op) with its call.
Op cp_collective_op(const char* name, const GroupCall& call);
/// An ep_collective op (as tp_collective_op) with its call.
Op ep_collective_op(const char* name, const GroupCall& call);

/// The TP collectives where the input of a TP region (`n` elements of `e` bytes, whole) enters
/// it, over a group of `group` ranks (docs/STEP-WORK.md "Tensor parallelism"): with
/// `sequence`, the sequence shards all-gathered in forward; in backward, when the region's
/// input gradients are partial sums (its linears TP-sharded), their reduce-scatter back to the
/// shards (`sequence`) or their all-reduce.
OpPair tp_region_input(int group, bool sequence, double n, double e, bool partial_gradient);

/// The TP collectives where a TP region's output (partial sums of `n` elements) leaves it: its
/// all-reduce, or with `sequence` its reduce-scatter to the sequence shards (backward: the
/// all-gather of their gradients).
OpPair tp_region_output(int group, bool sequence, double n, double e);

/// Sums over a list of ops.
struct OpTotals {
  double flops = 0, vector_flops = 0, bytes = 0;
  std::int64_t kernels = 0, ops = 0;
  void add(const Op& op);
  void add(const std::vector<Op>& ops);
};

}  // namespace dmuon::work
