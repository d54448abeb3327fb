#include "dmuon/boundary/boundary_policy.hpp"

#include <fmt/format.h>

#include "dmuon/base/abbreviate.hpp"
#include "dmuon/base/error.hpp"

namespace dmuon::boundary {
namespace {

constexpr const char* kValidPolicies =
    "valid: default, types:T1,T2,..., paths:REGEX, resolver:PARAM_REGEX=MODULE_PATH;...";

}  // namespace

BoundaryPolicy BoundaryPolicy::parse(std::string_view spec, bool strict) {
  if (spec.size() > kMaxBoundarySpecLength)
    throw InputError(fmt::format("boundary '{}' is longer than {} characters",
                                 abbreviate_value(spec, 40), kMaxBoundarySpecLength));
  // Every message quotes the spec cut to a readable length.
  const std::string spec_text = abbreviate_value(spec);
  const std::string context = fmt::format("boundary '{}'", spec_text);
  BoundaryPolicy p;
  p.spec_ = std::string(spec);
  p.strict_ = strict;
  if (spec == "default" || spec == "heuristic") {
    p.kind_ = PolicyKind::heuristic;
    p.spec_ = "default";
  } else if (spec.substr(0, 6) == "types:") {
    p.kind_ = PolicyKind::types;
    std::string_view list = spec.substr(6);
    std::size_t pos = 0;
    while (pos <= list.size()) {
      std::size_t comma = list.find(',', pos);
      std::string_view t =
          list.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
      if (t.empty())
        throw InputError(
            fmt::format("{}: empty type name in the list ({})", context, kValidPolicies));
      p.types_.emplace_back(t);
      if (comma == std::string_view::npos) break;
      pos = comma + 1;
    }
  } else if (spec.substr(0, 6) == "paths:") {
    p.kind_ = PolicyKind::paths;
    p.path_re_.emplace(spec.substr(6), context);
  } else if (spec.substr(0, 9) == "resolver:") {
    p.kind_ = PolicyKind::resolver;
    std::string_view list = spec.substr(9);
    std::size_t pos = 0;
    while (pos < list.size()) {
      std::size_t semi = list.find(';', pos);
      std::string_view rule =
          list.substr(pos, semi == std::string_view::npos ? std::string_view::npos : semi - pos);
      // The module path never contains '=', the regex might: split at the last '='.
      std::size_t eq = rule.rfind('=');
      if (eq == std::string_view::npos || eq == 0)
        throw InputError(fmt::format("{}: resolver rule '{}' is not PARAM_REGEX=MODULE_PATH",
                                     context, abbreviate_value(rule)));
      if (p.rules_.size() == kMaxResolverRules)
        throw InputError(
            fmt::format("{}: more than {} resolver rules", context, kMaxResolverRules));
      p.rules_.push_back({Regex(rule.substr(0, eq), context), std::string(rule.substr(eq + 1))});
      if (semi == std::string_view::npos) break;
      pos = semi + 1;
    }
    if (p.rules_.empty())
      throw InputError(fmt::format("{}: resolver has no rules ({})", context, kValidPolicies));
  } else {
    throw InputError(fmt::format("unknown boundary policy '{}' ({})", spec_text, kValidPolicies));
  }
  return p;
}

std::string BoundaryPolicy::label() const {
  return fmt::format("{} ({})", spec_, strict_ ? "strict" : "lenient");
}

}  // namespace dmuon::boundary
