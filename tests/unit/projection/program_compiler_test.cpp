// ProgramCompiler (rank_program.hpp) fed a schedule block by block, as the projection feeds it
// from engine::stream_schedule, compiles the program compile_program makes of the whole list:
// the same instructions (durations, batches, waits counted back, phase switches) and hook
// counts, whatever the block sizes (a block may end between an issue and its wait, between a
// phase switch and the op that carries it, or inside a run of merged compute ops).

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <string>
#include <vector>

#include "common/plan_options.hpp"
#include "dmuon/engine/step/step_schedule.hpp"
#include "dmuon/project/rank_program.hpp"

namespace {

using namespace dmuon;

struct Layouts {
  model::Topology topo;
  plan::Plan plan;
  engine::StepSpec spec;
  std::vector<engine::StepLayout> ranks;
};

Layouts layouts(const std::string& topology, int world, int replicate, engine::Method method,
                int accum) {
  apps::PlanOptions po;
  po.topology = topology;
  po.replicate = replicate;
  po.no_pack = true;  // several owners per site: several pairs and batches per group
  Layouts l{apps::load_topology(po), {}, {}, {}};
  l.plan = plan::make_plan(l.topo.tree, apps::make_plan_config(po, l.topo, world));
  l.spec.method = method;
  l.spec.accum = accum;
  for (int r = 0; r < world; ++r)
    l.ranks.push_back(engine::make_layout(l.topo.tree, l.plan, l.spec, r));
  return l;
}

TEST(ProgramCompiler, BlocksCompileToTheWholeSchedulesProgram) {
  struct Case {
    const char* topology;
    int world, replicate;
    engine::Method method;
    int accum;
  };
  const Case cases[] = {{"moe-llm", 8, 2, engine::Method::dmuon, 2},
                        {"moe", 4, 1, engine::Method::dmuon, 1},
                        {"llm", 4, 2, engine::Method::fsdp_muon, 3},
                        {"vla", 4, 1, engine::Method::ddp_dmuon, 1}};
  for (const Case& c : cases) {
    const Layouts l = layouts(c.topology, c.world, c.replicate, c.method, c.accum);
    for (const auto& L : l.ranks) {
      const std::string name = std::string(c.topology) + " rank " + std::to_string(L.me.rank);
      const engine::Schedule schedule = engine::make_schedule(L, l.spec);
      std::deque<project::BatchSpec> specs;
      // Distinct, op-dependent durations (some zero: skipped ops) and one spec per issue.
      const project::DurationFn duration = [](const engine::StepOp& op) {
        return op.op == engine::Op::pack ? 0.0 : 1e-3 * (op.group + 2) + 1e-6 * op.param;
      };
      const project::BatchFn batch = [&](const engine::StepOp& op, int) {
        specs.push_back(project::batch_spec(L, op, l.spec));
        return &specs.back();
      };
      const project::RankProgram whole = project::compile_program(schedule, duration, batch);
      ASSERT_FALSE(whole.code.empty()) << name;
      for (std::size_t block : {std::size_t{1}, std::size_t{3}, std::size_t{17}}) {
        // The same batches by position: the k-th issue gets the k-th spec of the whole run.
        std::size_t k = 0;
        std::vector<const project::BatchSpec*> order;
        for (const auto& in : whole.code)
          if (in.kind == project::Instruction::issue) order.push_back(in.spec);
        const project::BatchFn replay = [&](const engine::StepOp&, int) { return order.at(k++); };
        project::ProgramCompiler compiler(duration, replay);
        for (std::size_t at = 0; at < schedule.size(); at += block)
          compiler.add(schedule.data() + at, std::min(block, schedule.size() - at));
        const project::RankProgram got = compiler.finish();
        EXPECT_EQ(got.hook_calls, whole.hook_calls) << name;
        EXPECT_EQ(got.hook_comm_calls, whole.hook_comm_calls) << name;
        ASSERT_EQ(got.code.size(), whole.code.size()) << name << ", blocks of " << block;
        for (std::size_t i = 0; i < got.code.size(); ++i)
          ASSERT_TRUE(got.code[i] == whole.code[i])
              << name << ", blocks of " << block << ": instruction " << i;
      }
    }
  }
}

}  // namespace
