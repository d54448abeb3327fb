// The projection of --accum and --clip-norm against answers derived by hand, on a CPU machine
// whose compute is linear in the sample count (no overheads, flop-bound GEMMs: memory so fast
// that every memory-bound kernel costs nothing) and whose collectives cost α + S/β exactly
// (test_machines.hpp). On a CPU machine communication does not overlap compute, so each phase
// of the step is the sum of its own ops.
//
//   --accum K: each micro-step's forward/backward runs on its micro-batch's samples
//     (engine::micro_sample_range), so with samples that split evenly the step's forward and
//     backward compute equal K = 1's; weight collectives run every micro-step: with Z2 and no
//     prefetch every one sits in the forward's communication phase, which is then K × K = 1's,
//     and the gradient reduces stay 1 per step.
//   --clip-norm: one all-reduce of one fp32 over the world, alone on the machine: its time is
//     collective_time(all_reduce, 1, 4 bytes, world) = 2α + 4·2(N−1)/N / β; the two clip
//     passes are memory-bound (0 here), so the optimizer's other phase grows by exactly that.

#include <gtest/gtest.h>

#include "dmuon/model/topology.hpp"
#include "dmuon/plan/plan.hpp"
#include "dmuon/project/collective_cost.hpp"
#include "dmuon/project/projection.hpp"
#include "same_rank_figures.hpp"
#include "test_machines.hpp"
#include "test_plan_options.hpp"

namespace {

using namespace dmuon;
using comm::CollectiveKind;
using engine::CommGroup;
using engine::Method;
using engine::Phase;

constexpr int kWorld = 4;
constexpr double kAlphaUs = 10, kBetaGBps = 5;

struct Built {
  model::Topology topo;
  plan::Plan plan;
};

Built build(const std::string& topology) {
  test::PlanOptions po;
  po.topology = topology;
  Built b{test::load_topology(po), {}};
  b.plan = plan::make_plan(b.topo.tree, test::make_plan_config(po, b.topo, kWorld));
  return b;
}

project::Machine linear_cpu() {
  return project::testing::measured_machine(kWorld, kAlphaUs, kBetaGBps, "cpu", 1e12);
}

project::Projection run(const Built& b, Method method, int accum, bool clip,
                        project::Symmetry symmetry = project::Symmetry::reduced) {
  project::ProjectionOptions po;
  po.engine.step.method = method;
  po.engine.step.reshard = plan::Reshard::z2;
  po.engine.step.prefetch = 0;
  po.engine.step.tokens = 16;  // 64 global samples: every micro-batch splits evenly over 4 ranks
  po.engine.step.accum = accum;
  po.engine.step.clip_norm = clip ? 1.0 : 0.0;
  po.symmetry = symmetry;
  return project::project(b.topo.tree, b.plan, linear_cpu(), po);
}

double phase(const project::Projection& p, Phase ph) {
  return p.result.phases_ms[static_cast<std::size_t>(ph)];
}

std::int64_t calls(const project::Projection& p, CommGroup g, CollectiveKind k) {
  return p.result.kinds[engine::channel_index(g, k)].calls_per_step;
}

TEST(ProjectAccum, ComputeStaysWeightCollectivesScaleWithK) {
  const Built b = build("moe");
  for (Method m : {Method::dmuon, Method::fsdp_adamw, Method::fsdp_muon}) {
    const auto one = run(b, m, 1, false);
    ASSERT_TRUE(one.result.audit_ok) << one.result.audit_message;
    const double compute1 =
        phase(one, Phase::forward_compute) + phase(one, Phase::backward_compute);
    const double weights1 = phase(one, Phase::forward_comm);
    ASSERT_GT(compute1, 0);
    ASSERT_GT(weights1, 0);
    for (int k : {2, 4}) {
      const auto acc = run(b, m, k, false);
      const std::string what = std::string(engine::method_name(m)) + " K=" + std::to_string(k);
      EXPECT_TRUE(acc.result.audit_ok) << what << ": " << acc.result.audit_message;
      const double compute =
          phase(acc, Phase::forward_compute) + phase(acc, Phase::backward_compute);
      EXPECT_NEAR(compute, compute1, 1e-9 * compute1) << what;
      EXPECT_NEAR(phase(acc, Phase::forward_comm), k * weights1, 1e-9 * k * weights1) << what;
      // Weight collectives K per step, gradient reduces once (fsdp-muon's all-gather channel
      // also carries its optimizer's gather, once per step: covered by the audit).
      const auto weight_kind =
          m == Method::dmuon ? CollectiveKind::broadcast : CollectiveKind::all_gather;
      if (m != Method::fsdp_muon) {
        EXPECT_EQ(calls(acc, CommGroup::shard, weight_kind),
                  k * calls(one, CommGroup::shard, weight_kind))
            << what;
      }
      const auto reduce_kind =
          m == Method::dmuon ? CollectiveKind::reduce : CollectiveKind::reduce_scatter;
      EXPECT_EQ(calls(acc, CommGroup::shard, reduce_kind),
                calls(one, CommGroup::shard, reduce_kind))
          << what;
    }
  }
}

TEST(ProjectClip, AddsExactlyOneWorldAllReduceOfOneFloat) {
  const Built b = build("moe");
  const auto m = linear_cpu();
  // 2α + 4 B · 2·3/4 / β, by hand; and the model's own figure for the same collective.
  const double by_hand_ms = 2 * kAlphaUs * 1e-3 + 4.0 * 1.5 / (kBetaGBps * 1e9) * 1e3;
  const double model_ms = 1e3 * project::collective_time(m, CollectiveKind::all_reduce, 1, 4,
                                                         project::CommSpan{kWorld, 1})
                                    .total_s();
  EXPECT_NEAR(model_ms, by_hand_ms, 1e-12);
  for (Method meth : {Method::dmuon, Method::fsdp_adamw, Method::ddp_muon}) {
    const auto plain = run(b, meth, 1, false);
    const auto clip = run(b, meth, 1, true);
    const std::string what = engine::method_name(meth);
    EXPECT_TRUE(clip.result.audit_ok) << what << ": " << clip.result.audit_message;
    EXPECT_EQ(calls(plain, CommGroup::world, CollectiveKind::all_reduce), 0) << what;
    EXPECT_EQ(calls(clip, CommGroup::world, CollectiveKind::all_reduce), 1) << what;
    EXPECT_NEAR(phase(clip, Phase::optimizer_other) - phase(plain, Phase::optimizer_other),
                model_ms, 1e-9)
        << what;
    EXPECT_NEAR(phase(clip, Phase::step) - phase(plain, Phase::step), model_ms, 1e-9) << what;
  }
}

TEST(ProjectClipAccum, ReducedReplayEqualsFullReplay) {
  for (const char* topology : {"moe", "vla"}) {
    const Built b = build(topology);
    for (Method m : {Method::dmuon, Method::ddp_dmuon}) {
      const auto full = run(b, m, 3, true, project::Symmetry::full);
      const auto red = run(b, m, 3, true, project::Symmetry::reduced);
      EXPECT_TRUE(red.result.audit_ok) << topology << ": " << red.result.audit_message;
      EXPECT_TRUE(project::testing::same_rank_figures(full, red, 1e-9)) << topology;
    }
  }
}

}  // namespace
