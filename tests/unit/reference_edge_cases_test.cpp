// Issue 11 item 1, "exact edge cases": where differential testing against the reference's own
// boundary and partition code found disagreements. Each test builds its case by hand and
// states the expectation derived by hand from SPEC §3/§5/§6 (the derivation is in the
// comments), never from this code's output.

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dmuon/base/error.hpp"
#include "dmuon/boundary/dedication.hpp"
#include "dmuon/boundary/hook_plan.hpp"
#include "dmuon/engine/step/step_volume.hpp"
#include "dmuon/model/module_tree.hpp"
#include "dmuon/partition/partition.hpp"
#include "dmuon/plan/comm_volume.hpp"
#include "dmuon/plan/plan.hpp"
#include "input_error_message.hpp"

namespace {

using namespace dmuon;
using boundary::BoundaryPolicy;
using partition::CostModel;
using partition::PartitionOptions;
using partition::Strategy;

constexpr std::int64_t k2(int e) {
  return std::int64_t{1} << e;
}

using test::input_error_message;

plan::PlanConfig config(const char* boundary, int shard, Strategy strategy = Strategy::lpt) {
  plan::PlanConfig c;
  c.dedicate_rule = "all";
  c.boundary = boundary;
  c.partition.shard = shard;
  c.partition.strategy = strategy;
  return c;
}

// ---- a zero-size dedicated parameter ----------------------------------------------------
// layers.0.a.weight and layers.0.b.weight, both [0, 4]: numel 0, one bucket ("layers.0").
// The owner-based volume of one step (engine/step/step_volume.hpp), dmuon on plan `p`.
plan::CommVolume dmuon_volume(const model::ModuleTree& tree, const plan::Plan& p,
                              plan::Reshard reshard) {
  engine::VolumeOptions o;
  o.reshard = reshard;
  return engine::predict_step_volume(tree, p, o).owners;
}

model::ModuleTree zero_size_tree() {
  model::ModuleTree tree("M");
  const int l0 = tree.add_module(tree.add_module(0, "layers", "ModuleList"), "0", "L");
  tree.add_linear(l0, "a", 4, 0);  // weight (out=0, in=4)
  tree.add_linear(l0, "b", 4, 0);
  tree.finalize();
  return tree;
}

TEST(ZeroSize, CostModelsClampOnlyInTheOptimizerModel) {
  // optimizer: numel = max(1, 0) = 1; rows 0, cols 4: small = max(1, min(0, 4)) = 1, big = 4,
  // ns = 5 * 1 * (0 * 4 + 2 * 4 * 1) = 40 -> max(1, 40 div 1e9) = 1; numel term max(1, 1 div
  // 4e6) = 1: cost 2. numel model: prod(shape) = 0, unclamped.
  EXPECT_EQ(partition::optimizer_cost("layers.0.a.weight", {0, 4}), 2);
  EXPECT_EQ(partition::parameter_cost(CostModel::numel, "layers.0.a.weight", {0, 4}), 0);
  EXPECT_EQ(partition::clamped_numel({0, 4}), 1);
}

TEST(ZeroSize, PackedUnderAOneElementThresholdWithZeroNumelLoads) {
  const auto tree = zero_size_tree();
  PartitionOptions o;
  o.shard = 2;
  o.pack_threshold = 1;  // numel 0 < 1: both are small, so they pack into one unit
  auto p = partition::partition_ownership(tree, {0, 1}, o);
  ASSERT_EQ(p.units.size(), 1u);
  EXPECT_EQ(p.units[0].members, (std::vector<int>{0, 1}));
  EXPECT_EQ(p.units[0].numel, 0);
  EXPECT_EQ(p.units[0].cost, 4);  // 2 + 2 (optimizer model)
  EXPECT_EQ(p.numel_loads, (std::vector<std::int64_t>{0, 0}));
  EXPECT_EQ(p.cost_loads, (std::vector<std::int64_t>{4, 0}));  // the one unit on slot 0

  o.cost_model = CostModel::numel;
  p = partition::partition_ownership(tree, {0, 1}, o);
  ASSERT_EQ(p.units.size(), 1u);
  EXPECT_EQ(p.units[0].cost, 0);
  EXPECT_EQ(p.numel_loads, (std::vector<std::int64_t>{0, 0}));
  EXPECT_EQ(p.cost_loads, (std::vector<std::int64_t>{0, 0}));
  EXPECT_EQ(p.total_cost, 0);
}

// ---- one Parameter registered twice under one module ------------------------------------
// layers.0.fc holds one [4, 4] parameter as `weight` and as `alias`: one parent, not tied.
TEST(Alias, SameModuleTwiceIsNotTiedAndTakesTheBoundaryRule) {
  model::ModuleTree tree("M");
  const int l0 = tree.add_module(tree.add_module(0, "layers", "ModuleList"), "0", "L");
  const int fc = tree.add_module(l0, "fc", "Linear");
  const int w = tree.add_parameter(fc, "weight", {4, 4});
  tree.tie_parameter(fc, "alias", w);
  tree.finalize();
  EXPECT_FALSE(tree.parameter(w).tied());
  EXPECT_TRUE(tree.parameter(w).aliased());
  EXPECT_EQ(tree.parameter(w).name, "layers.0.fc.weight");
  // Default heuristic on the parent "layers.0.fc": layer key -> site layers.0. (Treated as
  // tied, the lowest common ancestor of fc and fc would be fc itself.)
  for (bool z3 : {true, false}) {
    boundary::HookPlanOptions ho;
    ho.reshard_after_forward = z3;
    auto hp = boundary::resolve_hook_plan(tree, {w}, BoundaryPolicy::parse("default"), ho);
    ASSERT_EQ(hp.sites.size(), 1u);
    EXPECT_EQ(hp.sites[0].path, "layers.0");
    EXPECT_EQ(hp.reason[w], boundary::SiteReason::layer_key);
  }
}

// ---- round_robin honours max_owners_per_group -------------------------------------------
// Six unpacked units in model order: four of key layers.0 (u0..u3), two of layers.1 (u4, u5),
// on G = 4 slots, at most 2 owners per key.
TEST(RoundRobin, HonoursMaxOwnersPerGroup) {
  model::ModuleTree tree("M");
  const int list = tree.add_module(0, "layers", "ModuleList");
  const int l0 = tree.add_module(list, "0", "L");
  const int l1 = tree.add_module(list, "1", "L");
  for (const char* n : {"a", "b", "c", "d"}) tree.add_linear(l0, n, 8, 8);
  for (const char* n : {"a", "b"}) tree.add_linear(l1, n, 8, 8);
  tree.finalize();
  PartitionOptions o;
  o.shard = 4;
  o.pack = false;
  o.strategy = Strategy::round_robin;
  const std::vector<int> all{0, 1, 2, 3, 4, 5};
  // Unlimited: slot = counter mod 4.
  EXPECT_EQ(partition::partition_ownership(tree, all, o).unit_slot,
            (std::vector<int>{0, 1, 2, 3, 0, 1}));
  // Limit 2: u0 -> 0, u1 -> 1 (layers.0 now uses {0, 1}); u2, u3 are restricted to those
  // slots, at index counter mod 2 of the first-use list: u2 -> [0, 1][0] = 0, u3 -> [0, 1][1]
  // = 1; layers.1 is fresh: u4 -> 4 mod 4 = 0, u5 -> 5 mod 4 = 1.
  o.max_owners_per_group = 2;
  auto p = partition::partition_ownership(tree, all, o);
  EXPECT_EQ(p.unit_slot, (std::vector<int>{0, 1, 0, 1, 0, 1}));
  // Limit 1: every unit on its key's first slot.
  o.max_owners_per_group = 1;
  EXPECT_EQ(partition::partition_ownership(tree, all, o).unit_slot,
            (std::vector<int>{0, 0, 0, 0, 0, 0}));
}

// A key whose slots wrap around: the restricted candidates are the key's slots in slot order
// (the reference indexes sorted(used_slots)), not in the order the key first used them.
TEST(RoundRobin, CappedKeyCyclesItsSlotsInSlotOrder) {
  model::ModuleTree tree("M");
  const int list = tree.add_module(0, "layers", "ModuleList");
  const int l0 = tree.add_module(list, "0", "L");
  const int l1 = tree.add_module(list, "1", "L");
  for (const char* n : {"a", "b"}) tree.add_linear(l0, n, 8, 8);
  for (const char* n : {"a", "b", "c"}) tree.add_linear(l1, n, 8, 8);
  tree.finalize();
  PartitionOptions o;
  o.shard = 3;
  o.pack = false;
  o.strategy = Strategy::round_robin;
  o.max_owners_per_group = 2;
  // layers.0: u0 -> 0, u1 -> 1. layers.1: u2 -> 2 mod 3 = 2, u3 -> 3 mod 3 = 0, so it uses
  // {0, 2}; u4 is restricted: sorted [0, 2][4 mod 2] = 0 (first-use order [2, 0] would give 2).
  EXPECT_EQ(partition::partition_ownership(tree, {0, 1, 2, 3, 4}, o).unit_slot,
            (std::vector<int>{0, 1, 2, 0, 0}));
}

// ---- a top-level module literally named `_root` ----------------------------------------
// _root.layers.0.fc.weight and layers.0.fc.weight: both layer keys are the string
// "_root.layers.0", but the modules are _root.layers.0 and layers.0.
TEST(RootName, IsAnOrdinaryNameAndPathsAreNeverStripped) {
  model::ModuleTree tree("M");
  const int r = tree.add_module(0, "_root", "Wrapper");
  tree.add_linear(tree.add_module(tree.add_module(r, "layers", "ModuleList"), "0", "L"), "fc", 4,
                  4);
  tree.add_linear(tree.add_module(tree.add_module(0, "layers", "ModuleList"), "0", "L"), "fc", 4,
                  4);
  tree.finalize();
  auto hp = boundary::resolve_hook_plan(tree, {0, 1}, BoundaryPolicy::parse("default"));
  ASSERT_EQ(hp.sites.size(), 2u);  // pre-order: _root's subtree was registered first
  EXPECT_EQ(hp.sites[0].path, "_root.layers.0");
  EXPECT_EQ(hp.sites[1].path, "layers.0");
  EXPECT_EQ(hp.reason[0], boundary::SiteReason::layer_key);

  // Alone, _root.layers.0.fc's site is still _root.layers.0 (not a missing "layers.0" with a
  // fallback to the parent).
  model::ModuleTree only("M");
  const int r2 = only.add_module(0, "_root", "Wrapper");
  only.add_linear(only.add_module(only.add_module(r2, "layers", "ModuleList"), "0", "L"), "fc", 4,
                  4);
  only.finalize();
  auto hp2 = boundary::resolve_hook_plan(only, {0}, BoundaryPolicy::parse("default"));
  ASSERT_EQ(hp2.sites.size(), 1u);
  EXPECT_EQ(hp2.sites[0].path, "_root.layers.0");

  // Partition buckets are the reference's key strings: equal strings, one bucket, so the two
  // small parameters pack into one unit.
  PartitionOptions o;
  o.shard = 2;
  EXPECT_EQ(partition::partition_ownership(tree, {0, 1}, o).units.size(), 1u);
}

// ---- the strict-mode error names the first uncovered parameter in visiting order --------
// a.weight [2, 2] then b.weight [64, 64], both at the root's children, neither covered by
// paths:zzz. Costs: a: ns = 5*2*(4 + 8) = 120 -> 1, numel 4 -> 1: 2; b: ns = 5*64*(4096 +
// 8192) = 3,932,160 -> 1, numel 4096 -> 1: 2. Unpacked LPT sorts by (-cost, -numel): b first.
TEST(StrictError, NamesTheFirstUncoveredParameterInVisitingOrder) {
  model::ModuleTree tree("M");
  tree.add_linear(0, "a", 2, 2);
  tree.add_linear(0, "b", 64, 64);
  tree.finalize();
  auto lpt = config("paths:zzz", 2);
  lpt.partition.pack = false;
  EXPECT_NE(input_error_message([&] { plan::make_plan(tree, lpt); }).find("parameter 'b.weight'"),
            std::string::npos);
  // round_robin visits units in model order: a first.
  auto rr = config("paths:zzz", 2, Strategy::round_robin);
  rr.partition.pack = false;
  EXPECT_NE(input_error_message([&] { plan::make_plan(tree, rr); }).find("parameter 'a.weight'"),
            std::string::npos);
  // Packed (both in the "none" bucket, one unit), members are visited in model order: a.
  auto packed = config("paths:zzz", 2);
  EXPECT_NE(
      input_error_message([&] { plan::make_plan(tree, packed); }).find("parameter 'a.weight'"),
      std::string::npos);
}

// ---- Z2: a parameter shared by several modules takes the boundary rule -----------------
// layers.0.a.weight is tied into layers.1.a; layers.0.b.weight is its neighbour. Both [4, 4]
// fp32 (64 bytes), one bucket "layers.0", packed into one unit owned by rank 0 of 2.
model::ModuleTree tied_tree() {
  model::ModuleTree tree("M");
  const int list = tree.add_module(0, "layers", "ModuleList");
  const int l0 = tree.add_module(list, "0", "L");
  const int a0 = tree.add_linear(l0, "a", 4, 4);
  tree.add_linear(l0, "b", 4, 4);
  const int a1 = tree.add_module(tree.add_module(list, "1", "L"), "a", "Linear");
  tree.tie_parameter(a1, "weight", tree.module(a0).params.front());
  tree.finalize();
  return tree;
}

TEST(Z2Tied, TakesTheBoundaryRuleNotTheLowestCommonAncestor) {
  const auto tree = tied_tree();
  ASSERT_TRUE(tree.parameter(0).tied());
  auto c = config("default", 2);
  // Z3: the tied parameter's site is the lowest common ancestor of layers.0.a and layers.1.a,
  // "layers"; b's is layers.0. Two sites.
  const auto p3 = plan::make_plan(tree, c);
  ASSERT_EQ(p3.hooks.sites.size(), 2u);
  EXPECT_EQ(p3.hooks.sites[0].path, "layers");
  EXPECT_EQ(p3.hooks.reason[0], boundary::SiteReason::tied);
  EXPECT_EQ(p3.hooks.sites[1].path, "layers.0");
  // Z2: the canonical holder layers.0.a takes the default heuristic: layers.0, with b.
  c.reshard = plan::Reshard::z2;
  const auto p2 = plan::make_plan(tree, c);
  ASSERT_EQ(p2.hooks.sites.size(), 1u);
  EXPECT_EQ(p2.hooks.sites[0].path, "layers.0");
  EXPECT_EQ(p2.hooks.reason[0], boundary::SiteReason::layer_key);
  EXPECT_EQ(p2.partition.unit_slot, (std::vector<int>{0}));

  // Z2 on its own sites: one (site, owner) pair -> 1 broadcast per step; rank 1 receives the
  // 128 bytes once and sends 128 bytes of gradients; 4 hooks fire at the site, 2 communicate.
  const auto v2 = dmuon_volume(tree, p2, plan::Reshard::z2);
  EXPECT_EQ(v2.broadcast.calls_per_rank, (std::vector<std::int64_t>{1, 1}));
  EXPECT_EQ(v2.broadcast.bytes_per_rank, (std::vector<std::int64_t>{0, 128}));
  EXPECT_EQ(v2.reduce.bytes_per_rank, (std::vector<std::int64_t>{0, 128}));
  EXPECT_EQ(v2.hooks_fired, 4);
  EXPECT_EQ(v2.hooks_communicating, 2);
  // Z3 on its sites: two pairs, each broadcast twice -> 4; 2 sites x 4 hooks fire, x 3
  // communicate.
  const auto v3 = dmuon_volume(tree, p3, plan::Reshard::z3);
  EXPECT_EQ(v3.broadcast.calls_per_rank, (std::vector<std::int64_t>{4, 4}));
  EXPECT_EQ(v3.broadcast.bytes_per_rank, (std::vector<std::int64_t>{0, 256}));
  EXPECT_EQ(v3.hooks_fired, 8);
  EXPECT_EQ(v3.hooks_communicating, 6);
}

// ---- strict mode: a parameter tied across modules, first named at the root -------------
// Z3 takes the tied rule before any predicate (SPEC §3 rule 1): the site is the lowest common
// ancestor of the holders, here the root, and strict mode raises nothing even though no
// ancestor matches the predicate. Z2 applies the predicate to the canonical holder, which
// matches nowhere: strict raises, as the reference does.
TEST(StrictTied, RootHeldTiedParameterTakesTheRootInZ3AndFailsInZ2) {
  // The root holds `emb` [8, 8], tied into layers.0.fc.weight; boundary types:ModuleList.
  model::ModuleTree a("M");
  const int fc =
      a.add_module(a.add_module(a.add_module(0, "layers", "ModuleList"), "0", "L"), "fc", "Linear");
  a.tie_parameter(fc, "weight", a.add_parameter(model::ModuleTree::root, "emb", {8, 8}));
  a.finalize();
  ASSERT_TRUE(a.parameter(0).tied());
  EXPECT_EQ(a.parameter(0).name, "emb");
  auto c = config("types:ModuleList", 2);
  const auto p3 = plan::make_plan(a, c);
  ASSERT_EQ(p3.hooks.sites.size(), 1u);
  EXPECT_EQ(p3.hooks.sites[0].path, "");
  EXPECT_EQ(p3.hooks.reason[0], boundary::SiteReason::tied);
  c.reshard = plan::Reshard::z2;
  EXPECT_NE(input_error_message([&] { plan::make_plan(a, c); }).find("no ancestor matched"),
            std::string::npos);

  // model.embed_tokens.weight [16, 8] tied to the root-level lm_head, and a block weight;
  // boundary types:Block. Z3: the tied weight's site is the root (holders model.embed_tokens
  // and lm_head share no prefix), the block's is model.layers.0.
  model::ModuleTree b("M");
  const int inner = b.add_module(0, "model", "Inner");
  const int emb = b.add_module(inner, "embed_tokens", "Embedding");
  const int w = b.add_parameter(emb, "weight", {16, 8});
  b.add_linear(b.add_module(b.add_module(inner, "layers", "ModuleList"), "0", "Block"), "fc", 8, 8);
  b.tie_parameter(b.add_module(0, "lm_head", "Linear"), "weight", w);
  b.finalize();
  auto cb = config("types:Block", 2);
  const auto pb = plan::make_plan(b, cb);
  ASSERT_EQ(pb.hooks.sites.size(), 2u);
  EXPECT_EQ(pb.hooks.sites[0].path, "");
  EXPECT_EQ(pb.hooks.sites[1].path, "model.layers.0");
  cb.reshard = plan::Reshard::z2;
  EXPECT_NE(
      input_error_message([&] { plan::make_plan(b, cb); }).find("'model.embed_tokens.weight'"),
      std::string::npos);
}

// ---- checked 64-bit arithmetic -------------------------------------------------------------
TEST(Overflow, ShapeProductIsBadInputNamingTheParameter) {
  model::ModuleTree tree("M");
  const int m = tree.add_module(0, "big", "Linear");
  // 2^32 x 2^32 = 2^64 elements: the product itself overflows.
  EXPECT_NE(input_error_message([&] {
              tree.add_parameter(m, "weight", {k2(32), k2(32)});
            }).find("parameter 'big.weight' shape [4294967296, 4294967296]"),
            std::string::npos);
  // 2^31 x 2^31 = 2^62 elements fit, but not at 4 bytes each.
  EXPECT_NE(input_error_message([&] {
              tree.add_parameter(m, "w2", {k2(31), k2(31)});
            }).find("parameter 'big.w2'"),
            std::string::npos);
  // Two 2^60-element parameters: 4 * 2^61 bytes overflow the model's total at the second.
  model::ModuleTree two("M");
  two.add_parameter(two.add_module(0, "a", "Linear"), "weight", {k2(30), k2(30)});
  two.add_parameter(two.add_module(0, "b", "Linear"), "weight", {k2(30), k2(30)});
  EXPECT_NE(input_error_message([&] { two.finalize(); }).find("at parameter 'b.weight'"),
            std::string::npos);
}

TEST(Overflow, CostsAreCheckedNeverNegative) {
  // [2^30, 2^30]: ns = 5 * 2^30 * (2^60 + 2 * 2^60) = 15 * 2^90 ~ 1.86e28, div 1e9 ~ 1.86e19 >
  // 2^63 - 1: the cost itself overflows.
  EXPECT_NE(input_error_message([] {
              partition::optimizer_cost("x.weight", {k2(30), k2(30)});
            }).find("parameter 'x.weight' shape [1073741824, 1073741824]"),
            std::string::npos);
  // Two [2^29, 2^30]: each 15 * 2^88 div 1e9 + 2^59 div 4e6 = 4642275147320176030 +
  // 144115188075 = 4642275291435364105; the sum 9284550582870728210 > 2^63 - 1.
  model::ModuleTree tree("M");
  tree.add_parameter(tree.add_module(0, "a", "Linear"), "weight", {k2(29), k2(30)});
  tree.add_parameter(tree.add_module(0, "b", "Linear"), "weight", {k2(29), k2(30)});
  tree.finalize();
  EXPECT_EQ(partition::optimizer_cost("a.weight", {k2(29), k2(30)}), 4642275291435364105);
  PartitionOptions o;
  o.shard = 2;
  EXPECT_NE(input_error_message([&] {
              partition::partition_ownership(tree, {0, 1}, o);
            }).find("overflows 64 bits at parameter 'b.weight'"),
            std::string::npos);
  // The numel model sums 2^60: fine, and no load is negative.
  o.cost_model = CostModel::numel;
  const auto p = partition::partition_ownership(tree, {0, 1}, o);
  EXPECT_EQ(p.numel_loads, (std::vector<std::int64_t>{k2(59), k2(59)}));
}

TEST(Overflow, PredictedVolumeIsChecked) {
  // Two [2^29, 2^30] fp32 parameters on rank 0 of 2: P_M = 2 * 2^61 = 2^62 bytes. Rank 1's Z3
  // broadcasts are 2 * 2^62 = 2^63: overflow. Z2: 2^62 broadcast + 2^62 reduce = 2^63 in all.
  model::ModuleTree tree("M");
  const int list = tree.add_module(0, "layers", "ModuleList");
  tree.add_parameter(tree.add_module(list, "0", "L"), "w", {k2(29), k2(30)});
  tree.add_parameter(tree.add_module(list, "1", "L"), "w", {k2(29), k2(30)});
  tree.finalize();
  auto c = config("default", 2, Strategy::rank0);
  c.partition.cost_model = CostModel::numel;
  const auto p = plan::make_plan(tree, c);
  EXPECT_NE(input_error_message([&] { dmuon_volume(tree, p, plan::Reshard::z3); }).find("rank 1"),
            std::string::npos);
  EXPECT_NE(input_error_message([&] { dmuon_volume(tree, p, plan::Reshard::z2); }).find("rank 1"),
            std::string::npos);
}

// ---- the hook-count convention -------------------------------------------------------------
// Three sites (layers.{0,1,2}): every site installs 4 hooks that fire in Z3 and Z2 alike; Z3's
// forward-pre, backward-pre and backward-post communicate (3), Z2's forward-pre and
// backward-post (2).
TEST(HookCounts, FiredAndCommunicatingReportedSeparately) {
  model::ModuleTree tree("M");
  const int list = tree.add_module(0, "layers", "ModuleList");
  for (int i = 0; i < 3; ++i)
    tree.add_linear(tree.add_module(list, std::to_string(i), "L"), "fc", 4, 4);
  tree.finalize();
  const auto p = plan::make_plan(tree, config("default", 2));
  ASSERT_EQ(p.hooks.sites.size(), 3u);
  const auto z3 = dmuon_volume(tree, p, plan::Reshard::z3);
  const auto z2 = dmuon_volume(tree, p, plan::Reshard::z2);
  EXPECT_EQ(z3.hooks_fired, 12);
  EXPECT_EQ(z3.hooks_communicating, 9);
  EXPECT_EQ(z2.hooks_fired, 12);
  EXPECT_EQ(z2.hooks_communicating, 6);
}

}  // namespace
