// ProgramCompiler (rank_program.hpp) fed a schedule block by block, as the projection feeds it
// from engine::stream_schedule, compiles the program compile_program makes of the whole list:
// the same instructions (durations, batches, waits counted back, phase switches) and hook
// counts, whatever the block sizes (a block may end between an issue and its wait, between a
// phase switch and the op that carries it, or inside a run of merged compute ops).

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "dmuon/engine/step/step_schedule.hpp"
#include "dmuon/project/rank_program.hpp"
#include "test_plan_options.hpp"

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
  test::PlanOptions po;
  po.topology = topology;
  po.replicate = replicate;
  po.no_pack = true;  // several owners per site: several pairs and batches per group
  Layouts l{test::load_topology(po), {}, {}, {}};
  l.plan = plan::make_plan(l.topo.tree, test::make_plan_config(po, l.topo, world));
  l.spec.method = method;
  l.spec.accum = accum;
  for (int r = 0; r < world; ++r)
    l.ranks.push_back(engine::make_layout(l.topo.tree, l.plan, l.spec, r));
  return l;
}

// A layout set to compile: topology, world, rows (HSDP when > 1), method, micro-steps.
struct Case {
  const char* topology;
  int world, replicate;
  engine::Method method;
  int accum;
};

TEST(ProgramCompiler, BlocksCompileToTheWholeSchedulesProgram) {
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

// What a program does, resolved: per issue its batch (the k-th batch_ call), stream,
// communicator and the batch it is ordered after; per wait the batch awaited (-1: the previous
// step's); the compute seconds in order.
struct Resolved {
  struct Issue {
    int batch, stream, comm, after;
    bool operator==(const Issue& o) const {
      return batch == o.batch && stream == o.stream && comm == o.comm && after == o.after;
    }
  };
  std::vector<Issue> issues;  // in program order
  std::vector<int> waits;
  std::vector<double> compute;
  int after_own_stage1 = 0;  // stage-2 issues right after their stage-1 issue
};

Resolved resolve(const project::RankProgram& p,
                 const std::map<const project::BatchSpec*, int>& call) {
  Resolved r;
  std::array<std::vector<int>, engine::kCommGroupCount> on{};  // batches issued per comm
  auto back = [&](std::uint8_t comm, std::int32_t b) {
    const auto& l = on[comm];
    const auto k = static_cast<std::int64_t>(l.size()) - b;
    return b <= 0 || k < 0 ? -1 : l[static_cast<std::size_t>(k)];
  };
  for (std::size_t i = 0; i < p.code.size(); ++i) {
    const auto& in = p.code[i];
    if (in.kind == project::Instruction::issue) {
      const int after = in.dep_back > 0 ? back(in.dep_comm, in.dep_back) : -1;
      if (in.dep_back > 0 && i > 0 && p.code[i - 1].kind == project::Instruction::issue &&
          call.at(p.code[i - 1].spec) == after)
        ++r.after_own_stage1;
      r.issues.push_back({call.at(in.spec), in.stream, in.comm, after});
      on[in.comm].push_back(call.at(in.spec));
    } else if (in.kind == project::Instruction::wait) {
      r.waits.push_back(back(in.comm, in.back));
    } else if (in.kind == project::Instruction::compute) {
      r.compute.push_back(in.seconds);
    }
  }
  return r;
}

// GPU machines: each stage-2 issue moves up to just after its stage-1 issue (rank_program.hpp),
// and the program still means the same: the same batches in the same order on every stream and
// communicator, each stage 2 after the same stage 1, the same waits and compute.
TEST(ProgramCompiler, StageTwoIssuesMoveUpToTheirStageOneAndMeanTheSame) {
  const Case cases[] = {{"moe-llm", 8, 2, engine::Method::dmuon, 2},
                        {"llm", 4, 2, engine::Method::fsdp_muon, 3},
                        {"moe", 8, 4, engine::Method::fsdp_adamw, 1},
                        {"vla", 8, 2, engine::Method::dmuon, 1}};
  int moved = 0;
  for (const Case& c : cases) {
    const Layouts l = layouts(c.topology, c.world, c.replicate, c.method, c.accum);
    for (const auto& L : l.ranks) {
      const std::string name = std::string(c.topology) + " rank " + std::to_string(L.me.rank);
      const engine::Schedule schedule = engine::make_schedule(L, l.spec);
      const project::DurationFn duration = [](const engine::StepOp& op) {
        return 1e-3 * (op.group + 2) + 1e-6 * op.param;
      };
      Resolved r[2];
      for (const bool hoist : {false, true}) {
        std::deque<project::BatchSpec> specs;
        std::map<const project::BatchSpec*, int> call;
        const project::BatchFn batch = [&](const engine::StepOp& op, int) {
          specs.push_back(project::batch_spec(L, op, l.spec));
          call[&specs.back()] = static_cast<int>(call.size());
          return &specs.back();
        };
        r[hoist] = resolve(project::compile_program(schedule, duration, batch, {}, hoist), call);
      }
      EXPECT_EQ(r[0].waits, r[1].waits) << name;
      EXPECT_EQ(r[0].compute, r[1].compute) << name;
      ASSERT_EQ(r[0].issues.size(), r[1].issues.size()) << name;
      for (int key = 0; key < 2; ++key)  // per stream, then per communicator
        for (int v = 0,
                 n = key == 0 ? engine::kStreamCount : static_cast<int>(engine::kCommGroupCount);
             v < n; ++v) {
          std::vector<Resolved::Issue> a, b;
          for (const auto& i : r[0].issues)
            if ((key == 0 ? i.stream : i.comm) == v) a.push_back(i);
          for (const auto& i : r[1].issues)
            if ((key == 0 ? i.stream : i.comm) == v) b.push_back(i);
          EXPECT_TRUE(a == b) << name << (key == 0 ? ": stream " : ": communicator ") << v;
        }
      EXPECT_GE(r[1].after_own_stage1, r[0].after_own_stage1) << name;
      moved += r[1].after_own_stage1 - r[0].after_own_stage1;
    }
  }
  EXPECT_GT(moved, 0) << moved;  // some stage-2 issues did move up
}

}  // namespace
