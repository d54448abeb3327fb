#include "dmuon/plan/param_route.hpp"

#include <fmt/format.h>

#include "dmuon/base/abbreviate.hpp"
#include "dmuon/base/error.hpp"

namespace dmuon::plan {

const char* route_name(ParamRoute r) {
  switch (r) {
    case ParamRoute::muon: return "muon";
    case ParamRoute::adamw: return "adamw";
    case ParamRoute::fsdp: return "fsdp";
    case ParamRoute::sharded_adamw: return "sharded_adamw";
  }
  return "?";
}

ParamRoute parse_route(std::string_view s) {
  for (ParamRoute r :
       {ParamRoute::muon, ParamRoute::adamw, ParamRoute::fsdp, ParamRoute::sharded_adamw})
    if (s == route_name(r)) return r;
  throw InputError(
      fmt::format("unknown parameter route '{}' (valid: muon, adamw, fsdp, sharded_adamw)",
                  abbreviate_value(s)));
}

RouteRule parse_route_rule(std::string_view spec) {
  const auto eq = spec.rfind('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == spec.size())
    throw InputError(fmt::format(
        "--route '{}' is not RULE=ROUTE (RULE in the --dedicate syntax, ROUTE one of muon, "
        "adamw, fsdp, sharded_adamw), e.g. --route 'contains:norm=adamw'",
        abbreviate_value(spec)));
  // "contains:x==muon": parameter names never hold '=', so a rule ending in one is a typo.
  if (spec[eq - 1] == '=')
    throw InputError(fmt::format(
        "--route '{}' has '==' (one '=' separates RULE and ROUTE, e.g. 'contains:norm=adamw')",
        abbreviate_value(spec)));
  // ROUTE[:DTYPE]: a route name never holds ':', so the dtype suffix cannot be confused with
  // the rule's own '=' or ':' (the rule ends at the last '=').
  std::string_view route_text = spec.substr(eq + 1);
  int wire_bytes = 0;
  const auto colon = route_text.find(':');
  const ParamRoute route = parse_route(route_text.substr(0, colon));  // named before a dtype
  if (colon != std::string_view::npos) {
    const auto dtype = route_text.substr(colon + 1);
    if (dtype != "fp32" && dtype != "bf16")
      throw InputError(fmt::format("--route '{}': dtype '{}' is invalid (valid: fp32, bf16)",
                                   abbreviate_value(spec), abbreviate_value(dtype)));
    wire_bytes = dtype == "fp32" ? 4 : 2;
  }
  const auto rule = [&] {
    try {
      return boundary::DedicationRule::parse(spec.substr(0, eq));
    } catch (const InputError& e) {
      throw InputError(fmt::format("--route '{}': {}", abbreviate_value(spec), e.what()));
    }
  };
  return RouteRule{rule(), route, wire_bytes, std::string(spec)};
}

namespace {

// The first rule matching parameter `p`, or nullptr.
const RouteRule* first_match(const model::Parameter& p, const std::vector<RouteRule>& rules) {
  for (const auto& rule : rules)
    if (rule.rule.matches(p)) return &rule;
  return nullptr;
}

}  // namespace

std::vector<ParamRoute> resolve_routes(const model::ModuleTree& tree,
                                       const boundary::DedicationRule& dedication,
                                       const std::vector<RouteRule>& rules) {
  std::vector<ParamRoute> out(static_cast<std::size_t>(tree.num_parameters()), ParamRoute::fsdp);
  for (int pid : tree.parameter_order()) {
    const auto& p = tree.parameter(pid);
    const RouteRule* rule = first_match(p, rules);
    out[static_cast<std::size_t>(pid)] = rule != nullptr         ? rule->route
                                         : dedication.matches(p) ? ParamRoute::muon
                                                                 : ParamRoute::fsdp;
  }
  return out;
}

std::vector<int> resolve_route_wire_bytes(const model::ModuleTree& tree,
                                          const std::vector<RouteRule>& rules) {
  std::vector<int> out(static_cast<std::size_t>(tree.num_parameters()), 0);
  for (int pid : tree.parameter_order()) {
    const RouteRule* rule = first_match(tree.parameter(pid), rules);
    if (rule != nullptr) out[static_cast<std::size_t>(pid)] = rule->wire_bytes;
  }
  return out;
}

std::string routes_text(const std::vector<std::string>& specs) {
  std::string s;
  for (const auto& r : specs) s += (s.empty() ? "" : ";") + r;
  return s;
}

}  // namespace dmuon::plan
