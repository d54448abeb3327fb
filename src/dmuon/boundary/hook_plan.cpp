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

// Each dedicated parameter's site module by SPEC §3's rules, in precedence order. Failures
// are collected, not thrown at once: the one reported is the first in the partition's visiting
// order (the reference resolves sites while it assigns owners).
class SiteResolver {
 public:
  SiteResolver(const ModuleTree& tree, const BoundaryPolicy& policy, bool reshard_after_forward)
      : tree_(tree),
        policy_(policy),
        z3_(reshard_after_forward),
        types_(policy.types().begin(), policy.types().end()),
        pred_cache_(tree.num_modules(), -1) {}

  /// The site module of `pid` and why; a failure is kept for `throw_first_failure`.
  std::pair<int, SiteReason> site_of(int pid) {
    const auto& p = tree_.parameter(pid);
    if (z3_ && p.tied()) return {lowest_common_ancestor(tree_, p), SiteReason::tied};
    switch (policy_.kind()) {
      case PolicyKind::resolver: return by_resolver(pid);
      case PolicyKind::types:
      case PolicyKind::paths: return by_predicate(pid);
      default: return by_layer_key(pid);
    }
  }

  void throw_first_failure(const std::vector<int>& visit_order,
                           const std::vector<int>& dedicated) const {
    if (failures_.empty()) return;
    for (const auto* order : {&visit_order, &dedicated})
      for (int pid : *order)
        if (auto it = failures_.find(pid); it != failures_.end()) throw InputError(it->second);
  }

 private:
  int parent(int pid) const { return tree_.parameter(pid).holders.front().module; }

  // Strict: a failure; either way the parameter falls back to its direct parent.
  std::pair<int, SiteReason> fallback(int pid, const char* what) {
    if (policy_.strict() && !failures_.count(pid))
      failures_.emplace(pid, no_ancestor(tree_, policy_, tree_.parameter(pid), parent(pid), what));
    return {parent(pid), SiteReason::lenient_fallback};
  }

  // Rule 2: the first resolver rule matching the name; it may name any module.
  std::pair<int, SiteReason> by_resolver(int pid) {
    const auto& p = tree_.parameter(pid);
    for (const auto& rule : policy_.resolver_rules()) {
      if (!rule.re.full_match(p.name)) continue;
      if (auto m = tree_.find_module(rule.module_path)) return {*m, SiteReason::resolver};
      failures_.emplace(
          pid, fmt::format("boundary '{}': resolver maps '{}' to module '{}', which does not exist",
                           abbreviate_value(policy_.spec()), p.name,
                           abbreviate_value(rule.module_path)));
      return {parent(pid), SiteReason::lenient_fallback};
    }
    return fallback(pid, "resolver returned none (no ancestor matched)");
  }

  // Rule 3: the lowest ancestor-or-self of the direct parent the predicate matches.
  std::pair<int, SiteReason> by_predicate(int pid) {
    for (int m = parent(pid); m >= 0; m = tree_.module(m).parent)
      if (predicate(m)) return {m, SiteReason::predicate};
    return fallback(pid, "no ancestor matched");
  }

  // Rule 4: the layer key of the direct parent's path, or the parent (per-Linear).
  std::pair<int, SiteReason> by_layer_key(int pid) {
    const int par = parent(pid);
    const auto path = model::layer_key_module_path(tree_.module(par).path);
    if (!path) return {par, SiteReason::per_linear};
    // Keyed by the path, not the key string: a top-level module named `_root` and the root's
    // own `layers.N` share a key string.
    auto it = key_module_.find(*path);
    if (it == key_module_.end()) {
      auto m = tree_.find_module(*path);  // an ancestor of the parent: always present
      it = key_module_.emplace(*path, m ? *m : par).first;
    }
    return {it->second, SiteReason::layer_key};
  }

  // Answers cached per module: the walks visit shared ancestors many times.
  bool predicate(int m) {
    if (pred_cache_[m] < 0) {
      const auto& mod = tree_.module(m);
      pred_cache_[m] = policy_.kind() == PolicyKind::types
                           ? static_cast<signed char>(types_.count(mod.type) > 0)
                           : static_cast<signed char>(policy_.path_regex().full_match(mod.path));
    }
    return pred_cache_[m] > 0;
  }

  const ModuleTree& tree_;
  const BoundaryPolicy& policy_;
  bool z3_;
  std::unordered_set<std::string> types_;
  std::vector<signed char> pred_cache_;
  std::unordered_map<std::string, int> key_module_;
  std::unordered_map<int, std::string> failures_;
};

// The sites (their modules in pre-order, parameters inside in model order) and their sizes.
void fill_sites(const ModuleTree& tree, const std::vector<int>& site_module_of, HookPlan& plan) {
  std::vector<int> site_modules;
  for (int pid : plan.dedicated) site_modules.push_back(site_module_of[pid]);
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
  for (int pid : plan.dedicated) {
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
  SiteResolver resolver(tree, policy, options.reshard_after_forward);
  std::vector<int> site_module_of(tree.num_parameters(), -1);
  for (int pid : dedicated) {
    const auto [site, why] = resolver.site_of(pid);
    site_module_of[pid] = site;
    plan.reason[pid] = why;
  }
  resolver.throw_first_failure(options.visit_order, dedicated);
  fill_sites(tree, site_module_of, plan);
  return plan;
}

}  // namespace dmuon::boundary
