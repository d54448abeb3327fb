#pragma once
// A built-in topology and its plan for the whole world, from the apps' plan options: the
// set-up the MPI engine tests share (they differ only in the options they set).

#include "dmuon/plan/plan.hpp"
#include "mpi_test_util.hpp"
#include "test_plan_options.hpp"

namespace dmuon::test {

struct PlanSetup {
  model::Topology topo;
  plan::Plan plan;
};

inline PlanSetup make_plan_setup(const test::PlanOptions& po) {
  PlanSetup s{test::load_topology(po), {}};
  s.plan = plan::make_plan(s.topo.tree, test::make_plan_config(po, s.topo, world_size()));
  return s;
}

}  // namespace dmuon::test
