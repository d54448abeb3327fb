// --route under MPI (plan/param_route.hpp): with 1-D parameters routed to owner-based AdamW,
// embeddings to Muon and routers to FSDP, every method passes --check against the one-process
// reference (which applies the same routes) and its byte audit, 1-D and HSDP; and a parameter
// routed to adamw moves exactly the bytes of a Muon one (the formula is route-blind); and
// sharded_adamw parameters: --check, audit and hand-computed all-gather / reduce-scatter /
// HSDP all-reduce calls and bytes on a hand-built tree, fp32 and bf16 wires; and --route
// dtypes: each parameter ends exactly as a run in its own type leaves it.

#include <gtest/gtest.h>
#include <mpi.h>

#include <array>
#include <string>
#include <vector>

#include "dmuon/engine/engine.hpp"
#include "kokkos_environment.hpp"
#include "mpi_test_util.hpp"
#include "test_plan_options.hpp"

namespace {

using namespace dmuon;
using engine::Method;

const std::vector<std::string> kRoutes = {"ndim=1=adamw", "contains:embed=muon",
                                          "contains:router=fsdp"};
// The same with the 1-D parameters on the sharded_adamw route.
const std::vector<std::string> kShardedRoutes = {"ndim=1=sharded_adamw", "contains:embed=muon",
                                                 "contains:router=fsdp"};

engine::EngineOptions small_options(Method m) {
  engine::EngineOptions o;
  o.step.method = m;
  o.step.global_tokens = 8;
  o.run.steps = 2;
  o.run.warmup = 0;
  o.run.seed = 5;
  o.run.check = true;
  return o;
}

TEST(RouteMpi, EveryMethodPassesCheckAndAudit) {
  const int n = test::world_size();
  for (const char* t : test::axis({"moe-llm", "llm", "vla"}))
    for (int replicate : test::axis({2, 1})) {
      if (n % replicate != 0) continue;
      test::PlanOptions po;
      po.topology = t;
      po.replicate = replicate;
      po.routes = kRoutes;
      const auto topo = test::load_topology(po);
      const auto p = plan::make_plan(topo.tree, test::make_plan_config(po, topo, n));
      for (auto m : {Method::dmuon, Method::ddp_dmuon, Method::fsdp_muon, Method::ddp_muon,
                     Method::fsdp_adamw}) {
        const auto r = engine::run_engine(topo.tree, p, small_options(m), MPI_COMM_WORLD);
        const std::string what =
            std::string(t) + " R=" + std::to_string(replicate) + " " + engine::method_name(m);
        EXPECT_TRUE(r.audit_ok) << what << ": " << r.audit_message;
        EXPECT_TRUE(r.check_passed)
            << what << ": max rel error " << r.max_rel_error << " at " << r.worst_param;
      }
    }
}

TEST(RouteMpi, ShardedAdamwPassesCheckAndAuditEverywhere) {
  const int n = test::world_size();
  for (const char* t : test::axis({"moe-llm", "llm", "vla"}))
    for (int replicate : test::axis({2, 1})) {
      if (n % replicate != 0) continue;
      for (auto rs : test::axis({plan::Reshard::z2, plan::Reshard::z3})) {
        test::PlanOptions po;
        po.topology = t;
        po.replicate = replicate;
        po.reshard = rs;
        po.routes = kShardedRoutes;
        const auto topo = test::load_topology(po);
        const auto p = plan::make_plan(topo.tree, test::make_plan_config(po, topo, n));
        ASSERT_FALSE(p.sharded_hooks.dedicated.empty()) << t;
        for (auto m : {Method::dmuon, Method::fsdp_muon, Method::ddp_dmuon}) {
          auto o = small_options(m);
          o.step.reshard = rs;
          const auto r = engine::run_engine(topo.tree, p, o, MPI_COMM_WORLD);
          const std::string what = std::string(t) + " R=" + std::to_string(replicate) + " " +
                                   plan::reshard_name(rs) + " " + engine::method_name(m);
          EXPECT_TRUE(r.audit_ok) << what << ": " << r.audit_message;
          EXPECT_TRUE(r.check_passed)
              << what << ": max rel error " << r.max_rel_error << " at " << r.worst_param;
        }
      }
    }
}

// layers.0 {w [4,4], b [4]}, layers.1 {w [4,4], b [3]}; w dedicated (Muon), b sharded_adamw.
// Per rank per step, G = N / R, c_b = ceil(n_b / G), e wire bytes, Z3:
//   all_gather      4 calls (2 parameters × 2 gathers), 2·e·(G−1)·(c_b0 + c_b1) bytes
//   reduce_scatter  2 calls, e·(G−1)·(c_b0 + c_b1) bytes
//   HSDP all_reduce 2 calls, e·(⌊c_b0·(R−1)/R⌋ + ⌊c_b1·(R−1)/R⌋) bytes
// The owner-based w's add no all-gather or reduce-scatter under dmuon.
TEST(RouteMpi, ShardedAdamwBytesByHand) {
  const int n = test::world_size();
  model::ModuleTree tree("M");
  const int list = tree.add_module(0, "layers", "ModuleList");
  for (int i = 0; i < 2; ++i) {
    const int l = tree.add_module(list, std::to_string(i), "L");
    tree.add_parameter(l, "w", {4, 4});
    tree.add_parameter(l, "b", {i == 0 ? 4 : 3});
  }
  tree.finalize();
  // Hand values per (N, R): {all_gather B, reduce_scatter B, replicate all_reduce B} at fp32.
  struct Expect {
    int world, replicate;
    std::int64_t gather, scatter, hsdp;
  };
  const Expect table[] = {{1, 1, 0, 0, 0},     // G = 1: c = 4, 3; nothing moves
                          {2, 1, 32, 16, 0},   // G = 2: c = 2, 2: 2·4·1·4, 4·1·4
                          {4, 1, 48, 24, 0},   // G = 4: c = 1, 1: 2·4·3·2, 4·3·2
                          {8, 1, 112, 56, 0},  // G = 8: c = 1, 1: 2·4·7·2, 4·7·2
                          {2, 2, 0, 0, 12},    // G = 1, R = 2: c = 4, 3: 4·(2 + 1)
                          {4, 2, 32, 16, 8},   // G = 2: c = 2, 2: 4·(1 + 1)
                          {8, 2, 48, 24, 0}};  // G = 4: c = 1, 1: ⌊1/2⌋ = 0
  using comm::CollectiveKind;
  const auto row = engine::CommGroup::shard, column = engine::CommGroup::replicate;
  int ran = 0;
  for (const auto& e : table) {
    if (e.world != n) continue;
    plan::PlanConfig pc;
    pc.dedicate_rule = "ndim=2";
    pc.routes = {"ndim=1=sharded_adamw"};
    pc.partition.shard = n / e.replicate;
    pc.partition.replicate = e.replicate;
    const auto p = plan::make_plan(tree, pc);
    ASSERT_EQ(p.sharded_hooks.sites.size(), 2u);  // layers.0 and layers.1
    for (const int wire : {4, 2}) {
      auto o = small_options(Method::dmuon);
      o.step.wire = wire == 4 ? kernels::Dtype::f32 : kernels::Dtype::bf16;
      const auto r = engine::run_engine(tree, p, o, MPI_COMM_WORLD);
      const std::string what = "N=" + std::to_string(n) + " R=" + std::to_string(e.replicate) +
                               " e=" + std::to_string(wire);
      EXPECT_TRUE(r.audit_ok) << what << ": " << r.audit_message;
      EXPECT_TRUE(r.check_passed) << what << ": " << r.max_rel_error << " at " << r.worst_param;
      const auto& ag = r.kinds[engine::channel_index(row, CollectiveKind::all_gather)];
      const auto& rs = r.kinds[engine::channel_index(row, CollectiveKind::reduce_scatter)];
      const auto& ar = r.kinds[engine::channel_index(column, CollectiveKind::all_reduce)];
      // bf16 halves every sharded_adamw byte (masters stay fp32).
      EXPECT_EQ(ag.bytes_measured, e.gather * wire / 4) << what;
      EXPECT_EQ(rs.bytes_measured, e.scatter * wire / 4) << what;
      EXPECT_EQ(ar.bytes_measured, e.hsdp * wire / 4) << what;
      EXPECT_EQ(ag.calls_per_step, 4) << what;
      EXPECT_EQ(rs.calls_per_step, 2) << what;
      EXPECT_EQ(ar.calls_per_step, e.replicate > 1 ? 2 : 0) << what;
      // Hooks stay those of the two owner-based sites (Z3: 4 fire, 3 communicate, per site).
      EXPECT_EQ(r.hook_calls_per_step, 8) << what;
      EXPECT_EQ(r.hook_comm_calls_per_step, 6) << what;
    }
    ++ran;
  }
  EXPECT_GE(ran, 1);
}

// The same owner-based set with the 1-D parameters on Muon instead of AdamW: identical calls
// and bytes on every channel (routes change the update, not the traffic).
TEST(RouteMpi, AdamwRouteMovesTheBytesOfAMuonRoute) {
  const int n = test::world_size();
  test::PlanOptions po;
  po.topology = "llm";
  po.routes = {"ndim=1=adamw"};
  const auto topo = test::load_topology(po);
  const auto pa = plan::make_plan(topo.tree, test::make_plan_config(po, topo, n));
  po.routes = {"ndim=1=muon"};
  const auto pm = plan::make_plan(topo.tree, test::make_plan_config(po, topo, n));
  ASSERT_EQ(pa.hooks.dedicated, pm.hooks.dedicated);
  for (auto m : {Method::dmuon, Method::ddp_dmuon}) {
    auto o = small_options(m);
    o.run.check = false;
    const auto a = engine::run_engine(topo.tree, pa, o, MPI_COMM_WORLD);
    const auto b = engine::run_engine(topo.tree, pm, o, MPI_COMM_WORLD);
    EXPECT_TRUE(a.audit_ok) << a.audit_message;
    for (std::size_t c = 0; c < engine::kChannelCount; ++c) {
      EXPECT_EQ(a.kinds[c].calls_per_step, b.kinds[c].calls_per_step) << engine::channel_name(c);
      EXPECT_EQ(a.kinds[c].bytes_measured, b.kinds[c].bytes_measured) << engine::channel_name(c);
    }
    // AdamW keeps a second moment: the owner-based AdamW parameters add state.
    EXPECT_GE(a.momentum_bytes, b.momentum_bytes);
  }
}

// --route dtypes: a parameter's arithmetic depends on its own wire type only (its synthetic
// work and its optimizer see nothing of the others without --clip-norm). So with some
// parameters routed to the other type O than the wire W — the 1-D ones (sharded_adamw) and the
// embeddings (fsdp); then owner-based, the 1-D ones (adamw) and the MLP matrices (muon), packed
// apart from their sites' others — every method's final weights must be bit-identical to those
// of a plain run on W for the other parameters, and to those of a plain run on O for the routed
// ones; the routed run also passes its byte audit and --check.
TEST(RouteMpi, RouteDtypeRunsEachParameterAsItsOwnTypeDoes) {
  const int n = test::world_size();
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  using Routes = std::vector<std::string>;
  const auto route_sets = test::axis<Routes>(
      {{"ndim=1=sharded_adamw", "contains:embed=fsdp"}, {"ndim=1=adamw", "contains:mlp=muon"}});
  for (const auto& routes : route_sets)
    for (int replicate : test::axis({2, 1})) {
      if (n % replicate != 0) continue;
      // R = 1: bf16 routes on an fp32 wire; R = 2: fp32 routes on a bf16 wire.
      const auto wire = replicate == 1 ? kernels::Dtype::f32 : kernels::Dtype::bf16;
      const auto other = replicate == 1 ? kernels::Dtype::bf16 : kernels::Dtype::f32;
      const std::string suffix = replicate == 1 ? ":bf16" : ":fp32";
      test::PlanOptions po;
      po.topology = "llm";
      po.replicate = replicate;
      po.routes = routes;
      const auto topo = test::load_topology(po);
      const auto plain = plan::make_plan(topo.tree, test::make_plan_config(po, topo, n));
      po.routes.clear();
      for (const auto& r : routes) po.routes.push_back(r + suffix);
      const auto routed = plan::make_plan(topo.tree, test::make_plan_config(po, topo, n));
      ASSERT_TRUE(routed.has_route_dtypes());
      for (auto m : {Method::dmuon, Method::fsdp_adamw, Method::fsdp_muon, Method::ddp_muon,
                     Method::ddp_dmuon}) {
        const std::string what =
            routes.front() + " R=" + std::to_string(replicate) + " " + engine::method_name(m);
        auto o = small_options(m);
        o.step.wire = wire;
        o.run.keep_final_weights = true;
        // --accum: the alt gradients accumulate in fp32 over the micro-steps as the wire's do.
        if (m == Method::dmuon || m == Method::fsdp_adamw) o.step.accum = 2;
        // A 16-bit check of Muon parameters needs full-rank samples (result_collection.cpp).
        if (wire != kernels::Dtype::f32 || routes.back() == "contains:mlp=muon")
          o.step.global_tokens = 512;
        const auto a = engine::run_engine(topo.tree, routed, o, MPI_COMM_WORLD);
        EXPECT_TRUE(a.audit_ok) << what << ": " << a.audit_message;
        EXPECT_TRUE(a.check_passed) << what << ": " << a.max_rel_error << " at " << a.worst_param;
        o.run.check = false;
        const auto on_wire = engine::run_engine(topo.tree, plain, o, MPI_COMM_WORLD);
        o.step.wire = other;
        const auto on_other = engine::run_engine(topo.tree, plain, o, MPI_COMM_WORLD);
        if (rank != 0) continue;
        int routed_params = 0;
        for (int pid : topo.tree.parameter_order()) {
          const auto i = static_cast<std::size_t>(pid);
          const bool in_other = routed.wire_bytes(pid, 0) > 0;
          routed_params += in_other;
          const auto& expect =
              in_other ? on_other.final_weights.at(i) : on_wire.final_weights.at(i);
          EXPECT_EQ(a.final_weights.at(i), expect)
              << what << " " << topo.tree.parameter(pid).name
              << (in_other ? " (routed to the other type)" : "");
        }
        EXPECT_GT(routed_params, 0);
      }
    }
}

}  // namespace
