// The DMuon-against-AdamW terms (cost_vs_adamw.hpp): they add up to the step difference; a
// mechanism a row does not have costs 0; and on one rank, where nothing waits for anyone, the
// owners' Newton–Schulz term is the sum of the Newton–Schulz ops the rank runs, priced one by
// one with the same cost model (OpCost::newton_schulz), and the publish wait is 0.

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "dmuon/engine/step/step_layout.hpp"
#include "dmuon/project/cost_vs_adamw.hpp"
#include "dmuon/project/op_cost.hpp"
#include "test_machines.hpp"
#include "test_plan_options.hpp"

namespace {

using namespace dmuon;

struct Built {
  model::Topology topo;
  plan::Plan plan;
};

Built build(const std::string& topology, int world) {
  test::PlanOptions po;
  po.topology = topology;
  Built b{test::load_topology(po), {}};
  b.plan = plan::make_plan(b.topo.tree, test::make_plan_config(po, b.topo, world));
  return b;
}

std::map<std::string, double> terms_of(const Built& b, const project::Machine& m,
                                       engine::DmuonSchedule schedule, double* difference) {
  project::ProjectionOptions po;
  po.engine.step.tokens = 7;
  po.engine.step.dmuon_schedule = schedule;
  po.engine.step.method = engine::Method::fsdp_adamw;
  const auto adamw = project::project(b.topo.tree, b.plan, m, po);
  po.engine.step.method = engine::Method::dmuon;
  const auto dmuon = project::project(b.topo.tree, b.plan, m, po);
  const auto step = [](const project::Projection& p) {
    return p.result.phases_ms[static_cast<std::size_t>(engine::Phase::step)];
  };
  *difference = step(dmuon) - step(adamw);
  std::map<std::string, double> out;
  for (const auto& [term, ms] : project::cost_vs_adamw(b.topo.tree, b.plan, m, po, dmuon, adamw))
    out[term] = ms;
  return out;
}

TEST(CostVsAdamw, TermsAddUpToTheStepDifference) {
  const Built b = build("llm", 8);
  const auto m = project::testing::nccl_machine(4, 100, 10);
  for (auto schedule : {engine::DmuonSchedule::reference, engine::DmuonSchedule::overlapped}) {
    double difference = 0;
    const auto t = terms_of(b, m, schedule, &difference);
    ASSERT_EQ(t.size(), std::size(project::kCostTerms));
    double sum = 0;
    for (const auto& [term, ms] : t) sum += ms;
    EXPECT_NEAR(sum, difference, 1e-9) << engine::dmuon_schedule_name(schedule);
    EXPECT_GE(t.at("owners_newton_schulz"), 0.0);
    EXPECT_GE(t.at("publish_wait"), 0.0);
    if (schedule == engine::DmuonSchedule::overlapped) {
      // Neither a communicator's order nor serial rooted calls: the replays are the same.
      EXPECT_EQ(t.at("communicator_serialisation"), 0.0);
      EXPECT_EQ(t.at("broadcast_latency"), 0.0);
    } else {
      EXPECT_EQ(t.at("barrier_wait"), 0.0);  // the reference's step has no barrier
    }
  }
}

TEST(CostVsAdamw, OnOneRankTheNewtonSchulzTermIsEveryNewtonSchulzOp) {
  const Built b = build("llm", 1);
  const auto m = project::testing::nccl_machine(4, 100, 10);
  double difference = 0;
  const auto t = terms_of(b, m, engine::DmuonSchedule::reference, &difference);
  engine::EngineOptions eo;
  eo.step.tokens = 7;
  eo.step.fsdp2 = true;  // as the projection runs a GPU machine
  const project::OpCost cost(m, eo, 1);
  const auto layout = engine::make_layout(b.topo.tree, b.plan, eo.step, 0);
  double ns_ms = 0;
  for (const auto& p : layout.params)
    if (p.muon && p.updated_here) ns_ms += 1e3 * cost.newton_schulz(p);
  ASSERT_GT(ns_ms, 0.0);
  EXPECT_NEAR(t.at("owners_newton_schulz"), ns_ms, 1e-9 * ns_ms);
  EXPECT_NEAR(t.at("publish_wait"), 0.0, 1e-12);  // the phases' sums, in another order
  EXPECT_EQ(t.at("barrier_wait"), 0.0);
}

}  // namespace
