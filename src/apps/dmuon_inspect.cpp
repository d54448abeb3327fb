// dmuon_inspect: where DMuon would register its hooks and who owns each matrix, for a
// topology, a boundary policy and a rank layout — and what that choice costs (the report:
// inspect/inspection.hpp). No MPI launch.

#include <iostream>

#include "common/plan_setup.hpp"
#include "common/run_main.hpp"
#include "inspect/inspection.hpp"
#include "options/tool_options.hpp"

namespace {

using namespace dmuon;

constexpr const char* kAbout =
    "dmuon_inspect: hook sites, owners and their cost for a DMuon plan (no MPI needed)";

int inspect(int argc, char** argv) {
  apps::RunOptions o;
  if (apps::options::parse_tool_options(apps::options::kInspect, kAbout, argc, argv, o).exit_now)
    return apps::kOk;
  const auto a = apps::inspect::inspect_args(o);
  const auto topo = apps::load_rank_topology(o);
  const auto modes = apps::inspect::resolve_modes(topo, a);
  const auto ddp = apps::inspect::ddp_volume(topo, apps::inspect::shown_mode(modes, a), a);
  if (o.json)
    std::cout << apps::inspect::inspect_json(topo, modes, ddp ? &*ddp : nullptr, a).dump(1) << "\n";
  else
    apps::inspect::print_report(topo, modes, ddp ? &*ddp : nullptr, a);
  return apps::kOk;
}

}  // namespace

int main(int argc, char** argv) {
  return dmuon::apps::run_main("dmuon_inspect", [&] { return inspect(argc, argv); });
}
