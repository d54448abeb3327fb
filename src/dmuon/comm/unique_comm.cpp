#include "dmuon/comm/unique_comm.hpp"

#include "dmuon/base/check.hpp"

namespace dmuon::comm {

UniqueComm dup_comm(MPI_Comm comm) {
  MPI_Comm out = MPI_COMM_NULL;
  DMUON_CHECK_MPI(MPI_Comm_dup(comm, &out));
  return UniqueComm(out);
}

}  // namespace dmuon::comm
