// Death probe for abort_all: one rank aborts while every other rank waits in a barrier it can
// never leave. The CTest driver (cmake/DmuonExpectRun.cmake) requires the job to end quickly with a
// non-zero exit and the rank-prefixed message, proving no rank is left hanging.

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "dmuon/comm/abort.hpp"
#include "dmuon/comm/mpi_environment.hpp"

int main(int argc, char** argv) {
  dmuon::comm::MpiEnvironment env(&argc, &argv);
  const int victim = env.size() > 1 ? 1 : 0;
  if (env.rank() == victim) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let the others block
    dmuon::comm::abort_all("abort_probe: deliberate failure", 7);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  std::printf("abort_probe: rank %d passed the barrier\n", env.rank());
  return 0;
}
