// Built only when DMUON_HAVE_NCCL (see CMakeLists.txt); host code, no kernels, so the host
// compiler builds it against cudart and NCCL.
#include "dmuon/comm/nccl_communicator.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "dmuon/base/check.hpp"
#include "dmuon/comm/abort.hpp"
#include "dmuon/comm/nccl_check.hpp"

namespace dmuon::comm {

std::string nccl_version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "unknown";
  // NCCL >= 2.9 encodes major * 10000 + minor * 100 + patch.
  return fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);
}

namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::bf16: return ncclBfloat16;
    case DType::f16: return ncclFloat16;
  }
  return ncclFloat32;
}

// Decides this rank's device, or why there is none. All ranks agree on the outcome before any
// rank enters the NCCL bootstrap (which would otherwise hang waiting for the failed ones).
int select_device(MPI_Comm comm, const CommunicatorOptions& options) {
  // Collective first, on every rank, so no rank's early failure can unbalance the calls.
  MPI_Comm node = MPI_COMM_NULL;
  DMUON_CHECK_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  int local_rank = 0;
  int local_size = 1;
  DMUON_CHECK_MPI(MPI_Comm_rank(node, &local_rank));
  DMUON_CHECK_MPI(MPI_Comm_size(node, &local_size));
  DMUON_CHECK_MPI(MPI_Comm_free(&node));

  std::string problem;
  int device = -1;
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    problem =
        fmt::format("no CUDA device visible (cudaGetDeviceCount: {})", cudaGetErrorString(rc));
    (void)cudaGetLastError();  // reset the runtime's last-error state
  } else if (count == 0) {
    problem = "no CUDA device visible (cudaGetDeviceCount returned 0 devices)";
  } else if (options.cuda_device >= 0) {
    if (options.cuda_device < count)
      device = options.cuda_device;
    else
      problem =
          fmt::format("CUDA device {} requested but only {} visible", options.cuda_device, count);
  } else if (local_size > count) {
    problem = fmt::format(
        "{} ranks on this node share {} visible CUDA device(s); NCCL needs one device per rank",
        local_size, count);
  } else {
    device = local_rank % count;
  }
  const int local_ok = problem.empty() ? 1 : 0;
  int all_ok = 0;
  DMUON_CHECK_MPI(MPI_Allreduce(&local_ok, &all_ok, 1, MPI_INT, MPI_MIN, comm));
  if (!local_ok) throw RuntimeFailure("NCCL communicator: " + problem);
  if (!all_ok)
    throw RuntimeFailure(
        "NCCL communicator: another rank could not select a CUDA device (no CUDA device "
        "visible there, or too few devices); see that rank's error");
  return device;
}

// How long a host wait on an NCCL batch may take before the job is declared hung:
// DMUON_NCCL_TIMEOUT_S seconds (default 600).
double wait_timeout_s() {
  static const double t = [] {
    const char* v = std::getenv("DMUON_NCCL_TIMEOUT_S");
    const double s = v ? std::atof(v) : 0.0;
    return s > 0 ? s : 600.0;
  }();
  return t;
}

// Aborts the NCCL communicator and ends the job (every rank) with the reason.
[[noreturn]] void abort_communicator(ncclComm_t comm, const std::string& why) {
  if (comm) ncclCommAbort(comm);
  abort_all("NCCL: " + why);
}

// Host wait for `event` that keeps polling the communicator's asynchronous error state (a
// failed peer otherwise leaves the event pending forever) and gives up after the timeout.
void wait_event(cudaEvent_t event, ncclComm_t comm) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    const cudaError_t rc = cudaEventQuery(event);
    if (rc == cudaSuccess) return;
    if (rc != cudaErrorNotReady) DMUON_CHECK_CUDA(rc);
    ncclResult_t async = ncclSuccess;
    if (comm && ncclCommGetAsyncError(comm, &async) == ncclSuccess && async != ncclSuccess &&
        async != ncclInProgress)
      abort_communicator(comm, fmt::format("asynchronous error: {}", ncclGetErrorString(async)));
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > wait_timeout_s())
      abort_communicator(comm, fmt::format("a collective did not complete within {:.0f} s "
                                           "(DMUON_NCCL_TIMEOUT_S); a peer is gone or hung",
                                           wait_timeout_s()));
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

class NcclBatch final : public detail::BatchState {
 public:
  NcclBatch(cudaStream_t stream, ncclComm_t comm) : comm_(comm) {
    DMUON_CHECK_CUDA(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
    DMUON_CHECK_CUDA(cudaEventRecord(event_, stream));
  }
  // Destroying a recorded event is legal while it is pending (released when it completes).
  ~NcclBatch() override { cudaEventDestroy(event_); }
  NcclBatch(const NcclBatch&) = delete;
  NcclBatch& operator=(const NcclBatch&) = delete;

  void wait() override { wait_event(event_, comm_); }
  bool test() override {
    const cudaError_t rc = cudaEventQuery(event_);
    if (rc == cudaErrorNotReady) return false;
    DMUON_CHECK_CUDA(rc);
    return true;
  }
  void enqueue_wait(void* stream) override {
    DMUON_CHECK_CUDA(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), event_, 0));
  }

 private:
  cudaEvent_t event_ = nullptr;
  ncclComm_t comm_ = nullptr;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(MPI_Comm comm, int rank, int size, int device)
      : Communicator(Backend::nccl, rank, size), device_(device) {
    DMUON_CHECK_CUDA(cudaSetDevice(device_));
    // Rank 0's id travels with its result code, so a failure there fails every rank instead
    // of leaving the others in MPI_Bcast or ncclCommInitRank.
    struct {
      int rc;
      ncclUniqueId id;
    } boot;
    std::memset(&boot, 0, sizeof(boot));
    if (rank == 0) boot.rc = static_cast<int>(ncclGetUniqueId(&boot.id));
    DMUON_CHECK_MPI(MPI_Bcast(&boot, static_cast<int>(sizeof(boot)), MPI_BYTE, 0, comm));
    DMUON_CHECK_NCCL(static_cast<ncclResult_t>(boot.rc));  // ncclGetUniqueId on rank 0
    DMUON_CHECK_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    active_ = stream_;
    try {
      DMUON_CHECK_NCCL(ncclCommInitRank(&nccl_, size, boot.id, rank));
    } catch (...) {
      cudaStreamDestroy(stream_);
      throw;
    }
  }

  ~NcclCommunicator() override {
    if (stream_) {
      cudaStreamSynchronize(stream_);
      cudaStreamDestroy(stream_);
    }
    if (nccl_) ncclCommDestroy(nccl_);
  }

  void* stream_handle() const override { return active_; }
  void set_stream(void* stream) override {
    active_ = stream ? static_cast<cudaStream_t>(stream) : stream_;
  }
  void check_async_error() override {
    ncclResult_t async = ncclSuccess;
    DMUON_CHECK_NCCL(ncclCommGetAsyncError(nccl_, &async));
    if (async != ncclSuccess && async != ncclInProgress)
      abort_communicator(nccl_, fmt::format("asynchronous error: {}", ncclGetErrorString(async)));
  }

 protected:
  void do_broadcast(void* buf, std::size_t count, DType dtype, int root) override {
    DMUON_CHECK_NCCL(ncclBroadcast(buf, buf, count, nccl_type(dtype), root, nccl_, active_));
  }
  void do_reduce(const void* send, void* recv, std::size_t count, DType dtype, int root,
                 ReduceOp op) override {
    // NCCL reads recvbuff on the root only; elsewhere any valid pointer will do.
    DMUON_CHECK_NCCL(ncclReduce(send, recv ? recv : const_cast<void*>(send), count,
                                nccl_type(dtype), nccl_op(op), root, nccl_, active_));
  }
  void do_reduce_scatter(const void* send, void* recv, std::size_t chunk, DType dtype,
                         ReduceOp op) override {
    DMUON_CHECK_NCCL(
        ncclReduceScatter(send, recv, chunk, nccl_type(dtype), nccl_op(op), nccl_, active_));
  }
  void do_all_gather(const void* send, void* recv, std::size_t chunk, DType dtype) override {
    DMUON_CHECK_NCCL(ncclAllGather(send, recv, chunk, nccl_type(dtype), nccl_, active_));
  }
  // NCCL has no rooted gather or scatter: point-to-point inside the open group (nccl-tests'
  // gather_perf / scatter_perf do the same); the root's own chunk is a device copy.
  void do_gather(const void* send, void* recv, std::size_t chunk, DType dtype, int root) override {
    const std::size_t bytes = chunk * dtype_size(dtype);
    if (rank() != root) {
      DMUON_CHECK_NCCL(ncclSend(send, chunk, nccl_type(dtype), root, nccl_, active_));
      return;
    }
    auto* out = static_cast<unsigned char*>(recv);
    for (int r = 0; r < size(); ++r) {
      void* slot = out + static_cast<std::size_t>(r) * bytes;
      if (r != root)
        DMUON_CHECK_NCCL(ncclRecv(slot, chunk, nccl_type(dtype), r, nccl_, active_));
      else if (slot != send && bytes > 0)
        DMUON_CHECK_CUDA(cudaMemcpyAsync(slot, send, bytes, cudaMemcpyDeviceToDevice, active_));
    }
  }
  void do_scatter(const void* send, void* recv, std::size_t chunk, DType dtype, int root) override {
    const std::size_t bytes = chunk * dtype_size(dtype);
    if (rank() != root) {
      DMUON_CHECK_NCCL(ncclRecv(recv, chunk, nccl_type(dtype), root, nccl_, active_));
      return;
    }
    const auto* in = static_cast<const unsigned char*>(send);
    for (int r = 0; r < size(); ++r) {
      const void* slot = in + static_cast<std::size_t>(r) * bytes;
      if (r != root)
        DMUON_CHECK_NCCL(ncclSend(slot, chunk, nccl_type(dtype), r, nccl_, active_));
      else if (slot != recv && bytes > 0)
        DMUON_CHECK_CUDA(cudaMemcpyAsync(recv, slot, bytes, cudaMemcpyDeviceToDevice, active_));
    }
  }
  void do_all_reduce(const void* send, void* recv, std::size_t count, DType dtype,
                     ReduceOp op) override {
    DMUON_CHECK_NCCL(
        ncclAllReduce(send, recv, count, nccl_type(dtype), nccl_op(op), nccl_, active_));
  }
  void do_group_start() override {
    DMUON_CHECK_CUDA(cudaSetDevice(device_));
    DMUON_CHECK_NCCL(ncclGroupStart());
  }
  std::unique_ptr<detail::BatchState> do_group_end() override {
    DMUON_CHECK_NCCL(ncclGroupEnd());
    return std::make_unique<NcclBatch>(active_, nccl_);
  }

 private:
  static ncclRedOp_t nccl_op(ReduceOp op) {
    return op == ReduceOp::avg ? ncclAvg : op == ReduceOp::max ? ncclMax : ncclSum;
  }

  int device_;
  ncclComm_t nccl_ = nullptr;
  cudaStream_t stream_ = nullptr;  // owned
  cudaStream_t active_ = nullptr;  // where batches run now (stream_ or a caller's)
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm comm,
                                                     const CommunicatorOptions& options) {
  int rank = 0;
  int size = 0;
  DMUON_CHECK_MPI(MPI_Comm_rank(comm, &rank));
  DMUON_CHECK_MPI(MPI_Comm_size(comm, &size));
  const int device = select_device(comm, options);
  return std::make_unique<NcclCommunicator>(comm, rank, size, device);
}

}  // namespace dmuon::comm
