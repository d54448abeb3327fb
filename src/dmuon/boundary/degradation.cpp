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

// Appends `value` unless it is there already: first-seen order, no repeats.
void push_unique(std::vector<std::string>& list, const std::string& value) {
  if (std::find(list.begin(), list.end(), value) == list.end()) list.push_back(value);
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
  for (const auto& m : tree.modules()) push_unique(model_types, m.type);
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

namespace {

// One pass over a resolved plan: each kind of degradation is a stage that adds its findings,
// the types a better boundary would use and the sites found degraded; the last stage turns
// those types into a verified suggestion.
class DegradationAnalysis {
 public:
  DegradationAnalysis(const ModuleTree& tree, const HookPlan& plan, const BoundaryPolicy& policy)
      : tree_(tree), plan_(plan), policy_(policy) {
    count_subtrees();
  }

  DegradationReport run() {
    report_per_linear_fallbacks();
    report_lenient_fallbacks();
    for (std::size_t si = 0; si < plan_.sites.size(); ++si)
      report_swallowed_repeats(static_cast<int>(si));
    report_root_collapse();
    report_unmatched_predicates();
    suggest_boundary();
    return std::move(rep_);
  }

 private:
  SiteReason reason_of(const Site& s) const { return plan_.reason[s.params.front()]; }

  // Per-module subtree counts of dedicated parameters, and of those that fell back.
  void count_subtrees() {
    subtree_dedicated_.assign(tree_.num_modules(), 0);
    subtree_fallback_.assign(tree_.num_modules(), 0);
    for (int pid : plan_.dedicated) {
      const bool fb = is_fallback(plan_.reason[pid]);
      for (int m = tree_.parameter(pid).holders.front().module; m >= 0;
           m = tree_.module(m).parent) {
        ++subtree_dedicated_[m];
        if (fb) ++subtree_fallback_[m];
      }
    }
  }

  // Types a better boundary would use, in first-seen order.
  void suggest(const std::string& t) {
    if (t == tree_.module(ModuleTree::root).type || is_container_type(t)) return;
    push_unique(suggestion_, t);
  }

  // The lowest coarser unit above fallback site `s` that holds only fallbacks (and at least
  // two dedicated parameters), or -1.
  int fallback_unit(const Site& s) const {
    for (int m = tree_.module(s.module).parent; m > ModuleTree::root; m = tree_.module(m).parent) {
      if (subtree_fallback_[m] != subtree_dedicated_[m]) return -1;  // would merge with real sites
      if (!is_container_type(tree_.module(m).type) && subtree_dedicated_[m] >= 2) return m;
    }
    return -1;
  }

  // A lenient fallback is best caught by its nearest logical ancestor: with lowest-match
  // semantics that type only picks up what nothing lower claimed.
  void suggest_logical_ancestor(const Site& s) {
    int m = tree_.module(s.module).parent;
    while (m > ModuleTree::root && is_container_type(tree_.module(m).type))
      m = tree_.module(m).parent;
    suggest(m > ModuleTree::root ? tree_.module(m).type : s.type);
  }

  // 1. Fallback sites grouped under the lowest coarser unit that holds only fallbacks.
  void report_per_linear_fallbacks() {
    std::map<int, std::vector<int>> groups;  // coarser unit -> sites (ordered by unit id)
    std::vector<int> order;
    for (std::size_t si = 0; si < plan_.sites.size(); ++si) {
      const auto& s = plan_.sites[si];
      if (!is_fallback(reason_of(s))) continue;
      const int unit = fallback_unit(s);
      if (unit < 0) {
        if (reason_of(s) == SiteReason::lenient_fallback) suggest_logical_ancestor(s);
        continue;
      }
      if (!groups.count(unit)) order.push_back(unit);
      groups[unit].push_back(static_cast<int>(si));
    }
    for (int unit : order) {
      const auto& group = groups[unit];
      Finding f;
      f.kind = FindingKind::per_linear_fallback;
      f.severity = Severity::warning;
      f.site = tree_.module(unit).path;
      for (int si : group) {
        f.paths.push_back(plan_.sites[si].path);
        degraded_sites_.insert(si);
      }
      f.message = fmt::format(
          "per-Linear fallback: {} sites ({}) where one logical unit '{}' ({}) holds all {} of "
          "its dedicated parameters: one packed broadcast per owner would do",
          group.size(), abbreviate(f.paths), display(f.site), tree_.module(unit).type,
          subtree_dedicated_[unit]);
      rep_.findings.push_back(std::move(f));
      suggest(tree_.module(unit).type);
    }
  }

  // 2. Lenient fallbacks: every parameter strict mode would have rejected.
  void report_lenient_fallbacks() {
    std::vector<std::string> params;
    for (int pid : plan_.dedicated)
      if (plan_.reason[pid] == SiteReason::lenient_fallback)
        params.push_back(tree_.parameter(pid).name);
    if (params.empty()) return;
    Finding f;
    f.kind = FindingKind::lenient_fallback;
    f.paths = params;
    f.message = fmt::format(
        "lenient fallback: {} dedicated parameters matched no boundary and fell back to their "
        "direct parent ({}); strict mode rejects this",
        params.size(), abbreviate(params));
    rep_.findings.push_back(std::move(f));
  }

  // The entries of containers a site holds parameters of, per container in first-seen (model)
  // order; `loose` is set when the site also holds parameters outside any container entry.
  struct ContainerEntries {
    std::map<int, std::vector<int>> entries;  // container -> its entries inside the site
    std::vector<int> order;                   // containers, first seen first
    bool loose = false;
  };

  ContainerEntries container_entries(const Site& s) const {
    ContainerEntries out;
    for (int pid : s.params) {
      int outer = -1;
      for (int m = tree_.parameter(pid).holders.front().module; m >= 0 && m != s.module;
           m = tree_.module(m).parent) {
        const int parent = tree_.module(m).parent;
        if (parent >= 0 && is_container_type(tree_.module(parent).type)) outer = m;
      }
      if (outer < 0) {
        out.loose = true;
        continue;
      }
      const int container = tree_.module(outer).parent;
      auto& list = out.entries[container];
      if (list.empty()) out.order.push_back(container);
      if (std::find(list.begin(), list.end(), outer) == list.end()) list.push_back(outer);
    }
    return out;
  }

  // 3. A site that swallows repeated container entries (one finding per container).
  void report_swallowed_repeats(int si) {
    const auto& s = plan_.sites[static_cast<std::size_t>(si)];
    ContainerEntries found = container_entries(s);
    bool swallowed = false;
    for (int c : found.order) {
      const auto& list = found.entries[c];
      if (list.size() < 2 || !repeats_one_block(tree_, c)) {
        found.loose = true;
        continue;
      }
      swallowed = true;
      report_swallowed_container(s, c, list);
    }
    if (swallowed) {
      degraded_sites_.insert(si);
      if (found.loose) suggest(s.type);
    }
  }

  void report_swallowed_container(const Site& s, int container, const std::vector<int>& list) {
    const bool explicit_choice = policy_.kind() != PolicyKind::heuristic;
    std::vector<std::string> types;
    for (int e : list) push_unique(types, tree_.module(e).type);
    Finding f;
    f.kind = FindingKind::swallowed_repeats;
    f.severity = explicit_choice && reason_of(s) == SiteReason::predicate ? Severity::note
                                                                          : Severity::warning;
    f.site = s.path;
    for (int e : list) f.paths.push_back(tree_.module(e).path);
    f.message = fmt::format(
        "site '{}' ({}) swallows {} x {} under '{}' ({}): their broadcasts and reduces cannot "
        "pipeline with each other",
        display(s.path), s.type, list.size(), fmt::join(types, "/"), tree_.module(container).path,
        abbreviate(f.paths));
    rep_.findings.push_back(std::move(f));
    // Never suggest a leaf type (Linear): hooks per leaf are the per-Linear degradation itself.
    for (int e : list)
      if (!tree_.module(e).children.empty()) suggest(tree_.module(e).type);
  }

  // 4. Root collapse.
  void report_root_collapse() {
    if (plan_.sites.size() != 1 || plan_.sites.front().module != ModuleTree::root ||
        plan_.dedicated.size() < 2)
      return;
    Finding f;
    f.kind = FindingKind::root_collapse;
    f.site = "";
    f.message = fmt::format(
        "all {} dedicated parameters share one hook site at the root: no layer-level pipelining "
        "of broadcasts and reduces",
        plan_.dedicated.size());
    rep_.findings.push_back(std::move(f));
  }

  // 5. Predicate names that match nothing in the model.
  void report_unmatched_predicates() {
    if (policy_.kind() == PolicyKind::types) {
      for (const auto& [type, message] : unknown_boundary_types(tree_, policy_)) {
        Finding f;
        f.kind = FindingKind::unknown_type;
        f.paths = {type};
        f.message = message;
        rep_.findings.push_back(std::move(f));
      }
      return;
    }
    if (policy_.kind() != PolicyKind::paths) return;
    for (const auto& m : tree_.modules())
      if (policy_.path_regex().full_match(m.path)) return;
    Finding f;
    f.kind = FindingKind::unmatched_paths;
    f.paths = {policy_.spec()};
    f.message =
        fmt::format("boundary '{}' matches no module path", abbreviate_value(policy_.spec()));
    rep_.findings.push_back(std::move(f));
  }

  // A verified types: boundary when something degraded. Healthy sites keep their type so the
  // suggestion covers them too.
  void suggest_boundary() {
    if (rep_.warnings() == 0) return;
    if (suggestion_.empty()) {
      rep_.no_suggestion =
          "no suggestion: no module type above the degraded sites holds their parameters as a "
          "block (a per-Linear fallback directly under a container or the root); name the "
          "modules with paths:REGEX, or exclude those parameters from dedication (--dedicate)";
      return;
    }
    std::vector<std::string> all;
    for (std::size_t si = 0; si < plan_.sites.size(); ++si) {
      if (degraded_sites_.count(static_cast<int>(si))) continue;
      const auto& s = plan_.sites[si];
      if (!is_fallback(reason_of(s)) && s.module != ModuleTree::root && !is_container_type(s.type))
        push_unique(all, s.type);
    }
    for (const auto& t : suggestion_) push_unique(all, t);
    const std::string spec = fmt::format("types:{}", fmt::join(all, ","));
    try {
      auto candidate = BoundaryPolicy::parse(spec, true);
      HookPlanOptions options;
      options.reshard_after_forward = plan_.reshard_after_forward;
      auto resolved = resolve_hook_plan(tree_, plan_.dedicated, candidate, options);
      rep_.suggested_boundary = spec;
      rep_.suggested_sites = static_cast<int>(resolved.sites.size());
    } catch (const std::exception& e) {
      // An unverifiable suggestion is worse than none: say why there is none and what to do.
      rep_.no_suggestion = fmt::format(
          "no suggestion: '{}' would leave a dedicated parameter uncovered ({}); dedicated "
          "parameters outside the repeated blocks (embeddings, heads, routers) need a module type "
          "of their own in the boundary, or exclude them from dedication (--dedicate "
          "RULE&excludes:NAME)",
          abbreviate_value(spec), abbreviate_value(e.what(), 200));
    }
  }

  const ModuleTree& tree_;
  const HookPlan& plan_;
  const BoundaryPolicy& policy_;
  DegradationReport rep_;
  std::vector<int> subtree_dedicated_, subtree_fallback_;
  std::vector<std::string> suggestion_;
  std::set<int> degraded_sites_;
};

}  // namespace

DegradationReport analyse_degradations(const ModuleTree& tree, const HookPlan& plan,
                                       const BoundaryPolicy& policy) {
  return DegradationAnalysis(tree, plan, policy).run();
}

}  // namespace dmuon::boundary
