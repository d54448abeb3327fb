#pragma once
// One-process recomputation of a run for --check: the same global batch (synthetic.hpp with
// G = 1, all samples), the full averaged gradient, and the method's optimizer math
// (Muon on dedicated parameters except for fsdp-adamw, AdamW elsewhere), on full weights.

#include <vector>

#include "dmuon/engine/engine_options.hpp"
#include "dmuon/model/module_tree.hpp"
#include "dmuon/plan/plan.hpp"

namespace dmuon::engine {

/// Final weights after o.total_steps() steps, per parameter in tree.parameter_order().
std::vector<std::vector<float>> reference_weights(const model::ModuleTree& tree,
                                                  const plan::Plan& plan, const EngineOptions& o,
                                                  int shard);

/// Max over parameters of ‖a − b‖_F / ‖b‖_F (Frobenius, so AdamW's isolated sign flips on
/// near-zero gradients do not dominate); `worst` names the worst parameter.
double max_relative_error(const model::ModuleTree& tree, const std::vector<std::vector<float>>& a,
                          const std::vector<std::vector<float>>& b, std::string* worst = nullptr);

}  // namespace dmuon::engine
