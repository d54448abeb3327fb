#include "dmuon/comm/communicator.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "dmuon/base/check.hpp"
#include "dmuon/comm/mpi_communicator.hpp"
#include "dmuon/comm/nccl_communicator.hpp"

namespace dmuon::comm {

const char* backend_name(Backend backend) {
  switch (backend) {
    case Backend::mpi: return "mpi";
    case Backend::nccl: return "nccl";
  }
  return "?";
}

namespace {

void require_buffer(const void* p, std::size_t count, const char* op, const char* which) {
  DMUON_REQUIRE(p != nullptr || count == 0,
                fmt::format("{}: {} buffer is null for a count of {}", op, which, count));
}

}  // namespace

template <class F>
void Communicator::issue(F&& issue_op) {
  if (in_group_) {
    issue_op();
    return;
  }
  do_group_start();
  in_group_ = true;
  try {
    issue_op();
  } catch (...) {
    in_group_ = false;
    // Close the implicit batch; nothing was issued by the failing call itself.
    std::unique_ptr<detail::BatchState> abandoned = do_group_end();
    throw;
  }
  in_group_ = false;
  do_group_end()->wait();
}

void Communicator::check_root(int root, const char* op) const {
  DMUON_REQUIRE(root >= 0 && root < size_,
                fmt::format("{}: root {} is outside the group of {} ranks", op, root, size_));
}

void Communicator::check_peer(int peer, const char* op) const {
  DMUON_REQUIRE(peer >= 0 && peer < size_ && peer != rank_,
                fmt::format("{}: peer {} is not another rank of the group of {} (this is {})", op,
                            peer, size_, rank_));
}

void Communicator::broadcast(void* buf, std::size_t count, DType dtype, int root) {
  check_root(root, "broadcast");
  require_buffer(buf, count, "broadcast", "data");
  issue([&] { do_broadcast(buf, count, dtype, root); });
  counters_.record(CollectiveKind::broadcast,
                   collective_payload(CollectiveKind::broadcast, size_, rank_ == root, count,
                                      dtype_size(dtype)));
}

void Communicator::reduce_avg(const void* send, void* recv, std::size_t count, DType dtype,
                              int root) {
  check_root(root, "reduce_avg");
  require_buffer(send, count, "reduce_avg", "send");
  if (rank_ == root) require_buffer(recv, count, "reduce_avg", "receive (on the root)");
  issue([&] { do_reduce(send, recv, count, dtype, root, ReduceOp::avg); });
  counters_.record(
      CollectiveKind::reduce,
      collective_payload(CollectiveKind::reduce, size_, rank_ == root, count, dtype_size(dtype)));
}

void Communicator::reduce_sum(const void* send, void* recv, std::size_t count, DType dtype,
                              int root) {
  check_root(root, "reduce_sum");
  require_buffer(send, count, "reduce_sum", "send");
  if (rank_ == root) require_buffer(recv, count, "reduce_sum", "receive (on the root)");
  issue([&] { do_reduce(send, recv, count, dtype, root, ReduceOp::sum); });
  counters_.record(
      CollectiveKind::reduce,
      collective_payload(CollectiveKind::reduce, size_, rank_ == root, count, dtype_size(dtype)));
}

void Communicator::reduce_scatter_avg(const void* send, void* recv, std::size_t chunk,
                                      DType dtype) {
  require_buffer(send, chunk, "reduce_scatter_avg", "send");
  require_buffer(recv, chunk, "reduce_scatter_avg", "receive");
  issue([&] { do_reduce_scatter(send, recv, chunk, dtype, ReduceOp::avg); });
  counters_.record(
      CollectiveKind::reduce_scatter,
      collective_payload(CollectiveKind::reduce_scatter, size_, false, chunk, dtype_size(dtype)));
}

void Communicator::reduce_scatter_sum(const void* send, void* recv, std::size_t chunk,
                                      DType dtype) {
  require_buffer(send, chunk, "reduce_scatter_sum", "send");
  require_buffer(recv, chunk, "reduce_scatter_sum", "receive");
  issue([&] { do_reduce_scatter(send, recv, chunk, dtype, ReduceOp::sum); });
  counters_.record(
      CollectiveKind::reduce_scatter,
      collective_payload(CollectiveKind::reduce_scatter, size_, false, chunk, dtype_size(dtype)));
}

void Communicator::all_gather(const void* send, void* recv, std::size_t chunk, DType dtype) {
  require_buffer(send, chunk, "all_gather", "send");
  require_buffer(recv, chunk, "all_gather", "receive");
  issue([&] { do_all_gather(send, recv, chunk, dtype); });
  counters_.record(CollectiveKind::all_gather, collective_payload(CollectiveKind::all_gather, size_,
                                                                  false, chunk, dtype_size(dtype)));
}

void Communicator::gather(const void* send, void* recv, std::size_t chunk, DType dtype, int root) {
  check_root(root, "gather");
  require_buffer(send, chunk, "gather", "send");
  if (rank_ == root) require_buffer(recv, chunk, "gather", "receive (on the root)");
  issue([&] { do_gather(send, recv, chunk, dtype, root); });
  counters_.record(
      CollectiveKind::gather,
      collective_payload(CollectiveKind::gather, size_, rank_ == root, chunk, dtype_size(dtype)));
}

void Communicator::scatter(const void* send, void* recv, std::size_t chunk, DType dtype, int root) {
  check_root(root, "scatter");
  if (rank_ == root) require_buffer(send, chunk, "scatter", "send (on the root)");
  require_buffer(recv, chunk, "scatter", "receive");
  issue([&] { do_scatter(send, recv, chunk, dtype, root); });
  counters_.record(
      CollectiveKind::scatter,
      collective_payload(CollectiveKind::scatter, size_, rank_ == root, chunk, dtype_size(dtype)));
}

void Communicator::all_to_all(const void* send, void* recv, std::size_t chunk, DType dtype) {
  require_buffer(send, chunk, "all_to_all", "send");
  require_buffer(recv, chunk, "all_to_all", "receive");
  const std::size_t bytes = chunk * static_cast<std::size_t>(size_) * dtype_size(dtype);
  const auto* s = static_cast<const unsigned char*>(send);
  const auto* r = static_cast<const unsigned char*>(recv);
  DMUON_REQUIRE(bytes == 0 || s >= r + bytes || r >= s + bytes,
                "all_to_all: the send and receive buffers overlap (valid: disjoint buffers)");
  issue([&] { do_all_to_all(send, recv, chunk, dtype); });
  counters_.record(CollectiveKind::all_to_all, collective_payload(CollectiveKind::all_to_all, size_,
                                                                  false, chunk, dtype_size(dtype)));
}

void Communicator::send(const void* buf, std::size_t count, DType dtype, int peer) {
  check_peer(peer, "send");
  require_buffer(buf, count, "send", "data");
  issue([&] { do_send(buf, count, dtype, peer); });
  counters_.record(CollectiveKind::send_recv, collective_payload(CollectiveKind::send_recv, 2, true,
                                                                 count, dtype_size(dtype)));
}

void Communicator::recv(void* buf, std::size_t count, DType dtype, int peer) {
  check_peer(peer, "recv");
  require_buffer(buf, count, "recv", "data");
  issue([&] { do_recv(buf, count, dtype, peer); });
  counters_.record(CollectiveKind::send_recv, collective_payload(CollectiveKind::send_recv, 2,
                                                                 false, count, dtype_size(dtype)));
}

void Communicator::all_reduce_avg(const void* send, void* recv, std::size_t count, DType dtype) {
  require_buffer(send, count, "all_reduce_avg", "send");
  require_buffer(recv, count, "all_reduce_avg", "receive");
  issue([&] { do_all_reduce(send, recv, count, dtype, ReduceOp::avg); });
  counters_.record(CollectiveKind::all_reduce, collective_payload(CollectiveKind::all_reduce, size_,
                                                                  false, count, dtype_size(dtype)));
}

void Communicator::all_reduce_sum(const void* send, void* recv, std::size_t count, DType dtype) {
  require_buffer(send, count, "all_reduce_sum", "send");
  require_buffer(recv, count, "all_reduce_sum", "receive");
  issue([&] { do_all_reduce(send, recv, count, dtype, ReduceOp::sum); });
  counters_.record(CollectiveKind::all_reduce, collective_payload(CollectiveKind::all_reduce, size_,
                                                                  false, count, dtype_size(dtype)));
}

void Communicator::all_reduce_max(const void* send, void* recv, std::size_t count, DType dtype) {
  require_buffer(send, count, "all_reduce_max", "send");
  require_buffer(recv, count, "all_reduce_max", "receive");
  DMUON_REQUIRE(dtype == DType::f32 || dtype == DType::f64,
                fmt::format("all_reduce_max: {} is not supported (f32, f64)", dtype_name(dtype)));
  issue([&] { do_all_reduce(send, recv, count, dtype, ReduceOp::max); });
  counters_.record(CollectiveKind::all_reduce, collective_payload(CollectiveKind::all_reduce, size_,
                                                                  false, count, dtype_size(dtype)));
}

void Communicator::group_start() {
  if (in_group_)
    throw std::logic_error("Communicator::group_start: a group is already open (no nesting)");
  do_group_start();
  in_group_ = true;
}

Batch Communicator::group_end() {
  if (!in_group_)
    throw std::logic_error("Communicator::group_end: no group is open (call group_start first)");
  in_group_ = false;
  return Batch(do_group_end());
}

std::unique_ptr<Communicator> make_communicator(Backend backend, MPI_Comm comm,
                                                const CommunicatorOptions& options) {
  switch (backend) {
    case Backend::mpi: return make_mpi_communicator(comm);
    case Backend::nccl: return make_nccl_communicator(comm, options);
  }
  throw InputError(fmt::format("unknown communicator backend {}", static_cast<int>(backend)));
}

}  // namespace dmuon::comm
