// --route under MPI (plan/param_route.hpp): with 1-D parameters routed to owner-based AdamW,
// embeddings to Muon and routers to FSDP, every method passes --check against the one-process
// reference (which applies the same routes) and its byte audit, 1-D and HSDP; and a parameter
// routed to adamw moves exactly the bytes of a Muon one (the formula is route-blind).

#include <gtest/gtest.h>
#include <mpi.h>

#include <string>
#include <vector>

#include "common/plan_options.hpp"
#include "dmuon/engine/engine.hpp"
#include "kokkos_environment.hpp"
#include "mpi_test_util.hpp"

namespace {

using namespace dmuon;
using engine::Method;

const std::vector<std::string> kRoutes = {"ndim=1=adamw", "contains:embed=muon",
                                          "contains:router=fsdp"};

engine::EngineOptions small_options(Method m) {
  engine::EngineOptions o;
  o.method = m;
  o.global_tokens = 8;
  o.steps = 2;
  o.warmup = 0;
  o.seed = 5;
  o.check = true;
  return o;
}

TEST(RouteMpi, EveryMethodPassesCheckAndAudit) {
  const int n = test::world_size();
  for (const char* t : {"llm", "moe-llm", "vla"})
    for (int replicate : {1, 2}) {
      if (n % replicate != 0) continue;
      apps::PlanOptions po;
      po.topology = t;
      po.replicate = replicate;
      po.routes = kRoutes;
      const auto topo = apps::load_topology(po);
      const auto p = plan::make_plan(topo.tree, apps::make_plan_config(po, topo, n));
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

// The same owner-based set with the 1-D parameters on Muon instead of AdamW: identical calls
// and bytes on every channel (routes change the update, not the traffic).
TEST(RouteMpi, AdamwRouteMovesTheBytesOfAMuonRoute) {
  const int n = test::world_size();
  apps::PlanOptions po;
  po.topology = "llm";
  po.routes = {"ndim=1=adamw"};
  const auto topo = apps::load_topology(po);
  const auto pa = plan::make_plan(topo.tree, apps::make_plan_config(po, topo, n));
  po.routes = {"ndim=1=muon"};
  const auto pm = plan::make_plan(topo.tree, apps::make_plan_config(po, topo, n));
  ASSERT_EQ(pa.hooks.dedicated, pm.hooks.dedicated);
  for (auto m : {Method::dmuon, Method::ddp_dmuon}) {
    auto o = small_options(m);
    o.check = false;
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

}  // namespace
