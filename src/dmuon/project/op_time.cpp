#include "dmuon/project/op_time.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "dmuon/base/error.hpp"
#include "dmuon/project/collective_cost.hpp"
#include "dmuon/work/attention_ops.hpp"

namespace dmuon::project {

using work::Op;
using work::OpKind;

namespace {

// The FlashAttention benchmarks' backward FLOPs (2.5x forward) over ours (2x forward).
constexpr double kBenchmarkBackwardFactor = 1.25;

std::int64_t whole(double x) {
  return static_cast<std::int64_t>(std::llround(x));
}

}  // namespace

OpTime::OpTime(const project::Machine& machine, kernels::Dtype dtype, double share)
    : m_(machine), cost_(machine, share), dtype_(dtype), share_(std::max(1.0, share)) {}

double OpTime::launch_floor(double seconds, int kernels) const {
  return std::max(seconds, share_ * kernels * m_.compute.launch_us * 1e-6);
}

double OpTime::memory(double bytes, double vector_flops, int kernels) const {
  const auto& c = m_.compute;
  const double stream = bytes / (c.memory_bandwidth_gbps * 1e9 * c.memory_bound_efficiency);
  const double arithmetic = vector_flops / c.peak_flops(kernels::Dtype::f32);
  const double overhead = kernels * c.kernel_overhead_us * 1e-6;
  return launch_floor(share_ * (overhead + std::max(stream, arithmetic)), kernels);
}

double OpTime::gemm(const Op& op) const {
  const auto& g = op.gemm;
  if (g.m <= 0 || g.n <= 0 || g.k <= 0 || g.batch < 1) return 0;
  const double b = static_cast<double>(g.batch);
  // A float8 Linear (never batched: work/float8.hpp): fp8 operands at the fp8 peak.
  if (op.float8) return launch_floor(cost_.gemm_fp8(whole(g.m), whole(g.n), whole(g.k)), 1);
  // A batch (grouped experts, batched attention products) is one kernel whose tiles fill the
  // waves together: the GEMM of the stacked rows, but reading every member's second operand.
  const double stacked = cost_.gemm(whole(std::ceil(g.m * b)), whole(g.n), whole(g.k), dtype_);
  if (g.batch == 1) return launch_floor(stacked, 1);
  const auto& c = m_.compute;
  const double bytes =
      b * (g.m * g.k + g.k * g.n + g.m * g.n) * static_cast<double>(kernels::dtype_bytes(dtype_));
  const double memory = share_ * (c.kernel_overhead_us * 1e-6 +
                                  bytes / (c.memory_bandwidth_gbps * 1e9 * c.memory_efficiency));
  return launch_floor(std::max(stacked, memory), 1);
}

double OpTime::attention(const Op& op) const {
  const auto& c = m_.compute;
  if (m_.device == project::DeviceKind::cpu) {
    double s = 0;
    for (const auto& part : work::unfused_attention_ops(
             op.attention, static_cast<double>(kernels::dtype_bytes(dtype_)), op.phase))
      s += seconds(part);
    return s;
  }
  const bool forward = op.phase != work::Phase::backward;
  const double eff = forward ? c.attention_forward_efficiency : c.attention_backward_efficiency;
  if (!(eff > 0))
    throw InputError(fmt::format(
        "machine '{}' has no compute.attention_efficiency (needed to cost the step's attention "
        "on a GPU; docs/STEP-WORK.md)",
        m_.name));
  const double flops = op.flops * (forward ? 1.0 : kBenchmarkBackwardFactor);
  const double compute = flops / (c.peak_flops(dtype_) * eff);
  const double stream = op.bytes() / (c.memory_bandwidth_gbps * 1e9 * c.memory_bound_efficiency);
  return launch_floor(
      share_ * (c.kernel_overhead_us * 1e-6 * op.kernels + std::max(compute, stream)), op.kernels);
}

double OpTime::seconds(const Op& op) const {
  switch (op.kind) {
    case OpKind::gemm:
    case OpKind::batched_gemm: return gemm(op);
    case OpKind::attention: return attention(op);
    case OpKind::memory: return memory(op.bytes(), op.vector_flops, op.kernels);
    case OpKind::tp_collective:
    case OpKind::cp_collective:
    case OpKind::ep_collective: return collective(op);
  }
  return 0;
}

double OpTime::collective(const Op& op) const {
  const auto& c = op.call;
  // A TP or CP group spans consecutive ranks (world_programs.hpp); groups follow each other,
  // and the slowest sets the step: the most domains one of them crosses (a group size that
  // does not divide the domain straddles two).
  const int span = c.span > 0 ? c.span : c.group;
  int domains = 1;
  for (int k = 0; k < std::max(1, m_.nvlink_domain); ++k)
    domains = std::max(domains, m_.domain_of(k * span + span - 1) - m_.domain_of(k * span) + 1);
  const CommSpan ranks{c.group, domains};
  const double transfer =
      collective_time(m_, c.kind, whole(c.count), static_cast<std::size_t>(c.elem_bytes), ranks)
          .total_s();
  // A CPU rank progresses its MPI calls on the cores that compute: nothing hides.
  if (!(c.behind_attention_flops > 0) || m_.device == DeviceKind::cpu) return transfer;
  // On NCCL's stream behind an attention sub-call of the same phase: only the excess shows.
  Op behind;
  behind.kind = OpKind::attention;
  behind.phase = op.phase;
  behind.flops = c.behind_attention_flops;
  behind.kernels = 1;
  return std::max(0.0, transfer - attention(behind));
}

double OpTime::seconds(const std::vector<Op>& ops) const {
  double s = 0;
  for (const auto& op : ops) s += seconds(op);
  return s;
}

}  // namespace dmuon::project
