// dmuon_advise: which hook boundary and layout to run. Starting from the invocation's own
// choices (dmuon_project's flags), it searches boundaries, owner strategies and cost models,
// R x G, Z2/Z3, prefetch depth, the wire dtype, the pack threshold and --ac on the projection
// (advise/search.hpp), prunes what does not fit the memory cap and what another candidate
// dominates, prints a ranked table and writes the winner as a config file (docs/ADVISOR.md).
// One process, no MPI launch.

#include <fmt/format.h>

#include <mpi.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <iostream>

#include "advise/advise_output.hpp"
#include "advise/evaluator.hpp"
#include "advise/search.hpp"
#include "bench/progress.hpp"
#include "common/config_dir.hpp"
#include "common/run_main.hpp"
#include "dmuon/base/atomic_file.hpp"
#include "dmuon/base/check.hpp"
#include "dmuon/base/comma_list.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/config/config_file.hpp"
#include "project/project_options.hpp"

namespace {

using namespace dmuon;
using apps::advise::Candidate;

// dmuon_project flags the advisor sets itself or has no use for.
const char* const kNotAdvised[] = {"--calibrate",   "--output-machine", "--machine-name", "--trace",
                                   "--trace-ranks", "--output",         "--symmetry",     "--wide",
                                   "--repeats",     "--lenient"};

struct AdviseFlags {
  double memory_cap_gb = 0;  ///< 0: the machine's memory_GB
  int top = 10;
  double time_limit_s = 180;
  int max_passes = 3;
  std::string write_config;
};

const std::vector<config::ConfigKey>& advise_config_keys() {
  static const std::vector<config::ConfigKey> keys = [] {
    std::vector<config::ConfigKey> k;
    for (const auto& key : apps::project::project_config_keys()) {
      const std::string flag = key.flag();
      if (std::find(std::begin(kNotAdvised), std::end(kNotAdvised), flag) == std::end(kNotAdvised))
        k.push_back(key);
    }
    using config::KeyKind;
    k.push_back({"memory_cap", KeyKind::scalar, "device memory per rank the layout must fit (GB)"});
    k.push_back({"top", KeyKind::scalar, "rows of the ranked table"});
    k.push_back({"time_limit", KeyKind::scalar, "seconds the search may take"});
    k.push_back({"max_passes", KeyKind::scalar, "coordinate-descent passes at most"});
    k.push_back({"write_config", KeyKind::scalar, "where to write the winner's config (YAML)"});
    return k;
  }();
  return keys;
}

void add_advise_options(CLI::App& app, apps::project::ProjectOptions& o, AdviseFlags& a) {
  apps::project::add_project_options(app, o);
  for (const char* flag : kNotAdvised) app.remove_option(app.get_option(flag));
  app.add_option("--memory-cap", a.memory_cap_gb,
                 "device memory per rank a layout must fit, GB (default: the machine's "
                 "memory_GB; the smaller of the two when both are given)");
  app.add_option("--top", a.top, "rows of the ranked table")->capture_default_str();
  app.add_option("--time-limit", a.time_limit_s,
                 "seconds the search may take: it stops before a projection that would overrun "
                 "(and says so)")
      ->capture_default_str();
  app.add_option("--max-passes", a.max_passes, "coordinate-descent passes at most")
      ->capture_default_str();
  app.add_option("--write-config", a.write_config,
                 "write the winner as a config file (YAML) that dmuon_bench --config and "
                 "dmuon_project --config accept");
}

// The search starts from what the invocation chose (each knob a single value).
Candidate start_candidate(const apps::project::ProjectOptions& o, const model::Topology& topo) {
  const auto& b = o.bench;
  Candidate c;
  if (b.boundaries.size() > 1)
    throw InputError(fmt::format(
        "--boundary is given {} times; the advisor starts from one boundary and searches the "
        "others itself",
        b.boundaries.size()));
  if (!b.boundaries.empty()) {
    const auto item = config::parse_boundary_item(b.boundaries.front());
    if (item.strict.has_value() && !*item.strict)
      throw InputError(fmt::format(
          "--boundary {}: the advisor searches strict boundaries only (a lenient one hides "
          "uncovered parameters)",
          b.boundaries.front()));
    c.boundary = apps::resolve_boundary_alias(item.spec, topo);
  }
  if (b.owner_strategies_resolved.size() > 1)
    throw InputError(
        "--owner-strategy names several strategies; the advisor starts from one and searches "
        "the others itself");
  c.owner_strategy = b.owner_strategies_resolved.front();
  c.cost_model = b.plan.cost_model;
  c.replicate = b.plan.replicate;
  c.reshard = b.reshard;
  c.prefetch = b.engine.step.prefetch;
  c.comm_dtype = b.comm_dtype;
  c.pack_threshold = b.plan.no_pack ? 0 : b.plan.pack_threshold;
  c.ac = b.ac;
  return c;
}

void validate_flags(const AdviseFlags& a, const apps::project::ProjectOptions& o) {
  if (!std::isfinite(a.memory_cap_gb) || a.memory_cap_gb < 0 || a.memory_cap_gb > 1e6)
    throw InputError(fmt::format(
        "--memory-cap {} is invalid (valid: GB per rank, > 0 and at most 1e6)", a.memory_cap_gb));
  if (a.top < 1 || a.top > 1000)
    throw InputError(fmt::format("--top {} is invalid (valid: 1..1000)", a.top));
  if (!std::isfinite(a.time_limit_s) || a.time_limit_s <= 0 || a.time_limit_s > 86400)
    throw InputError(fmt::format(
        "--time-limit {} is invalid (valid: seconds, > 0 and at most 86400)", a.time_limit_s));
  if (a.max_passes < 1 || a.max_passes > 20)
    throw InputError(fmt::format("--max-passes {} is invalid (valid: 1..20)", a.max_passes));
  if (o.worlds.size() != 1)
    throw InputError(fmt::format(
        "--world-size names {} worlds; the advisor answers for one (run it once per world)",
        o.worlds.size()));
}

std::string model_label(const apps::PlanOptions& p) {
  if (!p.topology_file.empty()) return p.topology_file;
  return fmt::format("{} ({})", p.preset.empty() ? std::string("default preset") : p.preset,
                     p.topology);
}

int advise_main(int argc, char** argv) {
  int size = 1;
  DMUON_CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
  config::ExpandedArgs args(argc, argv, advise_config_keys());
  CLI::App app{
      "dmuon_advise: searches hook boundary and layout (owner strategy, R x G, Z2/Z3, "
      "prefetch, wire dtype, pack threshold, --ac) for DMuon on a modelled cluster, from the "
      "projection; prints a ranked table and writes the winner as a config file"};
  apps::project::ProjectOptions o;
  AdviseFlags a;
  app.add_option("--config", "YAML config file (keys = these flags; flags given here win)");
  add_advise_options(app, o, a);
  if (!apps::parse_cli(app, args.argc(), args.argv())) return apps::kOk;
  if (o.bench.plan.list) {
    fmt::print("{}", apps::list_topologies_text());
    return apps::kOk;
  }
  if (size != 1)
    throw InputError(fmt::format("dmuon_advise runs in one process (started with {} ranks)", size));
  // --method is accepted so that a winner's config (method: [dmuon]) can start a new search.
  for (const auto& m : split_comma_lists(o.bench.methods, "--method"))
    if (m != "dmuon")
      throw InputError(fmt::format(
          "--method {}: dmuon_advise searches layouts for dmuon (valid: dmuon; fsdp-adamw is "
          "projected beside every ranked row)",
          m));
  o.bench.methods = {"dmuon"};
  apps::project::resolve_project_options(o);
  validate_flags(a, o);
  const auto machine = project::load_machine(
      o.machine, apps::config_dir().empty() ? std::string() : apps::config_dir() + "/machines");
  const auto topo = apps::load_topology(o.bench.plan);
  if (!a.write_config.empty()) check_writable(a.write_config, "--write-config");
  const int world = o.worlds.front();
  const Candidate start = start_candidate(o, topo);

  apps::advise::AdviseContext ctx;
  ctx.model = model_label(o.bench.plan);
  ctx.machine = &machine;
  ctx.world = world;
  ctx.base = &o;
  ctx.capacity_gb = machine.memory_gb;
  ctx.capacity_source = "machine";
  if (a.memory_cap_gb > 0 && (machine.memory_gb <= 0 || a.memory_cap_gb < machine.memory_gb)) {
    ctx.capacity_gb = a.memory_cap_gb;
    ctx.capacity_source = "--memory-cap";
  }

  apps::advise::Evaluator evaluator(o, topo, machine, world, ctx.capacity_gb);
  apps::bench::Progress progress(0, 1, 1);
  apps::advise::SearchOptions so;
  so.max_passes = a.max_passes;
  so.time_limit_s = a.time_limit_s;
  so.baselines = a.top;
  so.progress = [&](const std::string& line) { progress.show(line); };
  const auto result = apps::advise::search(
      evaluator, start,
      apps::advise::make_search_space(topo, start, world, o.bench.plan.tp, o.bench.seq_len > 0),
      so);
  progress.done();

  const bool fits = result.of(result.best).outcome.status == apps::advise::Status::ok;
  if (o.bench.json)
    std::cout << apps::advise::advise_json(ctx, result, a.top).dump(2) << std::endl;
  else
    std::cout << apps::advise::advise_table(ctx, result, a.top) << std::flush;
  if (!a.write_config.empty()) {
    if (!fits) {
      std::cerr << fmt::format("dmuon_advise: no candidate fits; nothing written to {}\n",
                               a.write_config);
      return apps::kCheckFailed;
    }
    write_file_atomically(a.write_config, apps::advise::winner_config(ctx, result),
                          "--write-config");
    if (!o.bench.json) std::cout << fmt::format("# winner written to {}\n", a.write_config);
  }
  return fits ? apps::kOk : apps::kCheckFailed;
}

}  // namespace

int main(int argc, char** argv) {
  return dmuon::apps::run_mpi_main("dmuon_advise", argc, argv,
                                   [&] { return advise_main(argc, argv); });
}
