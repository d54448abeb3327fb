#include "dmuon/work/memory_ops.hpp"

namespace dmuon::work {
namespace {

// `saved`: what autograd keeps from the forward op for backward (Op::saved_bytes).
OpPair pair(Op forward, Op backward, double saved) {
  forward.saved_bytes = saved;
  OpPair p;
  p.forward.push_back(forward);
  p.backward.push_back(backward_op(backward));
  return p;
}

// RMSNorm, one fused kernel each way (Triton / Apex / torch.compile): forward reads x and the
// weight, writes y and the fp32 rstd; backward reads x, dy, weight and rstd, writes dx and dw.
OpPair rms_fused(double R, double W, double e) {
  const double N = R * W;
  return pair(memory_op("rms_norm", N * e + W * e, N * e + R * kF32Bytes, 4 * N + 3 * R, 1),
              memory_op("rms_norm.bwd", 2 * N * e + W * e + R * kF32Bytes, N * e + W * e, 9 * N, 2),
              N * e + R * kF32Bytes);  // x and rstd (ctx.save_for_backward(x, weight, rstd))
}

// torchtitan's RMSNorm in eager PyTorch: (x.float() * rsqrt(x.float().pow(2).mean(-1) + eps))
// .type_as(x) * w — 8 kernels forward (cast, pow, mean, add, rsqrt, mul, cast, mul) and the 12
// of their autograd backward (docs/STEP-WORK.md lists them pass by pass).
OpPair rms_eager(double R, double W, double e) {
  const double N = R * W;
  return pair(memory_op("rms_norm", 2 * N * e + 4 * N * kF32Bytes + 3 * R * kF32Bytes + W * e,
                        3 * N * kF32Bytes + 2 * N * e + 3 * R * kF32Bytes, 4 * N + 3 * R, 8),
              memory_op("rms_norm.bwd", 5 * N * e + W * e + 9 * N * kF32Bytes + 4 * R * kF32Bytes,
                        3 * N * e + W * e + 6 * N * kF32Bytes + 2 * R * kF32Bytes, 9 * N, 12),
              // Autograd keeps x.float() (pow and the product save it), rsqrt's output, and
              // the cast-back normalized x (the product with the weight saves it); x itself
              // and the fp32 product are not kept.
              4 * N + R * kF32Bytes + N * e);
}

// LayerNorm (PyTorch's native kernel in eager and compiled code alike): forward one kernel,
// backward one for dx and one for dgamma/dbeta, each reading x and dy.
OpPair layer_norm(double R, double W, double e) {
  const double N = R * W;
  return pair(
      memory_op("layer_norm", N * e + 2 * W * e, N * e + 2 * R * kF32Bytes, 7 * N + 4 * R, 1),
      memory_op("layer_norm.bwd", 4 * N * e + W * e + 2 * R * kF32Bytes, N * e + 2 * W * e, 11 * N,
                2),
      N * e + 2 * R * kF32Bytes);  // x, mean and rstd
}

}  // namespace

OpPair norm_ops(model::NormKind kind, double rows, double width, double e, Fusion fusion) {
  if (kind == model::NormKind::layer) return layer_norm(rows, width, e);
  if (kind == model::NormKind::rms)
    return fusion == Fusion::fused ? rms_fused(rows, width, e) : rms_eager(rows, width, e);
  return {};
}

OpPair activation_ops(model::Activation act, double rows, double width, double e, Fusion fusion) {
  const double N = rows * width;
  if (act == model::Activation::gelu)
    return pair(memory_op("gelu", N * e, N * e, 8 * N, 1),
                memory_op("gelu.bwd", 2 * N * e, N * e, 12 * N, 1), N * e);  // its input
  if (act != model::Activation::swiglu) return {};
  if (fusion == Fusion::fused)
    return pair(memory_op("swiglu", 2 * N * e, N * e, 5 * N, 1),
                memory_op("swiglu.bwd", 3 * N * e, 2 * N * e, 10 * N, 1),
                2 * N * e);  // gate and up (silu recomputed inside the backward kernel)
  // Eager: silu(a), then silu(a)·b; backward: dy·b, dy·silu(a), silu's backward. Kept: a (silu's
  // input), silu(a) and b (the product's operands).
  return pair(memory_op("swiglu", 3 * N * e, 2 * N * e, 5 * N, 2),
              memory_op("swiglu.bwd", 6 * N * e, 3 * N * e, 10 * N, 3), 3 * N * e);
}

OpPair rope_ops(double rotated, double table, double e, Fusion fusion) {
  const double X = rotated;
  if (fusion == Fusion::fused)
    return pair(memory_op("rope", X * e + table * kF32Bytes, X * e, 3 * X, 1),
                memory_op("rope.bwd", X * e + table * kF32Bytes, X * e, 3 * X, 1),
                0);  // a rotation by a constant table: its backward reads the table only
  // torchtitan's complex RoPE per tensor (q, k): .float(), complex multiply by freqs_cis,
  // .type_as(); the backward the same three with the conjugate.
  const double read = X * e + 2 * X * kF32Bytes + 2 * table * kF32Bytes,
               write = 2 * X * kF32Bytes + X * e;
  // The complex product by freqs_cis (a buffer without grad) keeps freqs_cis only: nothing new.
  return pair(memory_op("rope", read, write, 3 * X, 6),
              memory_op("rope.bwd", read, write, 3 * X, 6), 0);
}

OpPair residual_ops(double rows, double width, double e) {
  const double N = rows * width;
  return pair(memory_op("residual_add", 2 * N * e, N * e, N, 1),
              memory_op("residual_add.bwd", 2 * N * e, N * e, N, 1), 0);  // a sum keeps nothing
}

OpPair fanout_ops(int consumers, double rows, double width, double e) {
  OpPair p;
  const double N = rows * width;
  for (int c = 1; c < consumers; ++c)
    p.backward.push_back(backward_op(memory_op("grad_accumulate", 2 * N * e, N * e, N, 1)));
  return p;
}

OpPair embedding_ops(double rows, double width, double vocab, double e) {
  const double N = rows * width;
  // Backward: the dense V×W gradient is zero-filled, then the rows of dy are added into it.
  return pair(
      memory_op("embedding", rows * kIndexBytes + N * e, N * e, 0, 1),
      memory_op("embedding.bwd", rows * kIndexBytes + 2 * N * e, vocab * width * e + N * e, N, 2),
      rows * kIndexBytes);  // the token ids
}

OpPair vocab_parallel_embedding_ops(double rows, double width, double local_vocab, double e) {
  const double N = rows * width;
  // torch's _MaskPartial: ids outside the shard masked (offset ids and a bool mask written),
  // the lookup of every row, the masked rows zeroed; backward zeroes their gradient rows
  // before the dense backward into the local V/T × W gradient.
  OpPair p = embedding_ops(rows, width, local_vocab, e);
  p.forward.insert(p.forward.begin(), memory_op("embedding.vocab_mask", rows * kIndexBytes,
                                                rows * (kIndexBytes + 1), rows, 1));
  // The mask is saved for backward; the offset ids it writes are the lookup's input, which
  // the lookup already keeps.
  p.forward.front().saved_bytes = rows;
  p.forward.push_back(memory_op("embedding.mask_rows", N * e + rows, N * e, N, 1));
  p.backward.insert(p.backward.begin(),
                    backward_op(memory_op("embedding.mask_rows", N * e + rows, N * e, N, 1)));
  return p;
}

OpPair cross_entropy_ops(double rows, double vocab, double e, Fusion fusion) {
  const double L = rows * vocab;
  if (fusion == Fusion::fused)
    return pair(
        memory_op("cross_entropy", L * e + rows * kIndexBytes, 2 * rows * kF32Bytes, 4 * L, 1),
        memory_op("cross_entropy.bwd", L * e + rows * kIndexBytes + rows * kF32Bytes, L * e, 3 * L,
                  1),
        L * e + rows * (kF32Bytes + kIndexBytes));  // the logits, the log-sum-exp and the labels
  // torchtitan: F.cross_entropy(logits.float(), labels) = cast, log_softmax, nll_loss; backward
  // nll (fill + scatter), log_softmax's backward, the cast back.
  Op backward = memory_op("cross_entropy.bwd", 3 * L * kF32Bytes + rows * kIndexBytes,
                          2 * L * kF32Bytes + L * e + rows * kF32Bytes, 3 * L, 4);
  // Autograd frees nll's fp32 gradient once log_softmax's backward has read it: at most the
  // two fp32 gradients (then the fp32 one and its bf16 cast) are live together.
  backward.live_bytes = 2 * L * kF32Bytes + rows * kF32Bytes;
  return pair(
      memory_op("cross_entropy", L * e + L * kF32Bytes + rows * kIndexBytes + rows * kF32Bytes,
                2 * L * kF32Bytes, 4 * L + rows, 3),
      backward,
      // log_softmax keeps its fp32 output, nll_loss the labels; neither keeps the
      // logits or their fp32 copy.
      L * kF32Bytes + rows * kIndexBytes);
}

OpPair router_ops(model::RouterScoring scoring, double rows, double experts, double top_k,
                  double e) {
  const double RE = rows * experts, Rk = rows * top_k;
  const bool softmax = scoring == model::RouterScoring::softmax;
  OpPair p;
  p.forward.push_back(
      memory_op("router_scores", RE * e, RE * kF32Bytes, (softmax ? 5 : 4) * RE, 1));
  p.forward.back().saved_bytes = RE * kF32Bytes;  // softmax and sigmoid keep their output
  p.forward.push_back(
      memory_op("router_topk", RE * kF32Bytes, Rk * (kF32Bytes + kIndexBytes), RE, 1));
  p.forward.back().saved_bytes = Rk * kIndexBytes;  // the indices its backward scatters into
  // Backward in reverse: the top-k values' gradient scattered into the R×E scores, then the
  // scores' backward.
  p.backward.push_back(backward_op(
      memory_op("router_topk.bwd", Rk * (kF32Bytes + kIndexBytes), RE * kF32Bytes, 0, 2)));
  p.backward.push_back(backward_op(
      memory_op("router_scores.bwd", 2 * RE * kF32Bytes, RE * e, (softmax ? 3 : 2) * RE, 1)));
  return p;
}

OpPair dispatch_ops(double rows, double top_k, double width, double e) {
  const double Rk = rows * top_k;
  return pair(memory_op("moe_dispatch", Rk * kIndexBytes + Rk * width * e,
                        Rk * kIndexBytes + Rk * width * e, 0, 2),
              memory_op("moe_dispatch.bwd", Rk * width * e + Rk * kIndexBytes, rows * width * e,
                        Rk * width, 1),
              Rk * kIndexBytes);  // the token indices (its input rows are not needed)
}

OpPair combine_ops(double rows, double top_k, double width, double e) {
  const double Rk = rows * top_k;
  return pair(memory_op("moe_combine", Rk * width * e + Rk * (kF32Bytes + kIndexBytes),
                        rows * width * e, 2 * Rk * width, 1),
              memory_op("moe_combine.bwd",
                        rows * width * e + Rk * width * e + Rk * (kF32Bytes + kIndexBytes),
                        Rk * width * e + Rk * kF32Bytes, 3 * Rk * width, 1),
              // The experts' outputs (for the weights' gradient), the weights and the indices.
              Rk * width * e + Rk * (kF32Bytes + kIndexBytes));
}

OpPair mla_assemble_ops(double rows, double heads, double nope, double rope, double e) {
  const double qk = rows * heads * (nope + rope);
  const double parts = qk + rows * heads * nope + rows * rope;  // q, k_nope, k_pe
  return pair(memory_op("mla_assemble", parts * e, 2 * qk * e, 0, 2),
              memory_op("mla_assemble.bwd", 2 * qk * e, parts * e, rows * heads * rope, 2),
              0);  // concatenation and broadcast keep nothing
}

}  // namespace dmuon::work
