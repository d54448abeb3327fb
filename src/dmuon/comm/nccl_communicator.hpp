#pragma once
// Communicator over NCCL on DEVICE buffers, bootstrapped over an MPI communicator (rank 0's
// ncclUniqueId is broadcast with MPI). Collectives run on the communicator's own non-blocking
// stream or on a caller's (set_stream: the CUDA engine issues weights, reduces and replicas on
// streams of their own); a batch is ncclGroupStart/End plus a CUDA event recorded on that
// stream. Batch::wait() polls the event together with ncclCommGetAsyncError and gives up after
// DMUON_NCCL_TIMEOUT_S (default 600 s): on an asynchronous error or the timeout it calls
// ncclCommAbort and ends the job naming the rank; Batch::wait_on_stream() orders another
// stream after the batch without blocking the host. AVG is ncclAvg.
//
// Declared here without CUDA/NCCL types so callers need neither header. When the library is
// built without NCCL, the factory throws RuntimeFailure ("NCCL backend not compiled: ...").
// At run time, every rank throws a RuntimeFailure when any rank sees no CUDA device or when two
// ranks of a node would drive the same GPU (device_binding.hpp: GPUs are told apart by PCI
// bus id, so per-task CUDA_VISIBLE_DEVICES works), so no rank is left waiting in the bootstrap.

#include <mpi.h>

#include <memory>
#include <string>

#include "dmuon/comm/communicator.hpp"
#include "dmuon/comm/device_binding.hpp"

namespace dmuon::comm {

/// The NCCL library's version at run time ("2.28.3"), "n/a" when built without NCCL.
std::string nccl_version();

/// This rank's CUDA device: the devices it sees, told apart by PCI bus id, bound among the
/// ranks of its node (choose_devices); `requested` >= 0 asks for that ordinal. Collective over
/// `comm`, the outcome agreed by every rank; DMUON_ALLOW_SHARED_GPU=1 lets ranks share a GPU.
/// Without NCCL: RuntimeFailure ("NCCL backend not compiled: ...").
DeviceBinding bind_cuda_device(MPI_Comm comm, int requested);

/// Collective over `comm`. See make_communicator.
std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm comm,
                                                     const CommunicatorOptions& options);

}  // namespace dmuon::comm
