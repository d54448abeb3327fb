// Pipeline stages in the engine (--pp P, engine/step/pipeline_order.hpp): the world as P
// stages of world/P ranks, stage s holding its blocks of the tiny llm (model::pipeline_stage),
// each stage a DMuon / FSDP world of its own whose micro-batches run in 1F1B order between
// the receives and sends of the stage boundaries. Every run is --check'ed (each stage's
// weights against the one-process reference of its blocks: the 1F1B order changes when a
// micro-batch's forward runs, never what the gradients sum to) and audited; the boundary's
// traffic counted by hand: per neighbour and micro-batch one send and one receive of one
// message (here 256 fp32 elements), so with m micro-batches an end stage makes 2m calls and
// sends m x 1,024 bytes, an inner stage twice that.

#include <gtest/gtest.h>
#include <mpi.h>

#include <fmt/format.h>

#include <functional>

#include "common/plan_setup.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/comm/communicator.hpp"
#include "dmuon/engine/engine.hpp"
#include "dmuon/engine/exec/pipeline_link.hpp"
#include "dmuon/model/pipeline_stage.hpp"
#include "kokkos_environment.hpp"
#include "mpi_test_util.hpp"
#include "plan_setup.hpp"
#include "test_plan_options.hpp"

namespace {

using namespace dmuon;
using engine::CommGroup;
using engine::Method;

constexpr std::int64_t kMessage = 256;  // fp32 elements per boundary message

engine::RunResult run(int stages, Method method, plan::Reshard reshard, int accum,
                      const std::function<void(engine::EngineOptions&)>& adjust = {}) {
  test::PlanOptions po;
  po.topology = "llm";
  po.reshard = reshard;
  const model::Topology whole = test::load_topology(po);
  const int stage_size = test::world_size() / stages;
  const int stage = test::world_rank() / stage_size;
  const model::Topology mine = model::pipeline_stage(whole, stages, 1, stage);
  const plan::Plan plan = plan::make_plan(mine.tree, test::make_plan_config(po, mine, stage_size));
  engine::EngineOptions o;
  o.step.method = method;
  o.step.reshard = reshard;
  o.step.global_tokens = 16;
  o.step.accum = accum;
  o.step.stages = {stages, stage, 1, kMessage};
  o.run.steps = 2;
  o.run.warmup = 1;
  o.run.seed = 11;
  o.run.check = true;
  if (adjust) adjust(o);
  return engine::run_engine(mine.tree, plan, o, MPI_COMM_WORLD);
}

const engine::KindResult& boundary(const engine::RunResult& r) {
  return r.kinds[engine::channel_index(CommGroup::pipeline, comm::CollectiveKind::send_recv)];
}

void expect_checked(const engine::RunResult& r) {
  EXPECT_TRUE(r.audit_ok) << r.audit_message;
  EXPECT_TRUE(r.checked);
  EXPECT_TRUE(r.check_passed) << "max rel error " << r.max_rel_error << " at " << r.worst_param
                              << " " << r.check_note;
}

// Calls and bytes a stage makes per step, by hand (see the top).
void expect_boundary(const engine::RunResult& r, int stages, int accum) {
  const bool inner = r.pipeline_stage > 0 && r.pipeline_stage + 1 < stages;
  const std::int64_t neighbours = inner ? 2 : 1;
  EXPECT_EQ(boundary(r).calls_per_step, 2 * accum * neighbours);
  EXPECT_EQ(boundary(r).bytes_measured, accum * neighbours * kMessage * 4);
  EXPECT_EQ(boundary(r).bytes_formula, boundary(r).bytes_measured);
}

TEST(PpEngine, TwoStagesEveryMethodChecked) {
  if (test::world_size() % 2 != 0) GTEST_SKIP() << "2 stages: an even world";
  for (Method m : {Method::dmuon, Method::fsdp_adamw, Method::fsdp_muon}) {
    for (int accum : {1, 4}) {
      SCOPED_TRACE(fmt::format("{} accum {}", engine::method_name(m), accum));
      const auto r = run(2, m, plan::Reshard::z3, accum);
      expect_checked(r);
      EXPECT_EQ(r.pipeline_stages, 2);
      EXPECT_EQ(r.pipeline_stage, test::world_rank() / (test::world_size() / 2));
      EXPECT_EQ(r.world_size, test::world_size() / 2);
      expect_boundary(r, 2, accum);
    }
  }
}

// Z2 keeps the weights a forward gathered through the cool-down's back-to-back backwards;
// --pp-microbatches: 4 micro-batches in 2 runs of the schedule.
TEST(PpEngine, Z2AndRunsChecked) {
  if (test::world_size() % 2 != 0) GTEST_SKIP() << "2 stages: an even world";
  const auto r = run(2, Method::dmuon, plan::Reshard::z2, 3);
  expect_checked(r);
  expect_boundary(r, 2, 3);
  const auto runs = run(2, Method::dmuon, plan::Reshard::z3, 4,
                        [](engine::EngineOptions& o) { o.step.stages.runs = 2; });
  expect_checked(runs);
  expect_boundary(runs, 2, 4);
}

// As many stages as ranks (4 at 4 ranks): the two inner stages talk both ways.
TEST(PpEngine, FourStagesInnerStagesBothWays) {
  if (test::world_size() != 4) GTEST_SKIP() << "4 stages of one rank: 4 ranks";
  const auto r = run(4, Method::dmuon, plan::Reshard::z3, 4);
  expect_checked(r);
  expect_boundary(r, 4, 4);
}

// --ep 2 inside each of 2 stages (4 ranks): the tiny moe-llm's blocks split as the bench does,
// then each EP rank's experts of its stage's MoE blocks (apps::rank_topology); every method
// --check'ed against its EP rank's reference, and the boundary counted as without EP.
TEST(PpEngine, ExpertParallelInsideEachStage) {
  if (test::world_size() != 4) GTEST_SKIP() << "2 stages of 2 EP ranks: 4 ranks";
  test::PlanOptions po;
  po.topology = "moe-llm";  // loaded whole, then cut and mapped as dmuon_bench does
  const model::Topology whole = test::load_topology(po);
  po.ep = 2;
  const int stage = test::world_rank() / 2;
  const model::Topology mine =
      apps::rank_topology(model::pipeline_stage(whole, 2, 1, stage), po.ep);
  const plan::Plan plan = plan::make_plan(mine.tree, test::make_plan_config(po, mine, 2));
  for (Method m : {Method::dmuon, Method::fsdp_adamw}) {
    SCOPED_TRACE(engine::method_name(m));
    engine::EngineOptions o;
    o.step.method = m;
    o.step.global_tokens = 16;
    o.step.accum = 2;
    o.step.stages = {2, stage, 1, kMessage};
    o.run.steps = 2;
    o.run.warmup = 0;
    o.run.check = true;
    const auto r = engine::run_engine(mine.tree, plan, o, MPI_COMM_WORLD);
    expect_checked(r);
    expect_boundary(r, 2, 2);
  }
}

// What one stage cannot run ends every stage alike, before any step (--clip-norm spans the
// stages and is refused; so is a world P does not divide).
TEST(PpEngine, RefusedEverywhere) {
  if (test::world_size() % 2 != 0) GTEST_SKIP() << "2 stages: an even world";
  EXPECT_THROW(run(2, Method::dmuon, plan::Reshard::z3, 2,
                   [](engine::EngineOptions& o) { o.step.clip_norm = 1.0; }),
               InputError);
  EXPECT_THROW(engine::pipeline_stage_size(4, 3), InputError);
}

// A message out of the 1F1B order is named, not passed on: stage 0 sends micro-batch 1's
// activations where stage 1 receives micro-batch 0's.
TEST(PpEngine, OutOfOrderMessageNamed) {
  if (test::world_size() != 2) GTEST_SKIP() << "one boundary: 2 ranks";
  const int rank = test::world_rank();
  const auto pipeline = comm::make_communicator(comm::Backend::mpi, MPI_COMM_WORLD);
  engine::PipelineLink link(*pipeline, engine::PipelineStages{2, rank, 1, 4}, 2);
  engine::StepOp op;
  op.op = rank == 0 ? engine::Op::pp_send_activations : engine::Op::pp_recv_activations;
  op.micro = rank == 0 ? 1 : 0;
  if (rank == 0) {
    link.run(op);
    link.finish_step();
    return;
  }
  try {
    link.run(op);
    ADD_FAILURE() << "an out-of-order message was accepted";
  } catch (const RuntimeFailure& e) {
    EXPECT_STREQ(e.what(),
                 "pipeline stage 1: received micro-batch 1's activations from stage 0 where the "
                 "1F1B order expects micro-batch 0's activations");
  }
}

}  // namespace
