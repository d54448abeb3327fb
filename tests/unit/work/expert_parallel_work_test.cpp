// One EP rank's step work (work::ExpertParallel) against torchtitan's expert parallelism,
// computed by hand: Mixtral-8x7B (h 4096, 8 experts of 14336, top-2) at S = 64 tokens, EP 2:
// 128 routed rows per rank, 4 experts per rank, 32 rows each.

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "dmuon/base/error.hpp"
#include "dmuon/engine/step/activation_work.hpp"
#include "dmuon/model/expert_local_tree.hpp"
#include "dmuon/model/topology.hpp"
#include "dmuon/work/step_work.hpp"
#include "op_lookup.hpp"

namespace {

using namespace dmuon;
using namespace dmuon::work;
using namespace dmuon::work::test;

constexpr double kS = 64, kH = 4096, kI = 14336, kBf16 = 2, kRouted = kS * 2;

StepWork mixtral(int ep, AcPolicy ac = AcPolicy::none,
                 EpDispatcher dispatcher = EpDispatcher::all_to_all,
                 ExpertRouting routing = ExpertRouting::uniform) {
  RunShape shape;
  shape.seq_len = static_cast<std::int64_t>(kS);
  shape.ac = ac;
  shape.ep.size = ep;
  shape.ep.dispatcher = dispatcher;
  shape.ep.routing = routing;
  return build_step_work(model::build_topology("moe-llm", "mixtral-8x7b"), shape);
}

// The names between two ops of a list (both included).
std::vector<std::string> span(const std::vector<Op>& ops, const std::string& from,
                              const std::string& to) {
  const auto all = names(ops);
  const auto a = std::find(all.begin(), all.end(), from);
  const auto b = std::find(a, all.end(), to);
  if (b == all.end()) return {};
  return {a, b + 1};
}

std::string error_of(const std::string& topology, const std::string& preset, int ep) {
  try {
    RunShape shape;
    shape.seq_len = 64;
    shape.ep.size = ep;
    (void)build_step_work(model::build_topology(topology, preset), shape);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(ExpertParallelWork, TheRoutedRowsLeaveAndComeBackAroundTheRanksExperts) {
  const auto w = mixtral(2);
  const auto& layer = w.units[1];
  EXPECT_EQ(span(layer.forward, "moe_dispatch", "moe_combine"),
            (std::vector<std::string>{"moe_dispatch", "ep_token_counts", "ep_dispatch",
                                      "ep_permute", "linear", "linear", "swiglu", "linear",
                                      "ep_unpermute", "ep_combine", "moe_combine"}));
  // Each rank sends the other half of its 128 routed rows: 64 rows of 4096 bf16 = 512 KiB.
  const auto& dispatch = first(layer.forward, "ep_dispatch");
  EXPECT_EQ(dispatch.kind, OpKind::ep_collective);
  EXPECT_EQ(dispatch.call.kind, comm::CollectiveKind::all_to_all);
  EXPECT_EQ(dispatch.call.group, 2);
  EXPECT_DOUBLE_EQ(dispatch.call.count, kRouted * kH / 2);
  EXPECT_DOUBLE_EQ(dispatch.call.bytes_per_rank(), 64 * kH * kBf16);
  EXPECT_DOUBLE_EQ(first(layer.forward, "ep_combine").call.bytes_per_rank(), 64 * kH * kBf16);
  // The counts: 8 experts' int64 counts, 4 to each rank.
  const auto& counts = first(layer.forward, "ep_token_counts");
  EXPECT_DOUBLE_EQ(counts.call.count, 4);
  EXPECT_DOUBLE_EQ(counts.call.elem_bytes, 8);
  // Backward: the combine's gradient comes back before the experts' backward, the dispatch's
  // leaves after it.
  EXPECT_EQ(span(layer.backward, "moe_combine.bwd", "moe_dispatch.bwd").front(), "moe_combine.bwd");
  const auto back = names(layer.backward);
  const auto at = [&](const char* n) {
    return std::find(back.begin(), back.end(), n) - back.begin();
  };
  EXPECT_LT(at("ep_combine.bwd"), at("ep_unpermute.bwd"));
  EXPECT_LT(at("ep_unpermute.bwd"), at("linear.dgrad"));
  EXPECT_LT(at("ep_permute.bwd"), at("ep_dispatch.bwd"));
  EXPECT_LT(at("ep_dispatch.bwd"), at("moe_dispatch.bwd"));
  EXPECT_EQ(of_kind(layer.backward, OpKind::ep_collective).size(), 2u);
}

// DeepEP (Megatron's / AutoModel's flex dispatcher): a token goes once to each rank holding
// one of its experts, with its 2 int64 indices and 2 fp32 weights (24 bytes); no gather of
// the routed copies before it, no weighted sum after it.
TEST(ExpertParallelWork, DeepEpSendsATokenOncePerRank) {
  const auto w = mixtral(2, AcPolicy::none, EpDispatcher::deepep, ExpertRouting::consecutive);
  const auto& layer = w.units[1];
  EXPECT_EQ(span(layer.forward, "deepep_layout", "ep_combine"),
            (std::vector<std::string>{"deepep_layout", "ep_token_counts", "ep_dispatch",
                                      "ep_permute", "linear", "linear", "swiglu", "linear",
                                      "ep_unpermute", "ep_combine"}));
  for (const char* gone : {"moe_dispatch", "moe_combine"}) {
    const auto f = names(layer.forward), b = names(layer.backward);
    EXPECT_EQ(std::count(f.begin(), f.end(), gone), 0) << gone;
    EXPECT_EQ(std::count(b.begin(), b.end(), std::string(gone) + ".bwd"), 0) << gone;
  }
  // Consecutive experts 2t, 2t+1 lie on one rank: 64 rows leave, half of them to the other.
  constexpr double kRow = kH * kBf16;
  EXPECT_DOUBLE_EQ(first(layer.forward, "ep_dispatch").call.bytes_per_rank(), 32 * (kRow + 24));
  EXPECT_DOUBLE_EQ(first(layer.forward, "ep_combine").call.bytes_per_rank(), 32 * kRow);
  // Backward: the combine's gradient rows go out as a dispatch (no indices), the dispatch's
  // come back as a combine with the weights' fp32 gradients.
  EXPECT_DOUBLE_EQ(first(layer.backward, "ep_combine.bwd").call.bytes_per_rank(), 32 * kRow);
  EXPECT_DOUBLE_EQ(first(layer.backward, "ep_dispatch.bwd").call.bytes_per_rank(), 32 * (kRow + 8));
  // The permute copies the 64 received tokens to their 2 experts each: 128 rows written.
  const auto& permute = first(layer.forward, "ep_permute");
  EXPECT_DOUBLE_EQ(permute.bytes_written, kRouted * kRow);
  EXPECT_DOUBLE_EQ(permute.bytes_read, kS * kRow + kRouted * 8);
  EXPECT_DOUBLE_EQ(first(layer.forward, "ep_unpermute").bytes_written, kS * kRow);
  // The experts' rows do not change: 128 over 4 experts.
  for (const auto& op : layer.forward) {
    if (op.member < 0) continue;
    EXPECT_DOUBLE_EQ(op.gemm.m, 32);
  }
  // Uniform routing: 44/28 ranks a token (EpRouting), each half the time the other rank.
  const auto u = mixtral(2, AcPolicy::none, EpDispatcher::deepep, ExpertRouting::uniform);
  EXPECT_NEAR(first(u.units[1].forward, "ep_dispatch").call.bytes_per_rank(),
              kS * 44.0 / 28.0 / 2 * (kRow + 24), 1);  // whole bytes
  // torchtitan's all-to-all sends the routed copies whatever the routing.
  const auto t = mixtral(2, AcPolicy::none, EpDispatcher::all_to_all, ExpertRouting::consecutive);
  EXPECT_DOUBLE_EQ(first(t.units[1].forward, "ep_dispatch").call.bytes_per_rank(), 64 * kRow);
  // Full checkpointing redoes the three exchanges, as with torchtitan's.
  const auto full = mixtral(2, AcPolicy::full, EpDispatcher::deepep);
  EXPECT_EQ(of_kind(full.units[1].recompute, OpKind::ep_collective).size(), 3u);
}

TEST(ExpertParallelWork, EachRankRunsHalfTheExpertsOnTwiceTheRows) {
  const auto one = mixtral(1), two = mixtral(2);
  double flops1 = 0, flops2 = 0;
  for (const auto& op : two.units[1].forward)
    if (op.member >= 0) {
      EXPECT_EQ(op.gemm.batch, 4);
      EXPECT_DOUBLE_EQ(op.gemm.m, 32);  // 128 rows over 4 experts
      flops2 += op.flops;
    }
  for (const auto& op : one.units[1].forward)
    if (op.member >= 0) {
      EXPECT_EQ(op.gemm.batch, 8);
      EXPECT_DOUBLE_EQ(op.gemm.m, 16);
      flops1 += op.flops;
    }
  // Balanced routing: the same expert FLOPs on every rank, 2 · 128 · 3 · 4096 · 14336.
  EXPECT_DOUBLE_EQ(flops2, 2 * kRouted * 3 * kH * kI);
  EXPECT_DOUBLE_EQ(flops1, flops2);
  // The router still scores all 8 experts.
  EXPECT_DOUBLE_EQ(first(two.units[1].forward, "router_scores").bytes_written, kS * 8 * 4);
  EXPECT_TRUE(of_kind(one.units[1].forward, OpKind::ep_collective).empty());
}

TEST(ExpertParallelWork, FullCheckpointingRedoesTheAllToAllsAndSacKeepsTheirOutputs) {
  const auto full = mixtral(2, AcPolicy::full);
  EXPECT_EQ(of_kind(full.units[1].recompute, OpKind::ep_collective).size(), 3u);
  const auto sac = mixtral(2, AcPolicy::selective);
  EXPECT_TRUE(of_kind(sac.units[1].recompute, OpKind::ep_collective).empty());
  // What SAC caches of them: the received rows (and counts), not their ring traffic.
  EXPECT_DOUBLE_EQ(first(sac.units[1].forward, "ep_dispatch").cached_bytes, kRouted * kH * kBf16);
  EXPECT_DOUBLE_EQ(first(sac.units[1].forward, "ep_token_counts").cached_bytes, 8 * 8);
  // The permute keeps its index for backward; the rows it writes are the experts' input,
  // which the first grouped GEMM keeps.
  EXPECT_DOUBLE_EQ(first(sac.units[1].forward, "ep_permute").saved_bytes, kRouted * 8);
}

TEST(ExpertParallelWork, RefusesWhatDoesNotSplit) {
  EXPECT_NE(error_of("moe-llm", "mixtral-8x7b", 3).find("--ep 3: the 8 experts of"),
            std::string::npos);
  EXPECT_NE(error_of("moe-llm", "mixtral-8x7b", 3).find("valid: an EP size dividing 8"),
            std::string::npos);
  EXPECT_NE(error_of("llm", "llama3-8b", 2).find("--ep 2: topology 'llm' has no MoE layer"),
            std::string::npos);
  EXPECT_NE(error_of("moe-llm", "mixtral-8x7b", 0).find("--ep 0 is invalid (valid: 1..256)"),
            std::string::npos);
  EXPECT_EQ(error_of("moe-llm", "mixtral-8x7b", 8), "");  // one expert per rank
  EXPECT_EQ(error_of("moe-llm", "deepseek-v3", 64), "");
}

TEST(ExpertParallelWork, SaysWhatIsNotModelled) {
  const auto has = [](const StepWork& w, const std::string& needle) {
    return std::any_of(w.not_modelled.begin(), w.not_modelled.end(),
                       [&](const std::string& n) { return n.find(needle) != std::string::npos; });
  };
  EXPECT_TRUE(has(mixtral(1), "expert parallelism: every rank runs all experts"));
  EXPECT_FALSE(has(mixtral(2), "expert parallelism: every rank runs all experts"));
  EXPECT_TRUE(has(mixtral(2), "split sizes on the CPU"));
  EXPECT_TRUE(has(mixtral(2), "balanced routing"));
  const auto deepep = mixtral(2, AcPolicy::none, EpDispatcher::deepep);
  EXPECT_TRUE(has(deepep, "DeepEP's kernels beyond their bytes"));
  EXPECT_FALSE(has(deepep, "split sizes on the CPU"));
}

}  // namespace

namespace {

// The whole model's work on an EP rank's tree (engine::in_tree_of, what the projection runs
// under --ep): every unit's block and every looked-up or fp8 parameter by the same name there;
// another rank's experts are not in the lists.
TEST(ExpertParallelWork, InAnEpRanksTree) {
  const auto topo = model::build_topology("moe-llm", "mixtral-8x7b");
  const model::ModuleTree local = model::expert_local_tree(topo.tree, 2);
  RunShape shape;
  shape.seq_len = static_cast<std::int64_t>(kS);
  shape.ep.size = 2;
  shape.float8 = true;
  const auto whole = engine::activation_work(build_step_work(topo, shape));
  const auto mine = engine::in_tree_of(*whole, topo.tree, local);
  ASSERT_EQ(mine->units.size(), whole->units.size());
  for (std::size_t u = 0; u < whole->units.size(); ++u) {
    const int m = whole->units[u].module, n = mine->units[u].module;
    ASSERT_EQ(m < 0, n < 0);
    if (m >= 0) {
      EXPECT_EQ(local.module(n).path, topo.tree.module(m).path);
    }
  }
  ASSERT_EQ(mine->lookup_params.size(), 1u);  // the input embedding
  EXPECT_EQ(local.parameter(mine->lookup_params[0]).name, "model.embed_tokens.weight");
  // fp8 Linears (none an expert's: torchtitan's float8 leaves grouped expert GEMMs alone): the
  // same parameters by name.
  ASSERT_EQ(mine->float8_params.size(), whole->float8_params.size());
  EXPECT_GE(mine->float8_params.size(), 32u * 4u);  // at least q, k, v, o of every layer
  for (std::size_t i = 0; i < whole->float8_params.size(); ++i) {
    const std::string& name = topo.tree.parameter(whole->float8_params[i]).name;
    EXPECT_EQ(local.parameter(mine->float8_params[i]).name, name);
    EXPECT_EQ(name.find(".experts."), std::string::npos) << name;
  }
}

}  // namespace
