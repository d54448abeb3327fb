#include "dmuon/comm/abort.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "dmuon/base/check.hpp"

namespace dmuon::comm {

void abort_all(const std::string& message, int code) {
  if (code == 0) code = 1;
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) {
    int rank = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::fprintf(stderr, "dmuon: rank %d: %s\n", rank, message.c_str());
    std::fflush(stderr);
    std::fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, code);
  } else {
    std::fprintf(stderr, "dmuon: %s\n", message.c_str());
    std::fflush(stderr);
  }
  std::_Exit(code);  // MPI_Abort should not return; make sure nothing runs on if it does
}

void verify_same_on_all_ranks(std::uint64_t hash, std::string_view what, MPI_Comm comm) {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  DMUON_CHECK_MPI(MPI_Allreduce(&hash, &lo, 1, MPI_UINT64_T, MPI_MIN, comm));
  DMUON_CHECK_MPI(MPI_Allreduce(&hash, &hi, 1, MPI_UINT64_T, MPI_MAX, comm));
  if (lo == hi) return;
  int size = 0;
  DMUON_CHECK_MPI(MPI_Comm_size(comm, &size));
  std::vector<std::uint64_t> all(static_cast<std::size_t>(size));
  DMUON_CHECK_MPI(MPI_Allgather(&hash, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, comm));
  constexpr int kShown = 16;
  std::string values;
  for (int r = 0; r < size && r < kShown; ++r)
    values += fmt::format("{}rank {}: {:#018x}", r == 0 ? "" : ", ", r, all[r]);
  if (size > kShown) values += fmt::format(", ... ({} ranks)", size);
  throw CheckFailure(fmt::format("ranks disagree on {}: hashes differ ({})", what, values));
}

}  // namespace dmuon::comm
