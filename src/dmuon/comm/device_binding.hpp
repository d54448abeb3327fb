#pragma once
// Which GPU each rank of a node drives, decided by the GPUs' identity (PCI bus id) rather than
// by how many a rank sees. Every rank of a node reports the devices it sees, in its own CUDA
// ordinal order; so a cluster that gives each task its own GPU through CUDA_VISIBLE_DEVICES
// (srun --gpus-per-task=1, --gpu-bind) binds as well as one where every rank sees every GPU,
// and two ranks are refused only when they would really drive the same GPU.
//
// The decision (choose_devices) is a pure function of the node's lists, so it is tested with
// scripted lists; bind_device adds the exchange over MPI and the agreement of every rank.

#include <mpi.h>

#include <string>
#include <vector>

namespace dmuon::comm {

/// What one rank sees: the PCI bus id of each visible device in CUDA ordinal order
/// ("0000:3B:00.0"), or why it sees none (`problem` non-empty). `rank` names it in messages.
struct VisibleDevices {
  int rank = 0;
  std::vector<std::string> bus_ids;
  std::string problem;
};

/// One rank's outcome: an ordinal of its own visible list, or why there is none.
struct DeviceChoice {
  int ordinal = -1;
  std::string problem;
};

/// The devices of the ranks of one node (`node[i]` is node-local rank i). `requested` >= 0:
/// that ordinal on every rank. Otherwise a rank takes the k-th device of its list, k counting
/// the lower node-local ranks with the same list, or else the first device of its list no
/// other rank drives; ranks that see fewer devices choose first. Two ranks on one bus id are
/// refused (the higher rank gets the problem) unless `allow_shared` (a test aid: several ranks
/// on one GPU, each its own NCCL host through NCCL_HOSTID).
std::vector<DeviceChoice> choose_devices(const std::vector<VisibleDevices>& node, int requested,
                                         bool allow_shared);

/// What bind_device agreed: this rank's ordinal, or (on every rank alike) the first failing
/// rank and its problem; `own_problem` is this rank's own ("" when it could bind).
struct DeviceBinding {
  int ordinal = -1;
  int failed_rank = -1;
  std::string problem;
  std::string own_problem;
  bool ok() const { return failed_rank < 0; }
};

/// Collective over `comm`: exchanges `mine` among the ranks of each node (MPI shared-memory
/// split), decides with choose_devices, and agrees on failure across all of `comm`, so no rank
/// goes on into a bootstrap the others left.
DeviceBinding bind_device(MPI_Comm comm, const VisibleDevices& mine, int requested,
                          bool allow_shared);

/// DMUON_ALLOW_SHARED_GPU=1: the test aid that lets ranks share a GPU (unset or 0: refused;
/// any other value is an InputError naming it).
bool shared_gpu_allowed();

}  // namespace dmuon::comm
