#include "dmuon/work/attention_ops.hpp"

namespace dmuon::work {
namespace {

// Element counts of one attention's tensors.
struct Sizes {
  double tokens, q, k, v, o, rows;  // rows: per-head rows of the fp32 side tensors (LSE, D)
  double kv_per_q_head;             // K and V repeated to every query head (GQA's expand)
  double scores_full;               // materialized s×s matrices: batch·heads·s²
  explicit Sizes(const AttentionShape& a) {
    tokens = static_cast<double>(a.batch) * static_cast<double>(a.seq);
    const double h = static_cast<double>(a.heads), hk = static_cast<double>(a.kv_heads);
    q = tokens * h * static_cast<double>(a.qk_dim);
    k = tokens * hk * static_cast<double>(a.qk_dim);
    v = tokens * hk * static_cast<double>(a.v_dim);
    o = tokens * h * static_cast<double>(a.v_dim);
    rows = tokens * h;
    kv_per_q_head = tokens * h * static_cast<double>(a.qk_dim + a.v_dim);
    const double s = static_cast<double>(a.seq);
    scores_full = static_cast<double>(a.batch) * h * s * s;
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
  // K and V as the kernel reads them: under GQA the expanded copy, one per query head (the
  // backward writes dK, dV per query head too, then reduces them); per key head otherwise.
  const double kv = grouped(a) ? z.kv_per_q_head : z.k + z.v;
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

std::vector<Op> unfused_attention_ops(const AttentionShape& a, double e, Phase phase) {
  const Sizes z(a);
  const double S = a.scores(), P = z.scores_full * e;
  const double s = static_cast<double>(a.seq), qk = static_cast<double>(a.qk_dim),
               v = static_cast<double>(a.v_dim);
  const double q_heads_k = z.tokens * static_cast<double>(a.heads) * qk;  // dK per query head
  const double q_heads_v = z.o;                                           // dV per query head
  std::vector<Op> ops;
  if (phase != Phase::backward) {
    ops.push_back(batched("attention.qk", phase, a, s, s, qk, 2 * S * qk, (z.q + z.k) * e, P));
    Op sm = memory_op("attention.softmax", P, P, 5 * S, 1);
    sm.phase = phase;
    ops.push_back(sm);
    ops.push_back(batched("attention.pv", phase, a, s, v, s, 2 * S * v, P + z.v * e, z.o * e));
    return ops;
  }
  ops.push_back(batched("attention.dp", phase, a, s, s, v, 2 * S * v, (z.o + z.v) * e, P));
  ops.push_back(batched("attention.dv", phase, a, s, v, s, 2 * S * v, P + z.o * e, q_heads_v * e));
  Op sm = memory_op("attention.softmax_bwd", 2 * P, P, 4 * S, 1);
  sm.phase = phase;
  ops.push_back(sm);
  ops.push_back(batched("attention.dq", phase, a, s, qk, s, 2 * S * qk, P + z.k * e, z.q * e));
  ops.push_back(
      batched("attention.dk", phase, a, s, qk, s, 2 * S * qk, P + z.q * e, q_heads_k * e));
  return ops;  // GQA's expand and reduce are ops of their own beside the fused ones
}

}  // namespace dmuon::work
