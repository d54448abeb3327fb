#pragma once
// Which parameters are *dedicated* (one owner runs Muon on them), SPEC §4.
//
// A rule is a conjunction of terms joined by '&':
//   all            every parameter
//   ndim=N         exactly N dimensions (also ndim>=N, ndim<=N)
//   contains:S     canonical name contains S
//   excludes:S     canonical name does not contain S
//   regex:R        canonical name fully matches the RE2 regex R (must be the last term;
//                  linear-time matching, see regex.hpp)
// e.g. "ndim=2&excludes:router", "contains:proj". A rule is at most kMaxDedicationRuleLength
// characters.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dmuon/boundary/regex.hpp"
#include "dmuon/model/module_tree.hpp"

namespace dmuon::boundary {

inline constexpr std::size_t kMaxDedicationRuleLength = std::size_t{1} << 20;

class DedicationRule {
 public:
  /// Parses a rule; throws InputError naming the bad term and the valid forms.
  static DedicationRule parse(std::string_view spec);

  bool matches(const model::Parameter& p) const;
  const std::string& spec() const { return spec_; }

 private:
  enum class Op { all, ndim_eq, ndim_ge, ndim_le, contains, excludes, regex };
  struct Term {
    Op op;
    int ndim = 0;
    std::string text;
    std::optional<Regex> re;
  };
  std::string spec_;
  std::vector<Term> terms_;
};

/// Dedicated parameter ids in model order. Zero matches is an InputError unless allow_empty.
std::vector<int> select_dedicated(const model::ModuleTree& tree, const DedicationRule& rule,
                                  bool allow_empty = false);

}  // namespace dmuon::boundary
