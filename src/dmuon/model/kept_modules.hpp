#pragma once
// A model with some of its modules dropped, the rest in their order with their names,
// types and parameters (holders in the original's order, ties kept): what one rank holds of
// a model split by expert parallelism (expert_local_tree.hpp) or by pipeline stages
// (pipeline_stage.hpp).

#include <functional>
#include <string>
#include <vector>

#include "dmuon/model/module_tree.hpp"

namespace dmuon::model {

/// Per module of `tree`: whether the copy keeps it. A dropped module's descendants are dropped
/// with it (set here). A kept module keeps its attributes (the routed experts' top-k and EP
/// size). `tie_error(name)`: the InputError message for a parameter held both by a kept and by
/// a dropped module. `on_module(from, to, out)`, when given, runs once per kept module after
/// it is added (to change those attributes).
ModuleTree kept_modules(const ModuleTree& tree, std::vector<char> kept,
                        const std::function<std::string(const std::string&)>& tie_error,
                        const std::function<void(int, int, ModuleTree&)>& on_module = {});

}  // namespace dmuon::model
