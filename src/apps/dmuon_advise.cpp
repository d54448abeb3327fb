// dmuon_advise: which hook boundary and layout to run. Starting from the invocation's own
// choices (dmuon_project's flags), it searches the knobs of the option table (boundaries, owner
// strategies and cost models, R x G, Z2/Z3, prefetch depth, the wire dtype, the pack threshold,
// --ac, and the micro-batch and the context-parallel size with the --accum that keeps the
// step's batch) on the projection
// (advise/search.hpp), prunes what does not fit the memory cap and what another candidate
// dominates, prints a ranked table and writes the winner as a config file (docs/ADVISOR.md).
// One process, no MPI launch.

#include <fmt/format.h>
#include <mpi.h>

#include <iostream>

#include "advise/advise_output.hpp"
#include "advise/evaluator.hpp"
#include "advise/search.hpp"
#include "bench/progress.hpp"
#include "common/config_dir.hpp"
#include "common/plan_setup.hpp"
#include "common/run_machine.hpp"
#include "common/run_main.hpp"
#include "dmuon/base/atomic_file.hpp"
#include "dmuon/base/check.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/config/config_file.hpp"
#include "dmuon/work/step_work.hpp"
#include "options/tool_options.hpp"
#include "project/projection_setup.hpp"

namespace {

using namespace dmuon;
using apps::advise::AdviseContext;

constexpr const char* kAbout =
    "dmuon_advise: searches hook boundary and layout (owner strategy, R x G, Z2/Z3, prefetch, "
    "wire dtype, pack threshold, --ac, micro-batch and --cp at the same step batch) for DMuon "
    "on a modelled cluster, from the projection; prints a ranked table and writes the winner "
    "as a config file";

std::string model_label(const apps::ModelChoice& m) {
  if (!m.topology_file.empty()) return m.topology_file;
  return fmt::format("{} ({})", m.preset.empty() ? std::string("default preset") : m.preset,
                     m.topology);
}

// The memory cap: the machine's, or --memory-cap when it is smaller.
void set_capacity(AdviseContext& ctx, const apps::RunOptions& o) {
  ctx.capacity_gb = ctx.machine->memory_gb;
  ctx.capacity_source = "machine";
  const double cap = o.advise.memory_cap_gb;
  if (cap > 0 && (ctx.machine->memory_gb <= 0 || cap < ctx.machine->memory_gb)) {
    ctx.capacity_gb = cap;
    ctx.capacity_source = "--memory-cap";
  }
}

// The CP sizes to search: with a step work, on a GPU machine, for a model context parallelism
// splits (every stack causal text; work::check_context_parallel); else the start's alone. A
// start above 1 that the machine or the model refuses fails at once, as dmuon_project would.
std::vector<int> searched_cp(const apps::RunOptions& o, const model::Topology& topo,
                             const AdviseContext& ctx) {
  if (o.workload.cp > 1) {
    apps::project::require_cp_machine(o.workload.cp, *ctx.machine);
    work::check_context_parallel(topo, o.workload.cp);
    // At R = 1 the shard groups are the largest: no R holds whole CP groups if it does not.
    auto flat = o;
    flat.plan.partition.replicate = 1;
    apps::project::check_cp_world(flat, ctx.world);
  }
  if (o.workload.seq_len <= 0 || ctx.machine->device != project::DeviceKind::gpu) return {};
  try {
    work::check_context_parallel(topo, 2);
  } catch (const InputError&) {
    return {};
  }
  return apps::advise::cp_values(o.workload.cp, o.engine.step.accum, o.workload.seq_len, ctx.world,
                                 o.plan.tp, o.workload.sequence_parallel);
}

apps::advise::SearchResult run_search(const apps::RunOptions& o, const model::Topology& topo,
                                      const AdviseContext& ctx) {
  const std::string start_boundary = apps::resolve_boundary_alias(
      o.boundaries.empty() ? "default" : config::parse_boundary_item(o.boundaries.front()).spec,
      topo);
  const auto start = apps::advise::candidate_of(o, start_boundary);
  // The start's model as a rank holds it (--ep E: an EP rank's tree); other --ep sizes are
  // made from the whole model by the evaluator.
  const model::Topology rank = apps::rank_topology(topo, o.plan.ep);
  apps::advise::Evaluator evaluator(o, rank, *ctx.machine, ctx.world, ctx.capacity_gb, &topo);
  apps::bench::Progress progress(0, 1, 1);
  apps::advise::SearchOptions so;
  so.max_passes = o.advise.max_passes;
  so.time_limit_s = o.advise.time_limit_s;
  so.tolerance = o.advise.tolerance_pct / 100;
  so.baselines = o.advise.top;
  so.progress = [&](const std::string& line) { progress.show(line); };
  auto result = apps::advise::search(
      evaluator, start,
      apps::advise::make_search_space(topo, start, ctx.world, ctx.machine->nvlink_domain, o.plan.tp,
                                      o.workload.seq_len > 0, searched_cp(o, topo, ctx)),
      so);
  progress.done();
  return result;
}

int advise_main(int argc, char** argv) {
  int size = 1;
  DMUON_CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
  apps::RunOptions o;
  if (apps::options::parse_tool_options(apps::options::kAdvise, kAbout, argc, argv, o).exit_now)
    return apps::kOk;
  if (size != 1)
    throw InputError(fmt::format("dmuon_advise runs in one process (started with {} ranks)", size));
  const auto machine = apps::load_run_machine(o);
  const auto topo = apps::load_topology(o.model);
  const auto& out = o.advise.write_config;
  if (!out.empty()) check_writable(out, "--write-config");
  AdviseContext ctx;
  ctx.model = model_label(o.model);
  ctx.machine = &machine;
  ctx.world = o.projection.world_sizes.front();
  ctx.base = &o;
  set_capacity(ctx, o);
  const auto result = run_search(o, topo, ctx);
  const bool fits = result.of(result.best).outcome.status == apps::advise::Status::ok;
  if (o.json)
    std::cout << apps::advise::advise_json(ctx, result, o.advise.top).dump(2) << std::endl;
  else
    std::cout << apps::advise::advise_table(ctx, result, o.advise.top) << std::flush;
  if (out.empty()) return fits ? apps::kOk : apps::kCheckFailed;
  if (!fits) {
    std::cerr << fmt::format("dmuon_advise: {}; nothing written to {}\n",
                             result.time_limit_hit
                                 ? "no fitting candidate found before the time limit"
                                 : "no candidate fits",
                             out);
    return apps::kCheckFailed;
  }
  write_file_atomically(out, apps::advise::winner_config(ctx, result), "--write-config");
  if (!o.json) std::cout << fmt::format("# winner written to {}\n", out);
  return apps::kOk;
}

}  // namespace

int main(int argc, char** argv) {
  return dmuon::apps::run_mpi_main("dmuon_advise", argc, argv,
                                   [&] { return advise_main(argc, argv); });
}
