// Each op of the step work against hand-computed FLOPs and bytes for small shapes (bf16, e = 2
// bytes; fp32 side tensors 4; int64 indices 8). The eager decompositions are re-derived here
// pass by pass from the PyTorch code they model, independently of the implementation's sums.

#include <gtest/gtest.h>

#include <numeric>

#include "dmuon/work/attention_ops.hpp"
#include "dmuon/work/float8.hpp"
#include "dmuon/work/gemm_ops.hpp"
#include "dmuon/work/memory_ops.hpp"

namespace {

using namespace dmuon::work;
using dmuon::model::Activation;
using dmuon::model::NormKind;
using dmuon::model::RouterScoring;

constexpr double e = 2;

struct Pass {
  double read, written;
};
double reads(const std::vector<Pass>& p) {
  return std::accumulate(p.begin(), p.end(), 0.0, [](double s, Pass x) { return s + x.read; });
}
double writes(const std::vector<Pass>& p) {
  return std::accumulate(p.begin(), p.end(), 0.0, [](double s, Pass x) { return s + x.written; });
}

void expect_op(const Op& op, const char* name, Phase phase, double flops, double vflops,
               double read, double written, int kernels) {
  EXPECT_STREQ(op.name, name);
  EXPECT_EQ(op.phase, phase) << name;
  EXPECT_DOUBLE_EQ(op.flops, flops) << name;
  EXPECT_DOUBLE_EQ(op.vector_flops, vflops) << name;
  EXPECT_DOUBLE_EQ(op.bytes_read, read) << name;
  EXPECT_DOUBLE_EQ(op.bytes_written, written) << name;
  EXPECT_EQ(op.kernels, kernels) << name;
}

TEST(GemmOps, LinearForwardIsTwoMnkAndBackwardFour) {
  // 3 tokens, in 4, out 5, with a bias.
  const auto p = linear_ops(3, 4, 5, 1, true, e);
  ASSERT_EQ(p.forward.size(), 1u);
  ASSERT_EQ(p.backward.size(), 3u);
  expect_op(p.forward[0], "linear", Phase::forward, 120, 0, (12 + 20 + 5) * e, 15 * e, 1);
  expect_op(p.backward[0], "linear.dgrad", Phase::backward, 120, 0, (15 + 20) * e, 12 * e, 1);
  expect_op(p.backward[1], "linear.wgrad", Phase::backward, 120, 0, (15 + 12) * e, 20 * e, 1);
  expect_op(p.backward[2], "linear.bias_grad", Phase::backward, 0, 15, 15 * e, 5 * e, 1);
  EXPECT_EQ(p.forward[0].gemm.m, 3);
  EXPECT_EQ(p.forward[0].gemm.n, 5);
  EXPECT_EQ(p.forward[0].gemm.k, 4);
  EXPECT_EQ(p.backward[1].gemm.m, 5);  // dW: out x in, inner dimension the tokens
  EXPECT_EQ(p.backward[1].gemm.k, 3);
  // Grouped: 8 experts of 2 tokens each = 8 independent GEMMs.
  const auto g = linear_ops(2, 4, 5, 8, false, e);
  EXPECT_DOUBLE_EQ(g.forward[0].flops, 8 * 2 * 2 * 5 * 4);
  EXPECT_DOUBLE_EQ(g.forward[0].bytes_read, 8 * (8 + 20) * e);
  EXPECT_EQ(g.backward.size(), 2u);
}

// b = 1 sequence of s = 4 tokens, 2 query heads over 1 kv head of width 8, causal.
AttentionShape small(bool causal) {
  return {1, 4, 2, 1, 8, 8, causal};
}

TEST(AttentionOps, FusedForwardAndBackward) {
  const auto p = fused_attention_ops(small(true), e);
  // Per head: QKᵀ 2·4·4·8 = 256 and PV 256, causal half: 256; two heads: 512.
  // Scores counted: 2 heads · 16 · 1/2 = 16; vector FLOPs 5 per score forward, 7 backward.
  // Q 4·2·8 = 64, K = V = 4·1·8 = 32, O = 64 elements; 8 fp32 LSE rows.
  // GQA first hands each query head its own K and V (torchtitan's repeat_kv): reads K + V = 64
  // elements, writes 2 heads · 4 tokens · (8 + 8) = 128, one copy per tensor.
  ASSERT_EQ(p.forward.size(), 2u);
  expect_op(p.forward[0], "attention.gqa_expand", Phase::forward, 0, 0, 64 * e, 128 * e, 2);
  // The kernel reads Q and that copy of K and V.
  expect_op(p.forward[1], "attention", Phase::forward, 512, 80, (64 + 128) * e, 64 * e + 8 * 4, 1);
  ASSERT_EQ(p.backward.size(), 2u);  // GQA: dK, dV per query head, then reduced
  // Reads: O, dO (rowsum); Q, the expanded K V, dO; LSE, D; the fp32 dQ accumulator.
  const double read = 2 * 64 * e + (64 + 128 + 64) * e + 2 * 8 * 4 + 64 * 4;
  // Writes: D; dQ accumulator; dK, dV per query head (4·2·16); dQ.
  const double written = 8 * 4 + 64 * 4 + 128 * e + 64 * e;
  expect_op(p.backward[0], "attention.bwd", Phase::backward, 1024, 112, read, written, 3);
  expect_op(p.backward[1], "attention.gqa_reduce", Phase::backward, 0, 64, 128 * e, 64 * e, 2);
}

TEST(AttentionOps, CausalCostsHalfTheFlops) {
  const auto causal = fused_attention_ops(small(true), e);
  const auto full = fused_attention_ops(small(false), e);
  EXPECT_DOUBLE_EQ(full.forward.back().flops, 1024);  // both halves of the scores
  EXPECT_DOUBLE_EQ(full.forward.back().flops, 2 * causal.forward.back().flops);
  EXPECT_DOUBLE_EQ(full.backward[0].flops, 2 * causal.backward[0].flops);
  EXPECT_DOUBLE_EQ(full.forward.back().bytes(), causal.forward.back().bytes());  // same tensors
}

TEST(AttentionOps, UnfusedDecompositionHasTheFusedMatmulFlops) {
  for (bool causal : {true, false}) {
    const auto a = small(causal);
    const auto fused = fused_attention_ops(a, e);
    for (Phase phase : {Phase::forward, Phase::backward}) {
      double flops = 0;
      for (const auto& op : unfused_attention_ops(a, e, phase)) flops += op.flops;
      const auto& f = phase == Phase::forward ? fused.forward.back() : fused.backward[0];
      EXPECT_DOUBLE_EQ(flops, f.flops) << causal;
    }
  }
  const auto fwd = unfused_attention_ops(small(true), e, Phase::forward);
  ASSERT_EQ(fwd.size(), 3u);
  // QKᵀ: 2 heads of 4x4 scores (materialized whole: 32 elements) from Q and K.
  expect_op(fwd[0], "attention.qk", Phase::forward, 256, 0, (64 + 32) * e, 32 * e, 1);
  EXPECT_EQ(fwd[0].gemm.batch, 2);
  EXPECT_EQ(fwd[0].gemm.m, 4);
  EXPECT_EQ(fwd[0].gemm.n, 4);
  EXPECT_EQ(fwd[0].gemm.k, 8);
  expect_op(fwd[1], "attention.softmax", Phase::forward, 0, 80, 32 * e, 32 * e, 1);
  expect_op(fwd[2], "attention.pv", Phase::forward, 256, 0, (32 + 32) * e, 64 * e, 1);
  // dP, dV, softmax backward, dQ, dK: the GQA reduce is the fused list's own op, not repeated.
  EXPECT_EQ(unfused_attention_ops(small(true), e, Phase::backward).size(), 5u);
}

TEST(MemoryOps, RmsNormFused) {
  const auto p = norm_ops(NormKind::rms, 3, 4, e, Fusion::fused);  // N = 12
  expect_op(p.forward[0], "rms_norm", Phase::forward, 0, 4 * 12 + 3 * 3, 12 * e + 4 * e,
            12 * e + 3 * 4, 1);
  expect_op(p.backward[0], "rms_norm.bwd", Phase::backward, 0, 9 * 12, 24 * e + 4 * e + 3 * 4,
            12 * e + 4 * e, 2);
}

TEST(MemoryOps, RmsNormEagerIsTorchtitansPassesSummed) {
  const double R = 3, W = 4, N = 12, f = 4;
  // (x.float() * rsqrt(x.float().pow(2).mean(-1) + eps)).type_as(x) * w
  const std::vector<Pass> fwd = {{N * e, N * f}, {N * f, N * f},        {N * f, R * f},
                                 {R * f, R * f}, {R * f, R * f},        {N * f + R * f, N * f},
                                 {N * f, N * e}, {N * e + W * e, N * e}};
  // Its autograd backward, last op first.
  const std::vector<Pass> bwd = {{N * e + W * e, N * e},                  // dy * w
                                 {2 * N * e, N * e},     {N * e, W * e},  // dw = sum(dy * xn)
                                 {N * e, N * f},                          // type_as
                                 {N * f + R * f, N * f},                  // g * r
                                 {2 * N * f, N * f},     {N * f, R * f},  // dr = sum(g * x)
                                 {2 * R * f, R * f},                      // rsqrt
                                 {R * f, N * f},                          // mean
                                 {2 * N * f, N * f},                      // pow
                                 {2 * N * f, N * f},  // accumulate the two grads of x.float()
                                 {N * f, N * e}};     // .float()
  const auto p = norm_ops(NormKind::rms, R, W, e, Fusion::eager);
  expect_op(p.forward[0], "rms_norm", Phase::forward, 0, 4 * N + 3 * R, reads(fwd), writes(fwd),
            static_cast<int>(fwd.size()));
  expect_op(p.backward[0], "rms_norm.bwd", Phase::backward, 0, 9 * N, reads(bwd), writes(bwd),
            static_cast<int>(bwd.size()));
}

TEST(MemoryOps, LayerNormIsNativeEitherWay) {
  for (auto fusion : {Fusion::fused, Fusion::eager}) {
    const auto p = norm_ops(NormKind::layer, 3, 4, e, fusion);
    expect_op(p.forward[0], "layer_norm", Phase::forward, 0, 7 * 12 + 4 * 3, 12 * e + 8 * e,
              12 * e + 6 * 4, 1);
    expect_op(p.backward[0], "layer_norm.bwd", Phase::backward, 0, 11 * 12, 48 * e + 4 * e + 6 * 4,
              12 * e + 8 * e, 2);
  }
  EXPECT_TRUE(norm_ops(NormKind::none, 3, 4, e, Fusion::fused).forward.empty());
}

TEST(MemoryOps, Activations) {
  // 3 rows of width 4: N = 12.
  auto p = activation_ops(Activation::swiglu, 3, 4, e, Fusion::fused);
  expect_op(p.forward[0], "swiglu", Phase::forward, 0, 60, 24 * e, 12 * e, 1);
  expect_op(p.backward[0], "swiglu.bwd", Phase::backward, 0, 120, 36 * e, 24 * e, 1);
  // Eager: silu(a) (read a, write s); s * b (read s, b; write y). Backward: dy*b, dy*s,
  // silu's backward (dy_s, a).
  p = activation_ops(Activation::swiglu, 3, 4, e, Fusion::eager);
  expect_op(p.forward[0], "swiglu", Phase::forward, 0, 60, (12 + 24) * e, (12 + 12) * e, 2);
  expect_op(p.backward[0], "swiglu.bwd", Phase::backward, 0, 120, (24 + 24 + 24) * e,
            (12 + 12 + 12) * e, 3);
  p = activation_ops(Activation::gelu, 3, 4, e, Fusion::eager);
  expect_op(p.forward[0], "gelu", Phase::forward, 0, 96, 12 * e, 12 * e, 1);
  expect_op(p.backward[0], "gelu.bwd", Phase::backward, 0, 144, 24 * e, 12 * e, 1);
}

TEST(MemoryOps, Rope) {
  // 20 rotated elements (q and k), tables of 8 fp32 values.
  auto p = rope_ops(20, 8, e, Fusion::fused);
  expect_op(p.forward[0], "rope", Phase::forward, 0, 60, 20 * e + 32, 20 * e, 1);
  expect_op(p.backward[0], "rope.bwd", Phase::backward, 0, 60, 20 * e + 32, 20 * e, 1);
  // Eager, per tensor t (q then k): .float() (t·e -> t·4), complex multiply (t·4 + table ->
  // t·4), .type_as (t·4 -> t·e): over both tensors the table is read twice.
  p = rope_ops(20, 8, e, Fusion::eager);
  expect_op(p.forward[0], "rope", Phase::forward, 0, 60, 20 * e + 80 + 80 + 64, 80 + 80 + 20 * e,
            6);
}

TEST(MemoryOps, ResidualFanoutEmbedding) {
  auto p = residual_ops(3, 4, e);
  expect_op(p.forward[0], "residual_add", Phase::forward, 0, 12, 24 * e, 12 * e, 1);
  expect_op(p.backward[0], "residual_add.bwd", Phase::backward, 0, 12, 24 * e, 12 * e, 1);
  p = fanout_ops(3, 3, 4, e);  // q, k, v read one input: two accumulations of its gradient
  EXPECT_TRUE(p.forward.empty());
  ASSERT_EQ(p.backward.size(), 2u);
  expect_op(p.backward[1], "grad_accumulate", Phase::backward, 0, 12, 24 * e, 12 * e, 1);
  EXPECT_TRUE(fanout_ops(1, 3, 4, e).backward.empty());
  // 3 tokens of width 4 from a 10-row table: ids (int64) and rows read, rows written; the
  // backward fills the 10x4 gradient and adds the 3 rows (read, read-modify-write).
  p = embedding_ops(3, 4, 10, e);
  expect_op(p.forward[0], "embedding", Phase::forward, 0, 0, 24 + 12 * e, 12 * e, 1);
  expect_op(p.backward[0], "embedding.bwd", Phase::backward, 0, 12, 24 + 24 * e, 40 * e + 12 * e,
            2);
}

TEST(MemoryOps, CrossEntropy) {
  // 3 rows of 10 logits: L = 30.
  auto p = cross_entropy_ops(3, 10, e, Fusion::fused);
  expect_op(p.forward[0], "cross_entropy", Phase::forward, 0, 120, 30 * e + 24, 24, 1);
  expect_op(p.backward[0], "cross_entropy.bwd", Phase::backward, 0, 90, 30 * e + 24 + 12, 30 * e,
            1);
  // Eager: logits.float(), log_softmax, nll_loss; backward: nll's fill + scatter, log_softmax's
  // backward (grad, output), the cast back.
  p = cross_entropy_ops(3, 10, e, Fusion::eager);
  const std::vector<Pass> fwd = {{30 * e, 120}, {120, 120}, {24 + 12, 0}};
  const std::vector<Pass> bwd = {{0, 120}, {24, 12}, {240, 120}, {120, 30 * e}};
  expect_op(p.forward[0], "cross_entropy", Phase::forward, 0, 123, reads(fwd), writes(fwd), 3);
  expect_op(p.backward[0], "cross_entropy.bwd", Phase::backward, 0, 90, reads(bwd), writes(bwd), 4);
}

TEST(MemoryOps, RouterDispatchCombine) {
  // 3 tokens, 8 experts, top-2, width 4: R·E = 24, R·k = 6.
  auto p = router_ops(RouterScoring::softmax, 3, 8, 2, e);
  ASSERT_EQ(p.forward.size(), 2u);
  expect_op(p.forward[0], "router_scores", Phase::forward, 0, 120, 24 * e, 96, 1);
  expect_op(p.forward[1], "router_topk", Phase::forward, 0, 24, 96, 6 * 12, 1);
  expect_op(p.backward[0], "router_topk.bwd", Phase::backward, 0, 0, 6 * 12, 96, 2);
  expect_op(p.backward[1], "router_scores.bwd", Phase::backward, 0, 72, 192, 24 * e, 1);
  p = router_ops(RouterScoring::sigmoid, 3, 8, 2, e);
  EXPECT_DOUBLE_EQ(p.forward[0].vector_flops, 96);
  // Dispatch: 6 routed rows of 4 gathered (ids, rows), permutation and rows written.
  p = dispatch_ops(3, 2, 4, e);
  expect_op(p.forward[0], "moe_dispatch", Phase::forward, 0, 0, 48 + 24 * e, 48 + 24 * e, 2);
  expect_op(p.backward[0], "moe_dispatch.bwd", Phase::backward, 0, 24, 24 * e + 48, 12 * e, 1);
  // Combine: 6 rows weighted (fp32 weights, int64 permutation) into 3.
  p = combine_ops(3, 2, 4, e);
  expect_op(p.forward[0], "moe_combine", Phase::forward, 0, 48, 24 * e + 72, 12 * e, 1);
  expect_op(p.backward[0], "moe_combine.bwd", Phase::backward, 0, 72, 12 * e + 24 * e + 72,
            24 * e + 24, 1);
}

TEST(MemoryOps, MlaAssemble) {
  // 3 tokens, 2 heads, nope 4, rope 2: q (3·2·6 = 36) and k_nope (24), k_pe (6) in; q and k
  // (36 each) out.
  const auto p = mla_assemble_ops(3, 2, 4, 2, e);
  expect_op(p.forward[0], "mla_assemble", Phase::forward, 0, 0, 66 * e, 72 * e, 2);
  expect_op(p.backward[0], "mla_assemble.bwd", Phase::backward, 0, 12, 72 * e, 66 * e, 2);
}

// torchao's tensorwise Float8Linear (work/float8.hpp) around a linear of T = 8 tokens, in = 4,
// out = 2, bf16 (e = 2): X is 32 elements, W 8, dY 16; fp8 elements are 1 byte.
TEST(Float8, ScalingBytesOfOneLinear) {
  const OpPair p = float8_scaling_ops(8, 4, 2, e);
  ASSERT_EQ(p.forward.size(), 4u);
  ASSERT_EQ(p.backward.size(), 5u);
  // Forward: amax(X) reads 64; cast(X) reads 64, writes 32; amax(W) reads 16; cast(W) 16 → 8.
  const std::vector<Pass> fwd{{64, 0}, {64, 32}, {16, 0}, {16, 8}};
  // Backward: amax(dY) reads 32; cast(dY) 32 → 16; the fp8 transposes of W (8 → 8), dY (16 →
  // 16) and X (32 → 32) that torch._scaled_mm's layouts need.
  const std::vector<Pass> bwd{{32, 0}, {32, 16}, {8, 8}, {16, 16}, {32, 32}};
  for (std::size_t i = 0; i < fwd.size(); ++i) {
    EXPECT_EQ(p.forward[i].bytes_read, fwd[i].read) << i;
    EXPECT_EQ(p.forward[i].bytes_written, fwd[i].written) << i;
    EXPECT_EQ(p.forward[i].kind, OpKind::memory);
    EXPECT_EQ(p.forward[i].kernels, 1);
  }
  for (std::size_t i = 0; i < bwd.size(); ++i) {
    EXPECT_EQ(p.backward[i].bytes_read, bwd[i].read) << i;
    EXPECT_EQ(p.backward[i].bytes_written, bwd[i].written) << i;
    EXPECT_EQ(p.backward[i].phase, Phase::backward);
  }
  // In all: forward 160 read + 40 written, backward 120 + 72.
  EXPECT_EQ(reads(fwd) + writes(fwd), 200);
  EXPECT_EQ(reads(bwd) + writes(bwd), 192);
}

// apply_float8 marks the linear's three GEMMs and puts each scaling op before its GEMM; the
// excluded module (the output head) keeps bf16.
TEST(Float8, AppliedToALinearButNotTheExcludedOne) {
  OpPair a = linear_ops(8, 4, 2, 1, false, e), b = linear_ops(8, 4, 2, 1, false, e);
  for (auto* l : {&a.forward, &a.backward})
    for (auto& op : *l) op.module = 1, op.param = 10;
  for (auto* l : {&b.forward, &b.backward})
    for (auto& op : *l) op.module = 2, op.param = 20;
  std::vector<Op> fwd = a.forward, bwd = a.backward;
  fwd.insert(fwd.end(), b.forward.begin(), b.forward.end());
  bwd.insert(bwd.end(), b.backward.begin(), b.backward.end());
  apply_float8(fwd, bwd, 2, e);
  ASSERT_EQ(fwd.size(), 6u);  // 4 scaling ops, the fp8 linear, the excluded linear
  EXPECT_TRUE(fwd[4].float8);
  EXPECT_STREQ(fwd[0].name, "float8.amax");
  EXPECT_EQ(fwd[0].module, 1);
  EXPECT_FALSE(fwd[5].float8);
  ASSERT_EQ(bwd.size(), 9u);  // 3 + dgrad, 2 + wgrad, the excluded dgrad and wgrad
  EXPECT_STREQ(bwd[3].name, "linear.dgrad");
  EXPECT_TRUE(bwd[3].float8);
  EXPECT_STREQ(bwd[6].name, "linear.wgrad");
  EXPECT_TRUE(bwd[6].float8);
  EXPECT_FALSE(bwd[7].float8);
  EXPECT_FALSE(bwd[8].float8);
}

}  // namespace
