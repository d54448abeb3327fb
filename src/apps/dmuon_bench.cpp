// dmuon_bench: runs DMuon and its baselines on a topology over MPI, times every phase, counts
// every collective and audits the bytes against the exact formulas (SPEC §6), optionally
// checking the final weights against a one-process recomputation.

#include <fmt/format.h>
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "common/plan_options.hpp"
#include "common/run_main.hpp"
#include "dmuon/engine/engine.hpp"
#include "dmuon/engine/report.hpp"
#include "kernels/scoped_kokkos.hpp"

namespace {

using namespace dmuon;

int bench(int argc, char** argv) {
  CLI::App app{"dmuon_bench: DMuon vs FSDP/DDP baselines, measured and audited (run under mpirun)"};
  apps::PlanOptions po;
  std::vector<std::string> methods;
  std::string reshard = "z3", compute = "gemm";
  engine::EngineOptions eo;
  bool json = false;
  apps::add_plan_options(app, po);
  app.add_option("--method", methods,
                 "dmuon|fsdp-adamw|fsdp-muon|ddp-muon (repeatable or comma list; default "
                 "dmuon,fsdp-adamw,fsdp-muon)");
  app.add_option("--reshard", reshard, "z3 (re-broadcast before backward) or z2")
      ->capture_default_str();
  app.add_option("--compute", compute, "gemm (synthetic per-Linear GEMMs) or none")
      ->capture_default_str();
  app.add_option("--tokens", eo.tokens, "samples per rank (global batch = tokens x ranks)")
      ->capture_default_str();
  app.add_option("--global-tokens", eo.global_tokens,
                 "global batch in samples, split over ranks (overrides --tokens; keeps --check "
                 "comparable across rank counts)");
  app.add_option("--steps", eo.steps, "measured steps")->capture_default_str();
  app.add_option("--warmup", eo.warmup, "unmeasured steps first")->capture_default_str();
  app.add_option("--seed", eo.seed, "seed of the synthetic weights and data")
      ->capture_default_str();
  app.add_flag("--check", eo.check,
               "compare final weights with a one-process recomputation on rank 0");
  app.add_option("--check-tolerance", eo.check_tolerance, "max relative error for --check")
      ->capture_default_str();
  app.add_flag("--json", json, "print one JSON object on rank 0 instead of the table");
  app.add_option("--inject-nan-step", eo.inject_nan_step,
                 "test aid: poison one gradient on the last rank at this step (1-based); the run "
                 "must abort on all ranks naming the parameter");
  app.parse(argc, argv);
  if (po.list) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) fmt::print("{}", apps::list_topologies_text());
    return apps::kOk;
  }
  // Validate everything before the first collective: every rank throws the same InputError.
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const auto method_list = engine::parse_method_list(
      methods.empty() ? std::vector<std::string>{"dmuon,fsdp-adamw,fsdp-muon"} : methods);
  eo.reshard = plan::parse_reshard(reshard);
  eo.compute = engine::parse_compute(compute);
  const auto topo = apps::load_topology(po);
  const auto config = apps::make_plan_config(po, topo, size);
  const auto p = plan::make_plan(topo.tree, config);
  engine::validate_run(topo.tree, p, eo, size);

  kernels::host::ScopedKokkos kokkos;
  std::vector<engine::RunResult> runs;
  for (auto m : method_list) {
    eo.method = m;
    runs.push_back(engine::run_engine(topo.tree, p, eo, MPI_COMM_WORLD));
  }
  if (rank == 0) {
    if (json)
      std::cout << engine::to_json(topo, p, eo, runs).dump(2) << std::endl;
    else
      std::cout << engine::format_table(topo, p, eo, runs) << std::flush;
  }
  return engine::all_passed(runs) ? apps::kOk : apps::kCheckFailed;
}

}  // namespace

int main(int argc, char** argv) {
  return dmuon::apps::run_mpi_main("dmuon_bench", argc, argv, [&] { return bench(argc, argv); });
}
