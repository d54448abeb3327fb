// Rank symmetry against the unreduced replay, and the replayed schedules against the formula:
// for every method and the main options on the small topologies,
//   - the reduced DMuon layout's schedule is the full schedule with each run of aggregated
//     member ops collapsed into one op (same order, phases, hooks, groups, kept parameters);
//   - projecting with the reduced programs gives the same per-rank phases (up to summation
//     order) and exactly the same per-rank collective calls and bytes as the full programs;
//   - the bytes the replayed batches move are the closed-form formula's (the run's audit).

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "dmuon/engine/step/step_schedule.hpp"
#include "dmuon/model/expert_local_tree.hpp"
#include "dmuon/project/projection.hpp"
#include "dmuon/project/reduced_layout.hpp"
#include "dmuon/project/sample_classes.hpp"
#include "same_rank_figures.hpp"
#include "test_machines.hpp"
#include "test_plan_options.hpp"

namespace {

using namespace dmuon;
using engine::Method;

struct Case {
  std::string topology;
  int world = 4, replicate = 1;
  Method method = Method::dmuon;
  plan::Reshard reshard = plan::Reshard::z3;
  int prefetch = 1;
  plan::GradReduce grad_reduce = plan::GradReduce::per_param;
  engine::OptimizerPipeline pipeline = engine::OptimizerPipeline::per_group;
  bool no_pack = false;
  std::vector<std::string> routes;
  int ep = 1;  ///< --ep (E = G = the world, or a divisor of it)
  std::string name() const {
    std::ostringstream s;
    s << topology << " N=" << world << " R=" << replicate << " " << engine::method_name(method)
      << " " << plan::reshard_name(reshard) << " pf" << prefetch << " "
      << plan::grad_reduce_name(grad_reduce) << " " << engine::optimizer_pipeline_name(pipeline)
      << (no_pack ? " no-pack" : "") << (ep > 1 ? " ep " + std::to_string(ep) : "");
    for (const auto& r : routes) s << " route " << r;
    return s.str();
  }
};

std::vector<Case> cases() {
  std::vector<Case> out;
  const Method methods[] = {Method::dmuon, Method::fsdp_adamw, Method::fsdp_muon, Method::ddp_muon,
                            Method::ddp_dmuon};
  int k = 0;
  for (const char* t : {"moe", "vla", "llm", "nested", "moe-llm"})
    for (auto [world, replicate] : {std::pair{4, 1}, {8, 1}, {8, 2}, {4, 4}})
      for (Method m : methods)
        for (auto rs : {plan::Reshard::z3, plan::Reshard::z2}) {
          Case c;
          c.topology = t;
          c.world = world;
          c.replicate = replicate;
          c.method = m;
          c.reshard = rs;
          c.prefetch = k % 3 == 0 ? 0 : 1;
          c.grad_reduce = k % 2 ? plan::GradReduce::packed : plan::GradReduce::per_param;
          c.pipeline = k % 5 == 1 ? engine::OptimizerPipeline::all_then_publish
                                  : engine::OptimizerPipeline::per_group;
          // Unpacked units put several owners on a site (several pairs, partial aggregates).
          c.no_pack = k % 4 != 0;
          if (k % 3 == 1) c.routes = {"ndim=1=adamw", "contains:embed=muon"};
          // Per-route dtypes: the alt arenas (step_layout.hpp) kept whole by the reducer.
          if (k % 6 == 2) c.routes = {"ndim=1=sharded_adamw:bf16", "contains:embed=fsdp:bf16"};
          ++k;
          out.push_back(c);
        }
  // --ep: E = G each rank's own experts, kept whole by the reducer; E < G expert groups of
  // G/E ranks, their owners and shards keyed by the member index.
  for (const char* t : {"moe", "moe-llm"})
    for (auto [world, ep] : {std::pair{4, 4}, {8, 8}, {4, 2}, {8, 2}, {8, 4}})
      for (Method m : methods)
        for (auto rs : {plan::Reshard::z3, plan::Reshard::z2}) {
          Case c;
          c.topology = t;
          c.world = world;
          c.method = m;
          c.reshard = rs;
          c.ep = ep;
          c.no_pack = k++ % 2 == 0;
          out.push_back(c);
        }
  return out;
}

struct Built {
  model::Topology topo;
  plan::Plan plan;
};

Built build(const Case& c) {
  test::PlanOptions po;
  po.topology = c.topology;
  po.replicate = c.replicate;
  po.no_pack = c.no_pack;
  po.routes = c.routes;
  po.ep = c.ep;
  Built b{test::load_topology(po), {}};
  b.plan = plan::make_plan(b.topo.tree, test::make_plan_config(po, b.topo, c.world));
  return b;
}

engine::EngineOptions options(const Case& c) {
  engine::EngineOptions o;
  o.step.method = c.method;
  o.step.reshard = c.reshard;
  o.step.prefetch = c.prefetch;
  o.step.grad_reduce = c.grad_reduce;
  o.step.pipeline = c.pipeline;
  o.step.tokens = 7;  // uneven sample splits: several sample classes
  return o;
}

// An op as the collapsed comparison sees it: its parameter is the reference layout's index,
// or -2 for "some aggregated member of this group".
using Key = std::tuple<int, int, int, int, int, bool, bool>;

Key key(const engine::StepOp& op, int param) {
  return {static_cast<int>(op.op),    op.group,   param,   static_cast<int>(op.hook),
          static_cast<int>(op.phase), op.exposed, op.timed};
}

TEST(RankSymmetry, ReducedScheduleIsTheFullOneCollapsed) {
  for (const Case& c : cases()) {
    if (c.method != Method::dmuon) continue;
    const Built b = build(c);
    const auto o = options(c);
    const engine::StepSpec lo = o.step;
    const auto so = o.step;
    const auto ref = engine::make_layout(b.topo.tree, b.plan, lo, 0);
    const project::LayoutReducer reducer(ref, b.plan);
    for (int r = 0; r < c.world; ++r) {
      const auto full_layout = engine::make_layout(b.topo.tree, b.plan, lo, r);
      const auto full = engine::make_schedule(full_layout, so);
      const auto reduced = reducer.reduce(r);
      const auto red = engine::make_schedule(reduced.layout, so);
      // Which full-layout members the reduced layout kept (the layouts share parameter order).
      std::vector<bool> kept(full_layout.params.size(), false);
      for (int ref_index : reduced.reference)
        if (ref_index >= 0) kept[static_cast<std::size_t>(ref_index)] = true;
      std::vector<Key> expect, got;
      for (const auto& op : full) {
        const bool member_op = op.op == engine::Op::forward || op.op == engine::Op::backward;
        const int p = op.param < 0 ? -1
                      : (member_op && !kept[static_cast<std::size_t>(op.param)] &&
                         full_layout.groups[static_cast<std::size_t>(op.group)].kind ==
                             engine::GroupKind::dmuon_site)
                          ? -2
                          : op.param;
        expect.push_back(key(op, p));
      }
      for (const auto& op : red) {
        int p = op.param < 0 ? -1 : reduced.reference[static_cast<std::size_t>(op.param)];
        if (op.param >= 0 && p < 0) p = -2;
        got.push_back(key(op, p));
      }
      // A site's forward (backward) ops are one contiguous run in both schedules; the
      // aggregate stands first in the reduced run, the non-kept members are spread over the
      // full one. Each run is compared as a set: sorted, the aggregated members once.
      auto normalise = [](std::vector<Key>& v) {
        for (std::size_t i = 0; i < v.size();) {
          std::size_t j = i;
          while (j < v.size() && std::get<0>(v[j]) == std::get<0>(v[i]) &&
                 std::get<1>(v[j]) == std::get<1>(v[i]) &&
                 (std::get<0>(v[i]) == static_cast<int>(engine::Op::forward) ||
                  std::get<0>(v[i]) == static_cast<int>(engine::Op::backward)))
            ++j;
          if (j > i + 1) {
            std::sort(v.begin() + static_cast<long>(i), v.begin() + static_cast<long>(j));
            const auto end = std::unique(
                v.begin() + static_cast<long>(i), v.begin() + static_cast<long>(j),
                [](const Key& a, const Key& b) { return a == b && std::get<2>(a) == -2; });
            const auto kept_end = static_cast<std::size_t>(end - v.begin());
            v.erase(end, v.begin() + static_cast<long>(j));
            j = kept_end;
          }
          i = std::max(j, i + 1);
        }
      };
      normalise(expect);
      normalise(got);
      ASSERT_EQ(got, expect) << c.name() << " rank " << r;
    }
  }
}

TEST(RankSymmetry, ReducedProjectionEqualsFullAndMatchesTheFormula) {
  const auto m = project::testing::nccl_machine(4, 100, 10);
  for (const Case& c : cases()) {
    const Built b = build(c);
    project::ProjectionOptions po;
    po.engine = options(c);
    po.symmetry = project::Symmetry::full;
    const auto full = project::project(b.topo.tree, b.plan, m, po);
    po.symmetry = project::Symmetry::reduced;
    const auto red = project::project(b.topo.tree, b.plan, m, po);
    EXPECT_TRUE(full.result.audit_ok) << c.name() << ": " << full.result.audit_message;
    EXPECT_TRUE(red.result.audit_ok) << c.name() << ": " << red.result.audit_message;
    EXPECT_TRUE(project::testing::same_rank_figures(full, red, 1e-9)) << c.name();
    EXPECT_EQ(full.result.hook_calls_per_step, red.result.hook_calls_per_step) << c.name();
    EXPECT_GT(red.result.phases_ms[static_cast<std::size_t>(engine::Phase::step)], 0) << c.name();
    if (c.method != Method::dmuon && c.method != Method::ddp_dmuon) {
      EXPECT_LT(red.programs, c.world) << c.name() << ": FSDP/DDP ranks share programs";
    }
  }
}

// Rank classes (replay.hpp) against stepping every rank alone, the replay without classes: the
// same per-rank phases of the measured step (up to the order of additions) and exactly the same
// collective calls and bytes, for every method and layout of the cases, on a GPU machine
// (communication overlaps compute, classes split and merge at waits) and a CPU one (each issue
// blocks the compute stream), the third of 3 steps (merges at the step barriers), and a GPU whose
// collectives hold SMs (compute slows while they run: classes stop mid-compute and resume as
// batches end). DMuon ranks own different matrices, so their classes part and merge again.
TEST(RankClasses, ReplayTheSameFiguresAsEachRankAlone) {
  const auto gpu = project::testing::nccl_machine(4, 100, 10);
  const auto cpu = project::testing::measured_machine(8, 10, 5, "cpu");
  // Collectives holding SMs: classes pause mid-compute and resume as batches end.
  const auto held = project::testing::nccl_machine(4, 100, 10, 100, 20, 12);
  int k = 0, split = 0, slowed = 0;
  for (const Case& c : cases()) {
    if (k++ % 3 != 0) continue;
    const Built b = build(c);
    double gpu_ms = 0;  // Σ of the ranks' phases on `gpu`
    for (const auto* m : {&gpu, &cpu, &held}) {
      project::ProjectionOptions po;
      po.engine = options(c);
      po.engine.run.warmup = 2;
      const auto alone = [&] {
        auto q = po;
        q.grouping = project::ReplayGrouping::per_rank;
        return project::project(b.topo.tree, b.plan, *m, q);
      }();
      const auto classes = project::project(b.topo.tree, b.plan, *m, po);
      const std::string what = c.name() + (m == &cpu ? " cpu" : m == &gpu ? " gpu" : " held");
      EXPECT_EQ(alone.rank_classes, c.world) << what;  // one per rank, never split
      if (classes.rank_classes > 1) ++split;
      EXPECT_TRUE(project::testing::same_rank_figures(alone, classes, 1e-12)) << what;
      double total = 0;
      for (double x : classes.result.rank_phases_ms) total += x;
      if (m == &gpu) gpu_ms = total;
      if (m == &held && total > gpu_ms * (1 + 1e-9)) ++slowed;
    }
  }
  EXPECT_GT(split, 10);   // the classes did part (and had to merge to give the same figures)
  EXPECT_GT(slowed, 10);  // and on `held`, compute slowed under communication
}

// ddp-dmuon's replay runs Newton–Schulz on the owners only: two identical [4,4] matrices owned
// by ranks 0 and 1 of two cost one Newton–Schulz per rank, where ddp-muon runs both on every
// rank; the replayed collectives are the formula's (2 reduces + 2 post-step broadcasts).
TEST(RankSymmetry, DdpDmuonRunsNewtonSchulzOnTheOwnersOnly) {
  model::ModuleTree tree("M");
  const int list = tree.add_module(0, "layers", "ModuleList");
  for (int i = 0; i < 2; ++i)
    tree.add_parameter(tree.add_module(list, std::to_string(i), "L"), "w", {4, 4});
  tree.finalize();
  plan::PlanConfig pc;
  pc.dedicate_rule = "all";
  pc.partition.shard = 2;
  pc.partition.strategy = partition::parse_strategy("round_robin");
  pc.partition.pack = false;
  const auto p = plan::make_plan(tree, pc);
  const auto m = project::testing::nccl_machine(4, 100, 10);
  project::ProjectionOptions po;
  po.engine.step.compute = engine::Compute::none;
  po.engine.step.method = Method::ddp_dmuon;
  const auto ddmu = project::project(tree, p, m, po);
  po.engine.step.method = Method::ddp_muon;
  const auto ddp = project::project(tree, p, m, po);
  const auto ns = static_cast<std::size_t>(engine::Phase::optimizer_ns);
  ASSERT_GT(ddmu.result.phases_ms[ns], 0);
  EXPECT_NEAR(ddp.result.phases_ms[ns], 2 * ddmu.result.phases_ms[ns],
              1e-9 * ddp.result.phases_ms[ns]);
  EXPECT_TRUE(ddmu.result.audit_ok) << ddmu.result.audit_message;
  const auto ch = [&](comm::CollectiveKind k) {
    return ddmu.result.kinds[engine::channel_index(engine::CommGroup::shard, k)];
  };
  EXPECT_EQ(ch(comm::CollectiveKind::reduce).calls_per_step, 2);
  EXPECT_EQ(ch(comm::CollectiveKind::broadcast).calls_per_step, 2);
  EXPECT_EQ(ch(comm::CollectiveKind::reduce).bytes_measured, 64);  // the other's 16 fp32
  EXPECT_EQ(ch(comm::CollectiveKind::broadcast).bytes_measured, 64);
}

// The rows a routed expert trains on per rank, by hand: the tiny moe-llm's 8 experts a layer,
// top-2, 64 samples per rank on 4 ranks: n = 256 x 2 / 8 = 64 rows an expert. Without EP each
// rank runs every expert on its quarter (16); at E = G = 4 the expert's one holder takes all 64
// (balanced routing: a rank's 2 local experts together take its 64 tokens x 2); at E = 2 the 2
// ranks of its expert group take 32 each. What the engine's layouts give (data_rank).
TEST(SampleClasses, AnExpertTrainsOnAllItsRoutedRowsOverItsGroup) {
  for (auto [ep, rows] : {std::pair{1, 16}, {4, 64}, {2, 32}}) {
    Case c;
    c.topology = "moe-llm";
    c.world = 4;
    c.ep = ep;
    const Built b = build(c);
    const project::SampleClasses samples(b.topo.tree, 64 * 4, 4, 1, &b.plan);
    int experts = 0;
    for (int pid : b.topo.tree.parameter_order()) {
      if (model::expert_slot(b.topo.tree, pid).container < 0) continue;
      ++experts;
      EXPECT_EQ(samples.samples(pid), 64) << b.topo.tree.parameter(pid).name;
      for (int r = 0; r < 4; ++r) {
        EXPECT_EQ(samples.local(pid, samples.class_of(r)), rows) << "ep " << ep << " rank " << r;
        engine::StepSpec spec;
        spec.method = Method::dmuon;
        const auto L = engine::make_layout(b.topo.tree, b.plan, spec, r);
        const auto& p = *std::find_if(L.params.begin(), L.params.end(),
                                      [pid](const engine::ParamLayout& q) { return q.pid == pid; });
        EXPECT_EQ(engine::sample_range(b.topo.tree, pid, 64 * 4, p.data_rank, p.data_ranks).local(),
                  rows);
      }
    }
    EXPECT_EQ(experts, 3 * 3 * 8 / ep) << "ep " << ep;
  }
}

}  // namespace
