// dmuon_project: projects dmuon_bench's rows onto a modelled cluster. For each world size the
// same rows as dmuon_bench are planned and every rank's step schedule is replayed on the
// machine model (project/projection_run.hpp): the same table, JSON and results file as
// dmuon_bench, marked as projected, with MFU and tokens/s. One process; --calibrate measures
// the machine at hand under mpirun and writes a machine file instead.

#include <fmt/format.h>
#include <mpi.h>

#include "common/run_agreement.hpp"
#include "common/run_main.hpp"
#include "common/setup_agreement.hpp"
#include "dmuon/base/check.hpp"
#include "dmuon/base/error.hpp"
#include "options/tool_options.hpp"
#include "project/calibrate.hpp"
#include "project/projection_run.hpp"

namespace {

using namespace dmuon;

constexpr const char* kAbout =
    "dmuon_project: dmuon_bench's rows replayed on a modelled cluster (NCCL cost model, machine "
    "files in configs/machines), or --calibrate the machine at hand under mpirun";

int project_main(int argc, char** argv) {
  int rank = 0, size = 1;
  DMUON_CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  DMUON_CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
  // Under mpirun (--calibrate) a rank whose input fails, or that resolved another mode, must
  // take the others out instead of leaving them in the calibration's first collective.
  apps::RunOptions o;
  apps::options::ParsedCommandLine cl;
  apps::run_setup(MPI_COMM_WORLD, [&] {
    cl = apps::options::parse_tool_options(apps::options::kProject, kAbout, argc, argv, o,
                                           rank == 0);
  });
  if (!apps::all_ranks_go(MPI_COMM_WORLD, !cl.exit_now)) return apps::kOk;
  // The calibration depends on no option but the mode: the machine file's path and name are
  // rank 0's alone.
  apps::RunDescription run;
  run.add("mode", o.projection.calibrate ? "calibrate" : "projection");
  apps::agree_on_run(MPI_COMM_WORLD, run);
  if (o.projection.calibrate) return apps::project::calibrate(o.projection, MPI_COMM_WORLD);
  if (size != 1)
    throw InputError(fmt::format(
        "a projection runs in one process (started with {} ranks); only --calibrate runs under "
        "mpirun -n N",
        size));
  return apps::project::run_projection(o, argc, argv, cl.config_path);
}

}  // namespace

int main(int argc, char** argv) {
  return dmuon::apps::run_mpi_main("dmuon_project", argc, argv,
                                   [&] { return project_main(argc, argv); });
}
