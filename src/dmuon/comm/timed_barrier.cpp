#include "dmuon/comm/timed_barrier.hpp"

#include <chrono>

#include "dmuon/base/check.hpp"

namespace dmuon::comm {

double timed_barrier_ms(MPI_Comm comm) {
  const auto start = std::chrono::steady_clock::now();
  DMUON_CHECK_MPI(MPI_Barrier(comm));
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace dmuon::comm
