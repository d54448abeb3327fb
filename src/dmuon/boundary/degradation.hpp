#pragma once
// The silent degradations the reference never reports (SPEC §9), made visible: per-Linear
// fallbacks where a coarser logical unit existed, sites that swallow many repeated sub-modules
// (all experts of a layer, dozens of inner layers under an outer `layers.0`), lenient fallbacks,
// type names that occur nowhere in the model, and a root-collapsed plan. Each finding names the
// offending paths; the report suggests a `types:` boundary built from the model's own type
// names, verified by resolving it.

#include <string>
#include <utility>
#include <vector>

#include "dmuon/boundary/boundary_policy.hpp"
#include "dmuon/boundary/hook_plan.hpp"
#include "dmuon/model/module_tree.hpp"

namespace dmuon::boundary {

enum class FindingKind {
  per_linear_fallback,  ///< several sites where one coarser logical unit existed
  swallowed_repeats,    ///< one site holds many repeated container entries
  lenient_fallback,     ///< strict mode would have rejected these parameters
  unknown_type,         ///< a types: name that no module has (typo?)
  unmatched_paths,      ///< a paths: regex that matches no module
  root_collapse,        ///< everything in one site at the root: no layer pipelining
  idle_ranks,           ///< the ownership partition leaves ranks without any matrix
  tp_unsharded,         ///< --tp T > 1 but no dedicated parameter is TP-sharded
};
const char* finding_kind_name(FindingKind k);

enum class Severity { note, warning };

struct Finding {
  FindingKind kind;
  Severity severity = Severity::warning;
  std::string site;                ///< site path the finding is about ("" if none)
  std::vector<std::string> paths;  ///< every offending module or parameter path
  std::string message;             ///< one line, paths abbreviated
};

struct DegradationReport {
  std::vector<Finding> findings;
  std::string suggested_boundary;  ///< "" when nothing to suggest
  int suggested_sites = 0;         ///< hook sites the suggestion resolves to
  /// Warnings and no suggestion: why none can be made and what to change ("" otherwise).
  std::string no_suggestion;
  int warnings() const;
};

/// Analyses a resolved plan. Explicitly chosen coarse sites (a user's types:/paths: predicate)
/// are reported as notes, heuristic and lenient degradations as warnings.
DegradationReport analyse_degradations(const model::ModuleTree& tree, const HookPlan& plan,
                                       const BoundaryPolicy& policy);

/// For a types: policy, each listed type that no module has, with a one-line message
/// ("... occurs nowhere in the model (did you mean 'Expert'?)").
std::vector<std::pair<std::string, std::string>> unknown_boundary_types(
    const model::ModuleTree& tree, const BoundaryPolicy& policy);

/// True for container module types whose children are repeated entries (ModuleList, ...).
bool is_container_type(const std::string& type);

}  // namespace dmuon::boundary
