// Parameter routes (--route RULE=ROUTE, plan/param_route.hpp) against hand-derived answers:
// parsing (the rule splits at the last '='), the first matching rule wins over the dedication
// default, the plan's owner-based set follows the routes, and the per-rank volume formulas of
// a two-rank world where rank 0 owns everything (rank0 strategy) are written out by hand.

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "dmuon/base/error.hpp"
#include "dmuon/engine/step/step_volume.hpp"
#include "dmuon/plan/comm_volume.hpp"
#include "dmuon/plan/param_route.hpp"
#include "dmuon/plan/plan.hpp"
#include "two_layer_tree.hpp"

namespace {

using namespace dmuon;
using comm::CollectiveKind;
using engine::CommGroup;
using plan::ParamRoute;

TEST(ParamRoute, RuleSplitsAtTheLastEquals) {
  const auto r = plan::parse_route_rule("ndim=1=adamw");
  EXPECT_EQ(r.route, ParamRoute::adamw);
  EXPECT_EQ(r.rule.spec(), "ndim=1");
  EXPECT_EQ(plan::parse_route_rule("contains:proj=fsdp").route, ParamRoute::fsdp);
  EXPECT_EQ(plan::parse_route_rule("all=muon").route, ParamRoute::muon);
}

TEST(ParamRoute, BadRoutesAreInputErrorsNamingTheValue) {
  for (const char* bad : {"ndim=1", "=adamw", "all=", "all=sgd", "ndim=x=adamw"}) {
    try {
      (void)plan::parse_route_rule(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const InputError& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }
  EXPECT_EQ(plan::parse_route_rule("all=sharded_adamw").route, plan::ParamRoute::sharded_adamw);
  // ROUTE:DTYPE (a rule holding ':' and '=' stays the rule), on every route; a bad route is
  // named before a bad dtype.
  const auto bf = plan::parse_route_rule("ndim=1=sharded_adamw:bf16");
  EXPECT_EQ(bf.route, ParamRoute::sharded_adamw);
  EXPECT_EQ(bf.rule.spec(), "ndim=1");
  EXPECT_EQ(bf.wire_bytes, 2);
  const auto fp = plan::parse_route_rule("contains:norm=fsdp:fp32");
  EXPECT_EQ(fp.route, ParamRoute::fsdp);
  EXPECT_EQ(fp.rule.spec(), "contains:norm");
  EXPECT_EQ(fp.wire_bytes, 4);
  EXPECT_EQ(plan::parse_route_rule("all=fsdp").wire_bytes, 0);
  EXPECT_EQ(plan::parse_route_rule("contains:norm=adamw:fp32").wire_bytes, 4);
  EXPECT_EQ(plan::parse_route_rule("ndim=2=muon:bf16").route, ParamRoute::muon);
  const std::pair<const char*, const char*> refused[] = {
      {"all=fsdp:fp16", "dtype 'fp16' is invalid (valid: fp32, bf16)"},
      {"all=fsdp:", "dtype '' is invalid (valid: fp32, bf16)"},
      {"all=sgd:bf16", "unknown parameter route 'sgd'"}};
  for (const auto& [spec, expect] : refused) {
    try {
      (void)plan::parse_route_rule(spec);
      ADD_FAILURE() << spec << " was accepted";
    } catch (const InputError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(expect), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }
}

// layers.0 {w [4,4], b [4]}, layers.1 {w [4,4]}
using Tree = test::TwoLayerTree;

TEST(ParamRoute, FirstMatchingRuleWinsOverTheDedicationDefault) {
  const Tree t;
  const auto dedication = boundary::DedicationRule::parse("ndim=2");
  const std::vector<plan::RouteRule> rules = {plan::parse_route_rule("contains:.b=adamw"),
                                              plan::parse_route_rule("contains:layers.1=fsdp"),
                                              plan::parse_route_rule("all=muon")};
  const auto r = plan::resolve_routes(t.tree, dedication, rules);
  EXPECT_EQ(r[static_cast<std::size_t>(t.w0)], ParamRoute::muon);   // only all=muon matches
  EXPECT_EQ(r[static_cast<std::size_t>(t.b0)], ParamRoute::adamw);  // first rule
  EXPECT_EQ(r[static_cast<std::size_t>(t.w1)], ParamRoute::fsdp);   // second beats all=muon
  // Without rules: the dedication rule alone.
  const auto d = plan::resolve_routes(t.tree, dedication, {});
  EXPECT_EQ(d[static_cast<std::size_t>(t.b0)], ParamRoute::fsdp);
  EXPECT_EQ(d[static_cast<std::size_t>(t.w1)], ParamRoute::muon);
}

plan::PlanConfig config(std::vector<std::string> routes) {
  plan::PlanConfig pc;
  pc.dedicate_rule = "ndim=2";
  pc.partition.shard = 2;
  pc.partition.strategy = partition::parse_strategy("rank0");
  pc.partition.pack = false;
  pc.routes = std::move(routes);
  return pc;
}

// One step of `method` on plan `p` (engine/step/step_volume.hpp).
engine::StepVolume step(const model::ModuleTree& tree, const plan::Plan& p, engine::Method method,
                        int wire_bytes, plan::Reshard reshard = plan::Reshard::z3,
                        plan::GradReduce grad_reduce = plan::GradReduce::per_param, int accum = 1) {
  engine::VolumeOptions o;
  o.method = method;
  o.reshard = reshard;
  o.grad_reduce = grad_reduce;
  o.wire_bytes = wire_bytes;
  o.accum = accum;
  return engine::predict_step_volume(tree, p, o);
}

TEST(ParamRoute, PlanAndFormulasFollowTheRoutes) {
  const Tree t;
  // b0 joins the owner-based set with AdamW; w1 leaves it for the FSDP unit.
  const auto p = plan::make_plan(t.tree, config({"ndim=1=adamw", "contains:layers.1=fsdp"}));
  EXPECT_EQ(p.hooks.dedicated, (std::vector<int>{t.w0, t.b0}));
  EXPECT_GE(p.hooks.site_of_param[static_cast<std::size_t>(t.b0)], 0);
  EXPECT_LT(p.hooks.site_of_param[static_cast<std::size_t>(t.w1)], 0);
  EXPECT_TRUE(p.muon(t.w0));
  EXPECT_FALSE(p.muon(t.b0));
  const auto at = [](const engine::VolumeExpectation& e, CollectiveKind k) {
    return e[engine::channel_index(CommGroup::shard, k)];
  };
  // dmuon, rank 1 (rank 0 owns w0 and b0, one site, one pair): Z3 broadcasts 2·(16+4)·4 B,
  // reduces (16+4)·4 B in 2 calls; w1 is FSDP: chunk 8, all-gather 2·(2−1)·8·4, reduce-scatter
  // (2−1)·8·4.
  const auto dm = step(t.tree, p, engine::Method::dmuon, 4).of_rank(1);
  EXPECT_EQ(at(dm, CollectiveKind::broadcast).calls, 2);
  EXPECT_EQ(at(dm, CollectiveKind::broadcast).bytes, 160);
  EXPECT_EQ(at(dm, CollectiveKind::reduce).calls, 2);
  EXPECT_EQ(at(dm, CollectiveKind::reduce).bytes, 80);
  EXPECT_EQ(at(dm, CollectiveKind::all_gather).calls, 2);
  EXPECT_EQ(at(dm, CollectiveKind::all_gather).bytes, 64);
  EXPECT_EQ(at(dm, CollectiveKind::reduce_scatter).bytes, 32);
  // Rank 0 owns them: it receives and sends nothing of w0, b0.
  const auto dm0 = step(t.tree, p, engine::Method::dmuon, 4).of_rank(0);
  EXPECT_EQ(at(dm0, CollectiveKind::broadcast).bytes, 0);
  EXPECT_EQ(at(dm0, CollectiveKind::reduce).bytes, 0);
  // fsdp-muon: every parameter sharded (chunks 8, 2, 8: 2 gathers each = 2·(8+2+8)·4 B), plus
  // the Nesterov all-gather of w0 only (b0 is routed to AdamW): 8·4 B.
  const auto fm = step(t.tree, p, engine::Method::fsdp_muon, 4).of_rank(1);
  EXPECT_EQ(at(fm, CollectiveKind::all_gather).calls, 7);
  EXPECT_EQ(at(fm, CollectiveKind::all_gather).bytes, 144 + 32);
}

// sharded_adamw sites: layers.0 {w [4,4], b [4]}, layers.1 {w [4,4]}, norm {weight [3]};
// ids w0, b0, w1, nw. Under `types:L` (strict) b0's site is layers.0; norm.weight lies in no L,
// so it goes to the root ("" site, first in pre-order) instead of failing the strict plan.
TEST(ParamRoute, ShardedAdamwSitesAndFormulaByHand) {
  model::ModuleTree tree("M");
  const int list = tree.add_module(0, "layers", "ModuleList");
  const int l0 = tree.add_module(list, "0", "L");
  tree.add_parameter(l0, "w", {4, 4});
  const int b0 = tree.add_parameter(l0, "b", {4});
  tree.add_parameter(tree.add_module(list, "1", "L"), "w", {4, 4});
  const int nw = tree.add_parameter(tree.add_module(0, "norm", "Norm"), "weight", {3});
  tree.finalize();
  plan::PlanConfig pc;
  pc.dedicate_rule = "ndim=2";
  pc.boundary = "types:L";
  pc.routes = {"ndim=1=sharded_adamw"};
  pc.partition.shard = 2;
  pc.partition.replicate = 2;
  const auto p = plan::make_plan(tree, pc);
  ASSERT_EQ(p.sharded_hooks.sites.size(), 2u);
  EXPECT_EQ(p.sharded_hooks.sites[0].path, "");
  EXPECT_EQ(p.sharded_hooks.sites[0].params, std::vector<int>{nw});
  EXPECT_EQ(p.sharded_hooks.sites[1].path, "layers.0");
  EXPECT_EQ(p.sharded_hooks.sites[1].params, std::vector<int>{b0});
  EXPECT_EQ(p.hooks.sites.size(), 2u);  // the owner-based sites are untouched
  // G = 2, R = 2: c = 2 (b0: 4/2) and 2 (norm: 3 padded to 4). fp32, Z3, per rank per step:
  //   all_gather 2·2 calls, 2·4·(2−1)·(2 + 2) = 32 B; reduce_scatter 2 calls, 16 B;
  //   replicate all_reduce 2 calls, 4·(⌊2·1/2⌋ + ⌊2·1/2⌋) = 8 B.
  // The owner-based w's add no all_gather, reduce_scatter or all_reduce: every rank's channels
  // are the sharded_adamw term's.
  const auto v = step(tree, p, engine::Method::dmuon, 4);
  const auto at = [](const engine::VolumeExpectation& e, CommGroup g, CollectiveKind k) {
    return e[engine::channel_index(g, k)];
  };
  for (int r = 0; r < 4; ++r) {
    const auto e = v.of_rank(r);
    EXPECT_EQ(at(e, CommGroup::shard, CollectiveKind::all_gather).calls, 4);
    EXPECT_EQ(at(e, CommGroup::shard, CollectiveKind::all_gather).bytes, 32);
    EXPECT_EQ(at(e, CommGroup::shard, CollectiveKind::reduce_scatter).calls, 2);
    EXPECT_EQ(at(e, CommGroup::shard, CollectiveKind::reduce_scatter).bytes, 16);
    EXPECT_EQ(at(e, CommGroup::replicate, CollectiveKind::all_reduce).calls, 2);
    EXPECT_EQ(at(e, CommGroup::replicate, CollectiveKind::all_reduce).bytes, 8);
  }
  const auto gathers =
      v.max_of(plan::VolumeRoute::sharded_adamw, CommGroup::shard, CollectiveKind::all_gather);
  EXPECT_EQ(gathers.calls, 4);
  EXPECT_EQ(gathers.bytes, 32);
  // Z2, bf16, --accum 3: one gather per micro-step, 3 calls each 2·1·2 B per parameter.
  const auto z2 =
      step(tree, p, engine::Method::dmuon, 2, plan::Reshard::z2, plan::GradReduce::per_param, 3)
          .of_rank(0);
  EXPECT_EQ(at(z2, CommGroup::shard, CollectiveKind::all_gather).calls, 6);
  EXPECT_EQ(at(z2, CommGroup::shard, CollectiveKind::all_gather).bytes, 3 * (4 + 4));
  EXPECT_EQ(at(z2, CommGroup::shard, CollectiveKind::reduce_scatter).bytes, 8);
  EXPECT_EQ(at(z2, CommGroup::replicate, CollectiveKind::all_reduce).bytes, 4);
}

// --route dtypes, by hand on Tree (G = 2, rank 1 of 2, rank0 owns the dedicated ones): w1
// routed to fsdp in bf16 on an fp32 wire, b0 to sharded_adamw in fp32 on a bf16 wire, then b0
// to owner-based AdamW in bf16 on an fp32 wire.
TEST(ParamRoute, RouteDtypesSetTheirParametersBytes) {
  const Tree t;
  auto p = plan::make_plan(t.tree, config({"contains:layers.1=fsdp:bf16"}));
  EXPECT_EQ(p.wire_bytes(t.w1, 4), 2);
  EXPECT_EQ(p.wire_bytes(t.w0, 4), 4);
  EXPECT_EQ(p.wire_bytes(t.b0, 0), 0);  // no route dtype, formula default: its own dtype
  EXPECT_EQ(p.narrowest_route_wire_bytes(), 2);
  // A rule that matches nothing gives no parameter a dtype.
  EXPECT_EQ(
      plan::make_plan(t.tree, config({"contains:nothing=fsdp:bf16"})).narrowest_route_wire_bytes(),
      0);
  const auto at = [](const engine::VolumeExpectation& e, CollectiveKind k) {
    return e[engine::channel_index(CommGroup::shard, k)];
  };
  // dmuon, fp32 wire: the FSDP unit is b0 (chunk 2, fp32) and w1 (chunk 8, bf16): all-gather
  // 2·(2−1)·(2·4 + 8·2) = 48 B, reduce-scatter (2−1)·(2·4 + 8·2) = 24 B.
  const auto dm = step(t.tree, p, engine::Method::dmuon, 4).of_rank(1);
  EXPECT_EQ(at(dm, CollectiveKind::all_gather).calls, 4);
  EXPECT_EQ(at(dm, CollectiveKind::all_gather).bytes, 48);
  EXPECT_EQ(at(dm, CollectiveKind::reduce_scatter).bytes, 24);
  // ddp-muon (world 2): all-reduce ⌊n·(N−1)/N⌋·e = 8·4 + 2·4 + 8·2 = 56 B.
  const auto dd = step(t.tree, p, engine::Method::ddp_muon, 4).of_rank(1);
  EXPECT_EQ(at(dd, CollectiveKind::all_reduce).bytes, 56);
  // sharded_adamw in fp32 on a bf16 wire: b0 chunk 2: Z3 all-gather 2·(2−1)·2·4 = 16 B,
  // reduce-scatter 8 B; the other parameters' terms stay in bf16.
  p = plan::make_plan(t.tree, config({"ndim=1=sharded_adamw:fp32"}));
  const auto sa = step(t.tree, p, engine::Method::dmuon, 2);
  EXPECT_EQ(
      sa.max_of(plan::VolumeRoute::sharded_adamw, CommGroup::shard, CollectiveKind::all_gather)
          .bytes,
      16);
  EXPECT_EQ(
      sa.max_of(plan::VolumeRoute::sharded_adamw, CommGroup::shard, CollectiveKind::reduce_scatter)
          .bytes,
      8);
  // Owner-based: b0 (adamw) in bf16 on an fp32 wire packs apart from w0 at layers.0 (rank 0
  // owns everything): pairs layers.0 × {fp32, bf16} + layers.1 = 3. Rank 1, Z3: broadcasts
  // 2·3 calls, 2·(16·4 + 4·2 + 16·4) = 272 B; reduces 3 calls (per parameter or packed),
  // 136 B. Without the dtype: 2 pairs, 4 broadcasts of 2·(64 + 16 + 64) = 288 B.
  p = plan::make_plan(t.tree, config({"ndim=1=adamw:bf16"}));
  for (auto mode : {plan::GradReduce::per_param, plan::GradReduce::packed}) {
    const auto ob = step(t.tree, p, engine::Method::dmuon, 4, plan::Reshard::z3, mode).owners;
    EXPECT_EQ(ob.broadcast.calls_per_rank[1], 6);
    EXPECT_EQ(ob.broadcast.bytes_per_rank[1], 272);
    EXPECT_EQ(ob.reduce.calls_per_rank[1], 3);
    EXPECT_EQ(ob.reduce.bytes_per_rank[1], 136);
  }
  const auto plain = step(t.tree, plan::make_plan(t.tree, config({"ndim=1=adamw"})),
                          engine::Method::dmuon, 4, plan::Reshard::z3, plan::GradReduce::packed)
                         .owners;
  EXPECT_EQ(plain.broadcast.calls_per_rank[1], 4);
  EXPECT_EQ(plain.broadcast.bytes_per_rank[1], 288);
  // The same wire type as the route's: one buffer, as without it.
  const auto same =
      step(t.tree, p, engine::Method::dmuon, 2, plan::Reshard::z3, plan::GradReduce::packed).owners;
  EXPECT_EQ(same.broadcast.calls_per_rank[1], 4);
  // ddp-dmuon (N = 2): reduce e·(M − m_1) = 136 B in 3 packed calls; the post-step broadcast
  // of fp32 masters per buffer: 3 calls, 4·36 = 144 B.
  const auto od =
      step(t.tree, p, engine::Method::ddp_dmuon, 4, plan::Reshard::z3, plan::GradReduce::packed)
          .owners;
  EXPECT_EQ(od.reduce.calls_per_rank[1], 3);
  EXPECT_EQ(od.reduce.bytes_per_rank[1], 136);
  EXPECT_EQ(od.broadcast.calls_per_rank[1], 3);
  EXPECT_EQ(od.broadcast.bytes_per_rank[1], 144);
  EXPECT_EQ(plan::site_packed_buffers(p.hooks.sites.at(0), p), 2);
  EXPECT_EQ(plan::site_packed_buffers(p.hooks.sites.at(1), p), 1);
  // The plan hash tells a dtype apart (ranks must agree on it).
  EXPECT_NE(plan::plan_hash(t.tree, p),
            plan::plan_hash(t.tree, plan::make_plan(t.tree, config({"ndim=1=adamw"}))));
}

TEST(ParamRoute, RoutingEveryParameterAwayIsAnInputError) {
  const Tree t;
  EXPECT_THROW((void)plan::make_plan(t.tree, config({"all=fsdp"})), InputError);
  EXPECT_THROW((void)plan::make_plan(t.tree, config({"all=sharded_adamw"})), InputError);
}

}  // namespace
