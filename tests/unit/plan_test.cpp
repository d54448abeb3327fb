// Predicted communication (SPEC §6) against hand-computed per-rank volumes, and plan hashing.

#include <gtest/gtest.h>

#include "dmuon/base/error.hpp"
#include "dmuon/boundary/degradation.hpp"
#include "dmuon/engine/step/step_volume.hpp"
#include "dmuon/model/topology.hpp"
#include "dmuon/plan/comm_volume.hpp"
#include "dmuon/plan/plan.hpp"
#include "test_plan_options.hpp"

namespace {

using namespace dmuon;

// Three independent parameters layers.{0,1,2}.w (three default-heuristic sites), numel
// 10, 20, 30, fp32: P_M = 240 bytes.
model::ModuleTree three_sites() {
  model::ModuleTree tree("M");
  const int list = tree.add_module(0, "layers", "ModuleList");
  const std::int64_t sizes[] = {10, 20, 30};
  for (int i = 0; i < 3; ++i)
    tree.add_parameter(tree.add_module(list, std::to_string(i), "L"), "w", {sizes[i], 1});
  tree.finalize();
  return tree;
}

plan::Plan make(const model::ModuleTree& tree, int shard, int replicate, const char* strategy) {
  plan::PlanConfig c;
  c.dedicate_rule = "all";
  c.partition.shard = shard;
  c.partition.replicate = replicate;
  c.partition.strategy = partition::parse_strategy(strategy);
  c.partition.pack = false;
  return plan::make_plan(tree, c);
}

// The owner-based volume of one step (engine/step/step_volume.hpp), dmuon on plan `p`.
plan::CommVolume dmuon_volume(const model::ModuleTree& tree, const plan::Plan& p,
                              plan::Reshard reshard,
                              plan::GradReduce grad_reduce = plan::GradReduce::per_param) {
  engine::VolumeOptions o;
  o.reshard = reshard;
  o.grad_reduce = grad_reduce;
  return engine::predict_step_volume(tree, p, o).owners;
}

TEST(CommVolume, OneDimensionalAllOnRankZero) {
  auto tree = three_sites();
  auto p = make(tree, 2, 1, "rank0");
  ASSERT_EQ(p.hooks.sites.size(), 3u);
  auto z3 = dmuon_volume(tree, p, plan::Reshard::z3);
  EXPECT_EQ(z3.dedicated_bytes, 240);
  EXPECT_EQ(z3.hooks_fired, 12);         // 4 per site
  EXPECT_EQ(z3.hooks_communicating, 9);  // forward-pre, backward-pre, backward-post
  EXPECT_EQ(z3.broadcast.calls_per_rank, (std::vector<std::int64_t>{6, 6}));  // 2 x 3 (site, owner)
  EXPECT_EQ(z3.broadcast.bytes_per_rank, (std::vector<std::int64_t>{0, 480}));
  EXPECT_EQ(z3.reduce.calls_per_rank, (std::vector<std::int64_t>{3, 3}));
  EXPECT_EQ(z3.reduce.bytes_per_rank, (std::vector<std::int64_t>{0, 240}));
  EXPECT_EQ(z3.max_bytes_per_rank(), 720);  // rank 1 owns nothing: 3 x P_M
  auto z2 = dmuon_volume(tree, p, plan::Reshard::z2);
  EXPECT_EQ(z2.hooks_fired, 12);         // the reference installs all four in Z2 too
  EXPECT_EQ(z2.hooks_communicating, 6);  // forward-pre broadcast, backward-post reduce
  EXPECT_EQ(z2.broadcast.bytes_per_rank, (std::vector<std::int64_t>{0, 240}));
}

TEST(CommVolume, BalancedOwnersMatchSpecFormula) {
  // Two equal parameters, two ranks, one each: Z3 = 3 (N-1)/N P_M = 1.5 x 80 bytes per rank.
  model::ModuleTree tree("M");
  const int list = tree.add_module(0, "layers", "ModuleList");
  for (int i = 0; i < 2; ++i)
    tree.add_parameter(tree.add_module(list, std::to_string(i), "L"), "w", {10, 1});
  tree.finalize();
  auto p = make(tree, 2, 1, "lpt");
  auto z3 = dmuon_volume(tree, p, plan::Reshard::z3);
  EXPECT_EQ(z3.total_bytes(0), 120);
  EXPECT_EQ(z3.total_bytes(1), 120);
  auto z2 = dmuon_volume(tree, p, plan::Reshard::z2);
  EXPECT_EQ(z2.total_bytes(0), 80);  // 2 (N-1)/N P_M
}

TEST(CommVolume, HsdpTwoStageAndReplicateBroadcast) {
  // G = 2, R = 2, everything owned by slot (0, 0) = rank 0. Ranks: 0 (s0 r0), 1 (s1 r0),
  // 2 (s0 r1), 3 (s1 r1).
  auto tree = three_sites();
  auto p = make(tree, 2, 2, "rank0");
  auto v = dmuon_volume(tree, p, plan::Reshard::z3);
  EXPECT_EQ(v.broadcast.bytes_per_rank, (std::vector<std::int64_t>{0, 480, 0, 480}));
  EXPECT_EQ(v.reduce.bytes_per_rank, (std::vector<std::int64_t>{0, 240, 0, 240}));
  EXPECT_EQ(v.reduce_stage2.calls_per_rank, (std::vector<std::int64_t>{3, 0, 3, 0}));
  EXPECT_EQ(v.reduce_stage2.bytes_per_rank, (std::vector<std::int64_t>{0, 0, 240, 0}));
  EXPECT_EQ(v.replicate_broadcast.calls_per_rank, (std::vector<std::int64_t>{3, 0, 3, 0}));
  EXPECT_EQ(v.replicate_broadcast.bytes_per_rank, (std::vector<std::int64_t>{0, 0, 240, 0}));
}

TEST(CommVolume, PackedGradReduceOneCallPerSiteOwner) {
  // One site holding three parameters of 10 fp32 elements, round-robin over G = 2 ranks:
  // owners 0, 1, 0 -> two (site, owner) pairs. Per-parameter: 3 reduces per rank; packed: 2.
  model::ModuleTree tree("M");
  const int layer = tree.add_module(tree.add_module(0, "layers", "ModuleList"), "0", "L");
  for (const char* n : {"a", "b", "c"}) tree.add_parameter(layer, n, {10, 1});
  tree.finalize();
  auto p = make(tree, 2, 1, "round_robin");
  ASSERT_EQ(p.hooks.sites.size(), 1u);
  const auto per = dmuon_volume(tree, p, plan::Reshard::z3);
  const auto packed = dmuon_volume(tree, p, plan::Reshard::z3, plan::GradReduce::packed);
  EXPECT_EQ(per.reduce.calls_per_rank, (std::vector<std::int64_t>{3, 3}));
  EXPECT_EQ(packed.reduce.calls_per_rank, (std::vector<std::int64_t>{2, 2}));
  // Bytes do not change: rank 0 sends b (40 B), rank 1 sends a and c (80 B).
  EXPECT_EQ(packed.reduce.bytes_per_rank, (std::vector<std::int64_t>{40, 80}));
  EXPECT_EQ(per.reduce.bytes_per_rank, packed.reduce.bytes_per_rank);
  EXPECT_EQ(plan::parse_grad_reduce("packed"), plan::GradReduce::packed);
  EXPECT_THROW(plan::parse_grad_reduce("bucket"), InputError);
}

TEST(PlanHash, ChangesWithOwnersAndSites) {
  auto t = model::build_topology("moe", "tiny");
  plan::PlanConfig c;
  c.dedicate_rule = t.dedicate_rule;
  c.partition.shard = 4;
  const auto a = plan::plan_hash(t.tree, plan::make_plan(t.tree, c));
  EXPECT_EQ(a, plan::plan_hash(t.tree, plan::make_plan(t.tree, c)));
  c.partition.strategy = partition::Strategy::rank0;
  EXPECT_NE(a, plan::plan_hash(t.tree, plan::make_plan(t.tree, c)));
  c.partition.strategy = partition::Strategy::lpt;
  c.boundary = "types:Expert,MoELayer";
  EXPECT_NE(a, plan::plan_hash(t.tree, plan::make_plan(t.tree, c)));
}

// The apps' plan configuration carries the reshard mode the engine runs (--reshard): llm tiny with
// tied embeddings, every parameter dedicated. model.embed_tokens.weight is held by
// model.embed_tokens and lm_head: Z3 puts it at their lowest common ancestor, the root; Z2 at its
// canonical parent, model.embed_tokens (no layers/blocks key: per-Linear).
TEST(PlanConfig, CarriesTheReshardModeIntoTheSites) {
  const auto topo = model::build_topology("llm", "tiny", {{"tie_embeddings", "1"}});
  apps::RunOptions o;
  o.model.topology = "llm";
  o.plan.dedicate_rule = "all";
  const auto emb = *topo.tree.find_parameter("model.embed_tokens.weight");
  auto site_of_embedding = [&](plan::Reshard r) {
    o.engine.step.reshard = r;
    const auto c = apps::make_plan_config(o, topo, 2, "default", true, partition::Strategy::lpt);
    EXPECT_EQ(c.reshard, r);
    const auto p = plan::make_plan(topo.tree, c);
    return p.hooks.sites[static_cast<std::size_t>(p.hooks.site_of_param[emb])].path;
  };
  EXPECT_EQ(site_of_embedding(plan::Reshard::z3), "");
  EXPECT_EQ(site_of_embedding(plan::Reshard::z2), "model.embed_tokens");
}

// A world size is checked before anything is sized by it.
TEST(PlanConfig, WorldSizeLimits) {
  const auto topo = model::build_topology("moe", "tiny");
  const apps::RunOptions o;
  const auto config = [&](int world) {
    return apps::make_plan_config(o, topo, world, "default", true, partition::Strategy::lpt);
  };
  EXPECT_THROW(config(0), InputError);
  EXPECT_THROW(config(100'000'000), InputError);
  EXPECT_NO_THROW(config(static_cast<int>(partition::kMaxSlots)));
  plan::PlanConfig c;
  c.dedicate_rule = "all";
  c.partition.shard = 1 << 11;
  c.partition.replicate = 1 << 11;  // 2^22 slots
  EXPECT_THROW(plan::make_plan(topo.tree, c), InputError);
}

}  // namespace

namespace {

int idle_findings(const plan::Plan& p, std::string* message) {
  int n = 0;
  for (const auto& f : p.report.findings)
    if (f.kind == boundary::FindingKind::idle_ranks) {
      ++n;
      *message = f.message;
    }
  return n;
}

TEST(PlanFindings, IdleRanksAreAFindingNotARatioOfOne) {
  // moe tiny packs each layer's matrices (all below the 5 M packing threshold) into one unit:
  // 4 units. On 8 ranks 4 own nothing although the ratio is 1.0000; on 4 ranks none idles.
  const auto t = model::build_topology("moe", "tiny");
  plan::PlanConfig c;
  c.dedicate_rule = t.dedicate_rule;
  c.boundary = "default";
  c.partition.shard = 8;
  auto p = plan::make_plan(t.tree, c);
  ASSERT_EQ(p.partition.units.size(), 4u);
  EXPECT_EQ(p.partition.ratio, 1.0);
  std::string msg;
  ASSERT_EQ(idle_findings(p, &msg), 1);
  EXPECT_NE(msg.find("4 of 8 ranks own no matrix (the partition has 4 units for 8 slots)"),
            std::string::npos)
      << msg;
  c.partition.shard = 4;
  EXPECT_EQ(idle_findings(plan::make_plan(t.tree, c), &msg), 0);
}

// nanoGPT-style names (transformer.h.N): no layers.N / blocks.N key anywhere. Each Block holds
// attn [64, 64] (4,096) and mlp [256, 64] (16,384), both below the packing threshold.
model::ModuleTree keyless_tree() {
  model::ModuleTree tree("GPT");
  const int h =
      tree.add_module(tree.add_module(0, "transformer", "Transformer"), "h", "ModuleList");
  for (const char* i : {"0", "1", "2", "3"}) {
    const int b = tree.add_module(h, i, "Block");
    tree.add_linear(b, "attn", 64, 64);
    tree.add_linear(b, "mlp", 64, 256);
  }
  tree.finalize();
  return tree;
}

TEST(GroupKey, SiteKeysFollowTheBoundaryWhereNamesCarryNoLayerKey) {
  const auto tree = keyless_tree();
  plan::PlanConfig c;
  c.dedicate_rule = "ndim>=2";
  c.boundary = "types:Block";
  c.partition.shard = 4;
  // layer (the reference's): all 8 matrices in the "none" bucket, packed into 1 unit on slot
  // 0; the idle-ranks finding names the way out.
  auto layer = plan::make_plan(tree, c);
  ASSERT_EQ(layer.partition.units.size(), 1u);
  EXPECT_FALSE(layer.partition.units[0].key.has_value());
  EXPECT_EQ(layer.partition.numel_loads, (std::vector<std::int64_t>{81920, 0, 0, 0}));
  std::string msg;
  ASSERT_EQ(idle_findings(layer, &msg), 1);
  EXPECT_NE(msg.find("--group-key site"), std::string::npos) << msg;
  // site: one bucket per Block site, each packed (attn + mlp = 20,480) into one unit; LPT
  // spreads the four equal units over the four slots.
  c.partition.group_key = partition::GroupKey::site;
  auto site = plan::make_plan(tree, c);
  ASSERT_EQ(site.partition.units.size(), 4u);
  EXPECT_EQ(*site.partition.units[2].key, "transformer.h.2");
  EXPECT_EQ(site.partition.numel_loads, (std::vector<std::int64_t>{20480, 20480, 20480, 20480}));
  EXPECT_EQ(idle_findings(site, &msg), 0);
  // Under the default boundary each Linear is its own site: 8 units of one matrix each.
  c.boundary = "default";
  EXPECT_EQ(plan::make_plan(tree, c).partition.units.size(), 8u);
  EXPECT_EQ(partition::parse_group_key("site"), partition::GroupKey::site);
  EXPECT_THROW(partition::parse_group_key("layers"), InputError);
}

TEST(GroupKey, SiteKeysNameTheFirstUncoveredParameterInModelOrder) {
  // With site keys the sites are resolved before owners exist: a strict failure names the
  // first uncovered parameter in model order (transformer.h.0.attn.weight), where LPT's order
  // would name a larger mlp weight first.
  const auto tree = keyless_tree();
  plan::PlanConfig c;
  c.dedicate_rule = "ndim>=2";
  c.boundary = "types:Nothing";
  c.partition.shard = 2;
  c.partition.pack = false;
  c.partition.group_key = partition::GroupKey::site;
  try {
    plan::make_plan(tree, c);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'transformer.h.0.attn.weight'"), std::string::npos)
        << e.what();
  }
  c.partition.group_key = partition::GroupKey::layer;
  try {
    plan::make_plan(tree, c);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'transformer.h.0.mlp.weight'"), std::string::npos)
        << e.what();
  }
}

}  // namespace

namespace {

// The idle-ranks finding tries its remedies and names only those that help. moe tiny on 8
// ranks: under the default boundary the 4 MoELayer sites are the 4 layer buckets, so
// --group-key site gives the same 4 units (no help); --no-pack gives one unit per matrix:
// 4 layers x (8 experts x 2 + o_proj) = 68 units, none idle. Under the recommended boundary
// (types:Expert,MoELayer) the site buckets are 4 x (8 experts + 1 layer) = 36 units.
TEST(PlanFindings, IdleRanksTriesItsRemediesAndNamesThoseThatHelp) {
  const auto t = model::build_topology("moe", "tiny");
  plan::PlanConfig c;
  c.dedicate_rule = t.dedicate_rule;
  c.boundary = "default";
  c.partition.shard = 8;
  std::string msg;
  ASSERT_EQ(idle_findings(plan::make_plan(t.tree, c), &msg), 1);
  EXPECT_NE(msg.find("--group-key site: 4 units, 4 idle"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(no help)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--no-pack: 68 units, 0 idle"), std::string::npos) << msg;
  EXPECT_NE(msg.find("; use --no-pack"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("use --group-key site"), std::string::npos) << msg;
  c.boundary = "types:Expert,MoELayer";
  ASSERT_EQ(idle_findings(plan::make_plan(t.tree, c), &msg), 1);
  EXPECT_NE(msg.find("--group-key site: 36 units, 0 idle"), std::string::npos) << msg;
  EXPECT_NE(msg.find("; use --group-key site or --no-pack"), std::string::npos) << msg;
}

// Fewer matrices than ranks: the finding says that some ranks idle under any partition and
// what to change. sequential tiny: 2 matrices, packed into 1 unit (3 of 4 idle); unpacked, 2
// units (2 idle: helps, but not to 0).
TEST(PlanFindings, IdleRanksWithFewerMatricesThanRanksSaysWhy) {
  const auto t = model::build_topology("sequential", "tiny");
  plan::PlanConfig c;
  c.dedicate_rule = t.dedicate_rule;
  c.boundary = "default";
  c.partition.shard = 4;
  std::string msg;
  ASSERT_EQ(idle_findings(plan::make_plan(t.tree, c), &msg), 1);
  EXPECT_NE(msg.find("--no-pack: 2 units, 2 idle"), std::string::npos) << msg;
  EXPECT_NE(msg.find("2 dedicated matrices for 4 ranks leave 2 idle under any partition"),
            std::string::npos)
      << msg;
  // Already unpacked and keyed by site: nothing left to try, and it says why.
  c.partition.pack = false;
  c.partition.group_key = partition::GroupKey::site;
  ASSERT_EQ(idle_findings(plan::make_plan(t.tree, c), &msg), 1);
  EXPECT_NE(msg.find("no partition helps: 2 dedicated matrices for 4 ranks"), std::string::npos)
      << msg;
  EXPECT_EQ(msg.find("; use "), std::string::npos) << msg;
}

}  // namespace
