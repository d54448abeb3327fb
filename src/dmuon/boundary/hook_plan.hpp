#pragma once
// Resolution of hook sites (SPEC §3): for every dedicated parameter, the module at which its
// forward broadcast and backward reduce are triggered.

#include <cstdint>
#include <string>
#include <vector>

#include "dmuon/boundary/boundary_policy.hpp"
#include "dmuon/model/module_tree.hpp"

namespace dmuon::boundary {

/// How a parameter's site was decided.
enum class SiteReason {
  tied,              ///< Z3: lowest common ancestor of a tied parameter's holders
  resolver,          ///< the resolver's answer
  predicate,         ///< lowest ancestor matching the predicate
  lenient_fallback,  ///< no match in lenient mode: the direct parent
  layer_key,         ///< default heuristic: the layers.N / blocks.N container entry
  per_linear,        ///< default heuristic found no key: the direct parent
};
const char* site_reason_name(SiteReason r);

struct Site {
  int module = -1;
  std::string path;  ///< "" is the root
  std::string type;
  std::vector<int> params;  ///< dedicated parameter ids, model order
  std::int64_t numel = 0;
  std::int64_t bytes = 0;
};

struct HookPlanOptions {
  /// Z3 (FSDP2's reshard_after_forward, the default): weights are freed after a site's forward,
  /// so a tied parameter's site is the lowest common ancestor of its holders (SPEC §3 rule 1).
  /// Z2 (false): weights stay until the site's post-backward and a tied parameter takes the
  /// boundary rule from its canonical holder like any other parameter.
  bool reshard_after_forward = true;
  /// Dedicated parameter ids in the order ownership is assigned (the partition's visiting
  /// order): a strict failure names the first uncovered parameter in this order, as the
  /// reference, which resolves sites while it assigns owners. Empty: model order.
  std::vector<int> visit_order;
};

struct HookPlan {
  std::vector<Site> sites;            ///< in module registration (pre-)order = forward order
  std::vector<int> dedicated;         ///< dedicated parameter ids, model order
  std::vector<int> site_of_param;     ///< per parameter id: index into sites, -1 if not dedicated
  std::vector<SiteReason> reason;     ///< per parameter id (meaningful for dedicated ones)
  bool reshard_after_forward = true;  ///< the mode the sites were resolved for
};

/// Resolves every dedicated parameter's hook site. In strict mode a parameter with no
/// matching ancestor (or no resolver answer) is an InputError naming the parameter, its shape
/// and its parent path ("no ancestor matched"). Never depends on ownership. Site numel and
/// bytes are checked sums (InputError naming the site on overflow).
HookPlan resolve_hook_plan(const model::ModuleTree& tree, const std::vector<int>& dedicated,
                           const BoundaryPolicy& policy, const HookPlanOptions& options = {});

}  // namespace dmuon::boundary
