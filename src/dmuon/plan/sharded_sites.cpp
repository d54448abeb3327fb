#include "dmuon/plan/sharded_sites.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "dmuon/base/checked_int.hpp"
#include "dmuon/boundary/boundary_policy.hpp"

namespace dmuon::plan {

boundary::HookPlan resolve_sharded_sites(const model::ModuleTree& tree,
                                         const std::vector<int>& params,
                                         const std::string& boundary, bool reshard_after_forward) {
  boundary::HookPlanOptions options;
  options.reshard_after_forward = reshard_after_forward;
  // Lenient resolution marks the parameters no boundary module holds (lenient_fallback);
  // those go to the root, the others keep the boundary rule's site.
  const auto lenient = boundary::BoundaryPolicy::parse(boundary, false);
  const auto first = boundary::resolve_hook_plan(tree, params, lenient, options);
  std::vector<int> matched, unheld;
  for (int pid : params)
    (first.reason[static_cast<std::size_t>(pid)] == boundary::SiteReason::lenient_fallback
         ? unheld
         : matched)
        .push_back(pid);
  if (unheld.empty()) return first;
  auto plan = boundary::resolve_hook_plan(tree, matched, lenient, options);
  const int root = model::ModuleTree::root;
  if (plan.sites.empty() || plan.sites.front().module != root) {
    boundary::Site s;
    s.module = root;
    s.path = tree.module(root).path;
    s.type = tree.module(root).type;
    plan.sites.insert(plan.sites.begin(), std::move(s));
    for (int& si : plan.site_of_param)
      if (si >= 0) ++si;
  }
  auto& s = plan.sites.front();
  for (int pid : unheld) {
    const auto& prm = tree.parameter(pid);
    const auto overflow = [&] {
      return fmt::format("hook site '{}': its size overflows 64 bits at parameter '{}'", s.path,
                         prm.name);
    };
    s.params.push_back(pid);
    s.numel = checked_add(s.numel, prm.numel(), overflow);
    s.bytes = checked_add(s.bytes, prm.bytes(), overflow);
    plan.site_of_param[static_cast<std::size_t>(pid)] = 0;
    plan.reason[static_cast<std::size_t>(pid)] = boundary::SiteReason::lenient_fallback;
  }
  // Model order inside the site (parameter ids need not be in model order).
  std::vector<int> position(static_cast<std::size_t>(tree.num_parameters()), 0);
  for (std::size_t i = 0; i < tree.parameter_order().size(); ++i)
    position[static_cast<std::size_t>(tree.parameter_order()[i])] = static_cast<int>(i);
  std::sort(s.params.begin(), s.params.end(), [&](int a, int b) {
    return position[static_cast<std::size_t>(a)] < position[static_cast<std::size_t>(b)];
  });
  plan.dedicated = params;
  return plan;
}

}  // namespace dmuon::plan
