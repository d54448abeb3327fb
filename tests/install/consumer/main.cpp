// Plans the built-in moe topology (tiny preset) at 8 ranks with the default boundary through
// the installed library: the default heuristic puts one hook site on each of the 4 MoE layers
// (layers.0 .. layers.3, README "tiny: sites default -> recommended": 4 -> 36). Exit 0 when so.
#include <cstdio>

#include "dmuon/model/topology.hpp"
#include "dmuon/plan/plan.hpp"

int main() {
  const auto topo = dmuon::model::build_topology("moe", "tiny");
  dmuon::plan::PlanConfig c;
  c.dedicate_rule = topo.dedicate_rule;
  c.boundary = "default";
  c.partition.shard = 8;
  const auto p = dmuon::plan::make_plan(topo.tree, c);
  std::printf("hook sites: %zu\n", p.hooks.sites.size());
  return p.hooks.sites.size() == 4 ? 0 : 1;
}
