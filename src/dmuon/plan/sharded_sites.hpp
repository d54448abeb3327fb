#pragma once
// The sites of the `--route RULE=sharded_adamw` parameters (param_route.hpp): where the engine
// all-gathers each of them. The boundary rule's site, as for an owner-based parameter (same
// policy, same reshard mode: a tied parameter's Z3 site is its holders' lowest common
// ancestor), except that a parameter no boundary module holds (say the final norm under
// `types:LlamaDecoderLayer`) is held by the root module, as FSDP2's root unit holds every
// parameter no wrapped module claims; so this never fails in strict mode, and lenient mode's
// per-parent fallback does not apply (a sharded parameter needs no owner-based hook site).

#include <string>
#include <vector>

#include "dmuon/boundary/hook_plan.hpp"
#include "dmuon/model/module_tree.hpp"

namespace dmuon::plan {

/// `params`: the sharded_adamw parameter ids, model order. Sites in module pre-order; the
/// `dedicated` and `site_of_param` fields describe `params`. Throws InputError only for a bad
/// boundary spec or an overflowing site size.
boundary::HookPlan resolve_sharded_sites(const model::ModuleTree& tree,
                                         const std::vector<int>& params,
                                         const std::string& boundary, bool reshard_after_forward);

}  // namespace dmuon::plan
