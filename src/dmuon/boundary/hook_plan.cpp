#include "dmuon/boundary/hook_plan.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "dmuon/base/abbreviate.hpp"
#include "dmuon/base/checked_int.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/model/layer_key.hpp"

namespace dmuon::boundary {

const char* site_reason_name(SiteReason r) {
  switch (r) {
    case SiteReason::tied: return "tied";
    case SiteReason::resolver: return "resolver";
    case SiteReason::predicate: return "predicate";
    case SiteReason::lenient_fallback: return "lenient-fallback";
    case SiteReason::layer_key: return "layer-key";
    case SiteReason::per_linear: return "per-linear";
  }
  return "?";
}

namespace {

using model::ModuleTree;

// Deepest module that is an ancestor-or-self of every holder.
int lowest_common_ancestor(const ModuleTree& tree, const model::Parameter& p) {
  std::vector<int> chain;  // root ... first holder
  for (int m = p.holders.front().module; m >= 0; m = tree.module(m).parent) chain.push_back(m);
  std::reverse(chain.begin(), chain.end());
  std::size_t depth = chain.size();
  for (std::size_t h = 1; h < p.holders.size(); ++h) {
    std::vector<int> other;
    for (int m = p.holders[h].module; m >= 0; m = tree.module(m).parent) other.push_back(m);
    std::reverse(other.begin(), other.end());
    std::size_t common = 0;
    while (common < depth && common < other.size() && chain[common] == other[common]) ++common;
    depth = common;
  }
  return depth == 0 ? ModuleTree::root : chain[depth - 1];
}

std::string no_ancestor(const ModuleTree& tree, const BoundaryPolicy& policy,
                        const model::Parameter& p, int parent, const char* what) {
  return fmt::format(
      "hook boundary '{}': {} for dedicated parameter '{}' shape [{}] (parent '{}', type {}); "
      "widen the boundary predicate, exclude the parameter from dedication, or use --lenient",
      abbreviate_value(policy.spec()), what, p.name, fmt::join(p.shape, ", "),
      tree.module(parent).path, tree.module(parent).type);
}

}  // namespace

HookPlan resolve_hook_plan(const ModuleTree& tree, const std::vector<int>& dedicated,
                           const BoundaryPolicy& policy, const HookPlanOptions& options) {
  if (!tree.finalized()) throw std::logic_error("resolve_hook_plan needs a finalized tree");
  HookPlan plan;
  plan.dedicated = dedicated;
  plan.reshard_after_forward = options.reshard_after_forward;
  plan.site_of_param.assign(tree.num_parameters(), -1);
  plan.reason.assign(tree.num_parameters(), SiteReason::per_linear);

  const std::unordered_set<std::string> type_set(policy.types().begin(), policy.types().end());
  // Predicate answers are cached per module: the walk visits shared ancestors many times.
  std::vector<signed char> pred_cache(tree.num_modules(), -1);
  auto predicate = [&](int m) -> bool {
    if (pred_cache[m] < 0) {
      const auto& mod = tree.module(m);
      pred_cache[m] = policy.kind() == PolicyKind::types
                          ? static_cast<signed char>(type_set.count(mod.type) > 0)
                          : static_cast<signed char>(policy.path_regex().full_match(mod.path));
    }
    return pred_cache[m] > 0;
  };
  // Heuristic: layer-key module path -> module. Keyed by the path, not the key string: a
  // top-level module named `_root` and the root's own `layers.N` share a key string.
  std::unordered_map<std::string, int> key_module;

  // Failures are collected, not thrown at once: the one reported is the first in the
  // partition's visiting order (the reference resolves sites while it assigns owners).
  std::unordered_map<int, std::string> failures;
  std::vector<int> site_module_of(tree.num_parameters(), -1);
  for (int pid : dedicated) {
    const auto& p = tree.parameter(pid);
    const int parent = p.holders.front().module;
    int site = -1;
    SiteReason why = SiteReason::per_linear;
    if (options.reshard_after_forward && p.tied()) {
      site = lowest_common_ancestor(tree, p);
      why = SiteReason::tied;
    } else if (policy.kind() == PolicyKind::resolver) {
      for (const auto& rule : policy.resolver_rules()) {
        if (!rule.re.full_match(p.name)) continue;
        auto m = tree.find_module(rule.module_path);
        if (!m) {
          failures.emplace(
              pid, fmt::format("boundary '{}': resolver maps '{}' to module '{}', which does not "
                               "exist",
                               abbreviate_value(policy.spec()), p.name,
                               abbreviate_value(rule.module_path)));
          break;
        }
        site = *m;
        why = SiteReason::resolver;
        break;
      }
      if (site < 0 && !failures.count(pid)) {
        if (policy.strict())
          failures.emplace(pid, no_ancestor(tree, policy, p, parent,
                                            "resolver returned none (no ancestor matched)"));
        site = parent;
        why = SiteReason::lenient_fallback;
      }
    } else if (policy.kind() == PolicyKind::types || policy.kind() == PolicyKind::paths) {
      for (int m = parent; m >= 0; m = tree.module(m).parent) {
        if (predicate(m)) {
          site = m;
          why = SiteReason::predicate;
          break;
        }
      }
      if (site < 0) {
        if (policy.strict())
          failures.emplace(pid, no_ancestor(tree, policy, p, parent, "no ancestor matched"));
        site = parent;
        why = SiteReason::lenient_fallback;
      }
    } else {  // default heuristic: layer key of the direct parent's path
      auto path = model::layer_key_module_path(tree.module(parent).path);
      if (path) {
        auto it = key_module.find(*path);
        if (it == key_module.end()) {
          auto m = tree.find_module(*path);  // an ancestor of parent: always present
          it = key_module.emplace(*path, m ? *m : parent).first;
        }
        site = it->second;
        why = SiteReason::layer_key;
      } else {
        site = parent;
        why = SiteReason::per_linear;
      }
    }
    site_module_of[pid] = site;
    plan.reason[pid] = why;
  }
  if (!failures.empty()) {
    for (int pid : options.visit_order)
      if (auto it = failures.find(pid); it != failures.end()) throw InputError(it->second);
    for (int pid : dedicated)
      if (auto it = failures.find(pid); it != failures.end()) throw InputError(it->second);
  }

  // Sites in module pre-order; parameters inside a site in model order.
  std::vector<int> site_modules;
  for (int pid : dedicated) site_modules.push_back(site_module_of[pid]);
  std::sort(site_modules.begin(), site_modules.end(),
            [&](int a, int b) { return tree.preorder_index(a) < tree.preorder_index(b); });
  site_modules.erase(std::unique(site_modules.begin(), site_modules.end()), site_modules.end());
  std::unordered_map<int, int> index_of;
  for (int m : site_modules) {
    index_of.emplace(m, static_cast<int>(plan.sites.size()));
    Site s;
    s.module = m;
    s.path = tree.module(m).path;
    s.type = tree.module(m).type;
    plan.sites.push_back(std::move(s));
  }
  for (int pid : dedicated) {
    const int si = index_of.at(site_module_of[pid]);
    plan.site_of_param[pid] = si;
    auto& s = plan.sites[si];
    s.params.push_back(pid);
    const auto& prm = tree.parameter(pid);
    const auto overflow = [&] {
      return fmt::format("hook site '{}': its size overflows 64 bits at parameter '{}'", s.path,
                         prm.name);
    };
    s.numel = checked_add(s.numel, prm.numel(), overflow);
    s.bytes = checked_add(s.bytes, prm.bytes(), overflow);
  }
  return plan;
}

}  // namespace dmuon::boundary
