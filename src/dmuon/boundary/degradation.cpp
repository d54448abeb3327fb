#include "dmuon/boundary/degradation.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>

#include "dmuon/base/abbreviate.hpp"

namespace dmuon::boundary {

const char* finding_kind_name(FindingKind k) {
  switch (k) {
    case FindingKind::per_linear_fallback: return "per-linear-fallback";
    case FindingKind::swallowed_repeats: return "swallowed-repeats";
    case FindingKind::idle_ranks: return "idle-ranks";
    case FindingKind::tp_unsharded: return "tp-unsharded";
    case FindingKind::lenient_fallback: return "lenient-fallback";
    case FindingKind::unknown_type: return "unknown-type";
    case FindingKind::unmatched_paths: return "unmatched-paths";
    case FindingKind::root_collapse: return "root-collapse";
  }
  return "?";
}

int DegradationReport::warnings() const {
  return static_cast<int>(std::count_if(findings.begin(), findings.end(), [](const Finding& f) {
    return f.severity == Severity::warning;
  }));
}

bool is_container_type(const std::string& type) {
  return type == "ModuleList" || type == "ModuleDict" || type == "Sequential";
}

namespace {

using model::ModuleTree;

// A container of repeats of one block (ModuleList of Expert, Sequential of DecoderLayer): at
// least two children, all of one type. An MLP's Sequential(Linear, GELU, Linear) is a pipeline,
// not repeats: keeping it in one site loses nothing.
bool repeats_one_block(const ModuleTree& tree, int container) {
  const auto& kids = tree.module(container).children;
  if (kids.size() < 2) return false;
  for (int k : kids)
    if (tree.module(k).type != tree.module(kids.front()).type) return false;
  return true;
}

std::string abbreviate(const std::vector<std::string>& paths, std::size_t keep = 3) {
  if (paths.size() <= keep + 1) return fmt::format("{}", fmt::join(paths, ", "));
  std::vector<std::string> head(paths.begin(), paths.begin() + static_cast<long>(keep));
  return fmt::format("{}, ... {} ({} in all)", fmt::join(head, ", "), paths.back(), paths.size());
}

std::string display(const std::string& path) {
  return path.empty() ? "<root>" : path;
}

// Classic Levenshtein distance: only used for "did you mean" on short type names.
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j)
      cur[j] =
          std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1] ? 1u : 0u)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

bool is_fallback(SiteReason r) {
  return r == SiteReason::per_linear || r == SiteReason::lenient_fallback;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> unknown_boundary_types(
    const ModuleTree& tree, const BoundaryPolicy& policy) {
  std::vector<std::pair<std::string, std::string>> out;
  if (policy.kind() != PolicyKind::types) return out;
  std::vector<std::string> model_types;
  for (const auto& m : tree.modules())
    if (std::find(model_types.begin(), model_types.end(), m.type) == model_types.end())
      model_types.push_back(m.type);
  for (const auto& t : policy.types()) {
    if (std::find(model_types.begin(), model_types.end(), t) != model_types.end()) continue;
    std::string best;
    std::size_t best_d = 4;  // only close names are worth suggesting
    for (const auto& mt : model_types) {
      const std::size_t d = edit_distance(t, mt);
      if (d < best_d) {
        best_d = d;
        best = mt;
      }
    }
    out.emplace_back(
        t, fmt::format("boundary type '{}' occurs nowhere in the model{}", t,
                       best.empty() ? std::string() : fmt::format(" (did you mean '{}'?)", best)));
  }
  return out;
}

DegradationReport analyse_degradations(const ModuleTree& tree, const HookPlan& plan,
                                       const BoundaryPolicy& policy) {
  DegradationReport rep;
  const bool explicit_choice = policy.kind() != PolicyKind::heuristic;

  // Per-module subtree counts of dedicated parameters, and of those that fell back.
  std::vector<int> subtree_dedicated(tree.num_modules(), 0),
      subtree_fallback(tree.num_modules(), 0);
  for (int pid : plan.dedicated) {
    const bool fb = is_fallback(plan.reason[pid]);
    for (int m = tree.parameter(pid).holders.front().module; m >= 0; m = tree.module(m).parent) {
      ++subtree_dedicated[m];
      if (fb) ++subtree_fallback[m];
    }
  }

  // Types a better boundary would use, in first-seen order.
  std::vector<std::string> suggestion;
  auto suggest = [&](const std::string& t) {
    if (t == tree.module(ModuleTree::root).type || is_container_type(t)) return;
    if (std::find(suggestion.begin(), suggestion.end(), t) == suggestion.end())
      suggestion.push_back(t);
  };

  // 1. Fallback sites grouped under the lowest coarser unit that holds only fallbacks.
  std::map<int, std::vector<int>> fallback_groups;  // coarser unit -> sites (ordered by unit id)
  std::vector<int> fallback_order;
  for (std::size_t si = 0; si < plan.sites.size(); ++si) {
    const auto& s = plan.sites[si];
    if (!is_fallback(plan.reason[s.params.front()])) continue;
    int unit = -1;
    for (int m = tree.module(s.module).parent; m > ModuleTree::root; m = tree.module(m).parent) {
      if (subtree_fallback[m] != subtree_dedicated[m]) break;  // would merge with real sites
      if (!is_container_type(tree.module(m).type) && subtree_dedicated[m] >= 2) {
        unit = m;
        break;
      }
    }
    if (unit < 0) {
      // A lenient fallback is best caught by its nearest logical ancestor: with lowest-match
      // semantics that type only picks up what nothing lower claimed.
      if (plan.reason[s.params.front()] == SiteReason::lenient_fallback) {
        int m = tree.module(s.module).parent;
        while (m > ModuleTree::root && is_container_type(tree.module(m).type))
          m = tree.module(m).parent;
        suggest(m > ModuleTree::root ? tree.module(m).type : s.type);
      }
      continue;
    }
    if (!fallback_groups.count(unit)) fallback_order.push_back(unit);
    fallback_groups[unit].push_back(static_cast<int>(si));
  }
  std::set<int> degraded_sites;
  for (int unit : fallback_order) {
    const auto& group = fallback_groups[unit];
    Finding f;
    f.kind = FindingKind::per_linear_fallback;
    f.severity = Severity::warning;
    f.site = tree.module(unit).path;
    for (int si : group) {
      f.paths.push_back(plan.sites[si].path);
      degraded_sites.insert(si);
    }
    f.message = fmt::format(
        "per-Linear fallback: {} sites ({}) where one logical unit '{}' ({}) holds all {} of "
        "its dedicated parameters: one packed broadcast per owner would do",
        group.size(), abbreviate(f.paths), display(f.site), tree.module(unit).type,
        subtree_dedicated[unit]);
    rep.findings.push_back(std::move(f));
    suggest(tree.module(unit).type);
  }

  // 2. Lenient fallbacks: every parameter strict mode would have rejected.
  {
    std::vector<std::string> params;
    for (int pid : plan.dedicated)
      if (plan.reason[pid] == SiteReason::lenient_fallback)
        params.push_back(tree.parameter(pid).name);
    if (!params.empty()) {
      Finding f;
      f.kind = FindingKind::lenient_fallback;
      f.paths = params;
      f.message = fmt::format(
          "lenient fallback: {} dedicated parameters matched no boundary and fell back to their "
          "direct parent ({}); strict mode rejects this",
          params.size(), abbreviate(params));
      rep.findings.push_back(std::move(f));
    }
  }

  // 3. Sites that swallow repeated container entries.
  for (std::size_t si = 0; si < plan.sites.size(); ++si) {
    const auto& s = plan.sites[si];
    // container -> its entries inside this site, in first-seen (model) order
    std::map<int, std::vector<int>> entries;
    std::vector<int> container_order;
    bool has_loose_params = false;
    for (int pid : s.params) {
      int outer = -1;
      for (int m = tree.parameter(pid).holders.front().module; m >= 0 && m != s.module;
           m = tree.module(m).parent) {
        const int parent = tree.module(m).parent;
        if (parent >= 0 && is_container_type(tree.module(parent).type)) outer = m;
      }
      if (outer < 0) {
        has_loose_params = true;
        continue;
      }
      const int container = tree.module(outer).parent;
      auto& list = entries[container];
      if (list.empty()) container_order.push_back(container);
      if (std::find(list.begin(), list.end(), outer) == list.end()) list.push_back(outer);
    }
    bool swallowed = false;
    for (int c : container_order) {
      const auto& list = entries[c];
      if (list.size() < 2 || !repeats_one_block(tree, c)) {
        has_loose_params = true;
        continue;
      }
      swallowed = true;
      std::vector<std::string> types;
      for (int e : list)
        if (std::find(types.begin(), types.end(), tree.module(e).type) == types.end())
          types.push_back(tree.module(e).type);
      Finding f;
      f.kind = FindingKind::swallowed_repeats;
      f.severity = explicit_choice && plan.reason[s.params.front()] == SiteReason::predicate
                       ? Severity::note
                       : Severity::warning;
      f.site = s.path;
      for (int e : list) f.paths.push_back(tree.module(e).path);
      f.message = fmt::format(
          "site '{}' ({}) swallows {} x {} under '{}' ({}): their broadcasts and reduces cannot "
          "pipeline with each other",
          display(s.path), s.type, list.size(), fmt::join(types, "/"), tree.module(c).path,
          abbreviate(f.paths));
      rep.findings.push_back(std::move(f));
      // Never suggest a leaf type (Linear): hooks per leaf are the per-Linear degradation itself.
      for (int e : list)
        if (!tree.module(e).children.empty()) suggest(tree.module(e).type);
    }
    if (swallowed) {
      degraded_sites.insert(static_cast<int>(si));
      if (has_loose_params) suggest(s.type);
    }
  }

  // 4. Root collapse.
  if (plan.sites.size() == 1 && plan.sites.front().module == ModuleTree::root &&
      plan.dedicated.size() >= 2) {
    Finding f;
    f.kind = FindingKind::root_collapse;
    f.site = "";
    f.message = fmt::format(
        "all {} dedicated parameters share one hook site at the root: no layer-level pipelining "
        "of broadcasts and reduces",
        plan.dedicated.size());
    rep.findings.push_back(std::move(f));
  }

  // 5. Predicate names that match nothing in the model.
  if (policy.kind() == PolicyKind::types) {
    for (const auto& [type, message] : unknown_boundary_types(tree, policy)) {
      Finding f;
      f.kind = FindingKind::unknown_type;
      f.paths = {type};
      f.message = message;
      rep.findings.push_back(std::move(f));
    }
  } else if (policy.kind() == PolicyKind::paths) {
    bool any = false;
    for (const auto& m : tree.modules())
      if (policy.path_regex().full_match(m.path)) {
        any = true;
        break;
      }
    if (!any) {
      Finding f;
      f.kind = FindingKind::unmatched_paths;
      f.paths = {policy.spec()};
      f.message =
          fmt::format("boundary '{}' matches no module path", abbreviate_value(policy.spec()));
      rep.findings.push_back(std::move(f));
    }
  }

  // Suggest a verified types: boundary when something degraded.
  if (rep.warnings() > 0 && !suggestion.empty()) {
    // Healthy sites keep their type so the suggestion covers them too.
    std::vector<std::string> all;
    for (std::size_t si = 0; si < plan.sites.size(); ++si) {
      if (degraded_sites.count(static_cast<int>(si))) continue;
      const auto& s = plan.sites[si];
      if (!is_fallback(plan.reason[s.params.front()]) && s.module != ModuleTree::root &&
          !is_container_type(s.type) && std::find(all.begin(), all.end(), s.type) == all.end())
        all.push_back(s.type);
    }
    for (const auto& t : suggestion)
      if (std::find(all.begin(), all.end(), t) == all.end()) all.push_back(t);
    const std::string spec = fmt::format("types:{}", fmt::join(all, ","));
    try {
      auto candidate = BoundaryPolicy::parse(spec, true);
      HookPlanOptions options;
      options.reshard_after_forward = plan.reshard_after_forward;
      auto resolved = resolve_hook_plan(tree, plan.dedicated, candidate, options);
      rep.suggested_boundary = spec;
      rep.suggested_sites = static_cast<int>(resolved.sites.size());
    } catch (const std::exception&) {
      // An unverifiable suggestion is worse than none.
    }
  }
  return rep;
}

}  // namespace dmuon::boundary
