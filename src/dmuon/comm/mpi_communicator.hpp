#pragma once
// Communicator over MPI nonblocking collectives (MPI_Ibcast, MPI_Ireduce, ...) on HOST buffers.
// A batch is a request list completed by MPI_Waitall; AVG is MPI_SUM followed by a division
// on the ranks that receive the result, after completion. Reductions support f32, f64 and bf16
// (MPI has no 2-byte float type: bf16 moves as 16-bit words and sums with a user-defined
// operation that adds in fp32 and rounds to nearest even, as NCCL's bf16 reductions round
// each partial sum); f16 may be broadcast/gathered, and a reduction on it throws InputError.
// Counts above INT_MAX elements throw InputError.

#include <mpi.h>

#include <memory>

#include "dmuon/comm/communicator.hpp"
#include "dmuon/comm/unique_comm.hpp"

namespace dmuon::comm {

class MpiCommunicator final : public Communicator {
 public:
  /// Collective over `comm`; works on a private duplicate of it.
  explicit MpiCommunicator(MPI_Comm comm);
  ~MpiCommunicator() override;

  /// The duplicated communicator the collectives run on.
  MPI_Comm mpi_comm() const { return comm_.get(); }

 protected:
  void do_broadcast(void* buf, std::size_t count, DType dtype, int root) override;
  void do_reduce(const void* send, void* recv, std::size_t count, DType dtype, int root,
                 ReduceOp op) override;
  void do_reduce_scatter(const void* send, void* recv, std::size_t chunk, DType dtype,
                         ReduceOp op) override;
  void do_all_gather(const void* send, void* recv, std::size_t chunk, DType dtype) override;
  void do_gather(const void* send, void* recv, std::size_t chunk, DType dtype, int root) override;
  void do_scatter(const void* send, void* recv, std::size_t chunk, DType dtype, int root) override;
  void do_all_reduce(const void* send, void* recv, std::size_t count, DType dtype,
                     ReduceOp op) override;
  void do_all_to_all(const void* send, void* recv, std::size_t chunk, DType dtype) override;
  void do_send(const void* buf, std::size_t count, DType dtype, int peer) override;
  void do_recv(void* buf, std::size_t count, DType dtype, int peer) override;
  void do_group_start() override;
  std::unique_ptr<detail::BatchState> do_group_end() override;

 private:
  class MpiBatch;

  MPI_Op op_for(DType dtype) const;

  UniqueComm comm_;
  MPI_Op bf16_sum_ = MPI_OP_NULL;
  std::unique_ptr<MpiBatch> open_;
};

std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm comm);

}  // namespace dmuon::comm
