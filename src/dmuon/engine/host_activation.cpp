#include "dmuon/engine/host_activation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "dmuon/base/error.hpp"
#include "dmuon/work/attention_ops.hpp"
#include "kernels/linear.hpp"
#include "kernels/pack.hpp"

namespace dmuon::engine {

namespace {

// Scratch beyond this (floats, 4 GiB) is refused: a host run of that shape would swap.
constexpr double kMaxScratch = static_cast<double>(std::int64_t{1} << 30);

double gemm_floats(const work::GemmShape& g) {
  return g.m * g.k + g.k * g.n + g.m * g.n;
}

double memory_floats(const work::Op& op) {
  return std::ceil(std::max(op.bytes_read, op.bytes_written) / sizeof(float));
}

}  // namespace

std::vector<work::Op> host_ops(const work::Op& op) {
  if (op.kind != work::OpKind::attention) return {op};
  return work::unfused_attention_ops(op.attention, sizeof(float), op.phase);
}

HostActivation::HostActivation(const ActivationWork& work) {
  double need = 0;
  for (const auto& unit : work.units)
    for (const auto* list : {&unit.forward, &unit.recompute, &unit.backward})
      for (const auto& op : *list)
        for (const auto& h : host_ops(op)) {
          const double n = h.kind == work::OpKind::memory ? memory_floats(h) : gemm_floats(h.gemm);
          if (n > kMaxScratch)
            throw InputError(fmt::format(
                "activation op '{}' needs {:.1f} GiB of host scratch (at most {:.0f}): lower "
                "--seq-len or --micro-batch for a host run",
                h.name, n * sizeof(float) / (1 << 30), kMaxScratch * sizeof(float) / (1 << 30)));
          need = std::max(need, n);
        }
  scratch_.assign(static_cast<std::size_t>(need), 0.5f);
}

void HostActivation::run(const std::vector<work::Op>& ops, const std::function<void()>& between) {
  for (const auto& op : ops)
    for (const auto& h : host_ops(op)) run_one(h, between);
}

void HostActivation::run_one(const work::Op& op, const std::function<void()>& between) {
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
