// LayoutReducer::reduce over a layout reduced before (the projection hands each worker the
// storage of the rank it reduced last) gives the layout a fresh reduce() gives: the same
// parameters, pairs, groups, arena totals and schedule, whichever rank the storage came from
// (more or fewer kept parameters and pairs than this one).

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "dmuon/engine/step/step_schedule.hpp"
#include "dmuon/project/reduced_layout.hpp"
#include "test_plan_options.hpp"

namespace {

using namespace dmuon;

auto param_fields(const engine::ParamLayout& p) {
  return std::make_tuple(p.pid, p.group, p.storage, p.muon, p.updated_here, p.owner, p.pair,
                         p.numel, p.state_elems, p.grad_persistent, p.tp_dim, p.tp_owner);
}
auto pair_fields(const engine::PairLayout& p) {
  return std::make_tuple(p.group, p.owner, p.owner_column, p.owner_row, p.members, p.numel,
                         p.rooted_here, p.owned, p.grad_persistent, p.alt_grad);
}
auto group_fields(const engine::GroupLayout& g) {
  return std::make_tuple(g.kind, g.members, g.pairs, g.hooked, g.deferred_reduce, g.weight_elems,
                         g.grad_elems, g.gather_elems);
}
auto op_fields(const engine::StepOp& op) {
  return std::make_tuple(op.op, op.group, op.param, op.comm, op.weight_base, op.grad_base,
                         op.gather_base, op.phase, op.timed, op.exposed, op.hook, op.communicates,
                         op.micro, op.accumulate);
}

void expect_same(const project::ReducedLayout& got, const project::ReducedLayout& want,
                 const engine::StepSpec& spec, const std::string& name) {
  const auto &a = got.layout, &b = want.layout;
  EXPECT_EQ(got.aggregate, want.aggregate) << name;
  EXPECT_EQ(got.reference, want.reference) << name;
  EXPECT_EQ(a.me.rank, b.me.rank) << name;
  EXPECT_EQ(std::make_tuple(a.master_elems, a.state_elems, a.second_state_elems),
            std::make_tuple(b.master_elems, b.state_elems, b.second_state_elems))
      << name;
  ASSERT_EQ(a.params.size(), b.params.size()) << name;
  for (std::size_t i = 0; i < a.params.size(); ++i)
    EXPECT_EQ(param_fields(a.params[i]), param_fields(b.params[i])) << name << ", param " << i;
  ASSERT_EQ(a.pairs.size(), b.pairs.size()) << name;
  for (std::size_t i = 0; i < a.pairs.size(); ++i)
    EXPECT_EQ(pair_fields(a.pairs[i]), pair_fields(b.pairs[i])) << name << ", pair " << i;
  ASSERT_EQ(a.groups.size(), b.groups.size()) << name;
  for (std::size_t i = 0; i < a.groups.size(); ++i)
    EXPECT_EQ(group_fields(a.groups[i]), group_fields(b.groups[i])) << name << ", group " << i;
  const auto sa = engine::make_schedule(a, spec), sb = engine::make_schedule(b, spec);
  ASSERT_EQ(sa.size(), sb.size()) << name;
  for (std::size_t i = 0; i < sa.size(); ++i)
    ASSERT_EQ(op_fields(sa[i]), op_fields(sb[i])) << name << ", op " << i;
}

TEST(LayoutReducer, ReusedStorageGivesTheFreshLayout) {
  for (const char* topology : {"moe", "moe-llm", "llm"})
    for (auto [world, replicate] : {std::pair{4, 1}, {8, 2}, {8, 1}}) {
      test::PlanOptions po;
      po.topology = topology;
      po.replicate = replicate;
      po.no_pack = true;  // several owners per site: partial aggregates
      const model::Topology topo = test::load_topology(po);
      const plan::Plan plan = plan::make_plan(topo.tree, test::make_plan_config(po, topo, world));
      engine::StepSpec spec;
      spec.method = engine::Method::dmuon;
      const auto ref = engine::make_layout(topo.tree, plan, spec, 0);
      const project::LayoutReducer reducer(ref, plan);
      // Every rank over the storage of every other (and of itself), as workers pass it on.
      for (int from = 0; from < world; ++from)
        for (int r = 0; r < world; ++r) {
          const std::string name = std::string(topology) + " N=" + std::to_string(world) +
                                   " R=" + std::to_string(replicate) + ": rank " +
                                   std::to_string(r) + " over rank " + std::to_string(from);
          expect_same(reducer.reduce(r, reducer.reduce(from)), reducer.reduce(r), spec, name);
        }
    }
}

}  // namespace
