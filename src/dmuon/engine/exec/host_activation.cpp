#include "dmuon/engine/exec/host_activation.hpp"

#include <fmt/format.h>

#include <algorithm>
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

HostActivation::HostActivation(const ActivationWork& work) {
  scratch_.assign(
      static_cast<std::size_t>(activation_scratch_elems(work, sizeof(float), kMaxScratchBytes)),
      0.5f);
}

void HostActivation::run(const std::vector<work::Op>& ops, const std::function<void()>& between) {
  for (const auto& op : ops)
    for (const auto& h : unfused_ops(op, sizeof(float))) run_one(h, between);
}

void HostActivation::run_one(const work::Op& op, const std::function<void()>& between) {
  // The engine has no activation collectives: TP and CP work is the projection's.
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
