// --reduce-dtype under MPI: with gradients in another type than the weights (bf16 weights and
// fp32 gradients, torchtitan's FSDP2 default, and the other way round) every method passes its
// byte audit and --check against the one-process reference, 1-D and HSDP, per-parameter and
// packed reduces, with and without a --route dtype; and on a hand-built tree the measured
// bytes of each gradient channel are the hand-computed ones.

#include <gtest/gtest.h>
#include <mpi.h>

#include <string>
#include <vector>

#include "dmuon/engine/engine.hpp"
#include "kokkos_environment.hpp"
#include "mpi_test_util.hpp"
#include "test_plan_options.hpp"

namespace {

using namespace dmuon;
using engine::Method;
using kernels::Dtype;

engine::EngineOptions options(Method m, Dtype wire, Dtype reduce) {
  engine::EngineOptions o;
  o.step.method = m;
  o.step.wire = wire;
  o.step.reduce = reduce;
  // 16-bit --check is meaningful from 128 samples (fewer leave Muon parameters null directions
  // in which Newton–Schulz amplifies the rounding: result_collection's check note).
  o.step.global_tokens = 128;
  o.run.steps = 2;
  o.run.warmup = 0;
  o.run.seed = 3;
  o.run.check = true;
  return o;
}

TEST(ReduceDtypeMpi, EveryMethodPassesAuditAndCheck) {
  const int n = test::world_size();
  const std::pair<Dtype, Dtype> types[] = {{Dtype::bf16, Dtype::f32}, {Dtype::f32, Dtype::bf16}};
  for (const char* t : {"llm", "moe"})
    for (int replicate : {1, 2}) {
      if (n % replicate != 0) continue;
      for (const auto& routes : std::vector<std::vector<std::string>>{
               {}, {"ndim=1=sharded_adamw:bf16", "contains:embed=fsdp:fp32"}}) {
        test::PlanOptions po;
        po.topology = t;
        po.replicate = replicate;
        po.routes = routes;
        const auto topo = test::load_topology(po);
        const auto p = plan::make_plan(topo.tree, test::make_plan_config(po, topo, n));
        for (auto m : {Method::dmuon, Method::fsdp_adamw, Method::fsdp_muon, Method::ddp_muon,
                       Method::ddp_dmuon})
          for (const auto& [wire, reduce] : types)
            for (auto gr : {plan::GradReduce::per_param, plan::GradReduce::packed}) {
              if (gr == plan::GradReduce::packed && m != Method::dmuon) continue;
              auto o = options(m, wire, reduce);
              o.step.grad_reduce = gr;
              const auto r = engine::run_engine(topo.tree, p, o, MPI_COMM_WORLD);
              const std::string what =
                  std::string(t) + " R=" + std::to_string(replicate) + " " +
                  engine::method_name(m) + " " + engine::dtype_flag_name(wire) + "/" +
                  engine::dtype_flag_name(reduce) + " " + plan::grad_reduce_name(gr) +
                  (routes.empty() ? "" : " routed");
              EXPECT_TRUE(r.audit_ok) << what << ": " << r.audit_message;
              EXPECT_TRUE(r.check_passed)
                  << what << ": max rel error " << r.max_rel_error << " at " << r.worst_param;
            }
      }
    }
}

// layers.0 {w [4,4]}, layers.1 {w [4,4]}, norm {weight [6]}: the w's owner-based (rank 0 owns
// both: rank0 strategy), the norm FSDP (chunk c = ceil(6 / N)). bf16 weights, fp32 gradients,
// Z3, per step, measured as the max over ranks:
//   broadcast       2 passes × 2 pairs, 2 · 2 · (16 + 16) = 128 B (any rank but the owner)
//   reduce          2 calls, 4 · (16 + 16) = 128 B
//   all_gather      2 calls, 2 · 2 · (N − 1) · c B
//   reduce_scatter  1 call, 4 · (N − 1) · c B
TEST(ReduceDtypeMpi, MeasuredBytesByHand) {
  const int n = test::world_size();
  if (n < 2) GTEST_SKIP() << "needs 2 ranks";
  model::ModuleTree tree("M");
  const int list = tree.add_module(0, "layers", "ModuleList");
  for (int i = 0; i < 2; ++i)
    tree.add_parameter(tree.add_module(list, std::to_string(i), "L"), "w", {4, 4});
  tree.add_parameter(tree.add_module(0, "norm", "Norm"), "weight", {6});
  tree.finalize();
  plan::PlanConfig pc;
  pc.dedicate_rule = "ndim=2";
  pc.partition.shard = n;
  pc.partition.strategy = partition::parse_strategy("rank0");
  pc.partition.pack = false;
  const auto p = plan::make_plan(tree, pc);
  const auto r =
      engine::run_engine(tree, p, options(Method::dmuon, Dtype::bf16, Dtype::f32), MPI_COMM_WORLD);
  EXPECT_TRUE(r.audit_ok) << r.audit_message;
  EXPECT_TRUE(r.check_passed) << r.max_rel_error << " at " << r.worst_param;
  using comm::CollectiveKind;
  const auto kind = [&](CollectiveKind k) {
    return r.kinds[engine::channel_index(engine::CommGroup::shard, k)];
  };
  const std::int64_t c = (6 + n - 1) / n;
  EXPECT_EQ(kind(CollectiveKind::broadcast).calls_per_step, 4);
  EXPECT_EQ(kind(CollectiveKind::broadcast).bytes_measured, 128);
  EXPECT_EQ(kind(CollectiveKind::reduce).calls_per_step, 2);
  EXPECT_EQ(kind(CollectiveKind::reduce).bytes_measured, 128);
  EXPECT_EQ(kind(CollectiveKind::all_gather).bytes_measured, 2 * 2 * (n - 1) * c);
  EXPECT_EQ(kind(CollectiveKind::reduce_scatter).calls_per_step, 1);
  EXPECT_EQ(kind(CollectiveKind::reduce_scatter).bytes_measured, 4 * (n - 1) * c);
}

}  // namespace
