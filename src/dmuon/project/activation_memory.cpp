#include "dmuon/project/activation_memory.hpp"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <vector>

namespace dmuon::project {
namespace {

using work::AcPolicy;
using work::Op;

double saved(const std::vector<Op>& ops) {
  double s = 0;
  for (const auto& op : ops) s += op.saved_bytes;
  return s;
}

double written(const std::vector<Op>& ops) {
  double s = 0;
  for (const auto& op : ops) s += op.bytes_written;
  return s;
}

// What per-op SAC caches of these ops when it saves them (Op::cached_bytes).
double cached(const std::vector<Op>& ops) {
  double s = 0;
  for (const auto& op : ops) s += op.cached_bytes >= 0 ? op.cached_bytes : op.bytes_written;
  return s;
}

// The largest output of one backward op: gradients are made and consumed op by op, so one
// op's output bounds what the backward adds beside the saved set at a time (an eager op's
// written bytes sum its kernels' outputs: an upper bound, unless the op states the most of
// them live at once, Op::live_bytes).
// Parameter gradients (a weight's, a bias's, the embedding table's) are not activations: the
// gradient buffers count them.
double largest_gradient(const std::vector<Op>& backward) {
  double m = 0;
  for (const auto& op : backward) {
    const std::string_view name = op.name;
    if (name == "linear.wgrad" || name == "linear.bias_grad" || name == "embedding.bwd") continue;
    m = std::max(m, op.live_bytes > 0 ? op.live_bytes : op.bytes_written);
  }
  return m;
}

// The fp32 log-sum-exp of the attention ops among `ops` (what core-attn recomputes, its
// output being kept as the output projection's input).
double log_sum_exp(const std::vector<Op>& ops) {
  double s = 0;
  for (const auto& op : ops)
    if (op.kind == work::OpKind::attention)
      s += work::kF32Bytes * op.attention.local_tokens() * static_cast<double>(op.attention.heads);
  return s;
}

struct UnitMemory {
  double saved = 0;  // kept from forward to backward
  double live = 0;   // held beyond that while the unit's backward runs
};

UnitMemory unit_memory(const work::WorkUnit& unit, AcPolicy ac) {
  const double all = saved(unit.forward), grad = largest_gradient(unit.backward);
  if (unit.recompute.empty() || unit.forward.empty()) return {all, grad};
  // A checkpointed block keeps its input; in a residual stack its output's shape.
  const double checkpoint = unit.forward.back().bytes_written;
  switch (ac) {
    case AcPolicy::core_attn: {
      const double lse = log_sum_exp(unit.recompute);
      return {all - lse, written(unit.recompute) + grad};
    }
    case AcPolicy::selective: {
      // SAC caches the outputs of the ops its policy saves; everything else is recreated,
      // with its own saved tensors, before the block's backward.
      const double kept = cached(unit.forward) - cached(unit.recompute);
      return {checkpoint + kept, std::max(0.0, all - kept) + grad};
    }
    default: return {checkpoint, all + grad};  // full, selective-layer: the whole block again
  }
}

}  // namespace

ActivationMemory activation_memory(const work::StepWork& work) {
  ActivationMemory a;
  a.modelled = true;
  double kept = 0, rest = 0;
  UnitMemory first;
  for (std::size_t i = 0; i < work.units.size(); ++i) {
    const UnitMemory u = unit_memory(work.units[i], work.shape.ac);
    kept += u.saved;
    if (i + 1 == work.units.size())
      first = u;  // the last unit forward is the first backward
    else
      rest = std::max(rest, u.live);
  }
  const auto whole = [](double b) { return static_cast<std::int64_t>(std::llround(b)); };
  a.saved = whole(kept);
  a.first_saved = whole(first.saved);
  a.first_live = whole(first.live);
  a.rest_live = whole(rest);
  a.recompute = std::max(a.first_live, a.rest_live);
  return a;
}

std::int64_t ActivationMemory::backward_extra(std::int64_t grad_buffers) const {
  return std::max<std::int64_t>({0, first_live - grad_buffers, rest_live - first_saved});
}

}  // namespace dmuon::project
