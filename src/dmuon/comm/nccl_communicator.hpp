#pragma once
// Communicator over NCCL on DEVICE buffers, bootstrapped over an MPI communicator (rank 0's
// ncclUniqueId is broadcast with MPI). All collectives run on one non-blocking CUDA stream
// owned by the communicator (stream_handle()); a batch is ncclGroupStart/End plus a CUDA event
// recorded on that stream, and Batch::wait() synchronizes on the event. AVG is ncclAvg.
//
// Declared here without CUDA/NCCL types so callers need neither header. When the library is
// built without NCCL, the factory throws RuntimeFailure ("NCCL backend not compiled: ...").
// At run time, every rank throws the same RuntimeFailure when any rank sees no CUDA device or
// when a node has more ranks than devices, so no rank is left waiting in the bootstrap.

#include <mpi.h>

#include <memory>

#include "dmuon/comm/communicator.hpp"

namespace dmuon::comm {

/// Collective over `comm`. See make_communicator.
std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm comm,
                                                     const CommunicatorOptions& options);

}  // namespace dmuon::comm
