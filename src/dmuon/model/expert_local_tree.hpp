#pragma once
// The model as one rank of an expert-parallel group holds it (--ep E; docs/STEP-WORK.md
// "Expert parallelism"): every container of routed experts keeps its first experts/E children,
// which on EP rank e stand for the model's experts e·experts/E + j (torchtitan's
// ExpertParallel: rank e holds a contiguous 1/E of each layer's experts); every other module
// and parameter stays. The container records E (Module::ep_size) so the synthetic data still
// routes over all experts. The step layout, the plan and the engine of an EP run are made from
// it; each rank holds its own values of the same shapes.

#include <string>
#include <vector>

#include "dmuon/model/module_tree.hpp"

namespace dmuon::model {

/// The routed-expert containers: modules named "experts" below the root whose children are
/// named 0, 1, ... in order (at least one), the convention the synthetic data routes by.
std::vector<int> expert_containers(const ModuleTree& tree);

/// True when the tree has routed experts and every container's count is a multiple of `ep`
/// (> 1): the sizes expert_local_tree splits by shape alone (alike experts are still checked
/// there). What the advisor searches and dmuon_project's out-of-memory remedies suggest.
bool experts_split_over(const ModuleTree& tree, int ep);

/// The tree one EP rank of E holds (see above); E = 1 is a copy. Throws InputError (one line)
/// when E < 1, the model has no routed-expert container, E does not divide a container's
/// experts, or a parameter is tied between a kept and a dropped module.
ModuleTree expert_local_tree(const ModuleTree& tree, int ep);

/// The local expert a parameter of an expert-local tree lies under: its container (module
/// index) and its local index j; container -1 for a parameter outside every routed expert.
struct ExpertSlot {
  int container = -1;
  int local = -1;
};
ExpertSlot expert_slot(const ModuleTree& local, int pid);

/// The canonical name, in the full model, of local parameter `pid` on EP rank `ep_rank`
/// (its own name when it is no routed expert's).
std::string global_parameter_name(const ModuleTree& local, int pid, int ep_rank);

}  // namespace dmuon::model
