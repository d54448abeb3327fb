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
// A per-route dtype `RULE=ROUTE:DTYPE` (fp32 | bf16; a route name never holds ':') sets the
// dtype the matched parameters' weights and gradients travel in, instead of --comm-dtype
// (masters stay fp32). Owner-based parameters in another type than the wire's pack into a
// buffer of their own: one per (site, owner, type), so a site's owner broadcasts once per type.
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
  int wire_bytes = 0;  ///< ':fp32' 4, ':bf16' 2; 0: the run's --comm-dtype
  std::string spec;    ///< as given
};

/// Parses "RULE=ROUTE[:DTYPE]"; throws InputError (one line naming the bad value and the valid
/// forms) for a missing '=', an empty or bad rule, an unknown route or dtype.
RouteRule parse_route_rule(std::string_view spec);

/// The route of every parameter (by parameter id): the first matching rule's, else muon for
/// the parameters `dedication` matches and fsdp for the others.
std::vector<ParamRoute> resolve_routes(const model::ModuleTree& tree,
                                       const boundary::DedicationRule& dedication,
                                       const std::vector<RouteRule>& rules);

/// Per parameter id: the wire bytes per element its route's dtype gives (the first matching
/// rule's, as resolve_routes), 0 where that rule has no dtype or no rule matches.
std::vector<int> resolve_route_wire_bytes(const model::ModuleTree& tree,
                                          const std::vector<RouteRule>& rules);

/// "RULE=ROUTE;RULE=ROUTE" for provenance and run keys ("" without routes).
std::string routes_text(const std::vector<std::string>& specs);

}  // namespace dmuon::plan
