// Plans the built-in moe topology (tiny preset) at 8 ranks with the default boundary through
// the installed library: the default heuristic puts one hook site on each of the 4 MoE layers
// (layers.0 .. layers.3, README "tiny: sites default -> recommended": 4 -> 36); and reads a
// Newton–Schulz schedule through the installed kernels API. Every header is spelled
// "dmuon/...": the installed tree has no other include root. Exit 0 when both are right.
#include <cstdio>

#include "dmuon/engine/step/engine_options.hpp"  // includes kernels headers itself
#include "dmuon/kernels/newton_schulz.hpp"
#include "dmuon/model/topology.hpp"
#include "dmuon/plan/plan.hpp"

int main() {
  const auto topo = dmuon::model::build_topology("moe", "tiny");
  dmuon::plan::PlanConfig c;
  c.dedicate_rule = topo.dedicate_rule;
  c.boundary = "default";
  c.partition.shard = 8;
  const auto p = dmuon::plan::make_plan(topo.tree, c);
  const auto schedule =
      dmuon::kernels::ns_schedule(dmuon::kernels::NsCoefficientSet::classic_muon, 3);
  std::printf("hook sites: %zu, NS steps: %zu\n", p.hooks.sites.size(), schedule.size());
  return p.hooks.sites.size() == 4 && schedule.size() == 3 ? 0 : 1;
}
