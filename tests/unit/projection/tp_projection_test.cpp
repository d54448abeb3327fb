// dmuon_project --tp T (world_programs.hpp, replay.hpp): the TP step replayed from the engine's
// schedule, against expectations derived by hand:
//   - every rank's replayed TP gathers and scatters are, in calls and bytes, what the plan's
//     DP and TP owners give (each TP-sharded parameter: one gather and one scatter on each rank
//     of its DP owner's TP group, |p|/T fp32 sent / received by each non-owner), and the DP
//     collectives are one DP group's on the local shapes (the audit); reduced and full
//     symmetry replay the same; with --accum K the TP ones unchanged (once per step); with
//     --comm-dtype bf16 the gathers' bytes halved, the scatters' (fp32) unchanged;
//   - on a hand-built model the TP owner alone runs Newton–Schulz, on the logical matrix, and
//     the other rank of its TP group waits for it inside the scatter.

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "../llm_tp_plan.hpp"
#include "dmuon/engine/step/optimizer_config.hpp"
#include "dmuon/project/collective_cost.hpp"
#include "dmuon/project/compute_cost.hpp"
#include "dmuon/project/projection.hpp"
#include "same_rank_figures.hpp"
#include "test_machines.hpp"
#include "test_plan_options.hpp"

namespace {

using namespace dmuon;
using engine::Phase;

double phase(const engine::RunResult& r, int rank, Phase p) {
  return r.rank_phases_ms[static_cast<std::size_t>(rank) * engine::kPhaseCount +
                          static_cast<std::size_t>(p)];
}

TEST(TpProjection, TpCollectivesPerRankAreTheOwnersAndBothSymmetriesAgree) {
  const auto m = project::testing::nccl_machine(4, 100, 10);
  // --accum K: the same TP calls and bytes, once per step whatever K; a 2-byte wire (bf16):
  // the gathers carry half the bytes, the scatters the fp32 update.
  using Case = std::tuple<int, int, int, int, int>;  // world, R, T, accum, wire bytes
  for (auto [world, replicate, tp, accum, wire] : std::vector<Case>{{4, 1, 2, 1, 4},
                                                                    {8, 2, 2, 1, 4},
                                                                    {8, 1, 4, 1, 4},
                                                                    {16, 1, 2, 1, 4},
                                                                    {4, 1, 2, 2, 4},
                                                                    {8, 2, 2, 3, 4},
                                                                    {8, 1, 2, 1, 2},
                                                                    {8, 2, 2, 2, 2}}) {
    const std::string name = "world " + std::to_string(world) + " R " + std::to_string(replicate) +
                             " T " + std::to_string(tp) + " accum " + std::to_string(accum) +
                             " wire " + std::to_string(wire);
    const auto setup = test::llm_tp_plan(world, replicate, tp);
    const auto& topo = setup.topo;
    const auto& p = setup.plan;
    // By hand from the plan's owners: per world rank dp·T + t, the TP-sharded parameters of DP
    // owner dp (one gather, one scatter each), and |p|/T·4 bytes for those t does not own.
    std::vector<std::int64_t> calls(static_cast<std::size_t>(world), 0),
        bytes(static_cast<std::size_t>(world), 0);  // fp32 bytes
    for (int pid : p.tp.sharded) {
      const int dp = p.partition.owner_rank(pid);
      for (int t = 0; t < tp; ++t) {
        const auto w = static_cast<std::size_t>(dp * tp + t);
        ++calls[w];
        if (t != p.tp.tp_owner[static_cast<std::size_t>(pid)])
          bytes[w] += topo.tree.parameter(pid).numel() / tp * 4;
      }
    }
    project::ProjectionOptions o;
    o.engine.step.method = engine::Method::dmuon;
    o.engine.step.accum = accum;
    o.engine.step.wire = wire == 2 ? kernels::Dtype::bf16 : kernels::Dtype::f32;
    o.symmetry = project::Symmetry::reduced;
    const auto red = project::project(topo.tree, p, m, o);
    o.symmetry = project::Symmetry::full;
    const auto full = project::project(topo.tree, p, m, o);
    for (const auto* proj : {&red, &full}) {
      const auto& r = proj->result;
      EXPECT_TRUE(r.audit_ok) << name << ": " << r.audit_message;
      EXPECT_EQ(r.tp, tp) << name;
      EXPECT_EQ(r.world_size, world) << name;
      const auto W = static_cast<std::size_t>(world);
      const auto gather = engine::channel_index(CommGroup::tp, comm::CollectiveKind::gather);
      const auto scatter = engine::channel_index(CommGroup::tp, comm::CollectiveKind::scatter);
      ASSERT_EQ(r.rank_calls.size(), engine::kChannelCount * W) << name;
      for (std::size_t q = 0; q < W; ++q) {
        EXPECT_EQ(r.rank_calls[gather * W + q], calls[q]) << name << " rank " << q << " gathers";
        EXPECT_EQ(r.rank_bytes[gather * W + q], bytes[q] / 4 * wire)
            << name << " rank " << q << " gather bytes";
        EXPECT_EQ(r.rank_calls[scatter * W + q], calls[q]) << name << " rank " << q << " scatters";
        EXPECT_EQ(r.rank_bytes[scatter * W + q], bytes[q])
            << name << " rank " << q << " scatter bytes";
      }
      EXPECT_GT(r.kinds[gather].bytes_measured, 0) << name;
    }
    EXPECT_TRUE(project::testing::same_rank_figures(full, red, 1e-9)) << name;
  }
}

// One site with one [8, 8] matrix, TP-sharded (rows) over T = 2 on one DP rank: world ranks 0
// and 1 hold 4 x 8 shards; the TP owner pass gives it to TP rank 0. With no compute, both
// ranks reach the gather together; the owner runs Newton–Schulz on the logical 8 x 8 matrix
// while rank 1 waits in the scatter. So rank 0's exposed communication is the gather and the
// scatter (tp_exchange_time of 32 floats per rank each; the DP collectives of a one-rank group
// cost nothing), rank 1's is that plus rank 0's Newton–Schulz, which rank 1 never runs.
TEST(TpProjection, NewtonSchulzOnTheTpOwnerOnTheLogicalMatrix) {
  model::ModuleTree tree("M");
  tree.add_parameter(tree.add_module(0, "layer", "L"), "w", {8, 8});
  tree.finalize();
  plan::PlanConfig pc;
  pc.dedicate_rule = "all";
  pc.partition.shard = 1;
  pc.tp = 2;
  pc.tp_shard_rule = "all";
  pc.tp_row_rule = "contains:nothing";
  const auto p = plan::make_plan(tree, pc);
  ASSERT_EQ(p.tp.tp_owner, (std::vector<int>{0}));
  ASSERT_EQ(p.tp.shard_dim, (std::vector<int>{0}));
  const auto m = project::testing::measured_machine(2, 10, 5);
  project::ProjectionOptions o;
  o.engine.step.method = engine::Method::dmuon;
  o.engine.step.compute = engine::Compute::none;
  for (auto symmetry : {project::Symmetry::reduced, project::Symmetry::full}) {
    o.symmetry = symmetry;
    const auto r = project::project(tree, p, m, o).result;
    ASSERT_EQ(r.world_size, 2);
    EXPECT_TRUE(r.audit_ok) << r.audit_message;
    // A GPU machine: Newton–Schulz in --ns-dtype, its input in the same type.
    const auto nt = o.engine.backend.ns_dtype;
    const double ns_ms =
        1e3 * project::ComputeCost(m).newton_schulz(8, 8, engine::muon_config(o.engine).ns, nt, nt);
    ASSERT_GT(ns_ms, 0);
    EXPECT_NEAR(phase(r, 0, Phase::optimizer_ns), ns_ms, 1e-9);
    EXPECT_EQ(phase(r, 1, Phase::optimizer_ns), 0);
    // 32 floats per rank: (T − 1)/T · 256 B = 128 B at the root; LL wins at this size:
    // 6.6 + 0.47 µs and 128 B at a third of 5 GB/s. The exposed segments also hold the two
    // packs of the 32-element shard (Z3: forward and backward), 32 · (4 + 4) B at 100 GB/s.
    const double exchange_ms = 1e3 * ((6.6 + 0.47) * 1e-6 + 128 / (5e9 / 3));
    const double pack_ms = 1e3 * 32 * 8 / 100e9;
    EXPECT_NEAR(phase(r, 0, Phase::exposed_comm), 2 * exchange_ms + 2 * pack_ms, 1e-9);
    EXPECT_NEAR(phase(r, 1, Phase::exposed_comm), 2 * exchange_ms + 2 * pack_ms + ns_ms, 1e-9);
    // Rank 0 (the TP owner) sends nothing in its gather and receives nothing in its scatter;
    // rank 1 sends and receives its 128 B shard: one call each, measured = formula.
    for (auto kind : {comm::CollectiveKind::gather, comm::CollectiveKind::scatter}) {
      const auto ch = engine::channel_index(CommGroup::tp, kind);
      EXPECT_EQ(r.rank_calls[ch * 2], 1);
      EXPECT_EQ(r.rank_calls[ch * 2 + 1], 1);
      EXPECT_EQ(r.rank_bytes[ch * 2], 0);
      EXPECT_EQ(r.rank_bytes[ch * 2 + 1], 128);
      EXPECT_EQ(r.rank_formula_bytes[ch * 2 + 1], 128);
    }
  }
}

}  // namespace
