#include "dmuon/engine/exec/host_activation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>

#include "dmuon/base/error.hpp"
#include "kernels/linear.hpp"
#include "kernels/pack.hpp"

namespace dmuon::engine {

namespace {

// Scratch beyond 4 GiB is refused: a host run of that shape would swap.
constexpr double kMaxScratchBytes = 4.0 * (1 << 30);

}  // namespace

HostActivation::HostActivation(const ActivationWork& work, comm::Communicator* ep) : ep_(ep) {
  scratch_.assign(
      static_cast<std::size_t>(activation_scratch_elems(work, sizeof(float), kMaxScratchBytes)),
      0.5f);
}

void HostActivation::run(const std::vector<work::Op>& ops, const std::function<void()>& between) {
  for (const auto& op : ops)
    for (const auto& h : unfused_ops(op, sizeof(float))) run_one(h, between);
}

void HostActivation::run_one(const work::Op& op, const std::function<void()>& between) {
  if (op.kind == work::OpKind::ep_collective) {
    exchange(op);
    return;
  }
  // TP and CP activation collectives are the projection's.
  if (work::is_collective(op.kind))
    throw std::logic_error("HostActivation: a TP or CP collective op is not run by the engine");
  if (op.kind != work::OpKind::memory) {
    gemm(op.gemm, between);
    return;
  }
  // Reads land at the start of the scratch, writes after them when both fit, else over them.
  const auto read = static_cast<std::size_t>(std::ceil(op.bytes_read / sizeof(float)));
  const auto written = static_cast<std::size_t>(std::ceil(op.bytes_written / sizeof(float)));
  float* out = read + written <= scratch_.size() ? scratch_.data() + read : scratch_.data();
  (void)kernels::host::stream(scratch_.data(), read, out, written);
  if (between) between();
}

// The op's all-to-all over the EP group, blocking (an MPI call: it drives the step's other
// collectives too), from the scratch's first half into its second.
void HostActivation::exchange(const work::Op& op) {
  const TokenExchange x = token_exchange(op, ep_ ? ep_->size() : 0);
  const std::size_t floats =
      (x.chunk * comm::dtype_size(x.dtype) * static_cast<std::size_t>(x.group) + 3) / 4;
  const auto start = std::chrono::steady_clock::now();
  ep_->all_to_all(scratch_.data(), scratch_.data() + floats, x.chunk, x.dtype);
  exchange_ms_ +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// `batch` products of m×k by k×n, one BLAS call each on the same scratch operands.
void HostActivation::gemm(const work::GemmShape& g, const std::function<void()>& between) {
  const auto m = static_cast<std::size_t>(g.m), n = static_cast<std::size_t>(g.n),
             k = static_cast<std::size_t>(g.k);
  if (m == 0 || n == 0 || k == 0) return;
  float* a = scratch_.data();
  float* b = a + m * k;
  float* c = b + k * n;
  for (std::int64_t i = 0; i < g.batch; ++i) {
    kernels::host::gemm(false, false, m, n, k, 1.0f, a, b, 0.0f, c);
    if (between) between();
  }
}

}  // namespace dmuon::engine
