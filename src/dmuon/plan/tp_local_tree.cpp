#include "dmuon/plan/tp_local_tree.hpp"

#include "dmuon/boundary/tp_shard.hpp"

namespace dmuon::plan {

model::ModuleTree tp_local_tree(const model::ModuleTree& tree, const Plan& plan) {
  model::ModuleTree local = tree;
  for (int pid : plan.tp.sharded)
    local.reshape_parameter(pid, boundary::tp_local_shape(
                                     tree.parameter(pid).shape,
                                     plan.tp.shard_dim[static_cast<std::size_t>(pid)], plan.tp.tp));
  return local;
}

}  // namespace dmuon::plan
