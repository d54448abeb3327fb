#pragma once
// Parameter routes (`--route RULE=ROUTE`, repeatable): how each parameter is communicated and
// updated, overriding the default the dedication rule gives (dedicated: muon; else: fsdp).
//   muon           owner-based (DMuon): packed broadcast from the owner, reduce(avg) to the
//                  owner, Muon on the owner (the dedicated parameters' default)
//   adamw          owner-based exactly like muon, but an AdamW step on the owner
//   fsdp           sharded: all-gather in forward (Z3 twice), reduce-scatter(avg), HSDP
//                  all-reduce of the shard, AdamW on the shard (the others' default)
//   sharded_adamw  its own flat buffer sharded over the shard group (padded to a multiple of
//                  G), all-gathered at the boundary rule's site (Z3: again before that
//                  site's backward), reduce-scatter(avg) deferred to the end of backward,
//                  HSDP all-reduce of the shard, AdamW on the shard (plan.hpp sharded_hooks;
//                  under dmuon only: the baselines run it as fsdp)
// RULE has the --dedicate syntax (dedication.hpp) and splits at the last '=' (a rule may hold
// '=' itself: `ndim=1=adamw`). The first --route whose rule matches a parameter decides it.
// A per-route dtype `RULE=ROUTE:DTYPE` is parsed (a route name never holds ':') and refused
// (InputError): every route travels in --comm-dtype.
// The owner-based parameters (routes muon and adamw) are the ones the partition assigns owners
// to and the hook plan places at sites: they replace "dedicated" in every DMuon formula.

#include <string>
#include <string_view>
#include <vector>

#include "dmuon/boundary/dedication.hpp"
#include "dmuon/model/module_tree.hpp"

namespace dmuon::plan {

enum class ParamRoute { muon, adamw, fsdp, sharded_adamw };
const char* route_name(ParamRoute r);
/// "muon" | "adamw" | "fsdp" | "sharded_adamw"; throws InputError otherwise.
ParamRoute parse_route(std::string_view s);
inline bool owner_based(ParamRoute r) {
  return r == ParamRoute::muon || r == ParamRoute::adamw;
}

struct RouteRule {
  boundary::DedicationRule rule;
  ParamRoute route = ParamRoute::fsdp;
  std::string spec;  ///< as given
};

/// Parses "RULE=ROUTE"; throws InputError (one line naming the bad value and the valid forms)
/// for a missing '=', an empty or bad rule, an unknown route, and for a per-route dtype
/// suffix (':fp32', ':bf16': not supported).
RouteRule parse_route_rule(std::string_view spec);

/// The route of every parameter (by parameter id): the first matching rule's, else muon for
/// the parameters `dedication` matches and fsdp for the others.
std::vector<ParamRoute> resolve_routes(const model::ModuleTree& tree,
                                       const boundary::DedicationRule& dedication,
                                       const std::vector<RouteRule>& rules);

/// "RULE=ROUTE;RULE=ROUTE" for provenance and run keys ("" without routes).
std::string routes_text(const std::vector<std::string>& specs);

}  // namespace dmuon::plan
