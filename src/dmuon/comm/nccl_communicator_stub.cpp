// Built instead of nccl_communicator.cpp when the library has no NCCL: callers stay #ifdef-free.
#include "dmuon/base/error.hpp"
#include "dmuon/comm/nccl_communicator.hpp"

namespace dmuon::comm {

std::string nccl_version() {
  return "n/a";
}

DeviceBinding bind_cuda_device(MPI_Comm /*comm*/, int /*requested*/) {
  throw RuntimeFailure(
      "NCCL backend not compiled: rebuild with -DDMUON_ENABLE_CUDA=ON and NCCL installed");
}

std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm /*comm*/,
                                                     const CommunicatorOptions& /*options*/) {
  throw RuntimeFailure(
      "NCCL backend not compiled: rebuild with -DDMUON_ENABLE_CUDA=ON and NCCL installed");
}

}  // namespace dmuon::comm
