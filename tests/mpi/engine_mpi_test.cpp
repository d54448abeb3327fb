// Engine under MPI: resharding modes agree bit for bit, every method on every built-in tiny
// topology matches the one-process recomputation, the measured bytes equal SPEC §6's
// prediction exactly, and DMuon computes the same weights as DDP + Muon.

#include <gtest/gtest.h>
#include <mpi.h>

#include <string>

#include "common/plan_options.hpp"
#include "dmuon/engine/engine.hpp"
#include "dmuon/engine/reference.hpp"
#include "dmuon/plan/comm_volume.hpp"
#include "kernels/scoped_kokkos.hpp"
#include "mpi_test_util.hpp"

namespace {

using namespace dmuon;

class KokkosEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { kokkos_ = std::make_unique<kernels::host::ScopedKokkos>(); }
  void TearDown() override { kokkos_.reset(); }

 private:
  std::unique_ptr<kernels::host::ScopedKokkos> kokkos_;
};
[[maybe_unused]] auto* const kokkos_env =
    ::testing::AddGlobalTestEnvironment(new KokkosEnvironment);

struct Setup {
  model::Topology topo;
  plan::Plan plan;
};

Setup make_setup(const std::string& topology) {
  apps::PlanOptions po;
  po.topology = topology;
  Setup s{apps::load_topology(po), {}};
  s.plan = plan::make_plan(s.topo.tree, apps::make_plan_config(po, s.topo, test::world_size()));
  return s;
}

engine::EngineOptions small_options(engine::Method m) {
  engine::EngineOptions o;
  o.method = m;
  o.global_tokens = 8;  // the same global batch at every rank count
  o.steps = 2;
  o.warmup = 0;
  o.seed = 7;
  return o;
}

TEST(EngineMpi, Z2AndZ3GiveIdenticalWeights) {
  const auto s = make_setup("moe");
  for (auto m : {engine::Method::dmuon, engine::Method::fsdp_muon}) {
    auto o = small_options(m);
    o.reshard = plan::Reshard::z3;
    const auto z3 = engine::run_engine(s.topo.tree, s.plan, o, MPI_COMM_WORLD);
    o.reshard = plan::Reshard::z2;
    const auto z2 = engine::run_engine(s.topo.tree, s.plan, o, MPI_COMM_WORLD);
    EXPECT_TRUE(z3.audit_ok) << z3.audit_message;
    EXPECT_TRUE(z2.audit_ok) << z2.audit_message;
    if (test::world_rank() == 0) {
      ASSERT_EQ(z3.final_weights.size(), z2.final_weights.size());
      for (std::size_t i = 0; i < z3.final_weights.size(); ++i)
        EXPECT_EQ(z3.final_weights[i], z2.final_weights[i])
            << engine::method_name(m) << " param " << i;
    }
  }
}

TEST(EngineMpi, CheckPassesForEveryTopologyAndMethod) {
  for (const char* t : {"sequential", "vla", "moe", "nested", "llm", "moe-llm"}) {
    const auto s = make_setup(t);
    for (auto m : {engine::Method::dmuon, engine::Method::fsdp_adamw, engine::Method::fsdp_muon,
                   engine::Method::ddp_muon}) {
      auto o = small_options(m);
      o.check = true;
      const auto r = engine::run_engine(s.topo.tree, s.plan, o, MPI_COMM_WORLD);
      EXPECT_TRUE(r.audit_ok) << t << " " << engine::method_name(m) << ": " << r.audit_message;
      EXPECT_TRUE(r.check_passed) << t << " " << engine::method_name(m) << ": max rel error "
                                  << r.max_rel_error << " at " << r.worst_param;
    }
  }
}

TEST(EngineMpi, DmuonBytesEqualPrediction) {
  for (const char* t : {"moe", "nested", "moe-llm"}) {
    const auto s = make_setup(t);
    for (auto rs : {plan::Reshard::z3, plan::Reshard::z2}) {
      auto o = small_options(engine::Method::dmuon);
      o.compute = engine::Compute::none;
      o.reshard = rs;
      const auto r = engine::run_engine(s.topo.tree, s.plan, o, MPI_COMM_WORLD);
      const auto v = plan::predict_dmuon_volume(s.topo.tree, s.plan.hooks, s.plan.partition, rs);
      EXPECT_TRUE(r.audit_ok) << r.audit_message;  // every rank, every step, every kind
      const auto& bc = r.kinds[static_cast<std::size_t>(comm::CollectiveKind::broadcast)];
      const auto& rd = r.kinds[static_cast<std::size_t>(comm::CollectiveKind::reduce)];
      EXPECT_EQ(bc.bytes_measured, v.broadcast.max_bytes()) << t;
      EXPECT_EQ(rd.bytes_measured, v.reduce.max_bytes()) << t;
      EXPECT_EQ(bc.calls_per_step, v.broadcast.max_calls()) << t;
      EXPECT_EQ(rd.calls_per_step, v.reduce.max_calls()) << t;
      EXPECT_EQ(r.hook_calls_per_step, v.hook_calls) << t;
    }
  }
}

TEST(EngineMpi, DmuonMatchesDdpMuon) {
  const auto s = make_setup("llm");
  const auto a =
      engine::run_engine(s.topo.tree, s.plan, small_options(engine::Method::dmuon), MPI_COMM_WORLD);
  const auto b = engine::run_engine(s.topo.tree, s.plan, small_options(engine::Method::ddp_muon),
                                    MPI_COMM_WORLD);
  if (test::world_rank() == 0) {
    std::string worst;
    const double err =
        engine::max_relative_error(s.topo.tree, a.final_weights, b.final_weights, &worst);
    EXPECT_LT(err, 1e-4) << worst;
  }
}

}  // namespace
