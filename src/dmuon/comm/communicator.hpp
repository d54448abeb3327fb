#pragma once
// One collective interface for both backends (MPI on host buffers, NCCL on device buffers), so
// the engine issues the same calls whatever moves the bytes. Every operation acts on the
// communicator's own group of ranks and is counted in counters() under the logical payload
// convention of collective_counters.hpp.
//
// Blocking and batched use:
//   comm.broadcast(buf, n, DType::f32, 0);      // outside a group: returns when complete
//
//   comm.group_start();                          // SPEC §1: all owners of a site together
//   for (owner : owners) comm.broadcast(packed[owner], sizes[owner], DType::f32, owner);
//   Batch b = comm.group_end();                  // all in flight
//   ... compute ...
//   b.wait();                                    // results now in the buffers
//
// Every rank of the group must issue the same operations in the same order (MPI rule for
// nonblocking collectives; NCCL likewise). A Batch must not outlive its Communicator.
//
// In-place forms: reduce (send == recv on the root), all_reduce (send == recv), all_gather
// (send == recv + rank·chunk), reduce_scatter (recv == send + rank·chunk), gather on the root
// (send == recv + root·chunk), scatter on the root (recv == send + root·chunk). Other overlaps
// of send and receive buffers are not allowed.

#include <mpi.h>

#include <cstddef>
#include <memory>

#include "dmuon/comm/batch.hpp"
#include "dmuon/comm/collective_counters.hpp"
#include "dmuon/comm/dtype.hpp"

namespace dmuon::comm {

enum class Backend { mpi, nccl };

/// "mpi" or "nccl".
const char* backend_name(Backend backend);

struct CommunicatorOptions {
  /// NCCL only: CUDA device for this rank; -1 picks (node-local rank) mod (visible devices).
  int cuda_device = -1;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  Backend backend() const { return backend_; }
  /// This rank's index in the group, and the group size.
  int rank() const { return rank_; }
  int size() const { return size_; }

  /// Copies `count` elements from `root`'s buf to every rank's buf.
  void broadcast(void* buf, std::size_t count, DType dtype, int root);
  /// Mean over the group of every rank's `send`, into `recv` on `root` (recv unused elsewhere,
  /// may be null there).
  void reduce_avg(const void* send, void* recv, std::size_t count, DType dtype, int root);
  /// Sum variant of reduce_avg.
  void reduce_sum(const void* send, void* recv, std::size_t count, DType dtype, int root);
  /// `send` holds size()·chunk elements; rank i receives chunk i of the mean (or sum).
  void reduce_scatter_avg(const void* send, void* recv, std::size_t chunk, DType dtype);
  void reduce_scatter_sum(const void* send, void* recv, std::size_t chunk, DType dtype);
  /// Each rank contributes `chunk` elements; recv gets size()·chunk, rank i's at offset i·chunk.
  void all_gather(const void* send, void* recv, std::size_t chunk, DType dtype);
  /// Each rank's `chunk` elements of `send` into the root's `recv` at rank·chunk (recv holds
  /// size()·chunk on the root; unused elsewhere, may be null there).
  void gather(const void* send, void* recv, std::size_t chunk, DType dtype, int root);
  /// The root's `send` holds size()·chunk elements; rank i receives chunk i into `recv` (send
  /// unused off the root, may be null there).
  void scatter(const void* send, void* recv, std::size_t chunk, DType dtype, int root);
  /// `send` holds size()·chunk elements, chunk i for rank i; `recv` gets size()·chunk, rank
  /// i's chunk for this rank at offset i·chunk. Not in place (send and recv must not overlap).
  void all_to_all(const void* send, void* recv, std::size_t chunk, DType dtype);
  /// Point to point: `count` elements of `buf` to group rank `peer`, and their receipt there
  /// (each side calls its half; messages between two ranks arrive in the order sent).
  void send(const void* buf, std::size_t count, DType dtype, int peer);
  void recv(void* buf, std::size_t count, DType dtype, int peer);
  /// Mean (or sum) over the group of every rank's `send`, into every rank's `recv`.
  void all_reduce_avg(const void* send, void* recv, std::size_t count, DType dtype);
  void all_reduce_sum(const void* send, void* recv, std::size_t count, DType dtype);
  /// Element-wise maximum over the group (f32 and f64 only).
  void all_reduce_max(const void* send, void* recv, std::size_t count, DType dtype);

  /// Starts a batch: operations until group_end() are issued nonblocking. No nesting.
  void group_start();
  /// Ends the batch; the returned handle completes it (see Batch).
  Batch group_end();
  bool in_group() const { return in_group_; }

  /// This rank's tally of everything issued on this communicator.
  const CollectiveCounters& counters() const { return counters_; }
  void reset_counters() { counters_.reset(); }

  /// NCCL: the cudaStream_t the collectives run on (so compute can be ordered against it);
  /// MPI: nullptr.
  virtual void* stream_handle() const { return nullptr; }
  /// NCCL: run the following batches on `stream` (a cudaStream_t of the communicator's
  /// device; null = the communicator's own). Operations on one communicator still execute in
  /// issue order. MPI: ignored.
  virtual void set_stream(void* /*stream*/) {}
  /// NCCL: if the communicator reported an asynchronous error (a peer died, a network
  /// failure), aborts it and ends the job naming this rank and the error. MPI: nothing to poll.
  virtual void check_async_error() {}
  /// The error path's first step (a rank failed mid-step, its peers may wait on it forever):
  /// NCCL: ncclCommAbort now, abandoning what is in flight; the communicator is unusable
  /// afterwards and its destructor neither synchronises nor destroys it. MPI: nothing (the job
  /// then ends through abort_all). Idempotent; never throws.
  virtual void abort() noexcept {}

 protected:
  enum class ReduceOp { sum, avg, max };

  Communicator(Backend backend, int rank, int size) : backend_(backend), rank_(rank), size_(size) {}

  // Backends issue each operation into the open batch (always open when these are called).
  virtual void do_broadcast(void* buf, std::size_t count, DType dtype, int root) = 0;
  virtual void do_reduce(const void* send, void* recv, std::size_t count, DType dtype, int root,
                         ReduceOp op) = 0;
  virtual void do_reduce_scatter(const void* send, void* recv, std::size_t chunk, DType dtype,
                                 ReduceOp op) = 0;
  virtual void do_all_gather(const void* send, void* recv, std::size_t chunk, DType dtype) = 0;
  virtual void do_gather(const void* send, void* recv, std::size_t chunk, DType dtype,
                         int root) = 0;
  virtual void do_scatter(const void* send, void* recv, std::size_t chunk, DType dtype,
                          int root) = 0;
  virtual void do_all_reduce(const void* send, void* recv, std::size_t count, DType dtype,
                             ReduceOp op) = 0;
  virtual void do_all_to_all(const void* send, void* recv, std::size_t chunk, DType dtype) = 0;
  virtual void do_send(const void* buf, std::size_t count, DType dtype, int peer) = 0;
  virtual void do_recv(void* buf, std::size_t count, DType dtype, int peer) = 0;
  virtual void do_group_start() = 0;
  virtual std::unique_ptr<detail::BatchState> do_group_end() = 0;

 private:
  // Runs `issue_op` inside the open batch, or inside an implicit one-operation batch that is
  // waited at once when called outside group_start/group_end.
  template <class F>
  void issue(F&& issue_op);
  void check_root(int root, const char* op) const;
  void check_peer(int peer, const char* op) const;

  Backend backend_;
  int rank_;
  int size_;
  bool in_group_ = false;
  CollectiveCounters counters_;
};

/// Creates a communicator over the ranks of `comm` (collective over `comm`). The MPI backend
/// duplicates `comm`; NCCL bootstraps its own communicator over it. Throws RuntimeFailure when
/// the backend is not compiled in or cannot start (e.g. no CUDA device visible), on all ranks.
std::unique_ptr<Communicator> make_communicator(Backend backend, MPI_Comm comm,
                                                const CommunicatorOptions& options = {});

}  // namespace dmuon::comm
