#include "dmuon/work/float8.hpp"

#include <map>
#include <string_view>
#include <utility>

namespace dmuon::work {
namespace {

Op scaling_op(const char* name, Phase phase, double read, double written) {
  Op op = memory_op(name, read, written, 0, 1);
  op.phase = phase;
  return op;
}

// A float8 Linear's GEMM: one of a parameter's (not a grouped expert GEMM), not `excluded`.
bool converted(const Op& op, int excluded) {
  return op.kind == OpKind::gemm && op.param >= 0 && op.member < 0 && op.module != excluded;
}

}  // namespace

OpPair float8_scaling_ops(double tokens, std::int64_t in_features, std::int64_t out_features,
                          double e) {
  const double x = tokens * static_cast<double>(in_features);  // input elements
  const double w = static_cast<double>(out_features) * static_cast<double>(in_features);
  const double dy = tokens * static_cast<double>(out_features);  // grad output elements
  constexpr double f8 = 1;
  OpPair p;
  p.forward = {scaling_op(kFloat8Amax, Phase::forward, x * e, 0),
               scaling_op("float8.cast", Phase::forward, x * e, x * f8),
               scaling_op(kFloat8Amax, Phase::forward, w * e, 0),
               scaling_op("float8.cast", Phase::forward, w * e, w * f8)};
  p.backward = {scaling_op(kFloat8Amax, Phase::backward, dy * e, 0),
                scaling_op("float8.cast", Phase::backward, dy * e, dy * f8),
                scaling_op("float8.transpose", Phase::backward, w * f8, w * f8),
                scaling_op("float8.transpose", Phase::backward, dy * f8, dy * f8),
                scaling_op("float8.transpose", Phase::backward, x * f8, x * f8)};
  return p;
}

namespace {

// The all-reduce of one fp32 amax over the TP group: a tensorwise cast of a TP-sharded tensor
// (a DTensor) scales by the global max (torchao's tensor_to_amax with reduce_amax).
Op amax_all_reduce(Phase phase, int group) {
  Op op = tp_collective_op("float8.amax_all_reduce", comm::CollectiveKind::all_reduce, 1, kF32Bytes,
                           group);
  op.phase = phase;
  return op;
}

// The forward scaling ops of one converted GEMM under --tp (TP-sharded weight: its amax
// all-reduced; `input` false: its input arrives cast, the region's shared cast).
std::vector<Op> tp_forward_scaling(const std::vector<Op>& plain, bool input, int group) {
  std::vector<Op> out;
  for (std::size_t i = input ? 0 : 2; i < plain.size(); ++i) {
    out.push_back(plain[i]);
    if (std::string_view(plain[i].name) == kFloat8Amax)
      out.push_back(amax_all_reduce(Phase::forward, group));
  }
  return out;
}

// The cast of a TP region's input (`elements` of it on this rank) that its column-parallel
// float8 Linears share (torchao's PrepareFloat8ModuleInput): amax, its all-reduce, the cast.
std::vector<Op> region_input_cast(double elements, double e, int group, int module) {
  std::vector<Op> ops = {scaling_op(kFloat8Amax, Phase::forward, elements * e, 0),
                         amax_all_reduce(Phase::forward, group),
                         scaling_op("float8.cast", Phase::forward, elements * e, elements)};
  for (auto& op : ops) op.module = module;
  return ops;
}

// Forward: converts the GEMMs, inserts their scaling ops; under TP the region inputs' shared
// casts (before the sequence all-gather, which then moves fp8) and the amax all-reduces.
std::vector<Op> float8_forward(const std::vector<Op>& forward, int excluded, double e,
                               const TensorParallel& tp,
                               std::map<std::pair<int, int>, OpPair>& scaling) {
  std::vector<Op> fwd;
  std::ptrdiff_t gather = -1;  // the region's sequence all-gather in `fwd`, -1: none
  bool region_cast = false;    // the region's input is cast (its colwise Linears share it)
  for (Op op : forward) {
    if (op.kind == OpKind::tp_collective) {
      const bool entry = std::string_view(op.name) == "tp_all_gather";
      gather = entry ? static_cast<std::ptrdiff_t>(fwd.size()) : -1;
      region_cast = false;
      fwd.push_back(op);
      continue;
    }
    if (!converted(op, excluded)) {
      fwd.push_back(op);
      continue;
    }
    OpPair s = float8_scaling_ops(op.gemm.m, static_cast<std::int64_t>(op.gemm.k),
                                  static_cast<std::int64_t>(op.gemm.n), e);
    for (auto* list : {&s.forward, &s.backward})
      for (auto& sop : *list) sop.module = op.module;
    const int dim = tp.size > 1 ? tp.dim(op.param) : -1;
    if (dim < 0) {
      fwd.insert(fwd.end(), s.forward.begin(), s.forward.end());
    } else if (dim == 1) {  // row-parallel: its local input cast here
      const auto ops = tp_forward_scaling(s.forward, true, tp.size);
      fwd.insert(fwd.end(), ops.begin(), ops.end());
    } else {
      if (!region_cast) {
        // Under SP the shard is cast before its all-gather, which then moves 1 byte a value.
        const double elements =
            gather >= 0 ? fwd[static_cast<std::size_t>(gather)].call.count : op.gemm.m * op.gemm.k;
        const auto cast = region_input_cast(elements, e, tp.size, op.module);
        const auto at = gather >= 0 ? fwd.begin() + gather : fwd.end();
        if (gather >= 0) fwd[static_cast<std::size_t>(gather)].call.elem_bytes = 1;
        fwd.insert(at, cast.begin(), cast.end());
        region_cast = true;
        gather = -1;
      }
      const auto ops = tp_forward_scaling(s.forward, false, tp.size);
      fwd.insert(fwd.end(), ops.begin(), ops.end());
    }
    op.float8 = true;
    scaling[{op.module, op.param}] = std::move(s);
    fwd.push_back(op);
  }
  return fwd;
}

}  // namespace

void apply_float8(std::vector<Op>& forward, std::vector<Op>& backward, int excluded, double e,
                  const TensorParallel& tp) {
  std::map<std::pair<int, int>, OpPair> scaling;  // (module, param) -> its scaling ops
  forward = float8_forward(forward, excluded, e, tp, scaling);
  std::vector<Op> bwd;
  for (Op op : backward) {
    const auto it = converted(op, excluded) ? scaling.find({op.module, op.param}) : scaling.end();
    if (it != scaling.end()) {
      const auto& s = it->second.backward;
      // Before dgrad: the grad output's amax (all-reduced when its Linear is TP-sharded) and
      // cast, the weight's transpose; before wgrad: the grad output's and the input's
      // transposes.
      const bool dgrad = std::string_view(op.name) == "linear.dgrad";
      const bool sharded = tp.size > 1 && tp.dim(op.param) >= 0;
      if (dgrad) {
        bwd.push_back(s[0]);
        if (sharded) bwd.push_back(amax_all_reduce(Phase::backward, tp.size));
        bwd.insert(bwd.end(), s.begin() + 1, s.begin() + 3);
      } else {
        bwd.insert(bwd.end(), s.begin() + 3, s.end());
      }
      op.float8 = true;
    }
    bwd.push_back(op);
  }
  backward = std::move(bwd);
}

}  // namespace dmuon::work
