// One TP rank's step work (work::TensorParallel) against what Megatron's and torchtitan's
// tensor and sequence parallelism do, computed by hand: Llama-3-8B (h 4096, 32 heads over 8
// kv heads of 128, MLP 14336) at T = 2, its q/k/v/gate/up column- and o/down row-parallel.

#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <string>
#include <vector>

#include "dmuon/base/error.hpp"
#include "dmuon/model/topology.hpp"
#include "dmuon/work/step_work.hpp"
#include "dmuon/work/throughput.hpp"
#include "op_lookup.hpp"

namespace {

using namespace dmuon;
using namespace dmuon::work;
using namespace dmuon::work::test;

constexpr double kS = 64, kH = 4096, kBf16 = 2;

// The model as one TP rank holds it, sharded by the parameters' names: `column` (dim 0) and
// `row` (dim 1) patterns of the weights' FQNs.
struct Sharded {
  model::Topology topo;
  TensorParallel tp;
};

Sharded shard(model::Topology topo, int t, bool sequence,
              const std::string& column = R"(.*\.(q|k|v|gate|up)_proj\.weight)",
              const std::string& row = R"(.*\.(o|down)_proj\.weight)") {
  Sharded s{std::move(topo), {}};
  s.tp.size = t;
  s.tp.sequence = sequence;
  auto& tree = s.topo.tree;
  s.tp.sharded_dim.assign(tree.num_parameters(), -1);
  for (int pid : tree.parameter_order()) {
    const auto& p = tree.parameter(pid);
    int dim = std::regex_match(p.name, std::regex(column)) ? 0
              : std::regex_match(p.name, std::regex(row))  ? 1
                                                           : -1;
    if (dim < 0) continue;
    s.tp.sharded_dim[static_cast<std::size_t>(pid)] = dim;
    auto shape = p.shape;
    shape[static_cast<std::size_t>(dim)] /= t;
    tree.reshape_parameter(pid, shape);
  }
  return s;
}

StepWork work_of(const Sharded& s, AcPolicy ac = AcPolicy::none) {
  RunShape shape;
  shape.seq_len = static_cast<std::int64_t>(kS);
  shape.ac = ac;
  shape.tp = s.tp;
  return build_step_work(s.topo, shape);
}

StepWork whole(AcPolicy ac = AcPolicy::none) {
  RunShape shape;
  shape.seq_len = static_cast<std::int64_t>(kS);
  shape.ac = ac;
  return build_step_work(model::build_topology("llm", "llama3-8b"), shape);
}

Sharded llama(int t, bool sequence) {
  return shard(model::build_topology("llm", "llama3-8b"), t, sequence);
}

std::vector<const Op*> collectives(const std::vector<Op>& ops) {
  return of_kind(ops, OpKind::tp_collective);
}

TEST(TensorParallelWork, TpSplitsHeadsAndHiddenUnitsAndAllReducesEachRegion) {
  const auto w = work_of(llama(2, false));
  const auto& block = w.units[1];
  EXPECT_EQ(names(block.forward),
            (std::vector<std::string>{
                "rms_norm", "linear", "linear", "linear", "rope", "attention.gqa_expand",
                "attention", "linear", "tp_all_reduce", "residual_add", "rms_norm", "linear",
                "linear", "swiglu", "linear", "tp_all_reduce", "residual_add"}));
  // 16 of the 32 heads and 4 of the 8 kv heads; RoPE on those (3 FLOPs per rotated element).
  const auto& attention = first(block.forward, "attention");
  EXPECT_EQ(attention.attention.heads, 16);
  EXPECT_EQ(attention.attention.kv_heads, 4);
  EXPECT_DOUBLE_EQ(first(block.forward, "rope").vector_flops, 3 * kS * (16 + 4) * 128);
  // Every matmul FLOP of a block halves (the linears' local shapes, half the heads).
  const auto unsplit_work = whole();
  const auto& unsplit = unsplit_work.units[1];
  OpTotals split_fwd, whole_fwd;
  split_fwd.add(block.forward);
  whole_fwd.add(unsplit.forward);
  EXPECT_DOUBLE_EQ(split_fwd.flops, whole_fwd.flops / 2);
  // The norms and residuals see every token on every rank.
  EXPECT_DOUBLE_EQ(first(block.forward, "rms_norm").bytes(),
                   first(unsplit.forward, "rms_norm").bytes());
  // Forward: the out projections' partial sums all-reduced, S x h bf16 each; backward: the
  // gradients of the regions' inputs.
  for (const auto* ops : {&block.forward, &block.backward}) {
    const auto c = collectives(*ops);
    ASSERT_EQ(c.size(), 2u);
    for (const auto* op : c) {
      EXPECT_EQ(op->call.kind, comm::CollectiveKind::all_reduce);
      EXPECT_DOUBLE_EQ(op->call.count, kS * kH);
      EXPECT_DOUBLE_EQ(op->call.elem_bytes, kBf16);
      EXPECT_EQ(op->call.group, 2);
      EXPECT_DOUBLE_EQ(op->call.bytes_per_rank(), 2 * 0.5 * kS * kH * kBf16);
    }
  }
  // The backward all-reduce of the MLP's input follows the gate/up projections' backward.
  const auto bwd = names(block.backward);
  const auto ar = std::find(bwd.begin(), bwd.end(), "tp_all_reduce");
  ASSERT_NE(ar, bwd.end());
  EXPECT_EQ(*(ar + 1), "rms_norm.bwd");
  // The head (not TP-sharded) is whole on every rank: no collective.
  EXPECT_TRUE(collectives(w.units.back().forward).empty());
  EXPECT_TRUE(collectives(w.units.back().backward).empty());
}

TEST(TensorParallelWork, SequenceParallelSplitsTheStreamAndGathersIntoEachRegion) {
  const auto w = work_of(llama(2, true));
  const auto& block = w.units[1];
  EXPECT_EQ(
      names(block.forward),
      (std::vector<std::string>{"rms_norm", "tp_all_gather", "linear", "linear", "linear", "rope",
                                "attention.gqa_expand", "attention", "linear", "tp_reduce_scatter",
                                "residual_add", "rms_norm", "tp_all_gather", "linear", "linear",
                                "swiglu", "linear", "tp_reduce_scatter", "residual_add"}));
  const auto unsplit_work = whole();
  const auto& unsplit = unsplit_work.units[1];
  // Norms and residual adds over half the tokens: the fused RMSNorm reads x and w and writes
  // y and an fp32 rstd per token (memory_ops.cpp), here for R = S/2 rows.
  const double R = kS / 2;
  EXPECT_DOUBLE_EQ(first(block.forward, "rms_norm").bytes(),
                   2 * R * kH * kBf16 + kH * kBf16 + 4 * R);
  EXPECT_DOUBLE_EQ(first(block.forward, "residual_add").bytes(),
                   first(unsplit.forward, "residual_add").bytes() / 2);
  EXPECT_DOUBLE_EQ(first(block.forward, "rms_norm").saved_bytes,
                   first(unsplit.forward, "rms_norm").saved_bytes / 2);
  // Each rank's chunk is S/2 x h; a ring all-gather or reduce-scatter sends (T-1)/T of the
  // S x h buffer: together what the all-reduce sends (Korthikanti et al. 2022, §4.2.2).
  const auto& ag = first(block.forward, "tp_all_gather");
  EXPECT_EQ(ag.call.kind, comm::CollectiveKind::all_gather);
  EXPECT_DOUBLE_EQ(ag.call.count, kS / 2 * kH);
  EXPECT_DOUBLE_EQ(ag.call.bytes_per_rank(), 0.5 * kS * kH * kBf16);
  const auto& rs = first(block.forward, "tp_reduce_scatter");
  EXPECT_DOUBLE_EQ(rs.call.count, kS / 2 * kH);
  EXPECT_DOUBLE_EQ(
      ag.call.bytes_per_rank() + rs.call.bytes_per_rank(),
      first(work_of(llama(2, false)).units[1].forward, "tp_all_reduce").call.bytes_per_rank());
  // Backward: each the other's conjugate, in reverse order.
  std::vector<comm::CollectiveKind> bwd;
  for (const auto* op : collectives(block.backward)) bwd.push_back(op->call.kind);
  EXPECT_EQ(bwd, (std::vector<comm::CollectiveKind>{
                     comm::CollectiveKind::all_gather, comm::CollectiveKind::reduce_scatter,
                     comm::CollectiveKind::all_gather, comm::CollectiveKind::reduce_scatter}));
  // The stem looks up half the tokens; the head normalizes them, then gathers the sequence
  // for the whole head (whose input gradient is whole on every rank: no backward collective).
  EXPECT_DOUBLE_EQ(w.units.front().forward.front().bytes(),
                   whole().units.front().forward.front().bytes() / 2);
  EXPECT_EQ(names(w.units.back().forward),
            (std::vector<std::string>{"rms_norm", "tp_all_gather", "linear", "cross_entropy"}));
  EXPECT_TRUE(collectives(w.units.back().backward).empty());
}

TEST(TensorParallelWork, CheckpointingRecomputesTheGathersNotTheSavedReduceScatters) {
  // torchtitan's per-op SAC saves _c10d_functional.reduce_scatter_tensor's output.
  const auto selective = work_of(llama(2, true), AcPolicy::selective);  // outlives the pointers
  std::vector<std::string> sel;
  for (const auto* op : collectives(selective.units[1].recompute)) sel.emplace_back(op->name);
  EXPECT_EQ(sel, (std::vector<std::string>{"tp_all_gather", "tp_all_gather"}));
  // Full checkpointing reruns the whole forward, collectives included.
  EXPECT_EQ(collectives(work_of(llama(2, true), AcPolicy::full).units[1].recompute).size(), 4u);
}

TEST(TensorParallelWork, HardwareFlopsCountEveryRankOfTheGroup) {
  // Per token, the TP group's ranks together run the whole model's block work, and each runs
  // the (unsharded) head and loss whole.
  const auto split = work_of(llama(2, true)), unsplit = whole();
  OpTotals head_split, head_whole;
  head_split.add(split.units.back().forward);
  head_split.add(split.units.back().backward);
  head_whole.add(unsplit.units.back().forward);
  head_whole.add(unsplit.units.back().backward);
  EXPECT_DOUBLE_EQ(head_split.flops, head_whole.flops);
  EXPECT_NEAR(hardware_flops_per_token(split),
              hardware_flops_per_token(unsplit) + head_whole.flops / split.text_tokens,
              1e-9 * hardware_flops_per_token(unsplit));
}

TEST(TensorParallelWork, ColumnParallelHeadComputesTheLossOverVocabularyShards) {
  const auto w = work_of(shard(model::build_topology("llm", "llama3-8b"), 2, true,
                               R"(.*\.(q|k|v|gate|up)_proj\.weight|lm_head\.weight)"));
  EXPECT_EQ(
      names(w.units.back().forward),
      (std::vector<std::string>{"rms_norm", "tp_all_gather", "linear", "cross_entropy",
                                "tp_loss_all_reduce", "tp_loss_all_reduce", "tp_loss_all_reduce"}));
  const auto& loss = first(w.units.back().forward, "tp_loss_all_reduce");
  EXPECT_DOUBLE_EQ(loss.call.count, kS);  // one fp32 per token
  EXPECT_DOUBLE_EQ(loss.call.elem_bytes, 4);
  const auto back = collectives(w.units.back().backward);
  ASSERT_EQ(back.size(), 1u);  // the partial input gradients, reduce-scattered to the shards
  EXPECT_EQ(back.front()->call.kind, comm::CollectiveKind::reduce_scatter);
}

// --compute-dtype fp8 under TP (work/float8.hpp): torchao's float8 TP plan. Each region's input
// is cast once for its column-parallel Linears (PrepareFloat8ModuleInput), before the sequence
// all-gather, which then moves 1 byte a value; o and down cast their local inputs; every cast
// of a TP-sharded tensor all-reduces its amax (one fp32) over the group.
StepWork float8_work(const Sharded& s, AcPolicy ac = AcPolicy::none) {
  RunShape shape;
  shape.seq_len = static_cast<std::int64_t>(kS);
  shape.ac = ac;
  shape.tp = s.tp;
  shape.float8 = true;
  return build_step_work(s.topo, shape);
}

int count(const std::vector<Op>& ops, const std::string& name) {
  return static_cast<int>(
      std::count_if(ops.begin(), ops.end(), [&](const Op& op) { return op.name == name; }));
}

TEST(TensorParallelWork, Float8CastsEachRegionInputOnceAndGathersItInFp8) {
  const auto w = float8_work(llama(2, true));
  const auto& f = w.units[1].forward;
  // Amaxes: 2 region inputs, the o and down inputs, 7 weight shards; each all-reduced.
  EXPECT_EQ(count(f, "float8.amax"), 11);
  EXPECT_EQ(count(f, "float8.cast"), 11);
  EXPECT_EQ(count(f, "float8.amax_all_reduce"), 11);
  EXPECT_EQ(count(w.units[1].backward, "float8.amax_all_reduce"), 7);  // each dgrad's dy
  const auto& ar = first(f, "float8.amax_all_reduce");
  EXPECT_EQ(ar.call.kind, comm::CollectiveKind::all_reduce);
  EXPECT_EQ(ar.call.count, 1);
  EXPECT_EQ(ar.call.elem_bytes, 4);
  EXPECT_EQ(ar.call.group, 2);
  // Each all-gather carries fp8 and follows the cast of the rank's 32 x 4096 shard.
  int gathers = 0;
  for (std::size_t i = 0; i < f.size(); ++i) {
    if (std::string(f[i].name) != "tp_all_gather") continue;
    ++gathers;
    EXPECT_EQ(f[i].call.count, 32 * kH);
    EXPECT_EQ(f[i].call.elem_bytes, 1);
    ASSERT_GE(i, 3u);
    EXPECT_EQ(names({f[i - 3], f[i - 2], f[i - 1]}),
              (std::vector<std::string>{"float8.amax", "float8.amax_all_reduce", "float8.cast"}));
    EXPECT_EQ(f[i - 1].bytes_read, 32 * kH * kBf16);
    EXPECT_EQ(f[i - 1].bytes_written, 32 * kH);
  }
  EXPECT_EQ(gathers, 2);
  // q_proj's GEMM reads the gathered fp8 input: only its weight shard (2048 x 4096) is cast
  // between the gather and it.
  std::size_t q = 0;
  while (!(f[q].kind == OpKind::gemm && f[q].float8)) ++q;
  EXPECT_EQ(std::string(f[q - 1].name), "float8.cast");
  EXPECT_EQ(f[q - 1].bytes_read, 2048 * kH * kBf16);
  // The same run in bf16 gathers 2 bytes a value.
  EXPECT_EQ(first(work_of(llama(2, true)).units[1].forward, "tp_all_gather").call.elem_bytes,
            kBf16);
}

TEST(TensorParallelWork, Float8WithoutSequenceParallelCastsTheWholeInputOnce) {
  const auto w = float8_work(llama(2, false));  // alive while `f` is read
  const auto& f = w.units[1].forward;
  EXPECT_EQ(count(f, "float8.amax"), 11);
  EXPECT_EQ(count(f, "tp_all_gather"), 0);
  // The attention's input cast: all 64 tokens, once, before q_proj's weight cast.
  const auto& cast = first(f, "float8.cast");
  EXPECT_EQ(cast.bytes_read, kS * kH * kBf16);
  EXPECT_EQ(cast.bytes_written, kS * kH);
}

TEST(TensorParallelWork, Float8SelectiveCheckpointingKeepsAmaxesAndRedoesTheirAllReduces) {
  const auto w = float8_work(llama(2, true), AcPolicy::selective);
  const auto& r = w.units[1].recompute;
  EXPECT_EQ(count(r, "float8.amax"), 0);  // torchtitan's _save_list keeps aten.max
  EXPECT_EQ(count(r, "float8.amax_all_reduce"), 11);
  EXPECT_EQ(count(r, "float8.cast"), 11);
  EXPECT_EQ(count(r, "tp_all_gather"), 2);
}

// A vocabulary-parallel embedding (torchtitan's RowwiseParallel on tok_embeddings): each TP rank
// holds 128,256 / 2 = 64,128 rows, looks up all 64 tokens with the ids outside its rows masked,
// zeroes their rows, and the partial rows leave as a region's output: a reduce-scatter to the
// 32-token shards under SP (backward: their gradient all-gathered, masked, scattered into the
// 64,128 x 4096 gradient), an all-reduce without SP (nothing in backward).
Sharded llama_vocab_parallel(int t, bool sequence) {
  return shard(model::build_topology("llm", "llama3-8b"), t, sequence,
               R"(.*\.(embed_tokens|q_proj|k_proj|v_proj|gate_proj|up_proj)\.weight)");
}

TEST(TensorParallelWork, VocabularyParallelEmbeddingLooksUpEveryTokenInItsRows) {
  const auto w = work_of(llama_vocab_parallel(2, true));
  const auto& stem = w.units.front();
  EXPECT_EQ(names(stem.forward),
            (std::vector<std::string>{"embedding.vocab_mask", "embedding", "embedding.mask_rows",
                                      "tp_reduce_scatter"}));
  EXPECT_EQ(first(stem.forward, "embedding").bytes_written, kS * kH * kBf16);  // all 64 rows
  const auto& rs = first(stem.forward, "tp_reduce_scatter");
  EXPECT_EQ(rs.call.count, 32 * kH);
  EXPECT_EQ(rs.call.group, 2);
  EXPECT_EQ(names(stem.backward),
            (std::vector<std::string>{"tp_all_gather", "embedding.mask_rows", "embedding.bwd"}));
  // The dense gradient of the rank's 64,128 rows, plus the 64 gathered rows of dy.
  EXPECT_EQ(first(stem.backward, "embedding.bwd").bytes_written, (64128 * kH + kS * kH) * kBf16);
  // The mask is saved (1 byte per token); the offset ids are the lookup's input, kept once
  // by the lookup (8 bytes per token).
  EXPECT_EQ(stem.forward.front().saved_bytes, kS * 1);
  EXPECT_EQ(first(stem.forward, "embedding").saved_bytes, kS * 8);
  // Nothing multiplies the table: it stays a looked-up parameter.
  EXPECT_EQ(w.lookup_params.size(), 1u);
  const auto plain = work_of(llama_vocab_parallel(2, false)).units.front();
  EXPECT_EQ(names(plain.forward),
            (std::vector<std::string>{"embedding.vocab_mask", "embedding", "embedding.mask_rows",
                                      "tp_all_reduce"}));
  EXPECT_EQ(first(plain.forward, "tp_all_reduce").call.count, kS * kH);
  EXPECT_EQ(names(plain.backward),
            (std::vector<std::string>{"embedding.mask_rows", "embedding.bwd"}));
}

TEST(TensorParallelWork, RefusedWhereNotModelled) {
  const auto error = [](const Sharded& s) -> std::string {
    try {
      work_of(s);
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  // tiny's one kv head does not split over 2 ranks.
  EXPECT_NE(error(shard(model::build_topology("llm", "tiny"), 2, false))
                .find("1 key/value heads do not split over 2 ranks"),
            std::string::npos);
  // q sharded, k and v whole: no TP layout of an attention.
  EXPECT_NE(error(shard(model::build_topology("llm", "llama3-8b"), 2, false,
                        R"(.*\.(q|gate|up)_proj\.weight)"))
                .find("its attention is not modelled split this way"),
            std::string::npos);
  // Sequence parallelism needs a TP group; MoE layers under TP are not modelled, sharded or on
  // split tokens.
  auto one = llama(1, false);
  one.tp.sequence = true;
  EXPECT_THROW(work_of(one), InputError);
  EXPECT_NE(error(shard(model::build_topology("moe-llm", "tiny"), 2, false,
                        R"(.*experts.*_proj\.weight)", "^$"))
                .find("an MoE layer under tensor parallelism is not modelled"),
            std::string::npos);
  EXPECT_NE(error(shard(model::build_topology("moe-llm", "tiny"), 2, true, "^$", "^$"))
                .find("not modelled"),
            std::string::npos);
}

}  // namespace
