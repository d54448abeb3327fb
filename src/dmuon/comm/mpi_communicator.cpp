#include "dmuon/comm/mpi_communicator.hpp"

#include <fmt/format.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <vector>

#include "dmuon/base/check.hpp"
#include "kernels/convert.hpp"

namespace dmuon::comm {

namespace {

int rank_of(MPI_Comm comm) {
  int r = 0;
  DMUON_CHECK_MPI(MPI_Comm_rank(comm, &r));
  return r;
}

int size_of(MPI_Comm comm) {
  int n = 0;
  DMUON_CHECK_MPI(MPI_Comm_size(comm, &n));
  return n;
}

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::bf16:
    case DType::f16: return MPI_UINT16_T;  // moved as opaque 2-byte words, never reduced
  }
  return MPI_DATATYPE_NULL;
}

void require_reducible(DType t, const char* op) {
  DMUON_REQUIRE(t == DType::f32 || t == DType::f64 || t == DType::bf16,
                fmt::format("{}: the MPI backend cannot reduce {} (it reduces f32, f64 and "
                            "bf16); reduce one of those or use the NCCL backend",
                            op, dtype_name(t)));
}

// MPI_User_function: inout[i] = bf16(float(in[i]) + float(inout[i])), round to nearest even.
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = kernels::host::float_to_bf16(kernels::host::bf16_to_float(a[i]) +
                                        kernels::host::bf16_to_float(b[i]));
}

int mpi_count(std::size_t count, const char* op) {
  DMUON_REQUIRE(count <= static_cast<std::size_t>(INT_MAX),
                fmt::format("{}: count {} exceeds the MPI limit of {} elements per call; split "
                            "the buffer",
                            op, count, INT_MAX));
  return static_cast<int>(count);
}

const void* send_or_in_place(const void* send, const void* recv) {
  return send == recv ? MPI_IN_PLACE : send;
}

}  // namespace

// Requests of one batch plus the fix-ups that must run once they complete.
class MpiCommunicator::MpiBatch final : public detail::BatchState {
 public:
  struct Fixup {
    void* dst = nullptr;        // where the result must end up
    const void* src = nullptr;  // where MPI left it (== dst unless moved)
    std::size_t count = 0;
    DType dtype = DType::f32;
    int divisor = 1;  // > 1: AVG
  };

  std::vector<MPI_Request> requests;
  std::vector<Fixup> fixups;

  void wait() override {
    if (!requests.empty())
      DMUON_CHECK_MPI(
          MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE));
    requests.clear();
    finish();
  }

  bool test() override {
    if (!requests.empty()) {
      int done = 0;
      DMUON_CHECK_MPI(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done,
                                  MPI_STATUSES_IGNORE));
      if (!done) return false;
      requests.clear();
    }
    finish();
    return true;
  }

 private:
  void finish() {
    for (const Fixup& f : fixups) {
      const std::size_t bytes = f.count * dtype_size(f.dtype);
      if (f.src != f.dst) std::memmove(f.dst, f.src, bytes);
      if (f.divisor > 1) divide(f);
    }
    fixups.clear();
  }

  static void divide(const Fixup& f) {
    if (f.dtype == DType::bf16) {
      auto* p = static_cast<std::uint16_t*>(f.dst);
      const float d = static_cast<float>(f.divisor);
      for (std::size_t i = 0; i < f.count; ++i)
        p[i] = kernels::host::float_to_bf16(kernels::host::bf16_to_float(p[i]) / d);
    } else if (f.dtype == DType::f32) {
      auto* p = static_cast<float*>(f.dst);
      const float d = static_cast<float>(f.divisor);
      for (std::size_t i = 0; i < f.count; ++i) p[i] /= d;
    } else {
      auto* p = static_cast<double*>(f.dst);
      const double d = static_cast<double>(f.divisor);
      for (std::size_t i = 0; i < f.count; ++i) p[i] /= d;
    }
  }
};

MpiCommunicator::MpiCommunicator(MPI_Comm comm)
    : Communicator(Backend::mpi, rank_of(comm), size_of(comm)), comm_(dup_comm(comm)) {
  DMUON_CHECK_MPI(MPI_Op_create(&bf16_sum, 1, &bf16_sum_));
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && bf16_sum_ != MPI_OP_NULL) MPI_Op_free(&bf16_sum_);
}

MPI_Op MpiCommunicator::op_for(DType dtype) const {
  return dtype == DType::bf16 ? bf16_sum_ : MPI_SUM;
}

void MpiCommunicator::do_group_start() {
  open_ = std::make_unique<MpiBatch>();
}

std::unique_ptr<detail::BatchState> MpiCommunicator::do_group_end() {
  return std::move(open_);
}

void MpiCommunicator::do_broadcast(void* buf, std::size_t count, DType dtype, int root) {
  const int n = mpi_count(count, "broadcast");
  MPI_Request req = MPI_REQUEST_NULL;
  DMUON_CHECK_MPI(MPI_Ibcast(buf, n, mpi_type(dtype), root, comm_.get(), &req));
  open_->requests.push_back(req);
}

void MpiCommunicator::do_reduce(const void* send, void* recv, std::size_t count, DType dtype,
                                int root, ReduceOp op) {
  require_reducible(dtype, "reduce");
  const int n = mpi_count(count, "reduce");
  const bool is_root = rank() == root;
  // MPI forbids aliased buffers; on the root send == recv means in place.
  const void* sbuf = is_root ? send_or_in_place(send, recv) : send;
  MPI_Request req = MPI_REQUEST_NULL;
  DMUON_CHECK_MPI(MPI_Ireduce(sbuf, is_root ? recv : nullptr, n, mpi_type(dtype), op_for(dtype),
                              root, comm_.get(), &req));
  open_->requests.push_back(req);
  if (is_root && op == ReduceOp::avg && size() > 1)
    open_->fixups.push_back({recv, recv, count, dtype, size()});
}

void MpiCommunicator::do_reduce_scatter(const void* send, void* recv, std::size_t chunk,
                                        DType dtype, ReduceOp op) {
  require_reducible(dtype, "reduce_scatter");
  const int n = mpi_count(chunk, "reduce_scatter");
  const std::size_t chunk_bytes = chunk * dtype_size(dtype);
  const auto* send_bytes = static_cast<const unsigned char*>(send);
  MPI_Request req = MPI_REQUEST_NULL;
  if (recv == send_bytes + static_cast<std::size_t>(rank()) * chunk_bytes && chunk > 0) {
    // NCCL-style in place (own chunk inside the input): MPI's in-place form leaves the result
    // at the start of the buffer, so move it to this rank's slot after completion.
    void* whole = const_cast<void*>(send);
    DMUON_CHECK_MPI(MPI_Ireduce_scatter_block(MPI_IN_PLACE, whole, n, mpi_type(dtype),
                                              op_for(dtype), comm_.get(), &req));
    open_->requests.push_back(req);
    open_->fixups.push_back({recv, whole, chunk, dtype, op == ReduceOp::avg ? size() : 1});
    return;
  }
  DMUON_CHECK_MPI(
      MPI_Ireduce_scatter_block(send, recv, n, mpi_type(dtype), op_for(dtype), comm_.get(), &req));
  open_->requests.push_back(req);
  if (op == ReduceOp::avg && size() > 1)
    open_->fixups.push_back({recv, recv, chunk, dtype, size()});
}

void MpiCommunicator::do_all_gather(const void* send, void* recv, std::size_t chunk, DType dtype) {
  const int n = mpi_count(chunk, "all_gather");
  (void)mpi_count(chunk * static_cast<std::size_t>(size()), "all_gather (total)");
  const auto* own_slot = static_cast<const unsigned char*>(recv) +
                         static_cast<std::size_t>(rank()) * chunk * dtype_size(dtype);
  const void* sbuf = send == own_slot ? MPI_IN_PLACE : send;
  MPI_Request req = MPI_REQUEST_NULL;
  DMUON_CHECK_MPI(
      MPI_Iallgather(sbuf, n, mpi_type(dtype), recv, n, mpi_type(dtype), comm_.get(), &req));
  open_->requests.push_back(req);
}

void MpiCommunicator::do_all_to_all(const void* send, void* recv, std::size_t chunk, DType dtype) {
  const int n = mpi_count(chunk, "all_to_all");
  (void)mpi_count(chunk * static_cast<std::size_t>(size()), "all_to_all (total)");
  MPI_Request req = MPI_REQUEST_NULL;
  DMUON_CHECK_MPI(
      MPI_Ialltoall(send, n, mpi_type(dtype), recv, n, mpi_type(dtype), comm_.get(), &req));
  open_->requests.push_back(req);
}

// Point to point on one tag: MPI keeps the messages between two ranks in the order sent.
void MpiCommunicator::do_send(const void* buf, std::size_t count, DType dtype, int peer) {
  const int n = mpi_count(count, "send");
  MPI_Request req = MPI_REQUEST_NULL;
  DMUON_CHECK_MPI(MPI_Isend(buf, n, mpi_type(dtype), peer, 0, comm_.get(), &req));
  open_->requests.push_back(req);
}

void MpiCommunicator::do_recv(void* buf, std::size_t count, DType dtype, int peer) {
  const int n = mpi_count(count, "recv");
  MPI_Request req = MPI_REQUEST_NULL;
  DMUON_CHECK_MPI(MPI_Irecv(buf, n, mpi_type(dtype), peer, 0, comm_.get(), &req));
  open_->requests.push_back(req);
}

void MpiCommunicator::do_gather(const void* send, void* recv, std::size_t chunk, DType dtype,
                                int root) {
  const int n = mpi_count(chunk, "gather");
  (void)mpi_count(chunk * static_cast<std::size_t>(size()), "gather (total)");
  const bool is_root = rank() == root;
  const auto* own_slot = static_cast<const unsigned char*>(recv) +
                         static_cast<std::size_t>(rank()) * chunk * dtype_size(dtype);
  const void* sbuf = is_root && send == own_slot ? MPI_IN_PLACE : send;
  MPI_Request req = MPI_REQUEST_NULL;
  DMUON_CHECK_MPI(MPI_Igather(sbuf, n, mpi_type(dtype), is_root ? recv : nullptr, n,
                              mpi_type(dtype), root, comm_.get(), &req));
  open_->requests.push_back(req);
}

void MpiCommunicator::do_scatter(const void* send, void* recv, std::size_t chunk, DType dtype,
                                 int root) {
  const int n = mpi_count(chunk, "scatter");
  (void)mpi_count(chunk * static_cast<std::size_t>(size()), "scatter (total)");
  const bool is_root = rank() == root;
  const auto* own_slot = static_cast<const unsigned char*>(send) +
                         static_cast<std::size_t>(rank()) * chunk * dtype_size(dtype);
  void* rbuf = is_root && recv == own_slot ? MPI_IN_PLACE : recv;
  MPI_Request req = MPI_REQUEST_NULL;
  DMUON_CHECK_MPI(MPI_Iscatter(is_root ? send : nullptr, n, mpi_type(dtype), rbuf, n,
                               mpi_type(dtype), root, comm_.get(), &req));
  open_->requests.push_back(req);
}

void MpiCommunicator::do_all_reduce(const void* send, void* recv, std::size_t count, DType dtype,
                                    ReduceOp op) {
  require_reducible(dtype, "all_reduce");
  const int n = mpi_count(count, "all_reduce");
  MPI_Request req = MPI_REQUEST_NULL;
  DMUON_CHECK_MPI(MPI_Iallreduce(send_or_in_place(send, recv), recv, n, mpi_type(dtype),
                                 op == ReduceOp::max ? MPI_MAX : op_for(dtype), comm_.get(), &req));
  open_->requests.push_back(req);
  if (op == ReduceOp::avg && size() > 1)
    open_->fixups.push_back({recv, recv, count, dtype, size()});
}

std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm comm) {
  return std::make_unique<MpiCommunicator>(comm);
}

}  // namespace dmuon::comm
