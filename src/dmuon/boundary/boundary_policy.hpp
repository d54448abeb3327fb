#pragma once
// How hook sites are chosen (SPEC §3): the reference's default heuristic, or a custom
// predicate/resolver, in strict or lenient mode.
//
// Spec strings (the same on the command line and in configs):
//   default                       layers.N / blocks.N heuristic on the direct parent's path
//   types:T1,T2,...               predicate: module type name is one of these
//   paths:REGEX                   predicate: module path fully matches REGEX ("" is the root)
//   resolver:PRE=PATH;PRE=PATH    resolver: the first parameter-name regex PRE that fully
//                                 matches maps the parameter to module PATH (any module, even a
//                                 non-ancestor); no match means "none"
// Regexes are RE2 (linear-time matching, see regex.hpp). A spec is at most
// kMaxBoundarySpecLength characters and a resolver at most kMaxResolverRules rules.

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dmuon/boundary/regex.hpp"

namespace dmuon::boundary {

inline constexpr std::size_t kMaxBoundarySpecLength = std::size_t{1} << 20;
inline constexpr std::size_t kMaxResolverRules = 4096;

enum class PolicyKind { heuristic, types, paths, resolver };

struct ResolverRule {
  Regex re;  ///< over the parameter's canonical name
  std::string module_path;
  const std::string& pattern() const { return re.pattern(); }
};

class BoundaryPolicy {
 public:
  /// Parses a spec string; throws InputError naming the bad part and the valid forms.
  static BoundaryPolicy parse(std::string_view spec, bool strict = true);

  PolicyKind kind() const { return kind_; }
  bool strict() const { return strict_; }
  const std::string& spec() const { return spec_; }
  /// "types:A,B (strict)" and the like: what tables and results files show.
  std::string label() const;

  const std::vector<std::string>& types() const { return types_; }
  /// The paths: regex (kind() == paths only).
  const Regex& path_regex() const { return *path_re_; }
  const std::vector<ResolverRule>& resolver_rules() const { return rules_; }

 private:
  PolicyKind kind_ = PolicyKind::heuristic;
  bool strict_ = true;
  std::string spec_;
  std::vector<std::string> types_;
  std::optional<Regex> path_re_;
  std::vector<ResolverRule> rules_;
};

}  // namespace dmuon::boundary
