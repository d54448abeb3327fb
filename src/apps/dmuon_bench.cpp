// dmuon_bench: for one topology, runs DMuon over a boundary sweep (default heuristic and custom
// boundaries, strict and lenient) next to the baselines (fsdp-adamw: the step-time target;
// fsdp-muon: the naive Muon), times every phase, counts every collective and audits the bytes
// against the exact formulas (SPEC §6), prints one table and optionally writes one results
// file (results/README.md). A strict boundary that fails at set-up is a "rejected" row, not an
// error.

#include <fmt/format.h>
#include <mpi.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "bench/bench_options.hpp"
#include "bench/bench_output.hpp"
#include "bench/bench_record.hpp"
#include "bench/progress.hpp"
#include "bench/sweep.hpp"
#include "common/run_main.hpp"
#include "dmuon/base/check.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/boundary/degradation.hpp"
#include "dmuon/config/config_file.hpp"
#include "dmuon/engine/engine.hpp"
#include "dmuon/results/provenance.hpp"
#include "dmuon/results/results_writer.hpp"
#include "kernels/scoped_kokkos.hpp"

#ifndef DMUON_CONFIG_DIR
#define DMUON_CONFIG_DIR ""
#endif

namespace {

using namespace dmuon;
using apps::bench::BenchRun;

// Rank 0 checks the output path; every rank learns the verdict (exit 2 together).
void check_output(const std::string& path, int rank) {
  std::string err;
  if (rank == 0) {
    try {
      results::check_output_writable(path);
    } catch (const InputError& e) {
      err = e.what();
    }
  }
  int len = static_cast<int>(err.size());
  DMUON_CHECK_MPI(MPI_Bcast(&len, 1, MPI_INT, 0, MPI_COMM_WORLD));
  err.resize(static_cast<std::size_t>(len));
  DMUON_CHECK_MPI(MPI_Bcast(err.data(), len, MPI_CHAR, 0, MPI_COMM_WORLD));
  if (!err.empty()) throw InputError(err);
}

std::vector<std::string> gather_hostnames(int rank, int size) {
  constexpr int kLen = 256;
  char mine[kLen] = {};
  gethostname(mine, kLen - 1);
  std::vector<char> all(rank == 0 ? static_cast<std::size_t>(kLen * size) : 0);
  DMUON_CHECK_MPI(MPI_Gather(mine, kLen, MPI_CHAR, all.data(), kLen, MPI_CHAR, 0, MPI_COMM_WORLD));
  std::vector<std::string> out;
  for (int q = 0; rank == 0 && q < size; ++q)
    out.emplace_back(all.data() + static_cast<std::ptrdiff_t>(q) * kLen);
  return out;
}

std::vector<std::string> warning_lines(const plan::Plan& p) {
  std::vector<std::string> w;
  for (const auto& f : p.report.findings)
    if (f.severity == boundary::Severity::warning)
      w.push_back(fmt::format("WARNING [{}] {}", boundary::finding_kind_name(f.kind), f.message));
  return w;
}

int bench(int argc, char** argv) {
  int rank = 0, size = 1;
  DMUON_CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  DMUON_CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
  // --config FILE becomes flags placed before the command line (configs/README.md).
  config::ExpandedArgs args(argc, argv, config::bench_config_keys());
  CLI::App app{
      "dmuon_bench: DMuon over a boundary sweep vs FSDP baselines, measured and audited (run "
      "under mpirun)"};
  apps::bench::BenchOptions o;
  app.add_option("--config", "YAML config file (keys = these flags; flags given here win)");
  apps::bench::add_bench_options(app, o);
  if (!apps::parse_cli(app, args.argc(), args.argv(), rank == 0)) return apps::kOk;
  if (o.plan.list) {
    if (rank == 0) fmt::print("{}", apps::list_topologies_text());
    return apps::kOk;
  }

  // Validate everything before the first collective: every rank throws the same InputError.
  const auto methods = apps::bench::resolve_engine_options(o);
  engine::validate(o.engine, size);
  const auto topo = apps::load_topology(o.plan);
  std::string sweep_source = "--boundary";
  std::vector<apps::bench::BoundaryChoice> sweep;
  if (o.boundaries.empty()) {
    const auto items =
        o.plan.topology_file.empty()
            ? apps::bench::default_sweep_items(topo.name, DMUON_CONFIG_DIR, &sweep_source)
            : apps::bench::builtin_sweep_items();
    if (!o.plan.topology_file.empty()) sweep_source = "built-in";
    sweep = apps::bench::resolve_sweep(items, false, topo, true);
  } else {
    if (!args.config_path().empty()) sweep_source = args.config_path() + " / --boundary";
    sweep = apps::bench::resolve_sweep(o.boundaries, o.lenient, topo, false);
  }
  bool want_dmuon = false;
  for (auto m : methods) want_dmuon = want_dmuon || m == engine::Method::dmuon;

  std::vector<plan::Plan> plans;
  std::vector<BenchRun> runs;
  plan::PlanConfig baseline_config;
  int baseline_plan = -1;
  // dmuon rows: every boundary of the sweep under every owner strategy.
  for (const auto& choice : sweep)
    for (std::size_t strategy = 0; strategy < o.owner_strategies_resolved.size(); ++strategy) {
      apps::PlanOptions po = o.plan;
      po.boundary = choice.spec;
      po.lenient = !choice.strict;
      po.owner_strategy = o.owner_strategies_resolved[strategy];
      BenchRun run;
      run.boundary = choice;
      run.config = apps::make_plan_config(po, topo, size);
      try {
        plans.push_back(plan::make_plan(topo.tree, run.config));
        run.plan_index = static_cast<int>(plans.size()) - 1;
        run.warnings = warning_lines(plans.back());
        if (baseline_plan < 0) {
          baseline_plan = run.plan_index;
          baseline_config = run.config;
        }
      } catch (const InputError& e) {
        // A strict boundary that plans leniently was rejected for coverage: a result, not an
        // input error. Anything else (bad spec, bad rule) is bad input.
        if (!choice.strict) throw;
        auto lenient = run.config;
        lenient.strict = false;
        try {
          (void)plan::make_plan(topo.tree, lenient);
        } catch (const InputError&) {
          throw e;
        }
        if (strategy > 0) continue;  // rejected for coverage: once per boundary is enough
        run.status = "rejected";
        run.error = e.what();
      }
      if (want_dmuon) runs.push_back(std::move(run));
    }
  bool want_baselines = false;
  for (auto m : methods) want_baselines = want_baselines || m != engine::Method::dmuon;
  if (want_baselines && baseline_plan < 0) {
    // Every sweep row was rejected: the baselines still run (they ignore the boundary).
    apps::PlanOptions po = o.plan;
    po.boundary = "default";
    po.lenient = true;
    baseline_config = apps::make_plan_config(po, topo, size);
    plans.push_back(plan::make_plan(topo.tree, baseline_config));
    baseline_plan = static_cast<int>(plans.size()) - 1;
  }
  for (auto m : methods) {
    if (m == engine::Method::dmuon) continue;
    BenchRun run;
    run.baseline = true;
    run.method = m;
    run.plan_index = baseline_plan;
    run.config = baseline_config;
    runs.push_back(std::move(run));
  }
  for (const auto& run : runs)
    if (run.ok()) {
      auto eo = o.engine;
      eo.method = run.method;
      engine::validate_run(topo.tree, plans[static_cast<std::size_t>(run.plan_index)], eo, size);
    }
  if (!o.output.empty()) check_output(o.output, rank);

  kernels::host::ScopedKokkos kokkos;
  int measured = 0;
  for (const auto& run : runs) measured += run.ok();
  apps::bench::Progress progress(rank, measured,
                                 static_cast<long>(measured) * o.engine.total_steps());
  for (auto& run : runs) {
    if (!run.ok()) continue;
    auto eo = o.engine;
    eo.method = run.method;
    progress.begin_run(fmt::format("{} {}", engine::method_name(run.method),
                                   run.baseline ? "(baseline)" : run.boundary.label()));
    eo.on_step = [&progress](int s, int total) { progress.step(s, total); };
    run.result = engine::run_engine(topo.tree, plans[static_cast<std::size_t>(run.plan_index)], eo,
                                    MPI_COMM_WORLD);
  }
  progress.done();

  if (!o.output.empty()) {
    const auto hosts = gather_hostnames(rank, size);
    if (rank == 0) {
      results::ResultsFile f;
      f.provenance = results::collect_provenance(argc, argv, size, o.plan.replicate);
      f.provenance.hostnames = hosts;
      f.runs = apps::bench::make_records(topo, plans, o, runs);
      results::write_results(o.output, f);
    }
  }
  if (rank == 0) {
    if (o.json)
      std::cout << apps::bench::to_json(topo, plans, o, size, runs).dump(2) << std::endl;
    else
      std::cout << apps::bench::format_table(topo, plans, o, size, runs, sweep_source)
                << std::flush;
  }
  return apps::bench::failures(runs) == 0 ? apps::kOk : apps::kCheckFailed;
}

}  // namespace

int main(int argc, char** argv) {
  return dmuon::apps::run_mpi_main("dmuon_bench", argc, argv, [&] { return bench(argc, argv); });
}
