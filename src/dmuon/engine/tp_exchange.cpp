#include "dmuon/engine/tp_exchange.hpp"

#include <algorithm>
#include <climits>
#include <stdexcept>
#include <string>

#include "dmuon/base/check.hpp"
#include "dmuon/base/error.hpp"
#include "kernels/convert.hpp"

namespace dmuon::engine {

std::uint64_t tp_shard_key(int pid, int tp_rank) {
  return static_cast<std::uint64_t>(pid) + (static_cast<std::uint64_t>(tp_rank + 1) << 40);
}

TpExchange::TpExchange(const StepLayout& layout, MPI_Comm tp_comm, comm::DType gather_dtype)
    : comm_(tp_comm), gather_dtype_(gather_dtype) {
  if (gather_dtype != comm::DType::f32 && gather_dtype != comm::DType::bf16)
    throw std::logic_error("TP exchange: the gather carries f32 or bf16");
  DMUON_CHECK_MPI(MPI_Comm_size(tp_comm, &tp_));
  DMUON_CHECK_MPI(MPI_Comm_rank(tp_comm, &rank_));
  if (tp_ != layout.tp || rank_ != layout.tp_rank)
    throw std::logic_error("TP exchange: the communicator is not the layout's TP group");
  for (const auto& p : layout.params)
    if (p.tp_sharded() && p.numel > INT_MAX)
      throw InputError("TP-sharded parameter '" + p.name +
                       "': its local shard exceeds the 2^31 - 1 elements of one MPI message");
}

void TpExchange::assemble(const float* shards, float* full, std::int64_t rows, std::int64_t cols,
                          int dim, int tp) {
  const std::int64_t n = rows * cols;
  if (dim == 0) {
    std::copy(shards, shards + n, full);
    return;
  }
  const std::int64_t lc = cols / tp;
  for (int t = 0; t < tp; ++t)
    for (std::int64_t r = 0; r < rows; ++r)
      std::copy(shards + t * rows * lc + r * lc, shards + t * rows * lc + (r + 1) * lc,
                full + r * cols + t * lc);
}

void TpExchange::split(const float* full, float* shards, std::int64_t rows, std::int64_t cols,
                       int dim, int tp) {
  const std::int64_t n = rows * cols;
  if (dim == 0) {
    std::copy(full, full + n, shards);
    return;
  }
  const std::int64_t lc = cols / tp;
  for (int t = 0; t < tp; ++t)
    for (std::int64_t r = 0; r < rows; ++r)
      std::copy(full + r * cols + t * lc, full + r * cols + (t + 1) * lc,
                shards + t * rows * lc + r * lc);
}

void TpExchange::expect_pending(const ParamLayout& p, const char* what) const {
  if (pending_ != p.pid)
    throw std::logic_error(std::string("TP exchange: ") + what + " of '" + p.name +
                           "' without its gather");
}

void TpExchange::gather(const ParamLayout& p, const float* x) {
  if (!p.tp_sharded() || pending_ >= 0)
    throw std::logic_error("TP exchange: gather of '" + p.name +
                           "' (not TP-sharded, or another exchange is open)");
  const bool root = rank_ == p.tp_owner;
  const std::int64_t n = p.logical.rows * p.logical.cols;
  const auto bytes = static_cast<std::uint64_t>(p.numel) * comm::dtype_size(gather_dtype_);
  if (root) {
    full_.resize(static_cast<std::size_t>(n));
    shards_.resize(static_cast<std::size_t>(n));
  }
  const int count = static_cast<int>(p.numel);
  if (gather_dtype_ == comm::DType::bf16) {
    // bf16 on the wire, as the gradients: every shard rounded, widened back on the owner.
    send16_.resize(static_cast<std::size_t>(p.numel));
    kernels::host::convert(x, kernels::Dtype::f32, send16_.data(), kernels::Dtype::bf16,
                           static_cast<std::size_t>(p.numel));
    if (root) recv16_.resize(static_cast<std::size_t>(n));
    DMUON_CHECK_MPI(MPI_Gather(send16_.data(), count, MPI_UINT16_T, root ? recv16_.data() : nullptr,
                               count, MPI_UINT16_T, p.tp_owner, comm_));
    if (root)
      kernels::host::convert(recv16_.data(), kernels::Dtype::bf16, shards_.data(),
                             kernels::Dtype::f32, static_cast<std::size_t>(n));
  } else {
    DMUON_CHECK_MPI(MPI_Gather(x, count, MPI_FLOAT, root ? shards_.data() : nullptr, count,
                               MPI_FLOAT, p.tp_owner, comm_));
  }
  ++gather_.calls;
  (root ? gather_.bytes_received : gather_.bytes_sent) +=
      root ? bytes * static_cast<std::uint64_t>(tp_ - 1) : bytes;
  if (root) assemble(shards_.data(), full_.data(), p.logical.rows, p.logical.cols, p.tp_dim, tp_);
  pending_ = p.pid;
}

float* TpExchange::gathered(const ParamLayout& p) {
  expect_pending(p, "Newton-Schulz");
  if (rank_ != p.tp_owner)
    throw std::logic_error("TP exchange: Newton-Schulz of '" + p.name + "' off its TP owner");
  return full_.data();
}

void TpExchange::scatter(const ParamLayout& p, float* x) {
  expect_pending(p, "scatter");
  const bool root = rank_ == p.tp_owner;
  const auto bytes = static_cast<std::uint64_t>(p.numel) * sizeof(float);
  if (root) split(full_.data(), shards_.data(), p.logical.rows, p.logical.cols, p.tp_dim, tp_);
  DMUON_CHECK_MPI(MPI_Scatter(root ? shards_.data() : nullptr, static_cast<int>(p.numel), MPI_FLOAT,
                              x, static_cast<int>(p.numel), MPI_FLOAT, p.tp_owner, comm_));
  ++scatter_.calls;
  (root ? scatter_.bytes_sent : scatter_.bytes_received) +=
      root ? bytes * static_cast<std::uint64_t>(tp_ - 1) : bytes;
  pending_ = -1;
}

}  // namespace dmuon::engine
