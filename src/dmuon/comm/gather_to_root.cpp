#include "dmuon/comm/gather_to_root.hpp"

#include <unistd.h>

#include <climits>

#include "dmuon/base/check.hpp"
#include "dmuon/base/error.hpp"

namespace dmuon::comm {

std::vector<std::string> gather_strings(MPI_Comm comm, const std::string& mine, int root) {
  int rank = 0, size = 1;
  DMUON_CHECK_MPI(MPI_Comm_rank(comm, &rank));
  DMUON_CHECK_MPI(MPI_Comm_size(comm, &size));
  if (mine.size() > static_cast<std::size_t>(INT_MAX))
    throw RuntimeFailure("gather: a rank's text exceeds 2 GB");
  int len = static_cast<int>(mine.size());
  const auto n = static_cast<std::size_t>(size);
  std::vector<int> lens(n), offsets(n);
  DMUON_CHECK_MPI(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, root, comm));
  long long total = 0;
  for (std::size_t r = 0; r < n; ++r) {
    if (total > INT_MAX) throw RuntimeFailure("gather: the ranks' texts exceed 2 GB");
    offsets[r] = static_cast<int>(total);
    total += lens[r];
  }
  std::string buf(rank == root ? static_cast<std::size_t>(total) : 0, '\0');
  DMUON_CHECK_MPI(MPI_Gatherv(mine.data(), len, MPI_CHAR, buf.data(), lens.data(), offsets.data(),
                              MPI_CHAR, root, comm));
  std::vector<std::string> out;
  if (rank == root)
    for (std::size_t r = 0; r < n; ++r)
      out.push_back(
          buf.substr(static_cast<std::size_t>(offsets[r]), static_cast<std::size_t>(lens[r])));
  return out;
}

std::vector<double> gather_doubles(MPI_Comm comm, double mine, int root) {
  int rank = 0, size = 1;
  DMUON_CHECK_MPI(MPI_Comm_rank(comm, &rank));
  DMUON_CHECK_MPI(MPI_Comm_size(comm, &size));
  std::vector<double> all(rank == root ? static_cast<std::size_t>(size) : 0);
  DMUON_CHECK_MPI(MPI_Gather(&mine, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, root, comm));
  return all;
}

std::string host_name() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

}  // namespace dmuon::comm
