// One CP rank's step work (work::ContextParallel) against what torch's context_parallel does
// (torchtitan's CP: the causal load balance, a ring attention with the "allgather" rotation),
// computed by hand: Llama-3-8B (h 4096, 32 heads over 8 kv heads of 128) at S = 64, C = 2.

#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <string>
#include <vector>

#include "dmuon/base/error.hpp"
#include "dmuon/model/topology.hpp"
#include "dmuon/project/activation_memory.hpp"
#include "dmuon/work/step_work.hpp"
#include "dmuon/work/throughput.hpp"
#include "op_lookup.hpp"

namespace {

using namespace dmuon;
using namespace dmuon::work;
using namespace dmuon::work::test;

constexpr double kS = 64, kH = 4096, kBf16 = 2, kF32 = 4;
constexpr double kHeads = 32, kDims = 128 + 128;  // q·k and v widths per head

StepWork work_at(int cp, AcPolicy ac = AcPolicy::none) {
  RunShape shape;
  shape.seq_len = static_cast<std::int64_t>(kS);
  shape.ac = ac;
  shape.cp.size = cp;
  return build_step_work(model::build_topology("llm", "llama3-8b"), shape);
}

std::string error_of(int cp, std::int64_t seq,
                     const model::Topology& topo = model::build_topology("llm", "llama3-8b"),
                     int tp = 1) {
  try {
    RunShape shape;
    shape.seq_len = seq;
    shape.cp.size = cp;
    shape.tp.size = tp;
    (void)build_step_work(topo, shape);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(ContextParallelWork, EveryOpButTheAttentionRunsOnHalfTheTokens) {
  const auto w = work_at(2);
  EXPECT_DOUBLE_EQ(w.text_tokens, kS / 2);
  const auto& block = w.units[1];
  EXPECT_EQ(names(block.forward),
            (std::vector<std::string>{"rms_norm", "linear", "linear", "linear", "rope",
                                      "attention.gqa_expand", "cp_kv_all_gather", "attention",
                                      "attention.cp_merge", "linear", "residual_add", "rms_norm",
                                      "linear", "linear", "swiglu", "linear", "residual_add"}));
  // q_proj on 32 of the 64 tokens: 2·32·4096·4096 FLOPs.
  EXPECT_DOUBLE_EQ(first(block.forward, "linear").flops, 2 * (kS / 2) * kH * kH);
  // The logits of 32 tokens over the 128,256-word vocabulary.
  const auto& head = w.units.back();
  EXPECT_DOUBLE_EQ(first(head.forward, "linear").flops, 2 * (kS / 2) * kH * 128256);
}

TEST(ContextParallelWork, EachRankComputesHalfTheCausalScores) {
  // Causal scores of one sequence: 32 heads · 64²/2 = 65,536; the rank's half: 32,768.
  const double scores = kHeads * kS * kS / 2 / 2;
  const auto w = work_at(2);
  const auto& attention = first(w.units[1].forward, "attention");
  EXPECT_DOUBLE_EQ(attention.flops, 2 * scores * kDims);
  EXPECT_EQ(attention.kernels, 2);  // one sub-call per ring step
  const auto& bwd = first(w.units[1].backward, "attention.bwd");
  EXPECT_DOUBLE_EQ(bwd.flops, 4 * scores * kDims);
  EXPECT_EQ(bwd.kernels, 6);
  // The two ranks together run the whole attention, and the step's matmul FLOPs halve.
  const auto whole = work_at(1);
  EXPECT_DOUBLE_EQ(2 * attention.flops, first(whole.units[1].forward, "attention").flops);
  EXPECT_DOUBLE_EQ(2 * w.totals(Phase::forward).flops, whole.totals(Phase::forward).flops);
  EXPECT_DOUBLE_EQ(2 * w.totals(Phase::backward).flops, whole.totals(Phase::backward).flops);
  // Per token, the hardware FLOPs are the whole sequence's.
  EXPECT_DOUBLE_EQ(hardware_flops_per_token(w), hardware_flops_per_token(whole));
}

TEST(ContextParallelWork, TheRingGathersKeysAndValuesAndPermutesTheirGradients) {
  const auto w = work_at(2);
  const auto& block = w.units[1];
  // Forward: one all-gather of each rank's K, V chunk, expanded to the 32 query heads (repeat_kv
  // before SDPA): 32 tokens · 32 heads · 256 = 262,144 bf16 elements; each rank receives the
  // other's: 524,288 B. It runs behind the first sub-call (half the rank's forward FLOPs).
  const double chunk = (kS / 2) * kHeads * kDims;
  const auto fwd = of_kind(block.forward, OpKind::cp_collective);
  ASSERT_EQ(fwd.size(), 1u);
  EXPECT_EQ(fwd[0]->call.kind, comm::CollectiveKind::all_gather);
  EXPECT_DOUBLE_EQ(fwd[0]->call.count, chunk);
  EXPECT_EQ(fwd[0]->call.group, 2);
  EXPECT_DOUBLE_EQ(fwd[0]->call.bytes_per_rank(), chunk * kBf16);
  EXPECT_DOUBLE_EQ(fwd[0]->call.behind_attention_flops,
                   first(block.forward, "attention").flops / 2);
  // Backward: the all-gather again, then one permute per sub-call of the fp32 dK, dV chunk to
  // the neighbour (2 · 262,144 · 4 B... each rank sends its 1 MiB), all but the last behind
  // the next sub-call.
  const auto bwd = of_kind(block.backward, OpKind::cp_collective);
  ASSERT_EQ(bwd.size(), 3u);
  EXPECT_EQ(std::string(bwd[0]->name), "cp_kv_all_gather");
  EXPECT_EQ(bwd[0]->phase, Phase::backward);
  for (int i : {1, 2}) {
    EXPECT_EQ(std::string(bwd[i]->name), "cp_dkv_permute");
    EXPECT_DOUBLE_EQ(bwd[i]->call.count, chunk);
    EXPECT_DOUBLE_EQ(bwd[i]->call.elem_bytes, kF32);
    EXPECT_DOUBLE_EQ(bwd[i]->call.bytes_per_rank(), chunk * kF32);
    EXPECT_EQ(bwd[i]->call.span, 2);
  }
  EXPECT_DOUBLE_EQ(bwd[1]->call.behind_attention_flops,
                   first(block.backward, "attention.bwd").flops / 2);
  EXPECT_DOUBLE_EQ(bwd[2]->call.behind_attention_flops, 0);
  // The gathered K, V (all 64 tokens), the fp32 accumulators of dQ (32·4096) and dK, dV, the
  // permute's two fp32 buffers and one sub-call's gradients are live in the backward.
  const double q = (kS / 2) * kH;
  EXPECT_DOUBLE_EQ(first(block.backward, "attention.bwd").live_bytes,
                   2 * chunk * kBf16 + (q + chunk) * kF32 + 2 * chunk * kF32 + (q + chunk) * kBf16);
}

TEST(ContextParallelWork, FourRanksCutTheSequenceInEight) {
  const auto w = work_at(4);
  EXPECT_DOUBLE_EQ(w.text_tokens, kS / 4);
  const auto& block = w.units[1];
  EXPECT_EQ(first(block.forward, "attention").kernels, 4);
  EXPECT_EQ(of_kind(block.backward, OpKind::cp_collective).size(), 5u);  // gather + 4 permutes
  // Three merges of fp32 outputs (16 tokens · 32 heads · 128) plus the conversions.
  EXPECT_EQ(first(block.forward, "attention.cp_merge").kernels, 3 + 2);
}

TEST(ContextParallelWork, CheckpointingRedoesTheRingOnlyWhereItRedoesTheAttention) {
  const auto rec = [](AcPolicy ac) { return names(work_at(2, ac).units[1].recompute); };
  // Per-op SAC saves SDPA's output whole: nothing of the ring is redone.
  for (const auto& n : rec(AcPolicy::selective))
    EXPECT_TRUE(n.rfind("cp_", 0) != 0 && n != "attention.cp_merge") << n;
  EXPECT_EQ(rec(AcPolicy::core_attn),
            (std::vector<std::string>{"cp_kv_all_gather", "attention", "attention.cp_merge"}));
  const auto full = rec(AcPolicy::full);
  EXPECT_EQ(std::count(full.begin(), full.end(), "cp_kv_all_gather"), 1);
}

TEST(ContextParallelWork, SacCachesTheMergedOutputAndCoreAttnRecomputesTheLocalLse) {
  // Per-op SAC keeps what SDPA returns: the merged output (32 tokens · 32 heads · 128, bf16) and
  // its fp32 LSE (32 · 32 rows), not the sub-calls' outputs or the merge's fp32 temporaries.
  const auto w = work_at(2, AcPolicy::selective);
  const auto& block = w.units[1];
  EXPECT_DOUBLE_EQ(first(block.forward, "attention").cached_bytes,
                   (kS / 2) * kHeads * 128 * kBf16 + (kS / 2) * kHeads * kF32);
  EXPECT_DOUBLE_EQ(first(block.forward, "attention.cp_merge").cached_bytes, 0);
  // So selective keeps less than no checkpointing, as without CP (C = 4: 16 tokens per rank).
  using project::activation_memory;
  EXPECT_LT(activation_memory(work_at(4, AcPolicy::selective)).saved,
            activation_memory(work_at(4, AcPolicy::none)).saved);
  // core-attn drops the recomputed LSE of the rank's queries: 32 blocks · 32 · 32 rows · 4 B.
  EXPECT_EQ(activation_memory(work_at(2, AcPolicy::none)).saved -
                activation_memory(work_at(2, AcPolicy::core_attn)).saved,
            32 * 32 * 32 * 4);
}

// One TP rank's model at T = 2: q/k/v/gate/up column-, o/down row-parallel (Megatron's layout).
StepWork tp_cp_work(int tp, int cp, bool sequence, std::int64_t seq = 64) {
  auto topo = model::build_topology("llm", "llama3-8b");
  RunShape shape;
  shape.seq_len = seq;
  shape.cp.size = cp;
  shape.tp.size = tp;
  shape.tp.sequence = sequence;
  shape.tp.sharded_dim.assign(topo.tree.num_parameters(), -1);
  const std::regex column(R"(.*\.(q|k|v|gate|up)_proj\.weight)"),
      row(R"(.*\.(o|down)_proj\.weight)");
  for (int pid : topo.tree.parameter_order()) {
    const auto& p = topo.tree.parameter(pid);
    const int dim = std::regex_match(p.name, column) ? 0 : std::regex_match(p.name, row) ? 1 : -1;
    if (dim < 0) continue;
    shape.tp.sharded_dim[static_cast<std::size_t>(pid)] = dim;
    auto local = p.shape;
    local[static_cast<std::size_t>(dim)] /= tp;
    topo.tree.reshape_parameter(pid, local);
  }
  return build_step_work(topo, shape);
}

TEST(ContextParallelWork, UnderTensorParallelismEachRankHasHalfTheHeadsOfHalfTheTokens) {
  const auto w = tp_cp_work(2, 2, false);
  const auto& block = w.units[1];
  // 16 of the 32 heads over the rank's 32 tokens: a quarter of the whole attention.
  EXPECT_DOUBLE_EQ(4 * first(block.forward, "attention").flops,
                   first(work_at(1).units[1].forward, "attention").flops);
  // The CP all-gather carries 32 tokens · 16 heads · 256; its group's 2 ranks are T = 2 apart,
  // so the calls cross the domains of 4 consecutive ranks.
  const auto cp = of_kind(block.forward, OpKind::cp_collective);
  ASSERT_EQ(cp.size(), 1u);
  EXPECT_DOUBLE_EQ(cp[0]->call.count, (kS / 2) * 16 * kDims);
  EXPECT_EQ(cp[0]->call.span, 4);
  for (const auto* op : of_kind(block.backward, OpKind::cp_collective)) EXPECT_EQ(op->call.span, 4);
  // Megatron's all-reduces over the rank's 32 tokens of the hidden state.
  const auto tp = of_kind(block.forward, OpKind::tp_collective);
  ASSERT_EQ(tp.size(), 2u);
  EXPECT_DOUBLE_EQ(tp[0]->call.count, (kS / 2) * kH);
  // Sequence parallelism splits the rank's 32 tokens again: its norms run on 16.
  const auto sp = tp_cp_work(2, 2, true);
  EXPECT_DOUBLE_EQ(first(sp.units[1].forward, "tp_all_gather").call.count, (kS / 4) * kH);
  EXPECT_DOUBLE_EQ(sp.text_tokens, kS / 2);
}

TEST(ContextParallelWork, RefusesWhatIsNotModelled) {
  try {
    (void)tp_cp_work(4, 2, true, 12);
    ADD_FAILURE() << "12 tokens: 6 per CP rank do not split over 4 SP ranks";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "--seq-len 12 / --cp 2 does not split over the 4 ranks of --sequence-parallel "
              "(valid: a multiple of 8)");
  }
  EXPECT_NE(error_of(2, 62).find("--seq-len 62 does not split into the 2 x 2 chunks of --cp 2 "
                                 "(valid: a multiple of 4)"),
            std::string::npos);
  EXPECT_NE(error_of(65, 130).find("--cp 65 is invalid (valid: 1..64)"), std::string::npos);
  EXPECT_NE(error_of(2, 64, model::build_topology("vla")).find("text stacks only"),
            std::string::npos);
  auto bare = model::build_topology("llm", "llama3-8b");
  bare.geometry.reset();
  EXPECT_NE(error_of(2, 64, bare).find("needs a model with a geometry"), std::string::npos);
  EXPECT_EQ(error_of(1, 63), "");  // one rank: any length
}

}  // namespace
