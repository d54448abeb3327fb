// Tensor parallelism at plan level (docs/METRICS.md "Tensor parallelism"): which parameters are
// TP-sharded, the TP owner pass (rotation offsets in 1-D and HSDP, ties, mixed costs) and the
// predicted TP gather/scatter volume, each against an expectation derived by hand in the
// comments from the rules in tp_owners.hpp / tp_volume.hpp.

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "dmuon/base/error.hpp"
#include "dmuon/boundary/tp_shard.hpp"
#include "dmuon/engine/step/step_volume.hpp"
#include "dmuon/model/module_tree.hpp"
#include "dmuon/plan/plan.hpp"
#include "dmuon/plan/tp_layouts.hpp"
#include "dmuon/plan/tp_volume.hpp"
#include "kernels/tp_blocks.hpp"

namespace {

using namespace dmuon;

struct Spec {
  std::string name;  // dotted module path (containers created on the way); param <name>.weight
  std::vector<std::int64_t> shape;
};

model::ModuleTree make_tree(const std::vector<Spec>& specs) {
  model::ModuleTree t("Model");
  std::map<std::string, int> modules;  // find_module needs a finalized tree
  for (const auto& s : specs) {
    int m = model::ModuleTree::root;
    std::string path;
    std::size_t pos = 0;
    while (true) {
      const auto dot = s.name.find('.', pos);
      const auto part = s.name.substr(pos, dot == std::string::npos ? dot : dot - pos);
      path = model::join_path(path, part);
      const auto found = modules.find(path);
      m = found != modules.end() ? found->second
                                 : (modules[path] = t.add_module(
                                        m, part, dot == std::string::npos ? "Linear" : "Block"));
      if (dot == std::string::npos) break;
      pos = dot + 1;
    }
    t.add_parameter(m, "weight", s.shape);
  }
  t.finalize();
  return t;
}

plan::PlanConfig config(int shard, int replicate, int tp, const std::string& strategy,
                        const std::string& cost_model) {
  plan::PlanConfig c;
  c.dedicate_rule = "ndim=2";
  c.boundary = "default";
  c.strict = false;
  c.partition.strategy = partition::parse_strategy(strategy);
  c.partition.cost_model = partition::parse_cost_model(cost_model);
  c.partition.pack = false;
  c.partition.shard = shard;
  c.partition.replicate = replicate;
  c.tp = tp;
  return c;
}

int pid(const model::ModuleTree& t, const std::string& name) {
  return *t.find_parameter(name + ".weight");
}

// Six 8x8 projections, 1-D G = 2, T = 2, round robin (model order: p0..p5 -> slots 0,1,0,1,0,1),
// numel costs (64 each).
//   DP rank 0, offset 0 mod 2 = 0: l0.q all zero -> rotation picks t0; l0.v: t1 has the smaller
//     cost load -> t1; l1.q: loads tie (64, 64) -> rotation -> t0.
//   DP rank 1, offset 1: l0.k loads tie, rotation (t - 1) mod 2 is 0 for t1 -> t1; l0.o: t1 loaded
//     -> t0; l1.o: tie -> t1.
const std::vector<Spec> kSix = {{"l0.q_proj", {8, 8}}, {"l0.k_proj", {8, 8}},
                                {"l0.v_proj", {8, 8}}, {"l0.o_proj", {8, 8}},
                                {"l1.q_proj", {8, 8}}, {"l1.o_proj", {8, 8}}};

TEST(TpOwners, OneDimensionalRotationAndTies) {
  const auto t = make_tree(kSix);
  const auto p = plan::make_plan(t, config(2, 1, 2, "round_robin", "numel"));
  const auto& part = p.partition;
  // Preconditions (round robin, model order).
  EXPECT_EQ(part.owner_rank(pid(t, "l0.q_proj")), 0);
  EXPECT_EQ(part.owner_rank(pid(t, "l0.k_proj")), 1);
  EXPECT_EQ(part.owner_rank(pid(t, "l1.o_proj")), 1);
  EXPECT_EQ(partition::tp_rotation_offset(part, 0, 2), 0);
  EXPECT_EQ(partition::tp_rotation_offset(part, 1, 2), 1);
  const std::vector<std::pair<std::string, int>> expect = {{"l0.q_proj", 0}, {"l0.k_proj", 1},
                                                           {"l0.v_proj", 1}, {"l0.o_proj", 0},
                                                           {"l1.q_proj", 0}, {"l1.o_proj", 1}};
  for (const auto& [name, owner] : expect) {
    EXPECT_EQ(p.tp.tp_owner[static_cast<std::size_t>(pid(t, name))], owner) << name;
    EXPECT_EQ(p.tp.owner_world_rank(part, pid(t, name)), part.owner_rank(pid(t, name)) * 2 + owner)
        << name;
  }
  // Column (dim 0) vs row (dim 1) parallel, local numel 64 / 2.
  EXPECT_EQ(p.tp.shard_dim[static_cast<std::size_t>(pid(t, "l0.q_proj"))], 0);
  EXPECT_EQ(p.tp.shard_dim[static_cast<std::size_t>(pid(t, "l0.o_proj"))], 1);
  EXPECT_EQ(p.tp.local_numel[static_cast<std::size_t>(pid(t, "l0.v_proj"))], 32);
  EXPECT_EQ(p.tp.sharded.size(), 6u);
  // Loads per (slot, t): slot 0 holds l0.q, l1.q on t0 and l0.v on t1.
  EXPECT_EQ(p.tp.cost_loads, (std::vector<std::int64_t>{128, 64, 64, 128}));
}

TEST(TpOwners, OneDimensionalOffsetIsDpOwnerModT) {
  // One parameter per DP owner (G = 3, T = 2): each alone, so its TP owner is the offset
  // dp_owner mod 2: 0, 1, 0.
  const auto t = make_tree({{"a.q_proj", {4, 4}}, {"b.q_proj", {4, 4}}, {"c.q_proj", {4, 4}}});
  const auto p = plan::make_plan(t, config(3, 1, 2, "round_robin", "numel"));
  EXPECT_EQ(p.tp.tp_owner, (std::vector<int>{0, 1, 0}));
}

TEST(TpOwners, HsdpOffsetIsShardTimesRPlusReplicate) {
  // R = 2, G = 2, T = 2: slots shard-major (0,0) (0,1) (1,0) (1,1) with DP ranks r*G + s =
  // 0, 2, 1, 3. Round robin puts parameter i on slot i. Offsets (s*R + r) mod 2 = 0, 1, 0, 1;
  // (dp rank mod 2 would give 0, 0, 1, 1: the second and third parameters tell them apart.)
  const auto t = make_tree(
      {{"a.q_proj", {4, 4}}, {"b.q_proj", {4, 4}}, {"c.q_proj", {4, 4}}, {"d.q_proj", {4, 4}}});
  const auto p = plan::make_plan(t, config(2, 2, 2, "round_robin", "numel"));
  EXPECT_EQ(p.partition.owner_rank(pid(t, "b.q_proj")), 2);
  EXPECT_EQ(p.partition.owner_rank(pid(t, "c.q_proj")), 1);
  EXPECT_EQ(p.tp.tp_owner, (std::vector<int>{0, 1, 0, 1}));
  // World ranks dp * T + t: 0*2+0, 2*2+1, 1*2+0, 3*2+1.
  std::vector<int> world;
  for (int i = 0; i < 4; ++i) world.push_back(p.tp.owner_world_rank(p.partition, i));
  EXPECT_EQ(world, (std::vector<int>{0, 5, 2, 7}));
}

TEST(TpOwners, MixedCostsThreeWay) {
  // G = 1, T = 3, LPT with numel costs: visiting order q (48), then the 24s by name
  // (k < o < v), then gate (12). Offset 0.
  //   q -> t0 [48,0,0]; k -> t1 (0,0 tie; rotation 1 < 2) [48,24,0]; o -> t2 [48,24,24];
  //   v -> t1 (24,24 tie on cost and numel; rotation) [48,48,24]; gate -> t2 [48,48,36].
  const auto t = make_tree({{"q_proj", {12, 4}},
                            {"k_proj", {6, 4}},
                            {"v_proj", {6, 4}},
                            {"o_proj", {4, 6}},
                            {"gate_proj", {3, 4}}});
  const auto p = plan::make_plan(t, config(1, 1, 3, "lpt", "numel"));
  EXPECT_EQ(p.tp.visit_order, (std::vector<int>{0, 1, 3, 2, 4}));
  EXPECT_EQ(p.tp.tp_owner, (std::vector<int>{0, 1, 1, 2, 2}));
  EXPECT_EQ(p.tp.cost_loads, (std::vector<std::int64_t>{48, 48, 36}));
}

TEST(TpOwners, NumelBreaksCostTies) {
  // Optimizer costs: "embed" names are cheap (cost 1 each), so costs tie and numel decides.
  // G = 1, T = 2, --tp-shard contains:proj. LPT order: a (32), then b, c (16) by name.
  //   a -> t0 (c [1,0], n [32,0]); b -> t1 ([1,1], [32,16]); c: costs tie, numel 16 < 32 ->
  //   t1 (rotation alone would say t0).
  const auto t =
      make_tree({{"a_embed_proj", {8, 4}}, {"b_embed_proj", {4, 4}}, {"c_embed_proj", {4, 4}}});
  auto c = config(1, 1, 2, "lpt", "optimizer");
  c.tp_shard_rule = "contains:proj";
  const auto p = plan::make_plan(t, c);
  EXPECT_EQ(p.tp.tp_owner, (std::vector<int>{0, 1, 1}));
  EXPECT_EQ(p.tp.numel_loads, (std::vector<std::int64_t>{32, 32}));
}

TEST(TpOwners, NoShardedParameterIsAWarning) {
  // No name matches the default rule: a tp-unsharded warning; with T = 1 none.
  const auto t = make_tree({{"fc1", {4, 4}}, {"fc2", {4, 4}}});
  const auto p = plan::make_plan(t, config(1, 1, 2, "lpt", "numel"));
  EXPECT_TRUE(p.tp.sharded.empty());
  const auto count = [](const plan::Plan& q) {
    int n = 0;
    for (const auto& f : q.report.findings)
      n += f.kind == boundary::FindingKind::tp_unsharded &&
           f.severity == boundary::Severity::warning;
    return n;
  };
  EXPECT_EQ(count(p), 1);
  EXPECT_EQ(count(plan::make_plan(t, config(1, 1, 1, "lpt", "numel"))), 0);
}

TEST(TpOwners, ShardedParametersAreNeverPacked) {
  // Every parameter is under the pack threshold; with packing on, the two non-TP ones of the
  // root bucket form one unit while the TP-sharded ones stay single.
  const auto t =
      make_tree({{"q_proj", {4, 4}}, {"k_proj", {4, 4}}, {"router", {4, 4}}, {"gate", {4, 4}}});
  auto c = config(1, 1, 2, "lpt", "numel");
  c.partition.pack = true;
  const auto p = plan::make_plan(t, c);
  EXPECT_EQ(p.partition.units.size(), 3u);
  EXPECT_EQ(p.partition.packed_units, 1);
  EXPECT_EQ(p.tp.sharded, (std::vector<int>{0, 1}));
  // Without TP the four pack into one unit.
  const auto p1 = plan::make_plan(t, [&] {
    auto c1 = c;
    c1.tp = 1;
    return c1;
  }());
  EXPECT_EQ(p1.partition.units.size(), 1u);
  EXPECT_TRUE(p1.tp.sharded.empty());
}

void expect_input_error(const model::ModuleTree& t, const plan::PlanConfig& c,
                        const std::string& needle) {
  try {
    (void)plan::make_plan(t, c);
    FAIL() << "no InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(TpShard, BadShapesNameTheParameter) {
  // q_proj dim 0 = 6 is not divisible by 4; o_proj is row-parallel: dim 1 = 6.
  expect_input_error(make_tree({{"q_proj", {6, 8}}}), config(1, 1, 4, "lpt", "numel"),
                     "'q_proj.weight'");
  expect_input_error(make_tree({{"o_proj", {8, 6}}}), config(1, 1, 4, "lpt", "numel"),
                     "row-parallel dimension 1 (6)");
  // A rule that picks a 3-D parameter.
  model::ModuleTree t3("Model");
  t3.add_parameter(t3.add_module(0, "x_proj", "Conv"), "weight", {4, 4, 4});
  t3.finalize();
  auto c = config(1, 1, 2, "lpt", "numel");
  c.dedicate_rule = "all";
  c.tp_shard_rule = "contains:proj";
  expect_input_error(t3, c, "'x_proj.weight' has shape [4, 4, 4]");
  expect_input_error(make_tree({{"q_proj", {4, 4}}}), config(1, 1, 0, "lpt", "numel"),
                     "--tp 0 is invalid");
}

// DMuon's step with its TP exchange (engine/step/step_volume.hpp).
plan::TpCommVolume tp_volume(const model::ModuleTree& tree, const plan::Plan& p,
                             plan::Reshard reshard, int wire_bytes = 0) {
  engine::VolumeOptions o;
  o.reshard = reshard;
  o.wire_bytes = wire_bytes;
  return engine::predict_step_volume(tree, p, o).tp_exchange;
}

TEST(TpVolume, HandDerivedPerRank) {
  // kSix on 1-D G = 2, T = 2 (owners above). Local shard 32 fp32 = 128 bytes.
  // DP part per DP rank, Z3: P_M(local) = 6*128 = 768, each DP rank owns 3*128 = 384:
  //   broadcasts 2*384 + reduce 384 = 1152.
  // TP group of DP rank 0 = world {0, 1}: l0.q, l1.q on t0, l0.v on t1. World 0 sends l0.v's shard
  // in
  //   the gather (128) and receives l0.v's fp32 update chunk in the scatter (128); world 1 the
  //   same for l0.q and l1.q (256 + 256). DP rank 1 = world {2, 3}: l0.k, l1.o on t1, l0.o on t0:
  //   world 2 256 + 256, world 3 128 + 128.
  const auto t = make_tree(kSix);
  const auto p = plan::make_plan(t, config(2, 1, 2, "round_robin", "numel"));
  const auto v = tp_volume(t, p, plan::Reshard::z3);
  ASSERT_EQ(v.world, 4);
  EXPECT_EQ(v.dp.total_bytes(0), 1152);
  EXPECT_EQ(v.dp.total_bytes(1), 1152);
  EXPECT_EQ(v.gather.bytes_per_rank, (std::vector<std::int64_t>{128, 256, 256, 128}));
  EXPECT_EQ(v.scatter.bytes_per_rank, (std::vector<std::int64_t>{128, 256, 256, 128}));
  EXPECT_EQ(v.gather_received, (std::vector<std::int64_t>{256, 128, 128, 256}));
  EXPECT_EQ(v.scatter_sent, (std::vector<std::int64_t>{256, 128, 128, 256}));
  EXPECT_EQ(v.gather.calls_per_rank, (std::vector<std::int64_t>{3, 3, 3, 3}));
  EXPECT_EQ(v.total_bytes(0), 1408);
  EXPECT_EQ(v.total_bytes(1), 1664);
  EXPECT_EQ(v.max_bytes_per_rank(), 1664);
  // Per TP-sharded parameter the group moves (T-1)/T*|p| in each: 6 params * 128 = 768.
  std::int64_t gather_sum = 0;
  for (auto b : v.gather.bytes_per_rank) gather_sum += b;
  EXPECT_EQ(gather_sum, 6 * 64 * 4 / 2);
  // bf16 on the wire: gradients (and so the gather) halve, the fp32 scatter does not.
  const auto b16 = tp_volume(t, p, plan::Reshard::z3, 2);
  EXPECT_EQ(b16.gather.bytes_per_rank, (std::vector<std::int64_t>{64, 128, 128, 64}));
  EXPECT_EQ(b16.scatter.bytes_per_rank, (std::vector<std::int64_t>{128, 256, 256, 128}));
  // Z2: one broadcast instead of two: 384 + 384 = 768 DP bytes.
  EXPECT_EQ(tp_volume(t, p, plan::Reshard::z2).total_bytes(0), 768 + 256);
}

TEST(TpBlocks, AssembleAndSplitByHand) {
  // Row-parallel (dim 1), logical 2 x 4, T = 2: shard 0 = [a b; c d] (columns 0-1), shard 1 =
  // [e f; g h] (columns 2-3), as a gather lays them out: a b c d e f g h. The logical matrix
  // row-major is a b e f / c d g h.
  const std::vector<float> shards = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<float> full(8), back(8);
  kernels::host::tp_assemble(shards.data(), full.data(), 2, 4, 1, 2);
  EXPECT_EQ(full, (std::vector<float>{1, 2, 5, 6, 3, 4, 7, 8}));
  kernels::host::tp_split(full.data(), back.data(), 2, 4, 1, 2);
  EXPECT_EQ(back, shards);
  // Column-parallel (dim 0), logical 4 x 2: shards are row blocks, already in order.
  kernels::host::tp_assemble(shards.data(), full.data(), 4, 2, 0, 2);
  EXPECT_EQ(full, shards);
  // T = 4 row-parallel, logical 1 x 4: one column per shard, in shard order.
  kernels::host::tp_assemble(shards.data(), full.data(), 1, 4, 1, 4);
  EXPECT_EQ(std::vector<float>(full.begin(), full.begin() + 4), (std::vector<float>{1, 2, 3, 4}));
}

TEST(TpLocalTree, ReshapeKeepsNamesAndNeverGrows) {
  auto t = make_tree({{"l0.q_proj", {8, 4}}, {"l0.o_proj", {4, 8}}});
  t.reshape_parameter(0, {4, 4});  // a column-parallel shard of T = 2
  t.reshape_parameter(1, {4, 4});  // a row-parallel one
  EXPECT_EQ(t.parameter(0).numel(), 16);
  EXPECT_EQ(t.parameter(1).name, "l0.o_proj.weight");
  EXPECT_EQ(*t.find_parameter("l0.q_proj.weight"), 0);
  EXPECT_THROW(t.reshape_parameter(0, {8, 4}), InputError);  // grows
  EXPECT_THROW(t.reshape_parameter(0, {16}), InputError);    // other rank
  EXPECT_THROW(t.reshape_parameter(0, {-4, -4}), InputError);
}

TEST(TpLayouts, NamedLayoutsMultiplyOut) {
  for (const auto& l : plan::tp_layouts())
    EXPECT_EQ(l.world, l.replicate * l.shard * l.tp) << l.name;
  EXPECT_EQ(plan::find_tp_layout("hsdp_tp2").tp, 2);
  EXPECT_EQ(plan::find_tp_layout("dp_tp8").world, 16);
  EXPECT_THROW(plan::find_tp_layout("tp3"), InputError);
}

}  // namespace
