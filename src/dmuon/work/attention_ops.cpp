#include "dmuon/work/attention_ops.hpp"

namespace dmuon::work {
namespace {

// Element counts of one attention's tensors on this rank (its queries' tokens: all of them, or
// 1/C under context parallelism; the same count of its own key/value tokens).
struct Sizes {
  double tokens, q, k, v, o, rows;  // rows: per-head rows of the fp32 side tensors (LSE, D)
  double kv_per_q_head;             // K and V repeated to every query head (GQA's expand)
  double scores_full;               // materialized query × key matrices: batch·heads·(s/C)·s
  explicit Sizes(const AttentionShape& a) {
    tokens = a.local_tokens();
    const double h = static_cast<double>(a.heads), hk = static_cast<double>(a.kv_heads);
    q = tokens * h * static_cast<double>(a.qk_dim);
    k = tokens * hk * static_cast<double>(a.qk_dim);
    v = tokens * hk * static_cast<double>(a.v_dim);
    o = tokens * h * static_cast<double>(a.v_dim);
    rows = tokens * h;
    kv_per_q_head = tokens * h * static_cast<double>(a.qk_dim + a.v_dim);
    const double s = static_cast<double>(a.seq);
    scores_full = tokens * h * s;
  }
  // K and V as the kernel reads them: under GQA the expanded copy, one per query head (the
  // backward writes dK, dV per query head too, then reduces them); per key head otherwise.
  double kernel_kv(const AttentionShape& a) const {
    return a.kv_heads < a.heads ? kv_per_q_head : k + v;
  }
};

Op attention_op(const char* name, Phase phase, const AttentionShape& a, double flops, double read,
                double written, double vector_flops, int kernels) {
  Op op;
  op.name = name;
  op.kind = OpKind::attention;
  op.phase = phase;
  op.attention = a;
  op.flops = flops;
  op.bytes_read = read;
  op.bytes_written = written;
  op.vector_flops = vector_flops;
  op.kernels = kernels;
  return op;
}

Op batched(const char* name, Phase phase, const AttentionShape& a, double m, double n, double k,
           double flops, double read, double written) {
  Op op;
  op.name = name;
  op.kind = OpKind::batched_gemm;
  op.phase = phase;
  op.attention = a;
  op.gemm = {m, n, k, a.batch * a.heads};
  op.flops = flops;
  op.bytes_read = read;
  op.bytes_written = written;
  return op;
}

// Under GQA, dK and dV come out per query head and are summed over each group of heads.
bool grouped(const AttentionShape& a) {
  return a.kv_heads < a.heads;
}

// torchtitan's repeat_kv (expand, then reshape: one copy per tensor) hands every query head its
// own K and V before SDPA; gqa_reduce is that copy's backward.
Op gqa_expand(const AttentionShape& a, double e) {
  const Sizes z(a);
  return memory_op("attention.gqa_expand", (z.k + z.v) * e, z.kv_per_q_head * e, 0, 2);
}

Op gqa_reduce(const AttentionShape& a, double e) {
  const Sizes z(a);
  Op op = memory_op("attention.gqa_reduce", z.kv_per_q_head * e, (z.k + z.v) * e,
                    z.kv_per_q_head - (z.k + z.v), 2);
  op.phase = Phase::backward;
  return op;
}

}  // namespace

OpPair fused_attention_ops(const AttentionShape& a, double e) {
  const Sizes z(a);
  const double S = a.scores(), dims = static_cast<double>(a.qk_dim + a.v_dim);
  const double kv = z.kernel_kv(a);
  OpPair p;
  if (grouped(a)) p.forward.push_back(gqa_expand(a, e));
  p.forward.push_back(attention_op("attention", Phase::forward, a, 2 * S * dims, (z.q + kv) * e,
                                   z.o * e + z.rows * kF32Bytes, 5 * S, 1));
  // Kept for the backward: Q, K, V as the kernel got them, the output O and the fp32
  // log-sum-exp per row. O is the output projection's input too: counted here once.
  p.forward.back().saved_bytes = (z.q + kv + z.o) * e + z.rows * kF32Bytes;
  // Read: O and dO (rowsum(dO∘O)); Q, K, V, dO (main); LSE, D; the fp32 dQ accumulator.
  const double read = 2 * z.o * e + (z.q + kv + z.o) * e + 2 * z.rows * kF32Bytes + z.q * kF32Bytes;
  const double written = z.rows * kF32Bytes + z.q * kF32Bytes + kv * e + z.q * e;
  p.backward.push_back(
      attention_op("attention.bwd", Phase::backward, a, 4 * S * dims, read, written, 7 * S, 3));
  if (grouped(a)) p.backward.push_back(gqa_reduce(a, e));
  return p;
}

namespace {

// The fp32 merges of a ring's C sub-call outputs (torch's _SDPAMerger: the first output and LSE
// converted to fp32, every later one folded in as out − σ(lse_i − lse)·(out − out_i) and
// lse − log σ(lse − lse_i), the result converted back). Eager: about ten elementwise kernels
// per merge; fused: one. Every merge is counted over the whole output (a "partial" one updates
// half of it and copies the whole: about as many bytes).
Op ring_merge(const Sizes& z, double e, double C, Fusion fusion) {
  const double O = z.o, L = z.rows * kF32Bytes, merges = C - 1;
  const bool eager = fusion == Fusion::eager;
  const double per_read = eager ? O * (e + 5 * kF32Bytes) + 8 * L : O * (e + kF32Bytes) + 2 * L;
  const double per_written = eager ? O * 4 * kF32Bytes + 5 * L : O * kF32Bytes + L;
  const double ends = 2 * O * (e + kF32Bytes);  // the first to fp32, the result back
  return memory_op("attention.cp_merge", merges * per_read + ends / 2,
                   merges * per_written + ends / 2, merges * (4 * O + 10 * z.rows),
                   static_cast<int>(merges) * (eager ? 10 : 1) + 2);
}

// The backward's fp32 accumulators of dQ, dK, dV, zeroed before the first sub-call.
Op ring_zero_grads(const Sizes& z, double kv) {
  Op zero = memory_op("attention.cp_zero_grads", 0, (z.q + kv) * kF32Bytes, 0, 3);
  zero.phase = Phase::backward;
  return zero;
}

// Each sub-call's gradients added into the accumulators (dK, dV concatenated for the next
// permute), and the results converted back.
Op ring_grad_accumulate(const Sizes& z, double kv, double e, double C, Fusion fusion) {
  const double q = z.q;
  const double read = C * ((q + kv) * (kF32Bytes + e) + kv * kF32Bytes) + (q + kv) * kF32Bytes;
  const double written = C * (q + 2 * kv) * kF32Bytes + (q + kv) * e;
  const int kernels = static_cast<int>(C) * (fusion == Fusion::eager ? 4 : 1) + 2;
  Op acc = memory_op("attention.cp_grad_accumulate", read, written, C * (q + kv), kernels);
  acc.phase = Phase::backward;
  // Live at once: the accumulators, the next permute's fp32 chunk and a sub-call's gradients.
  acc.live_bytes = (q + kv) * kF32Bytes + kv * kF32Bytes + (q + kv) * e;
  return acc;
}

}  // namespace

OpPair ring_attention_ops(const AttentionShape& a, double e, Fusion fusion, int span) {
  const Sizes z(a);
  const double C = static_cast<double>(a.context_parallel);
  const int group = static_cast<int>(a.context_parallel);
  const double S = a.scores(), dims = static_cast<double>(a.qk_dim + a.v_dim);
  const double kv = z.kernel_kv(a);  // this rank's K and V chunk as SDPA gets it
  OpPair p;
  if (grouped(a)) p.forward.push_back(gqa_expand(a, e));
  // One all-gather of every rank's K, V chunk, issued before the first sub-call (on the local
  // chunk) and waited for after it.
  GroupCall gather{comm::CollectiveKind::all_gather, kv, e, group, span, 2 * S * dims / C};
  p.forward.push_back(cp_collective_op("cp_kv_all_gather", gather));
  // C sub-calls, each 1/C of the scores (load-balanced): the first over the local Q and K, V;
  // of the others, on rank r, r over all of Q and half of a K, V chunk and C−1−r over half of
  // Q and a whole chunk: over the ranks, 1 + 3(C−1)/4 local calls' worth of tensors in and out.
  const double calls = 1 + 0.75 * (C - 1);
  const double output = z.o * e + z.rows * kF32Bytes;
  p.forward.push_back(attention_op("attention", Phase::forward, a, 2 * S * dims,
                                   calls * (z.q + kv) * e, calls * output, 5 * S, group));
  // Kept for the backward (which gathers K, V again): the local Q, K, V, output and LSE; SAC
  // caches the merged output and LSE.
  p.forward.back().saved_bytes = (z.q + kv) * e + output;
  p.forward.back().cached_bytes = output;
  p.forward.push_back(ring_merge(z, e, C, fusion));
  p.forward.back().cached_bytes = 0;  // part of the same SDPA call

  Op regather = cp_collective_op("cp_kv_all_gather", gather);
  regather.phase = Phase::backward;
  regather.call.behind_attention_flops = 4 * S * dims / C;
  p.backward.push_back(regather);
  p.backward.push_back(ring_zero_grads(z, kv));
  // C backward sub-calls (3 kernels each, as fused_attention_ops' backward), their tensors as
  // the forward's.
  const double read = 2 * z.o * e + (z.q + kv + z.o) * e + 2 * z.rows * kF32Bytes + z.q * kF32Bytes;
  const double written = z.rows * kF32Bytes + z.q * kF32Bytes + kv * e + z.q * e;
  Op bwd = attention_op("attention.bwd", Phase::backward, a, 4 * S * dims, calls * read,
                        calls * written, 7 * S, 3 * group);
  // Live while it runs: the gathered K, V, the fp32 accumulators, the permute's send and
  // receive buffers and one sub-call's gradients.
  bwd.live_bytes = C * kv * e + (z.q + kv) * kF32Bytes + 2 * kv * kF32Bytes + (z.q + kv) * e;
  p.backward.push_back(bwd);
  // Every sub-call passes the fp32 dK, dV accumulator to the next rank (an all-to-all to one
  // peer): C permutes, each waited for after the next sub-call but the last.
  for (int i = 0; i < group; ++i) {
    const double behind = i + 1 < group ? 4 * S * dims / C : 0.0;
    const GroupCall permute{comm::CollectiveKind::all_gather, kv, kF32Bytes, 2, span, behind};
    Op op = cp_collective_op("cp_dkv_permute", permute);
    op.phase = Phase::backward;
    p.backward.push_back(op);
  }
  p.backward.push_back(ring_grad_accumulate(z, kv, e, C, fusion));
  if (grouped(a)) p.backward.push_back(gqa_reduce(a, e));
  return p;
}

std::vector<Op> unfused_attention_ops(const AttentionShape& a, double e, Phase phase) {
  const Sizes z(a);
  const double S = a.scores(), P = z.scores_full * e;
  // Queries sq (this rank's: s/C under context parallelism) against all s keys.
  const double s = static_cast<double>(a.seq), qk = static_cast<double>(a.qk_dim),
               v = static_cast<double>(a.v_dim);
  const double sq = s / static_cast<double>(a.context_parallel);
  const double q_heads_k = z.tokens * static_cast<double>(a.heads) * qk;  // dK per query head
  const double q_heads_v = z.o;                                           // dV per query head
  std::vector<Op> ops;
  if (phase != Phase::backward) {
    ops.push_back(batched("attention.qk", phase, a, sq, s, qk, 2 * S * qk, (z.q + z.k) * e, P));
    Op sm = memory_op("attention.softmax", P, P, 5 * S, 1);
    sm.phase = phase;
    ops.push_back(sm);
    ops.push_back(batched("attention.pv", phase, a, sq, v, s, 2 * S * v, P + z.v * e, z.o * e));
    return ops;
  }
  ops.push_back(batched("attention.dp", phase, a, sq, s, v, 2 * S * v, (z.o + z.v) * e, P));
  ops.push_back(batched("attention.dv", phase, a, s, v, sq, 2 * S * v, P + z.o * e, q_heads_v * e));
  Op sm = memory_op("attention.softmax_bwd", 2 * P, P, 4 * S, 1);
  sm.phase = phase;
  ops.push_back(sm);
  ops.push_back(batched("attention.dq", phase, a, sq, qk, s, 2 * S * qk, P + z.k * e, z.q * e));
  ops.push_back(
      batched("attention.dk", phase, a, s, qk, sq, 2 * S * qk, P + z.q * e, q_heads_k * e));
  return ops;  // GQA's expand and reduce are ops of their own beside the fused ones
}

}  // namespace dmuon::work
