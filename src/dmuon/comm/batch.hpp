#pragma once
// A handle to collectives issued together between Communicator::group_start() and group_end().
// The operations are in flight once group_end() returns; run compute, then wait(). Buffers
// passed to the batched operations must stay valid (and untouched) until wait() returns.

#include <memory>

namespace dmuon::comm {

namespace detail {
/// What a backend keeps for one issued batch (MPI: requests; NCCL: a CUDA event).
class BatchState {
 public:
  virtual ~BatchState() = default;
  /// Blocks until every operation completed and its results are in the receive buffers.
  virtual void wait() = 0;
  /// Nonblocking: drives progress, returns true once wait() would not block.
  virtual bool test() = 0;
  /// Makes a CUDA stream (cudaStream_t passed as void*) wait for the batch without blocking
  /// the host. Host batches have no stream to order: they wait().
  virtual void enqueue_wait(void* /*stream*/) { wait(); }
};
}  // namespace detail

class Batch {
 public:
  /// An empty batch: already complete.
  Batch() = default;
  explicit Batch(std::unique_ptr<detail::BatchState> state) : state_(std::move(state)) {}
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;
  Batch(Batch&&) noexcept = default;
  /// Waits for the batch being replaced before taking the new one.
  Batch& operator=(Batch&& other);
  /// Waits if still pending, except during stack unwinding (then the requests are abandoned:
  /// the error path is expected to end in abort_all, and waiting could hang).
  ~Batch();

  /// Blocks until complete; afterwards the batch is empty. Idempotent.
  void wait();
  /// Drives progress without blocking; true (and the batch becomes empty) once complete.
  bool ready();
  /// Orders `stream` after the batch without blocking the host (NCCL: cudaStreamWaitEvent;
  /// MPI: a plain wait). With `consume` the handle becomes empty: the stream now owns the
  /// dependency and nothing needs to wait for the batch again.
  void wait_on_stream(void* stream, bool consume = true);
  /// True while operations may still be in flight.
  bool pending() const { return state_ != nullptr; }

 private:
  std::unique_ptr<detail::BatchState> state_;
};

}  // namespace dmuon::comm
