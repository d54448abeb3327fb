#pragma once
// The model as one TP rank holds it (docs/METRICS.md "Tensor parallelism"): every TP-sharded
// parameter with its local shape (its split dimension divided by T), every other parameter
// whole. The step layout, the engine and the projection of a TP run are made from it.

#include "dmuon/model/module_tree.hpp"
#include "dmuon/plan/plan.hpp"

namespace dmuon::plan {

model::ModuleTree tp_local_tree(const model::ModuleTree& tree, const Plan& plan);

}  // namespace dmuon::plan
