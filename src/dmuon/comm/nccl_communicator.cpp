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

// What this process sees: the PCI bus id of every visible device, or why none.
VisibleDevices query_visible_devices(int rank) {
  VisibleDevices v;
  v.rank = rank;
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    v.problem =
        fmt::format("no CUDA device visible (cudaGetDeviceCount: {})", cudaGetErrorString(rc));
    (void)cudaGetLastError();  // reset the runtime's last-error state
    return v;
  }
  if (count == 0) v.problem = "no CUDA device visible (cudaGetDeviceCount returned 0 devices)";
  for (int d = 0; d < count && v.problem.empty(); ++d) {
    char id[32] = {};
    const cudaError_t e = cudaDeviceGetPCIBusId(id, static_cast<int>(sizeof(id)), d);
    if (e != cudaSuccess)
      v.problem = fmt::format("cannot read the PCI bus id of CUDA device {} ({})", d,
                              cudaGetErrorString(e));
    else
      v.bus_ids.emplace_back(id);
  }
  return v;
}

// Decides this rank's device, or why there is none. All ranks agree on the outcome before any
// rank enters the NCCL bootstrap (which would otherwise hang waiting for the failed ones).
int select_device(MPI_Comm comm, const CommunicatorOptions& options) {
  const DeviceBinding b = bind_cuda_device(comm, options.cuda_device);
  if (b.ok()) return b.ordinal;
  if (!b.own_problem.empty()) throw RuntimeFailure("NCCL communicator: " + b.own_problem);
  throw RuntimeFailure(
      fmt::format("NCCL communicator: another rank could not select a CUDA device (rank {}: {})",
                  b.failed_rank, b.problem));
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

  // After abort() nothing waits: the stream may hold NCCL kernels that never finish.
  ~NcclCommunicator() override {
    if (stream_) {
      if (!aborted_) cudaStreamSynchronize(stream_);
      cudaStreamDestroy(stream_);
    }
    if (nccl_ && !aborted_) ncclCommDestroy(nccl_);
  }

  void abort() noexcept override {
    if (nccl_ == nullptr || aborted_) return;
    aborted_ = true;
    ncclCommAbort(nccl_);
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
  // NCCL has no all-to-all: a send to and a receive from every peer inside the open group
  // (nccl-tests' alltoall_perf does the same); the rank's own chunk is a device copy.
  void do_all_to_all(const void* send, void* recv, std::size_t chunk, DType dtype) override {
    const std::size_t bytes = chunk * dtype_size(dtype);
    const auto* in = static_cast<const unsigned char*>(send);
    auto* out = static_cast<unsigned char*>(recv);
    for (int r = 0; r < size(); ++r) {
      const auto off = static_cast<std::size_t>(r) * bytes;
      if (r == rank()) {
        if (bytes > 0)
          DMUON_CHECK_CUDA(
              cudaMemcpyAsync(out + off, in + off, bytes, cudaMemcpyDeviceToDevice, active_));
        continue;
      }
      DMUON_CHECK_NCCL(ncclSend(in + off, chunk, nccl_type(dtype), r, nccl_, active_));
      DMUON_CHECK_NCCL(ncclRecv(out + off, chunk, nccl_type(dtype), r, nccl_, active_));
    }
  }
  void do_send(const void* buf, std::size_t count, DType dtype, int peer) override {
    DMUON_CHECK_NCCL(ncclSend(buf, count, nccl_type(dtype), peer, nccl_, active_));
  }
  void do_recv(void* buf, std::size_t count, DType dtype, int peer) override {
    DMUON_CHECK_NCCL(ncclRecv(buf, count, nccl_type(dtype), peer, nccl_, active_));
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
  bool aborted_ = false;           // abort(): ncclCommAbort freed the communicator
};

}  // namespace

DeviceBinding bind_cuda_device(MPI_Comm comm, int requested) {
  int world_rank = 0;
  DMUON_CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank));
  const bool shared = shared_gpu_allowed();  // read before the collective: InputError alike
  return bind_device(comm, query_visible_devices(world_rank), requested, shared);
}

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
