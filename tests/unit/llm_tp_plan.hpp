#pragma once
// The llm preset planned with tensor parallelism for `world` = R x G x T ranks, from the apps'
// plan options (every q, k, v, o, gate, up, down TP-sharded): the set-up the --tp unit tests
// share, with the model of the local shard shapes the layouts are made from.

#include "dmuon/plan/plan.hpp"
#include "dmuon/plan/tp_local_tree.hpp"
#include "test_plan_options.hpp"

namespace dmuon::test {

struct LlmTpPlan {
  model::Topology topo;  ///< the logical model
  plan::Plan plan;
  model::ModuleTree local;  ///< plan::tp_local_tree
};

inline LlmTpPlan llm_tp_plan(int world, int replicate, int tp) {
  test::PlanOptions po;
  po.topology = "llm";
  po.replicate = replicate;
  po.tp = tp;
  auto topo = test::load_topology(po);
  auto p = plan::make_plan(topo.tree, test::make_plan_config(po, topo, world));
  auto local = plan::tp_local_tree(topo.tree, p);
  return {std::move(topo), std::move(p), std::move(local)};
}

}  // namespace dmuon::test
