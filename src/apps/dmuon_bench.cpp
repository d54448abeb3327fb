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
#include "bench/run_list.hpp"
#include "bench/sweep.hpp"
#include "common/run_main.hpp"
#include "dmuon/base/check.hpp"
#include "dmuon/base/error.hpp"
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
  std::string sweep_source;
  const auto sweep =
      apps::bench::invocation_sweep(o, topo, DMUON_CONFIG_DIR, args.config_path(), &sweep_source);
  auto list = apps::bench::make_run_list(o, topo, sweep, methods, size);
  const std::vector<plan::Plan>& plans = list.plans;
  std::vector<BenchRun>& runs = list.runs;
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
