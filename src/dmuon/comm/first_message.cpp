#include "dmuon/comm/first_message.hpp"

#include "dmuon/base/check.hpp"

namespace dmuon::comm {

std::string agree_first_message(bool failed, const std::string& message, MPI_Comm comm,
                                int* first_rank) {
  int rank = 0, size = 1;
  DMUON_CHECK_MPI(MPI_Comm_rank(comm, &rank));
  DMUON_CHECK_MPI(MPI_Comm_size(comm, &size));
  const int mine = failed ? rank : size;
  int first = size;
  DMUON_CHECK_MPI(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm));
  if (first_rank) *first_rank = first == size ? -1 : first;
  if (first == size) return std::string();
  int len = rank == first ? static_cast<int>(message.size()) : 0;
  DMUON_CHECK_MPI(MPI_Bcast(&len, 1, MPI_INT, first, comm));
  std::string out = rank == first ? message : std::string(static_cast<std::size_t>(len), ' ');
  DMUON_CHECK_MPI(MPI_Bcast(out.data(), len, MPI_CHAR, first, comm));
  return out;
}

}  // namespace dmuon::comm
