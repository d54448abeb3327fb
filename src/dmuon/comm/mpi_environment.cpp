#include "dmuon/comm/mpi_environment.hpp"

#include <mpi.h>

#include <cstdlib>

#include <fmt/format.h>

#include "dmuon/base/check.hpp"

namespace dmuon::comm {

void prefer_progress_friendly_collectives() {
  setenv("OMPI_MCA_coll_libnbc_ireduce_algorithm", "2", /*overwrite=*/0);  // 2 = binomial
  setenv("OMPI_MCA_coll_libnbc_ibcast_algorithm", "2", /*overwrite=*/0);   // 2 = binomial
}

MpiEnvironment::MpiEnvironment(int* argc, char*** argv) {
  int initialized = 0;
  DMUON_CHECK_MPI(MPI_Initialized(&initialized));
  if (!initialized) {
    int provided = MPI_THREAD_SINGLE;
    DMUON_CHECK_MPI(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
    owns_ = true;
    if (provided < MPI_THREAD_FUNNELED)
      throw RuntimeFailure(
          fmt::format("MPI provides thread level {} but dmuon needs MPI_THREAD_FUNNELED ({})",
                      provided, MPI_THREAD_FUNNELED));
  }
  DMUON_CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  DMUON_CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  DMUON_CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size_));
}

MpiEnvironment::~MpiEnvironment() {
  if (!owns_) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace dmuon::comm
