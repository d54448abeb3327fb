// Ownership partition (SPEC §5) against the SPEC's vectors, hand-computed cases and a
// brute-force optimum.

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>

#include "dmuon/base/error.hpp"
#include "dmuon/boundary/dedication.hpp"
#include "dmuon/model/topology.hpp"
#include "dmuon/partition/partition.hpp"

namespace {

using namespace dmuon;
using namespace dmuon::partition;

TEST(CostModel, SpecVectors) {
  EXPECT_EQ(optimizer_cost("w", {512, 512}), 3);
  EXPECT_EQ(optimizer_cost("w", {2048, 512}), 9);
  EXPECT_EQ(optimizer_cost("w", {1024, 1024}), 17);
  EXPECT_EQ(optimizer_cost("w", {8192, 1024}), 130);
  EXPECT_EQ(optimizer_cost("w", {4096, 4096}), 1034);
  EXPECT_EQ(optimizer_cost("model.embed_tokens.weight", {65536, 1024}), 67);
}

TEST(CostModel, CheapParametersAndEdgeCases) {
  EXPECT_EQ(optimizer_cost("x.weight", {4096}), 1);                   // ndim < 2
  EXPECT_EQ(optimizer_cost("x.LayerNorm.weight", {4096, 4096}), 16);  // lower-cased "norm"
  EXPECT_EQ(optimizer_cost("lm_head.weight", {152064, 3584}), 544);   // 544997376 div 1e6
  EXPECT_EQ(optimizer_cost("a.ln_f", {2048, 2048}), 4);
  EXPECT_EQ(optimizer_cost("rotary.inv", {64, 64}), 1);
  // 3-D: rows = shape[0], cols = prod(rest).
  EXPECT_EQ(optimizer_cost("w", {8192, 32, 32}), optimizer_cost("w", {8192, 1024}));
  EXPECT_EQ(optimizer_cost("w", {0, 7}), 1 + 1);  // numel 0 clamps to 1; NS term clamps to 1
  EXPECT_EQ(parameter_cost(CostModel::numel, "w", {3, 5}), 15);
  EXPECT_THROW(parse_cost_model("flops"), InputError);
}

std::vector<int> dedicated(const model::Topology& t) {
  return boundary::select_dedicated(t.tree, boundary::DedicationRule::parse(t.dedicate_rule));
}

TEST(Lpt, SpecLlmMiniVector) {
  auto t = model::build_topology("llm", "mini");
  PartitionOptions o;
  o.shard = 8;
  auto p = partition_ownership(t.tree, dedicated(t), o);
  EXPECT_EQ(p.units.size(), 16u);
  EXPECT_EQ(p.packed_units, 4);  // q, k, v, o of each layer merge
  auto loads = p.numel_loads;
  std::sort(loads.begin(), loads.end());
  const std::vector<std::int64_t> expect{11010048, 11010048, 11010048, 11010048,
                                         16777216, 16777216, 16777216, 16777216};
  EXPECT_EQ(loads, expect);
  // Derived by hand from the SPEC §5 rules: the twelve cost-130 units tie on cost, numel and
  // key, so member names order them (down < gate < up); each goes to the cheapest slot its
  // layer does not use yet, earliest first. Then the packed attention units (cost 38).
  auto owner = [&](const char* n) { return p.owner_rank(*t.tree.find_parameter(n)); };
  EXPECT_EQ(owner("model.layers.0.mlp.down_proj.weight"), 0);
  EXPECT_EQ(owner("model.layers.0.mlp.gate_proj.weight"), 1);
  EXPECT_EQ(owner("model.layers.0.mlp.up_proj.weight"), 2);
  EXPECT_EQ(owner("model.layers.2.mlp.up_proj.weight"), 0);  // all at 130: first slot layer 2 lacks
  EXPECT_EQ(owner("model.layers.3.mlp.down_proj.weight"), 1);
  EXPECT_EQ(owner("model.layers.0.self_attn.q_proj.weight"), 4);
  EXPECT_EQ(owner("model.layers.1.self_attn.k_proj.weight"), 6);
  EXPECT_EQ(owner("model.layers.2.self_attn.v_proj.weight"), 5);
  EXPECT_EQ(owner("model.layers.3.self_attn.o_proj.weight"), 7);
}

model::ModuleTree two_param_tree() {
  model::ModuleTree tree("M");
  tree.add_parameter(tree.add_module(0, "embed_tokens", "Embedding"), "weight", {65536, 1024});
  tree.add_parameter(tree.add_module(0, "proj", "Linear"), "weight", {4096, 4096});
  tree.finalize();
  return tree;
}

TEST(Lpt, SpecCostModelAblation) {
  auto tree = two_param_tree();
  const std::vector<int> all{0, 1};
  PartitionOptions o;
  o.shard = 2;
  auto opt = partition_ownership(tree, all, o);
  EXPECT_EQ(opt.owner_rank(1), 0);  // proj
  EXPECT_EQ(opt.owner_rank(0), 1);  // embed
  o.cost_model = CostModel::numel;
  auto num = partition_ownership(tree, all, o);
  EXPECT_EQ(num.owner_rank(0), 0);
  EXPECT_EQ(num.owner_rank(1), 1);
}

// A flat model of independent parameters layers.i.w (one key each, so the same-key rule
// never interferes) with the given numel; cost model numel makes costs exact integers.
model::ModuleTree flat_tree(const std::vector<std::int64_t>& sizes) {
  model::ModuleTree tree("M");
  const int list = tree.add_module(0, "layers", "ModuleList");
  for (std::size_t i = 0; i < sizes.size(); ++i)
    tree.add_parameter(tree.add_module(list, std::to_string(i), "L"), "w", {sizes[i]});
  tree.finalize();
  return tree;
}

std::vector<int> iota_ids(std::size_t n) {
  std::vector<int> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<int>(i);
  return v;
}

std::int64_t brute_force_makespan(const std::vector<std::int64_t>& jobs, int m) {
  std::vector<std::int64_t> load(m, 0);
  std::int64_t best = std::numeric_limits<std::int64_t>::max();
  std::function<void(std::size_t)> go = [&](std::size_t i) {
    if (i == jobs.size()) {
      best = std::min(best, *std::max_element(load.begin(), load.end()));
      return;
    }
    for (int s = 0; s < m; ++s) {
      load[s] += jobs[i];
      if (load[s] < best) go(i + 1);
      load[s] -= jobs[i];
      if (load[s] == 0) break;  // empty slots are interchangeable
    }
  };
  go(0);
  return best;
}

TEST(Lpt, WithinGrahamBoundOfBruteForceOptimum) {
  std::mt19937_64 rng(12345);
  for (int trial = 0; trial < 200; ++trial) {
    const int m = 2 + trial % 3;
    const std::size_t n = 3 + static_cast<std::size_t>(trial % 6);
    std::vector<std::int64_t> jobs(n);
    for (auto& j : jobs) j = 1 + static_cast<std::int64_t>(rng() % 100);
    auto tree = flat_tree(jobs);
    PartitionOptions o;
    o.shard = m;
    o.cost_model = CostModel::numel;
    o.pack = false;
    const auto p = partition_ownership(tree, iota_ids(n), o);
    const std::int64_t opt = brute_force_makespan(jobs, m);
    EXPECT_LE(static_cast<double>(p.makespan), (4.0 / 3.0 - 1.0 / (3.0 * m)) * opt + 1e-9);
    EXPECT_GE(static_cast<double>(opt), p.lower_bound - 1e-9);
    o.strategy = Strategy::lpt_refine;
    const auto r = partition_ownership(tree, iota_ids(n), o);
    EXPECT_LE(r.makespan, p.makespan);
    EXPECT_GE(r.makespan, opt);
  }
}

TEST(Lpt, RefineFindsTheOptimumLptMisses) {
  // The classic LPT worst case for m = 2: {3, 3, 2, 2, 2}: LPT gives 7, the optimum is 6.
  auto tree = flat_tree({3, 3, 2, 2, 2});
  PartitionOptions o;
  o.shard = 2;
  o.cost_model = CostModel::numel;
  o.pack = false;
  EXPECT_EQ(partition_ownership(tree, iota_ids(5), o).makespan, 7);
  o.strategy = Strategy::lpt_refine;
  EXPECT_EQ(partition_ownership(tree, iota_ids(5), o).makespan, 6);
}

TEST(Lpt, SameKeySpreadingIsASoftPreference) {
  // One key, three equal units, two slots: the third unit must share a slot.
  model::ModuleTree tree("M");
  const int layer = tree.add_module(tree.add_module(0, "layers", "ModuleList"), "0", "L");
  for (const char* n : {"a", "b", "c"})
    tree.add_parameter(tree.add_module(layer, n, "Linear"), "weight", {10});
  tree.finalize();
  PartitionOptions o;
  o.shard = 2;
  o.cost_model = CostModel::numel;
  o.pack = false;
  auto p = partition_ownership(tree, {0, 1, 2}, o);
  EXPECT_EQ(p.unit_slot, (std::vector<int>{0, 1, 0}));
  EXPECT_EQ(p.key_collisions, 1);
  // max_owners_per_group 1: every unit of the key on the first slot it used.
  o.max_owners_per_group = 1;
  EXPECT_EQ(partition_ownership(tree, {0, 1, 2}, o).unit_slot, (std::vector<int>{0, 0, 0}));
}

TEST(Lpt, PackingThresholdAndSwitch) {
  auto t = model::build_topology("llm", "mini");
  PartitionOptions o;
  o.shard = 8;
  o.pack = false;
  EXPECT_EQ(partition_ownership(t.tree, dedicated(t), o).units.size(), 28u);
  o.pack = true;
  o.pack_threshold = 100'000'000;  // everything small: one unit per layer
  EXPECT_EQ(partition_ownership(t.tree, dedicated(t), o).units.size(), 4u);
}

TEST(Strategies, RoundRobinAndRank0) {
  auto tree = flat_tree({5, 4, 3, 2, 1});
  PartitionOptions o;
  o.shard = 2;
  o.cost_model = CostModel::numel;
  o.pack = false;
  o.strategy = Strategy::round_robin;
  EXPECT_EQ(partition_ownership(tree, iota_ids(5), o).unit_slot, (std::vector<int>{0, 1, 0, 1, 0}));
  o.strategy = Strategy::rank0;
  auto p = partition_ownership(tree, iota_ids(5), o);
  EXPECT_EQ(p.unit_slot, (std::vector<int>{0, 0, 0, 0, 0}));
  EXPECT_EQ(p.empty_slots, 1);
  EXPECT_DOUBLE_EQ(p.imbalance_all, 1.0);
  EXPECT_DOUBLE_EQ(p.imbalance_nonempty, 0.0);
  EXPECT_EQ(p.makespan, 15);
  EXPECT_DOUBLE_EQ(p.lower_bound, 7.5);
  EXPECT_DOUBLE_EQ(p.ratio, 2.0);
  EXPECT_THROW(parse_strategy("greedy"), InputError);
}

TEST(Hsdp, SlotsAreShardMajorAndRanksRowMajor) {
  auto tree = flat_tree({1, 1});
  PartitionOptions o;
  o.shard = 4;
  o.replicate = 2;
  auto p = partition_ownership(tree, iota_ids(2), o);
  ASSERT_EQ(p.slots.size(), 8u);
  EXPECT_EQ(p.slots[1].shard, 0);
  EXPECT_EQ(p.slots[1].replicate, 1);
  EXPECT_EQ(p.slots[1].rank, 4);  // rank = r * G + s
  EXPECT_EQ(p.slots[2].rank, 1);
}

TEST(Hsdp, ColumnBalanceSpreadsColumnsFirst) {
  // Four equal units on G=2 x R=2: with column balance, the second unit goes to the other
  // column (slot 2 = (1,0)) rather than the other row of the same column (slot 1 = (0,1)).
  auto tree = flat_tree({10, 10, 10, 10});
  PartitionOptions o;
  o.shard = 2;
  o.replicate = 2;
  o.cost_model = CostModel::numel;
  o.pack = false;
  EXPECT_EQ(partition_ownership(tree, iota_ids(4), o).unit_slot, (std::vector<int>{0, 2, 1, 3}));
  o.column_balance = false;
  EXPECT_EQ(partition_ownership(tree, iota_ids(4), o).unit_slot, (std::vector<int>{0, 1, 2, 3}));
}

TEST(Properties, EveryDedicatedParameterOneOwnerAndDeterministic) {
  for (const char* name : {"sequential", "vla", "moe", "nested", "llm", "moe-llm"}) {
    auto t = model::build_topology(name, "tiny");
    for (auto s : {Strategy::lpt, Strategy::round_robin, Strategy::rank0, Strategy::lpt_refine}) {
      PartitionOptions o;
      o.shard = 3;
      o.strategy = s;
      auto ded = dedicated(t);
      auto a = partition_ownership(t.tree, ded, o);
      auto b = partition_ownership(t.tree, ded, o);
      EXPECT_EQ(a.owner_slot, b.owner_slot) << name;
      std::vector<int> seen(t.tree.num_parameters(), 0);
      for (const auto& u : a.units)
        for (int m : u.members) ++seen[m];
      for (int pid : ded) {
        EXPECT_EQ(seen[pid], 1) << name;
        EXPECT_GE(a.owner_slot[pid], 0);
      }
      std::int64_t total = 0;
      for (auto l : a.cost_loads) total += l;
      EXPECT_EQ(total, a.total_cost);
    }
  }
}

TEST(Properties, RefineNeverWorseThanLptOnBuiltins) {
  for (const char* name : {"vla", "moe", "nested", "llm", "moe-llm"}) {
    auto t = model::build_topology(name, "tiny");
    for (int g : {2, 3, 8}) {
      PartitionOptions o;
      o.shard = g;
      o.pack = false;
      auto lpt = partition_ownership(t.tree, dedicated(t), o);
      o.strategy = Strategy::lpt_refine;
      auto ref = partition_ownership(t.tree, dedicated(t), o);
      EXPECT_LE(ref.makespan, lpt.makespan) << name << " G=" << g;
    }
  }
}

TEST(Errors, BadOptions) {
  auto tree = flat_tree({1});
  PartitionOptions o;
  o.shard = 0;
  EXPECT_THROW(partition_ownership(tree, {0}, o), InputError);
  o.shard = 1;
  o.replicate = 0;
  EXPECT_THROW(partition_ownership(tree, {0}, o), InputError);
  o.replicate = 1;
  o.pack_threshold = -1;
  EXPECT_THROW(partition_ownership(tree, {0}, o), InputError);
  o.pack_threshold = (std::int64_t{1} << 50) + 1;
  EXPECT_THROW(partition_ownership(tree, {0}, o), InputError);
}

// A threshold of 0 leaves no parameter "small": every parameter its own unit, as packing off
// (--pack-threshold 0 and --no-pack are one setting).
TEST(Packing, ThresholdZeroPacksNothing) {
  model::ModuleTree tree("M");  // layers.0.{a,b,c}: one bucket
  const int layer = tree.add_module(tree.add_module(0, "layers", "ModuleList"), "0", "L");
  for (const char* n : {"a", "b", "c"}) tree.add_parameter(layer, n, {100});
  tree.finalize();
  PartitionOptions o;
  o.shard = 2;
  o.pack_threshold = 0;
  EXPECT_EQ(partition_ownership(tree, {0, 1, 2}, o).units.size(), 3u);
  o.pack_threshold = 1000;  // all three small, one bucket: one unit
  EXPECT_EQ(partition_ownership(tree, {0, 1, 2}, o).units.size(), 1u);
}

}  // namespace
