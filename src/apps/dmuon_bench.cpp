// dmuon_bench: for one topology, runs DMuon over a boundary sweep (default heuristic and custom
// boundaries, strict and lenient) next to the baselines (fsdp-adamw: the step-time target;
// fsdp-muon: the naive Muon), times every phase, counts every collective and audits the bytes
// against the exact formulas (SPEC §6), prints one table and optionally writes one results
// file (results/README.md). A strict boundary that fails at set-up is a "rejected" row, not an
// error. The table is printed before the file is written, so a failed write loses nothing.

#include <mpi.h>

#include "bench/bench_invocation.hpp"
#include "bench/samples.hpp"
#include "common/cuda_environment.hpp"
#include "common/run_agreement.hpp"
#include "common/run_main.hpp"
#include "common/setup_agreement.hpp"
#include "dmuon/base/check.hpp"
#include "kernels/scoped_kokkos.hpp"

namespace {

using namespace dmuon;

int bench(int argc, char** argv) {
  int rank = 0, size = 1;
  DMUON_CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  DMUON_CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));

  // Validate everything before the first collective; then agree: a rank whose input fails
  // (a file missing on its node) takes every rank out with its message instead of leaving
  // the others waiting in a collective.
  apps::bench::Invocation st;
  apps::run_setup(MPI_COMM_WORLD, [&] { apps::bench::set_up(argc, argv, rank, size, st); });
  if (!apps::all_ranks_go(MPI_COMM_WORLD, !st.exit_now)) return apps::kOk;
  // Ranks started with different flags or files (an MPMD launch, a node with another version
  // of a config) would run different collectives: every rank leaves with the first difference.
  apps::agree_on_run(MPI_COMM_WORLD, apps::bench::describe_run(st));

  kernels::host::ScopedKokkos kokkos;
  const auto host = apps::bench::host_info(st, rank);
  const std::string trace_spans = apps::bench::run_rows(st, rank, size);
  // The table first: a failed write must not lose the run.
  if (rank == 0) apps::bench::print_results(st, size, host);
  if (!st.o.output.empty() && !apps::bench::write_output(st, argc, argv, rank, size, host))
    return apps::kUnexpected;
  if (!st.o.trace.empty() && !apps::bench::write_trace(st, trace_spans, rank, size))
    return apps::kUnexpected;
  return apps::bench::failures(st.runs) == 0 ? apps::kOk : apps::kCheckFailed;
}

}  // namespace

int main(int argc, char** argv) {
  dmuon::apps::prefer_eager_cuda_module_loading();  // before MPI_Init or any CUDA call
  return dmuon::apps::run_mpi_main("dmuon_bench", argc, argv, [&] { return bench(argc, argv); });
}
