#include "dmuon/engine/tp_exchange.hpp"

#include <algorithm>
#include <climits>

#include "dmuon/base/check.hpp"
#include "dmuon/engine/synthetic.hpp"

namespace dmuon::engine {

std::uint64_t tp_shard_key(int pid, int tp_rank) {
  return static_cast<std::uint64_t>(pid) + (static_cast<std::uint64_t>(tp_rank + 1) << 40);
}

TpExchange::TpExchange(const model::ModuleTree& logical, const plan::Plan& plan, MPI_Comm tp_comm)
    : comm_(tp_comm) {
  DMUON_CHECK_MPI(MPI_Comm_size(tp_comm, &tp_));
  DMUON_CHECK_MPI(MPI_Comm_rank(tp_comm, &rank_));
  params_.resize(logical.num_parameters());
  for (int pid : plan.tp.sharded) {
    auto& p = params_[static_cast<std::size_t>(pid)];
    const auto shape = matrix_shape(logical.parameter(pid));
    p.dim = plan.tp.shard_dim[static_cast<std::size_t>(pid)];
    p.owner = plan.tp.tp_owner[static_cast<std::size_t>(pid)];
    p.rows = shape.rows;
    p.cols = shape.cols;
    if (p.rows * p.cols / tp_ > INT_MAX)
      throw InputError("TP-sharded parameter '" + logical.parameter(pid).name +
                       "': its local shard exceeds the 2^31 - 1 elements of one MPI message");
  }
}

std::uint64_t TpExchange::data_key(int pid) const {
  return sharded(pid) ? tp_shard_key(pid, rank_) : static_cast<std::uint64_t>(pid);
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

void TpExchange::orthogonalize(int pid, float* x, HostOptimizer& opt, std::string_view name) {
  const Param& p = param(pid);
  const std::int64_t n = p.rows * p.cols, local = n / tp_;
  const bool root = rank_ == p.owner;
  const auto bytes = static_cast<std::uint64_t>(local) * sizeof(float);
  if (root) {
    full_.resize(static_cast<std::size_t>(n));
    shards_.resize(static_cast<std::size_t>(n));
  }
  DMUON_CHECK_MPI(MPI_Gather(x, static_cast<int>(local), MPI_FLOAT, root ? shards_.data() : nullptr,
                             static_cast<int>(local), MPI_FLOAT, p.owner, comm_));
  ++gather_.calls;
  (root ? gather_.bytes_received : gather_.bytes_sent) +=
      root ? bytes * static_cast<std::uint64_t>(tp_ - 1) : bytes;
  if (root) {
    assemble(shards_.data(), full_.data(), p.rows, p.cols, p.dim, tp_);
    opt.newton_schulz(full_.data(), p.rows, p.cols, name);
    split(full_.data(), shards_.data(), p.rows, p.cols, p.dim, tp_);
  }
  DMUON_CHECK_MPI(MPI_Scatter(root ? shards_.data() : nullptr, static_cast<int>(local), MPI_FLOAT,
                              x, static_cast<int>(local), MPI_FLOAT, p.owner, comm_));
  ++scatter_.calls;
  (root ? scatter_.bytes_sent : scatter_.bytes_received) +=
      root ? bytes * static_cast<std::uint64_t>(tp_ - 1) : bytes;
}

}  // namespace dmuon::engine
