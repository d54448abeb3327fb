#include "dmuon/boundary/dedication.hpp"

#include <fmt/format.h>

#include "dmuon/base/abbreviate.hpp"
#include "dmuon/base/error.hpp"

namespace dmuon::boundary {
namespace {

constexpr const char* kValidTerms =
    "valid terms: all, ndim=N, ndim>=N, ndim<=N, contains:S, excludes:S, regex:R, joined by '&'";

int parse_ndim(std::string_view spec, std::string_view digits) {
  if (digits.empty() || digits.size() > 2 ||
      digits.find_first_not_of("0123456789") != std::string_view::npos)
    throw InputError(fmt::format("dedication rule '{}': bad ndim value '{}' ({})",
                                 abbreviate_value(spec), abbreviate_value(digits), kValidTerms));
  return std::stoi(std::string(digits));
}

}  // namespace

DedicationRule DedicationRule::parse(std::string_view spec) {
  DedicationRule rule;
  rule.spec_ = std::string(spec);
  if (spec.empty()) throw InputError(fmt::format("empty dedication rule ({})", kValidTerms));
  if (spec.size() > kMaxDedicationRuleLength)
    throw InputError(fmt::format("dedication rule '{}' is longer than {} characters",
                                 abbreviate_value(spec, 40), kMaxDedicationRuleLength));
  const std::string context = fmt::format("dedication rule '{}'", abbreviate_value(spec));
  std::size_t pos = 0;
  while (pos <= spec.size()) {
    std::string_view rest = spec.substr(pos);
    // A regex may contain '&': it swallows the rest of the rule.
    if (rest.substr(0, 6) == "regex:") {
      Term t{Op::regex, 0, std::string(rest.substr(6)), {}};
      t.re.emplace(t.text, context);
      rule.terms_.push_back(std::move(t));
      break;
    }
    std::size_t amp = rest.find('&');
    std::string_view term = rest.substr(0, amp);
    if (term == "all") {
      rule.terms_.push_back({Op::all, 0, {}, {}});
    } else if (term.substr(0, 5) == "ndim=") {
      rule.terms_.push_back({Op::ndim_eq, parse_ndim(spec, term.substr(5)), {}, {}});
    } else if (term.substr(0, 6) == "ndim>=") {
      rule.terms_.push_back({Op::ndim_ge, parse_ndim(spec, term.substr(6)), {}, {}});
    } else if (term.substr(0, 6) == "ndim<=") {
      rule.terms_.push_back({Op::ndim_le, parse_ndim(spec, term.substr(6)), {}, {}});
    } else if (term.substr(0, 9) == "contains:" && term.size() > 9) {
      rule.terms_.push_back({Op::contains, 0, std::string(term.substr(9)), {}});
    } else if (term.substr(0, 9) == "excludes:" && term.size() > 9) {
      rule.terms_.push_back({Op::excludes, 0, std::string(term.substr(9)), {}});
    } else {
      throw InputError(
          fmt::format("{}: unknown term '{}' ({})", context, abbreviate_value(term), kValidTerms));
    }
    if (amp == std::string_view::npos) break;
    pos += amp + 1;
  }
  return rule;
}

bool DedicationRule::matches(const model::Parameter& p) const {
  for (const auto& t : terms_) {
    switch (t.op) {
      case Op::all: break;
      case Op::ndim_eq:
        if (p.ndim() != t.ndim) return false;
        break;
      case Op::ndim_ge:
        if (p.ndim() < t.ndim) return false;
        break;
      case Op::ndim_le:
        if (p.ndim() > t.ndim) return false;
        break;
      case Op::contains:
        if (p.name.find(t.text) == std::string::npos) return false;
        break;
      case Op::excludes:
        if (p.name.find(t.text) != std::string::npos) return false;
        break;
      case Op::regex:
        if (!t.re->full_match(p.name)) return false;
        break;
    }
  }
  return true;
}

std::vector<int> select_dedicated(const model::ModuleTree& tree, const DedicationRule& rule,
                                  bool allow_empty) {
  std::vector<int> out;
  for (int p : tree.parameter_order())
    if (rule.matches(tree.parameter(p))) out.push_back(p);
  if (out.empty() && !allow_empty)
    throw InputError(fmt::format(
        "dedication rule '{}' selects none of the model's {} parameters (widen the rule, or "
        "allow an empty selection explicitly)",
        abbreviate_value(rule.spec()), tree.parameter_order().size()));
  return out;
}

}  // namespace dmuon::boundary
